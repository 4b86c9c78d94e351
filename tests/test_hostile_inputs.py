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

from kebab_eval_pipeline.chain.settings import load_settings
from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.foundation.limits import INPUT_ENV, read_limited
from kebab_eval_pipeline.golden.load import load_golden
from kebab_eval_pipeline.store.layout import PINS_FILE
from kebab_eval_pipeline.store.pins import read_pins
from kebab_eval_pipeline.store.runs import RunStore
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
    store = RunStore(tmp_path / "store")
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
        read_pins(RunStore(tmp_path / "store"))


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


# ---------------------------------------------------------------------------------------------
# item 5: ids with whitespace or control characters
# ---------------------------------------------------------------------------------------------

ODD = ["sp ace", "t\tab", "new\nline", "c\rr", "nul\x00", "c1\x85", "ls\u2028", "ps\u2029", "nb\xa0sp"]


@pytest.mark.parametrize("qid", ODD)
def test_golden_query_ids_with_whitespace_or_controls_are_refused(tmp_path, qid):
    line = json.dumps({"id": qid, "query": "q", "supports": [{"doc_id": "d"}]})
    with pytest.raises(InputError) as info:
        load_golden(write(tmp_path / "g.jsonl", line + "\n"))
    [offender] = info.value.offenders
    assert (offender.position, offender.query_id, offender.field) == ("line 1", qid, "id")
    assert "query id holds whitespace or a control character (U+" in offender.reason


def test_golden_chunk_and_doc_ids_refuse_tabs_and_line_breaks_but_keep_spaces(tmp_path):
    entries = [
        {"id": "a", "query": "q", "supports": [{"doc_id": "My File.md", "chunk_id": "x y"}]},
        {"id": "b", "query": "q", "supports": [{"doc_id": "d\n"}, {"chunk_id": "c\u2028"}]},
    ]
    path = write(tmp_path / "g.jsonl", "".join(json.dumps(e) + "\n" for e in entries))
    with pytest.raises(InputError) as info:
        load_golden(path)
    assert [(o.query_id, o.field) for o in info.value.offenders] == [
        ("b", "supports[0].doc_id"),
        ("b", "supports[1].chunk_id"),
    ]
    path.write_text(json.dumps(entries[0]) + "\n")
    assert load_golden(path).golden.queries[0].supports[0].chunk_id == "x y"


def test_trace_query_ids_with_controls_are_refused(tmp_path):
    trace = write(tmp_path / "t.jsonl", json.dumps({"query_id": "a\tb", "hits": []}) + "\n")
    with pytest.raises(InputError) as info:
        read_trace(trace)
    [offender] = info.value.offenders
    assert (offender.position, offender.query_id, offender.field) == ("line 1", "a\tb", "query_id")


def test_trec_export_of_hits_with_hostile_ids_stays_parseable(env, tmp_path):  # noqa: F811
    """The system's chunk ids and paths may hold anything: the run and qrels use docnos, and the
    docno legend escapes tab / line breaks / controls, so every file keeps one record per line."""
    pytrec_eval = pytest.importorskip("pytrec_eval")
    golden = write(
        tmp_path / "g.jsonl",
        json.dumps({"id": "q1", "query": "q", "supports": [{"chunk_id": "c\\tx"}, {"doc_id": "d 1"}]}) + "\n",
    )
    hits = [
        {"rank": r, "chunk_id": cid, "doc_path": path, "heading_path": ["h\u2028", "i\tj"], "score": 1.0}
        for r, (cid, path) in enumerate(
            [("c\\tx", "a\nb.md"), ("c\tx", "d 1"), ("n\r\x85", "e\\f"), ("\u2029", "")], start=1
        )
    ]
    trace = write(tmp_path / "t.jsonl", json.dumps({"query_id": "q1", "hits": hits}) + "\n")
    config = write(
        tmp_path / "eval.yaml", f"golden: {golden}\nmatch: chunk\nsystem: {{kind: replay, path: {trace}}}\n"
    )
    ran = cli(env, "run", "--config", str(config), "--run-id", "odd-1")
    assert ran.returncode == 0, ran.stderr
    out = tmp_path / "odd.trec"
    exported = cli(env, "export", "odd-1", "--format", "trec", "--out", str(out))
    assert exported.returncode == 0, exported.stderr
    run_text = out.read_text(encoding="utf-8")
    assert run_text.splitlines() == [
        "q1 Q0 gold:0 1 4 odd-1",
        "q1 Q0 hit:2 2 3 odd-1",
        "q1 Q0 hit:3 3 2 odd-1",
        "q1 Q0 hit:4 4 1 odd-1",
    ]
    with out.open() as fh:
        assert pytrec_eval.parse_run(fh) == {"q1": {"gold:0": 4.0, "hit:2": 3.0, "hit:3": 2.0, "hit:4": 1.0}}
    with out.with_name("odd.trec.qrels").open() as fh:
        assert pytrec_eval.parse_qrel(fh) == {"q1": {"gold:0": 1, "gold:1": 1}}
    legend = out.with_name("odd.trec.docnos.tsv").read_bytes().decode("utf-8")
    rows = [line.split("\t") for line in legend.split("\n")[:-1]]  # only "\n" ends a row
    assert [len(r) for r in rows] == [7] * 5
    assert [r[3] for r in rows[1:]] == ["c\\\\tx", "c\\tx", "n\\r\\x85", "\\u2029"]
    assert [r[4] for r in rows[1:]] == ["a\\nb.md", "d 1", "e\\\\f", ""]


