"""Version-aware matching (SPEC §8): exact / fallback_span / fallback_doc, and strictness.

The gold span of ``q1`` is lines 10–13 of docs/a.md (4 lines). A hit on lines 9–11 overlaps it
by 2 lines (2·2 ≥ 4: a ``span`` match); a hit on lines 13–20 overlaps by 1 line — enough for the
runs' own ``auto`` matching (any overlap), not for ``span``. So the same two runs are a *draw*
when their chunkers agree and a *regression* once a chunker change forces span matching.
"""

from __future__ import annotations

import pytest

from kebab_eval_pipeline.compare.fallback import plan_matching, rescore
from kebab_eval_pipeline.compare.runs import compare_bundles
from kebab_eval_pipeline.errors import InputError
from tests.compare.conftest import hit, replay_bundle, write_golden

SPAN_QUERIES = [
    {"id": "q1", "query": "one?", "tags": ["critical"], "supports": [
        {"rel_path": "docs/a.md", "line_start": 10, "line_end": 13}]},
    {"id": "q2", "query": "two?", "supports": [{"rel_path": "docs/b.md", "line_start": 1, "line_end": 4}]},
    {"id": "q3", "query": "three?", "supports": [{"rel_path": "docs/c.md", "line_start": 5, "line_end": 5}]},
]  # fmt: skip


def trace(q1_lines: tuple[int, int] | None, chunker: str, q2_lines=(1, 3), q3_lines=(40, 50)) -> list[dict]:
    return [
        {"query_id": "q1", "hits": [hit(1, "docs/a.md", q1_lines, chunker)]},
        {
            "query_id": "q2",
            "hits": [hit(1, "docs/x.md", (1, 9), chunker), hit(2, "docs/b.md", q2_lines, chunker)],
        },
        {"query_id": "q3", "hits": [hit(1, "docs/c.md", q3_lines, chunker)]},
    ]


@pytest.fixture
def golden(tmp_path):
    return write_golden(tmp_path / "golden.yaml", SPAN_QUERIES)


def test_same_chunker_is_exact_and_uses_each_runs_stored_scores(tmp_path, golden):
    a = replay_bundle(tmp_path, "a", golden, trace((9, 11), "c1"))
    b = replay_bundle(tmp_path, "b", golden, trace((13, 20), "c1"))
    plan = plan_matching(a, b)
    assert (plan.mode, plan.criterion) == ("exact", None)
    report = compare_bundles(a, b)
    v = report.per_query.set_index("query_id")
    # Own (auto) matching: any overlap counts, so both runs find q1 at rank 1.
    assert (v.loc["q1", "verdict"], v.loc["q1", "a_rank"], v.loc["q1", "b_rank"]) == ("draw", 1, 1)
    assert report.info["chunker_version_match"] == "exact"
    assert report.info["matching_criterion"] == "auto" and report.info["fallback_note"] == ""
    row = report.per_metric.set_index("metric").loc["mrr"]
    assert (row["a"], row["b"]) == (a.metrics.metrics["mrr"], b.metrics.metrics["mrr"])


