"""Minimum detectable effects and sample sizes: against statsmodels' power classes, and against
Monte Carlo simulations of the tests a comparison actually runs (exact McNemar, randomization)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from statsmodels.stats.power import TTestPower

from kebab_eval_pipeline.compare.power import (
    family_alpha,
    mcnemar_detectable_effect,
    mcnemar_power,
    minimum_detectable_effect,
    queries_needed,
    t_power,
    with_detectable_effects,
)
from kebab_eval_pipeline.compare.significance import paired_test, sign_test_p

_RR_CHANGES = np.array([1.0, 0.5, 1 / 3, 1 / 6, 1 / 12])


@settings(max_examples=30, deadline=None)
@given(
    st.integers(2, 20_000),
    st.sampled_from([0.05, 0.01, 0.0125, 0.001, 0.1]),
    st.sampled_from([0.5, 0.8, 0.9]),
    st.floats(0.01, 3.0),
)
def test_power_and_effect_equal_statsmodels(n, alpha, power, effect):
    reference = TTestPower()
    expected = reference.power(effect, n, alpha)
    if np.isnan(expected):  # statsmodels' lower tail came back NaN (far out: 0); the upper alone
        expected = stats.nct.sf(stats.t.isf(alpha / 2, n - 1), n - 1, effect * math.sqrt(n))
    assert float(t_power(effect, n, alpha)) == pytest.approx(expected, abs=1e-9)
    mde = float(minimum_detectable_effect(1.0, n, alpha, power))
    reached = reference.power(mde, n, alpha)
    assert (float(t_power(mde, n, alpha)) if np.isnan(reached) else reached) == pytest.approx(power, abs=1e-7)
    # Its root finder may return the negative root (a change down is as detectable): its size.
    solved = abs(float(np.squeeze(reference.solve_power(nobs=n, alpha=alpha, power=power))))
    # statsmodels' root finder stops at ~1e-4 relative (ours bisects to double precision), and on
    # 2–4 pairs at strict α it can stop short of its target: compared where it reached it.
    if reference.power(solved, n, alpha) == pytest.approx(power, abs=1e-4):
        assert mde == pytest.approx(solved, rel=1e-3)


@pytest.mark.parametrize(
    ("sd", "effect", "alpha"), [(0.3, 0.02, 0.05), (0.45, 0.05, 0.0125), (0.2, 0.1, 0.05)]
)
def test_queries_needed_is_statsmodels_sample_size_rounded_up(sd, effect, alpha):
    solved = TTestPower().solve_power(effect_size=effect / sd, alpha=alpha, power=0.8)
    assert queries_needed(sd, effect, alpha) == math.ceil(solved - 1e-6)
    n = queries_needed(sd, effect, alpha)
    assert minimum_detectable_effect(sd, n, alpha) <= effect < minimum_detectable_effect(sd, n - 1, alpha)


def test_no_variance_no_effect():
    assert np.isnan(minimum_detectable_effect(0.0, 100, 0.05))
    assert np.isnan(minimum_detectable_effect(0.3, 1, 0.05))
    assert queries_needed(0.0, 0.02, 0.05) is None


def _alternative_effect(second_moment: float, n: int, alpha: float) -> float:
    """The MDE as a comparison computes it from the sd it observes, which under the alternative is
    √(E[d²] − Δ²): the fixed point of Δ = MDE(√(E[d²] − Δ²))."""
    delta = 0.0
    for _ in range(60):
        delta = float(minimum_detectable_effect(math.sqrt(second_moment - delta * delta), n, alpha))
    return delta


@pytest.mark.parametrize(("n", "changed", "alpha"), [(60, 0.2, 0.05), (100, 0.3, 0.0125), (200, 0.1, 0.05)])
def test_exact_mcnemar_power_at_the_binary_mde(n, changed, alpha):
    """0/1 scores: at the t effect, the exact McNemar test (what the comparison runs) rejects only
    70–80% of the time — conservative on few discordant pairs — which is why exact McNemar rows take
    their effect from the test's exact power instead (next tests)."""
    mde = _alternative_effect(changed, n, alpha)
    gain, loss = (changed + mde) / 2, (changed - mde) / 2
    counts = np.random.default_rng(n).multinomial(n, [gain, loss, 1 - changed], size=3000)
    power = np.mean([sign_test_p(int(g), int(g + lo)) < alpha for g, lo in counts[:, :2]])
    assert 0.70 <= power <= 0.84


