"""Version-aware matching (SPEC §8): exact / fallback_anchor / fallback_span / fallback_doc, and
strictness.

The gold span of ``q1`` is lines 10–13 of docs/a.md (4 lines). A hit on lines 9–11 overlaps it
by 2 lines (2·2 ≥ 4: a ``span`` match); a hit on lines 13–20 overlaps by 1 line — enough for the
all-fields rule (``match: fields``: any overlap), not for ``span``, which is what ``match: auto``
resolves to here (every support names a file and lines, the hits carry lines).
"""

from __future__ import annotations

import pytest

from kebab_eval_pipeline.compare.fallback import plan_matching, rescore
from kebab_eval_pipeline.compare.runs import compare_runs
from kebab_eval_pipeline.foundation.errors import InputError
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
    assert a.scores.info["match_resolved"] == b.scores.info["match_resolved"] == "span"
    report = compare_runs(a, b)
    v = report.per_query.set_index("query_id")
    # Own (auto → span) matching: b's hit covers 1 of q1's 4 gold lines, a's covers 2.
    assert (v.loc["q1", "verdict"], v.loc["q1", "a_rank"]) == ("regression", 1)
    assert report.info["chunker_version_match"] == "exact"
    assert report.info["matching_criterion"] == "auto" and report.info["fallback_note"] == ""
    assert report.info["rescored"] == []
    row = report.per_metric.set_index("metric").loc["mrr"]
    assert (row["a"], row["b"]) == (a.metrics.metrics["mrr"], b.metrics.metrics["mrr"])
    # Under the all-fields rule any overlap counts: a draw.
    fa = replay_bundle(tmp_path, "fa", golden, trace((9, 11), "c1"), match="fields")
    fb = replay_bundle(tmp_path, "fb", golden, trace((13, 20), "c1"), match="fields")
    v = compare_runs(fa, fb).per_query.set_index("query_id")
    assert (v.loc["q1", "verdict"], v.loc["q1", "a_rank"], v.loc["q1", "b_rank"]) == ("draw", 1, 1)


def test_chunker_change_of_runs_scored_by_span_keeps_their_stored_scores(tmp_path, golden):
    a = replay_bundle(tmp_path, "a", golden, trace((9, 11), "c1"))
    b = replay_bundle(tmp_path, "b", golden, trace((13, 20), "c2"))
    plan = plan_matching(a, b)
    assert (plan.mode, plan.criterion, plan.rescore_a, plan.rescore_b) == (
        "fallback_span",
        "span",
        False,
        False,
    )
    assert "'c1' vs 'c2'" in plan.note and "both runs were scored by span" in plan.note
    report = compare_runs(a, b)
    assert report.info["rescored"] == []
    metrics = report.per_metric.set_index("metric")
    # The comparison's a and b columns are each run's own report.
    for name in ("mrr", "hit@1", "ndcg@10", "recall@5"):
        assert metrics.loc[name, "a"] == a.metrics.metrics[name]
        assert metrics.loc[name, "b"] == b.metrics.metrics[name]
    assert metrics.loc["mrr", "a"] == pytest.approx(round((1 + 0.5) / 3, 4))
    assert metrics.loc["mrr", "b"] == pytest.approx(round(0.5 / 3, 4))


