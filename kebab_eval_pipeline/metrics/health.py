"""Did the system under test work? The verdict that fails a run whose system failed.

A run against a dead server or a broken command still produces one row per query — each with an
error — and scores of 0. Without this verdict such a run would finish green. Pure (no Dagster):
the ``system_health`` asset check, the CLI and the run report all read the same verdict.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import pandas as pd

from kebab_eval_pipeline.metrics.settings import SystemHealthSettings
from kebab_eval_pipeline.systems.outcome import FATAL_CLASSES
from kebab_eval_pipeline.systems.runner import error_class_counts

CHECK_NAME = "system_health"  # the asset check on run_metrics that enforces the verdict
TOP_CLASSES = 3  # error classes named in the message; the rest are counted
EXAMPLE_CHARS = 200  # the first error's text, cut to this length


@dataclass(frozen=True)
class HealthVerdict:
    """The system-health verdict of one run.

    ``healthy`` is False when every query errored (and there was at least one query), when
    ``error_rate`` exceeds ``max_error_rate``, or when any query has a fatal class (``FATAL_CLASSES``:
    the system's process ended); ``blocking`` says whether that fails the run (False
    when the check is configured off). ``classes`` counts failed queries per error class, most
    frequent first; ``example`` is the first failed query's error ("query_id: class: message").
    """

    queries: int
    failed: int
    error_rate: float | None  # None for a run without queries
    max_error_rate: float
    blocking: bool
    healthy: bool
    classes: dict[str, int] = field(default_factory=dict)
    example: str | None = None
    message: str = ""

    @property
    def fails_run(self) -> bool:
        return failed_run(self.as_dict())

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def failed_run(verdict: dict[str, Any]) -> bool:
    """Whether a stored verdict (:meth:`HealthVerdict.as_dict`) failed its run: blocking, not healthy."""
    return bool(verdict.get("blocking")) and verdict.get("healthy") is False


def health_markdown(verdict: dict[str, Any]) -> list[str]:
    """The verdict as a Markdown paragraph (``**FAIL** — …`` or ``**warning** — …``) plus a blank
    line, only when some query failed (a healthy run says nothing); for run reports and summaries."""
    if not verdict.get("failed"):
        return []
    from kebab_eval_pipeline.foundation.markdown_text import md_text

    # The message quotes the system's own error text: escaped, it cannot become markup.
    return [f"**{'FAIL' if failed_run(verdict) else 'warning'}** — {md_text(verdict['message'])}", ""]


def _rate(value: float) -> str:
    return repr(round(value, 4))


def classes_text(classes: dict[str, int]) -> str:
    """``connection ×58, timeout ×2`` — the TOP_CLASSES most frequent, then how many more."""
    items = list(classes.items())
    text = ", ".join(f"{name} ×{n}" for name, n in items[:TOP_CLASSES])
    if len(items) > TOP_CLASSES:
        rest = sum(n for _, n in items[TOP_CLASSES:])
        text += f", {len(items) - TOP_CLASSES} more class(es) ×{rest}"
    return text


def system_health(outcomes: pd.DataFrame, settings: SystemHealthSettings | None) -> HealthVerdict:
    """The verdict for a run's ``outcomes`` table (``retrieval_results``: one row per query, with
    ``query_id``, ``error_class`` — null when the query succeeded — and ``error``).

    ``settings`` None (``system_health: null`` in the run config) judges with the defaults but
    never blocks. A query counts as failed when it has an error class, whether search or ask
    failed. An empty table is healthy (error_rate None).
    """
    effective = settings or SystemHealthSettings(blocking=False)
    queries = len(outcomes)
    errored = (
        outcomes["error_class"].notna()
        if "error_class" in outcomes
        else pd.Series(False, index=outcomes.index, dtype=bool)
    )
    failed = int(errored.sum())
    rate = failed / queries if queries else None
    every = queries > 0 and failed == queries
    exceeded = rate is not None and rate > effective.max_error_rate
    # most frequent first; ties in name order, so the message is stable
    classes = dict(sorted(error_class_counts(outcomes).items(), key=lambda kv: (-kv[1], kv[0])))
    example = None
    if failed:
        first = outcomes.loc[errored].iloc[0]
        detail = first.get("error") if "error" in outcomes else None
        example = f"{first['query_id']}: {detail if isinstance(detail, str) else first['error_class']}"
        example = example if len(example) <= EXAMPLE_CHARS else example[: EXAMPLE_CHARS - 1] + "…"
    fatal = [name for name in classes if name in FATAL_CLASSES]
    healthy = not (every or exceeded or fatal)
    if rate is None:
        why = "no queries"
    elif fatal and not (every or exceeded):
        why = f"{', '.join(fatal)}: the system's process ended, which fails the run whatever the error rate"
    elif every and not exceeded:
        why = "every query failed"
    else:
        op = ">" if exceeded else "≤"
        why = f"error_rate {_rate(rate)} {op} max {_rate(effective.max_error_rate)}"
    message = f"system health: {failed} of {queries} queries failed ({why})"
    if failed:
        message += f": {classes_text(classes)}; first: {example}"
    return HealthVerdict(
        queries=queries,
        failed=failed,
        error_rate=rate,
        max_error_rate=effective.max_error_rate,
        blocking=effective.blocking,
        healthy=healthy,
        classes=classes,
        example=example,
        message=message,
    )
