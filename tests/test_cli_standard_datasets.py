"""Standard IR files in, trec_eval's numbers out: TREC topics + qrels as the golden set and a TREC
(or ranx) run replayed through the real CLI, exported with `export --format trec`, re-scored by
pytrec_eval — the same per-query values as pytrec_eval on the original files.

The data set is random but realistic: 50 queries, graded qrels 0-3 with judged non-relevant
(rel 0) documents, queries whose judgments are all rel 0, run scores rounded so that ties are
common (trec_eval breaks them by docno, descending), file ranks that disagree with the score
order on some queries, and one judged query missing from the run."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from kebab_eval_pipeline.store.runs import RunStore
from tests.test_cli import cli, cli_env, no_traceback

pytrec_eval = pytest.importorskip("pytrec_eval")
ir_measures = pytest.importorskip("ir_measures")

MEASURES = ("map", "ndcg", "ndcg_cut_10", "recip_rank", "P_5", "recall_100", "bpref")
#: Our per-query column for each trec_eval measure (mrr with mrr_cutoff 100 = the run's depth).
OURS = {
    "map": "map",
    "ndcg": "ndcg@100",
    "ndcg_cut_10": "ndcg@10",
    "recip_rank": "mrr",
    "P_5": "precision@5",
    "recall_100": "recall@100",
    "bpref": "bpref",  # counts judged non-relevant (rel 0) documents: they must stay judged
}
N_QUERIES = 50
MISSING = "q049"  # judged, absent from the run
NO_RELEVANT = ("q007", "q023", "q031")  # every judgment rel 0
UNJUDGED_TOPICS = ("q900", "q901")  # in the topics file, never judged


def _dataset(rng: np.random.Generator):
    """(topics, qrels {qid: {doc: rel}}, run {qid: [(doc, rank, score)]})."""
    topics = {
        f"q{i:03d}": f"topic {i} about {rng.choice(['crime', 'polio', 'hubble', 'ozone'])}"
        for i in range(N_QUERIES)
    }
    topics.update({q: f"unjudged {q}" for q in UNJUDGED_TOPICS})
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, list[tuple[str, int, float]]] = {}
    for i in range(N_QUERIES):
        qid = f"q{i:03d}"
        pool = [f"D{rng.integers(0, 400):04d}-{j}" for j in range(int(rng.integers(20, 60)))]
        judged = rng.choice(pool, size=int(rng.integers(3, 15)), replace=False)
        grades = rng.choice([0, 0, 1, 1, 2, 3], size=len(judged))
        if qid in NO_RELEVANT:
            grades[:] = 0
        qrels[qid] = {str(d): int(g) for d, g in zip(judged, grades, strict=True)}
        if qid == MISSING:
            continue
        depth = int(rng.integers(5, min(len(pool), 100)))
        found = [d for d in judged if rng.random() < 0.7]  # most judged documents are retrieved
        others = [d for d in rng.permutation(pool) if d not in found]
        docs = np.array((found + others)[:depth])
        gain = np.array([qrels[qid].get(str(d), 0) for d in docs])
        scores = np.round(rng.uniform(0, 2, size=depth) + 0.6 * gain, 1)  # one decimal: many ties
        # trec_eval's order: score descending, ties by docno descending
        order = sorted(sorted(range(depth), key=lambda j: docs[j], reverse=True), key=lambda j: -scores[j])
        ranks = np.empty(depth, dtype=int)
        ranks[order] = np.arange(1, depth + 1)
        if i % 5 == 0:  # ranks that disagree with the score order (trec_eval ignores them)
            ranks = rng.permutation(ranks)
        run[qid] = [(str(d), int(r), float(s)) for d, r, s in zip(docs, ranks, scores, strict=True)]
    return topics, qrels, run


def _write(folder: Path, topics, qrels, run) -> dict[str, Path]:
    folder.mkdir()
    paths = {
        name: folder / name for name in ("topics.tsv", "qrels.txt", "run.trec", "qrels.json", "run.json")
    }
    paths["topics.tsv"].write_text("".join(f"{q}\t{t}\n" for q, t in topics.items()))
    paths["qrels.txt"].write_text(
        "".join(f"{q} 0 {d} {r}\n" for q, docs in qrels.items() for d, r in docs.items())
    )
    paths["run.trec"].write_text(
        "".join(
            f"{q} Q0 {d} {r} {s} tag\n"
            for q, rows in run.items()
            for d, r, s in sorted(rows, key=lambda x: x[1])
        )
    )
    paths["qrels.json"].write_text(json.dumps(qrels, indent=1))
    paths["run.json"].write_text(
        json.dumps({q: {d: s for d, _, s in rows} for q, rows in run.items()}, indent=1)
    )
    return paths


def _config(folder: Path, name: str, queries: str, qrels: str, run: str, fmt: str) -> Path:
    path = folder / name
    path.write_text(
        f"golden: {{queries: {queries}, qrels: {qrels}}}\n"
        f"system: {{kind: replay, path: {run}, format: {fmt}}}\n"
        "k: [5, 10, 100]\nmrr_cutoff: 100\nanswers: false\nsystem_health: null\ndefault_gates: false\n"
    )
    return path


def _evaluate(qrels: dict, run: dict) -> dict:
    return pytrec_eval.RelevanceEvaluator(qrels, set(MEASURES)).evaluate(run)


@pytest.fixture(scope="module")
def roundtrip(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("standard")
    env = cli_env(tmp)
    topics, qrels, run = _dataset(np.random.default_rng(27))
    paths = _write(tmp / "data", topics, qrels, run)
    results = {}
    for fmt, qrels_file, run_file in (("trec", "qrels.txt", "run.trec"), ("ranx", "qrels.json", "run.json")):
        config = _config(tmp / "data", f"{fmt}.yaml", "topics.tsv", qrels_file, run_file, fmt)
        ran = cli(env, "run", "--run-id", f"std-{fmt}", "--config", str(config))
        assert ran.returncode == 0, ran.stderr
        no_traceback(ran)
        out = tmp / f"{fmt}.trec"
        exported = cli(env, "export", f"std-{fmt}", "--format", "trec", "--out", str(out))
        assert exported.returncode == 0, exported.stderr
        tables, _ = RunStore(Path(env["DAGSTER_HOME"]) / "kebab-eval" / "artifacts").read(
            "query_scores", f"std-{fmt}"
        )
        results[fmt] = (ran, out, tables["query_scores"].set_index("query_id"))
    return paths, qrels, run, results


def test_the_files_written_are_standard(roundtrip):
    """ir_measures, an independent parser, reads the qrels and run as pytrec_eval does."""
    paths, qrels, run, _ = roundtrip
    parsed_qrels = {}
    for q in ir_measures.read_trec_qrels(str(paths["qrels.txt"])):
        parsed_qrels.setdefault(q.query_id, {})[q.doc_id] = q.relevance
    assert parsed_qrels == qrels
    parsed_run = {}
    for r in ir_measures.read_trec_run(str(paths["run.trec"])):
        parsed_run.setdefault(r.query_id, {})[r.doc_id] = r.score
    assert parsed_run == {q: {d: s for d, _, s in rows} for q, rows in run.items()}


def test_export_rescored_by_trec_eval_equals_trec_eval_on_the_originals(roundtrip):
    _, qrels, run, results = roundtrip
    original = _evaluate(qrels, {q: {d: s for d, _, s in rows} for q, rows in run.items()})
    _, out, _ = results["trec"]
    with out.with_name(out.name + ".qrels").open() as f:
        exported_qrels = pytrec_eval.parse_qrel(f)
    with out.open() as f:
        exported_run = pytrec_eval.parse_run(f)
    rescored = _evaluate(exported_qrels, exported_run)
    # The export's qrels hold the queries with a relevant judgment; the all-rel-0 queries are not
    # applicable to us (null), while trec_eval scores them 0 on the originals.
    relevant = {q for q, docs in qrels.items() if any(r >= 1 for r in docs.values())}
    assert set(exported_qrels) == relevant and len(relevant) == N_QUERIES - len(NO_RELEVANT)
    assert all(original[q]["map"] == 0 for q in NO_RELEVANT)
    assert MISSING not in exported_run and MISSING not in original  # no run lines: not in either run
    common = sorted(set(original) & set(rescored))
    assert len(common) == len(relevant) - 1  # all but the query missing from the run
    worst = 0.0
    for qid in common:
        for m in MEASURES:
            worst = max(worst, abs(original[qid][m] - rescored[qid][m]))
    assert worst <= 1e-9, worst
    # the measures are not all trivially 0 or 1
    assert 0.2 < np.mean([original[q]["map"] for q in common]) < 0.9


def test_our_per_query_scores_equal_trec_eval_on_the_originals(roundtrip):
    _, qrels, run, results = roundtrip
    original = _evaluate(qrels, {q: {d: s for d, _, s in rows} for q, rows in run.items()})
    _, _, scores = results["trec"]
    assert scores.loc[MISSING, "error_class"] == "missing_in_trace"
    assert not scores.loc[list(NO_RELEVANT), "applicable"].any()
    applicable = scores[scores["applicable"]]
    assert len(applicable) == N_QUERIES - len(NO_RELEVANT)
    for qid, row in applicable.iterrows():
        theirs = original.get(qid, dict.fromkeys(MEASURES, 0.0))  # the missing query: 0 (trec_eval -c)
        for measure, ours in OURS.items():
            assert math.isclose(row[ours], theirs[measure], abs_tol=1e-4), (
                qid,
                measure,
                row[ours],
                theirs[measure],
            )


def test_judged_at_k_counts_rel_0_judgments_as_ir_measures_does(roundtrip):
    """A rel-0 judgment stays a judgment: judged@10 equals ir_measures' Judged@10 on the originals.

    ir_measures' Judged (pure Python) breaks score ties by docno *ascending*, unlike trec_eval, so
    it is given the run in trec_eval's order as tie-free scores (the order is tested above)."""
    _, qrels, run, results = roundtrip
    scores = results["trec"][2]
    in_trec_order = {}
    for q, rows in run.items():
        ordered = sorted(sorted(rows, key=lambda r: r[0], reverse=True), key=lambda r: -r[2])
        in_trec_order[q] = {d: float(len(ordered) - i) for i, (d, _, _) in enumerate(ordered)}
    judged = {
        m.query_id: m.value for m in ir_measures.iter_calc([ir_measures.Judged @ 10], qrels, in_trec_order)
    }
    applicable = scores[scores["applicable"]].drop(MISSING)
    assert set(applicable.index) <= set(judged)
    for qid, row in applicable.iterrows():
        assert math.isclose(row["judged@10"], judged[qid], abs_tol=1e-4), qid
    rel0_hits = sum(1 for q, rows in run.items() for d, _, _ in rows if qrels[q].get(d) == 0)
    assert rel0_hits > 20  # the run does retrieve judged non-relevant documents


def test_ranx_files_score_as_the_trec_files(roundtrip):
    _, _, _, results = roundtrip
    trec, ranx = results["trec"][2], results["ranx"][2]
    columns = [*OURS.values(), "judged@10"]
    assert (trec[columns].fillna(-1) == ranx[columns].fillna(-1)).all().all()


def test_the_run_warns_about_unjudged_topics_and_disagreeing_ranks(roundtrip):
    _, _, _, results = roundtrip
    ran = results["trec"][0]
    assert "2 queries have no judgments in qrels.txt: left out of the golden set (as BEIR does)" in ran.stderr
    assert "10 queries list ranks that disagree with trec_eval's order" in ran.stderr
    assert "list ranks" not in results["ranx"][0].stderr  # a ranx run has no rank column
