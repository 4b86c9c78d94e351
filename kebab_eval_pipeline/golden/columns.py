"""A golden set's table columns, and the builder that fills them one validated query at a time.

Kept free of pandas: the CLI loads (and refuses) golden sets before it imports pandas.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from kebab_eval_pipeline.golden.model import GoldenQuery

if TYPE_CHECKING:
    import pandas as pd

QUERY_COLUMNS: dict[str, str] = {
    "query_id": "string",
    "query": "string",
    "lang": "string",
    "answerable": "bool",
    "category": "string",
    "difficulty": "string",
    "tags": "object",  # list[str]
    "group": "string",
    "pending": "bool",
    "n_supports": "int64",
    "required_support_groups": "string",  # JSON list[list[int]]: rarely used, kept exact
    "must_contain": "object",  # list[str]
    "forbidden": "object",
    "gold_claim_substr": "object",
    "recency_rule": "string",
    "expected_kind": "string",
    "notes": "string",
    "constraints": "object",  # list[str]
}

SUPPORT_COLUMNS: dict[str, str] = {
    "query_id": "string",
    "support_idx": "int64",
    "chunk_id": "string",
    "doc_id": "string",
    "rel_path": "string",
    "heading_path": "object",  # list[str] or None
    "line_start": "Int64",
    "line_end": "Int64",
    "snippet": "string",
    "symbol": "string",
    "symbol_kind": "string",
    "section": "string",
    "grade": "int64",
}


def typed_frame(rows: list[dict] | dict[str, list], columns: dict[str, str]) -> pd.DataFrame:
    """Build a DataFrame with exactly ``columns`` (in order) and their declared dtypes."""
    import pandas as pd

    frame = pd.DataFrame(rows, columns=list(columns))
    return frame.astype(columns)


#: The support fields, in SUPPORT_COLUMNS order (after query_id and support_idx).
_SUPPORT_FIELDS = tuple(SUPPORT_COLUMNS)[2:]


class GoldenColumns:
    """A golden set's two tables as columns (plain lists), filled one validated query at a time
    (:meth:`add`), so a loader never holds a model per query: a million queries as pydantic
    models took gigabytes; as columns, a fraction. No pandas until :meth:`queries_frame` /
    :meth:`supports_frame` (the CLI loads golden sets before importing it)."""

    def __init__(self) -> None:
        self.queries: dict[str, list] = {name: [] for name in QUERY_COLUMNS}
        self.supports: dict[str, list] = {name: [] for name in SUPPORT_COLUMNS}

    def __len__(self) -> int:
        return len(self.queries["query_id"])

    def add(self, q: GoldenQuery) -> None:
        """Append one query's row and its supports' rows."""
        cols = self.queries
        cols["query_id"].append(q.id)
        cols["query"].append(q.query)
        cols["lang"].append(q.lang)
        cols["answerable"].append(q.answerable)
        cols["category"].append(q.category)
        cols["difficulty"].append(q.difficulty)
        cols["tags"].append(q.tags)  # the model's own lists: it is dropped once tabled
        cols["group"].append(q.group)
        cols["pending"].append(q.pending)
        cols["n_supports"].append(len(q.supports))
        # rarely set: "[]" written directly (json.dumps per query cost seconds at 20k queries)
        cols["required_support_groups"].append(
            json.dumps(q.required_support_groups) if q.required_support_groups else "[]"
        )
        cols["must_contain"].append(q.must_contain)
        cols["forbidden"].append(q.forbidden)
        cols["gold_claim_substr"].append(q.gold_claim_substr)
        cols["recency_rule"].append(q.recency_rule)
        cols["expected_kind"].append(q.expected_kind)
        cols["notes"].append(q.notes)
        cols["constraints"].append(q.constraints)
        sup = self.supports
        for i, support in enumerate(q.supports):
            sup["query_id"].append(q.id)
            sup["support_idx"].append(i)
            values = support.__dict__  # the validated fields (model_dump per support cost seconds)
            for name in _SUPPORT_FIELDS:
                sup[name].append(values[name])

    def queries_frame(self) -> pd.DataFrame:
        return typed_frame(self.queries, QUERY_COLUMNS)

    def supports_frame(self) -> pd.DataFrame:
        return typed_frame(self.supports, SUPPORT_COLUMNS)
