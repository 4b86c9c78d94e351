"""The command adapter (SPEC §4 "command", §11, §12) against real processes: the reference CLI
(`kebab-eval ref search/ask --json`) and small scripts in ``fake_systems/`` that echo their argv,
misbehave on purpose, answer in several shapes, or record how many copies of them run at once.
No mocks: every query is a real subprocess, every run a real pipeline or Dagster run."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest
import yaml

from kebab_eval_pipeline.chain.artifacts import RetrievalArtifact
from kebab_eval_pipeline.chain.settings import settings_from_dict
from kebab_eval_pipeline.contract import Citation
from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.golden.load import load_golden
from kebab_eval_pipeline.systems.command import KILL_GRACE_S, CommandSystem
from kebab_eval_pipeline.systems.factory import build_system
from kebab_eval_pipeline.systems.kinds.command import CommandSystemSettings
from kebab_eval_pipeline.systems.outcome import QueryRequest
from kebab_eval_pipeline.systems.runner import run_golden
from tests.conftest import demo_golden_subset
from tests.systems.adapters.conftest import (
    KEBAB_EVAL,
    reference_run,
    run_config,
    stored_metrics,
    timing_free,
)

FAKES = Path(__file__).parent / "fake_systems"
ECHO = str(FAKES / "cmd_echo.py")
FAULTY = str(FAKES / "cmd_faulty.py")
ASK = str(FAKES / "cmd_ask.py")
PARALLEL = str(FAKES / "cmd_parallel.py")
VERSION = str(FAKES / "cmd_version.py")
MAPPED = str(FAKES / "cmd_mapped.py")
PY = sys.executable

VERSION_KEYS = ("index_version", "chunker_version", "prompt_template_version", "parser_version")

# Every character a shell would act on, plus things an argv template could trip over: a
# literal placeholder, a leading dash, newlines, both quotes, a backslash and Korean text.
NASTY_QUERY = (
    '-rf "; rm -rf ~; $(reboot) `whoami` | cat /etc/passwd && echo pwned > /tmp/x * ?'
    "\n'single' \"double\" \\back\\slash {k} {query} {mode} {{k}} %s $HOME\n"
    "사워도우 스타터는 몇 도에서 보관하나요?"
)


def command(**fields) -> CommandSystem:
    return CommandSystem(CommandSystemSettings(kind="command", **fields))


def requests(*queries: str) -> list[QueryRequest]:
    return [QueryRequest(query_id=f"q{n}", query=q) for n, q in enumerate(queries, start=1)]


def write_yaml(path: Path, doc: dict) -> Path:
    path.write_text(yaml.safe_dump(doc, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return path


def materializations(result) -> dict[str, dg.AssetMaterialization]:
    return {
        e.asset_key.path[-1]: e.step_materialization_data.materialization
        for e in result.get_asset_materialization_events()
    }


def stored_retrieval(store, run_id: str) -> RetrievalArtifact:
    return RetrievalArtifact.from_tables(*store.read("retrieval_results", run_id))


def hit_keys(hits: pd.DataFrame) -> list[tuple]:
    frame = hits[["query_id", "rank", "chunk_id", "score"]].sort_values(["query_id", "rank"])
    return [tuple(row) for row in frame.itertuples(index=False)]


# ---------------------------------------------------------------------------------------------
# 1. Acceptance: the reference CLI as a command system == the in-process reference system.


def test_command_adapter_over_reference_cli_matches_in_process_reference(instance, tmp_path, demo_index_dir):
    """Per-query command runs (2 processes per query) on a third of the demo: metrics, hits,
    versions and metadata through a real Dagster run equal the in-process reference system's on
    the same queries. (The whole demo goes through the command adapter in persistent mode, and
    per-query mode equals persistent mode, in test_command_jsonl.py.)"""
    index = str(demo_index_dir)
    # every third query: 35 of 105, every category and both languages
    golden = demo_golden_subset(tmp_path / "golden.yaml", slice(None, None, 3))
    config = write_yaml(
        tmp_path / "command.yaml",
        {
            "golden": str(golden),
            "system": {
                "kind": "command",
                "search_argv": [KEBAB_EVAL, "ref", "search", index, "{query}", "--k", "{k}", "--json"],
                "ask_argv": [KEBAB_EVAL, "ref", "ask", index, "{query}", "--k", "{k}", "--json"],
                "version_argv": [KEBAB_EVAL, "ref", "version", index],
                "concurrency": 2,
                "timeout_s": 120,
            },
            "answers": True,
            "baseline": "none",
        },
    )
    result, store = run_config(instance, config, "cmd-1")
    assert result.success

    ref_metrics, ref_retrieval = reference_run(demo_index_dir, golden)
    golden_ids = load_golden(golden).golden.by_id().keys()
    assert len(golden_ids) == 35

    # The same numbers as the in-process system, metric for metric.
    metrics = stored_metrics(store, "cmd-1")
    assert timing_free(metrics.metrics) == timing_free(ref_metrics.metrics)
    assert metrics.metrics["mrr"] is not None and metrics.metrics["mrr"] > 0

    # One row per golden query, in golden order, none failed, each searched and asked once.
    retrieval = stored_retrieval(store, "cmd-1")
    outcomes = retrieval.results.outcomes
    assert outcomes["query_id"].tolist() == list(golden_ids)
    assert outcomes["error"].isna().all(), outcomes.loc[outcomes["error"].notna(), "error"].tolist()
    assert not outcomes["timed_out"].any()
    assert outcomes["attempts"].tolist() == [2] * len(golden_ids)
    assert outcomes["answered"].all()
    ref_outcomes = ref_retrieval.results.outcomes.set_index("query_id")
    ours = outcomes.set_index("query_id")
    for column in ("answer_text", "refused", "grounded", "n_hits"):
        assert ours[column].tolist() == ref_outcomes.loc[ours.index, column].tolist(), column

    # The very same hits, scores included (JSON round-trips floats exactly).
    assert hit_keys(retrieval.results.hits) == hit_keys(ref_retrieval.results.hits)
    assert len(retrieval.results.hits) > len(golden_ids)

    # Dagster metadata of retrieval_results: who ran, the versions, no errors, 2 requests per query.
    meta = materializations(result)["retrieval_results"].metadata
    ref_system = ref_retrieval.results.system
    assert meta["system"].value == "command"
    assert meta["mode"].value == "lexical"  # reported by `ref version`
    for key in VERSION_KEYS:
        assert getattr(ref_system, key), key
        assert meta[key].value == getattr(ref_system, key), key
    assert meta["error_classes"].value == {}
    assert meta["errors"].value == 0
    assert meta["timeouts"].value == 0
    assert meta["queries"].value == len(golden_ids)
    assert meta["requests_sent"].value == 2 * len(golden_ids)
    assert meta["mixed_versions"].value == {}
    details = meta["system_details"].value
    assert details["concurrency"] == "2"
    assert details["search_argv"].startswith(KEBAB_EVAL) and "'{query}'" in details["search_argv"]
    assert "version_error" not in details


# ---------------------------------------------------------------------------------------------
# 2. No shell: the query is one argv item, byte for byte.


def test_query_is_exactly_one_argv_item_and_never_reaches_a_shell(tmp_path):
    system = command(search_argv=[PY, ECHO, "{query}", "--k={k}", "{query_id}"], concurrency=3, timeout_s=60)
    queries = [NASTY_QUERY, "-h", "--k=1", "{k}", "{query_id}", " ", "a; ls > out.txt"]
    reqs = [QueryRequest(query_id=f"id {n}; $(id)", query=q) for n, q in enumerate(queries)]
    outcomes = system.run_queries(reqs, k=10, answers=False)
    assert [o.query_id for o in outcomes] == [r.query_id for r in reqs]
    for request, outcome in zip(reqs, outcomes, strict=True):
        assert outcome.error is None, outcome.error
        assert [h.snippet for h in outcome.hits] == [request.query, "--k=10", request.query_id]
        assert [h.rank for h in outcome.hits] == [1, 2, 3]
        assert outcome.attempts == 1
    assert not Path("out.txt").exists()  # "a; ls > out.txt" was an argument, not a command


def test_nasty_golden_query_travels_unchanged_through_a_dagster_run(instance, tmp_path):
    golden = write_yaml(
        tmp_path / "golden.yaml",
        {
            "schema_version": "1",
            "name": "argv-safety",
            "queries": [
                {"id": "nasty", "query": NASTY_QUERY, "lang": "ko", "supports": [{"chunk_id": "arg1"}]},
                {"id": "plain", "query": "plain words", "supports": [{"chunk_id": "arg9"}]},
            ],
        },
    )
    config = write_yaml(
        tmp_path / "run.yaml",
        {
            "golden": "golden.yaml",
            "system": {"kind": "command", "search_argv": [PY, ECHO, "{query}", "--k={k}", "{query_id}"]},
            "answers": False,
            "baseline": "none",
        },
    )
    assert load_golden(golden).golden.by_id()["nasty"].query == NASTY_QUERY
    result, store = run_config(instance, config, "cmd-nasty")
    assert result.success
    r = stored_retrieval(store, "cmd-nasty").results
    assert r.outcomes["query_id"].tolist() == ["nasty", "plain"]
    assert r.outcomes["error"].isna().all()
    hits = r.hits.set_index(["query_id", "rank"])["snippet"]
    assert hits["nasty"].tolist() == [NASTY_QUERY, "--k=10", "nasty"]
    assert hits["plain"].tolist() == ["plain words", "--k=10", "plain"]
    # The echoed hit arg1 is the gold support of "nasty": found at rank 1; "plain" finds nothing.
    metrics = stored_metrics(store, "cmd-nasty").metrics
    assert metrics["hit@1"] == pytest.approx(0.5)
    assert metrics["mrr"] == pytest.approx(0.5)


# ---------------------------------------------------------------------------------------------
# 3. Failures become rows, classified.


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie waiting to be reaped counts as gone)."""
    if Path("/proc/self/stat").exists():
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return False
        return state not in ("Z", "X")
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_every_failure_is_one_classified_row_in_request_order(tmp_path):
    timeout_s = 3.0
    system = command(search_argv=[PY, FAULTY, "{query}", str(tmp_path)], timeout_s=timeout_s, concurrency=5)
    names = [
        "exit3",
        "good",
        "notjson",
        "wrongshape",
        "badrank",
        "sleep",
        "grandchild",
        "signal",
        "empty",
        "nonutf8",
        "nul\x00byte",  # cannot be an argv item at all: the query fails, the run does not
    ]
    reqs = requests(*names)
    outcomes = system.run_queries(reqs, k=10, answers=False)

    assert [o.query_id for o in outcomes] == [r.query_id for r in reqs]
    assert [o.attempts for o in outcomes] == [1] * len(reqs)
    by = dict(zip(names, outcomes, strict=True))

    assert by["good"].error_class is None and [h.chunk_id for h in by["good"].hits] == ["ok-good"]

    assert by["exit3"].error_class == "exit_code"
    assert "exit code 3" in by["exit3"].error
    assert "fatal: the index is locked by another writer" in by["exit3"].error
    assert by["notjson"].error_class == "bad_json"
    assert "Results: 3 hits found" in by["notjson"].error
    assert by["wrongshape"].error_class == "bad_response"
    assert by["wrongshape"].error == "hits: expected a list, got int"
    assert by["badrank"].error_class == "bad_response"
    assert by["badrank"].error.startswith("hits[0].rank:") and "'x'" in by["badrank"].error
    assert by["signal"].error_class == "exit_code"
    assert "killed by signal 9" in by["signal"].error
    assert by["empty"].error_class == "bad_json" and "no output" in by["empty"].error
    assert by["nonutf8"].error_class == "bad_json" and "not UTF-8" in by["nonutf8"].error
    nul = by["nul\x00byte"]
    assert nul.error_class == "exception" and "null byte" in nul.error and nul.hits == []

    for name in ("sleep", "grandchild"):
        o = by[name]
        assert o.error_class == "timeout" and o.timed_out, (name, o.error)
        assert "no result within 3 s" in o.error
        assert o.hits == []
    for name in set(names) - {"sleep", "grandchild"}:
        assert not by[name].timed_out, name
    # The whole process group was killed: the grandchild holding stdout did not make the query
    # wait for the pipes' grace period, and it does not outlive the run.
    assert by["grandchild"].retrieval_ms < (timeout_s + KILL_GRACE_S) * 1000
    grandchild = int((tmp_path / "grandchild.pid").read_text())
    deadline = time.monotonic() + 5
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild)


