"""Hostile input files (issue 22): duplicate keys, non-regular files and reads past the size limit.

Every file the tool reads — golden sets (YAML / JSON / JSONL), run configs, replay traces and the
pinned-baseline document — is read with the size limit enforced on the bytes read, refuses devices,
FIFOs and sockets before opening them, and refuses a key written twice in one mapping (naming the
key with its path and both lines) instead of silently keeping the last value.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from kebab_eval_pipeline.compare.baseline import PINS_FILE, read_pins
from kebab_eval_pipeline.errors import InputError
from kebab_eval_pipeline.golden.load import load_golden
from kebab_eval_pipeline.limits import INPUT_ENV, read_limited
from kebab_eval_pipeline.settings import load_settings
from kebab_eval_pipeline.storage import ArtifactStore
from kebab_eval_pipeline.systems.replay import read_trace
from tests.conftest import write
from tests.test_cli import CLI, cli, env, no_traceback  # noqa: F401  (env is a fixture)

QUERY = "  - id: {qid}\n    query: what is {qid}\n    supports: [{{doc_id: d}}]\n"


def reasons(exc: InputError) -> list[tuple[str | None, str | None, str]]:
    return [(o.position, o.field, o.reason) for o in exc.offenders]


# ---------------------------------------------------------------------------------------------
# item 1: duplicate keys
# ---------------------------------------------------------------------------------------------


def test_golden_yaml_with_two_queries_blocks_names_the_key_and_both_lines(tmp_path):
    text = 'schema_version: "1"\nqueries:\n' + QUERY.format(qid="a") + "queries:\n" + QUERY.format(qid="b")
    path = write(tmp_path / "g.yaml", text)
    with pytest.raises(InputError) as info:
        load_golden(path)
    [(position, field, reason)] = reasons(info.value)
    assert (position, field) == ("line 6", "queries")
    assert reason.startswith("duplicate key 'queries' at line 6; first at line 2")


def test_golden_json_with_two_queries_blocks_lists_every_duplicate(tmp_path):
    query = {"id": "a", "query": "q", "supports": [{"doc_id": "d"}]}
    text = (
        '{\n  "schema_version": "1",\n  "queries": [' + json.dumps(query) + "],\n"
        '  "queries": [\n    {"id": "b", "query": "q", "id": "c", "supports": []}\n  ]\n}\n'
    )
    path = write(tmp_path / "g.json", text)
    with pytest.raises(InputError) as info:
        load_golden(path)
    assert reasons(info.value) == [
        ("line 4", "queries", "duplicate key 'queries' at line 4; first at line 3" + _TAIL),
        ("line 5", "queries[0].id", "duplicate key 'id' at line 5; first at line 5" + _TAIL),
    ]


_TAIL = " (a parser would silently keep the last value): remove or rename one"


def test_golden_jsonl_line_with_a_duplicate_id_is_refused(tmp_path):
    path = write(
        tmp_path / "g.jsonl",
        '{"id": "x", "query": "q", "supports": [{"doc_id": "d"}]}\n'
        '{"id":"a","id":"b","query":"q","supports":[{"doc_id":"d","doc_id":"e"}]}\n',
    )
    with pytest.raises(InputError) as info:
        load_golden(path)
    assert [(p, f) for p, f, _ in reasons(info.value)] == [("line 2", "id"), ("line 2", "supports[0].doc_id")]


def test_yaml_merge_keys_are_not_duplicates_but_own_keys_are(tmp_path):
    config = write(
        tmp_path / "eval.yaml",
        "base: &gate {min: 0.5, blocking: true}\n"
        "gates:\n  mrr:\n    <<: *gate\n    min: 0.7\n  hit@1: {<<: *gate}\n",
    )
    with pytest.raises(InputError) as info:  # "base" is an unknown key: the merges themselves load
        load_settings(config)
    assert [o.field for o in info.value.offenders] == ["base"]
    config.write_text(config.read_text().replace("base: &gate", "gates_base: &gate") + "k: [1]\nk: [3]\n")
    with pytest.raises(InputError) as info:
        load_settings(config)
    assert reasons(info.value) == [("line 8", "k", "duplicate key 'k' at line 8; first at line 7" + _TAIL)]


def test_cli_run_refuses_a_config_whose_second_gates_block_would_drop_the_gate(env, tmp_path):  # noqa: F811
    config = write(
        tmp_path / "eval.yaml",
        "gates:\n  mrr: {min: 0.99}\nanswers: false\nsystem:\n  kind: reference\n  kind: replay\ngates: {}\n",
    )
    proc = cli({**env, "COLUMNS": "500"}, "run", "--config", str(config), "--run-id", "dup-1")
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    no_traceback(proc)
    assert "run config has duplicate keys (2 problems)" in proc.stderr
    assert f"{config}:line 6 — field 'system.kind': duplicate key 'kind' at line 6; first at line 5" in (
        proc.stderr
    )
    assert f"{config}:line 7 — field 'gates': duplicate key 'gates' at line 7; first at line 1" in proc.stderr


def test_replay_trace_line_with_a_duplicate_key_is_refused(tmp_path):
    trace = write(
        tmp_path / "t.jsonl",
        '{"query_id": "q1", "hits": []}\n\n{"query_id": "q2", "query_id": "q3", "hits": []}\n',
    )
    with pytest.raises(InputError) as info:
        read_trace(trace)
    assert reasons(info.value) == [
        ("line 3", "query_id", "duplicate key 'query_id' at line 3; first at line 3" + _TAIL)
    ]
    export = write(tmp_path / "e.json", '{"per_query": [],\n "per_query": [{"query_id": "q1"}]}')
    with pytest.raises(InputError) as info:
        read_trace(export, "export")
    assert reasons(info.value) == [
        ("line 2", "per_query", "duplicate key 'per_query' at line 2; first at line 1" + _TAIL)
    ]


def test_pins_document_with_a_duplicate_golden_name_is_refused(tmp_path):
    store = ArtifactStore(tmp_path / "store")
    pin = '{"run_id": "%s", "golden_sha256": "s", "pinned_at": "t"}'
    write(tmp_path / "store" / PINS_FILE, '{\n "demo": ' + pin % "r1" + ',\n "demo": ' + pin % "r2" + "\n}")
    with pytest.raises(InputError) as info:
        read_pins(store)
    reason = "duplicate key 'demo' at line 3; first at line 2" + _TAIL
    assert reasons(info.value) == [("line 3", "demo", reason)]


# ---------------------------------------------------------------------------------------------
# item 6: non-regular files and the limit on bytes read
# ---------------------------------------------------------------------------------------------

# Runs the CLI under a 1.5 GiB address-space cap: an unbounded read fails this test, not the machine.
_CAPPED = textwrap.dedent(
    """
    import resource, runpy, sys
    resource.setrlimit(resource.RLIMIT_AS, (1536 * 2**20, 1536 * 2**20))
    sys.argv = ["kebab-eval", *sys.argv[1:]]
    runpy.run_module("kebab_eval_pipeline.cli", run_name="__main__")
    """
)


def capped_cli(environ: dict, *args: str, timeout: float = 60) -> tuple[subprocess.CompletedProcess, float]:
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", _CAPPED, *args], env=environ, capture_output=True, text=True, timeout=timeout
    )
    return proc, time.monotonic() - start


def test_golden_validate_dev_zero_exits_2_at_once(env):  # noqa: F811
    proc, took = capped_cli({**env, INPUT_ENV: "10", "COLUMNS": "500"}, "golden", "validate", "/dev/zero")
    assert proc.returncode == 2, proc.stderr
    no_traceback(proc)
    assert "/dev/zero:top level: is a character device: give a regular file" in proc.stderr
    assert took < 30


@pytest.fixture
def fifo(tmp_path) -> Path:
    path = tmp_path / "pipe.jsonl"
    os.mkfifo(path)
    return path


def test_a_fifo_as_golden_or_trace_exits_2_without_blocking(env, tmp_path, fifo):  # noqa: F811
    environ = {**env, "COLUMNS": "500"}
    proc, _ = capped_cli(environ, "golden", "validate", str(fifo), timeout=30)  # opening it would block
    assert proc.returncode == 2, proc.stderr
    assert f"{fifo}:top level: is a FIFO (named pipe): give a regular file" in proc.stderr
    config = write(tmp_path / "eval.yaml", f"system: {{kind: replay, path: {fifo}}}\n")
    proc, _ = capped_cli(environ, "run", "--config", str(config), "--run-id", "fifo-1", timeout=120)
    assert proc.returncode == 2, proc.stderr
    no_traceback(proc)
    assert f"{fifo}:top level — field 'system.path': is a FIFO (named pipe)" in proc.stderr
    config.write_text(f"golden: {fifo}\n")
    proc, _ = capped_cli(environ, "run", "--config", str(config), "--run-id", "fifo-2", timeout=120)
    assert proc.returncode == 2 and "is a FIFO (named pipe)" in proc.stderr, proc.stderr


def test_a_fifo_as_config_or_pins_is_refused(tmp_path, fifo):
    with pytest.raises(InputError, match="is a FIFO"):
        load_settings(fifo)
    (tmp_path / "store").mkdir()
    os.mkfifo(tmp_path / "store" / PINS_FILE)
    with pytest.raises(InputError, match="is a FIFO"):
        read_pins(ArtifactStore(tmp_path / "store"))


def test_the_limit_holds_on_bytes_read_when_stat_says_0(monkeypatch):
    # /proc files have st_size 0: only the bytes read can show them over the limit
    status = Path("/proc/self/status")
    assert status.stat().st_size == 0 and len(status.read_bytes()) > 1024
    monkeypatch.setenv(INPUT_ENV, str(1024 / 2**20))  # 1 KiB
    with pytest.raises(InputError) as info:
        read_limited(status, "golden set")
    assert info.value.summary == "golden set is too large"
    reason = info.value.offenders[0].reason
    assert "more than 1.0 KiB" in reason and INPUT_ENV in reason
    monkeypatch.setenv(INPUT_ENV, "1")
    assert read_limited(status, "golden set").startswith(b"Name:")
