"""Non-inferiority and equivalence: the verdicts worked by hand, the paired-t fallback bounds
(against scipy), and the gates on a real comparison of replayed runs (score bounds; their error
rates are in ``test_paired_score.py``)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from kebab_eval_pipeline.chain.settings import settings_from_dict
from kebab_eval_pipeline.compare.document import render_report_html
from kebab_eval_pipeline.compare.margins import margin_verdict, t_bounds
from kebab_eval_pipeline.compare.paired_score import score_bounds
from kebab_eval_pipeline.compare.runs import compare_runs
from kebab_eval_pipeline.compare.significance import paired_test
from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.gates.evaluate import check_gate_names, evaluate_comparison_gates
from kebab_eval_pipeline.gates.settings import RegressionGateSettings
from tests.compare.conftest import hit, replay_bundle, write_golden


@given(
    st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1)), min_size=3, max_size=80),
    st.sampled_from([0.05, 0.025, 0.1]),
)
def test_bounds_equal_scipy_one_sided_t_intervals(pairs, alpha):
    a = np.array([p[0] for p in pairs])
    b = np.array([p[1] for p in pairs])
    result = paired_test(a, b, n_resamples=100, ci=False)
    low, high = t_bounds(result.delta, result.se, result.n, alpha)
    d = b - a
    if np.std(d) == 0:
        assert low[0] == pytest.approx(d.mean()) and high[0] == pytest.approx(d.mean())
        return
    greater = stats.ttest_rel(b, a, alternative="greater").confidence_interval(1 - alpha)
    less = stats.ttest_rel(b, a, alternative="less").confidence_interval(1 - alpha)
    assert low[0] == pytest.approx(greater.low, abs=1e-9)
    assert high[0] == pytest.approx(less.high, abs=1e-9)


@given(
    st.floats(-1, 1),
    st.floats(1e-6, 0.5),
    st.integers(2, 100_000),
    st.floats(0.001, 0.499),
    st.floats(0.001, 0.5),
)
def test_t_quantiles_and_margin_p_equal_scipy_stats_t(delta, se, n, alpha, margin):
    """The package computes Student's t from scipy.special (no scipy.stats import at run time):
    the bounds and both margin kinds' p-values against scipy.stats.t, imported here only."""
    low, high = t_bounds(delta, se, n, alpha)
    q = stats.t.ppf(1 - alpha, n - 1)
    assert low[0] == pytest.approx(delta - q * se, rel=1e-12, abs=1e-15)
    assert high[0] == pytest.approx(delta + q * se, rel=1e-12, abs=1e-15)
    b_low, b_high = float(low[0]), float(high[0])
    inferior = margin_verdict("mrr", "non_inferior", margin, alpha, delta, b_low, b_high, se=se, n=n)
    assert inferior.p_value == pytest.approx(stats.t.sf((delta + margin) / se, n - 1), rel=1e-12, abs=0)
    # A rate of bad events: the improvement is −delta.
    rate = margin_verdict(
        "over_refusal_rate", "non_inferior", margin, alpha, delta, b_low, b_high, se=se, n=n
    )
    assert rate.p_value == pytest.approx(stats.t.sf((-delta + margin) / se, n - 1), rel=1e-12, abs=0)
    tost = margin_verdict("mrr", "equivalent", margin, alpha, delta, b_low, b_high, se=se, n=n)
    expected = max(stats.t.sf((delta + margin) / se, n - 1), stats.t.cdf((delta - margin) / se, n - 1))
    assert tost.p_value == pytest.approx(expected, rel=1e-12, abs=0)


def test_bounds_are_null_without_spread_to_estimate():
    low, high = t_bounds([0.1, np.nan, 0.2], [0.01, 0.01, np.nan], [1, 50, 50], 0.05)
    assert np.isnan(low).all() and np.isnan(high).all()
    with pytest.raises(ValueError, match="alpha"):
        t_bounds(0.0, 0.1, 10, 0.6)


def test_non_inferiority_verdicts_by_hand():
    q = stats.t.ppf(0.95, 100)  # 1.66023…, n = 101 pairs
    se = 0.004
    # delta −0.005: lower bound −0.005 − 1.66023·0.004 = −0.011641, upper +0.001641.
    low, high = -0.005 - q * se, -0.005 + q * se
    assert low == pytest.approx(-0.0116409, abs=1e-6)
    ok = margin_verdict("mrr", "non_inferior", 0.02, 0.05, -0.005, low, high, se=se, n=101)
    assert ok.verdict == "non-inferior" and ok.passed
    assert ok.text.startswith("non-inferior within 0.02: lower one-sided 95% bound of b − a = -0.0116")
    # p of H0 "b − a ≤ −0.02": t = (−0.005 + 0.02)/0.004 = 3.75 on 100 df.
    assert ok.p_value == pytest.approx(stats.t.sf(3.75, 100))
    tight = margin_verdict("mrr", "non_inferior", 0.01, 0.05, -0.005, low, high, se=se, n=101)
    assert tight.verdict == "inconclusive" and not tight.passed
    # delta −0.05: the upper bound −0.05 + 0.00664 = −0.0434 is below −0.02: shown worse.
    worse = margin_verdict("mrr", "non_inferior", 0.02, 0.05, -0.05, -0.05 - q * se, -0.05 + q * se)
    assert worse.verdict == "worse" and not worse.passed and worse.p_value is None


