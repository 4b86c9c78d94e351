"""What every system under test returns (SPEC §4): :class:`Hit`, :class:`Citation`,
:class:`Answer`, and :class:`SystemInfo` (who the system is, and its versions).

The shared vocabulary of the systems (their adapters in :mod:`kebab_eval_pipeline.systems` and
the reference system in :mod:`kebab_eval_pipeline.reference`) and of everything that reads their
results, so it sits below both and imports nothing from the package.
"""

from __future__ import annotations

from typing import Annotated, Literal

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

    def versions(self) -> dict[str, str | None]:
        return {
            "chunker_version": self.chunker_version,
            "embedding_model": self.embedding_model,
            "embedding_version": self.embedding_version,
            "prompt_template_version": self.prompt_template_version,
            "index_version": self.index_version,
            "parser_version": self.parser_version,
        }
