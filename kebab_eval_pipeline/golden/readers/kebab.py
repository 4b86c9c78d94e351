"""kebab list YAML: a top-level list of ``{id, query, expected_doc_ids, expected_chunk_ids, ...}``.

``expected_doc_ids: []`` with no chunk ids means the system should refuse.
Chunk ids become chunk supports (hit@k is chunk-level in kebab); doc ids become
doc supports when no chunk ids are given.
"""

from __future__ import annotations

from typing import Any

from kebab_eval_pipeline.golden.readers import RawQuery

KNOWN_KEYS = {
    "id",
    "query",
    "lang",
    "expected_doc_ids",
    "expected_chunk_ids",
    "must_contain",
    "forbidden",
    "difficulty",
    "group",
    "category",
    "tags",
    "notes",
}


def looks_like(doc: Any) -> bool:
    return (
        isinstance(doc, list)
        and all(isinstance(q, dict) and ("expected_doc_ids" in q or "expected_chunk_ids" in q) for q in doc)
        and bool(doc)
    )


def _as_list(value: Any) -> list:
    if value is None:
        return []
    return list(value) if isinstance(value, list | tuple) else value  # a non-list fails validation


def read(doc: list) -> tuple[list[RawQuery], list[str]]:
    items: list[RawQuery] = []
    unknown: set[str] = set()
    for i, entry in enumerate(doc):
        unknown |= set(entry) - KNOWN_KEYS
        chunk_ids = _as_list(entry.get("expected_chunk_ids"))
        doc_ids = _as_list(entry.get("expected_doc_ids"))
        if isinstance(chunk_ids, list) and chunk_ids:
            supports = [{"chunk_id": c} for c in chunk_ids]
            if isinstance(doc_ids, list) and len(doc_ids) == 1:
                supports = [{**s, "doc_id": doc_ids[0]} for s in supports]
        elif isinstance(doc_ids, list):
            supports = [{"doc_id": d} for d in doc_ids]
        else:
            supports = doc_ids
        fields = {
            "id": entry.get("id"),
            "query": entry.get("query"),
            "lang": entry.get("lang") or "",
            "answerable": bool(supports),
            "category": entry.get("category") or ("general" if supports else "unanswerable"),
            "difficulty": entry.get("difficulty") or "",
            "tags": entry.get("tags") or [],
            "group": entry.get("group"),
            "supports": supports,
            "must_contain": _as_list(entry.get("must_contain")),
            "forbidden": _as_list(entry.get("forbidden")),
        }
        items.append(RawQuery(fields=fields, key_path=[i]))
    return items, sorted(unknown)
