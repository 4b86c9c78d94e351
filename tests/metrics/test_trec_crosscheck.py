"""The standard measures agree with trec_eval (pytrec_eval) to 1e-9 on randomised runs (SPEC §6).

Mapping: ``hit@k`` ↔ ``success_k``, ``mrr`` ↔ ``recip_rank`` on the run cut at the MRR cutoff,
``recall@k`` ↔ ``recall_k``, ``precision@k`` ↔ ``P_k``, ``ndcg@k`` ↔ ``ndcg_cut_k``, ``map`` ↔
``map``, ``map@k`` ↔ ``map_cut_k``, ``rprec`` ↔ ``Rprec``, ``bpref`` ↔ ``bpref`` — at relevance level
1 and 2 (trec_eval ``-l``, pytrec_eval ``relevance_level``); ``judged@k`` ↔ ir_measures' ``Judged@k``.

trec_eval judges documents, our metrics judge hits against supports, so the qrels and run handed
to trec_eval live in the *assignment* docno space (what the TREC export writes): a hit assigned
support ``i`` by :func:`assign_judgements` is document ``gold:<i>`` (a grade-0 support too: a
judged non-relevant document, which bpref counts), any other hit ``hit:<rank>``; the qrels list
every support of the query as ``gold:<i>`` with its grade (0 = judged non-relevant). The random
runs have several hits matching one support (many chunks of one gold document), hits matching
several supports (a chunk support and its document's support), supports no hit matches and
grade-0 supports that hits match. trec_eval orders a run by score, so every run gets strictly
decreasing scores in rank order. The qrels hold the queries with a relevant support at the level
— our kernels report the others as not applicable (NaN) — so values are compared on the queries
both evaluate; a query in the qrels without hits is absent from pytrec_eval's output (trec_eval
counts it as 0 with ``-c``), and ours must then be 0.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from kebab_eval_pipeline.metrics.aggregate import aggregate_metrics
from kebab_eval_pipeline.metrics.matching import match_hits
from kebab_eval_pipeline.metrics.retrieval import assign_judgements, retrieval_scores

pytrec_eval = pytest.importorskip("pytrec_eval")
ir_measures = pytest.importorskip("ir_measures")

N_RUNS = 240
TOL = 1e-9


def _frame(rows: list[dict], dtypes: dict[str, str]) -> pd.DataFrame:
    """``pd.DataFrame(rows, columns=list(dtypes)).astype(dtypes)`` (a key a row lacks is missing),
    built column by column: a third of the time, the same frame."""
    columns = {}
    for name, dtype in dtypes.items():
        values = [row.get(name) for row in rows]
        columns[name] = pd.array(values, dtype=dtype) if dtype == "string" else np.array(values, dtype=dtype)
    return pd.DataFrame(columns)


def _random_run(rng: np.random.Generator, level: str, relevance_level: int = 1):
    """One random run: (queries, supports, hits, qrels, trec_run, ks, cutoff, matched) — ``matched``
    is ``match_hits(hits, supports)``, matched once for the assignment space and our scores.

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
    queries = _frame(
        q_rows, {"query_id": "string", "answerable": "bool", "required_support_groups": "object"}
    )
    supports = _frame(
        s_rows,
        {
            "query_id": "string",
            "support_idx": "int64",
            "grade": "int64",
            "chunk_id": "string",
            "doc_id": "string",
        },
    )
    hits = _frame(h_rows, {"query_id": "string", "rank": "int64", "chunk_id": "string", "doc_id": "string"})
    matched = match_hits(hits, supports)
    qrels, run = _assignment_space(supports, hits, relevance_level, matched)
    return queries, supports, hits, qrels, run, ks, cutoff, matched


