"""Sizing a golden set before building it: how many queries a change needs, and what a size resolves.

From a stored run's per-query scores (:func:`sizing_table`), per metric and per slice:

- ``sd`` — the standard deviation of a paired per-query difference. **Paired** (a second run given):
  measured, ``sd(b − a)`` over the queries both runs scored. **One run**: estimated as the run's own
  per-query standard deviation σ, which is ``sd(b − a)`` when the two runs' scores correlate at 0.5
  (``Var(b − a) = 2σ²(1 − ρ)``) — typical of two configurations of one system; a 0/1 metric's σ is
  ``√(p(1 − p))``. Give the second run whenever there is one: it is the measured answer.
- ``mde`` — the change the current number of queries detects with the stated power at ``alpha``
  (:func:`.power.minimum_detectable_effect`), and ``mde_at`` for a hypothetical number of queries;
- ``queries_needed`` — the queries a change of ``change`` needs (:func:`.power.queries_needed`).

Paired 0/1 metrics (every difference −1, 0 or 1) are sized for the test a comparison runs on
them, exact McNemar, from its exact power at the observed share of changed queries
(:func:`.power.mcnemar_detectable_effect`, :func:`.power.mcnemar_queries_needed`), as the
comparison's own MDE is.

Null where the metric is not a per-query mean, or the run(s) give it on fewer than 2 queries or
with no spread (every query scored the same: nothing to estimate a variance from), and an
effect above 1 (no change within a [0, 1] metric's range is detectable); slices the metric does
not score are left out.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from kebab_eval_pipeline.compare.power import (
    DEFAULT_POWER,
    mcnemar_detectable_effect,
    mcnemar_queries_needed,
    minimum_detectable_effect,
    queries_needed,
)
from kebab_eval_pipeline.metrics import catalogue
from kebab_eval_pipeline.metrics.columns import float_column

__all__ = ["SIZING_COLUMNS", "sizing_table"]

SIZING_COLUMNS: dict[str, str] = {
    "metric": "string",
    "slice": "string",  # "all", or "<dimension>=<value>"
    "paired": "boolean",
    "n": "Int64",
    "sd": "float64",
    "mde": "float64",
    "mde_at": "float64",
    "queries_needed": "Int64",
    "note": "string",
}


def _differences(b: pd.DataFrame, a: pd.DataFrame | None, column: str) -> pd.Series:
    """Per query (indexed by query id): b's score, or b − a over the queries both scored."""
    vb = pd.Series(float_column(b, column), index=b["query_id"].astype(str).to_numpy())
    if a is None:
        return vb.dropna()
    va = pd.Series(float_column(a, column), index=a["query_id"].astype(str).to_numpy())
    return (vb - va.reindex(vb.index)).dropna()


def _slices(scores: pd.DataFrame, by: str | None) -> list[tuple[str, np.ndarray]]:
    """``("all", every query)`` then, with ``by``, one mask per value of that column (tags: per tag)."""
    ids = scores["query_id"].astype(str).to_numpy()
    out = [("all", ids)]
    if by is None:
        return out
    if by not in scores.columns:
        raise KeyError(by)
    values = scores[by]
    if by == "tags":
        exploded = pd.Series([list(t) if t is not None else [] for t in values], index=ids).explode().dropna()
        groups = exploded.groupby(exploded.astype(str)).groups
        return out + [(f"tag={k}", np.asarray(v, dtype=object)) for k, v in sorted(groups.items())]
    text = values.astype("string").fillna("(none)")
    return out + [(f"{by}={k}", ids[(text == k).to_numpy(dtype=bool)]) for k in sorted(text.unique())]


def sizing_table(
    scores_b: pd.DataFrame,
    metrics: Sequence[str],
    *,
    scores_a: pd.DataFrame | None = None,
    change: float | None = None,
    queries: int | None = None,
    alpha: float = 0.05,
    power: float = DEFAULT_POWER,
    by: str | None = None,
) -> pd.DataFrame:
    """:data:`SIZING_COLUMNS`, one row per metric × slice (see the module doc).

    Inputs: a run's ``query_scores`` (``scores_b``), optionally a second run's (``scores_a``:
    paired), catalogue metric names, the change to size for (``change``, > 0), a hypothetical
    number of queries (``queries``), the test's level and power, and a ``query_scores`` column to
    slice by (``tags``: one slice per tag). Raises ``KeyError`` for an unknown ``by`` column."""
    rows = []
    slices = _slices(scores_b, by)
    for metric in metrics:
        column = catalogue.metric_column(metric)
        if (
            column is None
            or column not in scores_b.columns
            or (scores_a is not None and column not in scores_a.columns)
        ):
            why = catalogue.untestable_reason(metric) if column is None else f"no per-query {column!r}"
            rows.append({"metric": metric, "slice": "all", "paired": scores_a is not None, "note": why})
            continue
        values = _differences(scores_b, scores_a, column)
        for name, ids in slices:
            v = values.reindex(pd.Index(ids).intersection(values.index)).to_numpy(dtype=float)
            n = int(v.size)
            if n == 0 and name != "all":
                continue  # a slice the metric does not score (e.g. no gold): nothing to size
            sd = float(np.std(v, ddof=1)) if n >= 2 else np.nan
            note = ""
            if n < 2:
                note = "fewer than 2 queries"
            elif not sd > 0:
                note = "every query scored the same: no variance to size from"
            usable = n >= 2 and sd > 0
            exact = (
                usable
                and scores_a is not None
                and catalogue.test_kind(metric) == "binary"
                and bool(np.isin(v, (-1, 0, 1)).all())
            )
            if exact:  # paired 0/1: exact McNemar at the observed share of changed queries
                changed = float(np.mean(v != 0))

                def effect(size: int, changed=changed) -> float:
                    return mcnemar_detectable_effect(size, changed, alpha, power)

                def needed(delta: float, changed=changed) -> int | None:
                    return mcnemar_queries_needed(changed, delta, alpha, power)

                note = "exact McNemar"
            else:

                def effect(size: int, sd=sd) -> float:
                    return float(minimum_detectable_effect(sd, size, alpha, power))

                def needed(delta: float, sd=sd) -> int | None:
                    return queries_needed(sd, delta, alpha, power)

            rows.append(
                {
                    "metric": metric,
                    "slice": name,
                    "paired": scores_a is not None,
                    "n": n,
                    "sd": sd if usable else np.nan,
                    "mde": effect(n) if usable else np.nan,
                    "mde_at": effect(queries) if usable and queries else np.nan,
                    "queries_needed": needed(change) if usable and change else None,
                    "note": note,
                }
            )
    frame = pd.DataFrame(rows, columns=list(SIZING_COLUMNS))
    # A metric in [0, 1] cannot change by more than 1: a larger "effect" means none is detectable.
    beyond = frame["mde"].to_numpy(dtype=float, na_value=np.nan) > 1
    frame.loc[beyond, "note"] = "too few queries: no change within the metric's range is detectable"
    frame.loc[beyond, "mde"] = np.nan
    return frame.astype(SIZING_COLUMNS)
