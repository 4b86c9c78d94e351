"""The standard measures agree with trec_eval (pytrec_eval) to 1e-9 on randomised runs (SPEC §6).

Mapping: ``hit@k`` ↔ ``success_k``, ``mrr`` ↔ ``recip_rank`` on the run cut at the MRR cutoff,
``recall@k`` ↔ ``recall_k``, ``precision@k`` ↔ ``P_k``, ``ndcg@k`` ↔ ``ndcg_cut_k``.

trec_eval orders a run by score (ties by docno), so every run gets strictly decreasing scores in
rank order; each hit id is unique within its query; qrels carry graded relevance including
grade 0 (judged non-relevant). trec_eval skips queries without relevant documents — our kernels
report those as not applicable (NaN) — so values are compared on the queries both evaluate.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from kebab_eval_pipeline.matching import match_hits
from kebab_eval_pipeline.metrics.aggregate import aggregate_metrics
from kebab_eval_pipeline.metrics.retrieval import retrieval_scores

pytrec_eval = pytest.importorskip("pytrec_eval")

N_RUNS = 240
TOL = 1e-9


def _random_run(rng: np.random.Generator, level: str):
    """One random run: (queries, supports, hits, qrels, trec_run, ks, cutoff)."""
    n_q = int(rng.integers(1, 40))
    ks = sorted({1, *rng.choice(np.arange(1, 26), size=int(rng.integers(1, 5)), replace=False).tolist()})
    cutoff = int(rng.choice([1, 3, 5, 10, 15]))
    q_rows, s_rows, h_rows = [], [], []
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for qi in range(n_q):
        qid = f"q{qi:03d}"
        corpus = [f"x{qi}-{j}" for j in range(int(rng.integers(1, 60)))]
        n_hits = int(rng.integers(0, min(len(corpus), 30) + 1))
        returned = rng.permutation(corpus)[:n_hits].tolist()
        n_sup = int(rng.integers(0, min(len(corpus), 8) + 1))
        gold = rng.permutation(corpus)[:n_sup].tolist()
        grades = rng.integers(0, 4, size=n_sup).tolist()  # 0 = judged non-relevant
        q_rows.append({"query_id": qid, "answerable": True, "required_support_groups": "[]"})
        for idx, (g, grade) in enumerate(zip(gold, grades, strict=True)):
            ident = {"chunk_id": g} if level == "chunk" else {"doc_id": g}
            s_rows.append({"query_id": qid, "support_idx": idx, "grade": grade, **ident})
        for rank, d in enumerate(returned, start=1):
            # chunk-level run: the chunk id is the docno; doc-level: the doc id is (chunk ids are noise)
            chunk, doc = (d, f"doc-of-{d}") if level == "chunk" else (f"chunk-{rank}", d)
            h_rows.append({"query_id": qid, "rank": rank, "chunk_id": chunk, "doc_id": doc})
        if gold:
            qrels[qid] = dict(zip(gold, grades, strict=True))
        run[qid] = {d: float(1000 - rank) for rank, d in enumerate(returned, start=1)}
    queries = pd.DataFrame(q_rows).astype({"query_id": "string", "answerable": "bool"})
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
    return queries, supports, hits, qrels, run, ks, cutoff


def _trec(qrels, run, ks, cutoff):
    cuts = ",".join(map(str, ks))
    measures = {f"success.{cuts}", f"recall.{cuts}", f"P.{cuts}", f"ndcg_cut.{cuts}"}
    full = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    cut_run = {q: {d: s for d, s in docs.items() if s > 1000 - cutoff - 0.5} for q, docs in run.items()}
    mrr = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(cut_run)
    return full, mrr


@pytest.mark.parametrize("level", ["chunk", "doc"])
def test_agrees_with_trec_eval(level: str) -> None:
    rng = np.random.default_rng(20240 + (level == "doc"))
    compared = 0
    for _ in range(N_RUNS // 2):
        queries, supports, hits, qrels, run, ks, cutoff = _random_run(rng, level)
        ours = retrieval_scores(queries, supports, hits, match_hits(hits, supports), ks=ks, mrr_cutoff=cutoff)
        ours = ours.set_index("query_id")
        full, mrr = _trec(qrels, run, ks, cutoff)
        for qid, row in ours.iterrows():
            relevant = any(g > 0 for g in qrels.get(qid, {}).values())
            assert bool(row["applicable"]) == relevant, qid
            if not relevant:
                assert np.isnan(row["mrr"])
                continue
            if qid in mrr:
                assert abs(row["mrr"] - mrr[qid]["recip_rank"]) <= TOL, (qid, cutoff)
            if qid not in full:  # pytrec_eval skips queries with an empty run; ours are zeros
                assert row[[f"hit@{k}" for k in ks]].eq(0).all()
                continue
            t = full[qid]
            for k in ks:
                assert abs(row[f"hit@{k}"] - t[f"success_{k}"]) <= TOL, (qid, k, "success")
                assert abs(row[f"recall@{k}"] - t[f"recall_{k}"]) <= TOL, (qid, k, "recall")
                assert abs(row[f"precision@{k}"] - t[f"P_{k}"]) <= TOL, (qid, k, "P")
                assert abs(row[f"ndcg@{k}"] - t[f"ndcg_cut_{k}"]) <= TOL, (qid, k, "ndcg_cut")
            compared += 1
    assert compared > 500  # the random runs really exercised the comparison


def test_unrounded_aggregate_equals_trec_mean() -> None:
    rng = np.random.default_rng(99)
    queries, supports, hits, qrels, run, ks, cutoff = _random_run(rng, "chunk")
    while len(qrels) < 10:
        queries, supports, hits, qrels, run, ks, cutoff = _random_run(rng, "chunk")
    # drop queries trec_eval would skip, so both means run over the same set
    keep = [q for q, rel in qrels.items() if any(g > 0 for g in rel.values()) and run.get(q)]
    queries = queries[queries["query_id"].isin(keep)].reset_index(drop=True)
    scores = retrieval_scores(queries, supports, hits, match_hits(hits, supports), ks=ks, mrr_cutoff=cutoff)
    ours = aggregate_metrics(scores, ks, round_to=None)
    full, mrr = _trec({q: qrels[q] for q in keep}, {q: run[q] for q in keep}, ks, cutoff)
    for k in ks:
        assert abs(ours[f"ndcg@{k}"] - np.mean([full[q][f"ndcg_cut_{k}"] for q in keep])) <= TOL
        assert abs(ours[f"precision@{k}"] - np.mean([full[q][f"P_{k}"] for q in keep])) <= TOL
    assert abs(ours["mrr"] - np.mean([mrr[q]["recip_rank"] if q in mrr else 0.0 for q in keep])) <= TOL
