"""``--repeat auto`` on real systems: the flaky command system (``flaky_system.py``, a real subprocess
whose gold hit leaves rank 1 with probability P on every call) stops by target when it is quiet for
its gate and at ``repeat_max`` when it is noisy; the deterministic reference system stops at the
minimum. The recorded standard errors and the stopping decision are re-derived here with numpy from
the stored per-repeat run values (``repeat_metrics``), not from what the rule kept."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from kebab_eval_pipeline.chain import pipeline
from kebab_eval_pipeline.chain.auto_repeat import (
    AUTO_ABSOLUTE_TARGET,
    AUTO_MIN_REPEATS,
    gated_metrics,
    metric_target,
)
from kebab_eval_pipeline.chain.settings import RunSettings, load_settings
from kebab_eval_pipeline.store.runs import RunStore
from tests.conftest import write
from tests.repeats.test_flaky_system import flaky_config
from tests.test_cli import cli, cli_env, no_traceback


def auto_config(tmp_path, p_swap: float, queries: int, max_drop: float, **extra):
    """The flaky system, search only, with a regression gate on hit@1 and ``repeat: auto``."""
    path = flaky_config(tmp_path, p_swap=p_swap, p_answer=0.0, queries=queries)
    doc = yaml.safe_load(path.read_text())
    doc.update(
        {
            "answers": False,
            "repeat": "auto",
            "regression_gates": {"hit@1": {"max_drop": max_drop}},
            "shard_queries": 25,  # an auto run is one shard whatever this says
            **extra,
        }
    )
    path.write_text(yaml.safe_dump(doc))
    return path


def per_repeat_values(store: RunStore, run_id: str, metric: str) -> np.ndarray:
    """``metric``'s stored per-repeat run values, repeat 1 first."""
    table = store.read("query_scores", run_id)[0]["repeat_metrics"]
    rows = table[table["metric"] == metric].sort_values("repeat")
    assert rows["repeat"].tolist() == list(range(1, len(rows) + 1))
    return rows["value"].astype(float).to_numpy()


def se(values: np.ndarray) -> float:
    return float(np.std(values, ddof=1) / np.sqrt(len(values)))


def run_auto(tmp_path, config, run_id: str):
    env = cli_env(tmp_path)
    proc = cli(env, "run", "--run-id", run_id, "--config", str(config))
    no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    store = RunStore(tmp_path / "store")
    return proc, store, store.stored_run(run_id), env


def test_a_quiet_system_stops_once_the_standard_error_reaches_its_target(tmp_path):
    config = auto_config(tmp_path, p_swap=0.1, queries=100, max_drop=0.08)
    proc, store, run, env = run_auto(tmp_path, config, "quiet")
    auto = run.metrics.info["repeats"]["auto"]
    n = run.retrieval.repeat_count
    assert auto["stopped"] == "reached_target" and auto["repeats"] == n
    assert AUTO_MIN_REPEATS <= n <= 10 and auto["max"] == 10 and auto["min"] == 3
    assert run.retrieval.info["repeat_auto"] == auto  # recorded where the repeats were asked
    # every query asked n times, all in one shard (shard_queries: 25 is not followed)
    assert run.retrieval.repeats.outcomes["repeat"].value_counts().to_dict() == dict.fromkeys(
        range(2, n + 1), 100
    )

    values = per_repeat_values(store, "quiet", "hit@1")
    assert len(values) == n
    target = 0.25 * 0.08
    hit1 = auto["metrics"]["hit@1"]
    assert hit1["target"] == pytest.approx(target) and hit1["basis"] == "0.25 × max_drop 0.08"
    assert hit1["se"] == pytest.approx(se(values), abs=1e-6) and hit1["met"] is True
    assert se(values) <= target
    # ... and not before: each earlier count from the minimum on was still above target.
    for m in range(AUTO_MIN_REPEATS, n):
        assert se(values[:m]) > target, m
    # the system flipped (P = 0.1 over 100 queries): the stop was the target, not determinism
    assert run.metrics.info["repeats"]["deterministic"] is False
    # the noise floor's se of the headline is the same number
    assert run.metrics.info["repeats"]["noise_floor"]["hit@1"]["se"] == pytest.approx(se(values), abs=0.5e-4)

    assert f"repeat auto: stopped after {n} repeats (min 3, max 10), reached target" in proc.stdout
    assert f"hit@1 se {hit1['se']:.4f} ≤ {target:.4f}" in proc.stdout
    report = (tmp_path / "store" / "reports" / "quiet" / "run.md").read_text()
    assert f"Repeat auto: stopped after {n} repeats (min 3, max 10): reached target" in report
    assert f"| hit@1 | {hit1['se']:.4f} | 0.0200 | 0\\.25 × max_drop 0.08 | yes |" in report
    exported = cli(env, "export", "quiet", "--format", "json", "--config", str(config))
    assert exported.returncode == 0, exported.stderr
    assert json.loads(exported.stdout)["repeats"]["auto"] == auto


