"""Run every golden query against a system under test and collect typed tables.

The adapter returns one :class:`~.outcome.QueryOutcome` per query; this module turns
them into the ``retrieval_results`` tables and makes the "never lose a query" promise
hold even against a buggy adapter: a missing outcome becomes a ``missing_outcome`` row,
a duplicate is dropped with a warning.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import pandas as pd

from kebab_eval_pipeline.contract import Citation, SystemInfo
from kebab_eval_pipeline.foundation import cancellation
from kebab_eval_pipeline.foundation.gc_pause import gc_paused
from kebab_eval_pipeline.foundation.net.secrets import SecretMask
from kebab_eval_pipeline.foundation.parquet_parts import ParquetParts
from kebab_eval_pipeline.golden.tables import typed_frame
from kebab_eval_pipeline.systems.base import (
    CITATION_COLUMNS,
    HIT_COLUMNS,
    OUTCOME_ANSWER_COLUMNS,
    OUTCOME_COLUMNS,
)
from kebab_eval_pipeline.systems.hits import HitBlock, as_block, hits_frame
from kebab_eval_pipeline.systems.outcome import MISSING_OUTCOME, Progress, QueryOutcome, QueryRequest
from kebab_eval_pipeline.systems.per_query import PerQueryAdapter
from kebab_eval_pipeline.systems.protocol import SystemUnderTest, system_capabilities
from kebab_eval_pipeline.systems.versions import (
    HIT_VERSION_FIELDS,
    count_in_tables,
    reported_versions,
    with_reported_versions,
)

MAX_WARNINGS = 50  # per run; the rest are counted, not listed
# Per-query adapters (reference, command) are called this many queries at a time, and each batch
# becomes table pieces before the next: what a batch holds per hit (the reference system's Hit
# models before they become columns) never exists for the whole run at once (at 100k queries ×
# 10 hits, Hit models held ~1.5 GiB; benchmarks/bench_scale.py). Other adapters keep one call per
# run: http pools its connections per call, and replay's run-level warnings (trace queries not in
# the golden set) need every request at once.
BATCH_QUERIES = 5_000
_CITATION_FIELDS = tuple(Citation.model_fields)


@dataclass
class RetrievalResults:
    """What a system returned for a golden set: one outcome row per query, hits and citations."""

    outcomes: pd.DataFrame  # OUTCOME_COLUMNS, one row per golden query
    hits: pd.DataFrame  # HIT_COLUMNS, one row per (query_id, rank)
    citations: pd.DataFrame  # CITATION_COLUMNS
    known_chunks: pd.DataFrame  # chunk_id: what the system holds (empty when it cannot tell)
    system: SystemInfo
    # Reported by the system per hit / answer: {field: {value: count}} (see versions.py).
    versions_reported: dict[str, dict[str, int]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)  # adapter warnings, "query_id: text"


def _error_text(outcome: QueryOutcome) -> str | None:
    if outcome.error_class is None:
        return None
    return f"{outcome.error_class}: {outcome.error}" if outcome.error else outcome.error_class


def _outcome_row(outcome: QueryOutcome, answers: bool) -> dict:
    row: dict = {
        "query_id": outcome.query_id,
        "n_hits": len(outcome.hits),
        "retrieval_ms": outcome.retrieval_ms,
        "answer_ms": outcome.answer_ms,
        "error": _error_text(outcome),
        "error_class": outcome.error_class,
        "timed_out": outcome.timed_out,
        "attempts": outcome.attempts,
        "answered": False,
        "scope": None if outcome.scope is None else list(outcome.scope),
    }
    answer = outcome.answer
    if answers and answer is not None:
        row["answered"] = True
        row.update((c, getattr(answer, "text" if c == "answer_text" else c)) for c in OUTCOME_ANSWER_COLUMNS)
    return row


def collect_outcomes(
    requests: list[QueryRequest], outcomes: list[QueryOutcome], answers: bool
) -> tuple[list[QueryOutcome], list[str]]:
    """Exactly one outcome per request, in request order; warnings for anything repaired."""
    by_id: dict[str, QueryOutcome] = {}
    warnings = []
    for outcome in outcomes:
        if outcome.query_id in by_id:
            warnings.append(f"{outcome.query_id}: the adapter returned a second outcome; kept the first")
            continue
        by_id[outcome.query_id] = outcome
    wanted = {r.query_id for r in requests}
    unknown = [qid for qid in by_id if qid not in wanted]
    if unknown:
        warnings.append(
            f"the adapter returned outcomes for {len(unknown)} unknown query id(s): {unknown[:5]}"
        )
    ordered = []
    for request in requests:
        outcome = by_id.get(request.query_id)
        if outcome is None:
            outcome = QueryOutcome(
                query_id=request.query_id,
                error_class=MISSING_OUTCOME,
                error="the adapter returned no outcome for this query",
            )
        if not answers:
            outcome.answer = None
        ordered.append(outcome)
    return ordered, warnings


def _batches(system: SystemUnderTest, requests: list[QueryRequest]) -> list[list[QueryRequest]]:
    """Per-query adapters get BATCH_QUERIES requests per call; any other adapter all of them."""
    if not isinstance(system, PerQueryAdapter) or len(requests) <= BATCH_QUERIES:
        return [requests]
    return [requests[i : i + BATCH_QUERIES] for i in range(0, len(requests), BATCH_QUERIES)]


def _offset(progress: Progress | None, before: int, total: int) -> Progress | None:
    """A batch's ``progress(done, batch size)`` as progress over the whole run."""
    if progress is None:
        return None
    return lambda done, _size: progress(before + done, total)


