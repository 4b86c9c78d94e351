"""Per-query adapters are run in batches of ``BATCH_QUERIES`` (to bound memory at 100k queries):
the tables must be exactly those of one call per run, and progress must count over the whole run."""

from __future__ import annotations

import pandas as pd

from kebab_eval_pipeline.chain import pipeline
from kebab_eval_pipeline.chain.settings import settings_from_dict
from kebab_eval_pipeline.systems import runner
from kebab_eval_pipeline.systems.factory import build_system
from kebab_eval_pipeline.systems.per_query import PerQueryAdapter

TIMINGS = ["retrieval_ms", "answer_ms"]


def test_batched_run_equals_one_call_and_progress_spans_the_run(monkeypatch) -> None:
    settings = settings_from_dict({"answers": True})
    golden = pipeline.load_golden_artifact(settings)
    queries = golden.queries[["query_id", "query"]]
    system = build_system(settings)
    assert isinstance(system, PerQueryAdapter)  # the reference system is batched

    whole = runner.run_golden(system, queries, k=10, answers=True)
    monkeypatch.setattr(runner, "BATCH_QUERIES", 7)
    calls: list[int] = []
    real = system.run_queries

    def counted(requests, **kwargs):
        calls.append(len(requests))
        return real(requests, **kwargs)

    monkeypatch.setattr(system, "run_queries", counted)
    seen: list[tuple[int, int]] = []
    batched = runner.run_golden(
        system, queries, k=10, answers=True, progress=lambda d, t: seen.append((d, t))
    )

    n = len(queries)
    assert n > 20 and calls == [7] * (n // 7) + ([n % 7] if n % 7 else [])
    pd.testing.assert_frame_equal(batched.hits, whole.hits)
    pd.testing.assert_frame_equal(batched.citations, whole.citations)
    pd.testing.assert_frame_equal(
        batched.outcomes.drop(columns=TIMINGS), whole.outcomes.drop(columns=TIMINGS)
    )
    assert batched.outcomes["query_id"].tolist() == queries["query_id"].tolist()
    assert batched.warnings == whole.warnings
    assert {t for _, t in seen} == {n} and seen[-1] == (n, n)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)  # never goes back at a batch boundary
