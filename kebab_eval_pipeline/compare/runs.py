"""Compare two stored runs: metric deltas, per-query verdicts, version diff, golden drift.

Used by the ``comparison_report`` asset (run vs its baseline) and by
``kebab-eval compare A B``; both produce the same :class:`ComparisonArtifact`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from kebab_eval_pipeline.artifacts import (
    ComparisonArtifact,
    GoldenArtifact,
    QueryScoresArtifact,
    RetrievalArtifact,
    RunMetricsArtifact,
)
from kebab_eval_pipeline.compare.report import render_markdown
from kebab_eval_pipeline.compare.significance import compare_query_scores
from kebab_eval_pipeline.compare.verdicts import per_query_verdicts, verdict_counts
from kebab_eval_pipeline.errors import InputError, Offender
from kebab_eval_pipeline.matching import match_hits
from kebab_eval_pipeline.storage import ArtifactStore

COMPARE_VERSION = "compare-1"


@dataclass
class RunBundle:
    """Everything stored for one run that a comparison reads."""

    run_id: str
    golden: GoldenArtifact
    retrieval: RetrievalArtifact
    scores: QueryScoresArtifact
    metrics: RunMetricsArtifact


def load_bundle(store: ArtifactStore, run_id: str) -> RunBundle:
    """Read a run's artifacts; InputError names what is missing."""
    parts = {}
    for asset, cls in (
        ("golden_set", GoldenArtifact),
        ("retrieval_results", RetrievalArtifact),
        ("query_scores", QueryScoresArtifact),
        ("run_metrics", RunMetricsArtifact),
    ):
        tables, info = store.read(asset, run_id)
        parts[asset] = cls.from_tables(tables, info)
    return RunBundle(
        run_id, parts["golden_set"], parts["retrieval_results"], parts["query_scores"], parts["run_metrics"]
    )


def choose_baseline(
    store: ArtifactStore, run_id: str, baseline: str, golden_name: str, created_at: str
) -> tuple[str | None, str]:
    """Resolve ``baseline`` (previous | none | <run_id>) to a stored run id, with a note saying why."""
    if baseline == "none":
        return None, "no baseline: comparison disabled by configuration"
    if baseline != "previous":
        if baseline == run_id:
            return None, "no baseline: the configured baseline is this run itself"
        if not store.exists("run_metrics", baseline):
            return None, f"no baseline: configured baseline run {baseline!r} has no stored metrics"
        return baseline, f"baseline {baseline!r} (configured)"
    earlier = [
        m
        for m in store.runs("run_metrics")
        if m["run_id"] != run_id
        and m["info"].get("golden", {}).get("name") == golden_name
        and (m["info"].get("created_at") or "") < created_at
    ]
    if not earlier:
        return None, f"no baseline: no earlier run on golden set {golden_name!r}"
    chosen = earlier[-1]["run_id"]
    return chosen, f"baseline {chosen!r} (the most recent earlier run on golden set {golden_name!r})"


def _first_ranks(hits: pd.DataFrame, supports: pd.DataFrame, criterion: str, cutoff: int) -> pd.Series:
    matched = match_hits(hits, supports, criterion=criterion)
    matched = matched[matched["rank"] <= cutoff]
    return matched.groupby("query_id")["rank"].min()


def _chunker_mode(a: RunBundle, b: RunBundle, strict: bool) -> tuple[str, str | None]:
    """How per-query matching treats chunk ids: (chunker_version_match, re-match criterion or None)."""
    va = a.metrics.info.get("versions", {}).get("chunker_version")
    vb = b.metrics.info.get("versions", {}).get("chunker_version")
    if va == vb:
        return "exact", None
    supports = pd.concat([a.golden.supports, b.golden.supports])
    uses_chunks = supports["chunk_id"].notna()
    if not uses_chunks.any():
        # Gold evidence is paths/headings/lines: each run's own matching never relied on chunk ids.
        return "chunk_independent", None
    if strict:
        raise InputError(
            "chunker versions differ and --strict-chunker-version was given",
            [
                Offender(
                    f"runs {a.run_id} / {b.run_id}",
                    f"chunker_version {va!r} vs {vb!r}: chunk ids are not comparable",
                )
            ],
        )
    chunk_supports = supports[uses_chunks]
    spans_known = (
        chunk_supports["line_start"].notna()
        & chunk_supports["line_end"].notna()
        & (chunk_supports["rel_path"].notna() | chunk_supports["doc_id"].notna())
    )
    return ("fallback_span", "span") if spans_known.all() else ("fallback_doc", "doc")


def _per_query_frame(bundle: RunBundle, criterion: str | None, cutoff: int) -> pd.DataFrame:
    s = bundle.scores.scores
    frame = s[["query_id", "applicable", "answerable"]].copy()
    if criterion is None:
        frame["rank"] = s["first_relevant_rank"].astype("Int64")
    else:
        ranks = _first_ranks(bundle.retrieval.results.hits, bundle.golden.supports, criterion, cutoff)
        frame["rank"] = frame["query_id"].map(ranks).astype("Int64")
    refused = bundle.retrieval.results.outcomes.set_index("query_id")
    answered = refused["answered"].astype(bool)
    frame["refused"] = frame["query_id"].map(refused["refused"].where(answered)).astype("boolean")
    return frame


