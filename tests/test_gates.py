import math

from kebab_eval_pipeline.gates import check_name, evaluate_gate, evaluate_regression_gate, known_metric
from kebab_eval_pipeline.settings import GateSettings, RegressionGateSettings


def test_min_gate_pass_and_fail_carry_numbers():
    [ok] = evaluate_gate("mrr", GateSettings(min=0.5), {"mrr": 0.61})
    assert ok.passed and ok.value == 0.61 and ok.threshold == 0.5 and ok.delta == 0.11
    [bad] = evaluate_gate("mrr", GateSettings(min=1.01), {"mrr": 0.61})
    assert not bad.passed and bad.delta == -0.4 and bad.blocking and bad.name == "gate_mrr_min"


def test_min_and_max_give_two_results():
    results = evaluate_gate("hit@5", GateSettings(min=0.2, max=0.9), {"hit@5": 0.95})
    assert [(r.kind, r.passed) for r in results] == [("min", True), ("max", False)]
    assert results[0].name == "gate_hit_at_5_min"


def test_null_metric_fails_unless_skipped():
    [r] = evaluate_gate("chr", GateSettings(min=0.75), {"chr": None})
    assert not r.passed and not r.skipped and "null" in r.reason
    [s] = evaluate_gate("chr", GateSettings(min=0.75, skip_if_null=True), {"chr": float("nan")})
    assert s.passed and s.skipped


def test_regression_gate():
    g = RegressionGateSettings(max_drop=0.02)
    assert evaluate_regression_gate("mrr", g, {"mrr": 0.60}, {"mrr": 0.61}).passed
    r = evaluate_regression_gate("mrr", g, {"mrr": 0.55}, {"mrr": 0.61})
    assert not r.passed and math.isclose(r.delta, -0.06)
    assert evaluate_regression_gate("mrr", g, {"mrr": 0.1}, None).skipped


def test_metric_names():
    assert (
        known_metric("hit@5", [1, 5]) and not known_metric("hit@7", [1, 5]) and not known_metric("mrrr", [5])
    )
    assert check_name("recall_all@10", "max") == "gate_recall_all_at_10_max"
