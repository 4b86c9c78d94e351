"""``kind: python``: plain-Python systems (tests/systems/python_systems.py), in their worker process.

Through the pipeline's own functions (settings → build_system → run_golden) and, once, a real
``kebab-eval run`` subprocess over a sharded run: one row per query whatever the system does
(dicts, dataclasses, chunk-id strings, an exception, a call past the time limit, nesting too deep,
``SystemExit``), answers only from a system with ``ask``, versions from ``versions()``, every bad
``callable`` refused before a query with exit 2 and a message naming it, and the factory called
once per process however many shards the run has.
"""

from __future__ import annotations

import json
import os
import threading
import time

import dagster as dg
import pandas as pd
import pytest
import yaml

from kebab_eval_pipeline.chain.settings import settings_from_dict
from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.systems.factory import build_system
from kebab_eval_pipeline.systems.identity import derive_identity, identity_from_settings
from kebab_eval_pipeline.systems.outcome import TIMEOUT, QueryFailure
from kebab_eval_pipeline.systems.plain_data import PlainDataError, find_usage, plain
from kebab_eval_pipeline.systems.runner import run_golden
from kebab_eval_pipeline.systems.thread_calls import CallLimiter
from tests.conftest import REPO, clean_cli_env, echo_golden, write
from tests.test_cli import cli, no_traceback

MODULE = "tests.systems.python_systems"


def system_settings(**system) -> object:
    return settings_from_dict({"system": {"kind": "python", **system}, "baseline": "none"})


def queries(*texts: str) -> pd.DataFrame:
    return pd.DataFrame({"query_id": [f"id-{t}" for t in texts], "query": list(texts)})


def rows(results) -> dict[str, dict]:
    return {r["query_id"]: r for r in results.outcomes.to_dict("records")}


# -- one row per query, whatever the system does ------------------------------------------------


def test_dict_results_an_exception_and_a_late_call_each_get_their_row():
    settings = system_settings(
        callable=f"{MODULE}:build",
        args={"fail": ["boom"], "slow": ["slow"], "slow_s": 3.0},
        timeout_s=0.4,
        mode="hybrid",
    )
    system = build_system(settings)
    started = time.perf_counter()
    results = run_golden(system, queries("a", "boom", "slow", "b"), k=2, answers=True)
    elapsed = time.perf_counter() - started
    assert elapsed < 2.0, elapsed  # the late call was left behind, not waited for (it sleeps 3 s)

    out = rows(results)
    assert list(out) == ["id-a", "id-boom", "id-slow", "id-b"]
    a = out["id-a"]
    assert (a["n_hits"], a["error"], a["answered"], a["answer_text"]) == (2, None, True, "answer to a")
    assert (a["model"], a["prompt_tokens"], a["completion_tokens"]) == ("echo-llm", 12, 3)
    assert a["retrieval_ms"] > 0 and a["answer_ms"] > 0 and a["attempts"] == 2

    boom = out["id-boom"]  # the type and first line of the exception; no traceback, no second line
    assert boom["error_class"] == "exception"
    assert boom["error"] == "exception: LookupError: no index entry for 'boom'"
    assert (boom["n_hits"], boom["answered"], boom["timed_out"]) == (0, False, False)

    slow = out["id-slow"]
    assert (slow["error_class"], slow["timed_out"], slow["n_hits"]) == (TIMEOUT, True, 0)
    assert "no result within 0.4 s" in slow["error"] and "discarded" in slow["error"]
    assert 400 <= slow["retrieval_ms"] < 1500 and pd.isna(slow["answer_ms"])

    hits = results.hits
    assert hits[hits["query_id"] == "id-b"]["chunk_id"].tolist() == ["b-c1", "b-c2"]  # 3 returned, k = 2
    # mode (set) and query_id (taken by name) were passed to search
    assert set(hits["snippet"]) == {"hybrid|id-a", "hybrid|id-b"}
    assert "id-a: returned 3 hits for k=2; kept the first 2" in results.warnings
    cited = results.citations
    assert cited[cited["query_id"] == "id-a"]["chunk_id"].tolist() == ["a-c1"]


