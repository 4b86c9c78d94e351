"""Paired significance tests: McNemar exact, sign-flip randomization, bootstrap CI, per-metric table."""

from __future__ import annotations

import itertools
import math
import sys
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from scipy.stats import binom, binomtest, bootstrap, permutation_test

from kebab_eval_pipeline.compare.significance import (
    SIGNIFICANCE_COLUMNS,
    TEST_MCNEMAR,
    TEST_RANDOMIZATION,
    PairedTest,
    compare_query_scores,
    paired_test,
    sign_test_p,
)
from kebab_eval_pipeline.golden.model import GoldenQuery, Support
from kebab_eval_pipeline.judge.metrics import JUDGE_QUERY_METRICS
from kebab_eval_pipeline.metrics.aggregate import (
    ANSWER_METRICS,
    aggregate_metrics,
    build_query_scores,
    metric_names,
)
from kebab_eval_pipeline.metrics.catalogue import metric_column
from tests.metrics.conftest import Tables

KS = (1, 3)


def _mc_tolerance(p: float, n_resamples: int) -> float:
    """Five Monte Carlo standard errors of a p-value estimated from n_resamples draws (plus the +1)."""
    return 5 * math.sqrt(max(p * (1 - p), 1e-4) / n_resamples) + 2 / n_resamples


def _exhaustive_sign_flip_p(d: np.ndarray) -> float:
    """Reference: two-sided p over every one of the 2^n sign vectors (zeros included)."""
    t_obs = abs(d.sum())
    signs = np.array(list(itertools.product((1.0, -1.0), repeat=d.size)))
    return float(np.mean(np.abs(signs @ d) >= t_obs - 1e-12))


# ---------------------------------------------------------------------------------------------
# paired_test: edge cases
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "values",
    [np.array([0.0, 1.0, 1.0, 0.0, 1.0] * 20), np.random.default_rng(3).random(500)],
    ids=["binary", "continuous"],
)
def test_identical_runs(values):
    r = paired_test(values, values.copy())
    assert r.n == values.size
    assert r.p_value == 1.0
    assert r.delta == 0.0 and r.mean_a == r.mean_b
    assert (r.ci_low, r.ci_high) == (0.0, 0.0)


def test_no_complete_pair_is_all_null():
    r = paired_test(np.array([np.nan, 1.0]), np.array([0.5, np.nan]))
    assert r == PairedTest(0, None, None, None, None, None, None, None, r.note)
    assert "dropped 2" in r.note and "no complete pair" in r.note
    empty = paired_test(np.array([]), np.array([]))
    assert empty.n == 0 and empty.p_value is None and empty.test is None


def test_nan_pairs_are_dropped():
    rng = np.random.default_rng(5)
    a, b = rng.random(40), rng.random(40) + 0.1
    a_nan, b_nan = a.copy(), b.copy()
    a_nan[[3, 7]] = np.nan
    b_nan[[7, 11]] = np.nan
    keep = np.ones(40, bool)
    keep[[3, 7, 11]] = False
    with_nan, clean = paired_test(a_nan, b_nan), paired_test(a[keep], b[keep])
    assert with_nan.n == clean.n == 37
    assert (with_nan.p_value, with_nan.ci_low, with_nan.delta) == (clean.p_value, clean.ci_low, clean.delta)
    assert "dropped 3 pair(s)" in with_nan.note
    assert with_nan.mean_a == pytest.approx(a[keep].mean())
    assert with_nan.mean_b == pytest.approx(b[keep].mean())


def test_binary_inference_and_validation():
    assert paired_test([0, 1, 1], [1, 1, 0]).test == TEST_MCNEMAR
    assert paired_test([0, 1, 0.5], [1, 1, 0]).test == TEST_RANDOMIZATION
    assert paired_test([0, 1, 1], [1, 1, 0], binary=False).test == TEST_RANDOMIZATION
    with pytest.raises(ValueError, match="binary=True"):
        paired_test([0, 0.5], [1, 1], binary=True)
    with pytest.raises(ValueError, match="same length"):
        paired_test([0, 1], [1])
    with pytest.raises(ValueError, match="finite"):
        paired_test([0, np.inf], [1, 1])
    with pytest.raises(ValueError, match="n_resamples"):
        paired_test([0, 1], [1, 1], n_resamples=0)
    with pytest.raises(ValueError, match="confidence"):
        paired_test([0, 1], [1, 1], confidence=1.0)


