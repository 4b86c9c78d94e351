"""Counts that describe a golden set (asset metadata, ``golden validate``)."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd


def golden_summary(queries: pd.DataFrame) -> dict[str, Any]:
    """Counts over the golden ``queries`` table: totals, answerable split, pending, intent groups,
    multi-hop queries (category ``multi_hop`` or more than one required support group), and
    per-category / per-difficulty / per-language counts (empty values as ``(none)``)."""
    groups = queries["required_support_groups"].map(lambda g: len(json.loads(g)) if isinstance(g, str) else 0)
    multi_hop = (queries["category"] == "multi_hop").fillna(False) | (groups > 1)

    def counts(column: str) -> dict[str, int]:
        values = queries[column].fillna("").replace("", "(none)")
        return {str(k): int(v) for k, v in values.value_counts().sort_index().items()}

    answerable = int(queries["answerable"].sum())
    return {
        "queries": len(queries),
        "answerable": answerable,
        "unanswerable": len(queries) - answerable,
        "pending": int(queries["pending"].sum()),
        "groups": int(queries["group"].nunique()),
        "multi_hop": int(multi_hop.sum()),
        "per_category": counts("category"),
        "per_difficulty": counts("difficulty"),
        "per_lang": counts("lang"),
    }


def summary_line(summary: dict[str, Any]) -> str:
    """``105 queries (92 answerable, 13 unanswerable; factual 77, multi_hop 13, …)``."""
    cats = ", ".join(f"{k} {v}" for k, v in summary["per_category"].items())
    return (
        f"{summary['queries']} queries ({summary['answerable']} answerable, {summary['unanswerable']} "
        f"unanswerable; {cats}; {summary['groups']} groups, {summary['multi_hop']} multi-hop, "
        f"{summary['pending']} pending)"
    )
