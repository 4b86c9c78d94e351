"""A failure a replayed trace records is an error row, exactly as a live failure is.

Issue 44: a kebab trace row with ``timed_out: true`` or an ``error`` string was counted as failed
*and* scored from the hits it also listed (MRR 1.0), where a live failed query scores 0. Now the
recorded failure fails the query as a whole (a command system's reply with ``error`` does the same:
its hits are not read): no hits stored, no answer, the query scores 0 wherever it applies and counts
in ``error_rate`` / ``timeout_rate`` and ``system_health``. Where the trace says the failure came
after the search — an OpenInference trace whose generator span failed after the retriever span
returned, a stored run's own export row — the hits stay, as a live failed ask keeps its search's.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from kebab_eval_pipeline.systems.openinference import normalise_question
from kebab_eval_pipeline.systems.replay import read_trace
from tests.forked_cli import run_cli
from tests.systems.adapters.test_replay_adapter import Scored, replay, write_jsonl
from tests.systems.adapters.test_replay_openinference import EXPECTED, FILES, documents_of, gold

GOLD = [
    {"qid": f"Q{i}", "question": f"question {i}?", "answerable": True, "gold_citations": [f"c{i}"]}
    for i in (1, 2, 3)
]
TRACE = [
    {"query_id": "Q1", "hits": [{"rank": 1, "chunk_id": "c1"}]},
    {"query_id": "Q2", "hits": [{"rank": 1, "chunk_id": "c2"}], "timed_out": True},
    {"query_id": "Q3", "hits": [{"rank": 1, "chunk_id": "c3"}], "error": "ranker crashed"},
]


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    home = tmp_path / "dagster_home"
    home.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KEBAB_EVAL_", "DAGSTER_"))}
    env["DAGSTER_HOME"] = str(home)
    return run_cli(args, env=env, cwd=tmp_path, timeout=300)  # forked ready-imported


def test_recorded_timeout_and_error_are_error_rows_through_the_cli(tmp_path):
    write_jsonl(tmp_path / "gold.jsonl", GOLD)
    write_jsonl(tmp_path / "trace.jsonl", TRACE)
    config = {
        "golden": "gold.jsonl",
        "system": {"kind": "replay", "path": "trace.jsonl"},
        "baseline": "none",
        "system_health": {"max_error_rate": 0.5},
    }
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    run = _cli(tmp_path, "run", "--config", "cfg.yaml", "--run-id", "replayed")
    # 2 of 3 queries failed: system_health fails the run as it would a live system's (exit 1)
    assert run.returncode == 1, run.stderr
    assert "Traceback" not in run.stderr
    assert "2 of 3 queries failed (error_rate 0.6667 > max 0.5)" in run.stdout
    assert "recorded_error ×1, timeout ×1" in run.stdout
    assert "Q3: the trace records this query as failed; 1 recorded hit not scored" in run.stderr
    export = _cli(tmp_path, "export", "replayed", "--format", "json", "--out", "run.json")
    assert export.returncode == 0, export.stderr
    doc = json.loads((tmp_path / "run.json").read_text(encoding="utf-8"))
    rows = {r["query_id"]: r for r in doc["per_query"]}
    assert [rows[q]["scores"]["mrr"] for q in ("Q1", "Q2", "Q3")] == [1.0, 0.0, 0.0]  # was 1, 1, 1
    assert [len(rows[q]["hits"]) for q in ("Q1", "Q2", "Q3")] == [1, 0, 0]
    assert rows["Q2"]["error"] == "timeout: the trace records a timeout (timed_out: true)"
    assert rows["Q2"]["error_class"] == "timeout" and rows["Q2"]["timed_out"] is True
    assert rows["Q3"]["error"] == "recorded_error: ranker crashed" and rows["Q3"]["timed_out"] is False
    assert (doc["metrics"]["mrr"], doc["metrics"]["error_rate"], doc["metrics"]["timeout_rate"]) == (
        0.3333,
        0.6667,
        0.3333,
    )


def test_a_recorded_error_scores_as_a_live_error_row(tmp_path):
    """The replayed error row and a live command system's error row for the same query hold the
    same outcome fields and scores (the live system replies ``{"error": …}`` next to its hits)."""
    golden = write_jsonl(tmp_path / "gold.jsonl", GOLD[2:])
    replayed = replay(write_jsonl(tmp_path / "trace.jsonl", TRACE[2:]), golden=golden)
    script = tmp_path / "system.py"
    script.write_text(
        "import json, sys\n"
        "for line in sys.stdin:\n"
        "    m = json.loads(line)\n"
        "    reply = {'id': m['id']}\n"
        "    if m.get('query') is not None:\n"
        "        reply.update(hits=[{'rank': 1, 'chunk_id': 'c3'}], error='ranker crashed')\n"
        "    print(json.dumps(reply), flush=True)\n",
        encoding="utf-8",
    )
    live = Scored(
        {
            "golden": str(golden),
            "system": {"kind": "command", "protocol": "jsonl", "argv": [sys.executable, str(script)]},
        }
    )
    fields = ["n_hits", "answered", "timed_out", "error_class"]
    assert replayed.outcomes.loc["Q3", fields].tolist() == [0, False, False, "recorded_error"]
    assert live.outcomes.loc["Q3", fields].tolist() == [0, False, False, "system_error"]
    for metric in ("mrr", "hit@1", "ndcg@10", "recall@5"):
        assert replayed.per_query.loc["Q3", metric] == live.per_query.loc["Q3", metric] == 0.0
    assert replayed.metrics["error_rate"] == live.metrics["error_rate"] == 1.0


def _haystack_failed_query(tmp_path: Path) -> tuple[Path, list[str]]:
    """A gold file for the Haystack query whose generator failed (its first retrieved chunk
    relevant), and the chunk ids its retriever span recorded."""
    question = EXPECTED["haystack"]["q-fail"]["question"]
    records = read_trace(FILES["haystack", "b64.json"], "openinference")[0]
    ids = [h["chunk_id"] for h in records[normalise_question(question)].raw_hits]
    assert len(ids) == 3
    return gold(tmp_path / "gold.jsonl", [("G4", question, ids[:1])]), ids


def test_openinference_generator_failure_after_retrieval_keeps_the_hits(tmp_path):
    """The real Haystack trace whose generator raised after the retriever returned: a failed ask,
    as live — the search's hits are scored, the answer is not."""
    golden, ids = _haystack_failed_query(tmp_path)
    run = replay(FILES["haystack", "b64.json"], golden=golden, answers=True)
    row = run.outcomes.loc["G4"]
    assert row["error_class"] == "recorded_error" and "ExtractiveGenerator.run" in row["error"]
    assert run.hits("G4")["chunk_id"].tolist() == ids and not row["answered"]
    assert run.per_query.loc["G4", "mrr"] == 1.0