@pytest.mark.parametrize(("n", "changed", "alpha"), [(60, 0.4, 0.05), (100, 0.3, 0.0125)])
def test_randomization_power_at_the_graded_mde(n, changed, alpha):
    """Graded (MRR-like) scores: the sign-flip randomization test finds the computed MDE about 80%
    of the time (Monte Carlo, 300 synthetic comparisons)."""
    rng = np.random.default_rng(n)
    mde = _alternative_effect(changed * float(np.mean(_RR_CHANGES**2)), n, alpha)
    shift = mde / float(np.mean(_RR_CHANGES))
    gain, loss = (changed + shift) / 2, (changed - shift) / 2
    found = 0
    for r in range(300):
        kind = rng.choice(3, size=n, p=[gain, loss, 1 - changed])
        size = rng.choice(_RR_CHANGES, size=n)
        d = np.where(kind == 0, size, np.where(kind == 1, -size, 0.0))
        found += paired_test(np.zeros(n), d, binary=False, n_resamples=1000, ci=False, seed=r).p_value < alpha
    assert 0.72 <= found / 300 <= 0.88


def test_family_alpha_and_the_table_columns():
    table = pd.DataFrame(
        {
            "metric": ["mrr", "hit@5", "recall@10", "retrieval_ms_p95"],
            "n_paired": pd.array([60, 60, 60, pd.NA], dtype="Int64"),
            "paired_se": [0.03, 0.0, 0.02, np.nan],
            "adjusted_by": pd.array(["holm", "holm", "bh", pd.NA], dtype="string"),
        }
    )
    level = family_alpha(0.05, table["adjusted_by"], 2, 10)
    assert list(level) == [0.025, 0.025, 0.005, 0.05]
    out = with_detectable_effects(table, {"holm": {"size": 2}, "bh": {"size": 10}}, 0.05)
    assert out.loc[0, "mde"] == pytest.approx(
        float(minimum_detectable_effect(0.03 * math.sqrt(60), 60, 0.025))
    )
    assert out.loc[2, "mde"] == pytest.approx(
        float(minimum_detectable_effect(0.02 * math.sqrt(60), 60, 0.005))
    )
    # hit@5 unchanged on every query: no variance, no effect; latency: no paired test.
    assert np.isnan(out.loc[1, "mde"]) and np.isnan(out.loc[3, "mde"]) and np.isnan(out.loc[3, "mde_alpha"])


@pytest.mark.parametrize(
    ("n", "changed", "delta", "alpha"), [(60, 0.2, 0.15, 0.05), (100, 0.3, 0.18, 0.0125)]
)
def test_exact_mcnemar_power_equals_simulation(n, changed, delta, alpha):
    """The exact power (every discordant count enumerated) against 20,000 simulated comparisons run
    through the comparison's own exact McNemar p-value."""
    gain, loss = (changed + delta) / 2, (changed - delta) / 2
    counts = np.random.default_rng(n).multinomial(n, [gain, loss, 1 - changed], size=20_000)
    simulated = np.mean([sign_test_p(int(g), int(g + lo)) < alpha for g, lo in counts[:, :2]])
    assert mcnemar_power(n, changed, delta, alpha) == pytest.approx(
        simulated, abs=4 * math.sqrt(0.25 / 20_000)
    )


@pytest.mark.parametrize(("n", "changed", "alpha"), [(60, 0.2, 0.05), (92, 0.04, 0.025), (200, 0.1, 0.05)])
def test_binary_mde_is_what_exact_mcnemar_finds_four_times_in_five(n, changed, alpha):
    mde = mcnemar_detectable_effect(n, changed, alpha)
    assert mcnemar_power(n, changed, mde, alpha) == pytest.approx(0.8, abs=1e-6)
    psi = max(changed, mde)
    gain, loss = (psi + mde) / 2, (psi - mde) / 2
    counts = np.random.default_rng(n).multinomial(n, [gain, loss, 1 - psi], size=10_000)
    found = np.mean([sign_test_p(int(g), int(g + lo)) < alpha for g, lo in counts[:, :2]])
    assert found == pytest.approx(0.8, abs=4 * math.sqrt(0.16 / 10_000))
    # No query changed: a one-way change still has a size the test would find.
    assert 0 < mcnemar_detectable_effect(n, 0.0, alpha) < 1
