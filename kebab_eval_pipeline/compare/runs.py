"""Compare two stored runs: metric deltas, per-query verdicts, version diff, golden drift.

Used by :func:`kebab_eval_pipeline.chain.pipeline.compare` (a run vs its baseline: the
``comparison_report`` asset) and :func:`~kebab_eval_pipeline.chain.pipeline.compare_stored`
(``kebab-eval compare A B``); both produce the same :class:`ComparisonArtifact`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from kebab_eval_pipeline.chain.artifacts import ComparisonArtifact, RunMetricsArtifact
from kebab_eval_pipeline.compare.comparison_tables import comparison_tables
from kebab_eval_pipeline.compare.corrected import corrected_deltas, corrected_markdown, judged_margins
from kebab_eval_pipeline.compare.deltas import metric_table, slice_deltas, without_slice_tests, without_tests
from kebab_eval_pipeline.compare.drift import (
    no_changed_gold,
    not_restricted_metrics,
    restricted_scores,
    restriction_info,
    set_aside_changed,
)
from kebab_eval_pipeline.compare.fallback import MatchPlan, one_criterion, plan_matching, rescore
from kebab_eval_pipeline.compare.judge_drift import judge_drift, without_judged_verdicts
from kebab_eval_pipeline.compare.margins import margin_rows
from kebab_eval_pipeline.compare.provisional import provisional_comparison, provisional_markdown
from kebab_eval_pipeline.compare.repeats import (
    draws_within_repeats,
    repeats_info,
    repeats_markdown,
    with_noise,
)
from kebab_eval_pipeline.compare.report import render_markdown
from kebab_eval_pipeline.compare.settings import CompareSettings
from kebab_eval_pipeline.compare.suspect_gold import (
    SUSPECT_COLUMNS,
    queue_summary,
    suspect_gold,
    suspect_markdown,
)
from kebab_eval_pipeline.compare.systems import systems_info, unknown_system_warning, with_systems_note
from kebab_eval_pipeline.compare.verdicts import (
    FRAME_COLUMNS,
    flip_counts,
    per_query_verdicts,
    verdict_counts,
)
from kebab_eval_pipeline.foundation.json_records import plain_value
from kebab_eval_pipeline.golden.diff import GoldenDiff, diff_golden
from kebab_eval_pipeline.metrics import catalogue, legacy
from kebab_eval_pipeline.metrics.aggregate import summarize_scores
from kebab_eval_pipeline.metrics.judged_coverage import judged_coverage, judged_warning
from kebab_eval_pipeline.metrics.matching_diagnostics import match_line
from kebab_eval_pipeline.store.runs import StoredRun

# Bumped when a comparison of the same two runs would come out differently.
COMPARE_VERSION = "compare-4"  # 4: score bounds, MDE, judge drift, judged metrics corrected by labels


def _per_query_frame(scores: pd.DataFrame) -> pd.DataFrame:
    """One run's per-query inputs to the verdicts (:data:`~.verdicts.FRAME_COLUMNS`)."""
    return pd.DataFrame(
        {
            "query_id": scores["query_id"],
            "applicable": scores["applicable"],
            "rank": scores["first_relevant_rank"].astype("Int64"),
            "answerable": scores["answerable"],
            "refused": scores["refused"].astype("boolean") if "refused" in scores else pd.NA,
            "grounded": scores.get("groundedness_rule", np.nan),
        }
    )


#: Query labels copied into the per-query table, so verdicts can be sliced (e.g. tag = critical).
QUERY_LABELS: dict[str, str] = {
    "category": "string",
    "difficulty": "string",
    "lang": "string",
    "tags": "object",
    "answerable": "boolean",
}


def _with_labels(
    verdicts: pd.DataFrame, scores_a: pd.DataFrame, scores_b: pd.DataFrame, changed: pd.DataFrame
) -> pd.DataFrame:
    """Verdicts plus ``gold_changed`` and :data:`QUERY_LABELS` (b's labels; a's for queries only in a)."""
    labels = pd.concat(
        [scores_b[["query_id", *QUERY_LABELS]], scores_a[["query_id", *QUERY_LABELS]]], ignore_index=True
    ).drop_duplicates("query_id", keep="first")
    out = verdicts.merge(labels, on="query_id", how="left")
    out["tags"] = out["tags"].map(
        lambda t: [str(x) for x in t] if isinstance(t, list | tuple | np.ndarray) else []
    )
    out["gold_changed"] = (
        out["query_id"].astype(object).isin(pd.Index(changed["query_id"].astype(object)))
        if len(changed)
        else False
    )
    return out.astype({**QUERY_LABELS, "gold_changed": "bool"})


