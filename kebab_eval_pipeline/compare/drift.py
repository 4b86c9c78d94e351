"""Golden-set drift between two runs: queries present in only one run, queries whose gold changed,
and the comparison kept to the queries that did not change.

Two runs can be compared across golden-set versions (a pinned or explicit baseline), so the
comparison must say where the sets differ instead of silently dropping or mixing queries. What
counts as a query's gold, and how two sets are diffed, is :mod:`kebab_eval_pipeline.golden.diff`.

When the sets differ, the comparison's numbers are computed over the queries *unchanged* between
them (same id, same question, same supports, same other gold): a metric move that is only a
golden change is never reported. Queries only in one set keep their ``only_a``/``only_b``
verdicts; a query in both whose gold changed gets the verdict ``gold_changed`` (not compared).
The comparison records what it left out and why (:func:`restriction_info`).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from kebab_eval_pipeline.golden.diff import (
    CHANGED_GOLD_COLUMNS,
    DIFF_KINDS,
    GOLD_QUERY_FIELDS,
    KIND_LABELS,
    GoldenDiff,
    changed_gold,
    no_changed_gold,
)

__all__ = [
    "CHANGED_GOLD_COLUMNS",
    "GOLD_QUERY_FIELDS",
    "changed_gold",
    "no_changed_gold",
    "restricted_scores",
    "restriction_info",
    "restriction_text",
    "set_aside_changed",
]

#: The verdict of a query in both runs whose gold changed between their golden sets.
GOLD_CHANGED = "gold_changed"


def restricted_scores(scores: pd.DataFrame, diff: GoldenDiff) -> pd.DataFrame:
    """The rows of a run's ``query_scores`` whose query is unchanged between the two golden sets
    (one hash join of the ids; the rows keep their order)."""
    keep = scores["query_id"].astype(object).isin(pd.Index(diff.unchanged.astype(object)))
    return scores[keep.to_numpy(dtype=bool)].reset_index(drop=True)


def set_aside_changed(verdicts: pd.DataFrame, changed: pd.DataFrame) -> pd.DataFrame:
    """``verdicts`` (with their ``gold_changed`` flag) where each query whose gold changed — its
    fields in ``changed`` (:data:`CHANGED_GOLD_COLUMNS`) — gets the verdict ``gold_changed``: not
    compared, so never a win, loss or regression, and no answer flips; its ranks stay as
    information. Unchanged when no query's gold changed."""
    flag = verdicts["gold_changed"].to_numpy(dtype=bool)
    if not flag.any():
        return verdicts
    out = verdicts.copy()
    fields = out.loc[flag, "query_id"].map(changed.set_index("query_id")["fields"]).map(", ".join)
    out.loc[flag, "verdict"] = GOLD_CHANGED
    out.loc[flag, "note"] = "gold changed (" + fields.astype(str) + "): not compared"
    out.loc[flag, ["refusal_flip", "groundedness_flip"]] = pd.NA
    return out


def restriction_info(diff: GoldenDiff, not_restricted: Iterable[str]) -> dict:
    """What a comparison across two golden-set versions left out: ``n_compared`` (the unchanged
    queries), ``n_dropped`` (every other query of either set), ``dropped`` (queries per kind of
    :data:`~kebab_eval_pipeline.golden.diff.DIFF_KINDS`: a query whose question and supports both
    changed counts under each) and ``not_restricted`` (run-level metrics the restriction cannot
    recompute from per-query scores: shown as each run measured them over its own queries)."""
    counts = diff.counts()
    return {
        "n_compared": counts["unchanged"],
        "n_dropped": diff.n_dropped,
        "dropped": {k: counts[k] for k in DIFF_KINDS},
        "not_restricted": sorted(not_restricted),
    }


def restriction_text(restriction: dict) -> str:
    """One sentence saying what the comparison left out and why (the report's line)."""
    why = ", ".join(f"{n} {KIND_LABELS[k]}" for k, n in restriction["dropped"].items() if n)
    text = (
        f"the golden sets differ: metrics, paired tests and verdicts use the {restriction['n_compared']} "
        f"queries unchanged in both; {restriction['n_dropped']} dropped ({why})"
    )
    if restriction["not_restricted"]:
        text += "; not restricted (run-level numbers, as each run measured them): " + ", ".join(
            restriction["not_restricted"]
        )
    return text


def not_restricted_metrics(full: dict, restricted: dict) -> list[str]:
    """Metrics of ``full`` with a value that the per-query recomputation (``restricted``) has no
    number for: run-level numbers kept as the run measured them."""
    return [m for m, v in full.items() if m not in restricted and v is not None and not _nan(v)]


def _nan(value) -> bool:
    return isinstance(value, float) and np.isnan(value)
