"""Cohen's κ of a judge against a reference: equal to statsmodels and scikit-learn on random data,
weighted for graded labels, with a bootstrap interval whose coverage is simulated."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from statsmodels.stats.inter_rater import cohens_kappa

from kebab_eval_pipeline.judge.agreement import agreement, confusion_matrix, kappa_from_table

_STATSMODELS_WT = {"linear": "linear", "quadratic": "quadratic"}


@settings(max_examples=80, deadline=None)
@given(
    st.integers(2, 5).flatmap(
        lambda k: st.tuples(
            st.just(k),
            st.lists(st.tuples(st.integers(0, k - 1), st.integers(0, k - 1)), min_size=2, max_size=200),
        )
    ),
    st.sampled_from(["none", "linear", "quadratic"]),
)
def test_kappa_equals_statsmodels_and_scikit_learn(case, weights):
    k, pairs = case
    reference, judged = [p[0] for p in pairs], [p[1] for p in pairs]
    table = confusion_matrix(reference, judged, list(range(k)))
    ours = float(kappa_from_table(table, weights))
    expected_chance = (table.sum(1) / table.sum()) @ (table.sum(0) / table.sum())
    if np.isnan(ours):  # both raters constant and equal: chance agreement 1, κ undefined
        assert (
            len(set(reference) | set(judged)) == 1 or weights != "none" or expected_chance == pytest.approx(1)
        )
        return
    wt = _STATSMODELS_WT.get(weights)
    reference_kappa = (
        cohens_kappa(table, wt=wt, return_results=False) if wt else cohens_kappa(table, return_results=False)
    )
    assert ours == pytest.approx(float(reference_kappa), abs=1e-9)
    sklearn = pytest.importorskip("sklearn.metrics")
    labels = list(range(k))
    theirs = sklearn.cohen_kappa_score(
        reference, judged, labels=labels, weights=None if weights == "none" else weights
    )
    assert ours == pytest.approx(theirs, abs=1e-9)


def test_a_judge_that_says_yes_to_everything_has_kappa_zero_and_a_high_agreement():
    reference = ["relevant"] * 90 + ["not"] * 10
    judged = ["relevant"] * 100
    result = agreement(reference, judged, labels=["relevant", "not"])
    assert result.kappa == pytest.approx(0.0) and result.observed == pytest.approx(0.9)
    assert result.base_rate == {"relevant": 0.9, "not": 0.1}
    assert result.confusion == [[90, 0], [10, 0]]


def test_undefined_kappa_is_null_with_its_reason():
    result = agreement(["yes"] * 5, ["yes"] * 5)
    assert result.kappa is None and result.ci_low is None and "undefined" in result.note
    assert agreement([], [], labels=["yes", "no"]).note == "no item"
    with pytest.raises(ValueError, match="labels outside"):
        agreement(["yes"], ["maybe"], labels=["yes", "no"])


def test_the_interval_is_seeded_and_holds_the_estimate():
    rng = np.random.default_rng(3)
    reference = rng.integers(0, 3, 120)
    judged = np.where(rng.random(120) < 0.7, reference, rng.integers(0, 3, 120))
    one = agreement(reference, judged, labels=[0, 1, 2], weights="quadratic", seed=5)
    again = agreement(reference, judged, labels=[0, 1, 2], weights="quadratic", seed=5)
    assert one == again and one.ci_low < one.kappa < one.ci_high


def test_bootstrap_interval_covers_the_true_kappa_at_about_its_level():
    """400 synthetic label sets of 200 items from one known joint distribution: the 95% percentile
    interval covers the population κ in 93–97.5% of them (Monte Carlo error ±1.1 points)."""
    joint = np.array([[0.50, 0.10], [0.08, 0.32]])
    truth = float(kappa_from_table(joint))
    rng = np.random.default_rng(11)
    covered = 0
    for i in range(400):
        cells = rng.multinomial(200, joint.ravel())
        reference = np.repeat([0, 0, 1, 1], cells)
        judged = np.repeat([0, 1, 0, 1], cells)
        result = agreement(reference, judged, labels=[0, 1], n_resamples=1000, seed=i)
        covered += result.ci_low <= truth <= result.ci_high
    assert 0.93 <= covered / 400 <= 0.975
