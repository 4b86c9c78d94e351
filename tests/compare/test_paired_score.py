"""Score bounds of margin decisions: a published worked example, the closed-form restricted
maximum likelihood against a numerical optimiser, and the error rate at the margin — exact for
0/1 scores, simulated for graded ones (small scale here; ``benchmarks/bench_margin_size.py`` runs
the full grid)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import optimize, stats

from kebab_eval_pipeline.compare.margins import margin_verdict
from kebab_eval_pipeline.compare.paired_score import (
    difference_sums,
    score_bounds,
    score_margin_p,
    score_statistic,
)
from kebab_eval_pipeline.compare.significance import paired_test
from tests.compare.margin_simulation import binary_size, graded_size


def test_tango_interval_equals_the_published_worked_example():
    # Fagerland, Lydersen & Laake, "Statistical Analysis of Contingency Tables", ch. 8 (R package
    # contingencytables, its test suite): Cavo et al. 2012, n12 = 6, n21 = 16, N = 161 — Tango's
    # score CI −0.0621 (95% CI −0.1240 to −0.0054). Uncorrected, two-sided 95% = one-sided 97.5%.
    low, high = score_bounds(161, 6, 16, 22, 0.025, continuity=0)
    assert (round(low[0], 4), round(high[0], 4)) == (-0.1240, -0.0054)
    # The comparison's bound carries the continuity correction: wider on both sides.
    corrected = score_bounds(161, 6, 16, 22, 0.025)
    assert corrected[0][0] < low[0] and corrected[1][0] > high[0]


@given(
    st.integers(5, 300),
    st.floats(0, 1),
    st.floats(0, 1),
    st.floats(-0.6, 0.6),
)
def test_restricted_likelihood_closed_form_is_the_maximum(n, gain_share, loss_share, delta0):
    """Tango's closed-form loss rate under H0: Δ = Δ0 maximises the trinomial likelihood — also
    with fractional gains and losses (graded scores), checked with scipy's bounded optimiser."""
    x = gain_share * n * 0.5
    y = loss_share * n * 0.5
    lo, hi = max(0.0, -delta0) + 1e-12, (1 - delta0) / 2 - 1e-12
    if hi <= lo:
        return

    def neg_log_likelihood(p):
        return -(x * np.log(p + delta0) + y * np.log(p) + (n - x - y) * np.log(1 - 2 * p - delta0))

    best = optimize.minimize_scalar(
        neg_log_likelihood, bounds=(lo, hi), method="bounded", options={"xatol": 1e-12}
    )
    a, b, c = 2.0 * n, -x - y + (2.0 * n - x + y) * delta0, -y * delta0 * (1 - delta0)
    closed = (np.sqrt(b * b - 4 * a * c) - b) / (2 * a)
    assert neg_log_likelihood(np.clip(closed, lo, hi)) <= best.fun + 1e-7 * max(1.0, abs(best.fun))


@given(
    st.lists(
        st.tuples(st.sampled_from([0.0, 0.25, 0.5, 1.0]), st.sampled_from([0.0, 0.5, 1.0])),
        min_size=1,
        max_size=120,
    ),
    st.floats(0.005, 0.2),
    st.sampled_from([0.05, 0.025, 0.1]),
)
def test_bounds_hold_the_mean_and_agree_with_the_margin_p(pairs, margin, alpha):
    a = np.array([p[0] for p in pairs])
    b = np.array([p[1] for p in pairs])
    d = b - a
    n = d.size
    sums = difference_sums(d)
    low, high = score_bounds(n, *sums, alpha)
    assert -1 <= low[0] <= d.mean() + 1e-9 and d.mean() - 1e-9 <= high[0] <= 1
    # One statistic for the bound and the p-value: p < α exactly when the bound passes the margin.
    p_low = float(score_margin_p(n, *sums, -margin, "low"))
    if abs(low[0] + margin) > 1e-6:
        assert (p_low < alpha) == (low[0] > -margin)
    verdict = margin_verdict("mrr", "non_inferior", margin, alpha, d.mean(), low[0], high[0], n=n, sums=sums)
    assert verdict.p_value == pytest.approx(p_low)
    # paired_test carries the same sums to the comparison table.
    result = paired_test(a, b, seed=0, n_resamples=50)
    assert (result.gain_sum, result.loss_sum, result.square_sum) == pytest.approx(sums)


