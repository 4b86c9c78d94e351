"""Retrieval metrics on a hand-worked run: every value below is derived in the comments.

Hits are matched by the ``fields`` criterion (every field a support sets must agree), the rule the
values were worked out under; what ``auto`` resolves to is tested in tests/metrics/test_match_auto.py."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kebab_eval_pipeline.golden.model import GoldenQuery, Support
from kebab_eval_pipeline.metrics.matching import match_hits
from kebab_eval_pipeline.metrics.retrieval import retrieval_columns, retrieval_scores

L2 = math.log2
NAN = float("nan")


def _frame(tables):
    queries, supports = tables.golden(
        # q1: s0 chunk c1 (grade 3), s1 chunk c2 (grade 1), s2 doc D (grade 2)
        GoldenQuery(
            id="q1",
            query="?",
            supports=[Support(chunk_id="c1", grade=3), Support(chunk_id="c2"), Support(doc_id="D", grade=2)],
        ),
        # q2: multi-hop, groups [[0, 1], [2]]: anchors a.md#H / b.md, and doc E
        GoldenQuery(
            id="q2",
            query="?",
            supports=[
                Support(rel_path="a.md", heading_path=["H"]),
                Support(rel_path="b.md"),
                Support(doc_id="E"),
            ],
            required_support_groups=[[0, 1], [2]],
        ),
        GoldenQuery(id="q3", query="?", supports=[Support(chunk_id="c1")]),  # errored: no hits
        GoldenQuery(id="q4", query="?", answerable=False),  # unanswerable
        GoldenQuery(id="q5", query="?"),  # answerable without supports
        GoldenQuery(id="q6", query="?", supports=[Support(chunk_id="c1", grade=0)]),  # only grade 0
    )
    hits = tables.concat(
        tables.hits(
            "q1",
            {"chunk_id": "c9", "doc_id": "X"},
            {"chunk_id": "c2", "doc_id": "D"},  # s1 and s2
            {"chunk_id": "c1", "doc_id": "Y"},  # s0
            {"chunk_id": "c5", "doc_id": "D"},  # s2 again (already credited)
            {"chunk_id": "c7", "doc_id": "Z"},
        ),
        tables.hits(
            "q2",
            {"doc_path": "b.md"},  # s1
            {"doc_path": "./a.md", "heading_path": ["H", "x"]},  # s0
            {"doc_path": "a.md", "heading_path": ["G"]},  # same doc, wrong heading
            {"doc_path": "c.md"},
            {"doc_path": "c.md"},
            {"doc_id": "E"},  # s2
        ),
        tables.hits("q4", {"chunk_id": "c1"}),
        tables.hits("q6", {"chunk_id": "c1"}),
    )
    return queries, supports, hits


def test_columns_and_order(tables) -> None:
    queries, supports, hits = _frame(tables)
    out = retrieval_scores(queries, supports, hits, match_hits(hits, supports, "fields"))
    assert list(out.columns) == retrieval_columns((1, 3, 5, 10))
    assert out["query_id"].tolist() == ["q1", "q2", "q3", "q4", "q5", "q6"]
    assert out["applicable"].tolist() == [True, True, True, False, False, False]
    assert out["n_hits"].tolist() == [5, 6, 0, 1, 0, 1]
    assert out["first_relevant_rank"].tolist() == [2, 1, pd.NA, pd.NA, pd.NA, pd.NA]
    assert str(out["first_relevant_rank"].dtype) == "Int64"


EXPECTED = {
    # q1: relevant ranks {2, 3, 4}; support first ranks s0=3, s1=2, s2=2; docs {c1-support, c2-support, D}
    # One-to-one assignment in rank order: rank 2 matches s1 (grade 1) and s2 (grade 2) and takes
    # s2, the higher grade; rank 3 takes s0; rank 4 matches only s2, already taken → not credited.
    # s1 is never assigned. So credited hits are rank 2 (gain 2) and rank 3 (gain 3); ideal 3, 2, 1.
    "q1": {
        "mrr": 1 / 2,
        "hit@1": 0,
        "hit@3": 1,
        "hit@5": 1,
        "hit@10": 1,
        "recall@1": 0,
        "recall@3": 2 / 3,  # 2 of 3 supports assigned
        "recall@5": 2 / 3,
        "recall@10": 2 / 3,
        "doc_recall@1": 0,
        "doc_recall@3": 1,  # every expected document (c1's, c2's support, D) found by rank 3
        "doc_recall@5": 1,
        "doc_recall@10": 1,
        "recall_any@1": 0,
        "recall_any@3": 1,
        "recall_all@1": 0,
        "recall_all@3": 1,
        "precision@1": 0,
        "precision@3": 2 / 3,
        "precision@5": 2 / 5,  # rank 4 repeats s2: not a second relevant hit
        "precision@10": 2 / 10,
        "ndcg@1": 0,
        "ndcg@3": (2 / L2(3) + 3 / L2(4)) / (3 + 2 / L2(3) + 1 / L2(4)),
        "ndcg@5": (2 / L2(3) + 3 / L2(4)) / (3 + 2 / L2(3) + 1 / L2(4)),
    },
    # q2: relevant ranks {1, 2, 6}; groups {s0@2, s1@1} → 1 and {s2@6} → 6; docs a.md@2, b.md@1, E@6.
    # Each relevant hit matches one support: assigned r1 → s1, r2 → s0, r6 → s2.
    "q2": {
        "mrr": 1,
        "hit@1": 1,
        "recall@1": 1 / 3,
        "recall@3": 2 / 3,
        "recall@5": 2 / 3,
        "recall@10": 1,
        "doc_recall@1": 1 / 3,
        "doc_recall@3": 2 / 3,
        "doc_recall@10": 1,
        "recall_any@1": 1,
        "recall_all@1": 0,
        "recall_all@5": 0,
        "recall_all@10": 1,
        "precision@1": 1,
        "precision@3": 2 / 3,
        "precision@5": 2 / 5,
        "precision@10": 3 / 10,
        "ndcg@1": 1,
        "ndcg@3": (1 + 1 / L2(3)) / (1 + 1 / L2(3) + 1 / L2(4)),
        "ndcg@10": (1 + 1 / L2(3) + 1 / L2(7)) / (1 + 1 / L2(3) + 1 / L2(4)),
    },
    # q3: applicable, no hits → zeros.
    "q3": {
        "mrr": 0,
        "hit@10": 0,
        "recall@10": 0,
        "doc_recall@10": 0,
        "recall_all@10": 0,
        "precision@10": 0,
        "ndcg@10": 0,
    },
}


@pytest.mark.parametrize("qid", sorted(EXPECTED))
def test_hand_worked_values(tables, qid: str) -> None:
    queries, supports, hits = _frame(tables)
    out = retrieval_scores(queries, supports, hits, match_hits(hits, supports, "fields")).set_index(
        "query_id"
    )
    for metric, expected in EXPECTED[qid].items():
        assert out.loc[qid, metric] == pytest.approx(expected, abs=1e-12), metric


def test_not_applicable_rows_are_nan(tables) -> None:
    queries, supports, hits = _frame(tables)
    out = retrieval_scores(queries, supports, hits, match_hits(hits, supports, "fields")).set_index(
        "query_id"
    )
    metric_cols = [c for c in out.columns if c not in ("applicable", "n_hits", "first_relevant_rank")]
    for qid in ("q4", "q5", "q6"):
        assert out.loc[qid, metric_cols].isna().all(), qid


def test_mrr_cutoff_and_first_relevant_rank(tables) -> None:
    queries, supports = tables.golden(GoldenQuery(id="q", query="?", supports=[Support(chunk_id="c")]))
    hits = tables.hits("q", {"chunk_id": "a"}, {"chunk_id": "b"}, {"chunk_id": "d"}, {"chunk_id": "c"})
    m = match_hits(hits, supports, "fields")
    out = retrieval_scores(queries, supports, hits, m, ks=(3, 5), mrr_cutoff=3).iloc[0]
    assert out["mrr"] == 0 and pd.isna(out["first_relevant_rank"])
    assert out["hit@3"] == 0 and out["hit@5"] == 1
    out = retrieval_scores(queries, supports, hits, m, ks=(5,), mrr_cutoff=4).iloc[0]
    assert out["mrr"] == 0.25 and out["first_relevant_rank"] == 4


def test_grade_zero_matches_are_not_relevant(tables) -> None:
    queries, supports = tables.golden(
        GoldenQuery(
            id="q", query="?", supports=[Support(chunk_id="a", grade=0), Support(chunk_id="b", grade=2)]
        )
    )
    hits = tables.hits("q", {"chunk_id": "a"}, {"chunk_id": "b"})
    out = retrieval_scores(queries, supports, hits, match_hits(hits, supports, "fields"), ks=(1, 2)).iloc[0]
    assert (out["mrr"], out["hit@1"], out["precision@2"], out["recall@2"], out["ndcg@2"]) == (
        0.5,
        0,
        0.5,
        1,
        1 / L2(3),
    )


def test_groups_with_bad_indexes_and_defaults(tables) -> None:
    queries, supports = tables.golden(
        # group [5] names no support → dropped; group [0] remains.
        GoldenQuery(id="a", query="?", supports=[Support(chunk_id="x"), Support(chunk_id="y")]),
        GoldenQuery(
            id="b",
            query="?",
            supports=[Support(chunk_id="x"), Support(chunk_id="y")],
            required_support_groups=[[0]],
        ),
    )
    queries.loc[1, "required_support_groups"] = "[[0], [5]]"
    hits = tables.concat(tables.hits("a", {"chunk_id": "x"}), tables.hits("b", {"chunk_id": "x"}))
    out = retrieval_scores(queries, supports, hits, match_hits(hits, supports, "fields"), ks=(1,)).set_index(
        "query_id"
    )
    assert out.loc["a", "recall_all@1"] == 0  # default: every support is a group, y is missing
    assert out.loc["b", "recall_all@1"] == 1  # only group [0] counts
    assert out.loc["a", "recall@1"] == 0.5


def test_document_recall_counts_distinct_documents(tables) -> None:
    # Two supports in the same doc count once; path supports match the hit's doc_id too.
    queries, supports = tables.golden(
        GoldenQuery(
            id="q",
            query="?",
            supports=[
                Support(doc_id="D", line_start=1, line_end=2),
                Support(doc_id="D", line_start=50, line_end=60),
                Support(rel_path="docs/x.md"),
            ],
        )
    )
    hits = tables.hits("q", {"doc_id": "D", "line_start": 100, "line_end": 120}, {"doc_id": "docs\\x.md"})
    out = retrieval_scores(queries, supports, hits, match_hits(hits, supports, "fields"), ks=(1, 2)).iloc[0]
    assert out["doc_recall@1"] == 0.5 and out["doc_recall@2"] == 1
    assert out["hit@2"] == 0  # no hit matches a support under `fields` (lines miss, doc_path unset)
    assert out["recall@2"] == 0  # … so support recall finds none of the three supports


def test_empty_run(tables) -> None:
    queries, supports, hits = _frame(tables)
    no_hits = hits.iloc[:0]
    out = retrieval_scores(queries, supports, no_hits, match_hits(no_hits, supports, "fields"))
    assert out["n_hits"].tolist() == [0] * 6
    applicable = out[out["applicable"]]
    assert (
        (applicable.drop(columns=["query_id", "applicable", "n_hits", "first_relevant_rank"]) == 0)
        .all()
        .all()
    )


def test_k_validation(tables) -> None:
    queries, supports, hits = _frame(tables)
    with pytest.raises(ValueError):
        retrieval_scores(queries, supports, hits, match_hits(hits, supports, "fields"), ks=(0, 3))
    out = retrieval_scores(queries, supports, hits, match_hits(hits, supports, "fields"), ks=(5, 1, 5))
    assert [c for c in out.columns if c.startswith("hit@")] == ["hit@1", "hit@5"]


def test_duplicate_query_ids_rejected(tables) -> None:
    queries, supports, hits = _frame(tables)
    with pytest.raises(ValueError, match="duplicate"):
        retrieval_scores(pd.concat([queries, queries]), supports, hits, match_hits(hits, supports, "fields"))


def test_values_are_unrounded_floats(tables) -> None:
    queries, supports, hits = _frame(tables)
    out = retrieval_scores(queries, supports, hits, match_hits(hits, supports, "fields"))
    assert out["precision@3"].dtype == np.float64
    assert out.loc[0, "precision@3"] == 2 / 3


def test_invariants_on_random_doc_level_runs() -> None:
    """Many chunks per document, supports of any kind: values stay in range and monotone in k."""
    rng = np.random.default_rng(11)
    ks = (1, 2, 3, 5, 8, 13)
    for _ in range(60):
        n_q = int(rng.integers(1, 15))
        q_rows, s_rows, h_rows = [], [], []
        for qi in range(n_q):
            qid = f"q{qi}"
            q_rows.append(
                {"query_id": qid, "answerable": bool(rng.random() < 0.9), "required_support_groups": "[]"}
            )
            for idx in range(int(rng.integers(0, 5))):
                kind = rng.integers(0, 3)
                ident = {"doc_id": f"d{rng.integers(0, 6)}"} if kind == 0 else {}
                if kind == 1:
                    ident = {"chunk_id": f"c{rng.integers(0, 30)}"}
                if kind == 2:
                    ident = {"doc_id": f"d{rng.integers(0, 6)}", "chunk_id": f"c{rng.integers(0, 30)}"}
                s_rows.append(
                    {"query_id": qid, "support_idx": idx, "grade": int(rng.integers(0, 4)), **ident}
                )
            for rank in range(1, int(rng.integers(0, 20)) + 1):
                c = int(rng.integers(0, 30))
                h_rows.append({"query_id": qid, "rank": rank, "chunk_id": f"c{c}", "doc_id": f"d{c % 6}"})
        queries = pd.DataFrame(q_rows).astype({"query_id": "string"})
        supports = pd.DataFrame(
            s_rows, columns=["query_id", "support_idx", "grade", "chunk_id", "doc_id"]
        ).astype(
            {
                "query_id": "string",
                "support_idx": "int64",
                "grade": "int64",
                "chunk_id": "string",
                "doc_id": "string",
            }
        )
        hits = pd.DataFrame(h_rows, columns=["query_id", "rank", "chunk_id", "doc_id"]).astype(
            {"query_id": "string", "rank": "int64", "chunk_id": "string", "doc_id": "string"}
        )
        out = retrieval_scores(
            queries, supports, hits, match_hits(hits, supports, "fields"), ks=ks, mrr_cutoff=13
        )
        app = out[out["applicable"]]
        for metric in ("hit", "recall", "doc_recall", "recall_any", "recall_all", "precision", "ndcg"):
            values = app[[f"{metric}@{k}" for k in ks]].to_numpy()
            assert ((values >= 0) & (values <= 1 + 1e-12)).all(), metric
            if metric != "precision" and metric != "ndcg":
                assert (np.diff(values, axis=1) >= 0).all(), metric  # more k never loses anything
        for k in ks:
            assert np.allclose(app[f"precision@{k}"] * k, np.round(app[f"precision@{k}"] * k))
            assert (app[f"recall_all@{k}"] <= app[f"recall_any@{k}"]).all()
        frr = app["first_relevant_rank"].astype("Float64").to_numpy(dtype=float, na_value=np.nan)
        assert np.allclose(np.where(np.isnan(frr), 0, 1 / np.where(np.isnan(frr), 1, frr)), app["mrr"])
        assert out.loc[~out["applicable"], "mrr"].isna().all()


def test_counted_hits_replace_the_hits_table(tables) -> None:
    """An engine that counted the hits per query while matching passes ``n_hits``: the scores are
    those computed from the hits table (which is then read only for document recall); a count
    per query is required."""
    queries, supports, hits = _frame(tables)
    matches = match_hits(hits, supports, "fields")
    expected = retrieval_scores(queries, supports, hits, matches)
    counted = retrieval_scores(queries, supports, hits, matches, n_hits=np.array([5, 6, 0, 1, 0, 1]))
    pd.testing.assert_frame_equal(counted, expected)
    with pytest.raises(ValueError, match="one count per query"):
        retrieval_scores(queries, supports, hits, matches, n_hits=np.array([5, 6]))


_DOC = st.integers(0, 4)


@settings(max_examples=60)
@given(
    st.lists(
        st.tuples(
            # supports: (by doc id?, document number, grade)
            st.lists(st.tuples(st.booleans(), _DOC, st.integers(0, 2)), max_size=4),
            # hits in rank order: (doc id number, doc path number, "./" prefix?)
            st.lists(st.tuples(_DOC, _DOC, st.booleans()), max_size=12),
        ),
        min_size=1,
        max_size=6,
    ),
    st.lists(st.integers(1, 12), min_size=1, max_size=3),
)
def test_document_recall_equals_its_definition(runs, ks) -> None:
    """doc_recall@k on random document-level runs equals its definition computed naively: of the
    distinct documents the relevant supports name (by doc id, or by normalised path, found by a hit's
    normalised doc_path or doc_id), the share a hit within the top k finds — whichever cut-off the
    kernel uses to look at fewer hits."""
    q_rows, s_rows, h_rows = [], [], []
    for qi, (supports, hits) in enumerate(runs):
        qid = f"q{qi}"
        q_rows.append({"query_id": qid, "answerable": True, "required_support_groups": "[]"})
        for idx, (by_id, doc, grade) in enumerate(supports):
            ident = {"doc_id": f"d{doc}"} if by_id else {"rel_path": f"p{doc}.md"}
            s_rows.append({"query_id": qid, "support_idx": idx, "grade": grade, **ident})
        for rank, (doc, path, dotted) in enumerate(hits, start=1):
            doc_path = ("./" if dotted else "") + f"p{path}.md"
            h_rows.append({"query_id": qid, "rank": rank, "doc_id": f"d{doc}", "doc_path": doc_path})
    queries = pd.DataFrame(q_rows).astype({"query_id": "string"})
    supports = pd.DataFrame(
        s_rows, columns=["query_id", "support_idx", "grade", "doc_id", "rel_path"]
    ).astype(
        {
            "query_id": "string",
            "support_idx": "int64",
            "grade": "int64",
            "doc_id": "string",
            "rel_path": "string",
        }
    )
    hits = pd.DataFrame(h_rows, columns=["query_id", "rank", "doc_id", "doc_path"]).astype(
        {"query_id": "string", "rank": "int64", "doc_id": "string", "doc_path": "string"}
    )
    out = retrieval_scores(queries, supports, hits, match_hits(hits, supports, "doc"), ks=ks, mrr_cutoff=12)
    for qi, (sups, hit_list) in enumerate(runs):
        expected = {("id", f"d{d}") if by_id else ("path", f"p{d}.md") for by_id, d, g in sups if g >= 1}
        for k in sorted(set(ks)):
            found = set()
            for doc, path, _ in hit_list[:k]:
                found |= {("id", f"d{doc}"), ("path", f"p{path}.md"), ("path", f"d{doc}")}
            value = out.loc[qi, f"doc_recall@{k}"]
            if not expected:
                assert math.isnan(value)
            else:
                assert value == len(expected & found) / len(expected), (qi, k)
