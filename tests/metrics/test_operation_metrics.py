"""Operational columns and run-level rates/latencies, by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from kebab_eval_pipeline.golden.model import GoldenQuery
from kebab_eval_pipeline.metrics.operations import (
    MISSING_OUTCOME_ERROR,
    OPERATION_COLUMNS,
    align_outcomes,
    grouped_percentiles,
    operation_columns,
    operation_metrics,
)


def _run(tables):
    queries, _ = tables.golden(*[GoldenQuery(id=f"q{i}", query="?") for i in range(1, 5)])
    outcomes = tables.outcomes(
        {
            "query_id": "q1",
            "n_hits": 2,
            "retrieval_ms": 10.0,
            "answer_ms": 100.0,
            "answered": True,
            "answer_text": "ok",
        },
        {"query_id": "q2", "retrieval_ms": 20.0, "error": "TimeoutError: slow", "timed_out": True},
        {"query_id": "q3", "n_hits": 1, "retrieval_ms": 30.0, "answered": True, "answer_text": "  \n"},
        # q4 has no outcome row at all
    )
    hits = tables.concat(
        tables.hits(
            "q1", {"chunk_id": "a", "chunker_version": "v1"}, {"chunk_id": "b", "chunker_version": "v1"}
        ),
        tables.hits("q3", {"chunk_id": "c", "chunker_version": "v2"}),
    )
    return queries, outcomes, hits


def test_operation_columns(tables) -> None:
    queries, outcomes, hits = _run(tables)
    out = operation_columns(queries, outcomes, hits=hits)
    assert {c: str(t) for c, t in out.dtypes.items()} == {"query_id": "string", **OPERATION_COLUMNS}
    assert out["error"].tolist() == [pd.NA, "TimeoutError: slow", pd.NA, MISSING_OUTCOME_ERROR]
    assert out["timed_out"].tolist() == [False, True, False, False]
    assert out["empty_result"].tolist() == [False, True, False, True]
    assert out["empty_response"].tolist()[0] == 0 and out["empty_response"].tolist()[2] == 1
    assert np.isnan(out["empty_response"].to_numpy()[[1, 3]]).all()
    assert out["mixed_version_hits"].tolist() == [0, 0, 1, 0]
    assert out["answer_ms"].tolist()[0] == 100 and np.isnan(out["answer_ms"].to_numpy()[1:]).all()


def test_operation_metrics(tables) -> None:
    queries, outcomes, hits = _run(tables)
    cols = operation_columns(queries, outcomes, hits=hits)
    cols["n_hits"] = [2, 0, 1, 0]
    got = operation_metrics(cols)
    assert got["error_rate"] == 0.5  # q2 and the missing q4, of all 4 queries
    assert got["timeout_rate"] == 0.25
    assert got["empty_result_rate"] == 0.5
    assert got["empty_response_rate"] == 0.5  # q3 of the answered q1, q3
    assert got["mixed_version_rate"] == pytest.approx(1 / 3)  # 1 of 3 hits reports chunker v2
    assert got["retrieval_ms_p50"] == 20.0
    assert got["retrieval_ms_p95"] == pytest.approx(29.0)  # linear: 20 + 0.9 × (30 − 20)
    assert got["retrieval_ms_max"] == 30.0
    assert (got["answer_ms_p50"], got["answer_ms_p95"], got["answer_ms_max"]) == (100.0, 100.0, 100.0)
    assert got["total_suite_ms"] == 160.0


def test_no_latencies_and_no_answers_are_none(tables) -> None:
    queries, _ = tables.golden(GoldenQuery(id="q", query="?"))
    cols = operation_columns(queries, tables.outcomes({"query_id": "q", "n_hits": 1}))
    cols["n_hits"] = 0
    got = operation_metrics(cols)
    assert got["answer_ms_p50"] is None and got["retrieval_ms_max"] is None and got["total_suite_ms"] is None
    assert got["empty_response_rate"] is None and got["mixed_version_rate"] is None
    assert got["error_rate"] == 0.0


def test_grouped_percentiles_match_numpy() -> None:
    rng = np.random.default_rng(7)
    codes = rng.integers(0, 6, 500)
    values = rng.gamma(2.0, 30.0, 500)
    got = grouped_percentiles(codes, values, 7)
    for g in range(6):
        v = values[codes == g]
        assert got["p50"][g] == pytest.approx(np.percentile(v, 50), abs=1e-12)
        assert got["p95"][g] == pytest.approx(np.percentile(v, 95), abs=1e-12)
        assert got["max"][g] == v.max()
    assert np.isnan(got["p50"][6])


def test_duplicate_outcomes_rejected(tables) -> None:
    queries, _ = tables.golden(GoldenQuery(id="q", query="?"))
    with pytest.raises(ValueError, match="duplicate"):
        align_outcomes(queries, tables.outcomes({"query_id": "q"}, {"query_id": "q"}))
