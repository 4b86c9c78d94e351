"""Regression gates finer than the golden set resolves: flagged from the baseline's variance, with
the queries (or repeats) they would need — unit values by hand and statsmodels, and the warning,
the gate reason and the strict refusal on real runs."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.power import TTestPower

from kebab_eval_pipeline.gates.resolution import (
    BASELINE,
    PAIRED,
    STORED_PAIRED,
    resolution_flags,
    variance_estimates,
)
from kebab_eval_pipeline.gates.settings import RegressionGateSettings


def _baseline(values) -> pd.DataFrame:
    return pd.DataFrame({"query_id": [f"q{i}" for i in range(len(values))], "mrr": values})


def _flags(gates, values, alpha=0.05, **kw):
    return resolution_flags(gates, variance_estimates(list(gates), _baseline(values)), alpha, **kw)


def test_the_estimate_is_paired_where_it_can_be():
    a = _baseline(np.tile([1.0, 0.5, 0.0, 1.0], 10))
    b = a.assign(mrr=np.where(np.arange(40) % 8 == 0, 0.0, a["mrr"]))
    d = (b["mrr"] - a["mrr"]).to_numpy()
    assert variance_estimates(["mrr"], a, b)["mrr"] == (pytest.approx(float(np.std(d, ddof=1))), 40, PAIRED)
    stored = pd.DataFrame({"metric": ["mrr"], "paired_se": [0.01], "n_paired": [40]})
    assert variance_estimates(["mrr"], a, stored_per_metric=stored)["mrr"] == (
        pytest.approx(0.01 * math.sqrt(40)),
        40,
        STORED_PAIRED,
    )
    sd = float(np.std(a["mrr"], ddof=1))
    assert variance_estimates(["mrr"], a)["mrr"] == (pytest.approx(sd), 40, BASELINE)


def test_a_bound_finer_than_the_set_resolves_is_flagged_with_the_queries_it_needs():
    values = np.tile([1.0, 0.5, 0.0, 1.0], 23)  # 92 queries
    sd = float(np.std(values, ddof=1))
    gates = {"mrr": RegressionGateSettings(max_drop=0.001, non_inferior=0.02)}
    flags = {f.kind: f for f in _flags(gates, values)}
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
    assert _flags({"mrr": RegressionGateSettings(max_drop=0.5)}, values) == []


def test_a_zero_bound_and_a_noisy_repeated_baseline():
    values = np.tile([1.0, 0.0], 30)
    zero = _flags({"mrr": RegressionGateSettings()}, values)  # max_drop 0
    assert (
        len(zero) == 1
        and zero[0].queries is None
        and "no number of queries resolves a bound of 0" in zero[0].text
    )
    repeats = {"count": 5, "noise_floor": {"mrr": {"std": 0.03, "repeats": 5}}}
    flag = _flags({"mrr": RegressionGateSettings(max_drop=0.01)}, values, baseline_repeats=repeats)[0]
    # Two means of R repeats differ with sd √2·0.03/√R; (z(0.975) + z(0.8))·that ≤ 0.01 ⇒ R ≥ 2·(2.8016·3)².
    assert flag.repeats == math.ceil(2 * (2.801585 * 0.03 / 0.01) ** 2) == 142
    assert "(or 142 repeats of a system this noisy)" in flag.text


def test_nothing_to_estimate_from_is_not_flagged():
    same = _baseline(np.ones(50))
    assert _flags({"mrr": RegressionGateSettings(max_drop=0.001)}, same["mrr"]) == []
    assert variance_estimates(["retrieval_ms_p95"], same) == {}
