"""Indexing coverage (SPEC §6): what the system under test indexed, as run-level metrics.

Retrieval metrics cannot see documents that never became chunks; these numbers can. They come
from the system itself — the reference system's chunker statistics, or the ``coverage`` object an
external system reports from its version endpoint/command — so a system that reports nothing has
null coverage metrics (never zeros).
"""

from __future__ import annotations

from collections.abc import Mapping

from kebab_eval_pipeline.metrics import catalogue

__all__ = ["INDEX_METRICS", "indexing_metrics"]

#: Run-level metric names, in report order (the catalogue's indexing family).
INDEX_METRICS: tuple[str, ...] = catalogue.family_names("indexing")
_FROM = {
    "index_docs": "docs_processed",
    "index_zero_chunk_docs": "docs_with_zero_chunks",
    "index_chunks": "chunks",
    "index_chunks_skipped": "chunks_skipped",
    "index_tokens_min": "tokens_min",
    "index_tokens_mean": "tokens_mean",
    "index_tokens_p95": "tokens_p95",
    "index_tokens_max": "tokens_max",
    # Symlinks in the corpus the index did not follow (out of the corpus, loops, broken, duplicates).
    "index_skipped_symlinks": "skipped_symlinks",
}


def indexing_metrics(coverage: Mapping[str, float] | None) -> dict[str, float | None]:
    """``INDEX_METRICS`` from a system's coverage report (keys ``COVERAGE_KEYS``).

    A missing key — or no report at all — gives None. ``index_zero_chunk_rate`` is
    ``docs_with_zero_chunks / docs_processed``: None when either is unknown or no document was
    processed. Values are returned as floats (counts are whole numbers).
    """
    coverage = coverage or {}
    out: dict[str, float | None] = {}
    for name in INDEX_METRICS:
        if name == "index_zero_chunk_rate":
            docs, zero = coverage.get("docs_processed"), coverage.get("docs_with_zero_chunks")
            out[name] = float(zero) / float(docs) if docs and zero is not None else None
            continue
        value = coverage.get(_FROM[name])
        out[name] = None if value is None else float(value)
    return out