def test_all_zero_differences_with_nonbinary_values():
    r = paired_test([0.2, 0.7, 0.7], [0.2, 0.7, 0.7])
    assert r.test == TEST_RANDOMIZATION and r.p_value == 1.0 and (r.ci_low, r.ci_high) == (0.0, 0.0)


# ---------------------------------------------------------------------------------------------
# McNemar exact
# ---------------------------------------------------------------------------------------------


def test_mcnemar_hand_computed_zero_vs_six():
    r = paired_test(np.zeros(6), np.ones(6))
    assert r.test == TEST_MCNEMAR
    assert r.p_value == pytest.approx(2 * 0.5**6) == pytest.approx(0.03125)
    assert r.delta == 1.0


def test_mcnemar_equals_binomtest_on_hand_counted_discordant_pairs():
    # 7 pairs 0→1, 2 pairs 1→0, 5 pairs 1→1, 6 pairs 0→0 (shuffled).
    a = np.array([0] * 7 + [1] * 2 + [1] * 5 + [0] * 6, dtype=float)
    b = np.array([1] * 7 + [0] * 2 + [1] * 5 + [0] * 6, dtype=float)
    order = np.random.default_rng(0).permutation(a.size)
    r = paired_test(a[order], b[order])
    assert r.p_value == binomtest(7, 9, 0.5).pvalue
    assert r.delta == pytest.approx(5 / 20)
    assert "9 discordant" in r.note and "7 0→1, 2 1→0" in r.note


