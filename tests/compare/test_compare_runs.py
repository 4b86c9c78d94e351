"""The comparison of two real (replayed) runs: significance, marks, warnings, slices and files."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from statsmodels.stats.power import TTestPower

from kebab_eval_pipeline.compare.document import comparison_document, render_json, report_files
from kebab_eval_pipeline.compare.runs import compare_runs, no_baseline
from kebab_eval_pipeline.compare.settings import CompareSettings
from kebab_eval_pipeline.metrics import catalogue
from tests.compare.conftest import hit, replay_bundle, write_golden
from tests.compare.margin_simulation import exact_mcnemar_power

N = 40


def queries(n: int = N) -> list[dict]:
    return [
        {
            "id": f"q{i:02d}",
            "query": f"question {i}?",
            "category": "even" if i % 2 == 0 else "odd",
            "tags": ["critical"] if i < 4 else [],
            "supports": [{"rel_path": f"doc{i}.md", "line_start": 1, "line_end": 5}],
        }
        for i in range(n)
    ]


def found_at(
    rank_of: dict[int, int | None], n: int = N, error_on: frozenset[int] = frozenset()
) -> list[dict]:
    """A trace where query i finds its gold document at ``rank_of[i]`` (None: never) behind fillers."""
    rows = []
    for i in range(n):
        rank = rank_of.get(i)
        hits = [hit(r, f"filler{i}-{r}.md", (1, 5)) for r in range(1, 11)]
        if rank is not None:
            hits[rank - 1] = hit(rank, f"doc{i}.md", (1, 5))
        row = {"query_id": f"q{i:02d}", "hits": hits}
        if i in error_on:
            row = {"query_id": f"q{i:02d}", "hits": [], "error": "ranker crashed"}
        rows.append(row)
    return rows


@pytest.fixture(scope="module")
def golden(tmp_path_factory):
    return write_golden(tmp_path_factory.mktemp("golden") / "golden.yaml", queries())


@pytest.fixture(scope="module")
def weak(tmp_path_factory, golden):
    """Baseline: gold at rank 4 for most queries, missed for every fifth."""
    ranks = {i: (None if i % 5 == 0 else 4) for i in range(N)}
    return replay_bundle(tmp_path_factory.mktemp("weak"), "weak", golden, found_at(ranks))


@pytest.fixture(scope="module")
def strong(tmp_path_factory, golden):
    """Candidate: gold at rank 1 everywhere except two queries that now error."""
    ranks = dict.fromkeys(range(N), 1)
    return replay_bundle(
        tmp_path_factory.mktemp("strong"), "strong", golden, found_at(ranks, error_on=frozenset({1, 3}))
    )


def test_identical_runs_have_zero_deltas_and_p_one(weak):
    report = compare_runs(weak, weak)
    tested = report.per_metric[report.per_metric["p_value"].notna()]
    assert len(tested) > 20  # every per-query mean of the catalogue
    assert (tested["p_value"] == 1.0).all()
    assert (tested["paired_delta"] == 0.0).all() and (tested["ci_low"] == 0.0).all()
    assert (tested["ci_high"] == 0.0).all() and (tested["significance"] == "").all()
    known = report.per_metric[report.per_metric["delta"].notna()]
    assert (known["delta"] == 0.0).all() and (known["direction"] == "same").all()
    assert report.info["verdict_counts"]["draw"] == N and report.info["chunker_version_match"] == "exact"


def test_a_planted_large_effect_is_significant_and_marked(weak, strong):
    report = compare_runs(weak, strong)
    m = report.per_metric.set_index("metric")
    assert m.loc["mrr", "p_value"] < 0.01 and m.loc["mrr", "test"] == "randomization"
    assert m.loc["hit@1", "p_value"] < 0.01 and m.loc["hit@1", "test"] == "mcnemar_exact"
    # 38 of 40 queries go from miss/rank 4 to rank 1; the two errors go from found to missed.
    assert m.loc["hit@1", "significance"] == "***" and m.loc["hit@1", "direction"] == "better"
    assert m.loc["mrr", "ci_low"] > 0.5 and m.loc["mrr", "ci_high"] <= 1.0
    # error_rate rose from 0 to 2/40: a rise of a bad-event rate leans worse, but it has no paired
    # test (not a per-query mean), so it is not called "worse": no direction, a hollow mark.
    assert m.loc["error_rate", "delta"] == pytest.approx(0.05) and m.loc["error_rate", "leaning"] == "worse"
    assert pd.isna(m.loc["error_rate", "p_value"]) and pd.isna(m.loc["error_rate", "direction"])
    counts = report.info["verdict_counts"]
    # Baseline misses every fifth query (8): those are wins, as are the 30 rank 4 → 1; the
    # two erroring queries were found by the baseline (rank 4) and are now missed.
    assert (counts["win"], counts["regression"], counts["loss"], counts["draw"]) == (38 - 0, 2, 0, 0)
    md = report.markdown
    assert "| hit@1 |" in md and "\\*\\*\\*" in md and "▲" in md and "▽" in md
    assert "| error_rate | 0.0000 | 0.0500 | +0.0500 ▽ |" in md


def test_same_seed_reproduces_and_the_seed_is_recorded(weak, strong):
    first = compare_runs(weak, strong, options=CompareSettings(seed=7))
    again = compare_runs(weak, strong, options=CompareSettings(seed=7))
    pd.testing.assert_frame_equal(first.per_metric, again.per_metric)
    pd.testing.assert_frame_equal(first.per_query, again.per_query)
    other = compare_runs(weak, strong, options=CompareSettings(seed=8, resamples=500))
    assert first.info["seed"] == 7 and other.info["seed"] == 8 and other.info["resamples"] == 500
    # The exact McNemar p-value does not depend on the seed; the bootstrap CI's draws do.
    m1, m2 = first.per_metric.set_index("metric"), other.per_metric.set_index("metric")
    assert m1.loc["hit@1", "p_value"] == m2.loc["hit@1", "p_value"]
    assert "seed 8" in m2.loc["mrr", "test_note"]


def test_too_few_queries_warns_and_marks_every_test(weak, strong):
    report = compare_runs(weak, strong, options=CompareSettings(min_queries=50))
    assert report.info["warnings"][0].startswith("only 40 queries in common (< min_queries 50)")
    tested = report.per_metric[report.per_metric["n_paired"].fillna(0) > 0]
    assert len(tested) > 20 and tested["test_note"].str.startswith("only ").all()
    assert tested["p_value"].notna().all()  # still tested and shown; the warning says how much to trust it
    assert "†" in report.markdown and "> ⚠ only 40 queries in common" in report.markdown
    # 40 ≥ the default 30 (judgement coverage, low in this fixture, is not what this test is about)
    assert not compare_runs(weak, strong, options=CompareSettings(min_judged=0)).info["warnings"]


def test_per_slice_deltas_and_labels(weak, strong):
    report = compare_runs(weak, strong)
    s = report.per_slice
    odd = s[(s["dimension"] == "category") & (s["value"] == "odd") & (s["metric"] == "hit@1")].iloc[0]
    a_scores = weak.scores.scores.set_index("query_id")
    b_scores = strong.scores.scores.set_index("query_id")
    odd_ids = [f"q{i:02d}" for i in range(1, N, 2)]
    assert odd["a"] == pytest.approx(round(a_scores.loc[odd_ids, "hit@1"].mean(), 4))
    assert odd["b"] == pytest.approx(round(b_scores.loc[odd_ids, "hit@1"].mean(), 4))
    assert odd["delta"] == pytest.approx(round(odd["b"] - odd["a"], 4)) and odd["n_a"] == 20
    v = report.per_query.set_index("query_id")
    assert list(v.loc["q01", "tags"]) == ["critical"] and v.loc["q01", "category"] == "odd"
    assert v.loc["q01", "verdict"] == "regression"
    assert "## Delta by category" in report.markdown


def test_json_document_is_strict_and_complete(weak, strong):
    report = compare_runs(weak, strong)
    text = render_json(report, gates=[])
    doc = json.loads(text)  # allow_nan=False at write: this is strict JSON
    for key in (
        "run_a",
        "run_b",
        "chunker_version_match",
        "warnings",
        "per_metric",
        "per_query",
        "per_slice",
    ):
        assert key in doc
    assert doc["gates"] == [] and len(doc["per_query"]) == N
    mrr = next(r for r in doc["per_metric"] if r["metric"] == "mrr")
    assert mrr["p_value"] < 0.01 and mrr["significance"] in ("**", "***")
    err = next(r for r in doc["per_metric"] if r["metric"] == "error_rate")
    assert err["p_value"] is None  # null, never NaN
    assert comparison_document(report)["run_b"] == "strong"


def test_report_files_for_a_comparison_and_for_no_baseline(weak, strong):
    files = report_files(compare_runs(weak, strong))
    assert set(files) == {"comparison.md", "comparison.html", "comparison.json"}
    assert (
        files["comparison.html"].startswith(b"<!DOCTYPE html") or b"<html" in files["comparison.html"][:200]
    )
    assert json.loads(files["comparison.json"])["run_a"] == "weak"
    alone = no_baseline("strong", "no baseline: first run", strong.metrics)
    files = report_files(alone)
    assert json.loads(files["comparison.json"])["run_a"] is None
    assert b"no baseline: first run" in files["comparison.html"]


def test_every_output_states_what_the_comparison_could_detect(tmp_path, golden, weak):
    """A mixed change (3 queries up to rank 1, 2 down to a miss) is not significant; every output
    then says which change the 40 queries could have detected — the minimum detectable effect,
    re-derived here with statsmodels' power solver from the per-query differences."""
    ranks = {i: (None if i % 5 == 0 else 4) for i in range(N)}
    ranks.update({1: 1, 2: 1, 3: 1, 6: None, 7: None})
    mixed = replay_bundle(tmp_path / "mixed", "mixed", golden, found_at(ranks))
    report = compare_runs(weak, mixed)
    m = report.per_metric.set_index("metric")
    column = catalogue.metric_column("mrr")
    a = weak.scores.scores.set_index("query_id")[column]
    b = mixed.scores.scores.set_index("query_id")[column]
    d = (b - a.reindex(b.index)).dropna()
    holm = report.info["families"]["holm"]
    assert "mrr" in holm["metrics"] and m.loc["mrr", "adjusted_by"] == "holm"
    effect = TTestPower().solve_power(nobs=len(d), alpha=0.05 / holm["size"], power=0.8)
    mde = m.loc["mrr", "mde"]
    assert mde == pytest.approx(effect * d.std(ddof=1), rel=1e-3)
    assert m.loc["mrr", "mde_alpha"] == pytest.approx(0.05 / holm["size"])
    # hit@1 is 0/1: its effect is the one exact McNemar finds 4 times in 5 (brute-force power).
    h = m.loc["hit@1"]
    changed = (h["gain_sum"] + h["loss_sum"]) / h["n_paired"]
    level = 0.05 / (holm["size"] if h["adjusted_by"] == "holm" else report.info["families"]["bh"]["size"])
    assert h["mde_alpha"] == pytest.approx(level)
    assert exact_mcnemar_power(int(h["n_paired"]), changed, h["mde"], level) == pytest.approx(0.8, abs=1e-6)
    # Not significant: no direction, the delta's leaning only.
    assert m.loc["mrr", "significance"] == "" and pd.isna(m.loc["mrr", "direction"])
    assert m.loc["mrr", "leaning"] in ("better", "worse")
    md = report.markdown
    assert "| 95% CI | MDE | sig | test |" in md
    row = next(line for line in md.splitlines() if line.startswith("| mrr |"))
    assert f"±{mde:.4f}" in row and ("△" in row or "▽" in row) and "▲" not in row and "▼" not in row
    assert 'Not significant is not "no change"' in md
    assert f"mrr: a true change of ±{mde:.4f} or more would show as significant 4 times in 5" in md
    doc = comparison_document(report)
    mrr = next(r for r in doc["per_metric"] if r["metric"] == "mrr")
    assert (
        mrr["mde"] == pytest.approx(mde)
        and mrr["direction"] is None
        and mrr["leaning"] == m.loc["mrr", "leaning"]
    )
    page = report_files(report)["comparison.html"].decode()
    assert "<th class=num>MDE</th>" in page and f"±{mde:.4f}" in page


def test_a_ci_that_disagrees_with_its_p_value_is_marked(tmp_path, golden, weak):
    """Five of 40 queries lose their hit and none gains one: exact McNemar p = 2·(½)^5 = 0.0625,
    while almost every bootstrap resample holds one of the five losses, so the 95% CI excludes 0.
    The report marks that CI ‡ and says the p-value decides; a row where they agree is unmarked."""
    ranks = {i: (None if i % 5 == 0 or i in (1, 2, 3, 4, 6) else 4) for i in range(N)}
    fewer = replay_bundle(tmp_path / "fewer", "fewer", golden, found_at(ranks))
    report = compare_runs(weak, fewer)
    hit = report.per_metric.set_index("metric").loc["hit@5"]
    assert hit["p_value"] == pytest.approx(0.0625) and hit["ci_high"] < 0
    row = next(line for line in report.markdown.splitlines() if line.startswith("| hit@5 |"))
    assert f"[{hit['ci_low']:+.4f}, {hit['ci_high']:+.4f}]‡" in row
    assert "‡: the bootstrap CI and the p-value disagree about 0" in report.markdown
    same = next(line for line in report.markdown.splitlines() if line.startswith("| hit@1 |"))
    assert "‡" not in same