def test_chunker_change_with_spans_everywhere_falls_back_to_span(tmp_path, golden):
    # Runs scored by the all-fields rule: span is the strongest chunk-independent criterion the
    # golden set (no heading paths) and the hits support, so both are re-scored by it.
    a = replay_bundle(tmp_path, "a", golden, trace((9, 11), "c1"), match="fields")
    b = replay_bundle(tmp_path, "b", golden, trace((13, 20), "c2"), match="fields")
    plan = plan_matching(a, b)
    assert (plan.mode, plan.criterion) == ("fallback_span", "span")
    assert (plan.rescore_a, plan.rescore_b) == (True, True)
    assert "'c1' vs 'c2'" in plan.note and "run a and run b re-scored by span" in plan.note
    report = compare_runs(a, b)
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
    assert info["rescored"] == ["a", "b"]
    assert any(w.startswith("fallback_span:") for w in info["warnings"])
    # The deltas are of the re-scored runs, not of each run's own (fields) metrics.
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
    assert a.scores.info["match_by_query"] == {"span": 3, "doc": 1}  # auto: mixed
    plan = plan_matching(a, b)
    assert (plan.mode, plan.criterion) == ("fallback_doc", "doc")
    assert "not anchor: 4 of 4 positive gold supports have no document + heading path" in plan.note
    assert "not span: 1 of 4 positive gold supports have no document + line range" in plan.note
    v = compare_runs(a, b).per_query.set_index("query_id")
    # By document only, both runs find q1 (and q3) at rank 1.
    assert (v.loc["q1", "verdict"], v.loc["q3", "verdict"], v.loc["q4", "verdict"]) == (
        "draw",
        "draw",
        "draw",
    )
    assert v.loc["q3", "a_rank"] == 1


def test_hits_without_lines_fall_back_to_doc(tmp_path, golden):
    a = replay_bundle(tmp_path, "a", golden, trace((9, 11), "c1"))
    # b: 1 of 4 hits carries lines (fewer than half): its own auto resolves to doc.
    b = replay_bundle(tmp_path, "b", golden, trace(None, "c2", q2_lines=None, q3_lines=None))
    assert (a.scores.info["match_resolved"], b.scores.info["match_resolved"]) == ("span", "doc")
    plan = plan_matching(a, b)
    assert plan.mode == "fallback_doc"
    assert "3 of 4 hits of run 'b' carry no line range" in plan.note
    # b was already scored by doc: only a is re-scored.
    assert (plan.rescore_a, plan.rescore_b) == (True, False)
    assert "run b keeps its stored doc scores; run a re-scored by doc" in plan.note
    report = compare_runs(a, b)
    assert report.per_metric.set_index("metric").loc["mrr", "b"] == b.metrics.metrics["mrr"]


ANCHOR_QUERIES = [
    {"id": f"q{i}", "query": f"{i}?", "supports": [
        {"rel_path": f"docs/{i}.md", "heading_path": ["Guide", f"Part {i}"],
         "line_start": 10, "line_end": 12},
    ]}
    for i in range(1, 5)
]  # fmt: skip


def anchor_trace(chunker: str, ranks: dict[str, int]) -> list[dict]:
    """Hits without line ranges (like Haystack's splitter): the gold section of each query at the
    given rank (0: absent), other files elsewhere; chunk ids differ by chunker."""
    rows = []
    for i in range(1, 5):
        q, where = f"q{i}", ranks.get(f"q{i}", 0)
        out = []
        for rank in range(1, 4):
            if rank == where:
                out.append(hit(rank, f"docs/{i}.md", None, chunker, heading_path=["Guide", f"Part {i}", "x"]))
            elif rank == 1:  # same file, another section: a document match only
                out.append(hit(rank, f"docs/{i}.md", None, chunker, heading_path=["Guide", "Intro"]))
            else:
                out.append(hit(rank, f"docs/other{rank}.md", None, chunker, heading_path=["Other"]))
        rows.append({"query_id": q, "hits": out})
    return rows