def test_a_system_without_ask_is_not_asked_and_its_objects_are_read_by_their_fields():
    system = build_system(system_settings(callable=f"{MODULE}:SEARCH_ONLY"))
    assert system.can_answer is False
    results = run_golden(system, queries("x", "y"), k=2, answers=True)
    out = rows(results)
    assert [(r["error"], r["answered"], r["n_hits"]) for r in out.values()] == [(None, False, 2)] * 2
    x = results.hits[results.hits["query_id"] == "id-x"]
    assert x["chunk_id"].tolist() == ["x-c1", "x-c2"]  # dataclass Hit objects, by their fields
    assert x["score"].tolist() == [1.0, 0.5] and x["heading_path"].tolist() == [["Echo"], ["Echo"]]


def test_a_search_function_yielding_chunk_ids():
    results = run_golden(
        build_system(system_settings(callable=f"{MODULE}:search_fn")), queries("q"), 3, False
    )
    assert results.hits["chunk_id"].tolist() == ["q-c1", "q-c2", "q-c3"]
    assert results.hits["rank"].tolist() == [1, 2, 3]


def test_the_time_limit_covers_converting_the_result():
    system = build_system(system_settings(callable=f"{MODULE}:SlowToDict", timeout_s=0.3))
    started = time.perf_counter()
    (row,) = run_golden(system, queries("q"), 3, False).outcomes.to_dict("records")
    assert time.perf_counter() - started < 2.0  # to_dict sleeps 3 s
    assert (row["error_class"], row["timed_out"]) == (TIMEOUT, True)


def test_nesting_too_deep_and_system_exit_are_rows_not_crashes():
    deep = run_golden(build_system(system_settings(callable=f"{MODULE}:Deep")), queries("q"), 3, False)
    (row,) = deep.outcomes.to_dict("records")
    assert row["error_class"] == "bad_response" and "nested more than 64 levels" in row["error"]
    exits = run_golden(build_system(system_settings(callable=f"{MODULE}:Exits")), queries("q"), 3, False)
    (row,) = exits.outcomes.to_dict("records")
    assert (row["error_class"], row["error"]) == ("exception", "exception: SystemExit: 3")


# -- versions, identity --------------------------------------------------------------------------


def test_versions_and_details_are_recorded():
    info = build_system(system_settings(callable=f"{MODULE}:build", args={"n_hits": 2})).info()
    assert (info.kind, info.index_version, info.chunker_version) == ("python", "echo-idx-7", "echo-chunks-1")
    assert info.details["callable"] == f"{MODULE}:build"
    assert info.details["args"] == '{"n_hits": 2}'
    assert info.details["reported_extra"] == "3"
    assert "packages" not in info.details  # the tests' own code: no installed distribution owns it
    bad = build_system(system_settings(callable=f"{MODULE}:BadVersions")).info()
    assert bad.details["version_error"] == "RuntimeError: version file unreadable"


def test_identity_is_the_callable_and_its_args():
    one = load_settings_dict({"kind": "python", "callable": f"{MODULE}:build", "args": {"n_hits": 2}})
    ident = identity_from_settings(one.system)
    assert ident["target"] == f'{MODULE}:build {{"n_hits": 2}}' and ident["kind"] == "python"
    bare = identity_from_settings(
        load_settings_dict({"kind": "python", "callable": f"{MODULE}:search_fn"}).system
    )
    assert bare["target"] == f"{MODULE}:search_fn"
    named = load_settings_dict({"kind": "python", "callable": f"{MODULE}:build", "name": "echo"})
    assert identity_from_settings(named.system)["name"] == "echo"
    # a stored run's details give the same identity
    stored = {"kind": "python", "mode": None, **build_system(one).info().details}
    assert derive_identity(stored) == ident


def load_settings_dict(system: dict):
    return settings_from_dict({"system": system})


# -- bad callables: refused before any query ------------------------------------------------------


