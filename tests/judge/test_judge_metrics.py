"""Judge numbers on hand-made judgement tables: the per-query columns and their agreement with the
rule, the spot-check disagreement, run-level rates, tokens, cost and latency — and the judge
columns flowing through ``aggregate_metrics``/``breakdowns`` of the demo run."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from kebab_eval_pipeline.chain import pipeline
from kebab_eval_pipeline.chain.artifacts import JudgeArtifact
from kebab_eval_pipeline.judge.config import JudgeSettings
from kebab_eval_pipeline.judge.metrics import (
    JUDGE_RUN_METRICS,
    disagreement,
    judge_query_columns,
    judge_run_metrics,
)
from kebab_eval_pipeline.judge.run import JUDGEMENT_COLUMNS, empty_judgements, judge_run
from kebab_eval_pipeline.metrics.aggregate import aggregate_metrics, breakdowns
from tests.judge.scripted import ScriptedJudge, demo_run


def row(query_id: str, criterion: str, role: str, score: float | None, **values) -> dict:
    """One judgement; ``method`` follows the score unless given."""
    method = "json" if score is not None else "unparseable"
    return {
        "query_id": query_id,
        "criterion": criterion,
        "role": role,
        "score": score,
        "method": method,
    } | values


def table(*rows: dict) -> pd.DataFrame:
    """A judgements table of ``rows`` with the stored column types (unset columns null)."""
    blank = {c: None for c in JUDGEMENT_COLUMNS} | {"cached": False}
    frame = pd.DataFrame([blank | r for r in rows], columns=list(JUDGEMENT_COLUMNS))
    return frame.astype({c: t for c, t in JUDGEMENT_COLUMNS.items() if t != "object"})


def test_query_columns_align_with_query_scores_and_agree_with_the_rule() -> None:
    judgements = table(
        row("d", "groundedness", "primary", 0.0),
        row("a", "correctness", "primary", 5.0),
        row("b", "groundedness", "primary", 2.9),
        row("a", "groundedness", "primary", 3.0),
        row("a", "groundedness", "spot_check", 0.0),  # the spot check never reaches query_scores
        row("c", "groundedness", "primary", None),  # unparseable
        row("e", "groundedness", "primary", 4.0),
        row("f", "groundedness", "primary", None, method="error", error="HTTP 500"),
    )
    ids = pd.Series(["a", "b", "c", "d", "e", "f", "g"])
    rule = pd.Series([1.0, 1.0, 1.0, 0.0, None, 1.0, 1.0])  # g: answered, never judged
    columns = judge_query_columns(ids, judgements, rule)
    assert list(columns.columns) == ["judge_groundedness", "judge_correctness", "judge_rule_agreement"]
    nan = math.nan
    np.testing.assert_array_equal(columns["judge_groundedness"], [3.0, 2.9, nan, 0.0, 4.0, nan, nan])
    np.testing.assert_array_equal(columns["judge_correctness"], [5.0, nan, nan, nan, nan, nan, nan])
    # 3 vs 1 agree; 2.9 vs 1 disagree; 0 vs 0 agree (both say ungrounded); nulls stay null
    np.testing.assert_array_equal(columns["judge_rule_agreement"], [1.0, 0.0, nan, 1.0, nan, nan, nan])


def test_disagreement_counts_queries_moved_by_more_than_a_point() -> None:
    judgements = table(
        # q1: moved by exactly 1 → agrees
        row("q1", "groundedness", "primary", 4.0),
        row("q1", "groundedness", "spot_check", 3.0),
        # q2: moved by 1.01 → disagrees
        row("q2", "groundedness", "primary", 4.0),
        row("q2", "groundedness", "spot_check", 2.99),
        # q3: both criteria disagree → one disagreeing query
        row("q3", "groundedness", "primary", 5.0),
        row("q3", "groundedness", "spot_check", 0.0),
        row("q3", "correctness", "primary", 0.0),
        row("q3", "correctness", "spot_check", 5.0),
        # q4: groundedness unscored by the spot check; correctness compared and agrees
        row("q4", "groundedness", "primary", 5.0),
        row("q4", "groundedness", "spot_check", None),
        row("q4", "correctness", "primary", 2.0),
        row("q4", "correctness", "spot_check", 2.5),
        # q5: the spot check failed on both criteria → not compared
        row("q5", "groundedness", "primary", 1.0),
        row("q5", "groundedness", "spot_check", None, method="error", error="timeout"),
        row("q5", "correctness", "primary", 1.0),
        row("q5", "correctness", "spot_check", None),
        # q6: not in the sample
        row("q6", "groundedness", "primary", 0.0),
    )
    assert disagreement(judgements) == (2, 4)  # q2, q3 of q1–q4
    assert disagreement(judgements[judgements["role"] == "primary"]) == (0, 0)
    assert disagreement(empty_judgements()) == (0, 0)


def test_run_metrics_rates_tokens_latency_and_empty_denominators() -> None:
    judgements = table(
        row("a", "groundedness", "primary", 4.0, prompt_tokens=100, completion_tokens=10, latency_ms=10.0),
        row("a", "correctness", "primary", None, prompt_tokens=110, completion_tokens=12, latency_ms=30.0),
        row("b", "groundedness", "primary", None, method="error", error="HTTP 503", latency_ms=1000.0),
        row(
            "b",
            "correctness",
            "primary",
            2.0,
            prompt_tokens=90,
            completion_tokens=8,
            cached=True,
            latency_ms=20.0,
        ),
        # spot-check rows: their failures and unparseable replies are not in the rates
        row("a", "groundedness", "spot_check", None, prompt_tokens=120, completion_tokens=9, latency_ms=40.0),
        row("a", "correctness", "spot_check", None, method="error", error="HTTP 500"),
    )
    metrics, n = judge_run_metrics(judgements, {"model_calls": 4, "cache_hits": 1})
    assert list(metrics) == list(JUDGE_RUN_METRICS)
    assert metrics["judge_unparseable_rate"] == 0.25 and n["judge_unparseable_rate"] == 4
    assert metrics["judge_error_rate"] == 0.25 and n["judge_error_rate"] == 4
    assert metrics["judge_prompt_tokens"] == 420 and metrics["judge_completion_tokens"] == 39
    assert n["judge_prompt_tokens"] == 4
    assert metrics["judge_model_calls"] == 4 and metrics["judge_cache_hits"] == 1
    assert (
        metrics["judge_disagreement_rate"] is None and metrics["judge_spot_check_n"] == 0
    )  # a: only one side
    latencies = [10.0, 30.0, 1000.0, 20.0, 40.0]
    assert metrics["judge_latency_p50_ms"] == round(float(np.percentile(latencies, 50)), 4) == 30.0
    assert metrics["judge_latency_p95_ms"] == round(float(np.percentile(latencies, 95)), 4) == 808.0
    assert n["judge_latency_p95_ms"] == 5
    assert metrics["judge_cost_usd"] is None  # no row has a cost: the price is unknown

    empty, n_empty = judge_run_metrics(empty_judgements(), {})
    assert empty == {
        name: (0 if name in ("judge_spot_check_n", "judge_model_calls", "judge_cache_hits") else None)
        for name in JUDGE_RUN_METRICS
    }
    assert set(n_empty.values()) == {0}


def _judged(settings: JudgeSettings, judge: ScriptedJudge | None = None) -> tuple[pd.DataFrame, dict]:
    _, golden, retrieval = demo_run()
    r = retrieval.results
    judge = judge or ScriptedJudge()
    return judge_run(settings, golden.queries, r.outcomes, r.hits, r.citations, None, lambda _: judge)


def test_cost_is_exact_with_a_price_and_null_when_any_price_is_unknown() -> None:
    priced = {
        "backend": "openai_compatible",
        "model": "scripted-judge",
        "base_url": "http://127.0.0.1:9/v1",  # never called: the scripted judge answers in-process
        "prices": {"scripted-judge": {"input_per_mtok": 2.5, "output_per_mtok": 10.0}},
    }
    judgements, info = _judged(JudgeSettings(**priced))
    metrics, n = judge_run_metrics(judgements, info)
    prompt = int(judgements["prompt_tokens"].sum())
    completion = int(judgements["completion_tokens"].sum())
    assert metrics["judge_prompt_tokens"] == prompt and metrics["judge_completion_tokens"] == completion
    assert metrics["judge_cost_usd"] == pytest.approx((prompt * 2.5 + completion * 10.0) / 1e6, rel=1e-12)
    assert n["judge_cost_usd"] == len(judgements)
    per_row = (judgements["prompt_tokens"] * 2.5 + judgements["completion_tokens"] * 10.0) / 1e6
    np.testing.assert_allclose(judgements["cost_usd"].to_numpy(float), per_row.to_numpy(float), rtol=1e-12)

    unpriced, info = _judged(JudgeSettings(**{**priced, "prices": {}}))
    assert unpriced["cost_usd"].isna().all()
    assert judge_run_metrics(unpriced, info)[0]["judge_cost_usd"] is None
    # the main judge priced, the spot-check model not: the run's cost is unknown, not understated
    mixed, info = _judged(JudgeSettings(**priced, spot_check={"model": "second-judge"}))
    spot = mixed["role"] == "spot_check"
    assert (
        spot.any() and mixed.loc[spot, "cost_usd"].isna().all() and mixed.loc[~spot, "cost_usd"].notna().all()
    )
    assert judge_run_metrics(mixed, info)[0]["judge_cost_usd"] is None
    # the local backend is free: 0 dollars, not unknown
    local, info = _judged(JudgeSettings())
    assert judge_run_metrics(local, info)[0]["judge_cost_usd"] == 0.0


@pytest.fixture(scope="module")
def judged_scores() -> pd.DataFrame:
    """The demo run's query_scores with the scripted judge's columns."""
    settings, golden, retrieval = demo_run()
    judgements, info = _judged(JudgeSettings())
    return pipeline.score(settings, golden, retrieval, JudgeArtifact(judgements, info)).scores


def test_aggregate_and_breakdowns_average_the_judge_columns(judged_scores: pd.DataFrame) -> None:
    qs = judged_scores
    metrics = aggregate_metrics(qs)
    for column, name in (
        ("judge_groundedness", "judge_groundedness"),
        ("judge_correctness", "judge_correctness"),
        ("judge_rule_agreement", "judge_groundedness_rule_agreement"),
    ):
        values = qs[column].dropna()
        assert 0 < len(values) < len(qs)  # refused and unparseable answers have no score
        assert metrics[name] == pytest.approx(values.mean(), abs=5.1e-5)  # rounded to 4 decimals
    table = breakdowns(qs)
    slices = table[(table["dimension"] == "category") & (table["metric"] == "judge_groundedness")]
    assert len(slices) == qs["category"].nunique()
    category = qs.loc[qs["judge_groundedness"].notna(), "category"].value_counts().index[0]
    by_hand = qs.loc[(qs["category"] == category) & qs["judge_groundedness"].notna(), "judge_groundedness"]
    [got] = slices[slices["value"] == category].itertuples(index=False)
    assert got.n == len(by_hand) and got.score == pytest.approx(by_hand.mean(), abs=5.1e-5)

    plain = qs.drop(columns=["judge_groundedness", "judge_correctness", "judge_rule_agreement"])
    assert not any(name.startswith("judge_") for name in aggregate_metrics(plain))
    assert not breakdowns(plain)["metric"].str.startswith("judge_").any()
