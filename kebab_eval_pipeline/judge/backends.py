"""Build a judge backend from its settings (imports the heavy one only when it is used)."""

from __future__ import annotations

from kebab_eval_pipeline.judge.completion import JudgeBackend
from kebab_eval_pipeline.judge.config import JudgeModelSettings


def backend_key(settings: JudgeModelSettings) -> tuple:
    """What identifies one backend instance (the prompt version and decoding are per call)."""
    return (settings.backend, settings.model, settings.base_url, settings.api_key_env, settings.model_digest)


def build_backend(settings: JudgeModelSettings) -> JudgeBackend:
    """A local transformers judge or an OpenAI-compatible endpoint client. Raises InputError
    (naming the judge key) for a missing model file or an unset API key variable."""
    if settings.backend == "local":
        from kebab_eval_pipeline.judge.local import LocalJudge

        return LocalJudge(settings.model)
    from kebab_eval_pipeline.judge.openai_client import OpenAICompatibleJudge

    return OpenAICompatibleJudge(settings)
