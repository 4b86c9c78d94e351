"""recency_correctness and scope_miss_rate on hand-made runs: one query per situation.

Every recency query has two notes, old.md (support 0) and new.md (support 1): the timeline is
oldest first, so new.md is the newer evidence. Each query retrieves both notes and cites some.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest

from kebab_eval_pipeline.golden.model import GoldenQuery, Support
from kebab_eval_pipeline.metrics.aggregate import aggregate_metrics, build_query_scores
from kebab_eval_pipeline.metrics.answers import answer_scores
from kebab_eval_pipeline.metrics.matching import match_hits
from kebab_eval_pipeline.systems.base import OUTCOME_COLUMNS

N = math.nan
TIMELINE = [Support(rel_path="old.md"), Support(rel_path="new.md")]
OLD = {"doc_path": "old.md"}
NEW = {"doc_path": "new.md"}


def _q(qid: str, rule: str | None, **kw) -> GoldenQuery:
    kw.setdefault("supports", TIMELINE)
    return GoldenQuery(id=qid, query="which is current?", recency_rule=rule, **kw)


# query, the answer (text, refused, citations) or None for no answer / "error", expected recency_ok
CASES: list[tuple[GoldenQuery, object, float]] = [
    (_q("newer-ok", "cite_newer"), ("x", False, [NEW]), 1.0),
    (_q("newer-both", "cite_newer"), ("x", False, [OLD, NEW]), 1.0),  # the old note may be cited too
    (_q("newer-old-only", "cite_newer"), ("x", False, [OLD]), 0.0),
    (_q("both-ok", "cite_both"), ("x", False, [NEW, OLD]), 1.0),
    (_q("both-half", "cite_both"), ("x", False, [NEW]), 0.0),
    (_q("ack-ok", "acknowledge_both", must_contain=["conflict"]), ("a CONFLICT: x", False, [OLD, NEW]), 1.0),
    (_q("ack-silent", "acknowledge_both", must_contain=["conflict"]), ("x", False, [OLD, NEW]), 0.0),
    (_q("ack-one", "acknowledge_both", must_contain=["conflict"]), ("conflict", False, [NEW]), 0.0),
    (_q("refused", "cite_newer"), ("not in context", True, []), 0.0),  # a refusal cites nothing
    (_q("no-citation", "cite_newer"), ("x", False, []), 0.0),
    (_q("unretrieved", "cite_newer"), ("x", False, [{"doc_path": "elsewhere.md"}]), 0.0),
    (_q("errored", "cite_newer"), "error", N),  # counted by error_rate instead
    (_q("no-answer", "cite_newer"), None, N),  # answers off for this query
    (_q("no-rule", None), ("x", False, [NEW]), N),
    (_q("no-supports", "cite_newer", supports=[], answerable=True), ("x", False, [NEW]), N),
    # Explicit groups: group 0 = {old.md}, group 1 = {new.md, new-copy.md}; either member of the
    # newest group will do.
    (
        _q(
            "groups-alt",
            "cite_newer",
            supports=[*TIMELINE, Support(rel_path="new-copy.md")],
            required_support_groups=[[0], [1, 2]],
        ),
        ("x", False, [{"doc_path": "new-copy.md"}]),
        1.0,
    ),
    (
        _q(
            "groups-both",
            "cite_both",
            supports=[*TIMELINE, Support(rel_path="new-copy.md")],
            required_support_groups=[[0], [1, 2]],
        ),
        ("x", False, [OLD, {"doc_path": "new-copy.md"}]),
        1.0,
    ),
    # A grade-0 support is not evidence: the timeline is old.md → new.md only.
    (
        _q(
            "grade-zero",
            "cite_both",
            supports=[*TIMELINE, Support(rel_path="junk.md", grade=0)],
        ),
        ("x", False, [OLD, NEW]),
        1.0,
    ),
]


def _run(tables) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    queries, supports = tables.golden(*[q for q, _, _ in CASES])
    docs = ("old.md", "new.md", "new-copy.md", "junk.md")
    hits = tables.concat(*[tables.hits(q.id, *[{"doc_path": d} for d in docs]) for q, _, _ in CASES])
    outcome_rows, citation_rows = [], []
    for q, answer, _ in CASES:
        row: dict = {"query_id": q.id, "n_hits": len(docs)}
        if answer == "error":
            row["error"] = "timeout: no answer in 5 s"
        elif answer is not None:
            text, refused, cites = answer
            row.update(answered=True, answer_text=text, refused=refused)
            citation_rows += [{"query_id": q.id, **c} for c in cites]
        outcome_rows.append(row)
    return queries, supports, hits, tables.outcomes(*outcome_rows), tables.citations(*citation_rows)


def test_recency_ok_per_query(tables) -> None:
    queries, supports, hits, outcomes, citations = _run(tables)
    scores = answer_scores(queries, supports, outcomes, citations, hits, match_hits(hits, supports))
    got = dict(zip(scores["query_id"], scores["recency_ok"], strict=True))
    for q, _, expected in CASES:
        assert got[q.id] == pytest.approx(expected, nan_ok=True), q.id


def test_recency_correctness_aggregate(tables) -> None:
    queries, supports, hits, outcomes, citations = _run(tables)
    qs = build_query_scores(queries, supports, hits, outcomes, citations)
    # In the denominator: every case with an expected value (14); correct: 7 of them.
    scored = [e for _, _, e in CASES if not math.isnan(e)]
    assert (len(scored), sum(scored)) == (14, 7)
    assert aggregate_metrics(qs, round_to=None)["recency_correctness"] == pytest.approx(7 / 14)


def test_recency_is_null_without_recency_queries(tables) -> None:
    queries, supports = tables.golden(_q("plain", None))
    hits = tables.hits("plain", NEW)
    outcomes = tables.outcomes({"query_id": "plain", "n_hits": 1, "answered": True, "answer_text": "x"})
    citations = tables.citations({"query_id": "plain", **NEW})
    qs = build_query_scores(queries, supports, hits, outcomes, citations)
    assert aggregate_metrics(qs)["recency_correctness"] is None


# ------------------------------------------------------------------------------------ scope


def _scope_run(tables, scopes: dict[str, object], golden: list[GoldenQuery]):
    queries, supports = tables.golden(*golden)
    hits = tables.hits(golden[0].id, {"doc_path": "x.md"})
    outcomes = tables.outcomes(*[{"query_id": q.id, "n_hits": 0, "scope": scopes.get(q.id)} for q in golden])
    citations = tables.citations()
    return build_query_scores(queries, supports, hits, outcomes, citations)


def _g(qid: str, *paths: str, **kw) -> GoldenQuery:
    return GoldenQuery(id=qid, query="q", supports=[Support(rel_path=p) for p in paths], **kw)


SCOPE_CASES: list[tuple[GoldenQuery, object, float]] = [
    (_g("inside", "notes/work/plan.md"), ["notes/work"], 0.0),
    (_g("trailing-slash", "notes/work/plan.md"), ["notes/work/"], 0.0),
    (_g("dot-slash", "notes/work/plan.md"), ["./notes"], 0.0),
    (_g("outside", "notes/work/plan.md"), ["notes/home"], 1.0),
    (_g("prefix-not-folder", "notes/workshop/plan.md"), ["notes/work"], 1.0),
    (_g("one-of-two-inside", "a/x.md", "b/y.md"), ["b"], 0.0),  # one gold support in scope is enough
    (_g("two-folders", "a/x.md"), ["c", "a"], 0.0),
    (_g("whole-tree", "a/x.md"), ["."], 0.0),
    (_g("empty-scope", "a/x.md"), [], 1.0),  # searched nothing
    (_g("backslashes", "a/b/x.md"), ["a\\b"], 0.0),
    (_g("no-scope", "a/x.md"), None, N),  # the system reports no scope
    (_g("unanswerable", answerable=False), ["a"], N),
    (GoldenQuery(id="chunk-only", query="q", supports=[Support(chunk_id="c1")]), ["a"], N),  # no location
    (GoldenQuery(id="doc-id", query="q", supports=[Support(doc_id="a/x.md")]), ["a"], 0.0),
]


def test_scope_miss_per_query(tables) -> None:
    golden = [q for q, _, _ in SCOPE_CASES]
    qs = _scope_run(tables, {q.id: s for q, s, _ in SCOPE_CASES}, golden)
    got = dict(zip(qs["query_id"], qs["scope_miss"], strict=True))
    for q, _, expected in SCOPE_CASES:
        assert got[q.id] == pytest.approx(expected, nan_ok=True), q.id
    # 11 scored; misses: outside, prefix-not-folder, empty-scope.
    assert aggregate_metrics(qs, round_to=None)["scope_miss_rate"] == pytest.approx(3 / 11)


def test_scope_miss_rate_is_null_when_no_system_reports_scope(tables) -> None:
    qs = _scope_run(tables, {}, [_g("q1", "a/x.md"), _g("q2", "b/y.md")])
    assert qs["scope_miss"].isna().all()
    assert aggregate_metrics(qs)["scope_miss_rate"] is None


def test_runs_stored_before_scopes_existed_score_null(tables) -> None:
    queries, supports = tables.golden(_g("q1", "a/x.md"))
    outcomes = tables.outcomes({"query_id": "q1", "n_hits": 0}).drop(columns="scope")
    assert "scope" in OUTCOME_COLUMNS
    qs = build_query_scores(queries, supports, tables.hits("q1"), outcomes, tables.citations())
    assert qs["scope_miss"].isna().all()
