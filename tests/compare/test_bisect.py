"""The bisect over a synthetic history with two known change points (tests/compare/bisect_history.py).

Exactly the two steps are found, with the settings that changed there and the queries that
flipped; every step's p-value equals scipy's exact sign-flip permutation test (and, for a 0/1
metric, statsmodels' exact McNemar) on the same pairs, and the adjusted p-values equal statsmodels'
Holm / Benjamini–Hochberg. Bad input is an InputError naming the offender.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import permutation_test
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests

from kebab_eval_pipeline.compare.bisect import (
    CHANGE_COLUMNS,
    DIFF_COLUMNS,
    FLIP_COLUMNS,
    STEP_COLUMNS,
    HistoryRun,
    bisect_history,
    recorded_settings,
)
from kebab_eval_pipeline.compare.bisect_stored import bisect_stored
from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.reporting.bisect_report import bisect_document, render_markdown, render_text
from tests.compare.bisect_history import DROPPED, IDS, OTHER_RUN, QUERIES, RANKS, mrr, write_history


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return write_history(tmp_path_factory.mktemp("bisect-history"))


@pytest.fixture(scope="module")
def result(store):
    return bisect_stored(store, "mrr")


def scipy_sign_flip(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided exact sign-flip p of mean(b − a) (zero differences flip to themselves)."""
    d = b - a
    d = d[d != 0]
    if d.size <= 1:  # scipy needs two observations; one difference's two sign flips tie: p = 1
        return 1.0
    res = permutation_test(
        (d,), lambda x, axis: np.mean(x, axis=axis), permutation_type="samples", n_resamples=np.inf
    )
    return float(res.pvalue)


def column(run: int, fn) -> np.ndarray:
    return np.array([fn(run, q) for q in QUERIES])


def test_tables_are_typed(result):
    for frame, columns in (
        (result.steps, STEP_COLUMNS),
        (result.changes, CHANGE_COLUMNS),
        (result.diffs, DIFF_COLUMNS),
        (result.flips, FLIP_COLUMNS),
    ):
        assert list(frame.columns) == list(columns)
        assert {c: str(t) for c, t in frame.dtypes.items()} == columns


def test_order_is_by_recorded_time_then_run_id(result):
    # Written shuffled; ids not in time order; build-t and build-y share a created_at.
    assert result.info["runs"] == IDS
    assert result.steps["run_a"].tolist() == IDS[:-1] and result.steps["run_b"].tolist() == IDS[1:]
    assert "ordered by start time" in result.info["order"]
    # The run on the other golden set is left out, and the notes say so.
    assert OTHER_RUN not in result.info["runs"]
    assert any("left out: 1 run(s) on other" in note for note in result.info["notes"])


def test_exactly_the_two_change_points_with_their_settings(result):
    assert result.info["n_changes"] == 2
    assert result.changes["step"].tolist() == [3, 6]
    assert result.changes["run_a"].tolist() == ["build-e", "build-y"]
    assert result.changes["run_b"].tolist() == ["build-r", "build-u"]
    assert result.changes["direction"].tolist() == ["worse", "better"]
    assert result.steps["changed"].tolist() == [False, False, True, False, False, True, False]
    fields = dict(zip(result.changes["step"], result.changes["changed_fields"], strict=True))
    # The replayed system differs between runs by what it returned (its trace's hash) every step.
    assert fields[3] == ["chunker_version", "index_version", "system.trace_sha256"]
    assert fields[6] == ["embedding_model", "system.trace_sha256"]
    diffs = result.diffs.set_index(["step", "field"])
    assert tuple(diffs.loc[(3, "chunker_version"), ["value_a", "value_b"]]) == ("c1", "c2")
    assert tuple(diffs.loc[(6, "embedding_model"), ["value_a", "value_b"]]) == ("e1", "e2")
    noise = result.steps[~result.steps["changed"].astype(bool)]
    assert all(f == ["system.trace_sha256"] for f in noise["changed_fields"])


def test_flipped_queries_exact_and_worst_first(result):
    step3 = result.flips[result.flips["step"] == 3]
    assert step3["query_id"].tolist() == [*DROPPED, "q25"]  # ten losses (by id), then the one gain
    assert step3["flip"].tolist() == ["worse"] * 10 + ["better"]
    assert step3["value_a"].tolist() == [1.0] * 10 + [0.5] and step3["value_b"].tolist() == [0.0] * 10 + [1.0]
    step6 = result.flips[result.flips["step"] == 6]
    assert step6["query_id"].tolist() == DROPPED and set(step6["flip"]) == {"better"}
    assert result.changes[["n_flipped", "n_worse", "n_better"]].values.tolist() == [[11, 10, 1], [10, 0, 10]]
    # No flips are listed for steps that are not changes.
    assert set(result.flips["step"]) == {3, 6}


