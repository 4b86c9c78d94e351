"""Golden-set readers: each maps one on-disk format onto canonical ``GoldenQuery`` fields.

A reader takes the parsed document and returns :class:`RawQuery` items: the
canonical field mapping plus where the entry sits in its file. Validation and
error collection happen once, in :mod:`kebab_eval_pipeline.golden.load`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class RawQuery:
    fields: dict[str, Any]  # canonical GoldenQuery fields, not yet validated
    key_path: list[str | int]  # where the entry starts in a YAML/JSON document
    line: int | None = None  # known line (JSONL), else looked up from key_path
