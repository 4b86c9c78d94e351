"""Exports of a repeated run (asked each query N > 1 times): one TREC run file per repeat, or one
JSON document of the run.

A repeated run is N runs of one system over one golden set. ``kebab-eval export --format trec``
writes each repeat as a TREC run of its own — ``<stem>.r<i><suffix>`` with its qrels and docno
legend beside it, run tag ``<run_id>.r<i>`` — matched as that repeat was scored, so trec_eval
re-derives each repeat's numbers, and their mean over repeats is the run's headline for the
retrieval metrics whose denominator every repeat shares (hit@k, mrr, precision@k, ndcg@k,
recall@k, map).

``kebab-eval export --format json`` writes the document a run of one repeat gets
(:func:`~kebab_eval_pipeline.reporting.export.export_json`: a script reads both the same way),
with the repeated run's own numbers: ``metrics`` and ``breakdowns`` are its headline, each query's
``scores`` are the stored per-query means over the repeats (``first_relevant_rank`` and
``refused``: the most frequent value), and each query has its ``flakiness`` columns. A query's
hits, answer, latency and error cannot be a mean: they are one repeat's, and each query says
which (``from_repeat``: :data:`FROM_REPEAT`). The top-level ``repeats`` object
(:func:`repeats_document`) has the repeat count and, per metric, its noise floor: ``std`` and
``spread`` of the per-repeat run values and ``se`` = std / √n, the noise floor of the mean.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kebab_eval_pipeline.metrics.repeats import repeats_info
from kebab_eval_pipeline.reporting.export import _relevance_level, trec_tables
from kebab_eval_pipeline.store.runs import RunStore, StoredRun


def repeat_count(store: RunStore, run_id: str) -> int:
    """How many times ``run_id`` asked each query (1 for a run of one repeat or stored before
    repeats existed); read from the stored retrieval's manifest, no table read."""
    manifest = store.manifest("retrieval_results", run_id)
    return int(((manifest or {}).get("info") or {}).get("repeat") or 1)


def repeat_path(out: Path, repeat: int) -> Path:
    """Where repeat ``repeat``'s run file goes: ``run.trec`` → ``run.r2.trec``."""
    return out.with_name(f"{out.stem}.r{repeat}{out.suffix}")


def export_trec_repeats(store: RunStore, run_id: str, out: Path) -> list[tuple[Path, Path, Path]]:
    """Write each repeat of the stored run ``run_id`` as a TREC run (:func:`repeat_path`), with its
    qrels and docno legend (:func:`~kebab_eval_pipeline.reporting.export.trec_tables`, under the
    run's stored criterion and relevance level). Returns the paths, repeat 1 first."""
    b = store.stored_run(run_id)
    retrieval = b.retrieval
    criterion = b.scores.info.get("match") or "auto"
    written = []
    for repeat in range(1, retrieval.repeat_count + 1):
        hits = retrieval.results.hits if repeat == 1 else retrieval.repeats.hits_of(repeat)
        export = trec_tables(
            b.golden.queries,
            b.golden.supports,
            hits,
            criterion,
            source=f"run {run_id} repeat {repeat}",
            relevance_level=_relevance_level(b.scores.info),
        )
        written.append(export.write(repeat_path(out, repeat), f"{run_id}.r{repeat}"))
    return written


#: The repeat a repeated run's JSON export takes each query's hits, answer, latency and error from:
#: repeat 1, stored as the run's ordinary retrieval tables.
FROM_REPEAT = 1
#: The per-query fields of the JSON export that are :data:`FROM_REPEAT`'s, not means over repeats.
FROM_REPEAT_FIELDS = (
    "hits",
    "answer",
    "latency_ms",
    "error",
    "error_class",
    "timed_out",
    "attempts",
    "scope",
)


def repeats_document(run: StoredRun) -> dict[str, Any]:
    """The ``repeats`` object of a repeated run's JSON export: ``count``; ``per_query`` (how each
    query's fields were made: ``scores`` means over the repeats, ``from_repeat`` and the fields
    taken from that repeat); ``noise_floor`` per metric, of the stored per-repeat run values
    (:func:`~kebab_eval_pipeline.metrics.repeats.noise_floor`: ``std``, ``se``, ``spread``,
    ``min``, ``max``, ``mean``, ``repeats``); ``flaky_queries``, ``flips`` and ``deterministic``;
    and ``auto`` (why a ``repeat: auto`` run stopped, None for a fixed count)."""
    if run.scores.repeat_metrics is None:
        raise ValueError(f"run {run.run_id} has no per-repeat metrics: it was not repeated")
    count = run.retrieval.repeat_count
    info = repeats_info(run.scores.scores, run.scores.repeat_metrics, count)
    return {
        "count": count,
        "per_query": {
            "scores": "mean over the repeats where the metric applies (first_relevant_rank and "
            "refused: the most frequent value)",
            "from_repeat": FROM_REPEAT,
            "fields_from_repeat": list(FROM_REPEAT_FIELDS),
        },
        "noise_floor": info["noise_floor"],
        "flaky_queries": info["flaky_queries"],
        "flips": info["flips"],
        "deterministic": info["deterministic"],
        "auto": (run.metrics.info.get("repeats") or {}).get("auto"),
    }
