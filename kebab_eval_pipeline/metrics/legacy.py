"""Reading runs stored under older metric definitions (``scoring_version`` in the artifacts' info).

Scoring version 1 (runs stored before the one-to-one support assignment) named *document* recall
``recall@k``; from version 2 on that number is ``doc_recall@k`` and ``recall@k`` is support recall.
A version-1 artifact is upgraded on load by renaming ``recall@k`` → ``doc_recall@k`` in its
per-query table, its metrics and its breakdowns, so no reader ever mistakes the old document
recall for the new support recall. ``recall@k`` is then absent (null): it was never computed.
Its ``precision@k``/``ndcg@k`` keep their old values (repeated supports counted); comparisons
re-score such a run from its stored hits (see :mod:`kebab_eval_pipeline.compare.runs`).
"""

from __future__ import annotations

import re
from typing import Any

import pandas as pd

from kebab_eval_pipeline.metrics.retrieval import SCORING_VERSION

__all__ = ["SCORING_VERSION", "is_current", "scoring_version", "upgrade_breakdowns", "upgrade_metrics"]

_OLD_RECALL = re.compile(r"^recall@([1-9][0-9]*)$")


def scoring_version(info: dict[str, Any]) -> int:
    """The scoring version an artifact's info records (1 when it records none: stored before it)."""
    return int(info.get("scoring_version") or 1)


def is_current(info: dict[str, Any]) -> bool:
    """Whether an artifact was scored with the current metric definitions."""
    return scoring_version(info) >= SCORING_VERSION


def _renames(names: list[str]) -> dict[str, str]:
    """``recall@k`` → ``doc_recall@k`` for every old name, unless the new name is already there."""
    present = set(names)
    return {
        n: f"doc_recall@{m.group(1)}"
        for n in names
        if (m := _OLD_RECALL.fullmatch(n)) and f"doc_recall@{m.group(1)}" not in present
    }


def upgrade_columns(frame: pd.DataFrame) -> pd.DataFrame:
    """A version-1 per-query table with ``recall@k`` columns renamed ``doc_recall@k``."""
    renames = _renames([str(c) for c in frame.columns])
    return frame.rename(columns=renames) if renames else frame


def upgrade_metrics(values: dict[str, Any]) -> dict[str, Any]:
    """A version-1 ``{metric: value}`` mapping with ``recall@k`` keys renamed (order kept)."""
    renames = _renames(list(values))
    return {renames.get(k, k): v for k, v in values.items()} if renames else values


def upgrade_breakdowns(frame: pd.DataFrame) -> pd.DataFrame:
    """A version-1 breakdown table (``metric`` column) with ``recall@k`` rows renamed."""
    if frame is None or "metric" not in frame.columns or len(frame) == 0:
        return frame
    renames = _renames(sorted(set(frame["metric"].astype(str))))
    if not renames:
        return frame
    out = frame.copy()
    out["metric"] = out["metric"].astype(str).replace(renames).astype(frame["metric"].dtype)
    return out
