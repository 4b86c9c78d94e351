"""Indexing coverage as run metrics (SPEC §6): from the reference chunker or a system's own report."""

from __future__ import annotations

import pytest

from kebab_eval_pipeline.chain import pipeline
from kebab_eval_pipeline.chain.settings import settings_from_dict
from kebab_eval_pipeline.contract import SystemInfo
from kebab_eval_pipeline.metrics.aggregate import metric_names
from kebab_eval_pipeline.metrics.indexing import INDEX_METRICS, indexing_metrics
from kebab_eval_pipeline.systems.versions import apply_version_report


def test_indexing_metrics_from_a_report() -> None:
    report = {"docs_processed": 40, "docs_with_zero_chunks": 2, "chunks": 300, "tokens_p95": 410.5}
    got = indexing_metrics(report)
    assert got["index_docs"] == 40.0
    assert got["index_zero_chunk_docs"] == 2.0
    assert got["index_zero_chunk_rate"] == 0.05  # 2 / 40
    assert got["index_chunks"] == 300.0
    assert got["index_tokens_p95"] == 410.5
    assert got["index_tokens_min"] is None  # not reported: null, never 0
    assert list(got) == list(INDEX_METRICS)


@pytest.mark.parametrize("report", [None, {}, {"docs_processed": 0, "docs_with_zero_chunks": 0}])
def test_no_report_or_no_documents_gives_null(report) -> None:
    got = indexing_metrics(report)
    assert got["index_zero_chunk_rate"] is None
    if not report:
        assert set(got.values()) == {None}


def test_a_version_report_may_carry_coverage() -> None:
    info = SystemInfo(kind="http")
    reported = apply_version_report(
        info,
        {
            "index_version": "i7",
            "coverage": {"chunks": 12, "docs_processed": 3, "bogus": 1, "tokens_max": "x"},
        },
    )
    assert reported.index_version == "i7"
    assert reported.coverage == {"chunks": 12.0, "docs_processed": 3.0}  # unknown/non-numeric dropped
    assert apply_version_report(info, {"coverage": {"bogus": 1}}).coverage is None


def test_index_metrics_are_gateable_names() -> None:
    assert set(INDEX_METRICS) <= set(metric_names([1, 5]))


def test_the_demo_run_reports_the_reference_chunker_coverage() -> None:
    settings = settings_from_dict({"baseline": "none"})
    golden = pipeline.load_golden_artifact(settings)
    retrieval = pipeline.retrieve(settings, golden)
    scores = pipeline.score(settings, golden, retrieval)
    metrics = pipeline.summarize("demo", settings, golden, retrieval, scores).metrics
    coverage = retrieval.results.system.coverage
    assert coverage is not None
    # The demo corpus: every document yields chunks; the numbers are the index manifest's.
    assert metrics["index_docs"] == coverage["docs_processed"] > 40
    assert metrics["index_zero_chunk_docs"] == 0.0
    assert metrics["index_zero_chunk_rate"] == 0.0
    assert (
        metrics["index_chunks"] == coverage["chunks"] == float(retrieval.results.system.details["n_chunks"])
    )
    assert 0 < metrics["index_tokens_min"] <= metrics["index_tokens_mean"] <= metrics["index_tokens_max"]
