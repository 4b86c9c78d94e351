"""Support-anchor YAML/JSONL: ``{id, question (or query), answerable, category, tags, difficulty,
gold_supports: [{rel_path, heading_path, snippets}], required_support_groups,
recency_conflict_rule}`` — a list, a ``{queries: [...]}`` mapping, or one entry per JSONL line.

A gold support with several ``snippets`` becomes one canonical support per snippet, and the
groups are rewritten so those supports are alternatives: the gold support is found when any
of its snippets is. Without explicit groups, each gold support is its own group.
"""

from __future__ import annotations

from typing import Any

from kebab_eval_pipeline.golden.readers import EntryError, listing, mapping

#: The golden format this module reads (``--format supports``, ``golden.format``).
FORMAT = "supports"
#: Its place when a file's format is sniffed, most specific first:
#: support-anchor queries ('question' / 'gold_supports').
SNIFF_RANK = 3

# Fields copied to the canonical query as they are (when set).
PASSED_THROUGH = (
    "tags",
    "difficulty",
    "lang",
    "group",
    "must_contain",
    "forbidden",
    "gold_claim_substr",
    "notes",
    "pending",
)
QUERY_KEYS = {
    "id",
    "question",
    "query",  # the canonical name, accepted as a synonym of question
    "answerable",
    "category",
    "gold_supports",
    "required_support_groups",
    "recency_conflict_rule",
    *PASSED_THROUGH,
}
SUPPORT_KEYS = {"rel_path", "heading_path", "snippets", "snippet", "grade", "line_start", "line_end"}
TOP_LEVEL_KEYS = {"schema_version", "name", "queries", "description"}
#: Gold-data keys of the other formats: ignoring one would drop the query's evidence, so it is an
#: error naming the format that reads it (other unknown keys are warnings).
FOREIGN_KEYS = {
    "supports": "canonical",
    "expected_doc_ids": "kebab",
    "expected_chunk_ids": "kebab",
    "expected": "ckv",
    "gold_citations": "wfgy",
}


def _is_entry(q: Any) -> bool:
    return isinstance(q, dict) and ("gold_supports" in q or ("question" in q and "qid" not in q))


def _fits(q: Any) -> bool:
    """An entry this format can read: a mapping without the canonical ``supports`` list."""
    return isinstance(q, dict) and "supports" not in q and "qid" not in q


def looks_like(doc: Any) -> bool:
    # Every entry a support-anchor one; or, with ``query:`` spelled the canonical way, entries that
    # all fit and at least one with gold_supports (unanswerable ones may have none).
    items = doc.get("queries") if isinstance(doc, dict) else doc
    if not isinstance(items, list) or not items:
        return False
    return all(_is_entry(q) for q in items) or (
        all(_fits(q) for q in items) and any(isinstance(q, dict) and "gold_supports" in q for q in items)
    )


def looks_like_line(entry: dict) -> bool:
    return _is_entry(entry)


def entries(doc: Any) -> tuple[list[tuple[list, Any]], list[str]]:
    if isinstance(doc, dict):
        return [(["queries", i], q) for i, q in enumerate(doc["queries"])], sorted(set(doc) - TOP_LEVEL_KEYS)
    return [([i], q) for i, q in enumerate(doc)], []


def _question(entry: dict) -> Any:
    """``question``, or ``query`` (the canonical spelling); both must agree when both are given."""
    question, query = entry.get("question"), entry.get("query")
    if question is not None and query is not None and question != query:
        raise EntryError("query", "'question' and 'query' are both set and differ: keep one")
    if question is None and query is None:
        raise EntryError("question", "missing: the query text (as 'question' or 'query')")
    return question if question is not None else query


def to_canonical(entry: dict) -> tuple[dict, list[str]]:
    foreign = [k for k in FOREIGN_KEYS if k in entry]
    if foreign:
        fmt = FOREIGN_KEYS[foreign[0]]
        raise EntryError(
            foreign[0],
            f"'{foreign[0]}' belongs to the {fmt} format, not support-anchor (it would be dropped): "
            f"read the file with --format {fmt}",
        )
    unknown = sorted(set(entry) - QUERY_KEYS)
    supports: list[dict] = []
    expanded: list[list[int]] = []  # gold support index → its canonical support indexes
    for i, gold in enumerate(listing(entry.get("gold_supports"), "gold_supports")):
        gold = mapping(gold, f"gold_supports[{i}]")
        unknown += [f"gold_supports[{i}].{k}" for k in sorted(set(gold) - SUPPORT_KEYS)]
        base = {
            k: gold[k] for k in ("rel_path", "heading_path", "grade", "line_start", "line_end") if k in gold
        }
        snippets = listing(gold.get("snippets"), f"gold_supports[{i}].snippets")
        if gold.get("snippet") is not None:
            snippets = [gold["snippet"], *snippets]
        first = len(supports)
        supports += [{**base, "snippet": s} for s in snippets] if snippets else [base]
        expanded.append(list(range(first, len(supports))))
    groups = listing(entry.get("required_support_groups"), "required_support_groups")
    split = any(len(e) > 1 for e in expanded)
    if groups and split:
        rewritten = []
        for g, group in enumerate(groups):
            members = listing(group, f"required_support_groups[{g}]")
            bad = [ix for ix in members if not isinstance(ix, int) or not 0 <= ix < len(expanded)]
            if bad:
                raise EntryError(
                    f"required_support_groups[{g}]",
                    f"index {bad} out of range (the query has {len(expanded)} gold supports)",
                )
            rewritten.append([c for ix in members for c in expanded[ix]])
        groups = rewritten
    elif split:
        groups = expanded
    category = entry.get("category") or "general"
    if isinstance(category, str):
        category = category.replace("/", "_")  # the seed writes "recency/conflict"
    fields = {
        "id": entry.get("id"),
        "query": _question(entry),
        "answerable": entry.get("answerable", True),
        "category": category,
        "supports": supports,
        "required_support_groups": groups,
        "recency_rule": entry.get("recency_conflict_rule"),
    }
    fields.update({k: entry[k] for k in PASSED_THROUGH if entry.get(k) is not None})
    return fields, unknown
