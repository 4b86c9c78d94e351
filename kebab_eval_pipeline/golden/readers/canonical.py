"""Canonical format (SPEC §3.1): ``{schema_version: "1", name, queries: [GoldenQuery...]}``,
as YAML or JSON, or JSONL with one query per line.

This is the tool's own format, so a query or support key it does not know is an error, not a
warning: ignoring it would drop data (a misspelt ``answerabel``, a ``gold_supports`` list from the
support-anchor format). Unknown top-level keys stay warnings.
"""

from __future__ import annotations

from typing import Any

from kebab_eval_pipeline.golden.readers import (
    QUERY_FIELDS,
    SUPPORT_FIELDS,
    listing,
    mapping,
    split_known,
)

#: The golden format this module reads (``--format canonical``, ``golden.format``).
FORMAT = "canonical"
#: Its place when a file's format is sniffed, most specific first:
#: the model itself: tried last, it fits the most.
SNIFF_RANK = 4

TOP_LEVEL_KEYS = {"schema_version", "name", "queries", "description"}
UNKNOWN_FIELDS_ARE_ERRORS = True  # per query and per support (golden.load reads this flag)
#: Keys of the other formats, so the error can say which --format reads the file.
FOREIGN_KEYS = {
    "gold_supports": "supports",
    "question": "supports",
    "recency_conflict_rule": "supports",
    "snippets": "supports",
    "expected_doc_ids": "kebab",
    "expected_chunk_ids": "kebab",
    "intent": "ckv",
    "expected": "ckv",
    "qid": "wfgy",
    "gold_citations": "wfgy",
}


def looks_like(doc: Any) -> bool:
    return (
        isinstance(doc, dict)
        and isinstance(doc.get("queries"), list)
        and not any(isinstance(q, dict) and "intent" in q for q in doc["queries"])
    )


def looks_like_line(entry: dict) -> bool:
    return "query" in entry or "supports" in entry


def entries(doc: dict) -> tuple[list[tuple[list, Any]], list[str]]:
    return [(["queries", i], q) for i, q in enumerate(doc["queries"])], sorted(set(doc) - TOP_LEVEL_KEYS)


def to_canonical(entry: dict) -> tuple[dict, list[str]]:
    fields, unknown = split_known(entry, QUERY_FIELDS)
    if fields.get("supports"):
        supports = []
        for j, support in enumerate(listing(fields["supports"], "supports")):
            kept, extra = split_known(mapping(support, f"supports[{j}]"), SUPPORT_FIELDS, f"supports[{j}].")
            supports.append(kept)
            unknown += extra
        if unknown:
            fields = {**fields, "supports": supports}
    return fields, unknown
