"""The ``gates:`` block of the run config: absolute gates on run metrics (and their slices),
regression gates against the baseline, verdict gates on per-query verdicts, and the default
answer gates. Pure pydantic (no pandas): the run config loads without the metric kernels."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, model_validator

from kebab_eval_pipeline.foundation.config_model import MAX_COUNT, StrictSettings


class GateSettings(StrictSettings):
    """An absolute threshold on one metric (SPEC §7), keyed by the metric's name — or by
    ``metric[dimension=value]`` for one breakdown slice, e.g. ``mrr[lang=ko]``, ``hit@5[tag=critical]``.
    ``skip_if_null``: pass (as skipped) instead of failing when the value is null."""

    min: float | None = None
    max: float | None = None
    blocking: bool = True
    skip_if_null: bool = False

    @model_validator(mode="after")
    def _has_bound(self) -> GateSettings:
        if self.min is None and self.max is None:
            raise ValueError("a gate needs 'min' or 'max'")
        return self


class RegressionGateSettings(StrictSettings):
    """A tolerance against the baseline run (SPEC §7): the metric may not get worse by more than
    ``max_drop``, and/or may not get worse with a paired-test p-value below ``max_p`` ("worse" is
    lower, or higher for rates of bad events and latencies: the metric catalogue's direction). The
    p-value ``max_p`` reads is Holm-adjusted over the gated metrics unless ``compare.significance``
    is ``raw``.

    Margins, decided by the one-sided confidence bound of the paired delta (level
    ``compare.alpha``): ``non_inferior: δ`` passes only when b is shown to be no worse than a by
    more than δ (the bound of the worsening stays inside δ); ``equivalent: δ`` only when the
    two one-sided tests put the delta inside ±δ. With none of the four set, any worsening fails
    (``max_drop: 0``)."""

    max_drop: Annotated[float, Field(ge=0.0)] | None = None
    max_p: Annotated[float, Field(gt=0.0, lt=1.0)] | None = None
    non_inferior: Annotated[float, Field(ge=0.0)] | None = None
    equivalent: Annotated[float, Field(gt=0.0)] | None = None
    blocking: bool = True
    skip_if_null: bool = False  # pass (as skipped) when either run's value or the p-value is null

    @model_validator(mode="before")
    @classmethod
    def _default_drop(cls, data: Any) -> Any:
        bounds = ("max_drop", "max_p", "non_inferior", "equivalent")
        if isinstance(data, dict) and all(data.get(k) is None for k in bounds):
            return {**data, "max_drop": 0.0}
        return data


#: Per-query verdicts a gate can bound (``gates.regression``: ``regression[tag=critical]: {max: 0}``).
GATED_VERDICTS = ("regression", "loss")


class VerdictGateSettings(StrictSettings):
    """A bound on how many queries of the comparison may get a verdict (SPEC §7/§8), keyed by the
    verdict — ``regression`` or ``loss`` — optionally restricted to one slice of queries:
    ``regression[tag=critical]``, ``loss[category=multi_hop]``. ``max`` defaults to 0: any
    such verdict fails."""

    max: Annotated[int, Field(ge=0, le=MAX_COUNT)] = 0
    blocking: bool = True


# SPEC §7: the WFGY answer gates. Warnings by default: they speak only where answers exist.
WFGY_DEFAULT_GATES: dict[str, GateSettings] = {
    "answer_precision": GateSettings(min=0.80, blocking=False, skip_if_null=True),
    "chr": GateSettings(min=0.75, blocking=False, skip_if_null=True),
    "under_refusal_rate": GateSettings(max=0.05, blocking=False, skip_if_null=True),
    "over_refusal_rate": GateSettings(max=0.10, blocking=False, skip_if_null=True),
}
