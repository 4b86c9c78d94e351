"""ckv fixture YAML: ``{schema_version, queries: [{id, intent, expected: {file, symbol, kind,
line_range, section, expected_kind}, pending, notes, recorded_via}]}``.

The expected target becomes one support: ``file`` → ``rel_path``, ``line_range [a, b]`` →
lines a..b, ``symbol``/``kind`` → ``symbol``/``symbol_kind``, ``section`` → the support's
informational ``section``. Pending entries may leave ``line_range`` missing or ``[0, 0]``:
they then match on the file alone.
"""

from __future__ import annotations

from typing import Any

from kebab_eval_pipeline.golden.readers import EntryError, listing, mapping

#: The golden format this module reads (``--format ckv``, ``golden.format``).
FORMAT = "ckv"
#: Its place when a file's format is sniffed, most specific first:
#: a mapping whose queries have 'expected': tried first.
SNIFF_RANK = 0

TOP_LEVEL_KEYS = {"schema_version", "queries", "name", "description"}
QUERY_KEYS = {
    "id",
    "intent",
    "expected",
    "pending",
    "notes",
    "recorded_via",
    "timestamp",  # provenance written by ckv's recorder, like recorded_via: read, not kept
    "lang",
    "tags",
    "difficulty",
    "category",
}
EXPECTED_KEYS = {"file", "symbol", "kind", "line_range", "section", "expected_kind"}
#: Keys of this format (beyond the canonical ones) whose values are numbers: ``[start, end]``.
TYPED_KEYS = frozenset({"line_range"})


def looks_like(doc: Any) -> bool:
    return (
        isinstance(doc, dict)
        and isinstance(doc.get("queries"), list)
        and any(isinstance(q, dict) and "intent" in q for q in doc["queries"])
    )


def entries(doc: dict) -> tuple[list[tuple[list, Any]], list[str]]:
    return [(["queries", i], q) for i, q in enumerate(doc["queries"])], sorted(set(doc) - TOP_LEVEL_KEYS)


def to_canonical(entry: dict) -> tuple[dict, list[str]]:
    expected = mapping(entry.get("expected"), "expected")
    # Parse like the canonical bool (so a quoted "false" is not pending); junk fails validation later.
    raw_pending = entry.get("pending", False)
    pending = raw_pending is True or str(raw_pending).strip().lower() in ("true", "yes", "on", "1")
    support: dict[str, Any] = {"rel_path": expected.get("file")}
    line_range = listing(expected.get("line_range"), "expected.line_range")
    if line_range:
        if len(line_range) != 2:
            raise EntryError("expected.line_range", f"needs [start, end], got {len(line_range)} values")
        if not (pending and list(line_range) == [0, 0]):
            support["line_start"], support["line_end"] = line_range
    for source, target in (("symbol", "symbol"), ("kind", "symbol_kind"), ("section", "section")):
        if expected.get(source) not in (None, ""):
            support[target] = expected[source]
    fields = {
        "id": entry.get("id"),
        "query": entry.get("intent"),
        "answerable": True,
        "category": entry.get("category") or ("code" if expected.get("symbol") else "general"),
        "pending": raw_pending,
        "supports": [support],
        "expected_kind": expected.get("expected_kind"),
        "notes": entry.get("notes") or "",
    }
    fields.update({k: entry[k] for k in ("lang", "tags", "difficulty") if entry.get(k) is not None})
    unknown = sorted(set(entry) - QUERY_KEYS) + [
        f"expected.{k}" for k in sorted(set(expected) - EXPECTED_KEYS)
    ]
    return fields, unknown
