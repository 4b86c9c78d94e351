"""The adapter protocol, and the tables a run's results are stored in (SPEC §4).

Adapters produce pydantic :class:`~kebab_eval_pipeline.contract.Hit` /
:class:`~kebab_eval_pipeline.contract.Answer` objects at the edge; the runner turns them into
the typed tables declared here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:  # annotations only: `kebab-eval ref search` must start without pandas
    from collections.abc import Sequence

    import pandas as pd

    from kebab_eval_pipeline.contract import SystemInfo
    from kebab_eval_pipeline.systems.outcome import Progress, QueryOutcome, QueryRequest


@runtime_checkable
class SystemUnderTest(Protocol):
    """The adapter protocol (reference, command, http, replay).

    ``run_queries`` returns exactly one :class:`~.outcome.QueryOutcome` per request, in
    request order, and never raises for a failing query: failures are outcomes with an
    error class. Construction is where misconfiguration fails (InputError / ValueError).
    An adapter may also expose ``run_warnings: list[str]`` about the run as a whole.
    """

    def info(self) -> SystemInfo: ...

    def run_queries(
        self,
        requests: Sequence[QueryRequest],
        k: int,
        answers: bool,
        progress: Progress | None = None,
    ) -> list[QueryOutcome]: ...

    def known_chunk_ids(self) -> frozenset[str] | None:
        """Chunk ids the system holds, for citation resolution; None when unknown."""
        ...

    def catalogue(self) -> pd.DataFrame | None:
        """What the index holds (CATALOGUE_COLUMNS, one row per chunk), for stale-golden checks;
        None when the system cannot tell."""
        ...


class OpaqueSystem:
    """Mixin for systems that cannot list what they hold (external services, CLIs, traces):
    citation resolution and stale-golden checks are then skipped, not guessed."""

    def known_chunk_ids(self) -> None:
        return None

    def catalogue(self) -> None:
        return None


# What a system's index holds: one row per chunk.
CATALOGUE_COLUMNS: dict[str, str] = {
    "chunk_id": "string",
    "doc_id": "string",
    "doc_path": "string",
    "heading_path": "object",  # list[str]
}


# Declared columns of the retrieval_results tables (pandas dtypes).
HIT_COLUMNS: dict[str, str] = {
    "query_id": "string",
    "rank": "int64",
    "chunk_id": "string",
    "doc_id": "string",
    "doc_path": "string",
    "heading_path": "object",  # list[str]
    "line_start": "Int64",
    "line_end": "Int64",
    "snippet": "string",
    "score": "float64",
    "score_kind": "string",
    "lexical_score": "float64",
    "vector_score": "float64",
    "lexical_rank": "Int64",
    "vector_rank": "Int64",
    "index_version": "string",
    "embedding_model": "string",
    "chunker_version": "string",
}

OUTCOME_COLUMNS: dict[str, str] = {
    "query_id": "string",
    "n_hits": "int64",
    "retrieval_ms": "float64",
    "answer_ms": "float64",
    "error": "string",  # "error_class: message" or null
    "error_class": "string",  # timeout | http_5xx | http_4xx | connection | bad_json | … (outcome.py)
    "timed_out": "bool",
    "attempts": "Int64",  # requests sent, retries included
    "answered": "bool",  # an answer was requested and produced
    "answer_text": "string",
    "refused": "boolean",
    "grounded": "boolean",
    "refusal_reason": "string",
    "prompt_template_version": "string",
    "model": "string",
    "prompt_tokens": "Int64",
    "completion_tokens": "Int64",
    "scope": "object",  # list[str]: the folders the system searched, when it reports a scope; else null
}

CITATION_COLUMNS: dict[str, str] = {
    "query_id": "string",
    "position": "int64",
    "chunk_id": "string",
    "doc_path": "string",
    "line_start": "Int64",
    "line_end": "Int64",
    "marker": "string",
}