def _consume(
    outcomes: list[QueryOutcome],
    answers: bool,
    outcome_rows: list[dict],
    citation_rows: list[dict],
    warnings: list[str],
) -> pd.DataFrame:
    """Append the outcomes' rows, citations and warnings; return their hits as a typed table.

    An outcome's hits are already columns (:class:`~.hits.HitBlock`): the table is built column
    by column from them (:func:`~.hits.hits_frame`), with no object per hit.
    """
    # rows, citations and the table's lists: millions of small containers and no cycles
    with gc_paused():
        blocks: list[tuple[str, HitBlock]] = []
        for outcome in outcomes:
            block = as_block(outcome.hits)
            outcome.hits = block
            outcome_rows.append(_outcome_row(outcome, answers))
            if block.n:
                blocks.append((outcome.query_id, block))
            if answers and outcome.answer is not None:
                # attribute reads, not model_dump: a dump per citation was a second of a 20k-query run
                qid = outcome.query_id
                citation_rows += [
                    {"query_id": qid, "position": i, **{f: getattr(c, f) for f in _CITATION_FIELDS}}
                    for i, c in enumerate(outcome.answer.citations)
                ]
            warnings += [f"{outcome.query_id}: {w}" for w in outcome.warnings]
        outcomes.clear()
        return hits_frame(blocks)


@dataclass
class RetrievalPiece:
    """One shard's part of a run's results (:func:`run_piece`), merged by :func:`merge_pieces`.

    ``warnings`` keeps at most :data:`MAX_WARNINGS` per-query warnings (``warnings_dropped`` counts
    the rest), so the merged run keeps exactly the first ones of the whole run; ``run_warnings`` are
    the adapter's warnings about the run as a whole, which every piece may repeat."""

    outcomes: pd.DataFrame
    hits: pd.DataFrame | ParquetParts  # its files when read back from a shard value (shard_io.py)
    citations: pd.DataFrame
    known_chunks: pd.DataFrame  # empty unless the piece was asked for them (one piece per run is)
    system: SystemInfo  # the adapter's info, before the versions it reported on hits and answers
    run_warnings: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    warnings_dropped: int = 0


def _with_capabilities(info: SystemInfo, system: SystemUnderTest) -> SystemInfo:
    """The adapter's info with its effective capabilities recorded (unless it declares none)."""
    capabilities = system_capabilities(system)
    if capabilities is not None:
        info.capabilities = capabilities.as_dict()
    return info


def _known_chunks(system: SystemUnderTest | None) -> pd.DataFrame:
    known = system.known_chunk_ids() if system is not None else None
    return typed_frame({"chunk_id": sorted(known or [])}, {"chunk_id": "string"})


def run_piece(
    system: SystemUnderTest,
    queries: pd.DataFrame,
    k: int,
    answers: bool,
    progress: Progress | None = None,
    known_chunks: bool = True,
    run_warnings: list[str] | None = None,
    mask: SecretMask | None = None,
) -> RetrievalPiece:
    """Search (and, when ``answers``, ask) every query of ``queries`` (columns ``query_id``,
    ``query``): the whole golden set, or one shard of it. ``k`` is how many hits to request;
    ``known_chunks``: also ask the system which chunk ids it holds (one piece per run needs to);
    ``run_warnings``: the adapter's warnings about the whole run, worked out by the plan of a sharded
    run (replay's trace queries not in the golden set: a shard alone would report the other shards'
    queries as unknown); None: the adapter's own ``run_warnings`` after these queries.

    One outcome row per query (``error`` is ``"error_class: message"``; a failed query keeps its
    row, with the hits found before the failure). Per-query adapters are called in batches
    (:data:`BATCH_QUERIES`).

    ``mask``: the run's secrets (``RunSettings.secret_mask``), masked here — where the system's
    output enters the tool — in every text the piece holds: hits, answers, citations, error
    messages, warnings and the system's info."""
    # tolist(): one conversion per column (iterating Arrow-backed strings goes value by value)
    with gc_paused():
        requests = [
            QueryRequest(query_id=str(qid), query=str(text))
            for qid, text in zip(queries["query_id"].tolist(), queries["query"].tolist(), strict=True)
        ]
    outcome_rows: list[dict] = []
    citation_rows: list[dict] = []
    warnings: list[str] = []
    pieces = []
    done = 0
    for batch in _batches(system, requests):
        cancellation.check()  # Ctrl-C: no further batch
        raw = system.run_queries(batch, k=k, answers=answers, progress=_offset(progress, done, len(requests)))
        outcomes, repaired = collect_outcomes(batch, raw, answers)
        del raw
        warnings += repaired
        pieces.append(_consume(outcomes, answers, outcome_rows, citation_rows, warnings))
        done += len(batch)
    pieces = [p for p in pieces if len(p)] or pieces[:1]
    hits = pieces[0] if len(pieces) == 1 else pd.concat(pieces, ignore_index=True)
    # Adapters may also report warnings about the run as a whole (e.g. a trace's unknown queries);
    # read before the known chunks and the info, as an unsharded run always did.
    run_warnings = list(getattr(system, "run_warnings", ()) if run_warnings is None else run_warnings)
    piece = RetrievalPiece(
        outcomes=typed_frame(outcome_rows, OUTCOME_COLUMNS),
        hits=hits,
        citations=typed_frame(citation_rows, CITATION_COLUMNS),
        known_chunks=_known_chunks(system if known_chunks else None),
        system=_with_capabilities(system.info(), system),
        run_warnings=run_warnings,
        warnings=warnings[:MAX_WARNINGS],
        warnings_dropped=max(0, len(warnings) - MAX_WARNINGS),
    )
    return mask_piece(piece, mask) if mask else piece


