"""The command adapter's persistent mode (``protocol: jsonl``) against real long-lived processes:
``kebab-eval ref serve-jsonl`` over the demo index (equal, query for query, to the per-query
command mode, to http over ``ref serve`` and to the in-process reference system), the README's
example wrapper, and ``fake_systems/jsonl_faulty.py``, which crashes, hangs, prints garbage, replies
for the wrong id, and so on, on purpose. No mocks: every process is real."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from kebab_eval_pipeline.chain import pipeline
from kebab_eval_pipeline.chain.artifacts import RetrievalArtifact
from kebab_eval_pipeline.chain.settings import settings_from_dict
from kebab_eval_pipeline.foundation.demo import DEMO_GOLDEN
from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.golden.load import load_golden
from kebab_eval_pipeline.systems.command import CommandSystem
from kebab_eval_pipeline.systems.command_jsonl import JsonlCommandSystem
from kebab_eval_pipeline.systems.factory import build_system
from kebab_eval_pipeline.systems.kinds.command import CommandSystemSettings
from kebab_eval_pipeline.systems.outcome import QueryRequest
from kebab_eval_pipeline.systems.runner import run_golden
from tests import docs_pages
from tests.conftest import demo_golden_subset
from tests.systems.adapters.conftest import KEBAB_EVAL, run_config, stored_metrics, timing_free

FAKES = Path(__file__).parent / "fake_systems"
FAULTY = str(FAKES / "jsonl_faulty.py")
ROOT = Path(__file__).resolve().parents[3]
WRAPPER = ROOT / "docs/examples/command-jsonl/wrapper.py"
PY = sys.executable


def jsonl(argv: list[str], **fields) -> JsonlCommandSystem:
    system = build_system(
        settings_from_dict({"system": {"kind": "command", "protocol": "jsonl", "argv": argv, **fields}})
    )
    assert isinstance(system, JsonlCommandSystem)
    return system


def faulty(state: Path, *flags: str, **fields) -> JsonlCommandSystem:
    return jsonl([PY, FAULTY, str(state), *flags], **fields)


def requests(*queries: str) -> list[QueryRequest]:
    return [QueryRequest(query_id=f"q{n}", query=q) for n, q in enumerate(queries, start=1)]


def starts(state: Path) -> list[int]:
    path = state / "starts"
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


# ---------------------------------------------------------------------------------------------
# 1. The reference system three ways: persistent command == per-query command == http == in-process.


def _pipeline_run(system: dict, golden: Path = DEMO_GOLDEN) -> tuple:
    """Retrieve and score with the plain pipeline functions: (retrieval results, query scores)."""
    settings = settings_from_dict({"golden": str(golden), "system": system, "answers": True})
    g = pipeline.load_golden_artifact(settings)
    retrieval = pipeline.retrieve(settings, g)
    scores = pipeline.score(settings, g, retrieval).scores
    # Latencies differ between any two runs, and attempts between modes (1 request, or search + ask).
    return retrieval.results, scores[[c for c in scores.columns if "_ms" not in c and c != "attempts"]]


def _hits(hits: pd.DataFrame) -> list[tuple]:
    frame = hits[["query_id", "rank", "chunk_id", "doc_path", "line_start", "score"]]
    return [tuple(r) for r in frame.sort_values(["query_id", "rank"]).itertuples(index=False)]


def _answers(outcomes: pd.DataFrame) -> list[tuple]:
    cols = ["query_id", "answered", "answer_text", "refused", "grounded", "prompt_template_version"]
    return [tuple(r) for r in outcomes[cols].sort_values("query_id").itertuples(index=False)]


def test_persistent_run_of_the_demo_equals_in_process_http_and_per_query(
    instance, tmp_path, demo_index_dir, reference_results, ref_server
):
    """The whole demo through a real Dagster run in persistent mode: the in-process reference
    system's metrics, hits and answers; one request per query; versions from the version line.
    Then the same per-query scores from http (``ref serve``) and from per-query commands."""
    index = str(demo_index_dir)
    config = tmp_path / "jsonl.yaml"
    system = {
        "kind": "command",
        "protocol": "jsonl",
        "argv": [KEBAB_EVAL, "ref", "serve-jsonl", index],
        "timeout_s": 60,
    }
    config.write_text(yaml.safe_dump({"system": system, "answers": True, "baseline": "none"}))
    result, store = run_config(instance, config, "jsonl-1")
    assert result.success

    ref_metrics, ref_retrieval = reference_results
    ref = ref_retrieval.results
    assert timing_free(stored_metrics(store, "jsonl-1").metrics) == timing_free(ref_metrics.metrics)
    got = RetrievalArtifact.from_tables(*store.read("retrieval_results", "jsonl-1")).results
    golden_ids = list(load_golden(DEMO_GOLDEN).golden.by_id())
    assert got.outcomes["query_id"].tolist() == golden_ids
    assert got.outcomes["error"].isna().all(), got.outcomes["error"].dropna().tolist()
    assert got.outcomes["attempts"].tolist() == [1] * len(golden_ids)  # hits and answer in one reply
    assert got.outcomes["answered"].all()
    # One request gave both: the answer's latency is that request's.
    assert (got.outcomes["answer_ms"] == got.outcomes["retrieval_ms"]).all()
    assert _hits(got.hits) == _hits(ref.hits)
    assert _answers(got.outcomes) == _answers(ref.outcomes)
    for key in ("index_version", "chunker_version", "parser_version", "prompt_template_version"):
        assert getattr(got.system, key) == getattr(ref.system, key) is not None, key
    assert got.system.mode == "lexical"  # reported on the version line
    assert got.system.details["protocol"] == "jsonl"
    assert "version_error" not in got.system.details
    assert got.system.coverage == ref.system.coverage

    # The same system over http: per-query scores identical, row for row.
    jsonl_results, jsonl_scores = _pipeline_run(system)
    http_results, http_scores = _pipeline_run(
        {"kind": "http", "search_url": f"{ref_server}/search", "ask_url": f"{ref_server}/ask"}
    )
    pd.testing.assert_frame_equal(jsonl_scores, http_scores)
    assert _hits(http_results.hits) == _hits(jsonl_results.hits)
    assert _answers(http_results.outcomes) == _answers(jsonl_results.outcomes)
    assert jsonl_scores["query_id"].tolist() == golden_ids
    assert jsonl_scores["mrr"].notna().sum() > 50


def test_per_query_mode_equals_persistent_mode_and_ask_returns_hits_saves_the_search(
    tmp_path, demo_index_dir
):
    """On 12 demo queries (a process per call is slow): per-query with search + ask, per-query
    with ``ask_returns_hits`` (one process per query) and persistent give identical per-query
    scores and answers; the request counts say how many calls each made."""
    golden = load_golden(DEMO_GOLDEN).golden
    subset = demo_golden_subset(tmp_path / "golden12.yaml", slice(12))
    assert [q.id for q in load_golden(subset).golden.queries] == [q.id for q in golden.queries[:12]]

    index = str(demo_index_dir)
    search = [KEBAB_EVAL, "ref", "search", index, "{query}", "--k", "{k}", "--json"]
    ask = [KEBAB_EVAL, "ref", "ask", index, "{query}", "--k", "{k}", "--json"]
    runs = {
        "two calls": {"kind": "command", "search_argv": search, "ask_argv": ask, "timeout_s": 120},
        "one call": {
            "kind": "command",
            "search_argv": search,
            "ask_argv": ask,
            "ask_returns_hits": True,
            "timeout_s": 120,
        },
        "jsonl": {"kind": "command", "protocol": "jsonl", "argv": [KEBAB_EVAL, "ref", "serve-jsonl", index]},
    }
    results = {name: _pipeline_run(system, subset) for name, system in runs.items()}
    base_results, base_scores = results["jsonl"]
    for name in ("two calls", "one call"):
        r, scores = results[name]
        pd.testing.assert_frame_equal(scores, base_scores, obj=name)
        assert _hits(r.hits) == _hits(base_results.hits), name
        assert _answers(r.outcomes) == _answers(base_results.outcomes), name
        assert r.outcomes["error"].isna().all(), name
    assert results["two calls"][0].outcomes["attempts"].tolist() == [2] * 12
    assert results["one call"][0].outcomes["attempts"].tolist() == [1] * 12
    assert results["one call"][0].system.details["ask_returns_hits"] == "true"
    # Answers off: ask_returns_hits changes nothing, the search command runs.
    one_call = CommandSystem(CommandSystemSettings.model_validate(runs["one call"]))
    (outcome,) = one_call.run_queries([QueryRequest("q", "sourdough starter")], k=3, answers=False)
    assert outcome.error is None and len(outcome.hits) == 3 and outcome.answer is None


# ---------------------------------------------------------------------------------------------
# 2. Failures: one row per query, classified; the process restarted, and bounded.


def test_a_crash_is_that_querys_error_row_and_the_next_query_runs_on_a_new_process(tmp_path):
    system = faulty(tmp_path)
    outcomes = system.run_queries(requests("a", "crash", "b", "c"), k=5, answers=False)
    assert [o.query_id for o in outcomes] == ["q1", "q2", "q3", "q4"]
    a, crash, b, c = outcomes
    assert crash.error_class == "exit_code" and crash.hits == [] and not crash.timed_out
    assert crash.error.startswith("the process ended while handling this query (exit code 3)")
    assert "stderr: segfault-ish: the index is corrupt" in crash.error
    assert crash.attempts == 1
    for o, name in ((a, "a"), (b, "b"), (c, "c")):
        assert o.error is None and [h.chunk_id for h in o.hits] == [f"ok-{name}"]
    pids = starts(tmp_path)
    assert len(pids) == 2  # started once, restarted once
    assert [a.hits[0].snippet, b.hits[0].snippet, c.hits[0].snippet] == [
        str(pids[0]),
        str(pids[1]),
        str(pids[1]),
    ]
    assert all(not _alive(p) for p in pids)  # closed at the end of the run


def test_a_hang_is_a_timeout_row_the_process_group_is_killed_and_replaced(tmp_path):
    system = faulty(tmp_path, timeout_s=1.5)
    started = time.monotonic()
    a, hang, b = system.run_queries(requests("a", "hang", "b"), k=5, answers=True)
    assert time.monotonic() - started < 15
    assert hang.error_class == "timeout" and hang.timed_out and hang.hits == []
    assert hang.error.startswith("no reply within 1.5 s; process killed")
    assert 1400 < hang.retrieval_ms < 5000
    assert a.error is None and b.error is None
    assert b.answer is not None and b.answer.text == "answer to b [#1]"
    first, second = starts(tmp_path)
    assert a.hits[0].snippet == str(first) and b.hits[0].snippet == str(second)
    assert not _alive(first)


def test_protocol_violations_are_classified_and_resynchronise_by_restarting(tmp_path):
    names = ["garbage", "ok1", "text", "wrongid", "list", "nonutf8", "ok2", "error", "badhits", "ok3"]
    outcomes = dict(zip(names, faulty(tmp_path).run_queries(requests(*names), 5, False), strict=True))
    assert outcomes["garbage"].error_class == "bad_json"
    assert "'{not json'" in outcomes["garbage"].error and "log to stderr" in outcomes["garbage"].error
    assert outcomes["text"].error_class == "bad_json"  # after start-up, stdout is for replies only
    assert "'Results: 3 hits found'" in outcomes["text"].error
    assert outcomes["wrongid"].error_class == "bad_response"
    assert outcomes["wrongid"].error == "reply has id 'q-other', expected id 'q4'; process restarted"
    assert (
        outcomes["list"].error_class == "bad_response"
        and "expected a JSON object, got list" in outcomes["list"].error
    )
    assert outcomes["nonutf8"].error_class == "bad_json" and "not UTF-8" in outcomes["nonutf8"].error
    # A well-formed reply that says the query failed, or carries unreadable hits: the process stays.
    assert outcomes["error"].error_class == "system_error"
    assert outcomes["error"].error == "index is locked by another writer"
    assert outcomes["badhits"].error_class == "bad_response" and outcomes["badhits"].error == (
        "hits: expected a list, got int"
    )
    for name in ("ok1", "ok2", "ok3"):
        assert outcomes[name].error is None, (name, outcomes[name].error)
    pids = starts(tmp_path)
    # Restarted after garbage, text, wrongid, list and nonutf8 — not after error or badhits.
    assert len(pids) == 6
    assert outcomes["ok2"].hits[0].snippet == outcomes["ok3"].hits[0].snippet == str(pids[-1])


def test_startup_noise_is_skipped_and_reported_once(tmp_path):
    system = faulty(tmp_path, "--banner")
    queries = pd.DataFrame({"query_id": ["a", "b"], "query": ["one", "two"]})
    results = run_golden(system, queries, k=5, answers=False)
    assert results.outcomes["error"].isna().all()
    assert results.warnings[0] == (
        "skipped 2 stdout line(s) that were not JSON before the version reply (start-up noise): "
        "'Loading weights… done', '[INFO] ready'"
    )
    assert results.system.index_version == "idx-jsonl-1"
    assert results.system.chunker_version == "fake-chunker-2"


def test_a_process_that_never_starts_makes_every_row_an_error_naming_it_and_stops_respawning(tmp_path):
    system = faulty(tmp_path, "--die-at-start", max_restarts=2)
    outcomes = system.run_queries(requests(*"abcdef"), k=5, answers=False)
    assert len(outcomes) == 6
    assert len(starts(tmp_path)) == 3  # the first start and two restarts, then no more
    for o in outcomes[:3]:
        assert o.error_class == "exit_code" and o.attempts == 0
        assert "ended during start-up (exit code 7)" in o.error and "cannot open index /nowhere" in o.error
        assert FAULTY.split("/")[-1] not in o.error or PY in o.error
    for o in outcomes[3:]:
        assert o.error_class == "exit_code"
        assert o.error.startswith(
            "not restarted after 3 consecutive failed starts or crashes (max_restarts 2)"
        )
        assert "cannot open index /nowhere" in o.error
    info = system.info()  # no new process: the version error says why
    assert "version_error" in info.details and len(starts(tmp_path)) == 3


def test_a_missing_executable_fails_before_any_query_and_a_vanished_one_fails_every_row(tmp_path):
    with pytest.raises(InputError, match="kebab-no-such-server"):
        build_system(
            settings_from_dict(
                {"system": {"kind": "command", "protocol": "jsonl", "argv": ["kebab-no-such-server"]}}
            )
        )
    script = tmp_path / "server.sh"
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(0o755)
    system = jsonl([str(script)], max_restarts=1)
    script.unlink()  # gone between the configuration check and the run
    outcomes = system.run_queries(requests("a", "b", "c"), k=5, answers=False)
    assert [o.error_class for o in outcomes] == ["exception"] * 3
    assert all(str(script) in o.error for o in outcomes)
    assert "No such file or directory" in outcomes[0].error
    assert outcomes[2].error.startswith("not restarted after 2 consecutive")


def test_a_crash_budget_is_consecutive_a_good_reply_resets_it(tmp_path):
    system = faulty(tmp_path, max_restarts=1)
    names = ["crash", "ok", "crash", "ok", "crash", "crash", "ok"]
    outcomes = system.run_queries(requests(*names), k=5, answers=False)
    classes = [o.error_class for o in outcomes]
    assert classes == ["exit_code", None, "exit_code", None, "exit_code", "exit_code", "exit_code"]
    assert outcomes[6].error.startswith("not restarted after 2 consecutive")
    assert len(starts(tmp_path)) == 4


def test_a_process_that_exits_after_a_reply_is_restarted_for_the_next_query(tmp_path):
    """Exit status 0 after a reply is leaving, not crashing: whether the adapter notices before
    sending the next query or only when its reply never comes, that query goes to a new process."""
    outcomes = faulty(tmp_path, max_restarts=0).run_queries(
        requests("exit0", "b", "exit0", "exit0", "c"), k=5, answers=False
    )
    assert [o.error for o in outcomes] == [None] * 5
    assert [o.hits[0].chunk_id for o in outcomes] == ["ok-exit0", "ok-b", "ok-exit0", "ok-exit0", "ok-c"]
    assert len(starts(tmp_path)) == 4
    assert all(o.attempts in (1, 2) for o in outcomes)


def test_a_chatty_stderr_cannot_deadlock_the_pipe(tmp_path):
    (chatty, after) = faulty(tmp_path, timeout_s=20).run_queries(requests("chatty", "after"), 5, False)
    assert chatty.error is None and after.error is None
    assert len(starts(tmp_path)) == 1


def test_version_line_errors_and_wrong_ids_at_start(tmp_path):
    (tmp_path / "v").mkdir()
    system = faulty(tmp_path / "v", "--version-error")
    (ok,) = system.run_queries(requests("a"), k=5, answers=False)
    assert ok.error is None
    assert system.info().details["version_error"] == "the system replied: no versions here"

    (tmp_path / "w").mkdir()
    wrong = faulty(tmp_path / "w", "--no-version", max_restarts=0)
    (a, b) = wrong.run_queries(requests("a", "b"), k=5, answers=False)
    assert a.error_class == b.error_class == "bad_response"
    assert "the first reply must answer {'id': 'version', 'op': 'version'}" in a.error
    assert len(starts(tmp_path / "w")) == 1


def test_slow_start_up_has_its_own_timeout_and_does_not_count_in_latency(tmp_path):
    (tmp_path / "s").mkdir()
    (a,) = faulty(tmp_path / "s", "--slow-start", "1.5", timeout_s=1).run_queries(requests("a"), 5, False)
    assert a.error is None and a.retrieval_ms < 1000
    (tmp_path / "t").mkdir()
    too_slow = faulty(tmp_path / "t", "--slow-start", "5", startup_timeout_s=0.5, max_restarts=0)
    (b, c) = too_slow.run_queries(requests("b", "c"), 5, False)
    assert b.error_class == "timeout" and "startup_timeout_s (0.5 s)" in b.error
    assert c.error.startswith("not restarted after 1 consecutive")


def test_answers_without_an_answer_in_the_reply_are_unanswered_with_a_run_warning(tmp_path):
    system = faulty(tmp_path)
    queries = pd.DataFrame({"query_id": ["a", "b"], "query": ["noanswer", "two"]})
    results = run_golden(system, queries, k=5, answers=True)
    assert results.outcomes["answered"].tolist() == [False, True]
    assert results.outcomes["error"].isna().all()
    assert results.outcomes["answer_ms"].isna().tolist() == [True, False]
    assert results.citations["chunk_id"].tolist() == ["ok-two"]
    assert "answers were requested but 1 replies carried no answer" in results.warnings


# ---------------------------------------------------------------------------------------------
# 3. Concurrency, the request line, the README's example wrapper, settings.


def test_concurrency_runs_that_many_processes_and_keeps_request_order(tmp_path):
    system = faulty(tmp_path, concurrency=3)
    names = [f"n{i}" for i in range(30)]
    outcomes = system.run_queries(requests(*names), k=5, answers=False)
    assert [o.query_id for o in outcomes] == [f"q{i}" for i in range(1, 31)]
    assert [o.hits[0].chunk_id for o in outcomes] == [f"ok-{n}" for n in names]
    pids = starts(tmp_path)
    assert len(pids) == 3
    assert {o.hits[0].snippet for o in outcomes} <= {str(p) for p in pids}


def test_the_request_line_carries_the_query_unchanged(tmp_path):
    echo = tmp_path / "echo.py"
    echo.write_text(
        "import json, sys\n"
        "for line in sys.stdin:\n"
        "    r = json.loads(line)\n"
        "    hits = [{'chunk_id': 'c', 'snippet': json.dumps(r, ensure_ascii=False, sort_keys=True)}]\n"
        "    print(json.dumps({'id': r['id'], 'hits': hits}), flush=True)\n",
        encoding="utf-8",
    )
    query = 'a "quoted"\nline {k} $(id) 사워도우'
    system = jsonl([PY, str(echo), "--mode={mode}"], mode="hybrid")
    (o,) = system.run_queries([QueryRequest("id 1; $(x)", query)], k=7, answers=True)
    assert o.error is None, o.error
    assert o.hits[0].snippet == (
        '{"answer": true, "id": "id 1; $(x)", "k": 7, "mode": "hybrid", "query": "a \\"quoted\\"\\nline {k} '
        '$(id) 사워도우"}'
    )


def test_the_documented_example_wrapper_works_and_is_quoted_verbatim(tmp_path):
    shown = docs_pages.snippet("python", "def search(query, k):  # your retriever").text
    assert shown.strip() == WRAPPER.read_text(encoding="utf-8").strip()
    system = jsonl([PY, str(WRAPPER)])
    a, b = system.run_queries(requests("how do I set up?", "second"), k=10, answers=True)
    assert a.error is None and a.hits[0].doc_path == "guide.md" and a.hits[0].heading_path == ["Setup"]
    assert a.answer is not None and a.answer.text == "how do I set up?"
    assert b.error is None
    assert system.info().index_version == "my-index-1"


@pytest.mark.parametrize(
    ("system", "needle"),
    [
        ({"protocol": "jsonl"}, "system.argv is required"),
        ({"protocol": "jsonl", "argv": ["x", "{query}"]}, "system.argv: {query} cannot be substituted"),
        ({"protocol": "jsonl", "argv": ["x"], "search_argv": ["y"]}, "system.search_argv: not used"),
        ({"protocol": "jsonl", "argv": ["x", "{mode}"]}, "set system.mode"),
        ({"search_argv": ["x"], "argv": ["y"]}, "system.argv is for protocol: jsonl"),
        ({"search_argv": ["x"], "ask_returns_hits": True}, "ask_returns_hits needs ask_argv"),
        ({"protocol": "batch", "argv": ["x"]}, "system.protocol"),
    ],
)
def test_settings_errors_name_the_field(system: dict, needle: str):
    with pytest.raises(InputError) as info:
        settings_from_dict({"system": {"kind": "command", **system}})
    assert needle in str(info.value)


def test_persistent_defaults_and_relative_argv(tmp_path):
    s = settings_from_dict({"system": {"kind": "command", "protocol": "jsonl", "argv": ["x"]}}).system
    assert (s.concurrency, s.timeout_s, s.startup_timeout_s, s.max_restarts) == (1, 30.0, 120.0, 3)
    per_query = settings_from_dict({"system": {"kind": "command", "search_argv": ["x"]}}).system
    assert (per_query.protocol, per_query.concurrency) == ("per_query", 2)
    from kebab_eval_pipeline.chain.settings import load_settings

    cfg = tmp_path / "cfg" / "run.yaml"
    cfg.parent.mkdir()
    cfg.write_text("system: {kind: command, protocol: jsonl, argv: [./bin/serve, --flag], concurrency: 4}\n")
    loaded = load_settings(cfg).system
    assert loaded.argv == [str((tmp_path / "cfg" / "bin" / "serve").resolve()), "--flag"]
    assert loaded.concurrency == 4


def test_ref_serve_jsonl_answers_bad_requests_with_error_lines_and_keeps_serving(demo_index_dir):
    import json

    lines = [
        '{"id": "v", "op": "version"}',
        "not json",
        '{"id": "a", "query": "sourdough starter", "k": 0}',
        '{"id": "b", "query": 5}',
        '{"id": "c", "query": "sourdough starter", "k": 2, "mode": "quantum"}',
        '{"id": "d", "op": "reindex"}',
        '{"id": "e", "query": "sourdough starter", "k": 2, "answer": true}',
    ]
    proc = subprocess.run(
        [KEBAB_EVAL, "ref", "serve-jsonl", str(demo_index_dir)],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and "Traceback" not in proc.stderr
    replies = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [r["id"] for r in replies] == ["v", None, "a", "b", "c", "d", "e"]
    assert replies[0]["system"] == "kebab-eval-reference" and replies[0]["index_version"]
    assert replies[1]["error"].startswith("request is not JSON")
    assert replies[2]["error"] == "k: expected an integer from 1 to 1000, got 0"
    assert replies[3]["error"] == "query: expected a string"
    assert replies[4]["error"].startswith("mode: expected one of lexical")
    assert replies[5]["error"] == "unknown op 'reindex'"
    assert len(replies[6]["hits"]) == 2 and replies[6]["answer"]["prompt_template_version"] == "extractive-1"


# A system whose replies keep the answer in the reply itself (LlamaIndex-style ``response``), not
# under ``answer``: one hit, and the answer text ``answer to QUERY``.
_FLAT_ANSWER = (
    "import json, sys\n"
    "for line in sys.stdin:\n"
    "    m = json.loads(line)\n"
    "    r = {'id': m['id'], 'hits': [{'chunk_id': 'c1', 'doc_path': 'a.md'}]}\n"
    "    if m.get('op') != 'version':\n"
    "        r['response'] = 'answer to ' + m['query']\n"
    "    print(json.dumps(r), flush=True)\n"
)


def test_answer_fields_mapped_from_the_reply_itself_are_read_not_counted_unanswered():
    """With ``answer_fields`` and no ``answer`` path, the answer lives in the reply object: each
    query is answered from it (it was counted unanswered, dropping out of the answer metrics)."""
    system = jsonl([PY, "-c", _FLAT_ANSWER], response={"answer_fields": {"text": "response"}})
    outcomes = system.run_queries(requests("paris", "rome"), k=5, answers=True)
    assert [o.error for o in outcomes] == [None, None]
    assert [o.answer.text for o in outcomes] == ["answer to paris", "answer to rome"]
    assert [[h.chunk_id for h in o.hits] for o in outcomes] == [["c1"], ["c1"]]
