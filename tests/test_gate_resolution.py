"""Regression gates finer than the golden set resolves: flagged from the baseline's variance, with
the queries (or repeats) they would need — unit values by hand and statsmodels, and the warning,
the gate reason and the strict refusal on real runs."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.power import TTestPower

from kebab_eval_pipeline.gates.resolution import resolution_flags
from kebab_eval_pipeline.gates.settings import RegressionGateSettings


def _baseline(values) -> pd.DataFrame:
    return pd.DataFrame({"query_id": [f"q{i}" for i in range(len(values))], "mrr": values})


def test_a_bound_finer_than_the_set_resolves_is_flagged_with_the_queries_it_needs():
    values = np.tile([1.0, 0.5, 0.0, 1.0], 23)  # 92 queries
    sd = float(np.std(values, ddof=1))
    gates = {"mrr": RegressionGateSettings(max_drop=0.001, non_inferior=0.02)}
    flags = {f.kind: f for f in resolution_flags(gates, _baseline(values), 0.05)}
    power = TTestPower()
    resolvable = power.solve_power(nobs=92, alpha=0.05, power=0.8) * sd
    drop = flags["max_drop"]
    assert drop.n == 92 and drop.resolvable == pytest.approx(resolvable, rel=1e-3)
    assert drop.queries == math.ceil(power.solve_power(effect_size=0.001 / sd, alpha=0.05, power=0.8) - 1e-6)
    assert "gates.regression.mrr.max_drop 0.001 is finer than 92 queries resolve" in drop.text
    assert f"it would need about {drop.queries:,} queries" in drop.text
    # A margin is one-sided: its resolvable change is the two-sided one at 2α.
    margin = flags["non_inferior"]
    assert margin.resolvable == pytest.approx(power.solve_power(nobs=92, alpha=0.1, power=0.8) * sd, rel=1e-3)
    # A bound the set resolves is not flagged.
    assert resolution_flags({"mrr": RegressionGateSettings(max_drop=0.5)}, _baseline(values), 0.05) == []


def test_a_zero_bound_and_a_noisy_repeated_baseline():
    values = np.tile([1.0, 0.0], 30)
    zero = resolution_flags({"mrr": RegressionGateSettings()}, _baseline(values), 0.05)  # max_drop 0
    assert (
        len(zero) == 1
        and zero[0].queries is None
        and "no number of queries resolves a bound of 0" in zero[0].text
    )
    repeats = {"count": 5, "noise_floor": {"mrr": {"std": 0.03, "repeats": 5}}}
    flag = resolution_flags(
        {"mrr": RegressionGateSettings(max_drop=0.01)}, _baseline(values), 0.05, baseline_repeats=repeats
    )[0]
    # Two means of R repeats differ with sd √2·0.03/√R; (z(0.975) + z(0.8))·that ≤ 0.01 ⇒ R ≥ 2·(2.8016·3)².
    assert flag.repeats == math.ceil(2 * (2.801585 * 0.03 / 0.01) ** 2) == 142
    assert "(or 142 repeats of a system this noisy)" in flag.text


def test_nothing_to_estimate_from_is_not_flagged():
    same = _baseline(np.ones(50))
    assert resolution_flags({"mrr": RegressionGateSettings(max_drop=0.001)}, same, 0.05) == []
    assert resolution_flags({"retrieval_ms_p95": RegressionGateSettings(max_drop=1)}, same, 0.05) == []