def _assignment_space(
    supports: pd.DataFrame, hits: pd.DataFrame, relevance_level: int = 1, matched: pd.DataFrame | None = None
):
    """trec_eval's qrels and run in the assignment docno space (see the module docstring);
    ``matched``: ``match_hits(hits, supports)`` when the caller has it."""
    qrels: dict[str, dict[str, int]] = {}
    for q, i, g in zip(supports["query_id"], supports["support_idx"], supports["grade"], strict=True):
        qrels.setdefault(str(q), {})[f"gold:{i}"] = int(g)
    qrels = {q: rel for q, rel in qrels.items() if any(g >= relevance_level for g in rel.values())}
    assigned = assign_judgements(match_hits(hits, supports) if matched is None else matched)
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
        queries, supports, hits, qrels, run, ks, cutoff, matched = _random_run(rng, level)
        ours = retrieval_scores(queries, supports, hits, matched, ks=ks, mrr_cutoff=cutoff)
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
    queries, supports, hits, qrels, run, ks, cutoff, _ = _random_run(rng, "mixed")
    while len(qrels) < 10:
        queries, supports, hits, qrels, run, ks, cutoff, _ = _random_run(rng, "mixed")
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


# ---------------------------------------------------------------------------------------------
# AP, AP@k, R-precision, bpref — and every measure above at relevance level 2 — and judged@k

#: (ours, trec_eval) for the measures without a cut-off, and the @k ones (``{k}`` = the cut-off).
FULL = (("map", "map"), ("rprec", "Rprec"), ("bpref", "bpref"))
AT_K = (
    ("map@{k}", "map_cut_{k}"),
    ("hit@{k}", "success_{k}"),
    ("recall@{k}", "recall_{k}"),
    ("precision@{k}", "P_{k}"),
    ("ndcg@{k}", "ndcg_cut_{k}"),
)


def _note(measure: str, level: int, ours: float, theirs: float) -> None:
    assert abs(ours - theirs) <= TOL, (measure, level, ours, theirs)


@pytest.mark.parametrize("relevance_level", [1, 2])
@pytest.mark.parametrize("level", ["chunk", "doc", "mixed"])
def test_ap_rprec_bpref_agree_with_trec_eval(level: str, relevance_level: int) -> None:
    rng = np.random.default_rng(31337 + 10 * relevance_level + ["chunk", "doc", "mixed"].index(level))
    compared = between = 0
    for _ in range(N_RUNS // 3):
        queries, supports, hits, qrels, run, ks, cutoff, matched = _random_run(rng, level, relevance_level)
        ours = retrieval_scores(
            queries,
            supports,
            hits,
            matched,
            ks=ks,
            mrr_cutoff=cutoff,
            relevance_level=relevance_level,
        ).set_index("query_id")
        cuts = ",".join(map(str, ks))
        measures = {"map", f"map_cut.{cuts}", "Rprec", "bpref", f"success.{cuts}", f"recall.{cuts}"}
        measures |= {f"P.{cuts}", f"ndcg_cut.{cuts}"}
        full = pytrec_eval.RelevanceEvaluator(qrels, measures, relevance_level=relevance_level).evaluate(run)
        cut_run = {q: {d: s for d, s in docs.items() if s > 1000 - cutoff - 0.5} for q, docs in run.items()}
        mrr = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}, relevance_level=relevance_level)
        mrr = mrr.evaluate(cut_run)
        for qid, row in ours.iterrows():
            assert bool(row["applicable"]) == (qid in qrels), (qid, relevance_level)
            if qid not in qrels:
                assert np.isnan(row["map"]) and np.isnan(row["bpref"]) and np.isnan(row["rprec"])
                continue
            _note("mrr", relevance_level, row["mrr"], mrr[qid]["recip_rank"] if qid in mrr else 0.0)
            t = full.get(qid)  # None: no hits (trec_eval -c scores 0)
            for ours_name, theirs in FULL:
                _note(ours_name, relevance_level, row[ours_name], 0.0 if t is None else t[theirs])
            for ours_name, theirs in AT_K:
                for k in ks:
                    value = 0.0 if t is None else t[theirs.format(k=k)]
                    _note(ours_name.split("@")[0] + "@k", relevance_level, row[ours_name.format(k=k)], value)
            between += 0 < row["bpref"] < 1
            compared += 1
    assert compared > 150 and between > 20  # real comparisons, bpref strictly between 0 and 1 often


