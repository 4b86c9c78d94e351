"""The canonical golden-set model (SPEC §3.1).

Every reader maps its format onto :class:`GoldenQuery`; everything downstream
(systems, matching, metrics) sees only this model or its table form.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

SCHEMA_VERSION = "1"
LINE_BOUND = 2**53  # line numbers: float64-exact
GRADE_BOUND = 2**31 - 1  # relevance grades: a 32-bit int in TREC qrels

RecencyRule = Literal["cite_newer", "cite_both", "acknowledge_both"]


class Support(BaseModel):
    """One piece of gold evidence. A hit matches when every field set here agrees (SPEC §5)."""

    model_config = ConfigDict(extra="forbid")

    chunk_id: str | None = None
    doc_id: str | None = None
    rel_path: str | None = None
    heading_path: list[str] | None = None
    line_start: int | None = None
    line_end: int | None = None
    snippet: str | None = None
    symbol: str | None = None
    symbol_kind: str | None = None
    section: str | None = None  # informational anchor (ckv ``expected.section``); never matched on
    grade: int = 1

    @field_validator("line_start", "line_end", "grade", mode="before")
    @classmethod
    def _in_range(cls, value: object, info: ValidationInfo) -> object:
        # Lines are compared as float64 by the matcher (exact up to 2**53); grades are stored as
        # int64, negated to sort, and written to TREC qrels, which tools read as a C int.
        bound = GRADE_BOUND if info.field_name == "grade" else LINE_BOUND
        # Before parsing: pydantic's own message for an integer past 64 bits names no range (and the
        # fast JSONL parser reads integers past 64 bits as floats).
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if number and not -bound <= value <= bound:  # NaN too
            if isinstance(value, float):
                shown = f"{value:.0f}" if abs(value) < 1e20 else f"{value:.3g}"
            else:
                shown = f"an integer of {len(str(abs(value)))} digits" if abs(value) > 10**20 else str(value)
            raise ValueError(f"out of range: {shown} is not between {-bound} and {bound}")
        return value

    def is_empty(self) -> bool:
        """True when the support names no evidence a hit can match (symbol and section are never
        matched: hits carry neither), so it could never be found."""
        return not (
            self.chunk_id
            or self.doc_id
            or self.rel_path
            or self.heading_path
            or self.snippet
            or self.line_start is not None
            or self.line_end is not None
        )


class GoldenQuery(BaseModel):
    """One golden query. ``answerable=False`` means the correct behaviour is to refuse."""

    model_config = ConfigDict(extra="forbid")

    id: str
    query: str
    lang: str = ""
    answerable: bool = True
    category: str = "general"
    difficulty: str = ""
    tags: list[str] = Field(default_factory=list)
    group: str | None = None
    pending: bool = False
    supports: list[Support] = Field(default_factory=list)
    required_support_groups: list[list[int]] = Field(default_factory=list)
    must_contain: list[str] = Field(default_factory=list)
    forbidden: list[str] = Field(default_factory=list)
    gold_claim_substr: list[str] = Field(default_factory=list)
    recency_rule: RecencyRule | None = None
    expected_kind: str | None = None
    notes: str = ""  # curator's notes (kebab/ckv ``notes``); informational
    constraints: list[str] = Field(default_factory=list)  # WFGY ``constraints``; informational

    @field_validator("id", mode="before")
    @classmethod
    def _id_as_text(cls, value: object) -> object:
        # YAML turns `id: 17` into an int; ids are identifiers, keep them as text.
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        return value

    def expected_doc_ids(self) -> frozenset[str]:
        """The distinct documents the supports point at (doc_id, else rel_path)."""
        return frozenset(s.doc_id or s.rel_path for s in self.supports if (s.doc_id or s.rel_path))


class GoldenSet(BaseModel):
    """A loaded golden set: its queries plus where they came from."""

    model_config = ConfigDict(extra="forbid")

    schema_version: str = SCHEMA_VERSION
    name: str = ""
    source: str = ""
    format: str = "canonical"
    sha256: str = ""
    queries: list[GoldenQuery]

    def by_id(self) -> dict[str, GoldenQuery]:
        return {q.id: q for q in self.queries}
