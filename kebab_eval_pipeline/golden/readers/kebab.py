"""kebab list YAML: a top-level list of ``{id, query, lang, expected_doc_ids, expected_chunk_ids,
must_contain, forbidden, difficulty, group}``.

``expected_doc_ids: []`` with no chunk ids means the system should refuse. Chunk ids become
chunk supports (hit@k is chunk-level in kebab); with exactly one expected document each chunk
support also names it. Doc ids become doc supports when no chunk ids are given.
"""

from __future__ import annotations

from typing import Any

from kebab_eval_pipeline.golden.readers import EntryError, listing

#: The golden format this module reads (``--format kebab``, ``golden.format``).
FORMAT = "kebab"
#: Its place when a file's format is sniffed, most specific first:
#: a list of queries with expected_doc_ids / expected_chunk_ids.
SNIFF_RANK = 1

PASSED_THROUGH = (
    "id",
    "query",
    "lang",
    "must_contain",
    "forbidden",
    "difficulty",
    "group",
    "category",
    "tags",
    "notes",
)
KNOWN_KEYS = {*PASSED_THROUGH, "expected_doc_ids", "expected_chunk_ids"}


def looks_like(doc: Any) -> bool:
    return (
        isinstance(doc, list)
        and bool(doc)
        and all(isinstance(q, dict) and ("expected_doc_ids" in q or "expected_chunk_ids" in q) for q in doc)
    )


def entries(doc: list) -> tuple[list[tuple[list, Any]], list[str]]:
    return [([i], q) for i, q in enumerate(doc)], []


def to_canonical(entry: dict) -> tuple[dict, list[str]]:
    if "expected_doc_ids" not in entry and "expected_chunk_ids" not in entry:
        # Absent is not "should refuse": that is spelled expected_doc_ids: [] on purpose.
        raise EntryError(
            "expected_doc_ids", "missing (use expected_doc_ids: [] for a query that should refuse)"
        )
    chunk_ids = listing(entry.get("expected_chunk_ids"), "expected_chunk_ids")
    doc_ids = listing(entry.get("expected_doc_ids"), "expected_doc_ids")
    if chunk_ids:
        only_doc = {"doc_id": doc_ids[0]} if len(doc_ids) == 1 else {}
        supports = [{"chunk_id": c, **only_doc} for c in chunk_ids]
    else:
        supports = [{"doc_id": d} for d in doc_ids]
    fields = {k: entry[k] for k in PASSED_THROUGH if entry.get(k) is not None}
    fields.update(answerable=bool(supports), supports=supports)
    fields.setdefault("category", "general" if supports else "unanswerable")
    return fields, sorted(set(entry) - KNOWN_KEYS)
