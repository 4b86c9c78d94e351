"""Run every golden query against a system under test and collect typed tables.

A query that raises is a row with ``error`` set, never a missing row and never
a crashed run. Latencies are measured here, the same way for every adapter.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from kebab_eval_pipeline.golden.tables import typed_frame
from kebab_eval_pipeline.systems.base import (
    CITATION_COLUMNS,
    HIT_COLUMNS,
    OUTCOME_COLUMNS,
    Answer,
    SystemInfo,
    SystemUnderTest,
)

Progress = Callable[[int, int], None]


@dataclass
class RetrievalResults:
    """What a system returned for a golden set: one outcome row per query, hits and citations."""

    outcomes: pd.DataFrame  # OUTCOME_COLUMNS, one row per golden query
    hits: pd.DataFrame  # HIT_COLUMNS, one row per (query_id, rank)
    citations: pd.DataFrame  # CITATION_COLUMNS
    known_chunks: pd.DataFrame  # chunk_id: what the system holds (empty when it cannot tell)
    system: SystemInfo


def _error_text(exc: BaseException) -> str:
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {message[:500]}" if message else type(exc).__name__


def run_golden(
    system: SystemUnderTest,
    queries: pd.DataFrame,
    k: int,
    answers: bool,
    progress: Progress | None = None,
) -> RetrievalResults:
    """Search (and, when ``answers``, ask) every query of the golden ``queries`` table
    (columns ``query_id``, ``query``); ``k`` is how many hits to request.

    Returns :class:`RetrievalResults`. Exceptions from the system become the
    query's ``error`` ("Class: message"); the query keeps its row with zero hits.
    """
    outcome_rows: list[dict] = []
    hit_rows: list[dict] = []
    citation_rows: list[dict] = []
    total = len(queries)
    for n, (query_id, text) in enumerate(zip(queries["query_id"], queries["query"], strict=True), start=1):
        row: dict = {"query_id": query_id, "n_hits": 0, "timed_out": False, "answered": False}
        hits = []
        started = time.perf_counter()
        try:
            hits = system.search(text, k)
        except Exception as exc:  # the system under test may fail in any way; record, don't crash
            row["error"] = _error_text(exc)
        row["retrieval_ms"] = (time.perf_counter() - started) * 1000.0
        row["n_hits"] = len(hits)
        hit_rows += [{"query_id": query_id, **h.model_dump()} for h in hits]
        if answers and "error" not in row:
            started = time.perf_counter()
            try:
                answer: Answer = system.ask(text, hits)
                row.update(
                    answered=True,
                    answer_text=answer.text,
                    refused=answer.refused,
                    grounded=answer.grounded,
                    refusal_reason=answer.refusal_reason,
                    prompt_template_version=answer.prompt_template_version,
                    model=answer.model,
                    prompt_tokens=answer.prompt_tokens,
                    completion_tokens=answer.completion_tokens,
                )
                citation_rows += [
                    {"query_id": query_id, "position": i, **c.model_dump()}
                    for i, c in enumerate(answer.citations)
                ]
            except Exception as exc:
                row["error"] = _error_text(exc)
            row["answer_ms"] = (time.perf_counter() - started) * 1000.0
        outcome_rows.append(row)
        if progress:
            progress(n, total)
    known = system.known_chunk_ids()
    return RetrievalResults(
        outcomes=typed_frame(outcome_rows, OUTCOME_COLUMNS),
        hits=typed_frame(hit_rows, HIT_COLUMNS),
        citations=typed_frame(citation_rows, CITATION_COLUMNS),
        known_chunks=typed_frame({"chunk_id": sorted(known or [])}, {"chunk_id": "string"}),
        system=system.info(),
    )
