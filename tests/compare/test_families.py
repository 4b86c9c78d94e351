"""Multiple testing in comparisons: Holm over the gated metrics, BH over metrics × slices.

Hand-worked tables first; then the property the correction exists for, on a true null built from
two real runs of the reference system: for every query, its two score rows are swapped between the
runs with probability ½ (the pairs are exchangeable, so every paired test's null holds exactly). Over
many swaps, the share of reports flagging *anything* after adjustment stays at α (within Monte
Carlo error) while the raw p-values flag something in most reports.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.multitest import multipletests

from kebab_eval_pipeline.chain import pipeline
from kebab_eval_pipeline.chain.settings import settings_from_dict
from kebab_eval_pipeline.compare.comparison_tables import comparison_tables
from kebab_eval_pipeline.compare.deltas import ADJUSTED_COLUMNS
from kebab_eval_pipeline.compare.families import with_adjusted_p
from kebab_eval_pipeline.compare.settings import CompareSettings
from kebab_eval_pipeline.metrics.aggregate import aggregate_metrics, breakdowns


def _per_metric(p: dict[str, float]) -> pd.DataFrame:
    return pd.DataFrame({"metric": list(p), "p_value": list(p.values())})


def test_holm_over_gated_and_bh_over_the_table_by_hand():
    per_metric = _per_metric({"mrr": 0.01, "hit@5": 0.04, "ndcg@10": 0.045, "n_queries": np.nan})
    per_slice = pd.DataFrame(
        {
            "dimension": ["lang", "lang"],
            "value": ["en", "ko"],
            "metric": ["mrr", "mrr"],
            "p_value": [0.001, 0.5],
        }
    )
    pm, ps, info = with_adjusted_p(per_metric, per_slice, gated=["mrr", "hit@5"])
    pm = pm.set_index("metric")
    # Holm over {mrr 0.01, hit@5 0.04}: 2·0.01 = 0.02, then max(0.02, 1·0.04) = 0.04.
    assert pm.loc["mrr", "p_holm"] == pytest.approx(0.02)
    assert pm.loc["hit@5", "p_holm"] == pytest.approx(0.04)
    assert math.isnan(pm.loc["ndcg@10", "p_holm"])
    # BH over all five tests (m = 5), sorted 0.001, 0.01, 0.04, 0.045, 0.5: m/i·p = 0.005, 0.025,
    # 0.0667, 0.05625, 0.5; the step-up minimum from the top gives 0.005, 0.025, 0.05625, 0.05625, 0.5.
    assert pm.loc["ndcg@10", "p_bh"] == pytest.approx(0.05625)
    assert pm.loc["hit@5", "p_bh"] == pytest.approx(0.05625)
    assert pm.loc["mrr", "p_bh"] == pytest.approx(0.025)
    assert ps["p_bh"].tolist() == pytest.approx([0.005, 0.5])
    # The marks read Holm for gated metrics, BH for the rest.
    assert pm.loc["mrr", "p_adjusted"] == pytest.approx(0.02) and pm.loc["mrr", "adjusted_by"] == "holm"
    assert (
        pm.loc["ndcg@10", "p_adjusted"] == pytest.approx(0.05625) and pm.loc["ndcg@10", "adjusted_by"] == "bh"
    )
    assert pd.isna(pm.loc["n_queries", "adjusted_by"])
    assert pm.loc["mrr", "significance"] == "*" and pm.loc["hit@5", "significance"] == "*"
    assert pm.loc["ndcg@10", "significance"] == ""  # raw 0.045 would have been marked
    assert ps["significance"].tolist() == ["**", ""]
    assert info["holm"] == {"metrics": ["mrr", "hit@5"], "size": 2, "default": False}
    assert info["bh"] == {"size": 5, "metrics": 3, "slices": 2}


def test_raw_marks_when_configured_and_headline_family_by_default():
    per_metric = _per_metric({"mrr": 0.03, "map": 0.02})
    pm, _, info = with_adjusted_p(
        per_metric, pd.DataFrame(columns=["dimension", "value", "metric"]), (), "raw"
    )
    assert pm["significance"].tolist() == ["*", "*"]
    assert info["holm"]["default"] is True and info["holm"]["metrics"] == ["mrr"]  # map is not a headline
    assert set(ADJUSTED_COLUMNS) <= set(pm.columns)
    with pytest.raises(ValueError, match="adjusted"):
        with_adjusted_p(per_metric, pd.DataFrame(), (), "bonferroni")


def test_table_adjustment_matches_statsmodels_on_a_real_comparison(two_runs):
    (qa, ma, ba), (qb, mb, bb) = two_runs
    options = CompareSettings(resamples=2000)
    pm, ps, _ = comparison_tables(qa, qb, ma, mb, ba, bb, options, gated=["mrr", "hit@5", "ndcg@10"])
    p_all = np.concatenate([pm["p_value"].to_numpy(float), ps["p_value"].to_numpy(float)])
    ok = ~np.isnan(p_all)
    expected = multipletests(p_all[ok], method="fdr_bh")[1]
    got = np.concatenate([pm["p_bh"].to_numpy(float), ps["p_bh"].to_numpy(float)])[ok]
    assert got == pytest.approx(expected, abs=1e-12)
    gated = pm.set_index("metric").loc[["mrr", "hit@5", "ndcg@10"]]
    assert gated["p_holm"].to_numpy() == pytest.approx(multipletests(gated["p_value"], method="holm")[1])
    assert ps["p_value"].notna().sum() > 10  # the demo has real slices to test


# ----------------------------------------------------------------------------------------------
# The null simulation


@pytest.fixture(scope="module")
def two_runs():
    """Two real runs on the demo golden set, scored by the real pipeline: the reference system
    (lexical), and the same hits in a seeded random order within each query (a much worse system,
    so that most queries' scores differ between the runs) — their per-query scores, metrics and
    breakdowns."""
    settings = settings_from_dict({"system": {"kind": "reference"}})
    golden = pipeline.load_golden_artifact(settings)
    retrieval = pipeline.retrieve(settings, golden)
    hits = retrieval.results.hits
    key = np.random.default_rng(7).random(len(hits))
    order = np.lexsort((key, hits["query_id"].astype(str).to_numpy()))
    shuffled = hits.iloc[order].copy()
    shuffled["rank"] = (shuffled.groupby("query_id", sort=False).cumcount() + 1).astype(hits["rank"].dtype)
    shuffled = shuffled.sort_values(["query_id", "rank"], kind="stable").reset_index(drop=True)
    worse = replace(retrieval, results=replace(retrieval.results, hits=shuffled))
    out = []
    for run in (retrieval, worse):
        scores = pipeline.score(settings, golden, run).scores
        out.append((scores, aggregate_metrics(scores), breakdowns(scores)))
    assert (out[0][0]["mrr"] != out[1][0]["mrr"]).sum() > 40  # a real difference to swap
    return out


class _Swapper:
    """Each query's row of a and of b exchanged with probability ½ (query ids and labels kept).

    ``b`` is aligned to ``a``'s queries and columns once, and both stacked in one frame: a swap is
    then one ``take`` per run (row i of the first run is ``a``'s, or ``b``'s where swapped)."""

    def __init__(self, a: pd.DataFrame, b: pd.DataFrame) -> None:
        b = b.set_index("query_id").loc[a["query_id"]].reset_index()[list(a.columns)]
        self.n = len(a)
        self.both = pd.concat([a, b], ignore_index=True)

    def __call__(self, rng: np.random.Generator) -> tuple[pd.DataFrame, pd.DataFrame]:
        swap = rng.random(self.n) < 0.5
        rows = np.arange(self.n)
        from_b = rows + self.n
        a2 = self.both.take(np.where(swap, from_b, rows)).reset_index(drop=True)
        b2 = self.both.take(np.where(swap, rows, from_b)).reset_index(drop=True)
        return a2, b2


def test_null_false_alarm_rate_is_controlled_by_adjustment(two_runs):
    (qa, _, _), (qb, _, _) = two_runs
    alpha, n_sim = 0.05, 240
    # 2,000 resamples: a Monte Carlo p as small as 1/2001 can still pass BH's first step (α/m).
    options = CompareSettings(resamples=2000, alpha=alpha, min_queries=1)
    gated = ["mrr", "hit@5", "ndcg@10"]
    rng = np.random.default_rng(20261127)
    any_raw = any_holm = any_bh = any_report = 0
    n_tests = []
    swapped = _Swapper(qa, qb)
    for i in range(n_sim):
        a, b = swapped(rng)
        pm, ps, info = comparison_tables(
            a,
            b,
            aggregate_metrics(a),
            aggregate_metrics(b),
            breakdowns(a),
            breakdowns(b),
            options.model_copy(update={"seed": i}),
            gated,
        )
        raw = np.concatenate([pm["p_value"].to_numpy(float), ps["p_value"].to_numpy(float)])
        any_raw += bool(np.nanmin(raw) < alpha)
        any_holm += bool((pm["p_holm"] < alpha).any())
        any_bh += bool((pm["p_bh"] < alpha).any() or (ps["p_bh"] < alpha).any())
        any_report += bool((pm["significance"] != "").any() or (ps["significance"] != "").any())
        n_tests.append(info["bh"]["size"])
    # Monte Carlo error of a share near α over n_sim reports: 3 standard errors of slack.
    slack = 3 * math.sqrt(alpha * (1 - alpha) / n_sim)
    print(
        f"null reports with any flag, over {n_sim} swaps ({np.mean(n_tests):.0f} tests each): "
        f"raw {any_raw / n_sim:.3f}, Holm (gated) {any_holm / n_sim:.3f}, BH (table) {any_bh / n_sim:.3f}, "
        f"report marks {any_report / n_sim:.3f}"
    )
    assert any_holm / n_sim <= alpha + slack
    assert any_bh / n_sim <= alpha + slack
    assert any_report / n_sim <= alpha + slack
    assert any_raw / n_sim >= 4 * alpha  # uncorrected: a false alarm in a large share of reports


def test_a_slice_p_value_is_mcnemar_recounted_by_hand(two_runs):
    """One slice row's p, re-derived outside the comparison: the discordant pairs of hit@5 among the
    slice's queries counted with pandas, then scipy's exact binomial test."""
    from scipy.stats import binomtest

    (qa, ma, ba), (qb, mb, bb) = two_runs
    _, ps, _ = comparison_tables(qa, qb, ma, mb, ba, bb, CompareSettings(resamples=2000))
    tested = ps[(ps["metric"] == "hit@5") & ps["p_value"].notna() & (ps["dimension"] == "lang")]
    assert len(tested)
    for row in tested.itertuples():
        ids = qb.loc[qb["lang"].astype(str) == row.value, "query_id"]
        a = qa.set_index("query_id").loc[ids, "hit@5"].astype(float)
        b = qb.set_index("query_id").loc[ids, "hit@5"].astype(float)
        ok = a.notna() & b.notna()
        n01, n10 = int(((a == 0) & (b == 1) & ok).sum()), int(((a == 1) & (b == 0) & ok).sum())
        expected = 1.0 if n01 + n10 == 0 else binomtest(n01, n01 + n10, 0.5).pvalue
        assert row.n_paired == int(ok.sum()) and row.p_value == pytest.approx(expected)