def test_the_random_runs_hit_judged_non_relevant_supports() -> None:
    """bpref is only exercised if hits are credited with grade-0 supports (judged non-relevant) and,
    at level 2, with grade-1 ones."""
    rng = np.random.default_rng(11)
    grade0 = grade1 = 0
    for _ in range(20):
        _, supports, hits, *_ = _random_run(rng, "mixed")
        assigned = assign_judgements(match_hits(hits, supports))
        grade0 += int((assigned["grade"] == 0).sum())
        grade1 += int((assigned["grade"] == 1).sum())
    assert grade0 > 30 and grade1 > 30


def _judgement_space(
    queries: pd.DataFrame, supports: pd.DataFrame, hits: pd.DataFrame, level: int, m: pd.DataFrame
):
    """ir_measures' qrels and run where every hit is its own document ``h:<rank>`` and the qrels
    judge each hit that matches any support (at the grade of its best match, below 0 as 0), plus
    every support as ``s:<i>`` — for the queries applicable at ``level``. ``m``: the hits matched
    to the supports (``match_hits``)."""
    applicable = {
        str(q) for q, g in zip(supports["query_id"], supports["grade"], strict=True) if g >= level
    } & set(queries.loc[queries["answerable"], "query_id"])
    qrels: dict[str, dict[str, int]] = {q: {} for q in applicable}
    for q, i, g in zip(supports["query_id"], supports["support_idx"], supports["grade"], strict=True):
        if q in applicable:
            qrels[q][f"s:{i}"] = max(int(g), 0)
    for q, r, g in zip(m["query_id"], m["rank"], m["grade"], strict=True):
        if q in applicable:
            qrels[q][f"h:{r}"] = max(qrels[q].get(f"h:{r}", 0), int(g), 0)
    run: dict[str, dict[str, float]] = {}
    for q, r in zip(hits["query_id"], hits["rank"], strict=True):
        run.setdefault(str(q), {})[f"h:{r}"] = float(1000 - int(r))
    return qrels, run


@pytest.mark.parametrize("relevance_level", [1, 2])
def test_judged_at_k_agrees_with_ir_measures(relevance_level: int) -> None:
    """judged@k = ir_measures' Judged@k: judged hits in the top k ÷ min(k, hits returned); a query
    of the qrels without hits scores 0 (ir_measures fills every qrels query the run lacks with the
    measure's default, 0, like trec_eval -c)."""
    rng = np.random.default_rng(4242 + relevance_level)
    compared = partial = short = empty = 0
    for _ in range(N_RUNS // 3):
        level = str(rng.choice(["chunk", "doc", "mixed"]))
        queries, supports, hits, _, _, ks, _, matched = _random_run(rng, level)
        ours = retrieval_scores(
            queries, supports, hits, matched, ks=ks, relevance_level=relevance_level
        ).set_index("query_id")
        qrels, run = _judgement_space(queries, supports, hits, relevance_level, matched)
        theirs: dict[tuple[str, int], float] = {}
        measures = [ir_measures.Judged @ k for k in ks]
        for metric in ir_measures.iter_calc(measures, qrels, run):
            theirs[(metric.query_id, metric.measure["cutoff"])] = metric.value
        for qid, row in ours.iterrows():
            for k in ks:
                value = row[f"judged@{k}"]
                if (qid, k) not in theirs:
                    assert not row["applicable"] and np.isnan(value), (qid, k)
                    continue
                _note("judged@k", relevance_level, value, theirs[(qid, k)])
                partial += 0 < value < 1
                short += 0 < int(row["n_hits"]) < k
                empty += int(row["n_hits"]) == 0
                compared += 1
    assert compared > 1000 and partial > 100 and short > 100 and empty > 10
