"""Golden sets as typed tables: one row per query, one row per support.

The tables are what metric kernels join against (no per-query Python in the
kernels) and what the ``golden_set`` asset stores as Parquet. Round-trips
losslessly with :class:`GoldenSet`.
"""

from __future__ import annotations

import pandas as pd

from kebab_eval_pipeline.golden.columns import (
    QUERY_COLUMNS,
    SUPPORT_COLUMNS,
    GoldenColumns,
    golden_from_rows,
    typed_frame,
)
from kebab_eval_pipeline.golden.model import GoldenSet

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


def golden_from_tables(queries: pd.DataFrame, supports: pd.DataFrame, **set_fields) -> GoldenSet:
    """Inverse of :func:`queries_table` / :func:`supports_table`."""
    return golden_from_rows(
        queries.to_dict("records"),
        supports.sort_values(["query_id", "support_idx"]).to_dict("records"),
        _none_if_na,
        **set_fields,
    )