def test_openinference_failed_retriever_span_is_a_failed_query(tmp_path):
    """The same trace with its retriever span marked ERROR: the search failed, so the documents the
    span lists are not scored (the query scores 0)."""
    golden, _ = _haystack_failed_query(tmp_path)
    docs = copy.deepcopy(documents_of(FILES["haystack", "b64.json"]))
    spans = [s for d in docs for r in d["resourceSpans"] for sc in r["scopeSpans"] for s in sc["spans"]]
    failing = {s["traceId"] for s in spans if s.get("status", {}).get("code") in (2, "STATUS_CODE_ERROR")}
    assert len(failing) == 1
    retrievers = [
        s
        for s in spans
        if s["traceId"] in failing
        and any(
            a["key"] == "openinference.span.kind" and a["value"].get("stringValue") == "RETRIEVER"
            for a in s["attributes"]
        )
    ]
    assert len(retrievers) == 1
    retrievers[0]["status"] = {"code": "STATUS_CODE_ERROR", "message": "index unavailable"}
    trace = tmp_path / "trace.json"
    trace.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    run = replay(trace, golden=golden, answers=True)
    row = run.outcomes.loc["G4"]
    assert row["error_class"] == "recorded_error" and "index unavailable" in row["error"]
    assert run.hits("G4").empty and row["n_hits"] == 0 and not row["answered"]
    assert run.per_query.loc["G4", "mrr"] == 0.0  # 1.0 when its listed documents were scored