def test_for_a_rate_of_bad_events_a_rise_is_the_inferiority():
    # over_refusal_rate rises by 0.005 ± 0.0066: the *upper* bound decides.
    q = stats.t.ppf(0.95, 100)
    v = margin_verdict(
        "over_refusal_rate", "non_inferior", 0.02, 0.05, 0.005, 0.005 - q * 0.004, 0.005 + q * 0.004
    )
    assert v.verdict == "non-inferior" and "upper one-sided 95% bound" in v.text and "+0.0116" in v.text
    assert (
        margin_verdict("over_refusal_rate", "non_inferior", 0.02, 0.05, 0.05, 0.04, 0.06).verdict == "worse"
    )
    assert margin_verdict("mrr", "non_inferior", 0.02, 0.05, 0.05, 0.04, 0.06).verdict == "non-inferior"


def test_equivalence_is_two_one_sided_tests():
    d = np.random.default_rng(3).normal(0.004, 0.05, size=400)
    a = np.full(400, 0.5)
    b = a + d
    result = paired_test(a, b, n_resamples=100, ci=False)
    low, high = t_bounds(result.delta, result.se, result.n, 0.05)
    v = margin_verdict(
        "ndcg@10", "equivalent", 0.02, 0.05, result.delta, low[0], high[0], result.se, result.n
    )
    assert v.verdict == "equivalent" and v.passed and "90% interval" in v.text
    # TOST p against scipy: the larger of the two one-sided tests of d + δ > 0 and d − δ < 0.
    p_low = stats.ttest_1samp(d + 0.02, 0, alternative="greater").pvalue
    p_high = stats.ttest_1samp(d - 0.02, 0, alternative="less").pvalue
    assert v.p_value == pytest.approx(max(p_low, p_high), rel=1e-9)
    straddling = (low[0] + high[0]) / 2  # a margin inside the interval: neither shown in nor out
    assert (
        margin_verdict("mrr", "equivalent", straddling, 0.05, 0.004, low[0], high[0]).verdict
        == "inconclusive"
    )
    assert (
        margin_verdict("mrr", "equivalent", low[0] / 2, 0.05, 0.004, low[0], high[0]).verdict
        == "not equivalent"
    )
    assert margin_verdict("mrr", "equivalent", 0.01, 0.05, 0.1, 0.08, 0.12).verdict == "not equivalent"
    assert margin_verdict("mrr", "equivalent", 0.01, 0.05, None, None, None).verdict is None


# ----------------------------------------------------------------------------------------------
# Gates on a real comparison

N = 60


