"""The standard measures agree with trec_eval (pytrec_eval) to 1e-9 on randomised runs (SPEC §6).

Mapping: ``hit@k`` ↔ ``success_k``, ``mrr`` ↔ ``recip_rank`` on the run cut at the MRR cutoff,
``recall@k`` ↔ ``recall_k``, ``precision@k`` ↔ ``P_k``, ``ndcg@k`` ↔ ``ndcg_cut_k``.

trec_eval judges documents, our metrics judge hits against supports, so the qrels and run handed
to trec_eval live in the *assignment* docno space (what the TREC export writes): a hit assigned
support ``i`` by :func:`assign_supports` is document ``gold:<i>``, any other hit ``hit:<rank>``;
the qrels list every support of the query as ``gold:<i>`` with its grade (0 = judged
non-relevant). The random runs have several hits matching one support (many chunks of one gold
document), hits matching several supports (a chunk support and its document's support) and
supports no hit matches. trec_eval orders a run by score, so every run gets strictly decreasing
scores in rank order. trec_eval skips queries without relevant documents — our kernels report
those as not applicable (NaN) — so values are compared on the queries both evaluate.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from kebab_eval_pipeline.metrics.aggregate import aggregate_metrics
from kebab_eval_pipeline.metrics.matching import match_hits
from kebab_eval_pipeline.metrics.retrieval import assign_supports, retrieval_scores

pytrec_eval = pytest.importorskip("pytrec_eval")

N_RUNS = 240
TOL = 1e-9


def _random_run(rng: np.random.Generator, level: str):
    """One random run: (queries, supports, hits, qrels, trec_run, ks, cutoff).

    ``level``: ``chunk`` supports name chunk ids, ``doc`` supports name documents (each document
    has several chunks, so several hits match one support), ``mixed`` both (a hit can match a
    chunk support and its document's support at once).
    """
    n_q = int(rng.integers(1, 40))
    ks = sorted({1, *rng.choice(np.arange(1, 26), size=int(rng.integers(1, 5)), replace=False).tolist()})
    cutoff = int(rng.choice([1, 3, 5, 10, 15]))
    q_rows, s_rows, h_rows = [], [], []
    for qi in range(n_q):
        qid = f"q{qi:03d}"
        n_docs = int(rng.integers(1, 12))
        chunks = [f"x{qi}-{j}" for j in range(int(rng.integers(1, 60)))]
        doc_of = {c: f"d{qi}-{int(rng.integers(0, n_docs))}" for c in chunks}
        n_hits = int(rng.integers(0, min(len(chunks), 30) + 1))
        returned = rng.permutation(chunks)[:n_hits].tolist()
        n_sup = int(rng.integers(0, 8))
        q_rows.append({"query_id": qid, "answerable": True, "required_support_groups": "[]"})
        for idx in range(n_sup):
            kind = level if level != "mixed" else str(rng.choice(["chunk", "doc"]))
            ident = (
                {"chunk_id": str(rng.choice(chunks))}
                if kind == "chunk"
                else {"doc_id": f"d{qi}-{int(rng.integers(0, n_docs + 1))}"}  # n_docs: no hit has it
            )
            s_rows.append({"query_id": qid, "support_idx": idx, "grade": int(rng.integers(0, 4)), **ident})
        for rank, c in enumerate(returned, start=1):
            h_rows.append({"query_id": qid, "rank": rank, "chunk_id": c, "doc_id": doc_of[c]})
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
    qrels, run = _assignment_space(supports, hits)
    return queries, supports, hits, qrels, run, ks, cutoff


def _assignment_space(supports: pd.DataFrame, hits: pd.DataFrame):
    """trec_eval's qrels and run in the assignment docno space (see the module docstring)."""
    qrels: dict[str, dict[str, int]] = {}
    for q, i, g in zip(supports["query_id"], supports["support_idx"], supports["grade"], strict=True):
        qrels.setdefault(str(q), {})[f"gold:{i}"] = int(g)
    qrels = {q: rel for q, rel in qrels.items() if any(g > 0 for g in rel.values())}
    assigned = assign_supports(match_hits(hits, supports))
    gold = {
        (q, int(r)): int(i)
        for q, r, i in zip(assigned["query_id"], assigned["rank"], assigned["support_idx"], strict=True)
    }
    run: dict[str, dict[str, float]] = {}
    for q, r in zip(hits["query_id"], hits["rank"], strict=True):
        i = gold.get((q, int(r)))
        docno = f"gold:{i}" if i is not None else f"hit:{r}"
        run.setdefault(str(q), {})[docno] = float(1000 - int(r))
    return qrels, run


def _trec(qrels, run, ks, cutoff):
    cuts = ",".join(map(str, ks))
    measures = {f"success.{cuts}", f"recall.{cuts}", f"P.{cuts}", f"ndcg_cut.{cuts}"}
    full = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    cut_run = {q: {d: s for d, s in docs.items() if s > 1000 - cutoff - 0.5} for q, docs in run.items()}
    mrr = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(cut_run)
    return full, mrr


@pytest.mark.parametrize("level", ["chunk", "doc", "mixed"])
def test_agrees_with_trec_eval(level: str) -> None:
    rng = np.random.default_rng(20240 + ["chunk", "doc", "mixed"].index(level))
    compared = 0
    for _ in range(N_RUNS // 3):
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
    assert compared > 300  # the random runs really exercised the comparison


def test_random_runs_repeat_supports() -> None:
    """The cross-check is only meaningful if hits really repeat supports and supports go unfound."""
    rng = np.random.default_rng(7)
    repeated = unmatched = 0
    for _ in range(20):
        _, supports, hits, *_ = _random_run(rng, "doc")
        m = match_hits(hits, supports)
        m = m[m["grade"] > 0]
        repeated += int(m.duplicated(["query_id", "support_idx"]).sum())
        found = set(zip(m["query_id"], m["support_idx"], strict=True))
        positive = supports[supports["grade"] > 0]
        unmatched += sum(
            (q, i) not in found for q, i in zip(positive["query_id"], positive["support_idx"], strict=True)
        )
    assert repeated > 50 and unmatched > 20


def test_unrounded_aggregate_equals_trec_mean() -> None:
    rng = np.random.default_rng(99)
    queries, supports, hits, qrels, run, ks, cutoff = _random_run(rng, "mixed")
    while len(qrels) < 10:
        queries, supports, hits, qrels, run, ks, cutoff = _random_run(rng, "mixed")
    # drop queries trec_eval would skip, so both means run over the same set
    keep = [q for q, rel in qrels.items() if any(g > 0 for g in rel.values()) and run.get(q)]
    queries = queries[queries["query_id"].isin(keep)].reset_index(drop=True)
    scores = retrieval_scores(queries, supports, hits, match_hits(hits, supports), ks=ks, mrr_cutoff=cutoff)
    ours = aggregate_metrics(scores, ks, round_to=None)
    full, mrr = _trec({q: qrels[q] for q in keep}, {q: run[q] for q in keep}, ks, cutoff)
    for k in ks:
        assert abs(ours[f"ndcg@{k}"] - np.mean([full[q][f"ndcg_cut_{k}"] for q in keep])) <= TOL
        assert abs(ours[f"precision@{k}"] - np.mean([full[q][f"P_{k}"] for q in keep])) <= TOL
        assert abs(ours[f"recall@{k}"] - np.mean([full[q][f"recall_{k}"] for q in keep])) <= TOL
    assert abs(ours["mrr"] - np.mean([mrr[q]["recip_rank"] if q in mrr else 0.0 for q in keep])) <= TOL