def test_a_noisy_system_stops_at_repeat_max_above_target(tmp_path):
    # hit@1 of P = 0.5 over 400 queries moves by about 0.025 a run; a gate allowing a 0.002 drop
    # asks for a standard error of 0.0005, which runs that differ at all (by a step of 0.0025)
    # never reach: only three equal runs would, about once in 1,100 (sum of Bin(400, 0.5)³).
    config = auto_config(tmp_path, p_swap=0.5, queries=400, max_drop=0.002, repeat_max=4)
    proc, store, run, _ = run_auto(tmp_path, config, "noisy")
    auto = run.metrics.info["repeats"]["auto"]
    values = per_repeat_values(store, "noisy", "hit@1")
    # on a failure, the evidence: the per-repeat values (stored, and recounted from the stored hits)
    evidence = (auto, values.tolist(), gold_at_1_per_repeat(run))
    assert auto["stopped"] == "hit_max" and auto["repeats"] == run.retrieval.repeat_count == 4, evidence
    target = 0.25 * 0.002
    hit1 = auto["metrics"]["hit@1"]
    assert hit1["target"] == pytest.approx(target) and hit1["met"] is False
    assert hit1["se"] == pytest.approx(se(values), abs=1e-6)
    for m in range(AUTO_MIN_REPEATS, 5):
        assert se(values[:m]) > target, m
    assert "repeat auto: stopped after 4 repeats (min 3, max 4), hit repeat_max" in proc.stdout
    assert f"hit@1 se {hit1['se']:.4f} > {target:.4f}" in proc.stdout


def gold_at_1_per_repeat(run) -> list[float]:
    """Per repeat, the share of queries whose gold hit is at rank 1, from the stored hits."""
    repeats = run.retrieval.repeats
    hits = [run.retrieval.results.hits] + [repeats.hits_of(r) for r in range(2, repeats.count + 1)]
    return [
        float(((h["rank"] == 1) & (h["chunk_id"] == h["query_id"] + "-gold")).sum() / h["query_id"].nunique())
        for h in hits
    ]


def test_a_deterministic_system_stops_at_the_minimum(tmp_path):
    env = cli_env(tmp_path)
    config = write(tmp_path / "run.yaml", f"storage: {tmp_path / 'store'}\nbaseline: none\n")
    proc = cli(env, "run", "--run-id", "steady", "--config", str(config), "--repeat", "auto")
    no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    run = RunStore(tmp_path / "store").stored_run("steady")
    repeats = run.metrics.info["repeats"]
    assert run.retrieval.repeat_count == AUTO_MIN_REPEATS == repeats["count"]
    assert repeats["auto"]["stopped"] == "deterministic" and repeats["deterministic"] is True
    # the default answer gates are the watched metrics; none moved
    assert set(repeats["auto"]["metrics"]) == {
        "answer_precision",
        "chr",
        "under_refusal_rate",
        "over_refusal_rate",
    }
    assert all(m["se"] == 0.0 for m in repeats["auto"]["metrics"].values())
    assert "stopped after 3 repeats (min 3, max 10), deterministic" in proc.stdout


def test_targets_come_from_the_gates_margins():
    settings = RunSettings.model_validate(
        {
            "repeat": "auto",
            "repeat_target": 0.5,
            "gates": {"mrr": {"min": 0.5}, "hit@5[lang=ko]": {"min": 0.5}, "retrieval_ms_p95": {"max": 900}},
            "regression_gates": {
                "hit@1": {"max_drop": 0.04, "non_inferior": 0.02},
                "ndcg@10": {"equivalent": 0.06},
                "recall@5": {"max_p": 0.05},
                "answer_ms_p50": {"max_drop": 100},
                "mrr[lang=ko]": {"max_drop": 0.2},  # a slice: neither watched nor lending its margin
            },
            "default_gates": False,
        }
    )
    # headline metrics only (a slice is not watched), regression gates first
    assert gated_metrics(settings, {}) == [
        "hit@1",
        "ndcg@10",
        "recall@5",
        "answer_ms_p50",
        "mrr",
        "retrieval_ms_p95",
    ]
    assert metric_target(settings, "hit@1") == (0.5 * 0.02, "0.5 × non_inferior 0.02")  # the smallest
    assert metric_target(settings, "ndcg@10") == (0.5 * 0.06, "0.5 × equivalent 0.06")
    assert metric_target(settings, "recall@5") == (AUTO_ABSOLUTE_TARGET, "absolute")  # max_p: no margin
    assert metric_target(settings, "mrr") == (AUTO_ABSOLUTE_TARGET, "absolute")
    assert metric_target(settings, "answer_ms_p50") == (50.0, "0.5 × max_drop 100")
    assert metric_target(settings, "retrieval_ms_p95") is None  # in ms, without a margin
    # an auto run's retrieval is one shard
    golden = pipeline.load_golden_artifact(settings)
    assert len(pipeline.plan_retrieval(settings.model_copy(update={"shard_queries": 10}), golden)) == 1


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        ({"repeat": "often"}, "'often' is not a number of repeats: give an integer from 1 to 100, or auto"),
        ({"repeat": "auto", "repeat_max": 2}, "repeat_max"),
        ({"repeat": "auto", "repeat_target": 0}, "repeat_target"),
    ],
)
def test_bad_auto_settings_are_refused(tmp_path, doc, expected):
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(Exception, match=expected):
        load_settings(path)
