"""What replayed OpenInference traces cannot see is not measured — null with the reason, never 0.

A LlamaIndex query engine (BM25 retriever, MockLLM) over the small corpus of ``otel_traces.py`` is
evaluated twice, each in ``kebab-eval`` subprocesses as a team would:

* **in process** (``kind: python``, ``llamaindex_app.py``): its ``Response.source_nodes`` are the
  answer's citations, so ``chr``, ``citation_coverage`` and ``attribution_hit_rate`` are measured;
* **replayed**: the same engine traced by the real ``openinference-instrumentation-llama-index``
  (``otel_traces.py fixtures``, regenerated here with the installed versions) and read back as
  ``kind: replay``. OpenInference spans carry no citations: those metrics are stored null with
  the reason "OpenInference traces carry no citations" (before, 0.0 — and the default ``chr`` gate
  "missed"), the default ``chr`` and ``answer_precision`` gates are left out (not listed as
  skipped), and a ``chr`` gate the user wrote is refused with exit 2 naming the field.

Skips without the ``frameworks`` extra, unless ``KEBAB_EVAL_REQUIRE_FRAMEWORKS=1``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.frameworks.otel_traces import CORPUS, QUESTIONS
from tests.frameworks.test_haystack_system import cli, export, no_traceback
from tests.frameworks.test_openinference_traces import generate, needs_frameworks

HERE = Path(__file__).resolve().parent
CITATION_METRICS = ("citation_coverage", "chr", "attribution_hit_rate", "answer_precision")
REASON = "OpenInference traces carry no citations"
GOLD_DOCS = {"q-skewers": "grill/skewers.md", "q-doner": "grill/heat.md", "q-yoghurt": "sauces/yoghurt.md"}


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    needs_frameworks(corpus_too=False)
    work = tmp_path_factory.mktemp("trace_caps")
    for rel, text in CORPUS.items():
        (work / "corpus" / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / "corpus" / rel).write_text(text, encoding="utf-8")
    queries = [
        {"id": qid, "query": QUESTIONS[qid], "supports": [{"rel_path": path}]}
        for qid, path in GOLD_DOCS.items()
    ]
    (work / "golden.yaml").write_text(yaml.safe_dump({"schema_version": "1", "queries": queries}))
    generate("fixtures", str(work / "traces"))  # the real LlamaIndex instrumentor, traced now
    return work


@pytest.fixture(scope="module")
def env(work) -> dict[str, str]:
    import os

    home = work / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("KEBAB_EVAL_", "DAGSTER_"))}
    environment["DAGSTER_HOME"] = str(home)
    return environment


def replay_config(work: Path, name: str, **extra) -> Path:
    config = {
        "golden": str(work / "golden.yaml"),
        "system": {
            "kind": "replay",
            "path": str(work / "traces" / "llamaindex_b64.json"),
            "format": "auto",  # read as OpenInference: what the file holds decides
        },
        "k": [1, 3],
        "mrr_cutoff": 3,
        "baseline": "none",
        **extra,
    }
    path = work / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def run(env, config: Path, run_id: str):
    proc = cli(env, "run", "--config", str(config), "--run-id", run_id)
    no_traceback(proc)
    return proc


@pytest.fixture(scope="module")
def replayed(work, env) -> tuple[dict, str]:
    proc = run(env, replay_config(work, "replay"), "replayed")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return export(env, "replayed"), proc.stdout


@pytest.fixture(scope="module")
def in_process(work, env) -> dict:
    config = {
        "golden": str(work / "golden.yaml"),
        "system": {
            "kind": "python",
            "callable": "llamaindex_app:build",
            "args": {"corpus": str(work / "corpus")},
            "path": [str(HERE)],
            "timeout_s": 60,
            "response": {
                "hits": "nodes",
                "hit_fields": {
                    "chunk_id": "node.id_",
                    "doc_path": {"path": "node.metadata.file_path", "relative_to": str(work / "corpus")},
                    "snippet": "node.text",
                    "score": "score",
                },
                "answer_fields": {"text": "response", "citations": "source_nodes"},
                "citation_fields": {
                    "chunk_id": "node.id_",
                    "doc_path": {"path": "node.metadata.file_path", "relative_to": str(work / "corpus")},
                },
            },
        },
        "k": [1, 10],  # the engine cites its whole retrieval (every node of this small corpus)
        "baseline": "none",
    }
    path = work / "in_process.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    proc = run(env, path, "in-process")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return export(env, "in-process")


def test_in_process_the_citation_metrics_are_measured(in_process):
    metrics = in_process["metrics"]
    assert in_process["not_measured"] == {}
    # MockLLM cites every node it retrieved (all of them are hits: the run asks for 10, the corpus
    # has fewer), and each question's gold document is among them
    assert metrics["citation_coverage"] == 1.0
    assert metrics["attribution_hit_rate"] == 1.0
    assert metrics["chr"] == 1.0
    assert "citations" in in_process["system"]["capabilities"]["carries"]
    assert {g["name"] for g in in_process["gates"]} >= {"gate_chr_min", "gate_answer_precision_min"}


def test_replayed_traces_store_the_citation_metrics_null_with_the_reason(replayed, in_process):
    doc, stdout = replayed
    metrics = doc["metrics"]
    # retrieval is measured, and agrees with the same engine in process
    assert metrics["mrr"] == in_process["metrics"]["mrr"] == 1.0
    for name in CITATION_METRICS:
        assert metrics[name] is None, name
        assert doc["not_measured"][name] == REASON, name
    assert doc["system"]["capabilities"]["lacks"]["citations"] == REASON
    assert doc["system"]["trace_format"] == "openinference"
    for row in doc["per_query"]:  # per query too: a comparison never reads them as 0
        assert row["error"] is None
        for column in ("chr", "citation_ok", "attribution_hit", "answer_precision"):
            assert row["scores"].get(column) is None, (row["query_id"], column)
    # the answers themselves were replayed: refusal metrics are measured
    assert metrics["over_refusal_rate"] == 0.0
    # the default answer gates on what the traces cannot carry are left out, not listed as skipped
    names = {g["name"] for g in doc["gates"]}
    assert "gate_chr_min" not in names and "gate_answer_precision_min" not in names
    assert "gate_over_refusal_rate_max" in names
    assert "gate_chr" not in stdout
    listed = "citation_coverage, chr, answer_precision, attribution_hit_rate"
    assert f"not measured ({REASON}): {listed}" in stdout


def test_a_chr_gate_the_user_wrote_on_replayed_traces_is_refused(work, env):
    config = replay_config(work, "gated", gates={"chr": {"min": 0.5}, "mrr": {"min": 0.5}})
    proc = run(env, config, "gated")
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "field 'gates.chr': chr cannot be measured: OpenInference traces carry no citations" in proc.stderr
    assert "gates.mrr" not in proc.stderr
    listed = cli(env, "runs", "list")
    assert "gated" not in listed.stdout  # refused before any run was registered