def test_failed_queries_are_rows_with_error_text_in_the_run_tables(tmp_path):
    """Through the runner: the error column is "class: message" and error_classes counts them."""
    from kebab_eval_pipeline.systems.runner import error_class_counts

    system = command(search_argv=[PY, FAULTY, "{query}", str(tmp_path)], concurrency=3)
    queries = pd.DataFrame({"query_id": ["a", "b", "c", "d"], "query": ["good", "empty", "exit3", "empty"]})
    results = run_golden(system, queries, k=5, answers=False)
    out = results.outcomes
    assert out["query_id"].tolist() == ["a", "b", "c", "d"]
    assert out["error"].isna().tolist() == [True, False, False, False]
    assert out.loc[1, "error"] == "bad_json: no output on stdout"
    assert out.loc[2, "error"].startswith("exit_code: exit code 3; stderr: ")
    assert error_class_counts(out) == {"bad_json": 2, "exit_code": 1}
    assert results.hits["query_id"].tolist() == ["a"]


# ---------------------------------------------------------------------------------------------
# 4. Bounded parallelism.


def test_at_most_concurrency_processes_run_at_once(tmp_path):
    (tmp_path / "running").mkdir()
    (tmp_path / "seen").mkdir()
    system = command(search_argv=[PY, PARALLEL, str(tmp_path), "{query}"], concurrency=3, timeout_s=60)
    reqs = requests(*[f"p{n}" for n in range(9)])
    outcomes = system.run_queries(reqs, k=10, answers=False)
    assert [o.error for o in outcomes] == [None] * 9
    assert [o.hits[0].chunk_id for o in outcomes] == [f"c-p{n}" for n in range(9)]
    seen = [int(p.read_text()) for p in (tmp_path / "seen").iterdir()]
    assert len(seen) == 9
    assert 1 < max(seen) <= 3
    assert list((tmp_path / "running").iterdir()) == []


