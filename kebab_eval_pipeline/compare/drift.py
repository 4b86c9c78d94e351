"""Golden-set drift between two runs: queries present in only one run, and queries whose gold changed.

Two runs can be compared across golden-set versions (a pinned or explicit baseline), so the
comparison must say where the sets differ instead of silently dropping or mixing queries. A
query's *gold* is everything that decides its scores: the question text, ``answerable``, the
answer constraints (``must_contain``, ``forbidden``, ``gold_claim_substr``, ``recency_rule``,
``expected_kind``, ``required_support_groups``) and its supports (every field, in order). Labels
that only slice the reports (category, tags, …) are not gold.

Vectorised: one 64-bit hash per field and row (``pd.util.hash_pandas_object``), compared column
by column; supports are hashed per row and combined per query.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from kebab_eval_pipeline.golden.tables import SUPPORT_COLUMNS

#: Query fields whose change changes how a query is scored, in report order.
GOLD_QUERY_FIELDS: tuple[str, ...] = (
    "query",
    "answerable",
    "must_contain",
    "forbidden",
    "gold_claim_substr",
    "required_support_groups",
    "recency_rule",
    "expected_kind",
)
_SUPPORT_FIELDS = tuple(c for c in SUPPORT_COLUMNS if c != "query_id")

#: Columns of :func:`changed_gold`.
CHANGED_GOLD_COLUMNS: dict[str, str] = {"query_id": "string", "fields": "object"}


def _hash_column(values: pd.Series) -> np.ndarray:
    """A stable uint64 per value; lists (and other objects) hash through their text form."""
    if values.dtype == object:
        values = values.map(
            lambda v: None if v is None or v is pd.NA else repr(list(v)) if _is_list(v) else v
        )
        values = values.astype("string")
    return pd.util.hash_pandas_object(values, index=False).to_numpy()


def _is_list(value) -> bool:
    return isinstance(value, (list, tuple, np.ndarray))


def _support_hashes(supports: pd.DataFrame) -> pd.Series:
    """One uint64 per query summarising its supports (all fields, with their order)."""
    if len(supports) == 0:
        return pd.Series(dtype="UInt64")
    combined = np.zeros(len(supports), dtype=np.uint64)
    for field in _SUPPORT_FIELDS:
        if field in supports.columns:
            # Multiply-then-add keeps field positions apart (a ≠ b swapped between fields).
            combined = combined * np.uint64(1_000_003) + _hash_column(supports[field])
    # Mix each row's fields non-linearly: a linear combination summed over rows could not tell
    # which support_idx went with which support.
    combined = pd.util.hash_array(combined)
    keyed = pd.DataFrame({"query_id": supports["query_id"].astype(object), "h": combined})
    # A sum is order-free, but support_idx is hashed in, so reordering supports still shows.
    return keyed.groupby("query_id", sort=False)["h"].sum().astype("UInt64")


def no_changed_gold() -> pd.DataFrame:
    """The empty :func:`changed_gold` table (identical golden sets)."""
    return pd.DataFrame(columns=list(CHANGED_GOLD_COLUMNS)).astype(CHANGED_GOLD_COLUMNS)


def changed_gold(
    queries_a: pd.DataFrame,
    supports_a: pd.DataFrame,
    queries_b: pd.DataFrame,
    supports_b: pd.DataFrame,
) -> pd.DataFrame:
    """Queries present in both golden sets whose gold differs, with the fields that changed.

    Inputs: the ``queries`` and ``supports`` tables (``golden.tables``) of baseline a and
    candidate b. Output: :data:`CHANGED_GOLD_COLUMNS` — ``query_id`` and ``fields`` (a list drawn
    from :data:`GOLD_QUERY_FIELDS` plus ``"supports"``), ordered by query id; empty when nothing
    changed or no query is shared.
    """
    merged = queries_a[["query_id"]].merge(queries_b[["query_id"]], on="query_id", how="inner")
    if len(merged) == 0:
        return no_changed_gold()
    ids = merged["query_id"].astype("string")
    qa = queries_a.set_index(queries_a["query_id"].astype("string")).loc[ids]
    qb = queries_b.set_index(queries_b["query_id"].astype("string")).loc[ids]
    changes: dict[str, np.ndarray] = {}
    for field in GOLD_QUERY_FIELDS:
        if field in qa.columns and field in qb.columns:
            changes[field] = _hash_column(qa[field].reset_index(drop=True)) != _hash_column(
                qb[field].reset_index(drop=True)
            )
    keys = ids.astype(object).to_numpy()
    # reindex keeps the exact uint64 hashes (a map through Arrow strings would turn them to floats).
    ha = _support_hashes(supports_a).reindex(keys).reset_index(drop=True)
    hb = _support_hashes(supports_b).reindex(keys).reset_index(drop=True)
    # A query without supports hashes to NA on its side: NA vs a value is a change, NA vs NA is not.
    changes["supports"] = (ha.isna() != hb.isna()).to_numpy() | (
        ha.notna() & hb.notna() & (ha != hb).fillna(False)
    ).to_numpy(dtype=bool)

    names = np.array(list(changes))
    matrix = np.column_stack([changes[n] for n in names])
    rows = np.flatnonzero(matrix.any(axis=1))
    out = pd.DataFrame(
        {
            "query_id": ids.to_numpy()[rows],
            "fields": [names[matrix[r]].tolist() for r in rows],
        }
    ).astype(CHANGED_GOLD_COLUMNS)
    return out.sort_values("query_id", kind="stable").reset_index(drop=True)
