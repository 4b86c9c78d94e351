"""A comparison across two golden-set versions uses the queries unchanged between them (SPEC §8):
its deltas, paired tests and verdicts are those of the unchanged queries, computed here by hand
from the ranks the replayed runs return; what it dropped, and why, is in its JSON and its report."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from kebab_eval_pipeline.compare.document import comparison_document
from kebab_eval_pipeline.compare.runs import compare_runs
from tests.compare.conftest import hit, replay_bundle, write_golden

N = 12
GOLDEN_A = [
    {"id": f"q{i:02d}", "query": f"question {i}?", "supports": [{"rel_path": f"d{i}.md"}]} for i in range(N)
]
# The first relevant rank each run returns (None: missed), query by query.
RANKS_A = [1, 2, None, 4, 1, 3, 1, 1, 2, None, 1, 2]
RANKS_B = [1, 1, 2, None, 1, 1, 3, 1, None, 1, 1, 2]
CHANGED, ADDED = "q03", "qnew"


def golden_b() -> list[dict]:
    """Version 2: q03's gold moved to another document, and one query added."""
    b = copy.deepcopy(GOLDEN_A)
    b[3]["supports"] = [{"rel_path": "moved.md"}]
    b.append({"id": ADDED, "query": "a new question?", "supports": [{"rel_path": "new.md"}]})
    return b


def hits_at(rank: int | None, path: str) -> list[dict]:
    """Unjudged hits, then ``path`` at ``rank`` (none: unjudged hits only)."""
    noise = [hit(r, f"noise-{r}.md", None) for r in range(1, (rank or 5))]
    return noise + ([hit(rank, path, None)] if rank else [])


def trace(ranks: list[int | None]) -> list[dict]:
    return [{"query_id": f"q{i:02d}", "hits": hits_at(r, f"d{i}.md")} for i, r in enumerate(ranks)]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("golden-versions")
    path_a = write_golden(folder / "v1.yaml", GOLDEN_A)
    path_b = write_golden(folder / "v2.yaml", golden_b())
    trace_b = trace(RANKS_B)
    # b finds q03's new gold at once: a rise that is only the golden change
    trace_b[3] = {"query_id": CHANGED, "hits": hits_at(1, "moved.md")}
    trace_b.append({"query_id": ADDED, "hits": hits_at(1, "new.md")})
    a = replay_bundle(folder, "a", path_a, trace(RANKS_A))
    b = replay_bundle(folder, "b", path_b, trace_b)
    return a, b, compare_runs(a, b)


def by_hand(ranks: list[int | None]) -> dict[str, np.ndarray]:
    """Per-query mrr and hit@k of the unchanged queries (every query but q03)."""
    kept = np.array([np.inf if r is None else r for i, r in enumerate(ranks) if i != 3], dtype=float)
    return {"mrr": 1.0 / kept, **{f"hit@{k}": (kept <= k).astype(float) for k in (1, 3, 5)}}


def test_deltas_and_paired_tests_are_those_of_the_unchanged_queries(runs):
    _, b, report = runs
    rows = report.per_metric.set_index("metric")
    hand_a, hand_b = by_hand(RANKS_A), by_hand(RANKS_B)
    for metric in ("mrr", "hit@1", "hit@3", "hit@5"):
        row = rows.loc[metric]
        assert row["a"] == pytest.approx(round(hand_a[metric].mean(), 4), abs=1e-12), metric
        assert row["b"] == pytest.approx(round(hand_b[metric].mean(), 4), abs=1e-12), metric
        assert row["delta"] == pytest.approx(round(row["b"] - row["a"], 4), abs=1e-12), metric
        assert row["paired_delta"] == pytest.approx((hand_b[metric] - hand_a[metric]).mean(), abs=1e-4)
        assert row["n_paired"] == N - 1, metric
    assert rows.loc["n_queries", "a"] == rows.loc["n_queries", "b"] == N - 1
    # the runs' own numbers (their reports) include q03 and qnew: not what the comparison shows
    assert b.metrics.metrics["mrr"] != rows.loc["mrr", "b"]
    assert report.info["metrics_b"]["mrr"] == rows.loc["mrr", "b"]  # what the regression gates read
    assert report.info["n_common"] == N - 1


def test_verdicts_leave_the_changed_and_added_queries_out(runs):
    _, _, report = runs
    verdicts = report.per_query.set_index("query_id")["verdict"].to_dict()
    assert verdicts.pop(CHANGED) == "gold_changed" and verdicts.pop(ADDED) == "only_b"
    expected = {}
    for i, (ra, rb) in enumerate(zip(RANKS_A, RANKS_B, strict=True)):
        if i == 3:
            continue
        fa, fb = ra is not None, rb is not None
        expected[f"q{i:02d}"] = (
            "win"
            if fb and (not fa or rb < ra)
            else "regression"
            if fa and not fb
            else "loss"
            if fa and fb and rb > ra
            else "draw"
        )
    assert verdicts == expected
    counts = report.info["verdict_counts"]
    assert counts["gold_changed"] == 1 and counts["only_b"] == 1
    assert sum(counts.values()) == N + 1


def test_the_report_says_what_it_dropped_and_why(runs):
    _, _, report = runs
    restriction = {
        "n_compared": N - 1,
        "n_dropped": 2,
        "dropped": {
            "added": 1,
            "removed": 0,
            "question_changed": 0,
            "supports_changed": 1,
            "other_gold_changed": 0,
        },
        "not_restricted": [],
    }
    assert report.info["golden_restriction"] == restriction
    assert comparison_document(report)["golden_restriction"] == restriction
    assert (
        "**Golden-set versions:** The golden sets differ: metrics, paired tests and verdicts use the 11 "
        "queries unchanged in both; 2 dropped (1 added, 1 supports changed)."
    ) in report.markdown
    assert "- gold changed (1): q03 (supports)" in report.markdown


def test_a_golden_change_alone_moves_no_metric(tmp_path):
    """Both runs return the same hits; only q03's gold moved: every delta is 0, nothing regressed."""
    same = trace(RANKS_A)
    a = replay_bundle(tmp_path, "a", write_golden(tmp_path / "v1.yaml", GOLDEN_A), same)
    b = replay_bundle(tmp_path, "b", write_golden(tmp_path / "v2.yaml", golden_b()[:N]), same)
    report = compare_runs(a, b)
    moved = report.per_metric.dropna(subset=["delta"])
    assert len(moved) and (moved["delta"] == 0).all(), moved[moved["delta"] != 0]
    counts = report.info["verdict_counts"]
    assert counts["regression"] == counts["loss"] == counts["win"] == 0
    assert counts["gold_changed"] == 1 and counts["draw"] + counts["not_scored"] == N - 1
    # without the restriction b's own mrr is lower: q03's old hit is no longer gold
    assert b.metrics.metrics["mrr"] < a.metrics.metrics["mrr"]


def test_identical_golden_sets_compare_as_before(tmp_path):
    golden = write_golden(tmp_path / "v1.yaml", GOLDEN_A)
    a = replay_bundle(tmp_path, "a", golden, trace(RANKS_A))
    b = replay_bundle(tmp_path, "b", golden, trace(RANKS_B))
    report = compare_runs(a, b)
    assert "golden_restriction" not in report.info and "Golden-set versions" not in report.markdown
    assert "gold_changed" not in report.info["verdict_counts"] and report.info["n_common"] == N
    rows = report.per_metric.set_index("metric")
    assert (
        rows.loc["mrr", "a"] == a.metrics.metrics["mrr"] and rows.loc["mrr", "b"] == b.metrics.metrics["mrr"]
    )