# ---------------------------------------------------------------------------------------------
# item 9 (input part): lone surrogates and integers out of range
# ---------------------------------------------------------------------------------------------


def test_golden_lone_surrogates_exit_2_naming_query_and_field(env, tmp_path):  # noqa: F811
    json_file = write(
        tmp_path / "g.json",
        '{"queries": [{"id": "a", "query": "x\\ud800", "supports": [{"doc_id": "d", "snippet": "\\udfff"}]},'
        ' {"id": "b", "query": "ok \\ud83d\\ude00", "supports": [{"doc_id": "d"}]}]}',
    )
    proc = cli({**env, "COLUMNS": "500"}, "golden", "validate", str(json_file))
    assert proc.returncode == 2, proc.stderr
    no_traceback(proc)
    assert "golden set is invalid (2 problems)" in proc.stderr  # the valid pair in "b" is fine
    assert f"{json_file}:queries[0] — query 'a' — field 'query': holds a lone surrogate" in proc.stderr
    assert f"{json_file}:queries[0] — query 'a' — field 'supports[0].snippet': holds a lone" in proc.stderr
    yaml_file = write(tmp_path / "g.yaml", 'queries:\n  - id: a\n    query: "x\\ud800"\n')
    proc = cli({**env, "COLUMNS": "500"}, "golden", "validate", str(yaml_file))
    assert proc.returncode == 2 and f"{yaml_file}:line 3" in proc.stderr, proc.stderr
    no_traceback(proc)


@pytest.mark.parametrize(
    ("support", "field"),
    [
        ('"grade": 9223372036854775808', "supports.0.grade"),
        ('"grade": -9223372036854775809', "supports.0.grade"),
        ('"line_start": 18446744073709551616, "line_end": 18446744073709551617', "supports.0.line_start"),
        ('"line_end": 9007199254740993', "supports.0.line_end"),
    ],
)
def test_golden_integers_out_of_range_exit_2_naming_the_field(env, tmp_path, support, field):  # noqa: F811
    entry = '{"id": "a", "query": "q", "supports": [{"doc_id": "d", ' + support + "}]}\n"
    path = write(tmp_path / "g.jsonl", entry)
    proc = cli({**env, "COLUMNS": "500"}, "golden", "validate", str(path))
    assert proc.returncode == 2, proc.stderr
    no_traceback(proc)
    assert f"{path}:line 1 — query 'a' — field '{field}': out of range: " in proc.stderr


def test_ckv_line_range_out_of_range_is_refused(tmp_path):
    path = write(
        tmp_path / "ckv.yaml",
        "queries:\n  - id: a\n    intent: q\n"
        "    expected: {file: f.py, line_range: [1, 99999999999999999999]}\n",
    )
    with pytest.raises(InputError) as info:
        load_golden(path)
    [offender] = info.value.offenders
    assert offender.field == "supports.0.line_end" and offender.reason.startswith("out of range: ")


def test_trace_lone_surrogates_refuse_the_trace_naming_record_and_field(tmp_path):
    trace = write(
        tmp_path / "t.jsonl",
        '{"query_id": "q1", "hits": [{"rank": 1, "chunk_id": "c\\ud800"}]}\n'
        '{"query_id": "q\\udc00", "hits": []}\n{"query_id": "q3", "answer": {"text": "\\ud83d\\ude00"}}\n',
    )
    with pytest.raises(InputError) as info:
        read_trace(trace)
    assert [(o.position, o.query_id, o.field) for o in info.value.offenders] == [
        ("line 1", "q1", "hits[0].chunk_id"),
        ("line 2", "q\\udc00", "query_id"),
    ]
