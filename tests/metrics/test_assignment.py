"""The one-to-one hit ↔ support assignment (``assign_supports``) the retrieval metrics credit.

The vectorised deferred-acceptance kernel is checked against the plain serial definition — walk
each query's hits in rank order, give each hit the best still-free positive support it matches
(highest grade, then lowest support_idx) — written here as a straightforward Python loop.
"""

from __future__ import annotations

import math

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from kebab_eval_pipeline.golden.model import GoldenQuery, Support
from kebab_eval_pipeline.metrics.matching import MATCH_COLUMNS, match_hits
from kebab_eval_pipeline.metrics.retrieval import (
    ASSIGNMENT_COLUMNS,
    assign_judgements,
    assign_supports,
    retrieval_scores,
)

L2 = math.log2


def _serial(matches: pd.DataFrame, every_grade: bool = False) -> list[tuple[str, int, int, int]]:
    """The definition: serial dictatorship in rank order, per query (reference, not vectorised);
    over the positive supports, or over ``every_grade`` (best grade first)."""
    out = []
    positive = matches if every_grade else matches[matches["grade"] > 0]
    for qid, group in positive.groupby("query_id", sort=True):
        taken: set[int] = set()
        for rank, at_rank in group.groupby("rank", sort=True):
            free = [
                (-g, i)
                for i, g in zip(at_rank["support_idx"], at_rank["grade"], strict=True)
                if i not in taken
            ]
            if free:
                neg_grade, idx = min(free)
                taken.add(idx)
                out.append((str(qid), int(rank), int(idx), -neg_grade))
    return out


_pairs = st.lists(
    st.tuples(
        st.sampled_from(["q0", "q1", "q2"]),
        st.integers(1, 12),  # rank
        st.integers(0, 7),  # support_idx
    ),
    max_size=80,
    unique=True,
)


def _random_matches(pairs, grades) -> pd.DataFrame:
    # a support's grade is fixed per (query, support_idx), as in a golden set
    grade_of = {(q, i): grades[qi * 8 + i] for qi, q in enumerate(["q0", "q1", "q2"]) for i in range(8)}
    rows = [{"query_id": q, "rank": r, "support_idx": i, "grade": grade_of[(q, i)]} for q, r, i in pairs]
    matches = pd.DataFrame(rows, columns=list(MATCH_COLUMNS)).astype(MATCH_COLUMNS)
    return matches.sample(frac=1.0, random_state=len(rows))  # input order must not matter


@settings(max_examples=300, deadline=None)
@given(pairs=_pairs, grades=st.lists(st.integers(-1, 3), min_size=24, max_size=24))
def test_assignment_equals_the_serial_definition(pairs, grades) -> None:
    matches = _random_matches(pairs, grades)
    got = assign_supports(matches)
    assert dict(got.dtypes.astype(str)) == ASSIGNMENT_COLUMNS
    assert list(got.itertuples(index=False, name=None)) == _serial(matches)
    # one-to-one: a hit at most one support, a support at most one hit
    assert not got.duplicated(["query_id", "rank"]).any()
    assert not got.duplicated(["query_id", "support_idx"]).any()
    # Every grade, best first (the export's docno space): the serial definition over all supports,
    # one-to-one, and its positive part is exactly the credit assignment above.
    every = assign_judgements(matches)
    assert dict(every.dtypes.astype(str)) == ASSIGNMENT_COLUMNS
    assert list(every.itertuples(index=False, name=None)) == _serial(matches, every_grade=True)
    pd.testing.assert_frame_equal(every[every["grade"] > 0].reset_index(drop=True), got)
    assert not every.duplicated(["query_id", "rank"]).any()
    assert not every.duplicated(["query_id", "support_idx"]).any()


def test_hand_worked_assignment() -> None:
    # rank 1 matches s0 (grade 1) and s1 (grade 2): takes s1. rank 2 matches s1 only: nothing left.
    # rank 3 matches s0 and s1: takes s0. rank 4 matches s2 (grade 0): never relevant.
    matches = pd.DataFrame(
        {
            "query_id": ["q"] * 6,
            "rank": [1, 1, 2, 3, 3, 4],
            "support_idx": [0, 1, 1, 0, 1, 2],
            "grade": [1, 2, 2, 1, 2, 0],
        }
    ).astype(MATCH_COLUMNS)
    got = assign_supports(matches)
    assert list(got.itertuples(index=False, name=None)) == [("q", 1, 1, 2), ("q", 3, 0, 1)]
    assert assign_supports(matches.iloc[:0]).empty
    # Every grade: rank 4 takes s2 (a judged non-relevant document for bpref); rank 2 still none.
    got = assign_judgements(matches)
    assert list(got.itertuples(index=False, name=None)) == [("q", 1, 1, 2), ("q", 3, 0, 1), ("q", 4, 2, 0)]
    assert assign_judgements(matches.iloc[:0]).empty


def test_three_chunks_of_one_document_are_one_relevant_hit(tables) -> None:
    """The departure from "relevant hits / k": chunks repeating a found support do not count."""
    queries, supports = tables.golden(
        GoldenQuery(id="q", query="?", supports=[Support(rel_path="a.md", grade=2), Support(rel_path="b.md")])
    )
    hits = tables.hits(
        "q", {"doc_path": "a.md"}, {"doc_path": "a.md"}, {"doc_path": "a.md"}, {"doc_path": "x.md"}
    )
    out = retrieval_scores(queries, supports, hits, match_hits(hits, supports, "doc"), ks=(3, 4)).iloc[0]
    # rank 1 takes a.md; ranks 2 and 3 repeat it; b.md is never found.
    assert out["hit@3"] == 1 and out["mrr"] == 1
    assert out["precision@3"] == 1 / 3  # was 3/3 when every matching hit counted
    assert out["recall@3"] == 1 / 2  # support recall: 1 of 2 supports
    assert out["doc_recall@3"] == 1 / 2
    assert out["recall_any@3"] == 1 and out["recall_all@3"] == 0
    assert out["ndcg@3"] == 2 / (2 + 1 / L2(3))  # DCG 2/log2(2); ideal grades 2, 1
