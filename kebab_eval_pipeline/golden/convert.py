"""Write a golden set in the canonical format (YAML, JSON or JSONL) and export its JSON Schema.

Canonical output keeps every field that differs from its default, so loading it again gives
the same queries (``load(convert(load(x))) == load(x)``, sources and hashes aside).
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from kebab_eval_pipeline.golden.model import SCHEMA_VERSION, GoldenQuery, GoldenSet


def query_document(query: GoldenQuery) -> dict[str, Any]:
    """One query as a canonical mapping, without default-valued fields (``id`` and ``query`` always)."""
    doc = query.model_dump(exclude_defaults=True)
    doc["supports"] = [s.model_dump(exclude_defaults=True) for s in query.supports]
    if not doc["supports"]:
        del doc["supports"]
    return {
        "id": query.id,
        "query": query.query,
        **{k: v for k, v in doc.items() if k not in ("id", "query")},
    }


def canonical_document(golden: GoldenSet) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "name": golden.name,
        "queries": [query_document(q) for q in golden.queries],
    }


def render_canonical(golden: GoldenSet, suffix: str = ".yaml") -> str:
    """The canonical text for a file ending in ``suffix`` (``.yaml``/``.yml``, ``.json`` or ``.jsonl``)."""
    if suffix == ".jsonl":
        return "".join(json.dumps(query_document(q), ensure_ascii=False) + "\n" for q in golden.queries)
    doc = canonical_document(golden)
    if suffix == ".json":
        return json.dumps(doc, ensure_ascii=False, indent=2) + "\n"
    return yaml_text(doc)


def yaml_text(value: Any) -> str:
    """``value`` as block YAML, keys in their order, lines up to 100 characters. PyYAML writes NEL /
    LS / PS raw inside quoted scalars, where YAML reads them as line breaks: when any is present,
    non-ASCII is escaped so the round trip stays exact (else it is written as it is)."""
    readable = not any(ch in json.dumps(value, ensure_ascii=False) for ch in ("\x85", "\u2028", "\u2029"))
    return yaml.safe_dump(value, allow_unicode=readable, sort_keys=False, width=100)


def json_schema() -> dict[str, Any]:
    """JSON Schema of the canonical document (``schema_version: "1"``), from the pydantic model."""
    schema = GoldenSet.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = f"kebab-eval golden set (schema_version {SCHEMA_VERSION})"
    for name in ("source", "format", "sha256"):  # filled by the loader, never written by curators
        schema["properties"].pop(name, None)
    return schema
