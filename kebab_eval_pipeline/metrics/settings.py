"""The metric layer's settings: the matching criterion (``match:``) and the system-health rule
(``system_health:``). Pure pydantic (no pandas): the run config loads without the kernels."""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import Field

from kebab_eval_pipeline.foundation.config_model import StrictSettings

#: The default cut-offs k of the @k metrics (``k:`` in the run config).
DEFAULT_KS: tuple[int, ...] = (1, 3, 5, 10)

MatchCriterion = Literal["auto", "chunk", "doc", "anchor", "span", "fields"]


MATCH_CRITERIA: tuple[str, ...] = get_args(MatchCriterion)

#: Default ``system_health.max_error_rate``: an errored query scores 0 on every metric that applies to
#: it, so a 10% error rate can move MRR or hit@k by up to 0.1 — more than any regression tolerance a
#: team gates on — while the adapters' retries already absorb transient failures.
DEFAULT_MAX_ERROR_RATE = 0.1


class SystemHealthSettings(StrictSettings):
    """When a run fails because the system under test failed (checked by the ``system_health``
    asset check on ``run_metrics``): more than ``max_error_rate`` of the queries errored, or every
    query did (whatever the rate, so ``max_error_rate: 1.0`` fails only a dead system).
    ``blocking: false`` (or ``system_health: null``) reports the same verdict as a warning only."""

    max_error_rate: Annotated[float, Field(ge=0.0, le=1.0)] = DEFAULT_MAX_ERROR_RATE
    blocking: bool = True
