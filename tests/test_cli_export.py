"""`kebab-eval export --format trec` end to end: trec_eval on the files equals the stored scores,
and a run stored under the old metric names (before scoring version 2) still loads, compares and
exports. Real subprocesses, a real artifact store."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from kebab_eval_pipeline.store.runs import RunStore
from tests.test_cli import cli, cli_env, no_traceback

pytrec_eval = pytest.importorskip("pytrec_eval")

KS = (1, 3, 5, 10)


@pytest.fixture
def env(tmp_path):
    return cli_env(tmp_path)


def _store(env) -> RunStore:
    return RunStore(Path(env["DAGSTER_HOME"]) / "kebab-eval" / "artifacts")


def _trec_eval(run: Path, qrels: Path, cutoff: int, level: int = 1) -> tuple[dict, dict, dict]:
    with qrels.open() as f:
        judged = pytrec_eval.parse_qrel(f)
    with run.open() as f:
        ranked = pytrec_eval.parse_run(f)
    rank_of = {(q, d): int(r) for q, _, d, r, *_ in (line.split() for line in run.read_text().splitlines())}
    cut = {q: {d: s for d, s in docs.items() if rank_of[(q, d)] <= cutoff} for q, docs in ranked.items()}
    cuts = ",".join(map(str, KS))
    measures = {f"success.{cuts}", f"P.{cuts}", f"ndcg_cut.{cuts}", f"recall.{cuts}", f"map_cut.{cuts}"}
    measures |= {"map", "Rprec", "bpref"}
    full = pytrec_eval.RelevanceEvaluator(judged, measures, relevance_level=level).evaluate(ranked)
    mrr = pytrec_eval.RelevanceEvaluator(judged, {"recip_rank"}, relevance_level=level).evaluate(cut)
    return judged, full, mrr


def test_demo_export_is_rescored_identically_by_trec_eval(env, tmp_path):
    """Before: MRR 0.6985 in the run, 0.0000 from pytrec_eval on its export. After: equal per query."""
    ran = cli(env, "run", "--run-id", "demo-1")
    assert ran.returncode == 0, ran.stderr
    out = tmp_path / "demo.trec"
    exported = cli(env, "export", "demo-1", "--format", "trec", "--out", str(out))
    assert exported.returncode == 0, exported.stderr
    no_traceback(exported)
    qrels, legend = out.with_name("demo.trec.qrels"), out.with_name("demo.trec.docnos.tsv")
    assert len(qrels.read_text().splitlines()) == len(set(qrels.read_text().splitlines()))
    assert (
        legend.read_text().splitlines()[0]
        == "qid\trank\tdocno\tchunk_id\tdoc_path\theading_path\tsupport_idx"
    )

    tables, info = _store(env).read("query_scores", "demo-1")
    assert info["scoring_version"] == 2
    scores = tables["query_scores"].set_index("query_id")
    judged, full, mrr = _trec_eval(out, qrels, int(info["mrr_cutoff"]))
    applicable = scores[scores["applicable"]]
    assert set(judged) == set(applicable.index)
    assert applicable["mrr"].mean() > 0.5  # the demo finds things: a zero re-score would show here
    assert applicable["bpref"].mean() > 0.5 and applicable["map"].mean() > 0.5
    for qid, row in applicable.iterrows():
        assert abs(row["mrr"] - mrr.get(qid, {"recip_rank": 0.0})["recip_rank"]) <= 1e-4, qid
        t = full.get(qid, {})
        for ours, theirs in (("map", "map"), ("rprec", "Rprec"), ("bpref", "bpref")):
            assert abs(row[ours] - t.get(theirs, 0.0)) <= 1e-4, (qid, ours)
        for k in KS:
            for ours, theirs in (
                ("hit", "success"),
                ("precision", "P"),
                ("ndcg", "ndcg_cut"),
                ("recall", "recall"),
                ("map", "map_cut"),
            ):
                assert abs(row[f"{ours}@{k}"] - t.get(f"{theirs}_{k}", 0.0)) <= 1e-4, (qid, ours, k)


def _to_old_shape(store: RunStore, run_id: str) -> None:
    """Rewrite a stored run as it was stored before scoring version 2: document recall under
    ``recall@k``, no support recall, no ``scoring_version``."""

    def rename(names):
        return {f"doc_recall@{k}": f"recall@{k}" for k in KS} | {
            n: n for n in names if n not in {f"doc_recall@{k}" for k in KS}
        }

    tables, info = store.read("query_scores", run_id)
    qs = tables["query_scores"].drop(columns=[f"recall@{k}" for k in KS])
    tables["query_scores"] = qs.rename(columns=rename(qs.columns))
    for name, column in (("summary_metrics", "metric"), ("summary_breakdowns", "metric")):
        t = tables[name]
        t = t[~t[column].isin([f"recall@{k}" for k in KS])].copy()
        t[column] = t[column].map(lambda m: rename([m]).get(m, m))
        tables[name] = t.reset_index(drop=True)
    store.write("query_scores", run_id, tables, {k: v for k, v in info.items() if k != "scoring_version"})
    tables, info = store.read("run_metrics", run_id)
    for name in ("metrics", "breakdowns"):
        t = tables[name]
        t = t[~t["metric"].isin([f"recall@{k}" for k in KS])].copy()
        t["metric"] = t["metric"].map(lambda m: rename([m]).get(m, m))
        tables[name] = t.reset_index(drop=True)
    store.write("run_metrics", run_id, tables, {k: v for k, v in info.items() if k != "scoring_version"})


def test_a_run_stored_with_the_old_recall_name_loads_compares_and_exports(env, tmp_path):
    for run_id in ("old", "new"):
        ran = cli(env, "run", "--run-id", run_id, "--baseline", "none")
        assert ran.returncode == 0, ran.stderr
    store = _store(env)
    new_scores = store.read("query_scores", "new")[0]["query_scores"].set_index("query_id")
    new_metrics = dict(
        zip(*(store.read("run_metrics", "new")[0]["metrics"][c] for c in ("metric", "value")), strict=True)
    )
    _to_old_shape(store, "old")
    raw = store.read("query_scores", "old")[0]["query_scores"]
    assert "doc_recall@5" not in raw and "recall@5" in raw  # really the old shape on disk

    old = store.stored_run("old")
    # the old document recall reads as doc_recall@k; recall@k (support recall) was never computed
    assert "recall@5" not in old.scores.scores and "recall@5" not in old.metrics.metrics
    assert old.scores.scores.set_index("query_id")["doc_recall@5"].equals(new_scores["doc_recall@5"])
    assert old.metrics.metrics["doc_recall@5"] == new_metrics["doc_recall@5"]
    assert "doc_recall@5" in set(old.metrics.breakdowns["metric"]) and "recall@5" not in set(
        old.metrics.breakdowns["metric"]
    )
    assert old.scores.summary.metrics["doc_recall@5"] == new_metrics["doc_recall@5"]

    history = cli(env, "history", "--metric", "recall@5", "--metric", "doc_recall@5", "--csv")
    assert history.returncode == 0, history.stderr
    rows = {line.split(",")[0]: line.split(",") for line in history.stdout.splitlines()[1:]}
    assert rows["old"][-2] == "null" and float(rows["old"][-1]) == new_metrics["doc_recall@5"]

    compared = cli(env, "compare", "old", "new", "--json")
    assert compared.returncode == 0, compared.stderr
    report = json.loads(compared.stdout)
    assert report["scoring_versions"] == {"a": 1, "b": 2}
    assert any("'old'" in w and "re-scored" in w for w in report["warnings"]), report["warnings"]
    # re-scored from its stored hits: the same system gives the same numbers under today's definitions
    for metric in ("recall@5", "doc_recall@5", "precision@5", "ndcg@10", "mrr"):
        a, b = report["metrics_a"][metric], report["metrics_b"][metric]
        assert a is not None and math.isclose(a, b, abs_tol=1e-12), metric
    assert set(report["verdict_counts"]) and report["verdict_counts"].get("regression", 0) == 0

    for fmt in ("json", "trec"):
        out = tmp_path / f"old.{fmt}"
        exported = cli(env, "export", "old", "--format", fmt, "--out", str(out))
        assert exported.returncode == 0, exported.stderr
        no_traceback(exported)
    doc = json.loads((tmp_path / "old.json").read_text())
    assert "doc_recall@5" in doc["metrics"] and "recall@5" not in doc["metrics"]
    assert pd.Series([q["scores"].get("doc_recall@5") for q in doc["per_query"]]).notna().any()
    new_trec = tmp_path / "new.trec"
    assert cli(env, "export", "new", "--format", "trec", "--out", str(new_trec)).returncode == 0
    assert (tmp_path / "old.trec.qrels").read_text() == new_trec.with_name("new.trec.qrels").read_text()
    assert [line.split()[:5] for line in (tmp_path / "old.trec").read_text().splitlines()] == [
        line.split()[:5] for line in new_trec.read_text().splitlines()
    ]


def test_the_relevance_level_is_recorded_shown_exported_and_compared(env, tmp_path):
    """``relevance_level: 2`` on the demo (every gold support has the default grade 1): nothing is
    relevant, so every retrieval metric is null (never 0), and the level travels with the run."""
    config = tmp_path / "level2.yaml"
    config.write_text("relevance_level: 2\nbaseline: none\n")
    for run_id, extra in (("l1", ()), ("l2", ("--config", str(config)))):
        ran = cli(env, "run", "--run-id", run_id, "--baseline", "none", *extra)
        assert ran.returncode == 0, ran.stderr
    assert "relevant: grade ≥ 2" in ran.stdout  # beside the match criterion
    store = _store(env)
    assert store.read("query_scores", "l2")[1]["relevance_level"] == 2
    assert store.read("run_metrics", "l2")[1]["relevance_level"] == 2
    assert store.read("run_metrics", "l1")[1]["relevance_level"] == 1

    out = tmp_path / "l2.json"
    assert cli(env, "export", "l2", "--format", "json", "--out", str(out)).returncode == 0
    doc = json.loads(out.read_text())
    assert doc["relevance_level"] == 2 and doc["metrics"]["n_applicable"] == 0
    for metric in ("mrr", "map", "map@10", "rprec", "bpref", "judged@5", "ndcg@10"):
        assert doc["metrics"][metric] is None, metric
    trec = tmp_path / "l2.trec"
    assert cli(env, "export", "l2", "--format", "trec", "--out", str(trec)).returncode == 0
    assert trec.with_name("l2.trec.qrels").read_text() == ""  # no query has a relevant support

    compared = cli(env, "compare", "l1", "l2", "--json")
    assert compared.returncode == 0, compared.stderr
    warnings = json.loads(compared.stdout)["warnings"]
    assert any("different relevance levels (a: grade ≥ 1, b: grade ≥ 2)" in w for w in warnings), warnings
