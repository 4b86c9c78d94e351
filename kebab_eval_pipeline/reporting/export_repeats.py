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
which (``from_repeat``: :data:`~kebab_eval_pipeline.reporting.export.FROM_REPEAT`, repeat 1). The
top-level ``repeats`` object (:func:`~kebab_eval_pipeline.reporting.export.repeats_document`)
has the repeat count and, per metric, its noise floor: ``std`` and ``spread`` of the per-repeat
run values and ``se`` = std / √n, the noise floor of the mean.
"""

from __future__ import annotations

from pathlib import Path

from kebab_eval_pipeline.reporting.export import _relevance_level, trec_tables
from kebab_eval_pipeline.store.runs import RunStore


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