def test_chunker_change_of_runs_scored_by_anchor_keeps_anchor(tmp_path):
    golden = write_golden(tmp_path / "golden.yaml", ANCHOR_QUERIES)
    a = replay_bundle(tmp_path, "a", golden, anchor_trace("size-200", {"q1": 2, "q2": 2, "q3": 3}))
    b = replay_bundle(tmp_path, "b", golden, anchor_trace("size-400", {"q1": 2, "q2": 3, "q4": 2}))
    # The hits carry no lines: auto chose anchor (and said why) in both runs.
    assert a.scores.info["match_by_query"] == b.scores.info["match_by_query"] == {"anchor": 4}
    assert [w["field"] for w in a.scores.info["matching_warnings"]] == ["lines"]
    plan = plan_matching(a, b)
    assert (plan.mode, plan.criterion, plan.rescore_a, plan.rescore_b) == (
        "fallback_anchor",
        "anchor",
        False,
        False,
    )
    assert "'size-200' vs 'size-400'" in plan.note and "both runs were scored by anchor" in plan.note
    report = compare_runs(a, b)
    info = report.info
    assert (info["chunker_version_match"], info["matching_criterion"], info["rescored"]) == (
        "fallback_anchor",
        "anchor",
        [],
    )
    metrics = report.per_metric.set_index("metric")
    # a: ranks 2, 2, 3, none → mrr (1/2 + 1/2 + 1/3) / 4; b: 2, 3, none, 2 → the same mrr, but
    # q3 is lost and q4 found.
    assert (
        metrics.loc["mrr", "a"]
        == a.metrics.metrics["mrr"]
        == pytest.approx(round((1 / 2 + 1 / 2 + 1 / 3) / 4, 4))
    )
    assert (
        metrics.loc["mrr", "b"]
        == b.metrics.metrics["mrr"]
        == pytest.approx(round((1 / 2 + 1 / 3 + 1 / 2) / 4, 4))
    )
    for name in ("hit@1", "hit@3", "ndcg@10", "precision@3"):
        assert metrics.loc[name, "a"] == a.metrics.metrics[name]
    v = report.per_query.set_index("query_id")
    assert v.loc["q3", "verdict"] == "regression" and v.loc["q4", "verdict"] == "win"
    assert (v.loc["q2", "a_rank"], v.loc["q2", "b_rank"]) == (2, 3)
    # By document alone (the old fallback) every query would find its file at rank 1: all draws.
    docs = compare_runs(
        replay_bundle(tmp_path, "da", golden, anchor_trace("size-200", {"q1": 2}), match="doc"),
        replay_bundle(tmp_path, "db", golden, anchor_trace("size-400", {"q4": 2}), match="doc"),
    )
    assert docs.info["chunker_version_match"] == "fallback_doc"
    assert set(docs.per_query["verdict"]) == {"draw"}
    assert "fallback_anchor" in report.markdown
    assert "(per-query matching criterion: `anchor`; both runs' own stored scores)" in report.markdown


def test_anchor_chosen_from_gold_and_hits_rescores_only_the_run_scored_otherwise(tmp_path):
    golden = write_golden(tmp_path / "golden.yaml", ANCHOR_QUERIES)
    a = replay_bundle(tmp_path, "a", golden, anchor_trace("size-200", {"q1": 2, "q2": 2}), match="doc")
    b = replay_bundle(tmp_path, "b", golden, anchor_trace("size-400", {"q1": 3}))
    plan = plan_matching(a, b)
    assert (plan.mode, plan.rescore_a, plan.rescore_b) == ("fallback_anchor", True, False)
    assert "the golden set and both runs' hits support it" in plan.note
    report = compare_runs(a, b)
    assert "`anchor`; re-scored: run a; run b's own stored scores)" in report.markdown
    metrics = report.per_metric.set_index("metric")
    assert metrics.loc["mrr", "a"] == pytest.approx(round((1 / 2 + 1 / 2) / 4, 4))  # re-scored by anchor
    assert a.metrics.metrics["mrr"] == 1.0  # its own doc scores: every file at rank 1
    assert metrics.loc["mrr", "b"] == b.metrics.metrics["mrr"] == pytest.approx(round(1 / 3 / 4, 4))


def test_strict_chunker_version_refuses_with_both_versions_named(tmp_path, golden):
    a = replay_bundle(tmp_path, "a", golden, trace((9, 11), "c1"))
    b = replay_bundle(tmp_path, "b", golden, trace((9, 11), "c2"))
    with pytest.raises(InputError) as info:
        compare_runs(a, b, strict_chunker_version=True)
    text = str(info.value)
    assert "--strict-chunker-version" in text and "'c1' vs 'c2'" in text
    # Same chunkers: strictness has nothing to refuse.
    assert compare_runs(a, a, strict_chunker_version=True).info["chunker_version_match"] == "exact"
