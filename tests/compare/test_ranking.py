"""Ranking N runs (``compare/ranking.py``, ``compare/letters.py``, ``compare/common_plan.py``).

The hand-worked example: three runs A, B, C over ten queries q0 … q9.

hit@5 (binary: exact McNemar, two-sided binomial on the discordant pairs)::

    A  1 1 1 1 1 1 1 1 1 1   mean 1.0  rank 1
    B  1 1 0 0 0 0 0 0 0 0   mean 0.2  rank 3
    C  1 1 1 1 1 1 1 1 1 0   mean 0.9  rank 2

    A–B: 8 discordant, all A: p = 2·(1/2)^8 = 0.0078125
    A–C: 1 discordant:        p = 1
    B–C: 7 discordant, all C: p = 2·(1/2)^7 = 0.015625
    Holm over the 3 pairs: sorted 0.0078125·3 = 0.0234375, 0.015625·2 = 0.03125, 1·1 = 1
    α = 0.05: A–B and B–C significant → letters A a, C a, B b; A and C beat B (row 3: ³)
    α = 0.025: only A–B significant → A a, C ab, B b; only A beats B

mrr (graded: the sign-flip test, exact over all 2^m sign vectors of the m non-zero differences)::

    A  1 1 1   1   .5 .5 1 1 1 1     mean 0.9    rank 2
    B  1 1 .5  .5  .5 .5 1 1 1 1     mean 0.8    rank 3
    C  1 1 1   1   1  1  1 1 1 .25   mean 0.925  rank 1

    B−A: −.5, −.5               T = 1;    |±.5 ±.5| ≥ 1 in 2 of 4 sign vectors:  p = 0.5
    C−A: +.5, +.5, −.75         T = .25;  every one of the 8 reaches .25:          p = 1
    C−B: +.5 ×4, −.75           T = 1.25; k of the four .5 positive gives k − 2 ± .75:
         k=0: 2 of 2, k=1: 1 of 2 (×4), k=2: 0, k=3: 1 of 2 (×4), k=4: 2 of 2 → 12 of 32: p = 0.375
    Holm: 0.375·3 → 1, 0.5·2 = 1, 1 → all 1: one letter a for all
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from statsmodels.stats.multitest import multipletests

from kebab_eval_pipeline.compare.common_plan import plan_common_matching
from kebab_eval_pipeline.compare.letters import better_than, letter_names, letters, shares_letter
from kebab_eval_pipeline.compare.ranking import PAIR_COLUMNS, RUN_COLUMNS, rank_runs, rank_scores
from kebab_eval_pipeline.compare.ranking_html import CHART_ID, render_html
from kebab_eval_pipeline.compare.ranking_report import ranking_document, render_markdown, superscript
from kebab_eval_pipeline.compare.runs import compare_runs
from kebab_eval_pipeline.compare.significance import paired_test
from kebab_eval_pipeline.foundation.errors import InputError
from tests.compare.conftest import hit, replay_bundle, write_golden

IDS = [f"q{i}" for i in range(10)]
HIT5 = {
    "A": [1, 1, 1, 1, 1, 1, 1, 1, 1, 1],
    "B": [1, 1, 0, 0, 0, 0, 0, 0, 0, 0],
    "C": [1, 1, 1, 1, 1, 1, 1, 1, 1, 0],
}
MRR = {
    "A": [1, 1, 1, 1, 0.5, 0.5, 1, 1, 1, 1],
    "B": [1, 1, 0.5, 0.5, 0.5, 0.5, 1, 1, 1, 1],
    "C": [1, 1, 1, 1, 1, 1, 1, 1, 1, 0.25],
}


def frames(order=("A", "B", "C"), shuffle: bool = False) -> dict[str, pd.DataFrame]:
    out = {}
    for run in order:
        frame = pd.DataFrame({"query_id": IDS, "hit@5": HIT5[run], "mrr": MRR[run]})
        out[run] = frame.sample(frac=1, random_state=1).reset_index(drop=True) if shuffle else frame
    return out


def pair(ranking, metric: str, a: str, b: str) -> dict:
    rows = ranking.pairs[
        (ranking.pairs["metric"] == metric) & (ranking.pairs["run_a"] == a) & (ranking.pairs["run_b"] == b)
    ]
    assert len(rows) == 1
    return rows.iloc[0].to_dict()


def run_row(ranking, metric: str, run: str) -> dict:
    rows = ranking.per_run[(ranking.per_run["metric"] == metric) & (ranking.per_run["run_id"] == run)]
    assert len(rows) == 1
    return rows.iloc[0].to_dict()


# ---------------------------------------------------------------------------------------------
# The hand-worked example
# ---------------------------------------------------------------------------------------------


def test_hand_worked_binary_metric():
    ranking = rank_scores(frames(), ["hit@5", "mrr"])
    assert list(ranking.per_run.columns) == list(RUN_COLUMNS)
    assert list(ranking.pairs.columns) == list(PAIR_COLUMNS)
    assert ranking.info["order"] == ["A", "C", "B"]  # hit@5's ranking, the first metric
    expected_run = {
        "A": (1.0, 1, "a", ["B"], [3]),
        "C": (0.9, 2, "a", ["B"], [3]),
        "B": (0.2, 3, "b", [], []),
    }
    for run, (mean, rank, letter, beats, rows) in expected_run.items():
        r = run_row(ranking, "hit@5", run)
        assert r["mean"] == pytest.approx(mean, abs=1e-12)
        assert (r["rank"], r["letters"], r["better_than"], r["better_than_rows"], r["n"]) == (
            rank,
            letter,
            beats,
            rows,
            10,
        )
    expected_pair = {
        ("A", "B"): (-0.8, 0.0078125, 0.0234375, True, "A"),
        ("A", "C"): (-0.1, 1.0, 1.0, False, None),
        ("B", "C"): (0.7, 0.015625, 0.03125, True, "C"),
    }
    for (a, b), (delta, p, adjusted, significant, better) in expected_pair.items():
        row = pair(ranking, "hit@5", a, b)
        assert row["delta"] == pytest.approx(delta, abs=1e-12)
        assert row["p_value"] == pytest.approx(p, rel=1e-12)
        assert row["p_adjusted"] == pytest.approx(adjusted, rel=1e-12)
        assert row["significant"] is significant or row["significant"] == significant
        assert (None if pd.isna(row["better"]) else row["better"]) == better
        assert row["test"] == "mcnemar_exact" and row["n"] == 10
    assert ranking.info["n_pairs"] == 3 and "Holm over the 3 pairwise tests" in ranking.info["family"]


def test_hand_worked_alpha_changes_the_letters():
    ranking = rank_scores(frames(), ["hit@5"], alpha=0.025)
    assert {run: run_row(ranking, "hit@5", run)["letters"] for run in "ABC"} == {
        "A": "a",
        "C": "ab",
        "B": "b",
    }
    assert run_row(ranking, "hit@5", "A")["better_than"] == ["B"]
    assert run_row(ranking, "hit@5", "C")["better_than"] == []
    assert bool(pair(ranking, "hit@5", "B", "C")["significant"]) is False


def test_hand_worked_graded_metric():
    ranking = rank_scores(frames(), ["mrr"])
    assert ranking.info["order"] == ["C", "A", "B"]
    for run, mean, rank in (("C", 0.925, 1), ("A", 0.9, 2), ("B", 0.8, 3)):
        r = run_row(ranking, "mrr", run)
        assert (r["mean"], r["rank"], r["letters"], r["better_than"]) == (pytest.approx(mean), rank, "a", [])
    for (a, b), (delta, p) in {
        ("A", "B"): (-0.1, 0.5),
        ("A", "C"): (0.025, 1.0),
        ("B", "C"): (0.125, 0.375),
    }.items():
        row = pair(ranking, "mrr", a, b)
        assert row["delta"] == pytest.approx(delta, abs=1e-12)
        assert row["p_value"] == pytest.approx(p, abs=1e-12)
        assert row["p_adjusted"] == 1.0 and row["test"] == "randomization"
        assert "exact over all" in row["note"]


def test_results_do_not_depend_on_row_order_and_run_order_only_orients_pairs():
    base = rank_scores(frames(), ["hit@5", "mrr"])
    shuffled = rank_scores(frames(shuffle=True), ["hit@5", "mrr"])
    pd.testing.assert_frame_equal(base.per_run, shuffled.per_run)
    pd.testing.assert_frame_equal(base.pairs, shuffled.pairs)
    # Given as C, B, A: the same means, ranks, letters and p-values; each pair is the other way round.
    reverse = rank_scores(frames(("C", "B", "A")), ["hit@5", "mrr"])
    assert reverse.info["order"] == base.info["order"]
    key = ["metric", "run_id"]
    cols = ["mean", "rank", "letters", "better_than", "ci_low", "ci_high"]
    pd.testing.assert_frame_equal(
        base.per_run.sort_values(key)[cols].reset_index(drop=True),
        reverse.per_run.sort_values(key)[cols].reset_index(drop=True),
    )
    for metric in ("hit@5", "mrr"):
        for a, b in itertools.combinations("ABC", 2):
            forward, backward = pair(base, metric, a, b), pair(reverse, metric, b, a)
            assert forward["p_value"] == backward["p_value"]
            assert forward["p_adjusted"] == backward["p_adjusted"]
            assert forward["delta"] == pytest.approx(-backward["delta"], abs=1e-12)


def test_drifted_golden_sets_rank_the_common_queries_and_count_the_dropped():
    scores = frames()
    scores["B"] = pd.concat(
        [scores["B"].iloc[2:], pd.DataFrame({"query_id": ["x1"], "hit@5": [1], "mrr": [1.0]})],
        ignore_index=True,
    )
    ranking = rank_scores(scores, ["hit@5"])
    assert ranking.info["n_common"] == 8
    assert ranking.info["dropped"] == {"A": 2, "B": 1, "C": 2}
    # Over q2 … q9: A 8/8, B 0/8, C 7/8.
    assert run_row(ranking, "hit@5", "A")["mean"] == 1.0
    assert run_row(ranking, "hit@5", "B")["mean"] == 0.0
    assert run_row(ranking, "hit@5", "C")["mean"] == pytest.approx(7 / 8)
    assert pair(ranking, "hit@5", "A", "B")["p_value"] == pytest.approx(2 / 2**8)


def test_null_scores_are_left_out_for_every_run_and_lower_is_better_ranks_first():
    scores = {
        run: pd.DataFrame(
            {
                "query_id": IDS,
                # over_refusal_rate: lower is better; q9 is undefined in run Y only
                "over_refusal": pd.array(values, dtype="Float64"),
            }
        )
        for run, values in {
            "X": [0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
            "Y": [1, 1, 1, 1, 1, 1, 1, 1, 1, None],
            "Z": [1, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        }.items()
    }
    ranking = rank_scores(scores, ["over_refusal_rate"])
    # Complete rows q0 … q8: X 0/9, Y 9/9, Z 1/9; lower is better.
    assert [run_row(ranking, "over_refusal_rate", r)["rank"] for r in "XYZ"] == [1, 3, 2]
    assert run_row(ranking, "over_refusal_rate", "X")["mean"] == 0.0
    assert run_row(ranking, "over_refusal_rate", "Z")["mean"] == pytest.approx(1 / 9)
    assert run_row(ranking, "over_refusal_rate", "X")["n"] == 9
    xy = pair(ranking, "over_refusal_rate", "X", "Y")
    assert (xy["n"], xy["delta"], xy["p_value"]) == (9, 1.0, pytest.approx(2 / 2**9))
    assert xy["better"] == "X"  # Y's rate is higher: worse
    assert ranking.info["order"] == ["X", "Z", "Y"]


def test_ties_share_the_better_rank():
    scores = frames()
    scores["D"] = scores["A"].copy()
    ranking = rank_scores(scores, ["hit@5"])
    assert run_row(ranking, "hit@5", "A")["rank"] == run_row(ranking, "hit@5", "D")["rank"] == 1
    assert run_row(ranking, "hit@5", "C")["rank"] == 3
    assert ranking.info["order"] == ["A", "D", "C", "B"]  # ties in the given order
    assert pair(ranking, "hit@5", "A", "D")["p_value"] == 1.0
    assert ranking.info["n_pairs"] == 6


def test_metrics_that_cannot_be_ranked_are_named_together():
    with pytest.raises(InputError) as info:
        rank_scores(frames(), ["bogus", "error_rate", "judged@5", "hit@5", "ndcg@10", "mrr@"])
    text = str(info.value)
    assert "unknown metric 'bogus'" in text
    assert "'error_rate' cannot be ranked: not tested: an operational rate" in text
    assert "'judged@5' cannot be ranked: neither higher nor lower is better" in text
    assert "'ndcg@10' is not scored by run(s) A, B, C" in text
    assert "malformed metric name 'mrr@'" in text
    assert len(info.value.offenders) == 5  # hit@5 is fine


def test_default_metrics_are_those_the_runs_have():
    scores = {run: f.assign(**{"ndcg@5": 0.5, "ndcg@20": 0.5}) for run, f in frames().items()}
    ranking = rank_scores(scores)
    # mrr; ndcg@10 absent: the smallest ndcg cut-off all runs have; hit@5
    assert ranking.info["metrics"] == ["mrr", "ndcg@5", "hit@5"]


def test_holm_matches_statsmodels_on_five_runs():
    rng = np.random.default_rng(3)
    n = 200
    base = rng.random(n)
    scores = {
        f"r{i}": pd.DataFrame(
            {
                "query_id": [f"q{k}" for k in range(n)],
                "mrr": np.clip(base + rng.normal(0.03 * i, 0.15, n), 0, 1).round(4),
                "hit@5": (rng.random(n) < 0.6 + 0.05 * i).astype(float),
            }
        )
        for i in range(5)
    }
    ranking = rank_scores(scores, ["mrr", "hit@5"], n_resamples=2000)
    for metric in ("mrr", "hit@5"):
        pairs = ranking.pairs[ranking.pairs["metric"] == metric]
        assert len(pairs) == 10
        reject, expected, _, _ = multipletests(pairs["p_value"].to_numpy(), alpha=0.05, method="holm")
        np.testing.assert_allclose(pairs["p_adjusted"].to_numpy(), expected, rtol=1e-12, atol=0)
        assert pairs["significant"].to_numpy(dtype=bool).tolist() == reject.tolist()
        # The letters say exactly which pairs are significant.
        rows = ranking.per_run[ranking.per_run["metric"] == metric].set_index("run_id")
        for r in pairs.itertuples():
            share = bool(set(rows.loc[r.run_a, "letters"]) & set(rows.loc[r.run_b, "letters"]))
            assert share is not bool(r.significant)
    assert ranking.per_run.loc[ranking.per_run["metric"] == "mrr", "letters"].nunique() > 1  # not trivial


# ---------------------------------------------------------------------------------------------
# Compact letter display
# ---------------------------------------------------------------------------------------------


def symmetric(n: int, bits: list[bool]) -> np.ndarray:
    sig = np.zeros((n, n), dtype=bool)
    sig[np.triu_indices(n, 1)] = bits
    return sig | sig.T


@st.composite
def significance_matrices(draw):
    n = draw(st.integers(0, 9))
    bits = draw(st.lists(st.booleans(), min_size=n * (n - 1) // 2, max_size=n * (n - 1) // 2))
    order = draw(st.permutations(list(range(n))))
    return symmetric(n, bits), order


@given(significance_matrices())
def test_letters_represent_exactly_the_non_significant_pairs(case):
    # Piepho (2004): insert-and-absorb (and the sweep) give every run ≥ 1 letter, and two runs
    # share a letter if and only if they are not significantly different — for every pattern.
    sig, order = case
    n = sig.shape[0]
    display = letters(sig, order)
    assert len(display) == n and all(display)
    shared = shares_letter(display)
    for i, j in itertools.combinations(range(n), 2):  # the brute-force definition, pair by pair
        assert shared[i, j] == (not sig[i, j]), (i, j, display)
    # Every letter is used, letters are consecutive, none is a subset of another (absorbed).
    columns = {name: frozenset(i for i in range(n) if name in display[i]) for name in set().union(*display)}
    assert sorted(columns) == sorted(letter_names(len(columns)))
    assert not any(a < b for a, b in itertools.permutations(columns.values(), 2))
    if n:
        assert "a" in display[order[0]]  # the best run gets "a"


def test_letters_by_hand():
    # Four runs best first 0..3; 0–2, 0–3 and 1–3 significant: 0 a, 1 ab, 2 bc, 3 c.
    sig = symmetric(4, [False, True, True, False, True, False])  # pairs 01 02 03 12 13 23
    assert letters(sig) == [["a"], ["a", "b"], ["b", "c"], ["c"]]
    assert letters(np.zeros((3, 3), dtype=bool)) == [["a"], ["a"], ["a"]]
    assert letters(~np.eye(3, dtype=bool)) == [["a"], ["b"], ["c"]]
    # Four runs where 0–1 and 2–3 differ: no chain covers them; two letters each.
    sig = symmetric(4, [True, False, False, False, False, True])
    display = letters(sig)
    assert shares_letter(display).tolist() == (~sig | np.eye(4, dtype=bool)).tolist()
    assert [len(x) for x in display] == [2, 2, 2, 2]
    with pytest.raises(ValueError, match="symmetric"):
        letters(np.triu(np.ones((3, 3), dtype=bool), 1))


def test_letter_names_and_superscripts():
    names = letter_names(28)
    assert names[:3] == ["a", "b", "c"] and names[25:] == ["z", "aa", "ab"]
    assert superscript([2, 3]) == "²³" and superscript([2, 10]) == "²˒¹⁰" and superscript([]) == ""
    better = np.array([[False, True, True], [False, False, False], [False, True, False]])
    assert better_than(symmetric(3, [True, False, True]), better) == [[1], [], [1]]


# ---------------------------------------------------------------------------------------------
# Outputs
# ---------------------------------------------------------------------------------------------


def test_markdown_html_and_json_carry_every_number_and_escape_run_ids():
    scores = frames()
    scores["<b>|x"] = scores.pop("C")
    ranking = rank_scores(scores, ["hit@5", "mrr"])
    markdown = render_markdown(ranking)
    assert "| 1 | `A` |" in markdown and "1.0000 (1) a ³" in markdown
    assert "`<b>\\|x`" in markdown and "<b>|" not in markdown.replace("`<b>\\|x`", "")
    assert "| `A` | `B` | 1.0000 | 0.2000 | -0.8000 |" in markdown and "0.0078 | 0.0234 | `A` |" in markdown
    html = render_html(ranking)
    assert "&lt;b&gt;|x" in html and "<b>|x" not in html
    assert f'id="{CHART_ID}"' in html and html.count("<svg") == 1
    assert '<sup class="beats">3</sup>' in html
    doc = ranking_document(ranking)
    ab = next(p for p in doc["pairs"] if (p["metric"], p["run_a"], p["run_b"]) == ("hit@5", "A", "B"))
    assert (ab["p_value"], ab["p_adjusted"], ab["significant"], ab["better"]) == (
        0.0078125,
        0.0234375,
        True,
        "A",
    )
    assert ab["ci_low"] <= ab["delta"] <= ab["ci_high"]
    a = next(r for r in doc["per_run"] if (r["metric"], r["run_id"]) == ("hit@5", "A"))
    assert a["better_than"] == ["B"] and a["better_than_rows"] == [3] and a["ci_low"] == a["ci_high"] == 1.0


def test_html_escapes_every_user_string_once():
    """Warnings, system labels, chunker, golden set and hash (an attribute too), creation time,
    the matching note and the adjustment family: each escaped by the template, never twice."""
    hostile = "<b>\"x\"&'y'</b>"
    escaped = "&lt;b&gt;&quot;x&quot;&amp;&#x27;y&#x27;&lt;/b&gt;"
    ranking = rank_scores(frames(), ["hit@5", "mrr"])
    ranking.info["warnings"] = [hostile]
    ranking.info["family"] = hostile
    ranking.info["matching"] = {"mode": hostile, "note": hostile}
    ranking.info["runs_detail"] = {
        run: {
            "system": {"kind": hostile, "mode": hostile},
            "chunker_version": hostile,
            "golden": {"name": hostile, "sha256": hostile},
            "created_at": hostile,
        }
        for run in ranking.info["order"]
    }
    html = render_html(ranking)
    assert "<b>" not in html and "&amp;amp;" not in html and "&amp;lt;" not in html
    assert f"<li>{escaped}</li>" in html  # warnings
    assert f"p-values adjusted by {escaped};" in html
    assert f"<td>{escaped} {escaped}</td><td><code>{escaped}</code></td>" in html  # system label, chunker
    assert f'<code title="{escaped}">' in html  # golden sha256 on hover
    assert f"Matching: <code>{escaped}</code> — {escaped}</p>" in html


# ---------------------------------------------------------------------------------------------
# Stored runs: matching, and the pairs equal `compare A B`
# ---------------------------------------------------------------------------------------------

SPAN_QUERIES = [
    {
        "id": f"q{i}",
        "query": f"question {i}?",
        "supports": [{"rel_path": f"docs/{i}.md", "line_start": 10, "line_end": 13}],
    }
    for i in range(12)
]


def span_trace(found: list[int], chunker: str) -> list[dict]:
    """Query i finds its gold span at rank ``found[i]`` (0: not at all) behind decoys."""
    out = []
    for i, rank in enumerate(found):
        hits = [hit(r, f"docs/other{r}.md", (1, 5), chunker) for r in range(1, 4)]
        if rank:
            hits.insert(rank - 1, hit(rank, f"docs/{i}.md", (9, 12), chunker))
        for r, h in enumerate(hits, start=1):
            h["rank"] = r
        out.append({"query_id": f"q{i}", "hits": hits})
    return out


@pytest.fixture
def stored(tmp_path):
    golden = write_golden(tmp_path / "golden.yaml", SPAN_QUERIES)
    return {
        "a": replay_bundle(tmp_path, "a", golden, span_trace([1] * 10 + [2, 2], "c1")),
        "b": replay_bundle(tmp_path, "b", golden, span_trace([1, 2, 0, 3, 1, 2, 0, 0, 1, 3, 2, 0], "c1")),
        "c": replay_bundle(tmp_path, "c", golden, span_trace([1, 1, 2, 2, 1, 1, 0, 1, 1, 1, 1, 1], "c2")),
        "a-fields": replay_bundle(tmp_path, "a-fields", golden, span_trace([1] * 12, "c3"), match="fields"),
    }


def test_pairs_equal_compare_runs_across_chunkers(stored):
    runs = [stored["a"], stored["b"], stored["c"]]
    plan = plan_common_matching(runs)
    assert (plan.mode, plan.criterion, plan.rescored) == ("fallback_span", "span", ())
    ranking = rank_runs(runs, ["mrr", "hit@1", "ndcg@10"])
    assert ranking.info["matching"]["mode"] == "fallback_span"
    assert any(w.startswith("fallback_span:") for w in ranking.info["warnings"])
    for x, y in itertools.combinations(runs, 2):
        report = compare_runs(x, y).per_metric.set_index("metric")
        for metric in ("mrr", "hit@1", "ndcg@10"):
            row = pair(ranking, metric, x.run_id, y.run_id)
            assert row["p_value"] == report.loc[metric, "p_value"], (x.run_id, y.run_id, metric)
            assert round(row["delta"], 4) == report.loc[metric, "paired_delta"]
            assert round(row["ci_low"], 4) == report.loc[metric, "ci_low"]
            assert row["n"] == report.loc[metric, "n_paired"]
    # a finds every gold span, at rank 1 for ten queries: mrr 11/12, first.
    assert run_row(ranking, "mrr", "a")["mean"] == pytest.approx((10 + 0.5 + 0.5) / 12)
    assert run_row(ranking, "mrr", "a")["rank"] == 1


def test_one_criterion_for_all_runs_rescores_the_others(stored):
    runs = [stored["a"], stored["b"], stored["a-fields"]]
    plan = plan_common_matching(runs)
    # a and b were scored by span (auto), a-fields by the all-fields rule: re-scored by span.
    assert (plan.mode, plan.criterion, plan.rescored) == ("fallback_span", "span", ("a-fields",))
    assert "re-scored by span: a-fields" in plan.note
    ranking = rank_runs(runs, ["mrr"])
    assert ranking.info["matching"]["rescored"] == ["a-fields"]
    assert run_row(ranking, "mrr", "a-fields")["mean"] == 1.0
    with pytest.raises(InputError) as info:
        rank_runs(runs, ["mrr"], strict_chunker_version=True)
    assert len(info.value.offenders) == 3 and "'c3'" in str(info.value)
    # Same chunker everywhere: exact, stored scores.
    assert plan_common_matching([stored["a"], stored["b"]]).mode == "exact"


def test_repeated_runs_fractional_hits_rank_with_the_randomization_test():
    """A repeated run's hit@5 is a mean over repeats (0.5, 0.75, …): its pairs take the randomization
    test, as `compare A B` does, while a pair of two once-asked runs keeps exact McNemar."""
    runs = frames()
    runs["R"] = runs["A"].assign(**{"hit@5": [0.75 if i % 2 else 1.0 for i in range(len(IDS))]})
    ranking = rank_scores(runs, ["hit@5"], n_resamples=2000)
    assert pair(ranking, "hit@5", "A", "R")["test"] == "randomization"
    assert pair(ranking, "hit@5", "A", "B")["test"] == "mcnemar_exact"
    expected = paired_test(
        runs["A"]["hit@5"].to_numpy(float), runs["R"]["hit@5"].to_numpy(float), binary=False, n_resamples=2000
    )
    assert pair(ranking, "hit@5", "A", "R")["p_value"] == pytest.approx(expected.p_value)
