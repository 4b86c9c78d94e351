"""Rank N stored runs on a few metrics, with every pairwise paired test (``kebab-eval compare A B C …``).

Per metric (a mean of a per-query column, :func:`~kebab_eval_pipeline.metrics.catalogue.metric_column`):

- the queries are those common to all N runs where every run defines the metric ("complete
  rows"), so every mean and every test of the metric is about the same queries; queries missing
  from some run (the golden sets drifted) are counted per run in ``info["dropped"]``;
- each run's mean over them, with a bootstrap percentile CI, and its rank (1 = best; the
  catalogue's direction: a lower error rate ranks higher; ties share the better rank);
- every pair (i < j in the order the runs were given): :func:`~.significance.paired_test` of
  run j − run i on the same per-query columns, exact McNemar for the catalogue's binary metrics,
  the sign-flip randomization test for graded ones, with the comparison's seed and resamples —
  the very test ``kebab-eval compare A B`` runs, so on the same queries its p-value and CI are
  identical;
- the p-values Holm-adjusted over the metric's N(N−1)/2 pairs (one family per metric);
- runs significantly different when the adjusted p < α; the compact letter display
  (:mod:`.letters`: runs sharing a letter are not significantly different) and ranx-style
  "better than" lists (run i lists every run j it is significantly better than).

Runs whose chunkers differ are all matched by one chunk-independent criterion
(:mod:`.common_plan`); runs scored under older metric definitions are re-scored
(:func:`~.runs.current_scores`).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd

from kebab_eval_pipeline.compare.common_plan import CommonPlan, plan_common_matching
from kebab_eval_pipeline.compare.fallback import one_criterion, rescore
from kebab_eval_pipeline.compare.letters import better_than, letters
from kebab_eval_pipeline.compare.multiple_testing import holm
from kebab_eval_pipeline.compare.runs import current_scores
from kebab_eval_pipeline.compare.settings import CompareSettings

# The bootstrap of a paired test's CI, reused for one run's mean (the "differences" are the scores).
from kebab_eval_pipeline.compare.significance import binary_test, bootstrap_ci, paired_test
from kebab_eval_pipeline.foundation.errors import InputError, Offender
from kebab_eval_pipeline.metrics import catalogue, legacy
from kebab_eval_pipeline.metrics.matching_diagnostics import match_line
from kebab_eval_pipeline.store.runs import StoredRun

__all__ = [
    "DEFAULT_ALPHA",
    "DEFAULT_METRICS",
    "PAIR_COLUMNS",
    "RUN_COLUMNS",
    "Ranking",
    "direction_word",
    "metric_name_offenders",
    "rank_runs",
    "rank_scores",
    "resolve_metrics",
]

#: The metrics ranked when none is named (those the runs have; see :func:`resolve_metrics`).
DEFAULT_METRICS: tuple[str, ...] = ("mrr", "ndcg@10", "hit@5")
DEFAULT_ALPHA = 0.05

#: One row per (metric, run), the runs in report order. Floats are NaN where null.
RUN_COLUMNS: dict[str, str] = {
    "metric": "string",
    "run_id": "string",
    "row": "Int64",  # the run's row in the report (1-based): what the superscripts refer to
    "rank": "Int64",  # 1 = best on this metric; ties share the better rank; null without a mean
    "n": "Int64",  # complete rows: queries common to all runs where every run defines the metric
    "mean": "float64",
    "ci_low": "float64",
    "ci_high": "float64",
    "letters": "string",  # the compact letter display, e.g. "ab"
    "better_than": "object",  # run ids this run is significantly better than (report order)
    "better_than_rows": "object",  # their rows: the superscripts
}
#: One row per (metric, pair), pairs (i < j) in the order the runs were given; delta = b − a.
PAIR_COLUMNS: dict[str, str] = {
    "metric": "string",
    "run_a": "string",
    "run_b": "string",
    "n": "Int64",
    "mean_a": "float64",
    "mean_b": "float64",
    "delta": "float64",
    "ci_low": "float64",
    "ci_high": "float64",
    "p_value": "float64",
    "p_adjusted": "float64",  # Holm over the metric's N(N−1)/2 pairs
    "significant": "boolean",  # p_adjusted < alpha
    "better": "string",  # the run significantly better (the metric's direction), else null
    "test": "string",
    "note": "string",
}


@dataclass
class Ranking:
    """N runs ranked: ``per_run`` (:data:`RUN_COLUMNS`), ``pairs`` (:data:`PAIR_COLUMNS`) and
    ``info`` (runs in the given and in report order, metrics, alpha, seed, resamples, the
    queries in common and dropped per run, the matching plan, the test family, warnings).
    ``markdown`` and ``files`` (``ranking.md``/``.html``/``.json``) are set by whoever renders it
    (:mod:`.ranking_report`)."""

    per_run: pd.DataFrame
    pairs: pd.DataFrame
    info: dict[str, Any]
    markdown: str = ""
    files: dict[str, bytes] = field(default_factory=dict)

    def to_tables(self) -> tuple[dict[str, pd.DataFrame], dict[str, Any]]:
        """The tables and info as the run store writes them (list columns as lists)."""
        return {"per_run": self.per_run, "pairs": self.pairs}, {**self.info, "markdown": self.markdown}


def rank_runs(
    runs: Sequence[StoredRun],
    metrics: Sequence[str] | None = None,
    *,
    alpha: float = DEFAULT_ALPHA,
    options: CompareSettings | None = None,
    strict_chunker_version: bool | None = None,
) -> Ranking:
    """Rank ``runs`` (≥ 2, distinct ids) on ``metrics`` (default :data:`DEFAULT_METRICS`, those the
    runs have), tested with ``options``' seed and resamples (default :class:`CompareSettings`).

    Matching: one plan for all runs (:func:`~.common_plan.plan_common_matching`; strictness:
    the argument, else ``options.strict_chunker_version``). Raises :class:`InputError` naming
    every unknown or unrankable metric, and when strictness refuses differing chunkers."""
    options = options or CompareSettings()
    strict = options.strict_chunker_version if strict_chunker_version is None else strict_chunker_version
    ids = [r.run_id for r in runs]
    if len(ids) < 2 or len(set(ids)) != len(ids):
        raise ValueError(f"rank_runs needs two or more distinct runs, got {ids}")
    plan = plan_common_matching(runs, strict)
    scores = {r.run_id: _scores(r, plan) for r in runs}
    ranking = rank_scores(
        scores,
        metrics,
        alpha=alpha,
        seed=options.seed,
        n_resamples=options.resamples,
    )
    info = ranking.info
    info["matching"] = {
        "mode": plan.mode,
        "criterion": plan.criterion,
        "note": plan.note,
        "rescored": list(plan.rescored),
    }
    info["runs_detail"] = {r.run_id: _run_detail(r) for r in runs}
    info["warnings"] = _warnings(runs, plan, info, options) + info["warnings"]
    return ranking


def _scores(run: StoredRun, plan: CommonPlan) -> pd.DataFrame:
    if run.run_id in plan.rescored:
        return rescore(run, plan.criterion)[0]
    return current_scores(run)[0]  # as stored, unless stored under older metric definitions


def _run_detail(run: StoredRun) -> dict[str, Any]:
    info = run.metrics.info
    golden = info.get("golden", {})
    system = info.get("system", {})
    return {
        "created_at": info.get("created_at"),
        "chunker_version": info.get("versions", {}).get("chunker_version"),
        "system": {"kind": system.get("kind"), "mode": system.get("mode")},
        "golden": {
            "name": golden.get("name"),
            "sha256": golden.get("sha256"),
            "queries": golden.get("queries"),
        },
        "match": run.scores.info.get("match"),
        "scoring_version": legacy.scoring_version(run.scores.info),
    }


def _warnings(
    runs: Sequence[StoredRun], plan: CommonPlan, info: Mapping[str, Any], options: CompareSettings
) -> list[str]:
    """What a reader must know before trusting the ranking, most important first."""
    out: list[str] = []
    if info["n_common"] < options.min_queries:
        out.append(
            f"only {info['n_common']} queries common to all runs (< min_queries {options.min_queries}): "
            "differences between these runs are not conclusive"
        )
    if plan.mode != "exact":
        out.append(f"{plan.mode}: {plan.note}")
    hashes = {r.run_id: r.metrics.info.get("golden", {}).get("sha256") for r in runs}
    if len(set(hashes.values())) > 1:
        dropped = ", ".join(f"{run}: {n}" for run, n in info["dropped"].items() if n)
        out.append(
            "golden sets differ ("
            + ", ".join(f"{run}: sha256 {str(h)[:12]}" for run, h in hashes.items())
            + f"): only the {info['n_common']} queries common to all runs are ranked"
            + (f"; queries dropped per run: {dropped}" if dropped else "")
        )
    levels = {r.run_id: int(r.scores.info.get("relevance_level") or 1) for r in runs}
    if len(set(levels.values())) > 1:
        out.append(
            "the runs were scored with different relevance levels ("
            + ", ".join(f"{run}: grade ≥ {level}" for run, level in levels.items())
            + "): their binary retrieval metrics count different supports as relevant"
        )
    matches = {r.run_id: r.scores.info.get("match") for r in runs}
    # One criterion for every query of every run is one criterion, forced or resolved by auto alike.
    alike = {one_criterion(r) for r in runs}
    if plan.mode == "exact" and len(set(matches.values())) > 1 and (len(alike) > 1 or None in alike):
        out.append(
            "the runs were scored with different match criteria ("
            + "; ".join(f"{r.run_id}: {match_line(r.scores.info) or matches[r.run_id]}" for r in runs)
            + ")"
        )
    old = [r.run_id for r in runs if not legacy.is_current(r.scores.info) and r.run_id not in plan.rescored]
    if old:
        out.append(
            "scored under older metric definitions, re-scored from their stored hits under their own "
            "criterion: " + ", ".join(old)
        )
    return out


def resolve_metrics(requested: Sequence[str] | None, scores: Mapping[str, pd.DataFrame]) -> list[str]:
    """The metrics to rank, checked: every requested name (duplicates dropped) must be a known
    metric that is a mean of a per-query column, has a direction (a size or a coverage count is
    neither better nor worse) and is scored by every run. None or empty: :data:`DEFAULT_METRICS`
    that every run scored (for an absent cut-off, the family's smallest one every run has).

    Raises :class:`InputError` listing every offending name (field ``--metric``)."""
    runs = list(scores)
    if not requested:
        picked = _defaults(scores)
        if not picked:
            raise InputError(
                "no default metric to rank: give --metric",
                [Offender("--metric", f"none of {', '.join(DEFAULT_METRICS)} is scored by every run")],
            )
        return picked
    names = list(dict.fromkeys(requested))
    offenders = metric_name_offenders(names)
    named = {name for name in names if metric_name_offenders([name])}  # said once, not twice
    for name in names:
        if name in named:
            continue
        column = catalogue.metric_column(name)
        missing = [run for run in runs if column is not None and column not in scores[run].columns]
        if missing:
            offenders.append(
                Offender(
                    "--metric",
                    f"{name!r} is not scored by run(s) {', '.join(missing)} (no {column!r} column)",
                )
            )
    if offenders:
        raise InputError("metrics that cannot be ranked", offenders)
    return names


def metric_name_offenders(names: Sequence[str]) -> list[Offender]:
    """Every name in ``names`` that cannot be ranked whatever the runs, each with its reason: a
    malformed or unknown name, a metric that is not a mean of per-query scores (a count, a rate of
    hits, a latency percentile: no paired test), or one with no direction (a size, a coverage
    diagnostic: neither higher nor lower is better). Empty when all can be ranked."""
    offenders: list[Offender] = []
    for name in names:
        try:
            catalogue.parse(name)
        except catalogue.MetricNameError as exc:
            offenders.append(Offender("--metric", str(exc)))
            continue
        entry = catalogue.measure(name)
        if entry is None:
            offenders.append(Offender("--metric", f"unknown metric {name!r}"))
        elif catalogue.metric_column(name) is None:
            offenders.append(
                Offender("--metric", f"{name!r} cannot be ranked: {catalogue.untestable_reason(name)}")
            )
        elif entry.direction == "none":
            offenders.append(
                Offender("--metric", f"{name!r} cannot be ranked: neither higher nor lower is better")
            )
    return offenders


def _defaults(scores: Mapping[str, pd.DataFrame]) -> list[str]:
    common = set.intersection(*(set(map(str, s.columns)) for s in scores.values()))
    picked: list[str] = []
    for name in DEFAULT_METRICS:
        want = catalogue.parse(name)
        if catalogue.metric_column(name) in common:
            picked.append(name)
            continue
        # Another cut-off of the family: the smallest every run scored.
        ks = sorted(
            int(c.split("@", 1)[1])
            for c in common
            if want.k is not None and c.startswith(f"{want.stem}@") and c.split("@", 1)[1].isdigit()
        )
        if ks:
            picked.append(catalogue.format_name(want.stem, ks[0]))
    return list(dict.fromkeys(picked))


def rank_scores(
    scores: Mapping[str, pd.DataFrame],
    metrics: Sequence[str] | None = None,
    *,
    alpha: float = DEFAULT_ALPHA,
    seed: int = 0,
    n_resamples: int = 10_000,
    confidence: float = 0.95,
) -> Ranking:
    """The ranking of per-query score tables (run id → ``query_scores`` with unique ``query_id``),
    in the order given: the pure core of :func:`rank_runs` (no matching, no warnings about runs).

    ``alpha`` in (0, 1): adjusted p below it is significant. ``info`` holds ``runs``, ``order``
    (report order: by rank on the first metric that has ranks, ties in the given order),
    ``metrics``, ``alpha``, ``seed``, ``resamples``, ``confidence``, ``n_common`` (queries in
    every run), ``dropped`` (per run, its queries not in every run), ``family`` (the Holm family,
    in words), ``warnings``.
    A metric without complete rows has null means, ranks and tests (said in ``warnings``).
    Raises :class:`InputError` for metrics that cannot be ranked (:func:`resolve_metrics`),
    ValueError for fewer than two runs or alpha outside (0, 1)."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    runs = list(scores)
    if len(runs) < 2:
        raise ValueError("ranking needs two or more runs")
    names = resolve_metrics(metrics, scores)
    ids = {
        run: pd.Index(frame["query_id"].astype(str).to_numpy(dtype=object)) for run, frame in scores.items()
    }
    for run, index in ids.items():
        if index.has_duplicates:
            raise ValueError(f"query_scores of run {run} has duplicate query ids")
    # Python sets: pandas' set operations on Arrow-backed strings are slow at 100k ids.
    common_set = set.intersection(*(set(index) for index in ids.values()))
    common = pd.Index(sorted(common_set), dtype=object)
    positions = {run: ids[run].get_indexer(common) for run in runs}
    n_pairs = len(runs) * (len(runs) - 1) // 2

    run_frames, pair_frames, warnings = [], [], []
    for name in names:
        column = catalogue.metric_column(name)
        matrix = np.column_stack(
            [
                scores[run][column]
                .astype("Float64")
                .to_numpy(dtype=np.float64, na_value=np.nan)[positions[run]]
                for run in runs
            ]
        ).reshape(len(common), len(runs))
        complete = ~np.isnan(matrix).any(axis=1)
        values = matrix[complete]
        if not values.shape[0]:
            warnings.append(f"{name}: no query common to all runs is scored by every run: not ranked")
        per_run, pairs = _rank_metric(name, runs, values, alpha, seed, n_resamples, confidence)
        run_frames.append(per_run)
        pair_frames.append(pairs)
    # Report order: the first ranked metric's ranking (ties and unranked runs in the given order).
    first = next((f for f in run_frames if f["rank"].notna().any()), run_frames[0])
    report_order = list(first.sort_values(["rank", "row"], kind="stable", na_position="last")["run_id"])
    row_of = {run: i + 1 for i, run in enumerate(report_order)}
    per_run = pd.concat(run_frames, ignore_index=True)
    per_run["row"] = per_run["run_id"].map(row_of)
    per_run["better_than"] = per_run["better_than"].map(lambda xs: sorted(xs, key=row_of.get))
    per_run["better_than_rows"] = per_run["better_than"].map(lambda xs: [row_of[x] for x in xs])
    per_run["_order"] = per_run["metric"].map({n: i for i, n in enumerate(names)})
    per_run = per_run.sort_values(["_order", "row"], kind="stable").drop(columns="_order")
    info: dict[str, Any] = {
        "runs": runs,
        "order": report_order,
        "metrics": names,
        "alpha": alpha,
        "seed": seed,
        "resamples": n_resamples,
        "confidence": confidence,
        "n_common": len(common),
        "n_queries": {run: len(ids[run]) for run in runs},
        "dropped": {run: len(ids[run]) - len(common) for run in runs},
        "n_pairs": n_pairs,
        "family": (
            f"Holm over the {n_pairs} pairwise tests of each metric (N(N−1)/2 for N = {len(runs)} runs), "
            "one family per metric"
        ),
        "warnings": warnings,
    }
    return Ranking(
        per_run.reset_index(drop=True).astype(RUN_COLUMNS),
        pd.concat(pair_frames, ignore_index=True).astype(PAIR_COLUMNS),
        info,
    )


def _rank_metric(
    name: str,
    runs: list[str],
    values: np.ndarray,
    alpha: float,
    seed: int,
    n_resamples: int,
    confidence: float,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One metric: each run's mean, CI and rank; every pair's test; letters and "better than".
    ``values``: complete rows × runs."""
    n_rows, n_runs = values.shape
    sign = -1.0 if catalogue.lower_is_better(name) else 1.0
    # Means of sorted values, as paired_test computes its mean_a/mean_b: the same numbers.
    means = (
        np.array([np.sort(values[:, r]).mean() for r in range(n_runs)]) if n_rows else np.full(n_runs, np.nan)
    )
    goodness = sign * means
    ranks = (
        np.array([1 + int((goodness > g).sum()) for g in goodness], dtype=float)
        if n_rows
        else np.full(n_runs, np.nan)
    )
    cis = [_mean_ci(values[:, r], seed, name, runs[r], n_resamples, confidence) for r in range(n_runs)]

    pair_rows = []
    for i, j in combinations(range(n_runs), 2):
        test = paired_test(
            values[:, i],
            values[:, j],
            # as compare A B decides it (a repeated run's fractional means: randomization)
            binary=binary_test(name, values[:, i], values[:, j]),
            seed=seed,
            n_resamples=n_resamples,
            confidence=confidence,
        )
        pair_rows.append(
            {
                "metric": name,
                "run_a": runs[i],
                "run_b": runs[j],
                "n": test.n,
                "mean_a": test.mean_a,
                "mean_b": test.mean_b,
                "delta": test.delta,
                "ci_low": test.ci_low,
                "ci_high": test.ci_high,
                "p_value": test.p_value,
                "test": test.test,
                "note": test.note,
            }
        )
    pairs = pd.DataFrame(
        pair_rows, columns=[c for c in PAIR_COLUMNS if c not in ("p_adjusted", "significant", "better")]
    )
    p = pd.to_numeric(pairs["p_value"], errors="coerce").to_numpy(dtype=float)
    adjusted = holm(p) if len(p) else p
    significant = np.where(np.isnan(adjusted), False, adjusted < alpha)
    delta = pd.to_numeric(pairs["delta"], errors="coerce").to_numpy(dtype=float)
    better = np.select(
        [significant & (sign * delta > 0), significant & (sign * delta < 0)],
        [pairs["run_b"].to_numpy(dtype=object), pairs["run_a"].to_numpy(dtype=object)],
        default=None,
    )
    pairs["p_adjusted"] = adjusted
    pairs["significant"] = pd.array(significant, dtype="boolean")
    pairs["better"] = pd.array(better, dtype="string")
    pairs = pairs[list(PAIR_COLUMNS)]

    sig = np.zeros((n_runs, n_runs), dtype=bool)
    index = np.array(list(combinations(range(n_runs), 2)), dtype=int).reshape(-1, 2)
    sig[index[:, 0], index[:, 1]] = significant
    sig |= sig.T
    order = sorted(range(n_runs), key=lambda r: (math.inf if math.isnan(ranks[r]) else ranks[r], r))
    # Without complete rows nothing was tested: no letters (one shared letter would claim a test).
    display = letters(sig, order) if n_rows else [[] for _ in runs]
    wins = better_than(sig, goodness[:, None] > goodness[None, :])
    per_run = pd.DataFrame(
        {
            "metric": name,
            "run_id": runs,
            "row": np.arange(1, n_runs + 1),
            "rank": ranks,
            "n": n_rows,
            "mean": means,
            "ci_low": [c[0] for c in cis],
            "ci_high": [c[1] for c in cis],
            "letters": ["".join(x) if all(len(s) == 1 for s in x) else ",".join(x) for x in display],
            "better_than": [[runs[j] for j in w] for w in wins],
            "better_than_rows": [[] for _ in runs],
        }
    )
    per_run["rank"] = pd.array(np.where(np.isnan(ranks), None, ranks), dtype="Int64")
    return per_run, pairs


def direction_word(metric: str) -> str:
    """``"lower is better"`` or ``"higher is better"`` (the catalogue's direction of ``metric``)."""
    return "lower is better" if catalogue.lower_is_better(metric) else "higher is better"


def _mean_ci(
    x: np.ndarray, seed: int, metric: str, run: str, n_resamples: int, confidence: float
) -> tuple[float, float]:
    """Bootstrap percentile CI of one run's mean (NaN without values). Its random stream is keyed
    by (seed, metric, run id): a run's interval does not change when other runs or metrics are
    added."""
    if not x.size:
        return math.nan, math.nan
    key = (zlib.crc32(metric.encode("utf-8")), zlib.crc32(run.encode("utf-8")))
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=key))
    return bootstrap_ci(np.sort(x), n_resamples, confidence, rng)
