"""Semantic duplicate questions through the vectors extra's sentence embeddings (all-MiniLM-L6-v2,
offline). Skipped without the extra, unless KEBAB_EVAL_REQUIRE_VECTORS=1 (then it fails)."""

from __future__ import annotations

import numpy as np
import pytest

from kebab_eval_pipeline.chain.artifacts import GoldenArtifact
from kebab_eval_pipeline.golden.load import load_golden
from kebab_eval_pipeline.golden_health.findings import HealthInputs, golden_health
from kebab_eval_pipeline.golden_health.settings import GoldenHealthSettings
from tests.conftest import vectors_or_skip
from tests.golden_health.health_sets import write_set

SUPPORT = [{"rel_path": "equipment/ph-meters-and-hydrometers.md"}]
QUERIES = [
    {"id": "ph-1", "query": "How do I calibrate a pH meter?", "group": "ph"},
    {"id": "ph-2", "query": "What is the procedure for calibrating a pH meter?"},
    {"id": "ph-3", "query": "How can I calibrate my pH meter correctly?", "group": "ph"},
    {"id": "sd-1", "query": "Why is my sourdough starter not rising?"},
    {"id": "sd-2", "query": "My sourdough starter does not rise, why?"},
    {"id": "sd-3", "query": "What makes a sourdough starter fail to rise?"},
    {"id": "sd-4", "query": "why is my sourdough starter NOT rising"},
    {"id": "ko-1", "query": "배추 절일 때 소금물은 어느 정도 농도로 만들어야 하나요?", "lang": "ko"},
    {"id": "ko-2", "query": "동치미 국물은 소금을 얼마나 넣어야 하나요?", "lang": "ko"},
]


@pytest.fixture(scope="module")
def golden(tmp_path_factory):
    vectors_or_skip()
    path = write_set(tmp_path_factory.mktemp("semantic"), [{**q, "supports": SUPPORT} for q in QUERIES])
    return GoldenArtifact.from_loaded(load_golden([path]))


@pytest.fixture(scope="module")
def encode():
    from kebab_eval_pipeline.reference.vectors import get_embedder

    return get_embedder().encode


def cosine(encode, a: str, b: str) -> float:
    """Each question embedded on its own, the cosine from the raw dot product and norms."""
    x, y = encode([a])[0].astype(np.float64), encode([b])[0].astype(np.float64)
    return float(x @ y / (np.linalg.norm(x) * np.linalg.norm(y)))


def pairs(report, kind: str) -> dict[tuple[str, str], float]:
    frame = report.findings[report.findings["kind"] == kind]
    return {(r.query_id, r.other_query_id): r.score for r in frame.itertuples()}


def test_semantic_duplicates_in_english_outside_intent_groups(golden, encode):
    report = golden_health(
        HealthInputs(golden.queries, golden.supports, encode=encode),
        GoldenHealthSettings(semantic_cosine=0.9),
    )
    text = {q["id"]: q["query"] for q in QUERIES}
    # sd-4 is sd-1 after normalisation: an exact duplicate, not reported again as semantic
    assert pairs(report, "exact_duplicate") == {("sd-1", "sd-4"): 1.0}
    found = pairs(report, "semantic_duplicate")
    # ph-1 ~ ph-3 are one intent group; sd-3 is below 0.9; Korean is not compared (an English model)
    assert set(found) == {("ph-1", "ph-2"), ("ph-2", "ph-3"), ("sd-1", "sd-2"), ("sd-2", "sd-4")}
    for (a, b), score in found.items():
        assert score == pytest.approx(cosine(encode, text[a], text[b]), abs=2e-4)
        assert score >= 0.9
    assert cosine(encode, text["sd-1"], text["sd-3"]) < 0.9
    assert cosine(encode, text["ko-1"], text["ko-2"]) >= 0.9  # what the language filter keeps out
    assert report.summary["semantic_duplicates"] == 4 and report.summary["near_duplicates"] == 5


def test_semantic_languages_opt_in(golden, encode):
    settings = GoldenHealthSettings(semantic_cosine=0.9, semantic_languages=["ko"])
    report = golden_health(HealthInputs(golden.queries, golden.supports, encode=encode), settings)
    assert set(pairs(report, "semantic_duplicate")) == {("ko-1", "ko-2")}
