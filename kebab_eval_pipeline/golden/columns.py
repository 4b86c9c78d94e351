"""A golden set's table columns, and the builder that fills them one validated query at a time.

Kept free of pandas: the CLI loads (and refuses) golden sets before it imports pandas.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from kebab_eval_pipeline.golden.model import GoldenQuery, GoldenSet, Support

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


#: The value of every empty list column cell (tags, must_contain, …): one shared list, not one per
#: query (four of them per query in most sets). Readers of the tables never modify a cell.
_NONE: list = []

#: The support fields, in SUPPORT_COLUMNS order (after query_id and support_idx).
_SUPPORT_FIELDS = tuple(SUPPORT_COLUMNS)[2:]


class GoldenColumns:
    """A golden set's two tables as columns, filled one validated query at a time (:meth:`add`),
    so a loader never holds a model per query: a million queries as pydantic models took
    gigabytes.

    Every :data:`CHUNK_QUERIES` queries the plain lists are turned into typed frames (their text
    into Arrow buffers) and emptied. Short-lived parse objects and the set's values are then never
    spread over the same memory: a million-query set held as lists until the end took 1.5 GiB, and
    1.4 GiB of it stayed resident after the set was released (Python's allocator can only return
    memory blocks that hold nothing). Small sets stay lists (no pandas import: the CLI refuses a bad
    golden set before it imports pandas)."""

    #: Queries per chunk turned into frames (and the largest set loaded without pandas).
    CHUNK_QUERIES = 20_000

    def __init__(self) -> None:
        self.queries: dict[str, list] = {name: [] for name in QUERY_COLUMNS}
        self.supports: dict[str, list] = {name: [] for name in SUPPORT_COLUMNS}
        self._chunks: list[tuple[pd.DataFrame, pd.DataFrame]] = []
        self._chunked = 0  # queries already in self._chunks

    def __len__(self) -> int:
        return self._chunked + len(self.queries["query_id"])

    def _flush(self) -> None:
        """The lists so far as one chunk of typed frames; the lists start again empty."""
        self._chunks.append(
            (typed_frame(self.queries, QUERY_COLUMNS), typed_frame(self.supports, SUPPORT_COLUMNS))
        )
        self._chunked += len(self.queries["query_id"])
        self.queries = {name: [] for name in QUERY_COLUMNS}
        self.supports = {name: [] for name in SUPPORT_COLUMNS}

    def add(self, q: GoldenQuery) -> None:
        """Append one query's row and its supports' rows."""
        cols = self.queries
        cols["query_id"].append(q.id)
        cols["query"].append(q.query)
        cols["lang"].append(q.lang)
        cols["answerable"].append(q.answerable)
        cols["category"].append(q.category)
        cols["difficulty"].append(q.difficulty)
        cols["tags"].append(q.tags or _NONE)  # the model's own lists (dropped once tabled)
        cols["group"].append(q.group)
        cols["pending"].append(q.pending)
        cols["n_supports"].append(len(q.supports))
        # rarely set: "[]" written directly (json.dumps per query cost seconds at 20k queries)
        cols["required_support_groups"].append(
            json.dumps(q.required_support_groups) if q.required_support_groups else "[]"
        )
        cols["must_contain"].append(q.must_contain or _NONE)
        cols["forbidden"].append(q.forbidden or _NONE)
        cols["gold_claim_substr"].append(q.gold_claim_substr or _NONE)
        cols["recency_rule"].append(q.recency_rule)
        cols["expected_kind"].append(q.expected_kind)
        cols["notes"].append(q.notes)
        cols["constraints"].append(q.constraints or _NONE)
        sup = self.supports
        for i, support in enumerate(q.supports):
            sup["query_id"].append(q.id)
            sup["support_idx"].append(i)
            values = support.__dict__  # the validated fields (model_dump per support cost seconds)
            for name in _SUPPORT_FIELDS:
                sup[name].append(values[name])

        if len(self.queries["query_id"]) >= self.CHUNK_QUERIES:
            self._flush()

    def _frames(self, which: int) -> pd.DataFrame:
        if not self._chunks:
            return typed_frame(
                self.supports if which else self.queries, SUPPORT_COLUMNS if which else QUERY_COLUMNS
            )
        import pandas as pd

        if len(self.queries["query_id"]):
            self._flush()
        frames = [chunk[which] for chunk in self._chunks if len(chunk[which])] or [self._chunks[0][which]]
        return frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)

    def queries_frame(self) -> pd.DataFrame:
        return self._frames(0)

    def supports_frame(self) -> pd.DataFrame:
        return self._frames(1)

    def golden(self, **set_fields) -> GoldenSet | None:
        """The set's model built straight from the column lists (``set_fields``: name, source, …),
        the same objects :func:`~kebab_eval_pipeline.golden.tables.golden_from_tables` builds from
        the tables, without building them (most of the cost of a small set's model). None once
        part of the set is in frames (more than :data:`CHUNK_QUERIES` queries): use the tables."""
        if self._chunks:
            return None
        q, s = self.queries, self.supports
        return golden_from_rows(
            (dict(zip(q, row, strict=True)) for row in zip(*q.values(), strict=True)),
            (dict(zip(s, row, strict=True)) for row in zip(*s.values(), strict=True)),
            **set_fields,
        )


def _same(value):
    return value


def golden_from_rows(
    query_rows: Iterable[dict],
    support_rows: Iterable[dict],
    none_if_na: Callable = _same,
    **set_fields,
) -> GoldenSet:
    """The :class:`GoldenSet` of query rows (:data:`QUERY_COLUMNS`) and support rows
    (:data:`SUPPORT_COLUMNS`, each query's in ``support_idx`` order); ``none_if_na`` maps a
    table's null (NA, NaN) to None."""

    def as_list(value) -> list:
        value = none_if_na(value)
        return [] if value is None else [str(v) for v in value]

    by_query: dict[str, list[Support]] = {}
    for row in support_rows:
        fields = {k: none_if_na(row[k]) for k in _SUPPORT_FIELDS}
        if fields["heading_path"] is not None:
            fields["heading_path"] = [str(h) for h in fields["heading_path"]]
        by_query.setdefault(row["query_id"], []).append(Support(**fields))
    out = [
        GoldenQuery(
            id=row["query_id"],
            query=row["query"],
            lang=none_if_na(row["lang"]) or "",
            answerable=bool(row["answerable"]),
            category=none_if_na(row["category"]) or "",
            difficulty=none_if_na(row["difficulty"]) or "",
            tags=as_list(row["tags"]),
            group=none_if_na(row["group"]),
            pending=bool(row["pending"]),
            supports=by_query.get(row["query_id"], []),
            required_support_groups=json.loads(row["required_support_groups"] or "[]"),
            must_contain=as_list(row["must_contain"]),
            forbidden=as_list(row["forbidden"]),
            gold_claim_substr=as_list(row["gold_claim_substr"]),
            recency_rule=none_if_na(row["recency_rule"]),
            expected_kind=none_if_na(row["expected_kind"]),
            notes=none_if_na(row["notes"]) or "",
            constraints=as_list(row["constraints"]),
        )
        for row in query_rows
    ]
    return GoldenSet(queries=out, **set_fields)
