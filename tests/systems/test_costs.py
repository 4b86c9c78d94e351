"""What the system under test spent: token counts read from its answers (the shapes real APIs use),
priced with ``system_costs:``, summed per run, and shown beside the judge's spend."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from kebab_eval_pipeline.chain.settings import load_settings
from kebab_eval_pipeline.foundation.config_model import Price
from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.golden.columns import typed_frame
from kebab_eval_pipeline.reporting.spend import spend_line, usd
from kebab_eval_pipeline.systems.base import OUTCOME_COLUMNS
from kebab_eval_pipeline.systems.costs import SystemCostSettings, price_outcomes
from kebab_eval_pipeline.systems.wire import ResponseMap, parse_answer
from tests.conftest import echo_golden, write
from tests.test_cli import cli, cli_env, no_traceback

# ---------------------------------------------------------------------------------------------
# Reading token counts and costs from a response


def test_openai_style_usage_beside_the_answer():
    """A chat-completions-like body: the answer object, and ``usage`` / ``model`` at the top level."""
    body = {
        "model": "gpt-4o-mini-2024-07-18",
        "answer": {"text": "Fermentation stops at 30 °C.", "citations": ["c1"]},
        "usage": {"prompt_tokens": 812, "completion_tokens": 45, "total_tokens": 857},
    }
    answer = parse_answer(body)
    assert (answer.model, answer.prompt_tokens, answer.completion_tokens) == (
        "gpt-4o-mini-2024-07-18",
        812,
        45,
    )
    assert answer.cost_usd is None


def test_anthropic_style_usage_and_a_reported_cost():
    answer = parse_answer(
        {"text": "x", "usage": {"input_tokens": 1200, "output_tokens": 80, "cost": 0.0042}, "model": "m"}
    )
    assert (answer.prompt_tokens, answer.completion_tokens, answer.cost_usd) == (1200, 80, 0.0042)


def test_mapped_usage_fields_win_over_the_defaults():
    mapping = ResponseMap(
        answer_fields={
            "text": "reply",
            "prompt_tokens": "meta.tokens.in",
            "completion_tokens": "meta.tokens.out",
            "cost_usd": "meta.billing.usd",
        }
    )
    raw = {"reply": "y", "meta": {"tokens": {"in": 10, "out": 3}, "billing": {"usd": 0.5}}, "usage": {}}
    answer = parse_answer(raw, mapping)
    assert (answer.prompt_tokens, answer.completion_tokens, answer.cost_usd) == (10, 3, 0.5)


@pytest.mark.parametrize("cost", [-0.01, "free"])
def test_an_impossible_cost_is_a_bad_response_naming_the_field(cost):
    from kebab_eval_pipeline.systems.outcome import QueryFailure

    with pytest.raises(QueryFailure) as failure:
        parse_answer({"text": "x", "cost_usd": cost})
    assert failure.value.error_class == "bad_response"
    assert "cost_usd" in failure.value.message


# ---------------------------------------------------------------------------------------------
# Pricing


def _outcomes(rows: list[dict]) -> pd.DataFrame:
    base = {"n_hits": 0, "timed_out": False, "answered": True}
    return typed_frame([{**base, **r} for r in rows], OUTCOME_COLUMNS)


def test_price_outcomes_prices_each_row_by_its_model_or_the_default():
    costs = SystemCostSettings(
        model="small",
        prices={
            "small": Price(input_per_mtok=0.15, output_per_mtok=0.60),
            "big": Price(input_per_mtok=2.5, output_per_mtok=10.0),
        },
    )
    outcomes = _outcomes(
        [
            {"query_id": "a", "model": "big", "prompt_tokens": 1000, "completion_tokens": 100},
            {"query_id": "b", "model": None, "prompt_tokens": 2000, "completion_tokens": 500},  # default
            {"query_id": "c", "model": "other", "prompt_tokens": 10, "completion_tokens": 1},  # no price
            {"query_id": "d", "model": "big", "prompt_tokens": 10, "completion_tokens": 1, "cost_usd": 0.25},
            {"query_id": "e", "model": "big", "prompt_tokens": None, "completion_tokens": 7},  # half counted
        ]
    )
    priced = price_outcomes(outcomes, costs)["cost_usd"].to_numpy()
    # by hand: (1000 × 2.5 + 100 × 10) / 1e6; (2000 × 0.15 + 500 × 0.6) / 1e6; reported 0.25 kept
    assert priced[0] == pytest.approx(0.0035, abs=1e-15)
    assert priced[1] == pytest.approx(0.0006, abs=1e-15)
    assert math.isnan(priced[2]) and math.isnan(priced[4])
    assert priced[3] == 0.25
    assert math.isnan(outcomes["cost_usd"].to_numpy()[0])  # the input frame is not changed
    assert price_outcomes(outcomes, None) is outcomes


def test_usd_and_spend_line_put_the_system_beside_the_judge():
    metrics = {
        "system_prompt_tokens": 12345.0,
        "system_completion_tokens": 678.0,
        "system_cost_usd": 0.0012345,
        "judge_prompt_tokens": 900,
        "judge_completion_tokens": 30,
        "judge_cost_usd": None,
    }
    denominators = {"system_prompt_tokens": 3, "system_cost_usd": 3, "judge_prompt_tokens": 6}
    assert spend_line(metrics, denominators) == (
        "spend: system under test $0.001234 (12,345 prompt + 678 completion tokens, 3 answers) · "
        "judge unknown (900 prompt + 30 completion tokens, 6 judgements; "
        "no price for some model (see system_costs / judge.prices))"
    )
    assert spend_line({"mrr": 0.5}, {}) is None
    assert (usd(12.5), usd(0.0), usd(float("nan"))) == ("$12.50", "$0.000000", "unknown")


def test_system_costs_block_is_strict(tmp_path):
    config = write(
        tmp_path / "eval.yaml", "system_costs:\n  prices:\n    m: {input_per_mtok: -1, per_call: 2}\n"
    )
    with pytest.raises(InputError) as info:
        load_settings(config)
    fields = sorted(o.field for o in info.value.offenders)
    assert fields == ["system_costs.prices.m.input_per_mtok", "system_costs.prices.m.per_call"]


# ---------------------------------------------------------------------------------------------
# A whole run: a replayed trace whose answers report tokens, priced, summed, reported, exported

QUERIES = [f"q{i}" for i in range(1, 6)]
USAGE = {  # query → (model, prompt tokens, completion tokens, reported cost)
    "q1": ("gpt-small", 1000, 200, None),
    "q2": ("gpt-small", 3000, 100, None),
    "q3": (None, 500, 50, None),  # no model named: system_costs.model prices it
    "q4": ("gpt-big", 2000, 400, None),
    "q5": ("gpt-small", 100, 10, 0.5),  # the system's own bill wins
}
PRICES = {"gpt-small": (0.15, 0.60), "gpt-big": (2.50, 10.00)}


def _trace(path, usage=USAGE):
    lines = []
    for q in QUERIES:
        model, prompt, completion, cost = usage[q]
        answer = {"text": f"answer to {q}", "citations": [f"{q}-c1"], "model": model}
        answer["usage"] = {"prompt_tokens": prompt, "completion_tokens": completion}
        if cost is not None:
            answer["cost_usd"] = cost
        lines.append(
            json.dumps({"query_id": q, "hits": [{"chunk_id": f"{q}-c1", "rank": 1}], "answer": answer})
        )
    return write(path, "\n".join(lines) + "\n")


def _config(tmp_path, trace, prices=PRICES):
    table = "\n".join(
        f"    {m}: {{input_per_mtok: {i}, output_per_mtok: {o}}}" for m, (i, o) in prices.items()
    )
    return write(
        tmp_path / "eval.yaml",
        f"golden: {echo_golden(tmp_path / 'golden.yaml', 'spend', QUERIES)}\n"
        f"system: {{kind: replay, path: {trace}}}\n"
        f"system_costs:\n  model: gpt-small\n  prices:\n{table}\n",
    )


def _expected_cost() -> float:
    total = 0.0
    for model, prompt, completion, cost in USAGE.values():
        if cost is not None:
            total += cost
            continue
        rate_in, rate_out = PRICES[model or "gpt-small"]
        total += (prompt * rate_in + completion * rate_out) / 1e6
    return total


def test_a_run_sums_and_prices_the_systems_tokens(tmp_path):
    env = cli_env(tmp_path)
    config = _config(tmp_path, _trace(tmp_path / "trace.jsonl"))
    done = cli({**env, "COLUMNS": "300"}, "run", "--config", str(config), "--run-id", "spend-1")
    assert done.returncode == 0, done.stderr
    no_traceback(done)
    expected = _expected_cost()
    # by hand: 0.00027 + 0.00051 + 0.000105 + 0.009 + 0.5
    assert expected == pytest.approx(0.509885, abs=1e-12)
    assert (
        "spend: system under test $0.509885 (6,600 prompt + 760 completion tokens, 5 answers)" in done.stdout
    )

    exported = json.loads(cli(env, "export", "spend-1").stdout)
    metrics = exported["metrics"]
    assert metrics["system_prompt_tokens"] == 6600
    assert metrics["system_completion_tokens"] == 760
    assert metrics["system_cost_usd"] == pytest.approx(expected, abs=1e-12)  # exact, not rounded to 4 places
    per_query = {q["query_id"]: q for q in exported["per_query"]}
    assert per_query["q4"]["answer"]["cost_usd"] == pytest.approx(0.009, abs=1e-15)
    assert per_query["q5"]["answer"]["cost_usd"] == 0.5
    assert per_query["q1"]["scores"]["system_cost_usd"] == pytest.approx(0.00027, abs=1e-15)

    run_md = next(
        line.split("report: ", 1)[1] for line in done.stdout.splitlines() if line.startswith("report:")
    )
    text = Path(run_md).read_text(encoding="utf-8")
    assert "## Spend" in text and "- system under test $0.509885" in text
    assert "| system_cost_usd | $0.509885 |" in text


def test_a_model_without_a_price_makes_the_run_cost_unknown_not_smaller(tmp_path):
    env = cli_env(tmp_path)
    config = _config(tmp_path, _trace(tmp_path / "trace.jsonl"), prices={"gpt-small": (0.15, 0.60)})
    done = cli({**env, "COLUMNS": "300"}, "run", "--config", str(config), "--run-id", "spend-2")
    assert done.returncode == 0, done.stderr
    assert "spend: system under test unknown (6,600 prompt + 760 completion tokens" in done.stdout
    assert "no price for some model" in done.stdout
    exported = json.loads(cli(env, "export", "spend-2").stdout)
    assert exported["metrics"]["system_cost_usd"] is None
    assert exported["metrics"]["system_prompt_tokens"] == 6600
    scores = {q["query_id"]: q["scores"]["system_cost_usd"] for q in exported["per_query"]}
    assert scores["q4"] is None and scores["q1"] == pytest.approx(0.00027, abs=1e-15)


def test_operation_metrics_sum_only_what_was_reported():
    from kebab_eval_pipeline.metrics.operations import operation_metrics

    nan = np.nan
    scores = pd.DataFrame(
        {
            "system_prompt_tokens": [10.0, nan, 30.0],
            "system_completion_tokens": [1.0, nan, 3.0],
            "system_cost_usd": [0.001, nan, 0.003],
        }
    )
    metrics = operation_metrics(scores)
    assert metrics["system_prompt_tokens"] == 40.0
    assert metrics["system_cost_usd"] == pytest.approx(0.004, abs=1e-15)
    nothing = operation_metrics(scores.iloc[[1]])
    assert nothing["system_prompt_tokens"] is None and nothing["system_cost_usd"] is None
