"""Golden sets as typed tables: one row per query, one row per support.

The tables are what metric kernels join against (no per-query Python in the
kernels) and what the ``golden_set`` asset stores as Parquet. Round-trips
losslessly with :class:`GoldenSet`.
"""

from __future__ import annotations

import json

import pandas as pd

from kebab_eval_pipeline.golden.columns import QUERY_COLUMNS, SUPPORT_COLUMNS, GoldenColumns, typed_frame
from kebab_eval_pipeline.golden.model import GoldenQuery, GoldenSet, Support

__all__ = [
    "QUERY_COLUMNS",
    "SUPPORT_COLUMNS",
    "GoldenColumns",
    "golden_from_tables",
    "queries_table",
    "supports_table",
    "typed_frame",
]


def _columns(golden: GoldenSet) -> GoldenColumns:
    cols = GoldenColumns()
    for q in golden.queries:
        cols.add(q)
    return cols


def queries_table(golden: GoldenSet) -> pd.DataFrame:
    """One row per query (:data:`QUERY_COLUMNS`)."""
    return _columns(golden).queries_frame()


def supports_table(golden: GoldenSet) -> pd.DataFrame:
    """One row per support of every query (:data:`SUPPORT_COLUMNS`), in query then support order."""
    return _columns(golden).supports_frame()


def _none_if_na(value):
    if value is None:
        return None
    try:
        if pd.isna(value):
            return None
    except (TypeError, ValueError):  # lists / arrays
        pass
    return value


def _as_list(value) -> list:
    value = _none_if_na(value)
    return [] if value is None else [str(v) for v in value]


def golden_from_tables(queries: pd.DataFrame, supports: pd.DataFrame, **set_fields) -> GoldenSet:
    """Inverse of :func:`queries_table` / :func:`supports_table`."""
    by_query: dict[str, list[Support]] = {}
    for row in supports.sort_values(["query_id", "support_idx"]).to_dict("records"):
        fields = {k: _none_if_na(row[k]) for k in SUPPORT_COLUMNS if k not in ("query_id", "support_idx")}
        if fields["heading_path"] is not None:
            fields["heading_path"] = [str(h) for h in fields["heading_path"]]
        by_query.setdefault(row["query_id"], []).append(Support(**fields))
    out = []
    for row in queries.to_dict("records"):
        out.append(
            GoldenQuery(
                id=row["query_id"],
                query=row["query"],
                lang=_none_if_na(row["lang"]) or "",
                answerable=bool(row["answerable"]),
                category=_none_if_na(row["category"]) or "",
                difficulty=_none_if_na(row["difficulty"]) or "",
                tags=_as_list(row["tags"]),
                group=_none_if_na(row["group"]),
                pending=bool(row["pending"]),
                supports=by_query.get(row["query_id"], []),
                required_support_groups=json.loads(row["required_support_groups"] or "[]"),
                must_contain=_as_list(row["must_contain"]),
                forbidden=_as_list(row["forbidden"]),
                gold_claim_substr=_as_list(row["gold_claim_substr"]),
                recency_rule=_none_if_na(row["recency_rule"]),
                expected_kind=_none_if_na(row["expected_kind"]),
                notes=_none_if_na(row["notes"]) or "",
                constraints=_as_list(row["constraints"]),
            )
        )
    return GoldenSet(queries=out, **set_fields)
