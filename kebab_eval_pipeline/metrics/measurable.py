"""What a run could measure: the metrics whose inputs it lacks are null with the reason, never 0.

A run lacks what its system's kind (or replay format) cannot carry — citations in OpenInference
traces, answers from a search-only system — and answers when it did not ask for them
(:func:`kebab_eval_pipeline.systems.capabilities.run_lacks`). Each metric says what it needs in the
catalogue (``Measure.needs``); :func:`~kebab_eval_pipeline.metrics.catalogue.not_measured` derives
which metrics a run cannot measure and why. Here those metrics' per-query columns are emptied, so
the aggregates, the breakdowns and every paired comparison read them as null (not as the 0 a
kernel wrote for "no citation").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from kebab_eval_pipeline.contract import SystemInfo
from kebab_eval_pipeline.metrics import catalogue
from kebab_eval_pipeline.systems.capabilities import Capabilities, run_lacks

__all__ = ["lacks_of", "null_unmeasured"]


def lacks_of(system: SystemInfo | Mapping[str, Any] | None, answers: bool) -> dict[str, str]:
    """What a run lacks (capability → reason): its system info's recorded capabilities (a
    ``SystemInfo`` or the stored ``info["system"]`` mapping; none recorded: nothing lacking), plus
    answers when the run did not ask for them."""
    stored = system.capabilities if isinstance(system, SystemInfo) else (system or {}).get("capabilities")
    return run_lacks(Capabilities.from_dict(stored), answers)


def null_unmeasured(
    query_scores: pd.DataFrame, lacks: Mapping[str, str]
) -> tuple[pd.DataFrame, dict[str, str]]:
    """``query_scores`` with the per-query column of every metric the run cannot measure set to
    null (NaN), and ``{metric: reason}`` for those columns' metrics. Input: the per-query scores
    (any columns) and what the run lacks. Columns that no lacking metric reads are returned as
    they are (the frame is copied only when a column changes)."""
    if not lacks:
        return query_scores, {}
    names = [m.metric(None) for m in catalogue.measures() if not m.at_k and m.column is not None]
    ks = sorted(
        {int(c.rsplit("@", 1)[1]) for c in query_scores.columns if "@" in c and c.rsplit("@", 1)[1].isdigit()}
    )
    names += [m.metric(k) for m in catalogue.measures() if m.at_k and m.column is not None for k in ks]
    unmeasured = catalogue.not_measured(names, lacks)
    columns = {
        column: reason
        for name, reason in unmeasured.items()
        if (column := catalogue.metric_column(name)) is not None and column in query_scores.columns
    }
    if not columns:
        return query_scores, {}
    out = query_scores.copy()
    for column in columns:
        out[column] = pd.Series(np.nan, index=out.index, dtype="float64")
    return out, {
        name: reason for name, reason in unmeasured.items() if catalogue.metric_column(name) in columns
    }