def _restricted(
    scores: pd.DataFrame, metrics: dict, diff: GoldenDiff
) -> tuple[pd.DataFrame, dict, pd.DataFrame, list[str]]:
    """A run's (query_scores, metrics, breakdowns) over the queries unchanged between the two
    golden sets, and the metrics left as the run measured them: every metric the per-query scores
    give is aggregated again over those queries
    (:func:`~kebab_eval_pipeline.metrics.aggregate.summarize_scores`, from the stored 4-decimal
    scores); run-level numbers (indexing, judge calls, …) have no per-query form and stay."""
    kept = restricted_scores(scores, diff)
    summary = summarize_scores(kept)
    return (
        kept,
        {**metrics, **summary.metrics},
        summary.breakdowns,
        not_restricted_metrics(metrics, summary.metrics),
    )


def _common_queries(scores_a: pd.DataFrame, scores_b: pd.DataFrame) -> int:
    # Python sets: pandas' isin on Arrow-backed strings falls back to a slow per-row loop.
    return len(set(scores_a["query_id"].astype(object)) & set(scores_b["query_id"].astype(object)))


def _warnings(
    a: StoredRun,
    b: StoredRun,
    plan: MatchPlan,
    n_common: int,
    verdicts: pd.DataFrame,
    options: CompareSettings,
    restriction: dict | None = None,
) -> list[str]:
    """What a reader must know before trusting the deltas, most important first."""
    out: list[str] = []
    if n_common < options.min_queries:
        out.append(
            f"only {n_common} queries in common (< min_queries {options.min_queries}): "
            "differences between these runs are not conclusive"
        )
    if plan.mode != "exact":
        out.append(f"{plan.mode}: {plan.note}")
    if plan.criterion is None:
        out.extend(_rescored_notes(a, b))
    ga, gb = a.metrics.info.get("golden", {}), b.metrics.info.get("golden", {})
    if ga.get("sha256") != gb.get("sha256"):
        only_a = int((verdicts["verdict"] == "only_a").sum())
        only_b = int((verdicts["verdict"] == "only_b").sum())
        changed = int(verdicts["gold_changed"].sum())
        out.append(
            f"golden sets differ (a: {ga.get('name')} sha256 {str(ga.get('sha256'))[:12]}, "
            f"b: {gb.get('name')} sha256 {str(gb.get('sha256'))[:12]}): {only_a} queries only in a, "
            f"{only_b} only in b, {changed} with changed gold"
            + (
                f": compared over the {restriction['n_compared']} unchanged queries"
                if restriction is not None
                else ""
            )
        )
    level_a, level_b = (int(x.scores.info.get("relevance_level") or 1) for x in (a, b))  # before: 1
    if level_a != level_b:
        out.append(
            f"the runs were scored with different relevance levels (a: grade ≥ {level_a}, "
            f"b: grade ≥ {level_b}): "
            "their binary retrieval metrics count different supports as relevant"
        )
    ma, mb = a.scores.info.get("match"), b.scores.info.get("match")
    la, lb = match_line(a.scores.info), match_line(b.scores.info)
    same = one_criterion(a) is not None and one_criterion(a) == one_criterion(b)
    if plan.mode != "exact" or same:
        pass  # re-scored under one criterion, or both matched every query alike (auto → anchor is anchor)
    elif ma != mb:
        out.append(f"the runs were scored with different match criteria (a: {la or ma}; b: {lb or mb})")
    elif a.scores.info.get("match_by_query") != b.scores.info.get("match_by_query") and None not in (la, lb):
        out.append(f"the runs' hits were matched by different criteria (a: {la}; b: {lb})")
    return out


def _scores(bundle: StoredRun, criterion: str | None) -> tuple[pd.DataFrame, dict, pd.DataFrame]:
    """A run's per-query scores, metrics and breakdowns: as stored, or re-scored under ``criterion``."""
    if criterion is None:
        return current_scores(bundle)  # as stored, unless stored under older metric definitions
    scores, summary = rescore(bundle, criterion)
    # Matching-free numbers (operational, indexing, judge) stay as stored; the rest are re-scored.
    return scores, {**bundle.metrics.metrics, **summary.metrics}, summary.breakdowns