@pytest.mark.parametrize(
    ("system", "field", "message"),
    [
        (
            {"callable": "no_such_module_xyz:build"},
            "system.callable",
            "module 'no_such_module_xyz' not found",
        ),
        ({"callable": f"{MODULE}:missing"}, "system.callable", f"'{MODULE}' has no attribute 'missing'"),
        (
            {"callable": f"{MODULE}:NOT_A_SYSTEM"},
            "system.callable",
            "the int it names has no search(query, k)",
        ),
        (
            {"callable": f"{MODULE}:returns_a_list"},
            "system.callable",
            "the factory returned list, which has no search(query, k)",
        ),
        (
            {"callable": f"{MODULE}:broken_factory"},
            "system.callable",
            "the factory raised FileNotFoundError: index folder /nowhere does not exist",
        ),
        (
            {"callable": f"{MODULE}:OneArgument"},
            "system.callable",
            "OneArgument.search(query) cannot be called",
        ),
        (
            {"callable": f"{MODULE}:NoMode", "mode": "m"},
            "system.mode",
            "NoMode.search(query, k) takes no 'mode'",
        ),
        ({"callable": f"{MODULE}:SEARCH_ONLY", "args": {"x": 1}}, "system.args", "is not a factory"),
        (
            {"callable": f"{MODULE}:Echo", "args": {"bogus": 1}},
            "system.args",
            "unexpected keyword argument 'bogus'",
        ),
    ],
)
def test_a_bad_callable_is_refused_naming_it(system, field, message):
    with pytest.raises(InputError) as caught:
        build_system(system_settings(**system))
    (offender,) = caught.value.offenders
    assert offender.field == field
    assert offender.reason.startswith(system["callable"] + ": ") and message in offender.reason, (
        offender.reason
    )


@pytest.mark.parametrize(
    ("system", "message"),
    [
        ({"callable": "my_rag.eval"}, "expected 'package.module:attribute'"),
        ({"callable": "a:b:c"}, "expected 'package.module:attribute'"),
        (
            {"callable": f"{MODULE}:build", "args": {"openai_api_key": "sk-1"}},
            "credentials cannot be written",
        ),
        ({"callable": f"{MODULE}:build", "concurrency": 0}, "greater than or equal to 1"),
    ],
)
def test_a_malformed_python_block_is_refused_when_the_config_loads(system, message):
    with pytest.raises(InputError, match=message):
        system_settings(**system)
    system_settings(callable=f"{MODULE}:build", args={"max_tokens": 5})  # not a credential


def test_cli_exits_2_naming_a_missing_module(tmp_path_factory, tmp_path):
    env = clean_cli_env(tmp_path_factory, "python-bad")
    config = write(
        tmp_path / "bad.yaml", "system: {kind: python, callable: 'my_rag.eval:build', path: [src]}\n"
    )
    proc = cli(env, "run", "--config", str(config), "--baseline", "none")
    no_traceback(proc)
    assert proc.returncode == 2, proc.stderr
    assert "field 'system.callable'" in proc.stderr
    assert f"my_rag.eval:build: module 'my_rag' not found (system.path ['{tmp_path / 'src'}']" in proc.stderr


# -- time limits: threads left behind are bounded ---------------------------------------------------


def test_late_calls_hold_their_threads_and_past_the_bound_a_call_is_refused():
    limiter = CallLimiter(1, spare=1)  # 2 threads at most
    release = threading.Event()
    before = threading.active_count()
    for _ in range(2):
        with pytest.raises(QueryFailure, match=r"no result within 0\.05 s"):
            limiter.call(release.wait, 0.05)
    assert limiter.late == 2 and threading.active_count() == before + 2
    started = time.perf_counter()
    with pytest.raises(QueryFailure) as refused:  # both threads still held: not called at all
        limiter.call(lambda: "never", 0.05)
    assert refused.value.timed_out and "not called: 2 earlier call(s) still running" in refused.value.message
    assert time.perf_counter() - started < 1.0
    release.set()  # the late calls end; their threads and slots come back
    deadline = time.monotonic() + 5
    while limiter.late and time.monotonic() < deadline:
        time.sleep(0.01)
    assert limiter.late == 0
    assert limiter.call(lambda x: x * 2, 1.0, 21) == 42


# -- a real run: CLI, Dagster assets, shards; the factory called once ---------------------------