def _metric_table(a: dict[str, float | None], b: dict[str, float | None]) -> pd.DataFrame:
    names = [n for n in b if n in a] + [n for n in b if n not in a] + [n for n in a if n not in b]
    va = np.array([np.nan if a.get(n) is None else a[n] for n in names], dtype=float)
    vb = np.array([np.nan if b.get(n) is None else b[n] for n in names], dtype=float)
    delta = np.round(vb - va, 4)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(va != 0, np.round((vb - va) / np.abs(va), 4), np.nan)
    return pd.DataFrame({"metric": names, "a": va, "b": vb, "delta": delta, "rel_change": rel}).astype(
        {"metric": "string"}
    )


#: Paired-test columns added to the per-metric table (null where a metric has no per-query test).
PAIRED_COLUMNS: dict[str, str] = {
    "n_paired": "Int64",
    "paired_delta": "float64",
    "p_value": "float64",
    "ci_low": "float64",
    "ci_high": "float64",
    "test": "string",
    "test_note": "string",
}


def with_paired_tests(
    per_metric: pd.DataFrame, scores_a: pd.DataFrame, scores_b: pd.DataFrame, seed: int = 0
) -> pd.DataFrame:
    """``per_metric`` plus ``PAIRED_COLUMNS``: for each metric that is a mean of per-query scores,
    the paired test over the queries both runs scored (see :mod:`.significance`); ``paired_delta``
    is the unrounded mean difference over those queries. Rounded to 4 decimals (p-values to 6)."""
    tests = compare_query_scores(scores_a, scores_b, per_metric["metric"].tolist(), seed=seed)
    tests = tests.set_index("metric")
    out = per_metric.copy()
    source = {
        "n_paired": "n",
        "paired_delta": "delta",
        "p_value": "p_value",
        "ci_low": "ci_low",
        "ci_high": "ci_high",
        "test": "test",
        "test_note": "note",
    }
    for column, dtype in PAIRED_COLUMNS.items():
        values = out["metric"].map(tests[source[column]]) if len(tests) else pd.Series(pd.NA, index=out.index)
        if dtype == "float64":
            values = pd.to_numeric(values, errors="coerce").astype("float64")
            values = values.round(6 if column == "p_value" else 4)
        out[column] = values.astype(dtype)
    return out


def _null(x: float) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else x


def compare_bundles(
    a: RunBundle, b: RunBundle, strict_chunker_version: bool = False, baseline_note: str = ""
) -> ComparisonArtifact:
    """Compare candidate ``b`` against baseline ``a`` (delta = b − a)."""
    mode, criterion = _chunker_mode(a, b, strict_chunker_version)
    cutoff = int(b.scores.info.get("mrr_cutoff", 10))
    verdicts = per_query_verdicts(
        _per_query_frame(a, criterion, cutoff), _per_query_frame(b, criterion, cutoff)
    )
    per_metric = with_paired_tests(
        _metric_table(a.metrics.metrics, b.metrics.metrics), a.scores.scores, b.scores.scores
    )
    counts = verdict_counts(verdicts)
    info = {
        "run_a": a.run_id,
        "run_b": b.run_id,
        "baseline_note": baseline_note or f"baseline {a.run_id!r}",
        "versions_a": a.metrics.info.get("versions", {}),
        "versions_b": b.metrics.info.get("versions", {}),
        "system_a": a.metrics.info.get("system", {}),
        "system_b": b.metrics.info.get("system", {}),
        "golden_a": a.metrics.info.get("golden", {}),
        "golden_b": b.metrics.info.get("golden", {}),
        "chunker_version_match": mode,
        "matching_criterion": criterion or b.scores.info.get("match", "auto"),
        "verdict_counts": counts,
        "only_in_a": verdicts.loc[verdicts["verdict"] == "only_a", "query_id"].tolist(),
        "only_in_b": verdicts.loc[verdicts["verdict"] == "only_b", "query_id"].tolist(),
        "metrics_a": {k: _null(v) for k, v in a.metrics.metrics.items()},
        "metrics_b": {k: _null(v) for k, v in b.metrics.metrics.items()},
    }
    markdown = render_markdown(info, per_metric, verdicts)
    return ComparisonArtifact(per_metric=per_metric, per_query=verdicts, markdown=markdown, info=info)


def no_baseline(run_id: str, note: str, metrics: RunMetricsArtifact) -> ComparisonArtifact:
    """The report when there is nothing to compare with: a clear note, not a failure."""
    per_metric = _metric_table({}, metrics.metrics)
    verdicts = per_query_verdicts(
        pd.DataFrame(columns=["query_id", "applicable", "rank", "answerable", "refused"]),
        pd.DataFrame(columns=["query_id", "applicable", "rank", "answerable", "refused"]),
    )
    info = {
        "run_a": None,
        "run_b": run_id,
        "baseline_note": note,
        "versions_b": metrics.info.get("versions", {}),
        "chunker_version_match": None,
        "verdict_counts": verdict_counts(verdicts),
        "metrics_a": {},
        "metrics_b": {k: _null(v) for k, v in metrics.metrics.items()},
    }
    markdown = f"# Comparison for run `{run_id}`\n\n{note}.\n"
    return ComparisonArtifact(per_metric=per_metric, per_query=verdicts, markdown=markdown, info=info)