# ---------------------------------------------------------------------------------------------
# 5. The ask path.


def test_ask_output_shapes_are_parsed_and_a_failing_ask_keeps_its_hits():
    system = command(search_argv=[PY, ECHO, "{query}"], ask_argv=[PY, ASK, "{query}"], concurrency=3)
    names = ["nested", "bare", "string", "wfgy", "fail"]
    outcomes = dict(zip(names, system.run_queries(requests(*names), k=10, answers=True), strict=True))

    nested = outcomes["nested"].answer
    assert nested.text == "Keep the starter at 24 °C [#1]."
    assert nested.citations == [Citation(chunk_id="c1", marker="[#1]")]
    assert (nested.prompt_template_version, nested.model) == ("tpl-7", "tiny-gen")
    assert (nested.prompt_tokens, nested.completion_tokens) == (120, 9)
    assert nested.refused is False and nested.grounded is True

    bare = outcomes["bare"].answer
    assert bare.text == "Use 20 g of salt per kilo."
    assert bare.citations == [Citation(doc_path="vegetables/sauerkraut.md", line_start=3, line_end=5)]
    assert bare.refused is False

    string = outcomes["string"].answer
    assert string.text == "Twenty grams." and string.citations == [Citation(chunk_id="c1")]

    wfgy = outcomes["wfgy"].answer
    assert wfgy.refused is True and wfgy.grounded is False and wfgy.citations == []

    for name in ("nested", "bare", "string", "wfgy"):
        o = outcomes[name]
        assert o.error is None and o.attempts == 2 and o.answer_ms is not None, name

    failed = outcomes["fail"]
    assert failed.answer is None
    assert failed.error_class == "exit_code"
    assert "exit code 4" in failed.error and "generator unavailable: model not loaded" in failed.error
    assert [h.snippet for h in failed.hits] == ["fail"]  # the search result is kept
    assert failed.attempts == 2