def compare_runs(
    a: StoredRun,
    b: StoredRun,
    strict_chunker_version: bool | None = None,
    baseline_note: str = "",
    options: CompareSettings | None = None,
    gated: Sequence[str] = (),
    margins: Sequence[tuple[str, str, float]] = (),
    judge_suspects: Callable[[pd.DataFrame], tuple[pd.DataFrame, dict]] | None = None,
    warnings: Sequence[str] = (),
    relevance_labels: pd.DataFrame | None = None,
) -> ComparisonArtifact:
    """Compare candidate ``b`` against baseline ``a`` (delta = b − a): the one implementation
    behind the ``comparison_report`` asset and ``kebab-eval compare``.

    Matching follows :func:`~.fallback.plan_matching` (each run's stored scores when the chunkers
    agree; when not, both compared under ``anchor``/``span``/``doc``, a run re-scored only when it
    was scored by another criterion); per-metric deltas carry the paired
    test (``options.seed``/``resamples``); the per-query table carries verdicts, flips, gold
    changes and query labels. The suspect-gold queue (:mod:`.suspect_gold`: b's unjudged hits
    above its first relevant hit in each loss and regression) is stored with the report, passed
    through ``judge_suspects`` first when given (the judge's relevance verdicts, and what to record
    of the judge in ``info["suspect_judge"]``); with ``compare.provisional_depth`` the same judge
    labels both runs' unjudged hits provisionally, corrected by ``relevance_labels`` (a person's
    reference labels, :func:`~kebab_eval_pipeline.judge.labels.reference_labels`) where they cover
    pooled queries (:mod:`.provisional`). ``warnings`` come first among the report's warnings
    (what the baseline choice knows: a pinned baseline that failed its gates). Raises
    :class:`InputError` when the chunkers differ and strictness (argument, else
    ``options.strict_chunker_version``) is on."""
    options = options or CompareSettings()
    strict = options.strict_chunker_version if strict_chunker_version is None else strict_chunker_version
    plan = plan_matching(a, b, strict)
    scores_a, metrics_a, breakdowns_a = _scores(a, plan.criterion if plan.rescore_a else None)
    scores_b, metrics_b, breakdowns_b = _scores(b, plan.criterion if plan.rescore_b else None)

    # Two golden-set versions: the numbers are taken over the queries unchanged between them
    # (compare/drift.py); queries whose gold changed are set aside, never compared.
    diff = (
        diff_golden(a.golden.queries, a.golden.supports, b.golden.queries, b.golden.supports)
        if a.golden.sha256 != b.golden.sha256
        else None
    )
    changed = diff.changed_fields() if diff is not None else no_changed_gold()
    verdicts = _with_labels(
        per_query_verdicts(_per_query_frame(scores_a), _per_query_frame(scores_b)),
        scores_a,
        scores_b,
        changed,
    )
    verdicts = set_aside_changed(verdicts, changed)
    # Repeated runs: a verdict within the queries' repeat ranges is a draw (compare/repeats.py).
    verdicts = draws_within_repeats(verdicts, scores_a, scores_b)
    restriction = None
    if diff is not None and not diff.is_empty:
        scores_a, metrics_a, breakdowns_a, kept_a = _restricted(scores_a, metrics_a, diff)
        scores_b, metrics_b, breakdowns_b, kept_b = _restricted(scores_b, metrics_b, diff)
        restriction = restriction_info(diff, set(kept_a) | set(kept_b))
    per_metric, per_slice, families = comparison_tables(
        scores_a, scores_b, metrics_a, metrics_b, breakdowns_a, breakdowns_b, options, gated
    )
    repeats_a, repeats_b = a.metrics.info.get("repeats"), b.metrics.info.get("repeats")
    per_metric = with_noise(per_metric, repeats_a, repeats_b, options.alpha)  # within noise: marked
    # Judged by different judges: judged metrics shown, never called better or worse (judge_drift.py)
    drift = judge_drift(a.metrics.info, b.metrics.info, a.run_id, b.run_id)
    per_metric = without_judged_verdicts(per_metric, drift)
    per_slice = without_judged_verdicts(per_slice, drift)
    n_common = _common_queries(scores_a, scores_b)
    info = {
        "run_a": a.run_id,
        "run_b": b.run_id,
        "created_at_a": a.metrics.info.get("created_at"),
        "created_at_b": b.metrics.info.get("created_at"),
        "baseline_note": baseline_note or f"baseline {a.run_id!r}",
        "versions_a": a.metrics.info.get("versions", {}),
        "versions_b": b.metrics.info.get("versions", {}),
        "system_a": a.metrics.info.get("system", {}),
        "system_b": b.metrics.info.get("system", {}),
        "golden_a": a.metrics.info.get("golden", {}),
        "golden_b": b.metrics.info.get("golden", {}),
        "chunker_version_match": plan.mode,
        "matching_criterion": plan.criterion or b.scores.info.get("match", "auto"),
        "rescored": [run for run, flag in (("a", plan.rescore_a), ("b", plan.rescore_b)) if flag],
        "fallback_note": plan.note,
        "scoring_versions": {
            "a": legacy.scoring_version(a.scores.info),
            "b": legacy.scoring_version(b.scores.info),
        },
        "verdict_counts": verdict_counts(verdicts),
        "flip_counts": flip_counts(verdicts),
        "only_in_a": verdicts.loc[verdicts["verdict"] == "only_a", "query_id"].tolist(),
        "only_in_b": verdicts.loc[verdicts["verdict"] == "only_b", "query_id"].tolist(),
        "gold_changed": [
            {"query_id": q, "fields": list(f)}
            for q, f in zip(changed["query_id"], changed["fields"], strict=True)
        ],
        "n_common": n_common,
        "min_queries": options.min_queries,
        "seed": options.seed,
        "resamples": options.resamples,
        "alpha": options.alpha,
        "families": families,
        "margins": [v.as_dict() for v in margin_rows(per_metric, margins, options.alpha)],
        "metrics_a": {k: plain_value(v) for k, v in metrics_a.items()},
        "metrics_b": {k: plain_value(v) for k, v in metrics_b.items()},
        # metrics a run could not measure (null with the reason, metrics/measurable.py): never
        # compared as if they were 0
        "not_measured_a": dict(a.metrics.info.get("not_measured") or {}),
        "not_measured_b": dict(b.metrics.info.get("not_measured") or {}),
    }
    if restriction is not None:  # only across golden-set versions: a common comparison is as it was
        info["golden_restriction"] = restriction
    if drift is not None:
        info["judge_drift"] = drift
    corrected = corrected_deltas(a.metrics.info, b.metrics.info, options.alpha)
    if corrected:  # both runs calibrated: judged metrics also through their corrected estimates
        info["corrected"] = corrected
    # judged metrics' margins decided as their gates decide them (corrected rows; none across judges)
    info["margins"] = judged_margins(info["margins"], drift, corrected)
    info.update(systems_info(a.metrics.info, b.metrics.info))
    info["baseline_note"] = with_systems_note(info["baseline_note"], info)
    info["warnings"] = [*warnings, *_warnings(a, b, plan, n_common, verdicts, options, restriction)]
    if drift is not None:
        info["warnings"].append(drift["note"])
    floor = _monte_carlo_floor(per_metric, families, options)
    if floor is not None:
        info["warnings"].append(floor)
    unknown = unknown_system_warning(info, a.run_id, b.run_id)
    if unknown is not None:
        info["warnings"].append(unknown)
    info["judged_coverage"] = {
        "a": judged_coverage(metrics_a, options.min_judged),
        "b": judged_coverage(metrics_b, options.min_judged),
    }
    for side, run in (("a", a), ("b", b)):
        warning = judged_warning(f"run {side} ({run.run_id})", info["judged_coverage"][side])
        if warning is not None:
            info["warnings"].append(warning)
    suspects = suspect_gold(verdicts, b, plan.criterion)
    if judge_suspects is not None and len(suspects):
        suspects, info["suspect_judge"] = judge_suspects(suspects)
        suspects = suspects[list(SUSPECT_COLUMNS)]  # the queue's declared columns (not the item hash)
    info["suspect_gold"] = queue_summary(suspects)
    provisional = None
    if options.provisional_depth:  # unjudged hits labelled by the judge, never into the gold (provisional.py)
        if judge_suspects is None:
            info["warnings"].append(
                "compare.provisional_depth is set but no judge is configured: no provisional labels"
            )
        else:
            ks = b.scores.info.get("k") or b.metrics.info.get("k")
            headline = [
                m
                for m in catalogue.headline_names(ks)
                if getattr(catalogue.measure(m), "family", "") == "retrieval"
            ]
            provisional = provisional_comparison(
                a,
                b,
                options.provisional_depth,
                plan.criterion,
                headline,
                judge_suspects,
                diff if restriction is not None else None,
                relevance_labels,
                options.alpha,
            )
            info["provisional"] = provisional
            if provisional["rests_on_unjudged"]:
                info["warnings"].append(
                    "with the judge's provisional labels on unjudged hits the direction changes for "
                    + ", ".join(provisional["rests_on_unjudged"])
                    + ": those differences rest on hits the golden set never judged"
                )
            if provisional.get("people_disagree"):
                info["warnings"].append(
                    "people's relevance labels contradict the judge's provisional labels for "
                    + ", ".join(provisional["people_disagree"])
                    + ": corrected by them, the difference goes the other way (its interval excludes "
                    "the judge's direction)"
                )
    if repeats_a or repeats_b:
        info.update(repeats_info(repeats_a, repeats_b))
        if plan.rescore_a or plan.rescore_b:
            info["warnings"].append("re-scored runs with repeats are re-scored from their first repeat only")
    return ComparisonArtifact(
        per_metric=per_metric,
        per_query=verdicts,
        markdown=render_markdown(info, per_metric, verdicts, per_slice)
        + corrected_markdown(corrected, options.alpha)
        + provisional_markdown(provisional)
        + suspect_markdown(suspects, b.run_id, info)
        + repeats_markdown(info, per_metric, verdicts),
        info=info,
        per_slice=per_slice,
        suspect_gold=suspects,
    )


