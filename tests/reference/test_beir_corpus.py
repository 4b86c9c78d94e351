"""A BEIR-layout dataset end to end: docs/examples/beir/ (corpus.jsonl from the bundled kebab
component READMEs, one document per section; queries.jsonl; graded qrels/test.tsv and dev.tsv)
evaluated by the reference system in lexical mode through the real CLI, its stored metrics
checked by hand and its TREC export re-scored by pytrec_eval; and the corpus reader's errors."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.reference.beir import beir_corpus_file, read_beir_corpus
from kebab_eval_pipeline.reference.index import ReferenceIndex
from kebab_eval_pipeline.store.runs import RunStore
from tests.test_cli import cli, cli_env, no_traceback

pytrec_eval = pytest.importorskip("pytrec_eval")

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "beir"


@pytest.fixture(scope="module")
def beir_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("beir")
    env = cli_env(tmp)
    ran = cli(env, "run", "--run-id", "beir-1", "--config", str(EXAMPLE / "lexical.yaml"))
    assert ran.returncode == 0, ran.stderr
    no_traceback(ran)
    out = tmp / "beir.trec"
    exported = cli(env, "export", "beir-1", "--format", "trec", "--out", str(out))
    assert exported.returncode == 0, exported.stderr
    store = RunStore(Path(env["DAGSTER_HOME"]) / "kebab-eval" / "artifacts")
    scores = store.read("query_scores", "beir-1")[0]["query_scores"].set_index("query_id")
    hits = store.read("retrieval_results", "beir-1")[0]["hits"]
    return env, ran, out, scores, hits


def test_beir_folder_scored_by_the_reference_system(beir_run):
    _, ran, _, scores, hits = beir_run
    # 23 queries, 2 never judged (left out), q21 judged only rel 0 (not applicable): 21 and 20.
    assert "2 queries have no judgments in test.tsv" in ran.stderr
    assert len(scores) == 21 and int(scores["applicable"].sum()) == 20
    assert not scores.loc["q21", "applicable"]
    assert "match: auto → doc (21 queries)" in ran.stdout
    # Hits carry the BEIR ids (doc_id = _id), so the qrels' corpus-ids match them.
    corpus_ids = {json.loads(line)["_id"] for line in (EXAMPLE / "corpus.jsonl").read_text().splitlines()}
    assert set(hits["doc_id"]) <= corpus_ids and len(set(hits["doc_id"])) > 20
    # Hand-worked: the first relevant hit is at rank 1 for 17 queries and rank 2 for q01, q18,
    # q19 → MRR (17 + 3 / 2) / 20 = 0.925, hit@1 17 / 20, hit@5 1.
    applicable = scores[scores["applicable"]]
    second = sorted(applicable.index[applicable["first_relevant_rank"] == 2])
    assert second == ["q01", "q18", "q19"]
    assert (applicable["first_relevant_rank"].drop(second) == 1).all()
    assert math.isclose(applicable["mrr"].mean(), 0.925)
    assert math.isclose(applicable["hit@1"].mean(), 0.85) and applicable["hit@5"].mean() == 1.0


def test_beir_export_rescored_by_trec_eval(beir_run):
    _, _, out, scores, _ = beir_run
    with out.with_name(out.name + ".qrels").open() as f:
        qrels = pytrec_eval.parse_qrel(f)
    with out.open() as f:
        run = pytrec_eval.parse_run(f)
    measures = {"recip_rank", "success_1", "P_5", "recall_5", "ndcg_cut_10", "map"}
    theirs = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    applicable = scores[scores["applicable"]]
    assert set(theirs) == set(applicable.index)
    pairs = {
        "recip_rank": "mrr",
        "success_1": "hit@1",
        "P_5": "precision@5",
        "recall_5": "recall@5",
        "ndcg_cut_10": "ndcg@10",
        "map": "map",
    }
    for qid, row in applicable.iterrows():
        for measure, ours in pairs.items():
            assert math.isclose(row[ours], theirs[qid][measure], abs_tol=1e-4), (qid, measure)
    # the graded judgments count: ndcg@10 is below 1 where a rel-1 document outranks a rel-2 one
    assert applicable["ndcg@10"].min() < 0.9 < applicable["ndcg@10"].max()


def test_split_and_corpus_file_selectable(beir_run, tmp_path):
    env = beir_run[0]
    converted = cli(env, "golden", "convert", str(EXAMPLE), "--split", "dev")
    assert converted.returncode == 0, converted.stderr
    assert [line for line in converted.stdout.splitlines() if line.startswith("- id:")] == [
        "- id: q01",
        "- id: q09",
        "- id: q13",
    ]
    assert "name: beir-dev" in converted.stdout
    missing = cli(env, "golden", "validate", str(EXAMPLE), "--split", "train")
    assert (
        missing.returncode == 2 and "no qrels for split 'train'; this folder has: dev, test" in missing.stderr
    )
    assert beir_corpus_file(EXAMPLE) == EXAMPLE / "corpus.jsonl"
    assert beir_corpus_file(EXAMPLE / "corpus.jsonl") == EXAMPLE / "corpus.jsonl"
    assert beir_corpus_file(EXAMPLE / "qrels") is None


def test_corpus_documents_are_lines_with_title_then_text(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        json.dumps({"_id": "d1", "title": "Install", "text": "Run the installer.\nThen reboot."})
        + "\n\n"
        + json.dumps({"_id": 7, "title": "", "text": "untitled body"})
        + "\n"
    )
    first, second = read_beir_corpus(corpus)
    assert (first.doc_id, first.rel_path, first.kind) == ("d1", "d1", "text")
    assert first.lines == ["Install", "", "Run the installer.", "Then reboot."]
    assert (second.doc_id, second.lines, second.title) == ("7", ["untitled body"], "7")
    index = ReferenceIndex.build(corpus)
    hit = index.search("installer reboot", k=1)[0]
    assert (hit.doc_id, hit.doc_path) == ("d1", "d1")


def test_bad_corpus_lines_are_all_listed(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        '{"_id": "a", "text": "x"}\n'
        "not json\n"
        '{"title": "no id", "text": "y"}\n'
        '{"_id": "b", "text": 3}\n'
        '{"_id": "a", "text": "again"}\n'
    )
    with pytest.raises(InputError) as exc:
        read_beir_corpus(corpus)
    got = [(o.position, o.field) for o in exc.value.offenders]
    assert got == [("line 2", None), ("line 3", "_id"), ("line 4", "text"), ("line 5", "_id")]
    assert "given twice (first at line 1)" in exc.value.offenders[-1].reason