def test_without_ask_argv_answers_on_means_unanswered_rows_not_errors():
    system = command(search_argv=[PY, ECHO, "{query}"])
    queries = pd.DataFrame({"query_id": ["a", "b"], "query": ["one", "two"]})
    results = run_golden(system, queries, k=10, answers=True)
    out = results.outcomes
    assert out["answered"].tolist() == [False, False]
    assert out["error"].isna().all()
    assert out["attempts"].tolist() == [1, 1]
    assert out["answer_ms"].isna().all()
    assert results.hits["snippet"].tolist() == ["one", "two"]
    assert results.citations.empty


# ---------------------------------------------------------------------------------------------
# 6. Misconfiguration fails fast.


def _command_settings(**system):
    return settings_from_dict({"system": {"kind": "command", **system}})


def test_missing_or_unrunnable_executables_fail_before_any_query(tmp_path):
    with pytest.raises(InputError) as missing:
        build_system(_command_settings(search_argv=["kebab-no-such-tool-xyz", "{query}"]))
    assert "kebab-no-such-tool-xyz" in str(missing.value) and "not found on PATH" in str(missing.value)

    not_executable = tmp_path / "search.sh"
    not_executable.write_text("#!/bin/sh\necho '[]'\n")
    with pytest.raises(InputError) as plain_file:
        build_system(_command_settings(search_argv=[str(not_executable), "{query}"]))
    assert str(not_executable) in str(plain_file.value) and "not an executable file" in str(plain_file.value)

    # ask_argv and version_argv are checked too, not only search_argv.
    with pytest.raises(InputError, match="kebab-no-such-asker"):
        build_system(_command_settings(search_argv=[PY, ECHO], ask_argv=["kebab-no-such-asker"]))
    with pytest.raises(InputError, match="no-such-dir/version-tool"):
        build_system(_command_settings(search_argv=[PY, ECHO], version_argv=["./no-such-dir/version-tool"]))
    with pytest.raises(InputError, match="is not a folder"):
        build_system(_command_settings(search_argv=[PY, ECHO], cwd=str(tmp_path / "absent")))