@st.composite
def _counts(draw) -> tuple[int, int]:
    """(k, n): n up to a million discordant pairs, k anywhere, near n/2 (p near 1) half the time."""
    n = draw(st.integers(1, 10**6))
    spread = draw(st.sampled_from([n // 2, 3 * math.isqrt(n) + 1]))
    k = draw(st.integers(max(0, n // 2 - spread), min(n, n // 2 + spread)))
    return k, n


@given(_counts())
@example(counts=(1, 1075))  # p ≈ 5.3e-321, subnormal; scipy's sum gives 0.0 (found by a fresh-clone run)
@example(counts=(35, 1075))  # p ≈ 3.6e-258: one tail form underflowed, and p came out halved
def test_sign_test_p_equals_scipy_binomtest(counts):
    """scipy.stats is imported by this test only: the package's exact McNemar is scipy.special.

    Relative agreement is asked for down to the smallest normal double; below it (p < 2.2e-308)
    a double keeps only a few significant bits. Where scipy's own sum underflows to 0.0 (it does
    from about 1e-260 down), the exact tail computed in integers is the yardstick instead."""
    k, n = counts
    expected = binomtest(k, n, 0.5).pvalue
    if expected == 0.0 and n <= 5000:
        # scipy's sum underflows to 0.0 far above the smallest double (it does for k = 30 of 1075,
        # p ≈ 5.6e-266): there the yardstick is the exact tail in integers, 2·Σ C(n, j)/2ⁿ.
        j = min(k, n - k)
        expected = float(min(Fraction(1), Fraction(2 * sum(math.comb(n, i) for i in range(j + 1)), 2**n)))
    assert sign_test_p(k, n) == pytest.approx(expected, rel=1e-12, abs=sys.float_info.min)


def test_sign_test_p_edge_cases():
    # No discordant pair: p = 1 (scipy.stats.binomtest refuses n = 0).
    assert sign_test_p(0, 0) == 1.0
    with pytest.raises(ValueError):
        binomtest(0, 0, 0.5)
    # Ties, n small and large: p = 1, as scipy.
    for k, n in ((1, 2), (5, 10), (500_000, 10**6), (2, 5), (3, 5)):
        assert sign_test_p(k, n) == binomtest(k, n, 0.5).pvalue == 1.0, (k, n)
    for k, n in ((0, 1), (1, 1), (0, 2), (2, 2), (0, 30), (30, 30), (1, 1000)):
        assert sign_test_p(k, n) == pytest.approx(binomtest(k, n, 0.5).pvalue, rel=1e-12, abs=0.0)
    assert sign_test_p(0, 2000) == binomtest(0, 2000, 0.5).pvalue == 0.0  # below the smallest float
    for k, n in ((-1, 3), (4, 3)):
        with pytest.raises(ValueError, match="0 <= k <= n"):
            sign_test_p(k, n)


@given(st.lists(st.tuples(st.sampled_from([0.0, 1.0]), st.sampled_from([0.0, 1.0])), max_size=400))
def test_mcnemar_p_equals_binomtest_on_random_pairs(pairs):
    """Concordant pairs (ties: 0→0, 1→1) do not count; no discordant pair gives p = 1."""
    a = np.array([p[0] for p in pairs], dtype=float)
    b = np.array([p[1] for p in pairs], dtype=float)
    if not pairs:
        return
    r = paired_test(a, b, n_resamples=10, ci=False, binary=True)
    n01, n10 = int(((a == 0) & (b == 1)).sum()), int(((a == 1) & (b == 0)).sum())
    expected = 1.0 if n01 + n10 == 0 else binomtest(n01, n01 + n10, 0.5).pvalue
    assert r.test == TEST_MCNEMAR
    assert r.p_value == pytest.approx(expected, rel=1e-12, abs=0.0)


def test_mcnemar_no_discordant_pairs_and_symmetry():
    r = paired_test([0, 1, 1, 0], [0, 1, 1, 0])
    assert r.p_value == 1.0
    assert paired_test([0, 1], [1, 0]).p_value == 1.0
    a = np.array([0, 0, 0, 1, 1, 0, 1], float)
    b = np.array([1, 1, 0, 0, 1, 1, 1], float)
    assert paired_test(a, b).p_value == paired_test(b, a).p_value


def test_exact_randomization_on_binary_differences_equals_mcnemar():
    # The sign-flip test on differences in {-1, 0, 1} is the exact McNemar test.
    a = np.array([0] * 8 + [1] * 2 + [1] * 30, float)
    b = np.array([1] * 8 + [0] * 2 + [1] * 30, float)
    mc = paired_test(a, b)
    rand = paired_test(a, b, binary=False, n_resamples=2**10)  # 10 non-zero → exact path
    assert "exact" in rand.note
    assert rand.p_value == pytest.approx(mc.p_value, abs=1e-12)


# ---------------------------------------------------------------------------------------------
# Randomization test against exhaustive enumeration
# ---------------------------------------------------------------------------------------------


def test_randomization_exact_path_matches_exhaustive_enumeration():
    rng = np.random.default_rng(11)
    a = rng.random(12)
    b = a + rng.normal(0.15, 0.3, 12)
    b[[2, 5]] = a[[2, 5]]  # zero differences: exact whether flipped or not
    reference = _exhaustive_sign_flip_p(b - a)
    r = paired_test(a, b, n_resamples=2**10)  # 10 non-zero differences → all 1024 flips
    assert "exact over all 2^10" in r.note
    assert r.p_value == pytest.approx(reference, abs=1e-12)


@pytest.mark.parametrize("n", [9, 12])
def test_randomization_monte_carlo_matches_exhaustive_enumeration(n):
    rng = np.random.default_rng(n)
    a = rng.random(n)
    b = a + rng.normal(0.2, 0.4, n)
    reference = _exhaustive_sign_flip_p(b - a)
    r = paired_test(a, b, n_resamples=200)  # fewer than 2^n → Monte Carlo
    assert "Monte Carlo" in r.note
    assert abs(r.p_value - reference) <= _mc_tolerance(reference, 200)


def test_randomization_many_distinct_values_matches_exhaustive_enumeration():
    # 20 distinct magnitudes, 2^20 > n_resamples: the byte-lookup Monte Carlo path.
    rng = np.random.default_rng(20)
    d = rng.normal(0.25, 1.0, 20)
    hits = 0
    for start in range(0, 1 << 20, 1 << 15):
        codes = np.arange(start, start + (1 << 15))
        signs = 1.0 - 2.0 * ((codes[:, None] >> np.arange(20)) & 1)
        hits += int(np.count_nonzero(np.abs(signs @ d) >= abs(d.sum()) - 1e-12))
    reference = hits / (1 << 20)
    r = paired_test(np.zeros(20), d, n_resamples=20_000)
    assert 0.01 < reference < 0.95  # a p-value with Monte Carlo error to check against
    assert abs(r.p_value - reference) <= _mc_tolerance(reference, 20_000)


def test_randomization_few_distinct_values_matches_exact_null():
    # 400 differences of three sizes: the per-size Binomial Monte Carlo path. Reference: the exact
    # null distribution of Σ v·(2·Binomial(c_v, ½) − c_v), convolved on an integer lattice.
    rng = np.random.default_rng(3)
    d = rng.choice([-5, -2, -1, 1, 2, 5], size=400, p=[0.14, 0.16, 0.18, 0.2, 0.17, 0.15]) / 10.0
    units = np.round(np.abs(d) * 10).astype(int)
    pmf = np.array([1.0])  # over T/0.1 + offset
    for v in (1, 2, 5):
        c = int((units == v).sum())
        step = np.zeros(2 * v * c + 1)
        step[:: 2 * v] = binom.pmf(np.arange(c + 1), c, 0.5)  # T contribution −v·c … +v·c
        pmf = np.convolve(pmf, step)
    support = np.arange(pmf.size) - (pmf.size - 1) // 2
    t_obs = round(float(abs(d.sum())) * 10)
    reference = float(pmf[np.abs(support) >= t_obs].sum())
    r = paired_test(np.zeros(400), d, n_resamples=20_000)
    assert 0.01 < reference < 0.95  # a p-value with Monte Carlo error to check against
    assert abs(r.p_value - reference) <= _mc_tolerance(reference, 20_000)


def test_agrees_with_scipy_permutation_test_and_bootstrap():
    """Independent implementations: scipy's sign-flip permutation test and paired percentile bootstrap."""
    rng = np.random.default_rng(30)
    a = rng.random(40)
    b = a + rng.normal(0.08, 0.3, 40)
    r = paired_test(a, b, n_resamples=20_000)
    reference = permutation_test(
        (b - a,),
        lambda x, axis: np.mean(x, axis=axis),
        permutation_type="samples",
        vectorized=True,
        n_resamples=20_000,
        random_state=1,
    ).pvalue
    assert abs(r.p_value - reference) <= math.sqrt(2) * _mc_tolerance(reference, 20_000)
    ci = bootstrap(
        (a, b),
        lambda x, y, axis: np.mean(y - x, axis=axis),
        paired=True,
        vectorized=True,
        method="percentile",
        n_resamples=20_000,
        random_state=1,
    ).confidence_interval
    assert r.ci_low == pytest.approx(ci.low, abs=0.006) and r.ci_high == pytest.approx(ci.high, abs=0.006)


# ---------------------------------------------------------------------------------------------
# Planted effects, null calibration, CI coverage, reproducibility
# ---------------------------------------------------------------------------------------------


def test_planted_large_effect_binary():
    rng = np.random.default_rng(1)
    a = (rng.random(300) < 0.5).astype(float)
    b = a.copy()
    b[(a == 0) & (rng.random(300) < 0.4)] = 1.0  # b fixes ~40% of a's misses, breaks none
    r = paired_test(a, b)
    assert r.test == TEST_MCNEMAR and r.p_value < 0.01
    assert r.ci_low <= r.delta <= r.ci_high and r.ci_low > 0


def test_planted_large_effect_continuous_and_ci_contains_true_delta():
    rng = np.random.default_rng(2)
    a = rng.random(400)
    b = a + 0.1 + rng.normal(0, 0.2, 400)
    r = paired_test(a, b)
    assert r.test == TEST_RANDOMIZATION and r.p_value < 0.01
    assert r.p_value == pytest.approx(1 / 10_001)  # no resample as extreme: the Monte Carlo floor
    assert r.ci_low < 0.1 < r.ci_high
    assert r.ci_low < r.delta < r.ci_high
    assert r.delta == pytest.approx(r.mean_b - r.mean_a)


def test_planted_null_effect_is_not_significant():
    rng = np.random.default_rng(3)
    a = rng.random(300)
    b = a + rng.normal(0, 0.2, 300)  # symmetric noise, no shift
    r = paired_test(a, b)
    assert r.p_value > 0.05
    assert r.ci_low < 0 < r.ci_high


def test_null_rejection_rate_is_calibrated():
    """Under the null, p < 0.05 about 5% of the time (binary and continuous)."""
    rng = np.random.default_rng(7)
    rejections = {"binary": 0, "continuous": 0}
    trials = 200
    for _ in range(trials):
        a = rng.random(60)
        rejections["continuous"] += paired_test(a, a + rng.normal(0, 0.3, 60), n_resamples=999).p_value < 0.05
        x, y = (rng.random(60) < 0.5).astype(float), (rng.random(60) < 0.5).astype(float)
        rejections["binary"] += paired_test(x, y, n_resamples=999).p_value < 0.05
    assert rejections["continuous"] / trials <= 0.10
    assert rejections["binary"] / trials <= 0.10  # exact McNemar is conservative


@pytest.mark.parametrize("kind", ["binary", "continuous"])
def test_bootstrap_ci_coverage(kind):
    rng = np.random.default_rng(13)
    trials, covered = 150, 0
    for _ in range(trials):
        if kind == "binary":
            a = (rng.random(120) < 0.5).astype(float)
            u = rng.random(120)
            b = np.where((a == 0) & (u < 0.2), 1.0, np.where((a == 1) & (u < 0.1), 0.0, a))
            true = 0.5 * 0.2 - 0.5 * 0.1
        else:
            a = rng.random(120)
            b = a + rng.normal(0.05, 0.3, 120)
            true = 0.05
        r = paired_test(a, b, n_resamples=999, seed=int(rng.integers(1 << 31)))
        covered += r.ci_low <= true <= r.ci_high
    assert covered / trials >= 0.88


def test_reproducible_with_same_seed_and_order_independent():
    rng = np.random.default_rng(9)
    a = rng.random(2000)
    b = a + rng.normal(0.01, 0.3, 2000)
    first, again = paired_test(a, b, seed=42), paired_test(a, b, seed=42)
    assert first == again
    order = rng.permutation(2000)
    assert paired_test(a[order], b[order], seed=42) == first


def test_different_seed_differs_only_within_monte_carlo_error():
    rng = np.random.default_rng(12)
    a = rng.random(2000)
    b = a + rng.normal(0.012, 0.3, 2000)
    r1, r2 = paired_test(a, b, seed=1, n_resamples=4000), paired_test(a, b, seed=2, n_resamples=4000)
    assert 0.01 < r1.p_value < 0.5
    assert r1.p_value != r2.p_value or r1.ci_low != r2.ci_low
    assert abs(r1.p_value - r2.p_value) <= math.sqrt(2) * _mc_tolerance(r1.p_value, 4000)
    width = r1.ci_high - r1.ci_low
    assert abs(r1.ci_low - r2.ci_low) < 0.1 * width and abs(r1.ci_high - r2.ci_high) < 0.1 * width
    assert (r1.delta, r1.mean_a, r1.n) == (r2.delta, r2.mean_a, r2.n)


def test_bootstrap_with_many_zero_differences_matches_plain_bootstrap():
    # Mostly unchanged queries, many distinct changes: the zero-skipping index bootstrap.
    rng = np.random.default_rng(21)
    d = np.zeros(300)
    d[:90] = rng.normal(0.05, 0.3, 90)
    r = paired_test(np.zeros(300), d, n_resamples=20_000)
    plain = d[np.random.default_rng(0).integers(0, 300, size=(20_000, 300))].mean(axis=1)
    low, high = np.quantile(plain, [0.025, 0.975])
    assert r.ci_low == pytest.approx(low, abs=0.0015) and r.ci_high == pytest.approx(high, abs=0.0015)


def test_confidence_level_widens_the_interval():
    rng = np.random.default_rng(12)
    a = rng.random(200)
    b = a + rng.normal(0.02, 0.2, 200)
    r90, r99 = paired_test(a, b, confidence=0.90), paired_test(a, b, confidence=0.99)
    assert r99.ci_low < r90.ci_low < r90.ci_high < r99.ci_high


# ---------------------------------------------------------------------------------------------
# metric_column and compare_query_scores on real query_scores tables
# ---------------------------------------------------------------------------------------------


def test_metric_column_mapping():
    assert metric_column("mrr") == "mrr"
    for name in (
        "hit@3",
        "recall@1",
        "doc_recall@5",
        "recall_any@10",
        "recall_all@5",
        "precision@3",
        "ndcg@10",
    ):
        assert metric_column(name) == name
    assert metric_column("citation_coverage") == "citation_ok"
    assert metric_column("attribution_hit_rate") == "attribution_hit"
    assert metric_column("refusal_correctness") == "refusal_correct"
    assert metric_column("under_refusal_rate") == "under_refusal"
    assert metric_column("scope_miss_rate") == "scope_miss"
    assert metric_column("judge_groundedness") == "judge_groundedness"
    assert metric_column("judge_groundedness_rule_agreement") == "judge_rule_agreement"
    for name in (
        "n_queries",
        "group_consistency@3",
        "error_rate",
        "mixed_version_rate",
        "retrieval_ms_p95",
        "total_suite_ms",
        "index_chunks",
        "judge_disagreement_rate",  # run-level: the spot check, not a mean of per-query scores
        "hit@0",
        "bogus@3",
        "nope",
    ):
        assert metric_column(name) is None
    means = {name for name in metric_names(KS) if metric_column(name)}
    # mrr, map, rprec, bpref, @k (9 families since map@k and judged@k), scope_miss_rate, answers,
    # judge scores
    assert len(means) == 1 + 3 + 9 * len(KS) + 1 + len(ANSWER_METRICS) + len(JUDGE_QUERY_METRICS)


def test_every_aggregate_metric_is_mapped_or_explained():
    """A metric added to metric_names must be mapped to its column or given a not-tested reason."""
    qs = pd.DataFrame({"query_id": ["x"]})
    out = compare_query_scores(qs, qs, metric_names(KS))
    unknown = out.loc[out["note"].str.startswith("unknown"), "metric"].tolist()
    assert unknown == []


N_QUERIES = 60


def _golden() -> tuple[pd.DataFrame, pd.DataFrame]:
    queries = [
        GoldenQuery(id=f"q{i:02d}", query="?", supports=[Support(chunk_id=f"gold{i}")])
        for i in range(N_QUERIES - 6)
    ]
    queries += [GoldenQuery(id=f"u{i}", query="?", answerable=False) for i in range(6)]
    return Tables.golden(*queries)


def _run(ranks: dict[str, int | None], refused: dict[str, bool], drop: frozenset[str] = frozenset()):
    """query_scores of one run: the gold chunk of q at ``ranks[q]`` among 5 hits (None: missing)."""
    queries, supports = _golden()
    keep = ~queries["query_id"].isin(drop)
    queries = queries[keep].reset_index(drop=True)
    supports = supports[~supports["query_id"].isin(drop)].reset_index(drop=True)
    hit_frames, outcomes = [], []
    for qid in queries["query_id"]:
        rank = ranks.get(qid)
        chunks = [f"z{qid}-{j}" for j in range(5)]
        if rank is not None:
            chunks[rank - 1] = f"gold{int(qid[1:])}"
        hit_frames.append(Tables.hits(qid, *({"chunk_id": c} for c in chunks)))
        outcome = {"query_id": qid, "n_hits": 5, "retrieval_ms": 1.0}
        if qid in refused:
            outcome.update(answered=True, answer_text="…", refused=refused[qid])
        outcomes.append(outcome)
    return build_query_scores(
        queries, supports, Tables.concat(*hit_frames), Tables.outcomes(*outcomes), Tables.citations(), ks=KS
    )


def _baseline_ranks() -> dict[str, int | None]:
    return {f"q{i:02d}": (None if i % 3 == 0 else 1 + i % 4) for i in range(N_QUERIES - 6)}


REFUSED_A = {f"u{i}": i < 3 for i in range(6)}  # refuses 3 of the 6 unanswerable queries


def test_compare_identical_runs():
    a = _run(_baseline_ranks(), REFUSED_A)
    names = metric_names(KS)
    out = compare_query_scores(a, a.copy(), names)
    assert list(out.columns) == list(SIGNIFICANCE_COLUMNS)
    assert out["metric"].tolist() == names
    assert out.dtypes.astype(str).to_dict() == SIGNIFICANCE_COLUMNS
    tested = out[out["test"].notna()].set_index("metric")
    answers = {"refusal_correctness", "under_refusal_rate", "citation_coverage", "chr", "answer_precision"}
    assert set(tested.index) == {"mrr", "map", "rprec", "bpref", *answers} | {
        f"{m}@{k}"
        for m in (
            "hit",
            "recall",
            "doc_recall",
            "recall_any",
            "recall_all",
            "precision",
            "ndcg",
            "map",
            "judged",
        )
        for k in KS
    }
    assert (tested["p_value"] == 1.0).all() and (tested["delta"] == 0.0).all()
    assert (tested["ci_low"] == 0.0).all() and (tested["ci_high"] == 0.0).all()
    assert out.attrs == {"n_joined": N_QUERIES, "n_only_a": 0, "n_only_b": 0}


def test_compare_perturbed_run():
    base = _baseline_ranks()
    better = {q: (1 if r is None and int(q[1:]) % 2 == 0 else r) for q, r in base.items()}  # finds 9 misses
    a = _run(base, REFUSED_A)
    b = _run(better, {**REFUSED_A, "u5": True}, drop=frozenset({"q01"}))
    names = metric_names(KS)
    out = compare_query_scores(a, b, names).set_index("metric")

    hit3 = out.loc["hit@3"]
    assert hit3["column"] == "hit@3" and hit3["test"] == TEST_MCNEMAR and hit3["n"] == N_QUERIES - 6 - 1
    assert hit3["p_value"] == pytest.approx(binomtest(9, 9, 0.5).pvalue)  # 9 new hits, no new misses
    assert "1 query(ies) only in a and 0 only in b excluded" in hit3["note"]
    mrr = out.loc["mrr"]
    assert mrr["test"] == TEST_RANDOMIZATION and mrr["delta"] == pytest.approx(9 / 53)
    assert mrr["p_value"] == pytest.approx(2 / 512)  # 9 non-zero differences, all positive: exact
    assert mrr["ci_low"] <= mrr["delta"] <= mrr["ci_high"] and mrr["ci_low"] > 0

    # Means over the joined rows; no golden drift on these columns → the stored aggregates.
    agg_b = aggregate_metrics(b, KS, round_to=None)
    assert mrr["mean_b"] == pytest.approx(agg_b["mrr"])
    assert out.loc["precision@3", "test"] == TEST_RANDOMIZATION
    refusal = out.loc["refusal_correctness"]
    assert refusal["test"] == TEST_MCNEMAR and refusal["n"] == 6
    assert refusal["delta"] == pytest.approx(1 / 6) and refusal["p_value"] == 1.0

    # Not per-query means → no invented test.
    for name in ("n_queries", "group_consistency@3", "error_rate", "retrieval_ms_p50", "total_suite_ms"):
        row = out.loc[name]
        assert pd.isna(row["p_value"]) and pd.isna(row["test"]) and pd.isna(row["n"])
        assert row["note"].startswith("not tested")
    # Per-query means without any pair defined in both runs → n = 0 and nulls.
    attribution = out.loc["attribution_hit_rate"]  # no answerable query was answered
    assert attribution["n"] == 0 and pd.isna(attribution["p_value"]) and pd.isna(attribution["test"])
    assert "no complete pair" in attribution["note"]
    # Reproducible.
    pd.testing.assert_frame_equal(compare_query_scores(a, b, names).set_index("metric"), out)


def test_compare_missing_column_and_unknown_metric_and_bad_ids():
    a = _run(_baseline_ranks(), REFUSED_A)
    out = compare_query_scores(a, a, ["hit@10", "bogus", "mrr"]).set_index("metric")
    assert "missing in run a and b" in out.loc["hit@10", "note"] and pd.isna(out.loc["hit@10", "p_value"])
    assert "unknown metric" in out.loc["bogus", "note"]
    assert out.loc["mrr", "p_value"] == 1.0
    with pytest.raises(ValueError, match="duplicate"):
        compare_query_scores(pd.concat([a, a.head(1)]), a, ["mrr"])
    assert compare_query_scores(a, a, []).empty


def test_compare_binary_test_chosen_by_metric_not_data():
    a = pd.DataFrame({"query_id": ["x", "y", "z"], "mrr": [1.0, 0.0, 1.0], "hit@1": [1.0, 0.0, 1.0]})
    b = pd.DataFrame({"query_id": ["z", "y", "x"], "mrr": [1.0, 1.0, 0.0], "hit@1": [1.0, 1.0, 0.0]})
    out = compare_query_scores(a, b, ["mrr", "hit@1"]).set_index("metric")
    assert out.loc["mrr", "test"] == TEST_RANDOMIZATION and out.loc["hit@1", "test"] == TEST_MCNEMAR
    assert out.loc["mrr", "p_value"] == out.loc["hit@1", "p_value"] == 1.0