def test_p_values_equal_scipy_and_statsmodels(result):
    for i, step in enumerate(result.steps.to_dict("records")):
        a, b = column(i, mrr), column(i + 1, mrr)
        assert step["n_paired"] == len(QUERIES)
        assert step["delta"] == pytest.approx(np.mean(b - a), abs=1e-12)
        assert step["mean_a"] == pytest.approx(a.mean()) and step["mean_b"] == pytest.approx(b.mean())
        assert step["p_raw"] == pytest.approx(scipy_sign_flip(a, b), rel=1e-12), step["step"]
        assert step["ci_low"] <= step["delta"] <= step["ci_high"]
    # The two drops, worked by hand: 10 × −1 and one +0.5 → 4 of 2^11 sign vectors reach |Σ| ≥ 9.5;
    # 10 × +1 → 2 of 2^10.
    assert result.steps["p_raw"].tolist()[2] == pytest.approx(4 / 2048)
    assert result.steps["p_raw"].tolist()[5] == pytest.approx(2 / 1024)
    holm = multipletests(result.steps["p_raw"], method="holm")[1]
    np.testing.assert_allclose(result.steps["p_adjusted"], holm, rtol=1e-12)
    assert result.changes["p_adjusted"].tolist() == pytest.approx([7 * 2 / 1024] * 2)
    # First vs last: the noise adds up to nothing significant.
    overall = result.info["overall"]
    assert overall["p_value"] == pytest.approx(scipy_sign_flip(column(0, mrr), column(7, mrr)), rel=1e-12)
    assert not overall["significant"] and not result.info["drift"]


def test_binary_metric_is_exact_mcnemar_and_bh(store):
    result = bisect_stored(store, "hit@1", adjust_by="bh")

    def hit1(run: int, q: str) -> float:
        return float(RANKS[run][q] == 1)

    for i, step in enumerate(result.steps.to_dict("records")):
        a, b = column(i, hit1), column(i + 1, hit1)
        n01, n10 = int(((a == 0) & (b == 1)).sum()), int(((a == 1) & (b == 0)).sum())
        expected = 1.0 if n01 + n10 == 0 else mcnemar([[0, n10], [n01, 0]], exact=True).pvalue
        assert step["p_raw"] == pytest.approx(expected, rel=1e-12), step["step"]
        assert step["test"] == "mcnemar_exact"
    bh = multipletests(result.steps["p_raw"], method="fdr_bh")[1]
    np.testing.assert_allclose(result.steps["p_adjusted"], bh, rtol=1e-12)
    assert result.changes["step"].tolist() == [3, 6]
    # hit@1 of q25 went 0 → 1 at step 3: found, the ten others missed.
    step3 = result.flips[result.flips["step"] == 3]
    assert step3["query_id"].tolist() == [*DROPPED, "q25"]


def test_tolerance_and_window(store):
    # q25 moved by exactly 0.5: not beyond a tolerance of 0.5.
    result = bisect_stored(store, "mrr", tolerance=0.5)
    assert result.flips[result.flips["step"] == 3]["query_id"].tolist() == DROPPED
    # A window from a run id up to a date: runs build-r … build-u (2026-03-07 included whole).
    window = bisect_stored(store, "mrr", since="build-r", until="2026-03-07")
    assert window.info["runs"] == ["build-r", "build-t", "build-y", "build-u"]
    assert window.changes["step"].tolist() == [3] and window.changes["run_b"].tolist() == ["build-u"]
    # By golden name: the same 8 runs; by the other set's hash prefix: too few.
    assert bisect_stored(store, "mrr", golden="cmp").info["runs"] == IDS
    with pytest.raises(InputError, match="fewer than 2 runs"):
        bisect_stored(store, "mrr", golden="other")


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"metric": "nope"}, "'nope' is not a metric; known: mrr"),
        ({"metric": "error_rate"}, "'error_rate' has no paired per-query test"),
        ({"metric": "mrr", "since": "2026-13-45"}, "--since"),
        ({"metric": "mrr", "until": "yesterday-ish"}, "neither a stored run id nor a date"),
        ({"metric": "mrr", "alpha": 1.5}, "--alpha"),
        ({"metric": "mrr", "adjust_by": "bonferroni"}, "--adjust"),
        ({"metric": "mrr", "golden": "nosuchset"}, "cmp (sha256"),
        ({"metric": "mrr", "since": "2027-01-01"}, "fewer than 2 runs"),
    ],
)
def test_bad_input_names_the_offender(store, kwargs, expected):
    metric = kwargs.pop("metric")
    with pytest.raises(InputError) as caught:
        bisect_stored(store, metric, **kwargs)
    assert expected in str(caught.value)


def test_renderings(result):
    text = render_text(result, max_flips=10)
    assert "2 changes:" in text and "step 3: build-e → build-r  worse" in text
    assert "chunker_version: c1 → c2" in text and "embedding_model: e1 → e2" in text
    assert "flipped queries: 11 (10 worse, 1 better), worst first:" in text and "… and 1 more" in text
    md = render_markdown(result, max_flips=3)
    assert md.startswith("# Bisect of `mrr` over 8 runs") and "**2 changes** in 7 steps" in md
    assert "## Step 3: `build-e` → `build-r` (worse)" in md and "… and 8 more." in md
    doc = bisect_document(result)
    assert [c["step"] for c in doc["changes"]] == [3, 6]
    assert [f["query_id"] for f in doc["changes"][0]["flips"]] == [*DROPPED, "q25"]  # JSON: uncapped
    assert doc["changes"][1]["settings"][0] == {"field": "embedding_model", "value_a": "e1", "value_b": "e2"}


