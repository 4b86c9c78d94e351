"""WFGY gold JSONL: one ``{qid, question, answerable, gold_claim_substr, gold_citations,
constraints}`` per line. Citation ids (``p1#2``) are chunk ids: each becomes a chunk support,
and every one must be retrieved for ``recall_all`` (WFGY's recall@k)."""

from __future__ import annotations

from typing import Any

from kebab_eval_pipeline.golden.readers import listing

#: The golden format this module reads (``--format wfgy``, ``golden.format``).
FORMAT = "wfgy"
#: Its place when a file's format is sniffed, most specific first:
#: a list (or JSONL lines) of queries with 'qid'.
SNIFF_RANK = 2

KNOWN_KEYS = {
    "qid",
    "question",
    "answerable",
    "gold_claim_substr",
    "gold_citations",
    "constraints",
    "category",
    "tags",
    "difficulty",
    "lang",
}


def looks_like(doc: Any) -> bool:
    return isinstance(doc, list) and bool(doc) and all(isinstance(q, dict) and "qid" in q for q in doc)


def looks_like_line(entry: dict) -> bool:
    return "qid" in entry


def entries(doc: list) -> tuple[list[tuple[list, Any]], list[str]]:
    return [([i], q) for i, q in enumerate(doc)], []


def to_canonical(entry: dict) -> tuple[dict, list[str]]:
    citations = listing(entry.get("gold_citations"), "gold_citations")
    fields = {
        "id": entry.get("qid"),
        "query": entry.get("question"),
        "answerable": entry.get("answerable", True),
        "supports": [{"chunk_id": c} for c in citations],
        "gold_claim_substr": listing(entry.get("gold_claim_substr"), "gold_claim_substr"),
        "constraints": listing(entry.get("constraints"), "constraints"),
    }
    fields.update(
        {k: entry[k] for k in ("category", "tags", "difficulty", "lang") if entry.get(k) is not None}
    )
    if "category" not in fields:
        fields["category"] = "general" if fields["answerable"] is not False else "unanswerable"
    return fields, sorted(set(entry) - KNOWN_KEYS)