def mask_piece(piece: RetrievalPiece, mask: SecretMask) -> RetrievalPiece:
    """``piece`` with every secret of ``mask`` masked in its tables (each text column by one
    vectorised replace), warnings and system info: everything downstream starts clean. A hit whose
    ids hold no secret is unchanged, so it still matches its gold."""
    return RetrievalPiece(
        outcomes=mask.frame(piece.outcomes),
        hits=mask.frame(piece.hits),
        citations=mask.frame(piece.citations),
        known_chunks=mask.frame(piece.known_chunks),
        system=mask.model(piece.system),
        run_warnings=mask.value(piece.run_warnings),
        warnings=mask.value(piece.warnings),
        warnings_dropped=piece.warnings_dropped,
    )


def _concat(frames: list[pd.DataFrame], columns: dict[str, str]) -> pd.DataFrame:
    """Frames of one table, in order, as one frame with the table's declared dtypes (one frame is
    returned as it is: the unsharded run's table, unchanged)."""
    if len(frames) == 1:
        return frames[0]
    return pd.concat(frames, ignore_index=True).astype(columns)


def merge_pieces(pieces: list[RetrievalPiece]) -> RetrievalResults:
    """The run's results from its pieces, in order: the same tables, versions and warnings as one
    piece of the whole golden set would give. Run-level warnings repeated by several pieces are
    reported once; warnings beyond :data:`MAX_WARNINGS` are counted, not listed. The system info and
    known chunks are the first piece's."""
    if not pieces:
        raise ValueError("merge_pieces needs at least one piece (a run has at least one shard)")
    hits = [p.hits for p in pieces if len(p.hits)] or [pieces[0].hits]
    if all(isinstance(h, ParquetParts) for h in hits):
        # Shards read back by the collecting step: their files, written into the run's table one
        # at a time by the store; here only the version columns are read.
        merged_hits = ParquetParts.concat(hits)
        fields = [c for c in HIT_VERSION_FIELDS if c in merged_hits.column_names]
        hit_counts = count_in_tables(merged_hits.tables(fields))
        version_columns = None
    else:
        merged_hits = _concat(hits, HIT_COLUMNS)  # pieces in memory (a run without Dagster)
        version_columns, hit_counts = merged_hits, None
    outcomes = _concat([p.outcomes for p in pieces], OUTCOME_COLUMNS)
    run_warnings = list(dict.fromkeys(w for p in pieces for w in p.run_warnings))
    warnings = [*run_warnings, *(w for p in pieces for w in p.warnings)]
    total = len(warnings) + sum(p.warnings_dropped for p in pieces)
    if total > MAX_WARNINGS:
        warnings = [*warnings[:MAX_WARNINGS], f"… and {total - MAX_WARNINGS} more warnings"]
    versions = reported_versions(version_columns, outcomes, hit_counts)
    return RetrievalResults(
        outcomes=outcomes,
        hits=merged_hits,
        citations=_concat([p.citations for p in pieces], CITATION_COLUMNS),
        known_chunks=pieces[0].known_chunks,
        system=with_reported_versions(pieces[0].system, versions),
        versions_reported=versions,
        warnings=warnings,
    )


def run_golden(
    system: SystemUnderTest,
    queries: pd.DataFrame,
    k: int,
    answers: bool,
    progress: Progress | None = None,
) -> RetrievalResults:
    """Search (and, when ``answers``, ask) every query of the golden ``queries`` table
    (columns ``query_id``, ``query``) in one piece; ``k`` is how many hits to request.

    Returns :class:`RetrievalResults` with one outcome row per query (see :func:`run_piece`).
    ``system`` is the adapter's info plus versions the system reported on its hits and answers."""
    return merge_pieces([run_piece(system, queries, k, answers, progress)])


def error_class_counts(outcomes: pd.DataFrame) -> dict[str, int]:
    """How many queries failed with each error class (classes in descending count order)."""
    if "error_class" not in outcomes.columns:
        return {}
    counts = Counter(outcomes["error_class"].dropna().tolist())
    return dict(counts.most_common())
