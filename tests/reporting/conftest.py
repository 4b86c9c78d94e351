"""One real demo run, computed once: the reporting tests edit copies of its tables."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from kebab_eval_pipeline.chain import pipeline
from kebab_eval_pipeline.chain.artifacts import (
    GoldenArtifact,
    QueryScoresArtifact,
    RetrievalArtifact,
    RunMetricsArtifact,
)
from kebab_eval_pipeline.chain.settings import RunSettings, load_settings

RUN_ID = "demo-1"


@dataclass(frozen=True)
class DemoRun:
    settings: RunSettings
    golden: GoldenArtifact
    retrieval: RetrievalArtifact
    scores: QueryScoresArtifact
    metrics: RunMetricsArtifact


@pytest.fixture(scope="session")
def demo_run() -> DemoRun:
    """The embedded demo (reference system, demo golden set) run in-process, as the assets run it.
    Shared by every test of the session: tests copy its frames before editing them."""
    settings = load_settings(None)
    golden = pipeline.load_golden_artifact(settings)
    retrieval = pipeline.retrieve(settings, golden)
    scores = pipeline.score(settings, golden, retrieval)
    metrics = pipeline.summarize(RUN_ID, settings, golden, retrieval, scores)
    return DemoRun(settings, golden, retrieval, scores, metrics)