def test_cli_run_of_a_sharded_python_system_builds_it_once(tmp_path_factory, tmp_path):
    env = clean_cli_env(tmp_path_factory, "python-run")
    ids = ["a", "b", "boom", "c", "d"]
    golden = echo_golden(tmp_path / "golden.yaml", "echo", ids)
    log = tmp_path / "builds.log"
    config = write(
        tmp_path / "run.yaml",
        yaml.safe_dump(
            {
                "golden": str(golden),
                "system": {
                    "kind": "python",
                    "callable": "python_systems:build",  # found through path, relative to this file
                    "path": [os.path.relpath(REPO / "tests" / "systems", tmp_path)],
                    "args": {"fail": ["boom"], "log": str(log)},
                },
                "k": [1, 3],
                "answers": True,
                "shard_queries": 2,  # 3 shards: a, b | boom, c | d
                "baseline": "none",
            }
        ),
    )
    proc = cli(env, "run", "--config", str(config), "--run-id", "py-shards")
    no_traceback(proc)
    assert proc.returncode == 1, f"{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"  # boom: error_rate gate
    assert log.read_text().count("\n") == 1, log.read_text()  # one factory call for the whole run
    with dg.DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:  # ... of three shard steps
        (run,) = instance.get_runs(filters=dg.RunsFilter(tags={"dagster/partition": "py-shards"}))
        steps = {e.step_key for e in instance.all_logs(run.run_id) if e.step_key}
    assert sorted(s for s in steps if "retrieve_shard" in s) == [
        f"retrieval_results.retrieve_shard[shard_000{i}]" for i in range(3)
    ]
    exported = cli(env, "export", "py-shards", "--format", "json")
    assert exported.returncode == 0, exported.stderr
    doc = json.loads(exported.stdout)
    by_id = {q["query_id"]: q for q in doc["per_query"]}
    assert list(by_id) == ids
    assert by_id["boom"]["error"] == "exception: LookupError: no index entry for 'boom'"
    assert [by_id[q]["scores"]["mrr"] for q in ("a", "b", "c", "d")] == [1.0] * 4
    assert doc["metrics"]["mrr"] == pytest.approx(0.8)  # 4 of 5 at rank 1, boom at 0
    assert doc["metrics"]["error_rate"] == pytest.approx(0.2)
    assert doc["system"]["callable"] == "python_systems:build"
    assert doc["versions"]["index_version"] == "echo-idx-7"
    assert by_id["a"]["answer"]["text"] == "answer to a"


# -- plain data ---------------------------------------------------------------------------------


def test_token_usage_is_found_where_frameworks_report_it():
    haystack_run = {
        "llm": {"replies": ["x"], "meta": [{"usage": {"prompt_tokens": 5, "completion_tokens": 2}}]}
    }
    assert find_usage(haystack_run) == {"prompt_tokens": 5, "completion_tokens": 2}
    langchain = {
        "content": "x",
        "usage_metadata": {"input_tokens": 9, "output_tokens": 4, "total_tokens": 13},
    }
    assert find_usage(langchain) == {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13}
    assert find_usage({"usage": {"prompt_tokens": True, "completion_tokens": -1}}) is None  # not counts
    assert find_usage({"a": {"b": {"c": {"d": {"e": {"usage": {"total_tokens": 1}}}}}}}) is None  # too deep
    assert find_usage(["no", "usage"]) is None


def test_plain_data_of_common_values():
    import datetime as dt
    import enum
    from pathlib import PurePosixPath

    class Color(enum.Enum):
        RED = "red"

    class Plain:
        def __init__(self):
            self.a, self._hidden = (1, 2), "x"

    got = plain(
        {
            1: {"when": dt.date(2024, 1, 2), "path": PurePosixPath("/a/b"), "c": Color.RED, "blob": b"\0"},
            "p": Plain(),
        }
    )
    assert got == {"1": {"when": "2024-01-02", "path": "/a/b", "c": "red", "blob": None}, "p": {"a": [1, 2]}}
    loop: list = []
    loop.append(loop)
    with pytest.raises(PlainDataError, match="nested more than 64 levels"):
        plain(loop)