def test_pure_core_on_hand_made_tables():
    # Three runs of four queries; the core alone (no store): a drift no single step shows.
    tables = [
        pd.DataFrame({"query_id": list("abcd"), "mrr": v})
        for v in ([1, 1, 1, 1], [1, 1, 1, 0.5], [1, 1, 0.5, 0.5])
    ]
    runs = [HistoryRun(f"r{i}", t, {"chunker_version": "c1"}) for i, t in enumerate(tables)]
    out = bisect_history(runs, "mrr")
    assert out.info["n_changes"] == 0 and out.steps["p_raw"].tolist() == [1.0, 1.0]
    assert out.info["overall"]["delta"] == pytest.approx(-0.25) and out.info["overall"]["p_value"] == 0.5
    assert out.diffs.empty and out.flips.empty
    with pytest.raises(ValueError, match="two or more distinct runs"):
        bisect_history(runs[:1], "mrr")


def test_a_change_after_a_failed_run_says_it_is_no_known_good_run():
    # 30 queries: the first run finds 20, the second (which failed a blocking gate) all 30, the
    # third 5 — a drop from a run that is no known-good one; the fourth is another sweep's variant.
    queries = [f"q{i:02d}" for i in range(30)]

    def table(found: int) -> pd.DataFrame:
        return pd.DataFrame({"query_id": queries, "mrr": [1.0] * found + [0.0] * (30 - found)})

    runs = [
        HistoryRun("a", table(20), role="nightly", family="regular", outcome="passed"),
        HistoryRun("b", table(30), role="ci", family="regular", outcome="failed", failed=("gate_mrr_max_p",)),
        HistoryRun("c", table(5), role="ci", family="regular", outcome="passed"),
        HistoryRun("d", table(30), role="sweep-variant (x)", family="sweep x", outcome="passed"),
    ]
    out = bisect_history(runs, "mrr")
    cautions = dict(zip(out.changes["run_b"], out.changes["caution"], strict=True))
    assert cautions == {
        "b": "the run after this step, 'b', failed gate_mrr_max_p",  # better, yet not a clean after
        "c": "the run before this step, 'b', failed gate_mrr_max_p: it is not a known-good run",
        "d": "'c' is ci and 'd' is sweep-variant (x): runs of two role families",
    }
    assert out.steps["outcome_a"].tolist() == ["passed", "failed", "passed"]
    assert out.steps["role_b"].tolist() == ["ci", "ci", "sweep-variant (x)"]
    assert out.info["outcomes"] == ["passed", "failed", "passed", "passed"]
    text = render_text(out)
    assert (
        "  caution: the run before this step, 'b', failed gate_mrr_max_p: it is not a known-good run" in text
    )
    assert "  b  ci                 failed (gate_mrr_max_p)" in text  # the runs list
    md = render_markdown(out)
    assert "> ⚠ **caution**: the run before this step, 'b', failed gate_mrr_max_p" in md
    assert "| `b` | ci | failed (gate_mrr_max_p) |" in md


def test_a_slow_drift_is_caught_by_first_vs_last():
    # Ten runs of twelve queries: each run loses one more query (1 → 0). No step can be a change
    # (one discordant query: p = 1), but first vs last lost nine: exact p = 2 / 2^9.
    queries = [f"q{i:02d}" for i in range(12)]
    runs = [
        HistoryRun(f"r{n}", pd.DataFrame({"query_id": queries, "mrr": [0.0] * n + [1.0] * (12 - n)}))
        for n in range(10)
    ]
    out = bisect_history(runs, "mrr")
    assert out.info["n_changes"] == 0 and out.steps["p_raw"].tolist() == [1.0] * 9
    assert out.info["overall"]["p_value"] == pytest.approx(2 / 512) and out.info["overall"]["delta"] == -0.75
    assert out.info["drift"] is True
    assert "a drift: no single step is a change, but first and last differ" in render_text(out)


def test_recorded_settings_flattens_what_a_run_recorded():
    info = {
        "versions": {"chunker_version": "c1", "embedding_model": None},
        "pipeline_version": "1.0",
        "system": {"kind": "reference", "mode": "lexical", "chunk_size": "800", "coverage": {"chunks": 3.0}},
        "golden": {"name": "g", "sha256": "abc", "path": "/x"},
        "k": [1, 5],
        "match": "auto",
    }
    assert recorded_settings(info) == {
        "chunker_version": "c1",
        "embedding_model": None,
        "pipeline_version": "1.0",
        "system.kind": "reference",
        "system.mode": "lexical",
        "system.chunk_size": "800",
        "golden.name": "g",
        "golden.sha256": "abc",
        "k": "[1, 5]",
        "match": "auto",
    }