def _monte_carlo_floor(per_metric: pd.DataFrame, families: dict, options: CompareSettings) -> str | None:
    """A warning when the Monte Carlo resolution cannot reach the first BH threshold: a
    randomization p is never below 1/(R + 1), so with R too small for the family no graded
    metric could ever be flagged after adjustment — silently."""
    size = families["bh"]["size"]
    floor = 1.0 / (options.resamples + 1)
    if size == 0 or floor <= options.alpha / size:
        return None
    if not (per_metric["test"] == "randomization").fillna(False).any():
        return None  # exact McNemar p-values have no Monte Carlo floor
    needed = int(np.ceil(size / options.alpha))
    return (
        f"{options.resamples:,} resamples give Monte Carlo p-values no smaller than {floor:.2g}, but "
        f"Benjamini–Hochberg over {size} tests needs p ≤ {options.alpha / size:.2g} for its first "
        f"rejection: a graded metric or slice may fail to show significance for lack of resamples "
        f"(set compare.resamples ≥ {needed:,})"
    )


def current_scores(bundle: StoredRun) -> tuple[pd.DataFrame, dict[str, float | None], pd.DataFrame]:
    """A run's (query_scores, metrics, breakdowns) under today's metric definitions.

    A run scored with the current ``scoring_version`` keeps its stored numbers. An older run (its
    precision@k/ndcg@k credited repeated supports and it has no support recall) is re-scored from
    its stored hits under its own stored criterion, so both sides of a comparison mean the same
    thing; matching-free numbers (operational, indexing) stay as stored."""
    if legacy.is_current(bundle.scores.info):
        return bundle.scores.scores, bundle.metrics.metrics, bundle.metrics.breakdowns
    scores, summary = rescore(bundle, bundle.scores.info.get("match") or "auto")
    return scores, {**bundle.metrics.metrics, **summary.metrics}, summary.breakdowns


