"""One whole evaluation run as plain function calls, stored as the chain stores it.

What the chain's assets do step by step (golden set → retrieval → judge → scores → metrics →
comparison), in this process and without Dagster's partitions: for a caller that evaluates inside
another step — the asset check a team attaches to its own asset
(:func:`kebab_eval_pipeline.orchestration.team_check.evaluation_check`). Every artifact is written to
the run store under ``run_id``, so the run is listed, compared and bisected like any other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kebab_eval_pipeline import pipeline
from kebab_eval_pipeline.artifacts import (
    ComparisonArtifact,
    GoldenArtifact,
    JudgeArtifact,
    QueryScoresArtifact,
    RetrievalArtifact,
    RunMetricsArtifact,
)
from kebab_eval_pipeline.run_roles import RunRole
from kebab_eval_pipeline.settings import RunSettings
from kebab_eval_pipeline.store.runs import RunStore


@dataclass(frozen=True)
class Evaluation:
    """A stored run's artifacts, and the gates its metrics and comparison evaluated."""

    run_id: str
    golden: GoldenArtifact
    retrieval: RetrievalArtifact
    judged: JudgeArtifact
    scores: QueryScoresArtifact
    metrics: RunMetricsArtifact
    comparison: ComparisonArtifact

    @property
    def gates(self) -> list[dict[str, Any]]:
        """Every gate result: the absolute gates (run_metrics), then the regression and verdict
        gates (comparison_report; none without a baseline)."""
        return [*(self.metrics.info.get("gates") or []), *(self.comparison.info.get("gates") or [])]

    @property
    def system_health(self) -> dict[str, Any] | None:
        return self.metrics.info.get("system_health")


def _write(store: RunStore, asset: str, run_id: str, artifact, dagster_run_id: str | None) -> None:
    store.write_artifact(asset, run_id, artifact, dagster_run_id)


def evaluate(
    settings: RunSettings,
    run_id: str,
    store: RunStore,
    dagster_run_id: str | None = None,
    role: RunRole | None = None,
) -> Evaluation:
    """Evaluate ``settings``' golden set against its system under test as run ``run_id``, writing
    each artifact to ``store`` as soon as it is made (the comparison reads this run's metrics back,
    as the chain's last asset does); ``role`` is what the run records it is (None:
    :func:`pipeline.run_role` without tags). Raises InputError for bad input (golden set, config, a
    stale golden set refused); a failing system under test is rows with errors, as always."""
    pipeline.check_run_inputs(settings)
    golden = pipeline.load_golden_artifact(settings)
    _write(store, "golden_set", run_id, golden, dagster_run_id)
    retrieval = pipeline.retrieve(settings, golden)
    _write(store, "retrieval_results", run_id, retrieval, dagster_run_id)
    judged = pipeline.judge(settings, golden, retrieval, store)
    _write(store, "judge", run_id, judged, dagster_run_id)
    scores = pipeline.score(settings, golden, retrieval, judged)
    _write(store, "query_scores", run_id, scores, dagster_run_id)
    metrics = pipeline.summarize(run_id, settings, golden, retrieval, scores, judged, role=role)
    _write(store, "run_metrics", run_id, metrics, dagster_run_id)
    comparison = pipeline.compare(run_id, settings, store, metrics)
    _write(store, "comparison_report", run_id, comparison, dagster_run_id)
    return Evaluation(run_id, golden, retrieval, judged, scores, metrics, comparison)