def test_chunker_change_with_spans_everywhere_falls_back_to_span(tmp_path, golden):
    a = replay_bundle(tmp_path, "a", golden, trace((9, 11), "c1"))
    b = replay_bundle(tmp_path, "b", golden, trace((13, 20), "c2"))
    plan = plan_matching(a, b)
    assert (plan.mode, plan.criterion) == ("fallback_span", "span")
    assert "'c1' vs 'c2'" in plan.note
    report = compare_bundles(a, b)
    v = report.per_query.set_index("query_id")
    # Under span matching b's hit covers 1 of q1's 4 gold lines: a regression.
    assert (v.loc["q1", "verdict"], v.loc["q1", "a_rank"]) == ("regression", 1)
    assert v.loc["q1", "b_rank"] is None or str(v.loc["q1", "b_rank"]) == "<NA>"
    # q2: the gold span 1–4 vs hit lines 1–3 covers 3 of 4 lines in both runs: same rank 2.
    assert (v.loc["q2", "verdict"], v.loc["q2", "a_rank"], v.loc["q2", "b_rank"]) == ("draw", 2, 2)
    # q3: both hits miss line 5 entirely.
    assert (v.loc["q3", "verdict"], v.loc["q3", "note"]) == ("draw", "both missed")
    info = report.info
    assert info["chunker_version_match"] == "fallback_span" and info["matching_criterion"] == "span"
    assert any(w.startswith("fallback_span:") for w in info["warnings"])
    # The deltas are of the re-scored runs, not of each run's own (auto) metrics.
    metrics = report.per_metric.set_index("metric")
    assert a.metrics.metrics["mrr"] == b.metrics.metrics["mrr"] == pytest.approx(round(1.5 / 3, 4))
    assert metrics.loc["hit@1", "a"] == pytest.approx(round(1 / 3, 4)) and metrics.loc["hit@1", "b"] == 0.0
    assert metrics.loc["mrr", "a"] == pytest.approx(round((1 + 0.5) / 3, 4))
    assert metrics.loc["mrr", "b"] == pytest.approx(round(0.5 / 3, 4))
    assert metrics.loc["mrr", "delta"] == pytest.approx(round(0.5 / 3 - 1.5 / 3, 4))
    scores, summary = rescore(b, "span")
    assert summary.metrics["mrr"] == pytest.approx(metrics.loc["mrr", "b"])
    assert scores.set_index("query_id").loc["q1", "hit@1"] == 0.0
    assert "fallback_span" in report.markdown


def test_a_support_without_lines_falls_back_to_doc(tmp_path):
    queries = [*SPAN_QUERIES, {"id": "q4", "query": "four?", "supports": [{"rel_path": "docs/d.md"}]}]
    golden = write_golden(tmp_path / "golden.yaml", queries)
    rows_a = [*trace((9, 11), "c1"), {"query_id": "q4", "hits": [hit(1, "docs/d.md", (1, 2), "c1")]}]
    rows_b = [*trace((13, 20), "c2"), {"query_id": "q4", "hits": [hit(1, "docs/d.md", (70, 80), "c2")]}]
    a = replay_bundle(tmp_path, "a", golden, rows_a)
    b = replay_bundle(tmp_path, "b", golden, rows_b)
    plan = plan_matching(a, b)
    assert (plan.mode, plan.criterion) == ("fallback_doc", "doc")
    assert "1 of 4 positive gold supports have no document + line span" in plan.note
    v = compare_bundles(a, b).per_query.set_index("query_id")
    # By document only, both runs find q1 (and q3) at rank 1.
    assert (v.loc["q1", "verdict"], v.loc["q3", "verdict"], v.loc["q4", "verdict"]) == (
        "draw",
        "draw",
        "draw",
    )
    assert v.loc["q3", "a_rank"] == 1


def test_hits_without_lines_fall_back_to_doc(tmp_path, golden):
    a = replay_bundle(tmp_path, "a", golden, trace((9, 11), "c1"))
    b = replay_bundle(tmp_path, "b", golden, trace(None, "c2"))
    plan = plan_matching(a, b)
    assert plan.mode == "fallback_doc"
    assert "1 hit(s) of run 'b' carry no line range" in plan.note


def test_strict_chunker_version_refuses_with_both_versions_named(tmp_path, golden):
    a = replay_bundle(tmp_path, "a", golden, trace((9, 11), "c1"))
    b = replay_bundle(tmp_path, "b", golden, trace((9, 11), "c2"))
    with pytest.raises(InputError) as info:
        compare_bundles(a, b, strict_chunker_version=True)
    text = str(info.value)
    assert "--strict-chunker-version" in text and "'c1' vs 'c2'" in text
    # Same chunkers: strictness has nothing to refuse.
    assert compare_bundles(a, a, strict_chunker_version=True).info["chunker_version_match"] == "exact"
