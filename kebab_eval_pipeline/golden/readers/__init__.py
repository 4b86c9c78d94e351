"""Golden-set readers: each maps one on-disk format onto canonical ``GoldenQuery`` fields.

A reader has three parts: ``looks_like(doc)`` (content sniffing), ``entries(doc)`` (the
raw query entries with where they sit, plus unknown top-level keys) and
``to_canonical(entry)`` (one entry's canonical fields plus the unknown keys it ignored).
A reader raises :class:`EntryError` for an entry whose shape it cannot map; validation
and error collection happen once, in :mod:`kebab_eval_pipeline.golden.load`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kebab_eval_pipeline.golden.model import GoldenQuery, Support

QUERY_FIELDS = frozenset(GoldenQuery.model_fields)
SUPPORT_FIELDS = frozenset(Support.model_fields)


@dataclass
class RawQuery:
    fields: Any  # canonical GoldenQuery fields (a dict once mapped), not yet validated
    key_path: list[str | int]  # where the entry starts in a YAML/JSON document
    line: int | None = None  # known line (JSONL), else looked up from key_path


class EntryError(ValueError):
    """An entry a reader cannot map: ``field`` names the part, the message the reason."""

    def __init__(self, field: str | None, reason: str):
        super().__init__(reason)
        self.field = field


def mapping(value: Any, field: str) -> dict:
    if not isinstance(value, dict):
        raise EntryError(field, f"must be a mapping, got {type(value).__name__}")
    return value


def listing(value: Any, field: str) -> list:
    """``None`` → []; a list stays; anything else is an error (a lone string is not a list)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise EntryError(field, f"must be a list, got {type(value).__name__}")
    return value


def split_known(entry: dict, known: frozenset[str], prefix: str = "") -> tuple[dict, list[str]]:
    """(the known keys of ``entry``, the unknown ones as dotted field names)."""
    if entry.keys() <= known:  # the common case: no copy (large sets load ~2x faster)
        return entry, []
    kept = {k: v for k, v in entry.items() if k in known}
    return kept, [f"{prefix}{k}" for k in entry if k not in known]
