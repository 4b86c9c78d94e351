"""What every system under test returns (SPEC §4): :class:`Hit` (and :class:`HitBlock`, a query's
hits as columns), :class:`Citation`, :class:`Answer`, and :class:`SystemInfo` (who the system is,
and its versions).

The shared vocabulary of the systems (their adapters in :mod:`kebab_eval_pipeline.systems` and
the reference system in :mod:`kebab_eval_pipeline.reference`) and of everything that reads their
results, so it sits below both and imports nothing from the package.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

ScoreKind = Literal["rrf", "bm25", "cosine", "other"]
RetrievalMode = Literal["lexical", "vector", "hybrid"]
# The tables store these as int64: a larger number from a system is a bad response, not a crash.
Int64 = Annotated[int, Field(ge=-(2**63), le=2**63 - 1)]
# Ranks start at 1; scores order TREC run files and feed fusion, so NaN/inf would silently reorder
# hits (JSON parsers accept NaN and Infinity): a response carrying one fails that query.
Rank = Annotated[int, Field(ge=1, le=2**63 - 1)]
FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]


#: Coverage fields a system may report (the reference chunker's ``ChunkStats`` names).
COVERAGE_KEYS: tuple[str, ...] = (
    "docs_processed",
    "docs_with_zero_chunks",
    "chunks",
    "chunks_skipped",
    "tokens_min",
    "tokens_mean",
    "tokens_p95",
    "tokens_max",
    "skipped_symlinks",
)

#: The versions that make two runs of a system comparable (:meth:`SystemInfo.versions`), in the
#: order the reports list them.
VERSION_KEYS: tuple[str, ...] = (
    "chunker_version",
    "embedding_model",
    "embedding_version",
    "prompt_template_version",
    "index_version",
    "parser_version",
)


class Hit(BaseModel):
    """One returned result, in rank order (kebab ``search_hit.v1`` field names)."""

    model_config = ConfigDict(extra="ignore")

    rank: Rank
    chunk_id: str | None = None
    doc_id: str | None = None
    doc_path: str | None = None
    heading_path: list[str] = Field(default_factory=list)
    line_start: Int64 | None = None
    line_end: Int64 | None = None
    snippet: str = ""
    score: FiniteFloat | None = None
    score_kind: ScoreKind = "other"
    lexical_score: FiniteFloat | None = None
    vector_score: FiniteFloat | None = None
    lexical_rank: Int64 | None = None
    vector_rank: Int64 | None = None
    index_version: str | None = None
    embedding_model: str | None = None
    chunker_version: str | None = None


#: The per-hit fields a block may hold (every hits-table column but query_id and rank: rank is
#: 1..n by position, the query id is the outcome's).
FIELDS: tuple[str, ...] = tuple(name for name in Hit.model_fields if name != "rank")
#: What an absent column holds in every row (a Hit's defaults).
DEFAULTS: dict[str, Any] = {name: None for name in FIELDS} | {"snippet": "", "score_kind": "other"}


class HitBlock(Sequence):
    """The hits of one query, best first, ranked 1..n, as columns (issue 25): what adapters and the
    reference system build, so that no Python object is made per hit on the way to the hits table
    (``systems/hits.py``). It still reads as the list of :class:`Hit` it stands for (``len``,
    indexing, iteration, ``==`` with a list of Hits): code that looks at hits one by one keeps
    working, and pays for a Hit model only when it looks.

    ``columns`` maps a field of :data:`FIELDS` to a list of ``n`` values already valid for the
    hits table (str or None, int or None, finite float or None, ``heading_path`` a list of str);
    a field left out holds its :data:`DEFAULTS` value (``heading_path``: an empty list) in every
    row, so a replayed list of chunk ids is one column. Blocks are not modified once built.
    """

    __slots__ = ("columns", "n")

    def __init__(self, n: int = 0, columns: dict[str, list] | None = None) -> None:
        self.n = n
        self.columns = columns or {}

    @classmethod
    def from_hits(cls, hits: Iterable[Hit]) -> HitBlock:
        """A block of ``hits`` (already validated Hit models), renumbered 1..n in their order."""
        hits = list(hits)
        columns: dict[str, list] = {}
        for name in FIELDS:
            values = [getattr(h, name) for h in hits]
            if name == "heading_path":
                values = [list(v) for v in values]  # the table shares no list with the caller's Hit
            default = [] if name == "heading_path" else DEFAULTS[name]
            if any(v != default for v in values):  # a column of defaults is left out
                columns[name] = values
        return cls(len(hits), columns)

    def value(self, name: str, i: int) -> Any:
        """Field ``name`` of hit ``i`` (0-based)."""
        column = self.columns.get(name)
        if column is not None:
            return column[i]
        return [] if name == "heading_path" else DEFAULTS[name]

    def column(self, name: str) -> list:
        """Field ``name`` of every hit, as a new list."""
        column = self.columns.get(name)
        if column is not None:
            return list(column)
        if name == "heading_path":
            return [[] for _ in range(self.n)]
        return [DEFAULTS[name]] * self.n

    def hit(self, i: int) -> Hit:
        """Hit ``i`` (0-based) as the documented model (values are valid: not validated again)."""
        fields = {name: self.value(name, i) for name in FIELDS}
        fields["heading_path"] = list(fields["heading_path"])
        return Hit.model_construct(rank=i + 1, **fields)

    def head(self, k: int) -> HitBlock:
        """The first ``k`` hits."""
        if k >= self.n:
            return self
        return HitBlock(k, {name: values[:k] for name, values in self.columns.items()})

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            return [self.hit(i) for i in range(*index.indices(self.n))]
        if index < 0:
            index += self.n
        if not 0 <= index < self.n:
            raise IndexError("hit index out of range")
        return self.hit(index)

    def __iter__(self) -> Iterator[Hit]:
        return (self.hit(i) for i in range(self.n))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, HitBlock):
            return self.n == other.n and all(self.column(f) == other.column(f) for f in FIELDS)
        if isinstance(other, list | tuple):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"HitBlock(n={self.n}, columns={sorted(self.columns)})"


def as_block(hits: HitBlock | Sequence[Hit] | None) -> HitBlock:
    """An outcome's hits as a block (an adapter may still hand over a list of Hit models)."""
    if isinstance(hits, HitBlock):
        return hits
    return HitBlock.from_hits(hits or [])