def test_cwd_is_where_the_command_runs():
    system = command(search_argv=[PY, "cmd_echo.py", "{query}"], cwd=str(FAKES))
    (outcome,) = system.run_queries(requests("from cwd"), k=10, answers=False)
    assert outcome.error is None, outcome.error
    assert [h.snippet for h in outcome.hits] == ["from cwd"]


def test_mode_placeholder_needs_a_mode():
    with pytest.raises(InputError) as exc:
        _command_settings(search_argv=[PY, ECHO, "{query}", "--mode={mode}"])
    assert "set system.mode" in str(exc.value)
    system = build_system(
        _command_settings(search_argv=[PY, ECHO, "{query}", "--mode={mode}"], mode="hybrid")
    )
    (outcome,) = system.run_queries(requests("q"), k=3, answers=False)
    assert [h.snippet for h in outcome.hits] == ["q", "--mode=hybrid"]
    assert system.info().mode == "hybrid"


def test_cli_run_with_a_missing_executable_exits_2_with_one_paragraph(tmp_path):
    config = write_yaml(
        tmp_path / "cfg.yaml",
        {"system": {"kind": "command", "search_argv": ["kebab-no-such-tool-xyz", "--json", "{query}"]}},
    )
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("")
    env = {k: v for k, v in os.environ.items() if k not in ("KEBAB_EVAL_STORAGE", "KEBAB_EVAL_CONFIG")}
    env["DAGSTER_HOME"] = str(home)
    proc = subprocess.run(
        [KEBAB_EVAL, "run", "--config", str(config), "--run-id", "bad-cmd"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    stderr = proc.stderr.strip()
    assert "Traceback" not in proc.stderr
    assert stderr.startswith("error: cannot start the command system")
    assert "\n\n" not in stderr  # one paragraph
    flat = " ".join(stderr.split())  # the console may wrap long lines
    assert "'kebab-no-such-tool-xyz' not found on PATH" in flat


# ---------------------------------------------------------------------------------------------
# 7. version_argv.


def test_version_json_fills_the_system_versions():
    info = command(search_argv=[PY, ECHO], version_argv=[PY, VERSION, "json"]).info()
    assert info.kind == "command"
    assert info.index_version == "idx-42"
    assert info.chunker_version == "chunker-9"
    assert info.embedding_model == "mini-embed"
    assert info.prompt_template_version == "tpl-3"
    assert info.mode == "hybrid"  # reported, since the settings name none
    assert info.details["reported_build"] == "2024-05-01"
    assert "reported_extra" not in info.details
    assert "version_error" not in info.details


def test_version_text_goes_to_reported_version():
    info = command(search_argv=[PY, ECHO], version_argv=[PY, VERSION, "text"]).info()
    assert info.details["reported_version"] == "fake-search 1.4.2 (build abc123)"
    assert info.index_version is None and info.chunker_version is None


def test_failing_version_command_is_recorded_and_the_run_goes_on():
    system = command(search_argv=[PY, ECHO, "{query}"], version_argv=[PY, VERSION, "fail"])
    queries = pd.DataFrame({"query_id": ["a", "b"], "query": ["one", "two"]})
    results = run_golden(system, queries, k=10, answers=False)
    assert results.outcomes["error"].isna().all()
    assert results.hits["snippet"].tolist() == ["one", "two"]
    error = results.system.details["version_error"]
    assert "exit code 5" in error and "version: cannot open index" in error
    assert results.system.index_version is None


# ---------------------------------------------------------------------------------------------
# 8. ResponseMap on command output.


def test_response_map_reads_a_differently_shaped_command_output():
    settings = CommandSystemSettings.model_validate(
        {
            "kind": "command",
            "search_argv": [PY, MAPPED, "{query}"],
            "response": {
                "hits": "data.results",
                "hit_fields": {
                    "chunk_id": "id",
                    "doc_path": "src.path",
                    "snippet": "text",
                    "score": "relevance",
                },
            },
        }
    )
    (outcome,) = CommandSystem(settings).run_queries(requests("kimchi"), k=10, answers=False)
    assert outcome.error is None, outcome.error
    got = [(h.rank, h.chunk_id, h.doc_path, h.snippet, h.score) for h in outcome.hits]
    assert got == [
        (1, "doc-b#2", "b.md", "second for kimchi", 0.4),
        (2, "doc-a#1", "a.md", "first for kimchi", 0.9),
    ]
    (short,) = CommandSystem(settings).run_queries(requests("x"), k=1, answers=False)
    assert [h.chunk_id for h in short.hits] == ["doc-b#2"]
    assert short.warnings == ["returned 2 hits for k=1; kept the first 1"]

    unmapped = command(search_argv=[PY, MAPPED, "{query}"])
    (bad,) = unmapped.run_queries(requests("x"), k=10, answers=False)
    assert bad.error_class == "bad_response" and "'hits'" in bad.error
