"""Canonical format (SPEC §3.1): ``{schema_version: "1", name, queries: [GoldenQuery...]}``."""

from __future__ import annotations

from typing import Any

from kebab_eval_pipeline.golden.readers import RawQuery

TOP_LEVEL_KEYS = {"schema_version", "name", "queries", "description"}


def looks_like(doc: Any) -> bool:
    return (
        isinstance(doc, dict)
        and isinstance(doc.get("queries"), list)
        and not any(isinstance(q, dict) and "intent" in q for q in doc["queries"])
    )


def read(doc: dict) -> tuple[list[RawQuery], list[str]]:
    """Return the queries and the unknown top-level keys (warned about, not fatal)."""
    unknown = sorted(set(doc) - TOP_LEVEL_KEYS)
    items = [
        RawQuery(fields=dict(q) if isinstance(q, dict) else q, key_path=["queries", i])
        for i, q in enumerate(doc["queries"])
    ]
    return items, unknown
