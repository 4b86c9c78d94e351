"""Golden-set readers: each maps one on-disk format onto canonical ``GoldenQuery`` fields.

A reader has three parts: ``looks_like(doc)`` (content sniffing), ``entries(doc)`` (the
raw query entries with where they sit, plus unknown top-level keys) and
``to_canonical(entry)`` (one entry's canonical fields plus the unknown keys it ignored).
A reader raises :class:`EntryError` for an entry whose shape it cannot map; validation
and error collection happen once, in :mod:`kebab_eval_pipeline.golden.load`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, get_args, get_origin

from kebab_eval_pipeline.golden.model import GoldenQuery, Support

QUERY_FIELDS = frozenset(GoldenQuery.model_fields)
SUPPORT_FIELDS = frozenset(Support.model_fields)


def _holds_numbers(annotation: Any) -> bool:
    """Whether a field's type holds numbers or bools (``int``, ``list[list[int]]``, ``bool``); text,
    Literals of text and nested models (their own fields decide) do not."""
    if annotation in (int, float, bool):
        return True
    if get_origin(annotation) is Literal:
        return False
    return any(_holds_numbers(a) for a in get_args(annotation))


#: Canonical fields meant as numbers or bools (``answerable``, ``grade``, ``line_start`` …): the only
#: keys whose unquoted YAML values are typed. Every other value — ids, tags, lang, headings — is
#: read as the text written (``yaml_io.parse_yaml``'s ``typed_keys``). A reader whose format has
#: more such keys of its own lists them in its ``TYPED_KEYS``.
CANONICAL_TYPED_KEYS = frozenset(
    name
    for model in (GoldenQuery, Support)
    for name, info in model.model_fields.items()
    if _holds_numbers(info.annotation)
)


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
