"""OpenInference traces from the real instrumentors, replayed — with the installed library versions.

``otel_traces.py`` traces offline LlamaIndex and Haystack 2 pipelines with
``openinference-instrumentation-llama-index`` / ``-haystack`` and writes OTLP JSON (protobuf's
base64 JSON, hex JSON lines, and a pretty-printed request per span as the SDK exports them).
Here, in subprocesses (the instrumentors patch the libraries globally, so they stay out of the
test process):

* the committed fixtures are regenerated and the replay reader gives, per query, the hits (ids,
  scores, in order) and answers each pipeline returned directly — so CI exercises whatever
  instrumentor versions the ``frameworks`` extra installs today;
* the 60 questions of ``tests/data/kebab_docs_haystack_golden.yaml`` go through the traced
  Haystack BM25 pipeline over kebab-docs (``haystack_app.App``'s index, 200 words per chunk);
  the reader gives the hits it returned (hex JSON lines, matched by ``metadata.query_id``), and
  ``kebab-eval run`` on the traces (base64 JSON, matched by question) scores every query exactly as
  the same pipeline run live through the persistent command adapter does, and MRR / hit@10
  equal an independent computation from the raw Haystack hits.

Skips without the corpus or the ``frameworks`` extra, unless ``KEBAB_EVAL_REQUIRE_FRAMEWORKS=1``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kebab_eval_pipeline.systems.openinference import normalise_question
from kebab_eval_pipeline.systems.replay import read_trace
from tests.frameworks.test_haystack_system import (
    APP,
    BIG,
    GOLDEN,
    TOL,
    anchor_ranks,
    cli,
    export,
    find_corpus,
    golden_queries,
    no_traceback,
    per_query,
    render,
)
from tests.systems.adapters.test_replay_adapter import Scored

HERE = Path(__file__).resolve().parent
GENERATOR = HERE / "otel_traces.py"
NEEDED = (
    "haystack",
    "llama_index.core",
    "llama_index.retrievers.bm25",
    "openinference.instrumentation.llama_index",
    "openinference.instrumentation.haystack",
    "opentelemetry.sdk",
    "opentelemetry.exporter.otlp.proto.common",
)
RETRIEVAL_METRICS = (
    "mrr",
    *(f"{m}@{k}" for m in ("hit", "recall", "precision", "ndcg") for k in (1, 3, 5, 10)),
)


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


def needs_frameworks(corpus_too: bool) -> Path | None:
    missing = [m for m in NEEDED if not _installed(m)]
    corpus = find_corpus()
    if corpus_too and corpus is None:
        missing.append("the kebab-docs corpus (shared/corpora/kebab-docs)")
    if missing:
        message = f"OpenInference trace test needs {', '.join(missing)} (pip install -e '.[frameworks]')"
        if os.environ.get("KEBAB_EVAL_REQUIRE_FRAMEWORKS") == "1":
            pytest.fail(f"KEBAB_EVAL_REQUIRE_FRAMEWORKS=1 but the {message}")
        pytest.skip(message)
    return corpus


def generate(*args: str) -> None:
    env = {**os.environ, "HAYSTACK_TELEMETRY_ENABLED": "False"}
    proc = subprocess.run(
        [sys.executable, str(GENERATOR), *args], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


def hits_of(record) -> list[list]:
    return [[h["chunk_id"], h["score"]] for h in record.raw_hits]


# -- the committed fixtures, regenerated --------------------------------------------------------


def test_regenerated_fixtures_read_as_the_pipelines_returned(tmp_path):
    needs_frameworks(corpus_too=False)
    generate("fixtures", str(tmp_path))
    expected = json.loads((tmp_path / "expected.json").read_text(encoding="utf-8"))
    print("traced with", expected["versions"])
    for framework in ("llamaindex", "haystack"):
        for encoding in ("b64.json", "hex.jsonl", "sdk.json"):
            path = tmp_path / f"{framework}_{encoding}"
            by_question, *_ = read_trace(path, "auto", "question")
            by_id, *_ = read_trace(path, "auto", "metadata.query_id")
            for qid, direct in expected[framework].items():
                for record in (by_id[qid], by_question[normalise_question(direct["question"])]):
                    if direct["error"]:
                        assert "refuses questions that explode" in record.error, (framework, qid)
                        continue
                    assert hits_of(record) == direct["hits"], (framework, encoding, qid)
                    assert record.raw_answer["text"] == direct["answer"], (framework, encoding, qid)
                    assert record.error is None


# -- the golden set end to end ----------------------------------------------------------------


@pytest.fixture(scope="module")
def corpus() -> Path:
    return needs_frameworks(corpus_too=True).resolve()  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("otel")


@pytest.fixture(scope="module")
def env(work) -> dict[str, str]:
    home = work / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("KEBAB_EVAL_", "DAGSTER_"))}
    environment["DAGSTER_HOME"] = str(home)
    environment["HAYSTACK_TELEMETRY_ENABLED"] = "False"
    return environment


@pytest.fixture(scope="module")
def traced(corpus, work) -> dict[str, dict]:
    """The golden questions through the traced pipeline: ``{query_id: what it returned}``."""
    generate("golden", str(corpus), str(GOLDEN), str(BIG), str(work))
    return json.loads((work / "direct.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def replayed(corpus, work, env, traced) -> dict:
    """The export of ``kebab-eval run`` on the traces (base64 JSON, matched by question)."""
    config = render(
        "haystack_traces.yaml",
        work,
        "traces",
        trace=str(work / "haystack_b64.json"),
        match_by="question",
        corpus=str(corpus),
    )
    proc = cli(env, "run", "--config", str(config), "--run-id", "traces", "--baseline", "none")
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    no_traceback(proc)
    return export(env, "traces")


@pytest.fixture(scope="module")
def live(corpus, work) -> Scored:
    """The same pipeline evaluated live: haystack_app.py through the persistent command adapter,
    run with the pipeline functions the assets call (in-process: one CLI start-up less)."""
    config = render(
        "haystack_jsonl.yaml",
        work,
        "live",
        python=sys.executable,
        app=str(APP),
        corpus=str(corpus),
        chunk_size=str(BIG),
    )
    return Scored(yaml.safe_load(config.read_text(encoding="utf-8")))


def test_the_reader_gives_the_hits_the_pipeline_returned(work, traced):
    records, _, _, warnings, _ = read_trace(work / "haystack_hex.jsonl", "auto", "metadata.query_id")
    assert set(records) == set(traced) and len(records) == 60
    for qid, direct in traced.items():
        assert direct["error"] is None and len(direct["hits"]) == 10
        assert hits_of(records[qid]) == direct["hits"], qid
        assert records[qid].raw_answer["text"] == direct["answer"], qid
    # two golden questions may share a text; by question both get the one trace
    questions = [q["query"] for q in golden_queries()]
    assert len({normalise_question(q) for q in questions}) == len(questions)
    assert warnings == []


def test_replayed_traces_score_as_the_live_pipeline(replayed, live):
    rows = per_query(replayed)
    assert set(rows) == set(live.per_query.index) and len(rows) == 60
    for qid, row in rows.items():
        assert row["error"] is None, (qid, row["error"])
        assert [h["chunk_id"] for h in row["hits"]] == live.hits(qid)["chunk_id"].tolist(), qid
        assert [h["heading_path"] for h in row["hits"]] == [
            list(h) for h in live.hits(qid)["heading_path"]
        ], qid
        for name in RETRIEVAL_METRICS:
            expected = live.per_query.loc[qid, name]
            if expected is None or expected != expected:  # unanswerable: not scored
                assert row["scores"].get(name) is None, (qid, name)
            else:
                assert row["scores"][name] == pytest.approx(expected, abs=TOL), (qid, name)
    for name in RETRIEVAL_METRICS:
        assert replayed["metrics"][name] == pytest.approx(live.metrics[name], abs=TOL), name


def test_replayed_metrics_equal_an_independent_computation(replayed, corpus):
    """MRR and hit@10 from the raw Haystack hits matched by hand (test_haystack_system's oracle)."""
    sys.path.insert(0, str(HERE))
    try:
        from haystack_app import App
    finally:
        sys.path.remove(str(HERE))
    ranks = anchor_ranks(App(corpus, BIG), corpus)
    mrr = sum(1 / r for r in ranks.values() if r) / len(ranks)
    hit10 = sum(r is not None for r in ranks.values()) / len(ranks)
    print(f"traced Haystack BM25, {len(ranks)} answerable queries: MRR {mrr:.4f}, hit@10 {hit10:.4f}")
    metrics = replayed["metrics"]
    assert metrics["mrr"] == pytest.approx(mrr, abs=TOL)
    assert metrics["hit@10"] == pytest.approx(hit10, abs=TOL)
    assert mrr > 0.5 and hit10 > 0.8