class Citation(BaseModel):
    model_config = ConfigDict(extra="ignore")

    chunk_id: str | None = None
    doc_path: str | None = None
    line_start: Int64 | None = None
    line_end: Int64 | None = None
    marker: str | None = None


class Answer(BaseModel):
    """A generated (or extracted) answer with its citations."""

    model_config = ConfigDict(extra="ignore")

    text: str = ""
    citations: list[Citation] = Field(default_factory=list)
    grounded: bool = False
    refused: bool = False
    refusal_reason: str | None = None
    prompt_template_version: str | None = None
    model: str | None = None
    prompt_tokens: Int64 | None = None
    completion_tokens: Int64 | None = None
    # what the system says this answer cost, US dollars (else priced from its tokens: systems/costs.py)
    cost_usd: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None


class SystemInfo(BaseModel):
    """Who the system under test is and the versions that make its runs comparable."""

    model_config = ConfigDict(extra="forbid")

    kind: str
    mode: str | None = None
    chunker_version: str | None = None
    embedding_model: str | None = None
    embedding_version: str | None = None
    prompt_template_version: str | None = None
    index_version: str | None = None
    parser_version: str | None = None
    details: dict[str, str] = Field(default_factory=dict)
    # Indexing coverage the system reports (COVERAGE_KEYS); None when it cannot tell.
    coverage: dict[str, float] | None = None
    # What the run's system could carry, as systems.capabilities.Capabilities.as_dict() stores it
    # ({"carries": [...], "lacks": {capability: reason}}); None for a run stored before it was recorded.
    capabilities: dict[str, Any] | None = None

    def versions(self) -> dict[str, str | None]:
        """The :data:`VERSION_KEYS` fields, in that order."""
        return {key: getattr(self, key) for key in VERSION_KEYS}