def test_identical_runs_show_nothing_a_small_set_cannot_resolve():
    """No difference seen is not "equivalent within 0.01": 30 identical queries bound the change
    only to ±0.11; the bound narrows as queries are added (±0.0036 at 1,000)."""
    low, high = score_bounds([30, 1000], 0, 0, 0, 0.05)
    assert low[0] == pytest.approx(-high[0]) and high[0] > 0.1
    assert high[1] < 0.004
    tiny = margin_verdict("hit@1", "equivalent", 0.01, 0.05, 0.0, low[0], high[0], n=30, sums=(0, 0, 0))
    assert tiny.verdict == "inconclusive" and not tiny.passed
    big = margin_verdict("hit@1", "equivalent", 0.01, 0.05, 0.0, low[1], high[1], n=1000, sums=(0, 0, 0))
    assert big.verdict == "equivalent" and big.passed


def test_the_issue_case_one_loss_in_sixty():
    """60 queries, one lost, margin 0.05: the exact (Clopper–Pearson) 95% upper bound of the loss
    rate is 0.077, so "non-inferior within 0.05" must not pass; the t bound passed it."""
    assert stats.binomtest(1, 60).proportion_ci(0.90, method="exact").high == pytest.approx(0.0764, abs=1e-3)
    low, high = score_bounds(60, 0, 1, 1, 0.05)
    assert low[0] < -0.05
    assert (
        margin_verdict("hit@5", "non_inferior", 0.05, 0.05, -1 / 60, low[0], high[0]).verdict
        == "inconclusive"
    )


@pytest.mark.parametrize("n", [30, 60])
@pytest.mark.parametrize("delta", [0.01, 0.03, 0.05])
def test_exact_size_at_the_margin_for_binary_scores(n, delta):
    """Every outcome enumerated: the score rule declares non-inferiority at most α of the time when
    the true loss exceeds the gain by exactly δ (worst gain rate); the t rule did far more often."""
    assert binary_size("score", n, delta) <= 0.05
    assert binary_size("t", n, delta) > 0.15


def test_exact_sizes_quoted_by_the_issue():
    # The audit's figures for the t bound at the margin with no gains, reproduced exactly.
    no_gains = np.array([0.0])
    assert binary_size("t", 60, 0.05, gains=no_gains) == pytest.approx(0.19, abs=0.01)
    assert binary_size("t", 60, 0.02, gains=no_gains) == pytest.approx(0.30, abs=0.01)
    assert binary_size("t", 30, 0.01, gains=no_gains) == pytest.approx(0.74, abs=0.01)


def test_tost_size_at_either_margin():
    """Equivalence is two one-sided tests at α each: at either margin, its size is the one-sided
    size (the other side only makes it rarer), so ≤ α."""
    assert binary_size("score", 60, 0.02) <= 0.05  # at −δ
    # At +δ, by symmetry of gains and losses the upper bound's size is the same.
    x, y = np.meshgrid(np.arange(61.0), np.arange(61.0), indexing="ij")
    keep = x + y <= 60
    _, high = score_bounds(60, x[keep], y[keep], x[keep] + y[keep], 0.05)
    low_mirror, _ = score_bounds(60, y[keep], x[keep], x[keep] + y[keep], 0.05)
    assert np.allclose(high, -low_mirror, atol=1e-9)


@pytest.mark.parametrize("n, delta", [(60, 0.02), (200, 0.01)])
def test_simulated_size_at_the_margin_for_graded_scores(n, delta):
    rate, se = graded_size("score", n, delta, repeats=4000, seed=n)
    assert rate <= 0.05 + 3 * se
    t_rate, _ = graded_size("t", n, delta, repeats=4000, seed=n)
    assert t_rate > 0.1


def test_statistic_falls_as_the_hypothesised_difference_rises():
    """The bisection needs it: the set where T_low exceeds a positive target is an interval
    starting at −1 (and T_high below a negative one, an interval ending at +1)."""
    rng = np.random.default_rng(7)
    grid = np.linspace(-0.999, 0.999, 2001)
    for _ in range(300):
        n = int(rng.integers(1, 200))
        d = rng.choice([-1, -0.5, -1 / 12, 0, 0, 0, 1 / 3, 1], size=n) * (rng.random(n) < rng.random())
        sums = difference_sums(d)
        for z in (0.8, 1.645, 2.3):
            above = score_statistic(n, *sums, grid, "low") > z
            assert not np.any(np.diff(above.astype(int)) > 0)
            below = score_statistic(n, *sums, grid, "high") < -z
            assert not np.any(np.diff(below.astype(int)) < 0)


def test_differences_outside_the_unit_range_are_refused():
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        difference_sums(np.array([0.5, -1.5]))
    result = paired_test(np.array([0.0, 2.0, 1.0]), np.array([1.0, 0.0, 1.0]), binary=False, n_resamples=10)
    assert result.gain_sum is None and result.se is not None  # the comparison falls back to t