def _trace(rank_of) -> list[dict]:
    rows = []
    for i in range(N):
        hits = [hit(r, f"filler{i}-{r}.md", (1, 5)) for r in range(1, 11)]
        rank = rank_of(i)
        if rank is not None:
            hits[rank - 1] = hit(rank, f"doc{i}.md", (1, 5))
        rows.append({"query_id": f"q{i:02d}", "hits": hits})
    return rows


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Baseline: gold at rank 1 for every query. Cheaper candidate: the same, except 3 of the 60
    queries now find it at rank 2 (mrr −0.025 overall: 3 × −0.5 / 60)."""
    golden = write_golden(
        tmp_path_factory.mktemp("g") / "golden.yaml",
        [
            {"id": f"q{i:02d}", "query": f"question {i}?", "supports": [{"rel_path": f"doc{i}.md"}]}
            for i in range(N)
        ],
    )
    a = replay_bundle(tmp_path_factory.mktemp("a"), "a", golden, _trace(lambda i: 1))
    b = replay_bundle(tmp_path_factory.mktemp("b"), "b", golden, _trace(lambda i: 2 if i % 20 == 0 else 1))
    return a, b


def test_non_inferiority_gate_on_a_real_comparison(runs):
    a, b = runs
    settings = settings_from_dict(
        {
            "gates": {
                "regression": {
                    "mrr": {"non_inferior": 0.1},
                    "hit@1": {"non_inferior": 0.01},
                    "hit@5": {"equivalent": 0.01},
                }
            }
        }
    )
    report = compare_runs(
        a,
        b,
        options=settings.compare,
        gated=list(settings.regression_gates),
        margins=[
            ("mrr", "non_inferior", 0.1),
            ("hit@1", "non_inferior", 0.01),
            ("hit@5", "equivalent", 0.01),
        ],
    )
    rows = report.per_metric.set_index("metric")
    # By hand: d = −0.5 on 3 of 60 queries, 0 elsewhere: no gain, a loss of 1.5, Σd² = 0.75; the
    # t standard error is sd/√60 with sd = sqrt((3·0.475² + 57·0.025²)/59).
    mrr = rows.loc["mrr"]
    assert (mrr["n_paired"], mrr["gain_sum"], mrr["loss_sum"], mrr["square_sum"]) == (60, 0.0, 1.5, 0.75)
    assert mrr["paired_se"] == pytest.approx(math.sqrt((3 * 0.475**2 + 57 * 0.025**2) / 59) / math.sqrt(60))
    low, high = score_bounds(60, 0.0, 1.5, 0.75, 0.05)
    assert mrr["bound_low"] == pytest.approx(low[0]) and mrr["bound_high"] == pytest.approx(high[0])
    # The score bound −0.0852: 3 of 60 queries lost cannot show "no worse by 0.05" (the t bound,
    # −0.0487, did: the over-confident call this bound replaces) but shows "no worse by 0.1".
    assert mrr["bound_low"] == pytest.approx(-0.08521, abs=1e-5)
    gates = {g.metric: g for g in evaluate_comparison_gates(settings, report)}
    assert gates["mrr"].passed and gates["mrr"].verdict == "non-inferior"
    assert gates["mrr"].value == pytest.approx(low[0]) and gates["mrr"].threshold == 0.1  # δ as configured
    assert "non-inferior within 0.1" in gates["mrr"].reason
    assert "vs margin 0.1 (non-inferior when above −0.1)" in gates["mrr"].reason
    tighter = margin_verdict(
        "mrr", "non_inferior", 0.05, 0.05, mrr["paired_delta"], low[0], high[0], n=60, sums=(0.0, 1.5, 0.75)
    )
    assert tighter.verdict == "inconclusive" and tighter.p_value > 0.05
    # hit@1: 3 of 60 lost: bounds [−0.1297, +0.0101] — not within 0.01, nor shown worse by more
    # than 0.01 (the upper bound is above −0.01) → inconclusive.
    assert not gates["hit@1"].passed and gates["hit@1"].verdict == "inconclusive"
    assert rows.loc["hit@1", "bound_low"] == pytest.approx(-0.12967, abs=1e-5)
    assert rows.loc["hit@1", "bound_high"] == pytest.approx(0.01015, abs=1e-5)
    # hit@5 is identical in both runs: no difference seen, but 60 queries bound it only to ±0.058,
    # so "equivalent within ±0.01" cannot be claimed (the t bound said [0, 0]: equivalent).
    assert rows.loc["hit@5", "bound_high"] == pytest.approx(0.05795, abs=1e-5)
    assert not gates["hit@5"].passed and gates["hit@5"].verdict == "inconclusive"
    lines = {m["metric"]: m for m in report.info["margins"]}
    assert lines["mrr"]["verdict"] == "non-inferior" and lines["hit@1"]["verdict"] == "inconclusive"
    assert lines["mrr"]["p_value"] < 0.05 < lines["hit@1"]["p_value"]
    assert "## Non-inferiority and equivalence" in report.markdown
    assert "**mrr** — b no worse than a by more than 0.1? **non-inferior within 0.1" in report.markdown
    page = render_report_html(report)
    margins = page[page.index('<table class="margins">') :]
    margins = margins[: margins.index("</table>")]
    assert (
        '<th scope=row>mrr</th><td>no worse by more than 0.1</td><td class="better">non-inferior</td>'
        in margins
    )
    assert (
        '<th scope=row>hit@1</th><td>no worse by more than 0.01</td><td class="worse">inconclusive</td>'
        in margins
    )
    assert '<td>within ±0.01</td><td class="worse">inconclusive</td>' in margins


def test_margins_need_a_per_query_metric():
    settings = settings_from_dict({"gates": {"regression": {"retrieval_ms_p95": {"non_inferior": 5}}}})
    with pytest.raises(InputError) as err:
        check_gate_names(settings)
    assert "gates.regression.retrieval_ms_p95.non_inferior" in str(err.value.offenders)
    assert RegressionGateSettings(non_inferior=0.01).max_drop is None  # a margin alone: no default drop
