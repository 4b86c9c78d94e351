"""The evaluation chain as plain functions — the whole of what each asset does, without Dagster.

    load_golden_artifact → retrieve → judge → score → summarize → compare
    (golden_set)           (retrieval_results) (judge) (query_scores) (run_metrics) (comparison_report)

Each function is one asset's work, end to end: :func:`summarize` returns the run's metrics with
their gate results and the rendered run report; :func:`compare` chooses the baseline, compares,
evaluates the regression and verdict gates and renders the report files. The Dagster assets only
publish what these return (metadata, logs), the asset checks read the gate results stored with the
assets (one evaluation), and the CLI prints what is stored. Tests and benchmarks call these directly.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from kebab_eval_pipeline.chain.artifacts import (
    ComparisonArtifact,
    GoldenArtifact,
    JudgeArtifact,
    QueryScoresArtifact,
    RetrievalArtifact,
    RunMetricsArtifact,
)
from kebab_eval_pipeline.chain.auto_repeat import AutoRepeat
from kebab_eval_pipeline.chain.settings import RunSettings
from kebab_eval_pipeline.chain.shards import (
    JudgePiece,
    JudgeShard,
    QueryShard,
    RetrievalShardResult,
    shard_bounds,
)
from kebab_eval_pipeline.compare.baseline import flag_baseline, resolve_baseline
from kebab_eval_pipeline.compare.document import report_files
from kebab_eval_pipeline.compare.outcome import INTERRUPTED, OUTCOMES, metrics_outcome, run_outcome
from kebab_eval_pipeline.compare.ranking import DEFAULT_ALPHA, Ranking, metric_name_offenders, rank_runs
from kebab_eval_pipeline.compare.ranking_report import ranking_files
from kebab_eval_pipeline.compare.ranking_report import render_markdown as render_ranking_markdown
from kebab_eval_pipeline.compare.runs import compare_runs, no_baseline
from kebab_eval_pipeline.foundation import progress
from kebab_eval_pipeline.foundation.errors import InputError, Offender
from kebab_eval_pipeline.foundation.revision import pipeline_revision
from kebab_eval_pipeline.foundation.run_roles import MANUAL, RunRole, decide_role, role_of
from kebab_eval_pipeline.gates.evaluate import (
    check_gate_capabilities,
    evaluate_comparison_gates,
    evaluate_gates,
)
from kebab_eval_pipeline.gates.resolution import ResolutionFlag, resolution_flags, variance_estimates
from kebab_eval_pipeline.golden.load import LoadedGolden, load_golden
from kebab_eval_pipeline.metrics import catalogue
from kebab_eval_pipeline.metrics.aggregate import (
    SCORING_HIT_COLUMNS,
    SCORING_HIT_KEYS,
    consulted_hit_columns,
    round_scores,
    score_results,
    summarize_scores,
)
from kebab_eval_pipeline.metrics.health import system_health
from kebab_eval_pipeline.metrics.indexing import indexing_metrics
from kebab_eval_pipeline.metrics.judged_coverage import judged_coverage, judged_warning
from kebab_eval_pipeline.metrics.matching_diagnostics import matching_warnings, summarize_criteria
from kebab_eval_pipeline.metrics.measurable import lacks_of, null_unmeasured
from kebab_eval_pipeline.metrics.repeats import (
    RepeatAccumulator,
    RepeatedScores,
    repeated_summary,
    repeats_info,
)
from kebab_eval_pipeline.metrics.retrieval import SCORING_VERSION
from kebab_eval_pipeline.metrics.stale import missing_documents, stale_references
from kebab_eval_pipeline.metrics.verification import hallucination_counts, verify_hits
from kebab_eval_pipeline.reporting.run_report import render_run_markdown
from kebab_eval_pipeline.store.pins import read_pins
from kebab_eval_pipeline.store.runs import RUN_ASSETS, RunStore, StoredRun
from kebab_eval_pipeline.sweep.grid import Variant, expand, find_variant, variant_versions
from kebab_eval_pipeline.sweep.leaderboard import Leaderboard, build_leaderboard
from kebab_eval_pipeline.systems.costs import price_outcomes
from kebab_eval_pipeline.systems.factory import build_system
from kebab_eval_pipeline.systems.identity import derive_identity, identity_from_settings
from kebab_eval_pipeline.systems.protocol import SystemUnderTest, system_capabilities
from kebab_eval_pipeline.systems.repeats import REPEAT_TABLES, merge_repeat_tables, repeat_tables
from kebab_eval_pipeline.systems.runner import (
    RetrievalPiece,
    RetrievalResults,
    error_class_counts,
    merge_pieces,
    run_piece,
)

RUNNER_VERSION = "runner-1"
# 2: one-to-one support assignment, doc_recall@k (SCORING_VERSION 2); 3: map, map@k, rprec, bpref,
# judged@k and the relevance level (no stored number changes at the default level 1)
METRICS_VERSION = "metrics-3"


def load_golden_artifact(settings: RunSettings, loaded: LoadedGolden | None = None) -> GoldenArtifact:
    """Load and validate the configured golden set (InputError lists every offender); ``loaded``:
    that set already loaded with :func:`load_golden` (the CLI's checks hand their parse to the
    run's golden_set step: :func:`~kebab_eval_pipeline.orchestration.run_context.handed_golden`);
    its tables are built once per parse."""
    loaded = loaded if loaded is not None else load_golden(*settings.golden_input())
    return GoldenArtifact.from_loaded(loaded)


def check_golden_against_system(
    settings: RunSettings, golden: GoldenArtifact, system: SystemUnderTest
) -> list[str]:
    """Stale-golden check (before any query runs): gold chunk ids, doc ids, paths and sections
    the system's index does not hold. ``stale_golden: fail`` raises InputError listing every
    unresolvable one (a chunk id whose document is still indexed only warns: chunker iteration
    re-keys chunks); ``warn`` returns them all as warnings; ``off`` skips. A system without a
    catalogue (it cannot list its index) has its gold documents looked for under ``source_root``
    when one is set (:func:`metrics.stale.missing_documents`), else nothing is checked. Returns
    the warnings."""
    if settings.stale_golden == "off":
        return []
    catalogue = system.catalogue()
    if catalogue is not None:
        stale = stale_references(golden.queries, golden.supports, catalogue)
    elif settings.source_root:
        stale = missing_documents(golden.queries, golden.supports, settings.source_root)
    else:
        return []
    if stale.empty:
        return []

    def offender(row) -> Offender:
        return Offender(
            golden.info["source"],
            f"{row.reason} ({row.value!r})",
            query_id=row.query_id,
            field=f"supports[{row.support_idx}].{row.field}",
        )

    errors = [offender(r) for r in stale.itertuples(index=False) if r.severity == "error"]
    warnings = [offender(r).render() for r in stale.itertuples(index=False) if r.severity != "error"]
    if errors and settings.stale_golden == "fail":
        raise InputError(
            "golden set is stale: it references evidence the index does not hold "
            "(fix the golden set, or set stale_golden: warn)",
            errors,
        )
    return [o.render() for o in errors] + warnings


def check_gates_against_system(
    settings: RunSettings, system: SystemUnderTest, source: str = "<config>"
) -> None:
    """Refuse (InputError, every field named) the gates the user wrote on metrics the built
    ``system`` cannot measure — what only the built system can tell (a python object without
    ``ask``, a replay file read as OpenInference traces); what its kind declares is refused when
    the config loads (:func:`gates.evaluate.check_gate_names`)."""
    from kebab_eval_pipeline.systems.capabilities import run_lacks as system_lacks

    check_gate_capabilities(settings, system_lacks(system_capabilities(system), settings.answers), source)


def plan_retrieval(
    settings: RunSettings,
    golden: GoldenArtifact,
    shard_queries: int | None = None,
    *,
    system: SystemUnderTest | None = None,
    stale: list[str] | None = None,
) -> list[QueryShard]:
    """The run's retrieval, before any query runs: the checks (source root, gates against the system,
    stale golden set) and the golden queries in shards of ``shard_queries`` (default: the run
    config's ``shard_queries``; at least one shard, the first carrying the stale-golden warnings).
    ``system``: the run's system already built (default: built here); ``stale``: the stale-golden
    warnings of checks already made for this run against it (the CLI's, before the run started):
    the gates and the golden set are then not checked again."""
    check_source_root(settings)
    system = system if system is not None else build_system(settings)
    if stale is None:
        check_gates_against_system(settings, system)
        stale = check_golden_against_system(settings, golden, system)
    k = max(max(settings.k), settings.mrr_cutoff)
    queries = golden.queries[["query_id", "query"]]
    size = shard_queries or settings.shard_queries
    if settings.repeat == "auto":  # whether to ask again is decided on the whole run's metrics
        size = max(len(queries), 1)
    bounds = shard_bounds(len(queries), size)
    # An adapter whose run-level warnings depend on the whole run's ids (replay: trace queries no
    # golden query asks) has them worked out once, here; the first shard carries them.
    run_warnings = None
    if hasattr(system, "run_level_warnings") and len(bounds) > 1:
        run_warnings = system.run_level_warnings(queries["query_id"].tolist(), queries["query"].tolist())
    return [
        QueryShard(
            i,
            start,
            len(queries),
            k,
            queries.iloc[start:stop].reset_index(drop=True),
            stale if i == 0 else [],
            None if run_warnings is None else run_warnings if i == 0 else [],
        )
        for i, (start, stop) in enumerate(bounds)
    ]


def retrieve_shard(
    settings: RunSettings,
    shard: QueryShard,
    system: SystemUnderTest | None = None,
    golden: GoldenArtifact | None = None,
) -> RetrievalShardResult:
    """One shard's queries through the configured system under test — ``system``, the run's system
    already built (default: built here) — with progress over the whole run; the first shard also
    records the chunk ids the system holds. With ``repeat: auto`` the shard is the whole run and
    ``golden`` its golden set: each pass is scored to decide whether to ask again
    (:mod:`~kebab_eval_pipeline.chain.auto_repeat`)."""
    sink = progress.query_progress()
    auto = settings.repeat == "auto"
    n = settings.repeat_max if auto else int(settings.repeat)
    size = len(shard.queries)

    def report(repeat: int):
        # Over every query of every repeat: the shard's repeats follow each other.
        if sink is None:
            return None
        before = shard.start * n + (repeat - 1) * size
        return lambda done, _n: sink(before + done, shard.total * n)

    system = system if system is not None else build_system(settings)
    mask = settings.secret_mask()  # the system's output is masked of every secret as it enters
    piece = run_piece(
        system,
        shard.queries,
        k=shard.k,
        answers=settings.answers,
        progress=report(1),
        known_chunks=shard.index == 0,
        run_warnings=shard.run_warnings,
        mask=mask,
    )

    def ask_again(r: int) -> RetrievalPiece:
        """Repeat ``r``: the same system asked the whole shard again (systems/repeats.py)."""
        return run_piece(
            system,
            shard.queries,
            k=shard.k,
            answers=settings.answers,
            progress=report(r),
            known_chunks=False,
            run_warnings=[],
            mask=mask,
        )

    if auto:
        return _retrieve_until_steady(settings, shard, golden, piece, ask_again)
    repeats = None
    if n > 1:
        repeats = repeat_tables({r: ask_again(r) for r in range(2, n + 1)}, n)
    return RetrievalShardResult(shard.index, shard.k, piece, shard.stale, repeats)


def _retrieve_until_steady(
    settings: RunSettings,
    shard: QueryShard,
    golden: GoldenArtifact | None,
    first: RetrievalPiece,
    ask_again,
) -> RetrievalShardResult:
    """``repeat: auto``: ``first`` (repeat 1) and then one more pass of the run's queries at a time,
    each scored on its own and let go (:class:`~kebab_eval_pipeline.chain.auto_repeat.AutoRepeat`
    keeps each metric's per-pass values), until the stopping rule says why to stop."""
    if golden is None:
        raise ValueError("repeat: auto needs the run's golden set to score each repeat")
    if len(shard.queries) != shard.total:
        raise ValueError("repeat: auto runs the whole golden set as one shard")
    lacks = lacks_of(first.system, settings.answers)

    def scored(piece: RetrievalPiece) -> tuple[pd.DataFrame, pd.DataFrame]:
        results = merge_pieces([piece])
        results.outcomes = price_outcomes(results.outcomes, settings.system_costs)
        return _scored(settings, golden, results, lacks)[0], results.outcomes

    rule = AutoRepeat(settings, lacks)
    stop = rule.add(*scored(first))
    again: dict[int, RetrievalPiece] = {}
    while stop is None:
        r = rule.count + 1
        again[r] = ask_again(r)
        stop = rule.add(*scored(again[r]))
    sink = progress.query_progress()
    if sink is not None:  # stopped before repeat_max: the run's queries are all asked
        sink(shard.total * rule.count, shard.total * rule.count)
    repeats = repeat_tables(again, rule.count)
    return RetrievalShardResult(shard.index, shard.k, first, shard.stale, repeats, rule.info())


def merge_retrieval(
    settings: RunSettings, golden: GoldenArtifact, shards: list[RetrievalShardResult]
) -> RetrievalArtifact:
    """The run's retrieval artifact from its shards' results, in any order (merged in shard order,
    :func:`merge_pieces`): the same artifact, whatever the number of shards."""
    ordered = sorted(shards, key=lambda r: r.index)
    results = merge_pieces([r.piece for r in ordered])
    # what each answer cost: reported by the system, else its tokens at the price table's rates
    results.outcomes = price_outcomes(results.outcomes, settings.system_costs)
    info = {
        "k_requested": ordered[0].k,
        "answers": settings.answers,
        "golden_sha256": golden.sha256,
        "stale_golden": ordered[0].stale,
        "error_classes": error_class_counts(results.outcomes),
        "versions_reported": results.versions_reported,
        # a credential too short to mask is said here, with the system's own warnings
        "adapter_warnings": [*settings.secret_mask().warnings(), *results.warnings],
        # which system produced these hits: an automatic baseline must be a run of the same one
        "system_identity": identity_from_settings(settings.system),
    }
    repeats = merge_repeat_tables([r.repeats for r in ordered])
    if repeats is not None:
        repeats.outcomes = price_outcomes(repeats.outcomes, settings.system_costs)
    if repeats is not None:  # absent from a run of one repeat: its info as it always was
        info["repeat"] = repeats.count
    if ordered[0].auto is not None:  # repeat: auto — why it stopped (chain/auto_repeat.py)
        info["repeat_auto"] = ordered[0].auto
    return RetrievalArtifact(results, info, repeats)


def retrieve(
    settings: RunSettings, golden: GoldenArtifact, shard_queries: int | None = None
) -> RetrievalArtifact:
    """Run every golden query through the configured system under test (after the stale check),
    shard after shard in this process: what the ``retrieval_results`` steps do, without Dagster."""
    shards = plan_retrieval(settings, golden, shard_queries)
    return merge_retrieval(settings, golden, [retrieve_shard(settings, s) for s in shards])


def plan_judge(
    settings: RunSettings,
    golden: GoldenArtifact,
    retrieval: RetrievalArtifact,
    shard_queries: int | None = None,
) -> list[JudgeShard]:
    """The run's judging, before any judge call: no shard when ``judge:`` is null; else the judge
    inputs of the answered queries and the run's spot-check sample (drawn over all of them), in
    shards of ``shard_queries`` (default: the run config's ``shard_queries``; at least one)."""
    if settings.judge is None:
        return []
    from kebab_eval_pipeline.judge.inputs import judge_inputs
    from kebab_eval_pipeline.judge.relevance_calibration import relevance_items
    from kebab_eval_pipeline.judge.run import judge_calls, spot_check_sample
    from kebab_eval_pipeline.judge.self_consistency import reorderable

    j = settings.judge
    r = retrieval.results
    items = judge_inputs(golden.queries, r.outcomes, r.hits, r.citations, j.context_k, j.context_chars)
    sample = spot_check_sample(list(items), j.spot_check_rate, j.spot_check_seed)
    relevance = relevance_items(
        golden.queries,
        r.hits,
        golden.supports,
        match=str(settings.match),
        relevance_level=settings.relevance_level,
        n=j.relevance_sample,
        seed=j.spot_check_seed,
        context_chars=j.context_chars,
    )
    ids, in_sample = list(items), set(sample)
    total = judge_calls(len(ids), len(sample), reorderable(items, j.self_consistency)) + len(relevance)
    shards, start = [], 0
    for i, (a, b) in enumerate(shard_bounds(len(ids), shard_queries or settings.shard_queries)):
        chosen = {q: items[q] for q in ids[a:b]}
        picked = [q for q in chosen if q in in_sample]
        asked = relevance if i == 0 and len(relevance) else None  # the relevance sample: shard 0 asks it
        shards.append(JudgeShard(i, start, total, chosen, picked, asked))
        start += judge_calls(len(chosen), len(picked), j.self_consistency) + (
            0 if asked is None else len(asked)
        )
    return shards


def judge_shard(settings: RunSettings, store: RunStore, shard: JudgeShard) -> JudgePiece:
    """One shard's judgements (:func:`judge.run.judge_piece`), replies cached in the judge cache
    (shards share it: SQLite lets concurrent writers wait for each other; with an object-store base
    each machine keeps its own, see :meth:`RunStore.judge_cache_path`)."""
    from kebab_eval_pipeline.judge.cache import JudgeCache
    from kebab_eval_pipeline.judge.run import judge_piece

    if settings.judge is None:
        raise ValueError("judge_shard needs a run config with a judge: block")
    sink = progress.query_progress()
    report = None if sink is None else (lambda done, _n: sink(shard.start + done, shard.total))
    cache_path = store.judge_cache_path(settings.judge.cache_dir)
    with JudgeCache(cache_path) as cache:
        table, info = judge_piece(
            settings.judge, shard.items, shard.sample, cache, progress=report, relevance=shard.relevance
        )
    if shard.relevance is not None:  # the golden verdicts the relevance judgements are measured by
        sampled = shard.relevance.drop(columns="judge_input").to_json(orient="records")
        info = {**info, "relevance_sample": json.loads(sampled)}
    return JudgePiece(shard.index, table, info, len(shard.items), list(shard.sample), str(cache_path))


def merge_judge(settings: RunSettings, pieces: list[JudgePiece]) -> JudgeArtifact:
    """The run's judge artifact from its shards' pieces, in any order (merged in shard order; a
    disabled artifact when the judge is off): the same artifact, whatever the number of shards."""
    if settings.judge is None or not pieces:
        return JudgeArtifact.disabled()
    from kebab_eval_pipeline.judge.run import merge_judge_pieces

    ordered = sorted(pieces, key=lambda p: p.index)
    table, info = merge_judge_pieces(
        settings.judge,
        [(p.judgements, p.info) for p in ordered],
        sum(p.judged_queries for p in ordered),
        [q for p in ordered for q in p.sample],  # the run's sample, in its query order
    )
    return JudgeArtifact(table, {**info, "cache": ordered[0].cache})


def judge(
    settings: RunSettings,
    golden: GoldenArtifact,
    retrieval: RetrievalArtifact,
    store: RunStore,
    shard_queries: int | None = None,
) -> JudgeArtifact:
    """The LLM judge's judgements of the run's answered queries (SPEC §6), or a disabled artifact
    when ``judge:`` is null, shard after shard in this process (what the ``judge`` steps do). Replies
    are cached in ``judge.cache_dir`` (default: where the run store keeps the judge cache,
    :meth:`RunStore.judge_cache_path`), so unchanged inputs are never judged twice. A bad judge
    config (missing model file, unset API key variable) is an InputError; a failing call is a row
    with an error."""
    shards = plan_judge(settings, golden, retrieval, shard_queries)
    return merge_judge(settings, [judge_shard(settings, store, s) for s in shards])


def scoring_hit_columns(settings: RunSettings) -> list[str]:
    """The stored hit columns :func:`score` consults under ``settings`` (of ``SCORING_HIT_COLUMNS``).

    A criterion that does not compare a field never reads it, nor do the matching diagnostics
    (they warn about a field only under a criterion that needs it): ``heading_path`` — a list per
    hit, the one column that becomes Python objects, 10M of them at 100k queries × 100 hits — is
    needed by ``auto``, ``anchor`` and ``fields`` only; the line range by ``auto``, ``span``,
    ``fields`` and by the answer checks (a citation by path is checked against the lines of the
    query's hits); the snippet by ``auto`` and ``fields``. Verification against a source root
    reads every column."""
    if settings.source_root:
        return list(SCORING_HIT_COLUMNS)
    match = str(settings.match)
    skip = set()
    if match not in ("auto", "anchor", "fields"):
        skip.add("heading_path")
    if match not in ("auto", "span", "fields") and not settings.answers:
        skip |= {"line_start", "line_end"}
    if match not in ("auto", "fields"):
        skip.add("snippet")
    return [c for c in SCORING_HIT_COLUMNS if c not in skip]


def with_scoring_hits(
    retrieval: RetrievalArtifact,
    store: RunStore,
    run_id: str,
    settings: RunSettings,
    supports: pd.DataFrame | None = None,
) -> RetrievalArtifact:
    """``retrieval`` (read without its hit columns) with the hits read from ``store`` in the columns
    :func:`score` consults under ``settings`` (:func:`scoring_hit_columns`) — what the
    ``query_scores`` step scores: the IO manager reading its input does not know the settings.
    Given the golden ``supports``, of those only the columns some support (or a citation) can be
    compared on (:func:`~kebab_eval_pipeline.metrics.aggregate.consulted_hit_columns`): a
    chunk-level golden set never reads the hits' documents. See :func:`with_stored_hits`."""
    # Columns no hit sets are not read: the metrics treat an absent column as all null.
    columns = scoring_hit_columns(settings)
    if supports is not None and not settings.source_root:  # verification reads every column
        cited = settings.answers and (len(retrieval.results.citations) > 0 or retrieval.repeats is not None)
        columns = consulted_hit_columns(supports, cited, columns)
    out = with_stored_hits(
        retrieval, store, run_id, columns, "query_scores", sparse=True, keys=SCORING_HIT_KEYS
    )
    if out.repeats is not None:  # the other repeats' hits: read a repeat at a time, when scored
        from kebab_eval_pipeline.store.repeat_rows import read_repeat

        out = dataclasses.replace(
            out,
            repeats=dataclasses.replace(
                out.repeats,
                hits_reader=lambda r: read_repeat(
                    store, "retrieval_results", run_id, "repeat_hits", r, columns
                ),
            ),
        )
    return out


#: The stored hit columns :func:`judge.inputs.judge_inputs` builds the judge's context from.
JUDGE_HIT_COLUMNS = ("query_id", "rank", "chunk_id", "doc_id", "doc_path", "heading_path", "snippet")


def with_stored_hits(
    retrieval: RetrievalArtifact,
    store: RunStore,
    run_id: str,
    columns: Sequence[str],
    step: str,
    sparse: bool = False,
    keys: Sequence[str] = (),
) -> RetrievalArtifact:
    """``retrieval`` (read by the IO manager without its hit columns) with the hits read from
    ``store`` in ``columns`` only: a step that needs a few columns of the hits, or none under some
    settings, reads them itself. ``sparse``: without the columns no hit sets (for readers that
    treat an absent column as all null); ``keys``: hit columns read as ``Categorical`` codes from
    the file's dictionary pages (``SCORING_HIT_KEYS``: the metric kernels take the codes).

    The two reads must see one publication: when the hits read here have another row count than
    ``retrieval``'s (re-published in between, which the run lock should prevent), this raises rather
    than use one attempt's hits with another's outcomes."""
    others = {name: [] for name in ("outcomes", "citations", "known_chunks", *REPEAT_TABLES)}
    tables, _ = store.read(
        "retrieval_results",
        run_id,
        columns={"hits": list(columns), **others},
        sparse=("hits",) if sparse else (),
        keys={"hits": list(keys)},
    )
    before, now = len(retrieval.results.hits), len(tables["hits"])
    if before != now:
        raise RuntimeError(
            f"retrieval_results of run {run_id!r} changed while {step} read it ({before} hit rows, "
            f"then {now}): materialize {step} again"
        )
    return dataclasses.replace(retrieval, results=dataclasses.replace(retrieval.results, hits=tables["hits"]))


def _scored(
    settings: RunSettings, golden: GoldenArtifact, results: RetrievalResults, lacks: dict[str, str]
) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """One pass of results scored (``(scores, verification)``): the hits verified against the source
    root when one is configured, every query scored, the metrics the run cannot measure nulled."""
    verification = verify_hits(results.hits, settings.source_root) if settings.source_root else None
    scores = score_results(
        golden.queries,
        golden.supports,
        results,
        settings.k,
        settings.mrr_cutoff,
        settings.match,
        verification,
        relevance_level=settings.relevance_level,
    )
    return null_unmeasured(scores, lacks)[0], verification


def score(
    settings: RunSettings,
    golden: GoldenArtifact,
    retrieval: RetrievalArtifact,
    judged: JudgeArtifact | None = None,
) -> QueryScoresArtifact:
    """Per-query scores: one row per golden query (nulls where a metric does not apply), stored
    rounded to 4 decimals, plus the run-level summary computed from the unrounded scores. With an
    enabled judge artifact, the judge columns (``judge.metrics.judge_query_columns``) are added."""
    # What the run could not carry (citations in OpenInference traces, answers from a search-only
    # system): those metrics' per-query columns are null, not the 0 a kernel writes for "none".
    lacks = run_lacks(retrieval)
    scores, verification = _scored(settings, golden, retrieval.results, lacks)
    repeated = None
    if retrieval.repeats is not None:  # per-query means over repeats, modal ranks, flakiness
        repeated = score_repeats(settings, golden, retrieval, scores)
        scores = repeated.scores
    if judged is not None and judged.enabled:
        from kebab_eval_pipeline.judge.metrics import judge_query_columns

        columns = judge_query_columns(scores["query_id"], judged.judgements, scores["groundedness_rule"])
        scores, _ = null_unmeasured(pd.concat([scores, columns], axis=1), lacks)
    info = {
        "k": settings.k,
        "mrr_cutoff": settings.mrr_cutoff,
        "match": settings.match,
        "relevance_level": settings.relevance_level,
        # the metric definitions these scores follow: readers upgrade older runs on load
        "scoring_version": SCORING_VERSION,
        **match_details(settings.match, scores, golden, retrieval),
        "source_root": settings.source_root,
        "hit_verdicts": hallucination_counts(verification) if verification is not None else None,
    }
    summary = summarize_scores(scores, settings.k)
    if repeated is None:
        return QueryScoresArtifact(round_scores(scores), info, summary, verification=verification)
    info["repeat"] = retrieval.repeat_count
    return QueryScoresArtifact(
        round_scores(scores),
        info,
        repeated_summary(summary, repeated),
        verification=verification,
        repeat_metrics=repeated.per_repeat,
    )


def score_repeats(
    settings: RunSettings, golden: GoldenArtifact, retrieval: RetrievalArtifact, first: pd.DataFrame
) -> RepeatedScores:
    """A repeated run's per-query scores (:mod:`metrics.repeats`): ``first`` (repeat 1's unrounded
    scores) and every other repeat scored the same way, one repeat in memory at a time (its hits
    read then, when the retrieval came from the store); each repeat's hits are verified against
    the source root on their own when one is configured."""
    repeats = retrieval.repeats
    if repeats is None:
        raise ValueError("score_repeats needs a retrieval with repeats")
    accumulator = RepeatAccumulator(settings.k)
    accumulator.add(first, retrieval.results.outcomes)
    lacks = run_lacks(retrieval)
    for repeat in range(2, retrieval.repeat_count + 1):
        results = repeats.results_of(repeat, retrieval.results)
        scores, verification = _scored(settings, golden, results, lacks)
        accumulator.add(scores, results.outcomes)
        del results, scores, verification
    return accumulator.finish()


def run_lacks(retrieval: RetrievalArtifact) -> dict[str, str]:
    """What a run could not carry (capability → reason): its system's recorded capabilities, and
    answers when it did not ask for them (:func:`metrics.measurable.lacks_of`)."""
    return lacks_of(retrieval.results.system, bool(retrieval.info.get("answers", True)))


def match_details(
    configured: str, scores: pd.DataFrame, golden: GoldenArtifact, retrieval: RetrievalArtifact
) -> dict[str, Any]:
    """What matching did: ``match_resolved`` (the criterion every query with supports was matched
    by, ``mixed`` when they differ, None without supports), ``match_by_query`` ({criterion: queries})
    and ``matching_warnings`` (:func:`~kebab_eval_pipeline.metrics.matching_diagnostics.matching_warnings`:
    what in the hits keeps them from matching the golden set)."""
    resolved, by_query = summarize_criteria(scores["match_criterion"])
    per_query = None
    if configured == "auto":
        known = scores["match_criterion"].notna().to_numpy()
        per_query = pd.Series(
            scores["match_criterion"].array[known], index=pd.Index(scores["query_id"].array[known])
        )
    # A query with a relevant hit means something matched: the catch-all check need not match again.
    found = [c for c in scores.columns if c == "first_relevant_rank" or c.startswith("recall_any@")]
    matched_any = bool(scores[found].fillna(0).to_numpy(dtype=float).any()) if found else None
    warnings = matching_warnings(
        retrieval.results.hits, golden.supports, configured, per_query, matched_any=matched_any
    )
    return {"match_resolved": resolved, "match_by_query": by_query, "matching_warnings": warnings}


def run_identity(
    run_id: str, settings: RunSettings, golden: GoldenArtifact, retrieval: RetrievalArtifact
) -> dict[str, Any]:
    """Everything that makes two runs comparable, for metadata, exports and comparison."""
    system = retrieval.results.system
    g = golden.info
    details = {"kind": system.kind, "mode": system.mode, **system.details}
    # Recorded at retrieval; a retrieval stored before identities were recorded: derived if it can be.
    identity = retrieval.info.get("system_identity") or derive_identity(details)
    # A sweep's variant records its swept settings: beside the versions (a comparison of two
    # variants shows what differed) and as they were written (the leaderboard's columns).
    sweep = settings.sweep
    variant = None if sweep is None else find_variant(sweep.name, sweep.grid, run_id)
    return {
        "run_id": run_id,
        "created_at": datetime.now(UTC).isoformat(),
        "pipeline_version": pipeline_revision(),
        "versions": {**system.versions(), **(variant_versions(sweep.name, variant) if variant else {})},
        **(
            {"sweep": {"name": sweep.name, "variant": variant.slug, "settings": variant.overrides}}
            if variant
            else {}
        ),
        "system": {
            "kind": system.kind,
            "mode": system.mode,
            **system.details,
            **({"coverage": system.coverage} if system.coverage else {}),
            **({"identity": identity} if identity else {}),
            # what its runs could carry (systems/capabilities.py), as the built system declared it
            **({"capabilities": system.capabilities} if system.capabilities else {}),
        },
        "golden": {
            "name": g["name"],
            "path": g["source"],
            "sha256": g["sha256"],
            "queries": len(golden.queries),
            "format": g["format"],
        },
        "k": settings.k,
        "mrr_cutoff": settings.mrr_cutoff,
        "match": settings.match,
        "relevance_level": settings.relevance_level,
        "scoring_version": SCORING_VERSION,
        "answers": settings.answers,
    }


def summarize(
    run_id: str,
    settings: RunSettings,
    golden: GoldenArtifact,
    retrieval: RetrievalArtifact,
    scores: QueryScoresArtifact,
    judged: JudgeArtifact | None = None,
    role: RunRole | None = None,
) -> RunMetricsArtifact:
    """Aggregate metrics (None for empty denominators), their denominators and breakdowns, plus
    the system's indexing coverage as ``index_*`` metrics (None when it reports none) and, when the
    run was judged, the run-level judge metrics (``judge.metrics.judge_run_metrics``). ``info`` has
    the run's identity, its ``role`` (``role``, else :func:`run_role` without tags: a sweep variant
    or ``manual``), its ``system_health`` verdict (:func:`metrics.health.system_health`), its
    ``gates`` (every absolute gate's result, :func:`gates.evaluate.evaluate_gates`) and its
    ``outcome`` as far as these tell (:func:`compare.outcome.metrics_outcome`); ``report`` is the
    rendered run report (``run.md``)."""
    summary = scores.summary or summarize_scores(scores.scores, settings.k)  # runs stored before summaries
    metrics = {**summary.metrics, **indexing_metrics(retrieval.results.system.coverage)}
    denominators = dict(summary.denominators)
    info = run_identity(run_id, settings, golden, retrieval)
    lacks = run_lacks(retrieval)
    # What the run is (how it was started): an automatic baseline is a run of the same role family.
    info["role"] = (role or run_role(settings, run_id)).as_dict()
    # Whether the system under test worked: the system_health check fails the run on it.
    info["system_health"] = system_health(retrieval.results.outcomes, settings.system_health).as_dict()
    # How the hits were matched (absent from query_scores stored before it was recorded).
    for key in ("match_resolved", "match_by_query", "matching_warnings"):
        if key in scores.info:
            info[key] = scores.info[key]
    if judged is not None and judged.enabled:
        from kebab_eval_pipeline.judge.metrics import judge_run_metrics, reply_warnings

        judge_metrics, judge_n = judge_run_metrics(judged.judgements, judged.info)
        metrics.update(judge_metrics)
        denominators.update(judge_n)
        info["judge"] = judge_identity(judged.info)
        # replies that did not parse, scores resting on little probability: said with the run's
        # numbers (its output, report and export), not only in the judge step's log
        info["judge_reply_warnings"] = reply_warnings(judged.judgements)
        calibration = settings.judge.calibration if settings.judge is not None else None
        if calibration is not None:  # the judge against a person's labels (judge/calibration.py)
            from kebab_eval_pipeline.judge.calibration import run_calibration
            from kebab_eval_pipeline.judge.metrics import PASS_SCORE

            cal_metrics, cal_n, info["judge_calibration"] = run_calibration(
                calibration, judged.judgements, golden.queries, PASS_SCORE
            )
            metrics.update(cal_metrics)
            denominators.update(cal_n)
        if judged.info.get("self_consistency"):  # the same items, evidence reordered: verdict flips
            from kebab_eval_pipeline.judge.metrics import PASS_SCORE
            from kebab_eval_pipeline.judge.self_consistency import flip_rates

            flip_metrics, flip_n, info["judge_self_consistency"] = flip_rates(judged.judgements, PASS_SCORE)
            metrics.update(flip_metrics)
            denominators.update(flip_n)
        if judged.info.get("relevance_sample"):  # the relevance judge against the golden set's verdicts
            from kebab_eval_pipeline.judge.metrics import RELEVANCE_KAPPA
            from kebab_eval_pipeline.judge.relevance_calibration import relevance_agreement

            record = relevance_agreement(judged.judgements, pd.DataFrame(judged.info["relevance_sample"]))
            info["judge_relevance_calibration"] = record
            metrics[RELEVANCE_KAPPA] = None if record["kappa"] is None else round(record["kappa"], 4)
            denominators[RELEVANCE_KAPPA] = record["n"]
    # How much of the ranking the golden set judged; a warning when too little (metrics.judged_coverage).
    info["judged_coverage"] = judged_coverage(metrics, settings.compare.min_judged)
    info["judged_warning"] = judged_warning("this run", info["judged_coverage"], comparing=False)
    if scores.repeat_metrics is not None:  # asked N > 1 times: noise floor and flaky queries
        info["repeats"] = repeats_info(scores.scores, scores.repeat_metrics, int(scores.info["repeat"]))
        if retrieval.info.get("repeat_auto") is not None:  # repeat: auto — why it stopped where it did
            info["repeats"]["auto"] = retrieval.info["repeat_auto"]
    # What the run could not measure, and why: null, never 0 (metrics/measurable.py).
    info["not_measured"] = catalogue.not_measured(metrics, lacks)
    for name in info["not_measured"]:
        metrics[name] = None
    # The gates, evaluated once: the asset checks and the CLI read these results. A default gate
    # on a metric the run could not measure is left out (not listed as skipped).
    info["gates"] = [g.as_dict() for g in evaluate_gates(settings, metrics, summary.breakdowns, lacks)]
    # Passed or failed, as far as the system health and absolute gates tell (the regression gates
    # come with the comparison, which records the whole outcome).
    info["outcome"] = metrics_outcome(info)
    return RunMetricsArtifact(
        metrics=metrics,
        denominators=denominators,
        breakdowns=summary.breakdowns,
        info=info,
        report=render_run_markdown(run_id, info, metrics, summary.breakdowns, info["gates"], denominators),
    )


def run_role(
    settings: RunSettings, run_id: str, tags: Mapping[str, str] | None = None, default: str = MANUAL
) -> RunRole:
    """The role of run ``run_id`` (:func:`run_roles.decide_role`): a variant of ``settings.sweep``
    when its id names one, else what its Dagster run ``tags`` say, else ``default``. Raises
    InputError for a ``kebab-eval/role`` tag that is not a role."""
    sweep = settings.sweep
    variant = None if sweep is None else find_variant(sweep.name, sweep.grid, run_id)
    return decide_role(tags or {}, None if variant is None else sweep.name, default)


def judge_identity(info: dict[str, Any]) -> dict[str, Any]:
    """What pins a run's judge scores: both judges' backend, model, digest, prompt version and
    decoding, and the spot-check settings (in run metadata, exports and comparisons)."""
    keep = ("backend", "model", "digest", "pinned", "prompt_version", "decoding", "note")

    def pick(judge: dict[str, Any] | None) -> dict[str, Any] | None:
        return None if judge is None else {k: judge[k] for k in keep if k in judge}

    return {
        "judge": pick(info.get("judge")),
        "spot_check_judge": pick(info.get("spot_check_judge")),
        "spot_check_rate": info.get("spot_check_rate"),
        "spot_check_seed": info.get("spot_check_seed"),
        "context_k": info.get("context_k"),
        "context_chars": info.get("context_chars"),
        "judge_version": info.get("judge_version"),
    }


def compare(
    run_id: str, settings: RunSettings, store: RunStore, metrics: RunMetricsArtifact
) -> ComparisonArtifact:
    """This run against its baseline: the baseline chosen by ``settings.baseline``
    (:func:`compare.baseline.resolve_baseline`; none is a note, not a failure), the comparison
    (:func:`compare.runs.compare_runs`, reading both runs from ``store``), its regression and verdict
    gates evaluated once (``info["gates"]``) and its report files rendered (``files``). Raises
    InputError when the chunker versions differ and ``compare.strict_chunker_version`` is set."""
    role = role_of(run_id, metrics.info)
    choice = resolve_baseline(
        store,
        run_id,
        settings.baseline,
        metrics.info["golden"],
        metrics.info["created_at"],
        system=metrics.info.get("system"),
        role=role,
    )
    if choice.run_id is None:
        report = no_baseline(run_id, choice.note, metrics)
    else:
        baseline, candidate = store.stored_run(choice.run_id), store.stored_run(run_id)
        flags = gate_resolution(settings, baseline, candidate)
        report = compare_runs(
            baseline,
            candidate,
            baseline_note=choice.note,
            options=settings.compare,
            gated=list(settings.regression_gates),
            margins=comparison_margins(settings),
            judge_suspects=suspect_judge(settings, store),
            warnings=[*choice.warnings, *(f.text for f in flags)],
            relevance_labels=relevance_references(settings),
        )
        report.info["gate_resolution"] = [f.as_dict() for f in flags]
    report.info["role"] = role.as_dict()
    report.info["baseline_skipped"] = [s.as_dict() for s in choice.skipped]
    return with_gates_and_files(report, settings, metrics.info)


def compare_stored(
    store: RunStore, a: str, b: str, settings: RunSettings, strict_chunker_version: bool | None = None
) -> ComparisonArtifact:
    """Two stored runs compared (delta = b − a; ``kebab-eval compare A B``), with the regression and
    verdict gates of ``settings`` and the report files, as :func:`compare` makes them."""
    run_a, run_b = store.stored_run(a), store.stored_run(b)
    resolution = gate_resolution(settings, run_a, run_b)
    # What an automatic baseline never is (a failed run, another role family): said, not refused.
    stored = store.manifest("comparison_report", a)
    flags = flag_baseline(
        a,
        "given",
        run_a.metrics.info,
        None if stored is None else stored.get("info") or {},
        role_of(b, run_b.metrics.info),
    )
    report = compare_runs(
        run_a,
        run_b,
        strict_chunker_version=strict_chunker_version,
        baseline_note=f"baseline {a!r} (given on the command line" + "".join(f"; {f}" for f in flags) + ")",
        options=settings.compare,
        gated=list(settings.regression_gates),
        margins=comparison_margins(settings),
        judge_suspects=suspect_judge(settings, store),
        warnings=[*flags, *(f.text for f in resolution)],
        relevance_labels=relevance_references(settings),
    )
    report.info["gate_resolution"] = [f.as_dict() for f in resolution]
    return with_gates_and_files(report, settings)


def gate_resolution(
    settings: RunSettings,
    baseline: StoredRun,
    candidate: StoredRun | None = None,
    store: RunStore | None = None,
) -> list[ResolutionFlag]:
    """The regression gates' bounds finer than the golden set resolves
    (:func:`gates.resolution.resolution_flags`): from the paired differences of ``candidate``
    against ``baseline`` when given; before a run, from the baseline's own stored comparison in
    ``store`` when it has one, else its per-query variance. Raises InputError naming each bound
    when ``compare.strict_resolution`` is set."""
    stored = None
    if candidate is None and store is not None and store.exists("comparison_report", baseline.run_id):
        with contextlib.suppress(InputError, OSError, KeyError):
            stored = store.read("comparison_report", baseline.run_id)[0].get("per_metric")
    estimates = variance_estimates(
        list(settings.regression_gates),
        baseline.scores.scores,
        None if candidate is None else candidate.scores.scores,
        stored,
    )
    flags = resolution_flags(
        settings.regression_gates,
        estimates,
        settings.compare.alpha,
        baseline_repeats=baseline.metrics.info.get("repeats"),
    )
    if flags and settings.compare.strict_resolution:
        raise InputError(
            "regression gates finer than the golden set can resolve (compare.strict_resolution)",
            [
                Offender(
                    f"gates.regression.{f.metric}.{f.kind}", f.text, field=f"gates.regression.{f.metric}"
                )
                for f in flags
            ],
        )
    return flags


def resolution_before_run(settings: RunSettings, store: RunStore, golden_name: str | None) -> list[str]:
    """What :func:`gate_resolution` says before a run, where the baseline is known then: a run id
    given as ``baseline:``, or the run pinned for the golden set (``auto``, ``pinned``). A
    ``previous`` baseline is chosen when the run ends, and checked then. Warnings (texts); raises
    as :func:`gate_resolution` does with ``compare.strict_resolution``."""
    if not settings.regression_gates or settings.baseline in ("none", "previous"):
        return []
    baseline = settings.baseline
    if baseline in ("auto", "pinned"):
        pin = read_pins(store).get(golden_name or "")
        if pin is None:
            return []
        baseline = pin["run_id"]
    try:
        stored = store.stored_run(baseline)
    except InputError:
        return []  # a baseline that is not there: the comparison says so
    return [f"baseline {baseline!r}: {f.text}" for f in gate_resolution(settings, stored, store=store)]


def comparison_margins(settings: RunSettings) -> list[tuple[str, str, float]]:
    """The ``(metric, kind, δ)`` margins the run's regression gates set (``non_inferior``,
    ``equivalent``), for the comparison's report lines."""
    return [
        (metric, kind, float(getattr(gate, kind)))
        for metric, gate in settings.regression_gates.items()
        for kind in ("non_inferior", "equivalent")
        if getattr(gate, kind) is not None
    ]


def suspect_judge(settings: RunSettings, store: RunStore):
    """When the run has a judge: the function a comparison passes its suspect-gold queue through,
    each hit judged for relevance by the run's main judge through the run's judge cache
    (:func:`judge.relevance.judge_relevance`); None without a judge."""
    if settings.judge is None:
        return None
    judge_settings = settings.judge

    def judge(queue: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, Any]]:
        from kebab_eval_pipeline.judge.cache import JudgeCache
        from kebab_eval_pipeline.judge.relevance import judge_relevance

        with JudgeCache(store.judge_cache_path(judge_settings.cache_dir)) as cache:
            return judge_relevance(judge_settings, queue, cache)

    return judge


def relevance_references(settings: RunSettings) -> pd.DataFrame | None:
    """The reference relevance labels of the run's labels file (``judge.calibration.labels``: one
    per labelled hit, the labellers' lower median) that correct a comparison's provisional labels;
    None without a labels file or a compared provisional depth. A bad file is an InputError."""
    judge = settings.judge
    if judge is None or judge.calibration is None or not settings.compare.provisional_depth:
        return None
    from kebab_eval_pipeline.judge.labels import read_labels, reference_labels

    labels = read_labels(Path(judge.calibration.labels))
    return reference_labels(labels[labels["criterion"] == "relevance"])


def rank_stored(
    store: RunStore,
    run_ids: Sequence[str],
    settings: RunSettings,
    metrics: Sequence[str] | None = None,
    alpha: float = DEFAULT_ALPHA,
    strict_chunker_version: bool | None = None,
) -> Ranking:
    """Three or more stored runs ranked (``kebab-eval compare A B C …``, the ``run_ranking``
    asset): :func:`compare.ranking.rank_runs` with ``settings.compare``'s seed, resamples and
    strictness, its Markdown and its files (``ranking.md``/``.html``/``.json``).

    Raises InputError naming every offender at once: a run id given twice, every run id that is
    not stored whole, an alpha outside (0, 1), every unknown or unrankable metric name; then (the
    runs read) every metric some run did not score."""
    offenders = [
        Offender(f"run {run_id}", "given more than once")
        for run_id in dict.fromkeys(r for r in run_ids if list(run_ids).count(r) > 1)
    ]
    if not 0.0 < alpha < 1.0:
        offenders.append(Offender("--alpha", f"{alpha!r}: must be above 0 and below 1"))
    offenders += metric_name_offenders(list(dict.fromkeys(metrics or [])))
    runs = []
    for run_id in dict.fromkeys(run_ids):
        try:
            runs.append(store.stored_run(run_id))
        except InputError as exc:
            where = "; ".join(o.render() for o in exc.offenders)
            offenders.append(Offender(f"run {run_id}", exc.summary + (f" ({where})" if where else "")))
    if offenders:
        raise InputError("cannot rank these runs", offenders)
    ranking = rank_runs(
        runs, metrics, alpha=alpha, options=settings.compare, strict_chunker_version=strict_chunker_version
    )
    ranking.markdown = render_ranking_markdown(ranking)
    ranking.files = ranking_files(ranking)
    return ranking


def with_gates_and_files(
    report: ComparisonArtifact, settings: RunSettings, metrics_info: Mapping[str, Any] | None = None
) -> ComparisonArtifact:
    """``report`` with its regression and verdict gate results (``info["gates"]``), the whole
    outcome of run b when its ``metrics_info`` is given (``info["outcome"]``: the comparison of a
    run's own chain, :func:`compare.outcome.run_outcome`) and, rendered from all that, its report
    files (``files``: Markdown, standalone HTML, JSON)."""
    report.info["gates"] = [g.as_dict() for g in evaluate_comparison_gates(settings, report)]
    if metrics_info is not None:
        report.info["outcome"] = run_outcome(metrics_info, report.info).as_dict()
    report.files = report_files(report)
    return report


#: The headline metrics, in order (the metric catalogue's ``headline`` positions, every cut-off).
HEADLINE: tuple[str, ...] = tuple(catalogue.headline_names())


def headline(metrics: dict[str, float | None], ks: list[int]) -> dict[str, float | None]:
    """The few numbers shown first (and plotted across runs in the Dagster UI)."""
    return {name: metrics[name] for name in catalogue.headline_names(ks) if name in metrics}


def check_source_root(settings: RunSettings) -> None:
    """InputError (field ``source_root``) unless it is unset or an existing folder: a wrong root
    would report every hit as a hallucination, so it fails before any query runs."""
    if settings.source_root and not Path(settings.source_root).is_dir():
        raise InputError(
            "source_root is not a directory",
            [Offender(settings.source_root, "missing or not a directory", field="source_root")],
        )


def check_run_inputs(settings: RunSettings) -> None:
    """What a run reads besides its config file, checked before the run starts (the CLI calls it;
    the steps check the same for runs started from Dagster): ``source_root`` is a folder, and each
    judge that will be asked (the main one; the spot-check one when its rate is above 0) has an
    existing model file or folder, or a set and sendable API key variable. Raises InputError
    naming the key (``source_root``, ``judge.model``, ``judge.api_key_env``); loads no model and
    contacts no endpoint."""
    check_source_root(settings)
    if settings.judge is None:
        return
    from kebab_eval_pipeline.judge.backends import build_backend

    judges = [settings.judge.judge_model()]
    if settings.judge.spot_check_rate > 0:
        judges.append(settings.judge.spot_check_judge())
    for model in judges:
        backend = build_backend(model)
        close = getattr(backend, "close", None)
        if close is not None:  # an endpoint client's connection pool
            close()


def sweep_metric(settings: RunSettings) -> str:
    """The metric a sweep's leaderboard ranks on: ``sweep.metric``, else the first headline metric."""
    sweep = settings.sweep
    return (sweep.metric if sweep is not None else None) or catalogue.headline_names(settings.k)[0]


def stored_variants(store: RunStore, settings: RunSettings) -> tuple[list[Variant], list[Variant]]:
    """The variants of ``settings.sweep`` (grid order) split into those with a whole stored run
    (every asset a comparison reads, not interrupted: a variant stopped by Ctrl-C after its metrics
    were stored is run again) and the others. InputError (field ``sweep``) without a sweep."""
    if settings.sweep is None:
        raise InputError("no sweep", [Offender("<config>", "the config has no sweep: block", field="sweep")])
    variants = expand(settings.sweep.name, settings.sweep.grid)

    def whole_run(run_id: str) -> bool:
        if not all(store.exists(asset, run_id) for asset in RUN_ASSETS):
            return False
        return not ((store.manifest("run_metrics", run_id) or {}).get("info") or {}).get(INTERRUPTED)

    whole = [v for v in variants if whole_run(v.run_id)]
    return whole, [v for v in variants if v not in whole]


def rank_sweep(store: RunStore, settings: RunSettings, outcome: str | None = None) -> Leaderboard:
    """The leaderboard of ``settings.sweep``: its stored variants ranked on :func:`sweep_metric` by
    :func:`rank_stored` (the compare settings' seed and resamples), each with its role and outcome
    (:func:`run_roles.role_of`, :func:`compare.outcome.run_outcome`), the variants not stored listed
    as ``missing``; with ``outcome`` (passed | failed) only the variants of that outcome are ranked,
    the others listed as ``left_out``. InputError without a sweep, for an unknown outcome, with fewer
    than two variants to rank, or when the runs cannot be ranked on the metric (naming it)."""
    if outcome is not None and outcome not in OUTCOMES:
        raise InputError(
            "bad outcome", [Offender("--outcome", f"{outcome!r}: expected one of {', '.join(OUTCOMES)}")]
        )
    stored, missing = stored_variants(store, settings)
    standing, left_out = {}, []
    for variant in list(stored):
        info = (store.manifest("run_metrics", variant.run_id) or {}).get("info") or {}
        comparison = store.manifest("comparison_report", variant.run_id)
        judged = run_outcome(info, None if comparison is None else comparison.get("info") or {})
        standing[variant.run_id] = (role_of(variant.run_id, info).label, judged.label())
        if outcome is not None and judged.outcome != outcome:
            stored.remove(variant)
            left_out.append(f"{variant.slug}: {judged.label()}")
    if len(stored) < 2:
        kept = f" with outcome {outcome}" if outcome is not None else ""
        raise InputError(
            "nothing to rank",
            [
                Offender(
                    f"sweep {settings.sweep.name}",
                    f"{len(stored)} of {len(stored) + len(missing) + len(left_out)} variants stored{kept}: "
                    "a leaderboard needs two",
                    field="sweep",
                )
            ],
        )
    metric = sweep_metric(settings)
    ranking = rank_stored(store, [v.run_id for v in stored], settings, metrics=[metric])
    return build_leaderboard(
        settings.sweep.name,
        metric,
        ranking,
        stored,
        [v.slug for v in missing],
        standing=standing,
        left_out=left_out,
    )
