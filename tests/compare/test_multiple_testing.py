"""Holm and Benjamini–Hochberg adjusted p-values: worked by hand, then against statsmodels."""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from statsmodels.stats.multitest import multipletests

from kebab_eval_pipeline.compare.multiple_testing import adjust, bh, holm


def test_holm_by_hand():
    # sorted 0.01, 0.02, 0.03, 0.5 with m = 4: 4·0.01 = 0.04, 3·0.02 = 0.06, 2·0.03 = 0.06, 1·0.5 = 0.5;
    # running max keeps them monotone. Input order is restored.
    got = holm([0.03, 0.01, 0.5, 0.02])
    assert got == pytest.approx([0.06, 0.04, 0.5, 0.06])


def test_bh_by_hand():
    # sorted 0.01, 0.02, 0.03, 0.5, m = 4: m/i·p = 0.04, 0.04, 0.04, 0.5; running min from the top.
    got = bh([0.03, 0.01, 0.5, 0.02])
    assert got == pytest.approx([0.04, 0.04, 0.5, 0.04])


def test_nan_is_outside_the_family_and_stays_nan():
    got = holm([0.01, np.nan, 0.04])
    assert np.isnan(got[1])
    assert got[[0, 2]] == pytest.approx([0.02, 0.04])  # m = 2, not 3
    assert np.isnan(bh([np.nan, np.nan])).all()
    assert holm([]).size == 0


def test_capped_at_one_and_none_is_identity():
    assert holm([0.6, 0.7]).tolist() == [1.0, 1.0]
    assert adjust([0.2, np.nan], "none")[0] == 0.2
    with pytest.raises(ValueError, match="unknown p-value adjustment"):
        adjust([0.1], "bonferroni")
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        holm([1.5])


p_lists = st.lists(
    st.one_of(st.floats(0.0, 1.0), st.sampled_from([0.0, 1.0, 0.05, 0.05, 0.01])), min_size=1, max_size=60
)


@given(p_lists)
@settings(max_examples=100)
def test_matches_statsmodels(p):
    p = np.array(p)
    # statsmodels' Holm branch runs a full gc.collect() on every call: 0.1-0.25 s in a test
    # worker's heap, which was all of this test's time (30 examples took 15 s). A collection
    # cannot change the numbers, so it is skipped here.
    with mock.patch("gc.collect", return_value=0):
        expected_holm = multipletests(p, method="holm")[1]
    assert holm(p) == pytest.approx(expected_holm, abs=1e-12)
    assert bh(p) == pytest.approx(multipletests(p, method="fdr_bh")[1], abs=1e-12)