def _rescored_notes(a: StoredRun, b: StoredRun) -> list[str]:
    """One note per run stored under older metric definitions (re-scored by the comparison)."""
    return [
        f"run {x.run_id!r} was scored under metric definitions version "
        f"{legacy.scoring_version(x.scores.info)} (precision@k and ndcg@k counted a support once per "
        "matching hit; its recall@k was document recall, now doc_recall@k): re-scored from its stored "
        f"hits under its own criterion {x.scores.info.get('match') or 'auto'!r}"
        for x in (a, b)
        if not legacy.is_current(x.scores.info)
    ]


def no_baseline(run_id: str, note: str, metrics: RunMetricsArtifact) -> ComparisonArtifact:
    """The report when there is nothing to compare with: a clear note, not a failure."""
    per_metric = without_tests(metric_table({}, metrics.metrics))
    per_slice = without_slice_tests(slice_deltas(None, None))
    empty = pd.DataFrame(columns=list(FRAME_COLUMNS))
    verdicts = per_query_verdicts(empty, empty)
    info = {
        "run_a": None,
        "run_b": run_id,
        "created_at_b": metrics.info.get("created_at"),
        "baseline_note": note,
        "versions_b": metrics.info.get("versions", {}),
        "system_b": metrics.info.get("system", {}),
        "golden_b": metrics.info.get("golden", {}),
        "chunker_version_match": None,
        "verdict_counts": verdict_counts(verdicts),
        "flip_counts": flip_counts(verdicts),
        "only_in_a": [],
        "only_in_b": [],
        "gold_changed": [],
        "warnings": [],
        "metrics_a": {},
        "metrics_b": {k: plain_value(v) for k, v in metrics.metrics.items()},
        "not_measured_b": dict(metrics.info.get("not_measured") or {}),
    }
    from kebab_eval_pipeline.foundation.markdown_text import md_code, md_text

    markdown = f"# Comparison for run {md_code(run_id)}\n\n{md_text(note)}.\n"
    return ComparisonArtifact(
        per_metric=per_metric,
        per_query=verdicts,
        markdown=markdown,
        info=info,
        per_slice=per_slice,
    )
