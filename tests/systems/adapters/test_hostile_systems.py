"""Systems under test that try to exhaust memory, nest JSON without end, or leave processes behind.

Memory-hungry cases run the adapter in a process of its own under ``RLIMIT_AS`` (capped_run.py),
so a regression fails the test (a MemoryError row, a crash) instead of exhausting the machine;
the servers are real HTTP servers on 127.0.0.1 and the commands real processes.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from pydantic import ValidationError

from kebab_eval_pipeline.foundation.net.secrets import redact_url
from kebab_eval_pipeline.systems.command import CommandSystem
from kebab_eval_pipeline.systems.command_jsonl import JsonlCommandSystem
from kebab_eval_pipeline.systems.http import HttpSystem
from kebab_eval_pipeline.systems.kinds.command import CommandSystemSettings
from kebab_eval_pipeline.systems.kinds.http import HttpSystemSettings
from kebab_eval_pipeline.systems.outcome import ERROR_CLASSES, TOO_LARGE, QueryRequest
from tests.conftest import write
from tests.systems.adapters.fault_server import FaultServer, Reply
from tests.systems.adapters.test_command_adapter import _alive
from tests.test_cli import CLI, env

assert env  # the fixture, imported for this module's tests

HERE = Path(__file__).parent
CAPPED_RUN = HERE / "capped_run.py"
SLEEPER = HERE / "fake_systems" / "cmd_sleeper.py"
PY = sys.executable
DEEP = 100_000  # nesting depth of the deep-JSON responses (Python's parser gives up near 1,000)


def capped_run(system: dict, queries: int, address_space_mb: int = 1536) -> dict:
    """``system`` answering ``queries`` queries in a process capped at ``address_space_mb``."""
    proc = subprocess.run(
        [
            PY,
            str(CAPPED_RUN),
            json.dumps({"system": system, "queries": queries, "address_space_mb": address_space_mb}),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


# ---------------------------------------------------------------------------------------------
# Item 7: responses past system.max_response_mb


def test_too_large_is_an_error_class():
    assert TOO_LARGE == "too_large" and TOO_LARGE in ERROR_CLASSES


def test_max_response_mb_defaults_to_64_and_must_be_positive():
    assert CommandSystemSettings(kind="command", search_argv=["x"]).max_response_mb == 64
    assert HttpSystemSettings(kind="http", search_url="http://127.0.0.1:1/s").max_response_mb == 64
    with pytest.raises(ValidationError, match="max_response_mb"):
        HttpSystemSettings(kind="http", search_url="http://127.0.0.1:1/s", max_response_mb=0)


def test_a_command_printing_endlessly_is_too_large_and_killed_at_once():
    result = capped_run(
        {"kind": "command", "search_argv": ["yes", "{query}"], "timeout_s": 20, "max_response_mb": 8},
        queries=3,
    )
    rows = result["outcomes"]
    assert [r["error_class"] for r in rows] == ["too_large"] * 3
    assert rows[0]["error"] == "stdout passed the 8 MiB cap (system.max_response_mb)"
    assert [r["attempts"] for r in rows] == [1, 1, 1] and not any(r["timed_out"] for r in rows)
    assert result["elapsed_s"] < 10  # killed at the cap, not at the 20 s timeout
    assert result["max_rss_mb"] < 400


def test_a_jsonl_reply_line_past_the_cap_is_too_large_and_the_process_restarted(tmp_path):
    # Answers the version line, then one endless line per query (no newline ever comes).
    script = write(
        tmp_path / "endless.py",
        "import json, sys\n"
        "for line in sys.stdin:\n"
        "    req = json.loads(line)\n"
        "    if req['id'] == 'version':\n"
        "        print(json.dumps({'id': 'version'}), flush=True)\n"
        "        continue\n"
        "    chunk = 'x' * 65536\n"
        "    while True:\n"
        "        sys.stdout.write(chunk)\n",
    )
    result = capped_run(
        {
            "kind": "command",
            "protocol": "jsonl",
            "argv": [PY, str(script)],
            "timeout_s": 20,
            "max_response_mb": 4,
        },
        queries=2,
    )
    rows = result["outcomes"]
    assert [r["error_class"] for r in rows] == ["too_large"] * 2
    assert rows[0]["error"] == (
        "the reply line passed the 4 MiB cap (system.max_response_mb); process restarted"
    )
    assert result["elapsed_s"] < 10 and result["max_rss_mb"] < 400


class _StreamingHandler(BaseHTTPRequestHandler):
    """POST → 200 with the body the server's ``body`` function yields, chunk by chunk."""

    protocol_version = "HTTP/1.0"  # the body ends when the connection closes: no length to trust

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        for name, value in self.server.headers.items():  # type: ignore[attr-defined]
            self.send_header(name, value)
        self.end_headers()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client stopped reading
            for chunk in self.server.body():  # type: ignore[attr-defined]
                self.wfile.write(chunk)


@contextlib.contextmanager
def streaming_server(body: Callable[[], Iterator[bytes]], headers: dict[str, str]) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _StreamingHandler)
    server.daemon_threads = True
    server.body, server.headers = body, headers  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/search"
    finally:
        server.shutdown()
        server.server_close()


def _hundreds_of_megabytes() -> Iterator[bytes]:
    chunk = b"[" + b"0," * (1 << 19)  # 1 MiB, sent 300 times: a 300 MB body, never held in memory
    for _ in range(300):
        yield chunk


@pytest.fixture(scope="session")
def gzip_bomb(tmp_path_factory) -> Path:
    """gzip of 1 GiB of zeros (about 1 MB), compressed as a stream, once per session."""
    path = tmp_path_factory.mktemp("bomb") / "zeros.gz"
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    zeros = bytes(1 << 20)
    with path.open("wb") as out:
        for _ in range(1024):
            out.write(packer.compress(zeros))
        out.write(packer.flush())
    return path


def test_four_300_mb_http_bodies_are_too_large_with_memory_and_time_bounded():
    with streaming_server(_hundreds_of_megabytes, {}) as url:
        result = capped_run(
            {"kind": "http", "search_url": url, "timeout_s": 20, "concurrency": 4, "max_response_mb": 16},
            queries=4,
        )
    rows = result["outcomes"]
    assert [r["error_class"] for r in rows] == ["too_large"] * 4
    assert (
        rows[0]["error"] == f"POST {redact_url(url)}: the body passed the 16 MiB cap (system.max_response_mb)"
    )
    assert [r["attempts"] for r in rows] == [1] * 4  # not retried: it would be as large again
    assert result["elapsed_s"] < 10
    assert result["max_rss_mb"] < 400


def test_four_1_gib_gzip_bombs_stop_at_the_default_cap_within_the_timeout(gzip_bomb: Path):
    bomb = gzip_bomb.read_bytes()

    def body() -> Iterator[bytes]:
        for start in range(0, len(bomb), 1 << 16):
            yield bomb[start : start + (1 << 16)]

    with streaming_server(body, {"Content-Encoding": "gzip"}) as url:
        # 30 s: decompressing 4 x 64 MiB takes ~5 s on two loaded cores; a 10 s timeout left a
        # slower machine a timeout row instead of the too_large row this test is about
        result = capped_run({"kind": "http", "search_url": url, "timeout_s": 30, "concurrency": 4}, queries=4)
    rows = result["outcomes"]
    assert [r["error_class"] for r in rows] == ["too_large"] * 4
    assert (
        rows[0]["error"] == f"POST {redact_url(url)}: the body passed the 64 MiB cap (system.max_response_mb)"
    )
    assert result["elapsed_s"] < 30 + 2  # the timeout holds, decompression included
    assert result["max_rss_mb"] < 700  # four bodies of at most 64 MiB, not 4 GiB


def test_gzip_and_deflate_bodies_under_the_cap_are_read():
    hits = [{"chunk_id": f"c{n}", "snippet": "x" * 500} for n in range(5)]
    raw = json.dumps({"hits": hits}).encode()
    deflate_raw = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    encodings = {
        "gzip": zlib.compress(raw, wbits=31),
        "deflate": zlib.compress(raw),
        "deflate-raw": deflate_raw.compress(raw) + deflate_raw.flush(),
        "gzip-2-members": zlib.compress(raw[:100], wbits=31) + zlib.compress(raw[100:], wbits=31),
    }
    for name, data in encodings.items():  # small bodies: read in this process
        coding = name.split("-")[0]
        with streaming_server(lambda data=data: iter([data]), {"Content-Encoding": coding}) as url:
            system = HttpSystem(HttpSystemSettings(kind="http", search_url=url, timeout_s=10))
            (row,) = system.run_queries([QueryRequest("q1", "x")], 10, False)
        assert row.error_class is None, (name, row.error)
        assert [h.chunk_id for h in row.hits] == [f"c{n}" for n in range(5)], name


def test_an_encoding_we_did_not_ask_for_is_bad_response():
    with streaming_server(lambda: iter([b"(brotli)"]), {"Content-Encoding": "br"}) as url:
        system = HttpSystem(HttpSystemSettings(kind="http", search_url=url, timeout_s=10))
        (row,) = system.run_queries([QueryRequest("q1", "x")], 10, False)
    assert row.error_class == "bad_response"
    assert (
        row.error
        == f"POST {redact_url(url)}: content-encoding 'br' is not supported (asked for gzip, deflate)"
    )


# ---------------------------------------------------------------------------------------------
# Item 14 (json): nesting past what Python's parser reads


def _deep_hits() -> bytes:
    return b'{"id": "q1", "hits": ' + b"[" * DEEP + b"]" * DEEP + b"}"


def test_deeply_nested_json_from_http_is_bad_json_with_the_attempt_counted():
    with FaultServer(lambda request: Reply(body=b"[" * DEEP + b"]" * DEEP)) as server:
        result = capped_run(
            {"kind": "http", "search_url": server.url + "/search", "timeout_s": 10}, queries=2
        )
    rows = result["outcomes"]
    assert [r["error_class"] for r in rows] == ["bad_json"] * 2
    assert rows[0]["error"].startswith(f"POST {server.url}/search: JSON nested too deeply to read: '[[[[")
    assert [r["attempts"] for r in rows] == [1, 1]


def test_deeply_nested_json_from_a_command_or_jsonl_system_is_bad_json(tmp_path):
    out = write(tmp_path / "deep.json", _deep_hits().decode())
    per_query = CommandSystem(
        CommandSystemSettings(kind="command", search_argv=[PY, "-c", f"print(open({str(out)!r}).read())"])
    )
    (row,) = per_query.run_queries([QueryRequest("q1", "deep")], 5, False)
    assert (row.error_class, row.attempts) == ("bad_json", 1)
    assert row.error.startswith("unreadable JSON")
    script = write(
        tmp_path / "deep.py",
        "import json, sys\n"
        f"deep = open({str(out)!r}).read()\n"
        "for line in sys.stdin:\n"
        "    req = json.loads(line)\n"
        "    print(json.dumps({'id': 'version'}) if req['id'] == 'version' else deep, flush=True)\n",
    )
    jsonl = JsonlCommandSystem(
        CommandSystemSettings(kind="command", protocol="jsonl", argv=[PY, str(script)])
    )
    (row,) = jsonl.run_queries([QueryRequest("q1", "deep")], 5, False)
    assert (row.error_class, row.attempts) == ("bad_json", 1)
    assert row.error.startswith("reply line is not JSON (unreadable)")


# ---------------------------------------------------------------------------------------------
# Item 8: processes left behind


def test_a_result_printed_before_exit_is_kept_when_a_background_child_holds_stdout(tmp_path):
    pid_file = tmp_path / "sleeper.pid"
    script = f'sleep 100 & echo $! > {pid_file}; echo \'{{"hits": ["c1", "c2"]}}\''
    system = CommandSystem(
        CommandSystemSettings(kind="command", search_argv=["sh", "-c", script], timeout_s=10)
    )
    started = time.monotonic()
    (row,) = system.run_queries([QueryRequest("q1", "x")], 5, False)
    elapsed = time.monotonic() - started
    assert row.error_class is None, row.error
    assert [h.chunk_id for h in row.hits] == ["c1", "c2"]
    assert elapsed < 3  # the command's exit ends the read (plus a short drain), not the timeout
    assert survivors([int(pid_file.read_text())]) == []  # and the child left behind was killed


def test_a_jsonl_process_that_exits_while_a_child_holds_stdout_is_a_crash_not_a_timeout(tmp_path):
    script = write(
        tmp_path / "leaves.py",
        "import json, subprocess, sys\n"
        "req = json.loads(sys.stdin.readline())\n"
        "print(json.dumps({'id': 'version'}), flush=True)\n"
        "sys.stdin.readline()\n"
        "subprocess.Popen(['sleep', '100'])  # inherits stdout and outlives us\n"
        "sys.exit(3)\n",
    )
    system = JsonlCommandSystem(
        CommandSystemSettings(
            kind="command", protocol="jsonl", argv=[PY, str(script)], timeout_s=20, max_restarts=0
        )
    )
    started = time.monotonic()
    (row,) = system.run_queries([QueryRequest("q1", "x")], 5, False)
    assert row.error_class == "exit_code", row.error
    assert row.error.startswith("the process ended while handling this query (exit code 3)")
    assert time.monotonic() - started < 10


def survivors(pids: list[int], within_s: float = 1.0) -> list[int]:
    """The ``pids`` still running after up to ``within_s`` (a SIGKILL takes effect asynchronously)."""
    deadline = time.monotonic() + within_s
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    return [pid for pid in pids if _alive(pid)]


def _pids(state: Path) -> list[int]:
    return [int(p) for f in sorted(state.glob("*.pids")) for p in f.read_text().split()]


@pytest.mark.parametrize("protocol", ["per_query", "jsonl"])
def test_sigkill_of_kebab_eval_run_takes_the_system_and_its_children_with_it(env, tmp_path, protocol):
    state = tmp_path / "state"
    state.mkdir()
    queries = "".join(
        f"  - id: q{n}\n    query: where is {n}\n    supports: [{{rel_path: d{n}.md}}]\n" for n in (1, 2)
    )
    golden = write(tmp_path / "golden.yaml", f"name: kill-set\nqueries:\n{queries}")
    if protocol == "jsonl":
        system = f"  protocol: jsonl\n  argv: {[PY, str(SLEEPER), str(state), 'jsonl']!r}\n"
    else:
        system = f"  search_argv: {[PY, str(SLEEPER), str(state)]!r}\n  concurrency: 2\n"
    config = write(
        tmp_path / "eval.yaml",
        f"golden: {golden}\nanswers: false\nk: [1]\nbaseline: none\ndefault_gates: false\n"
        f"system:\n  kind: command\n{system}  timeout_s: 300\n",
    )
    log = tmp_path / "run.log"
    with log.open("wb") as out:
        run = subprocess.Popen(
            [*CLI, "run", "--config", str(config), "--run-id", "killed"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # so that the test can clean up whatever a regression leaves
        )
    pids: list[int] = []
    try:
        want = 2 if protocol == "per_query" else 1  # processes started before the run blocks
        deadline = time.monotonic() + 180
        while len(pids := _pids(state)) < 3 * want:
            assert run.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.05)
        assert all(_alive(pid) for pid in pids)
        os.kill(run.pid, signal.SIGKILL)  # kebab-eval alone: no handler runs, nothing cleans up
        run.wait(timeout=30)
        assert survivors(pids, within_s=2.0) == []  # guard, command and its sleeper: all gone
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(run.pid, signal.SIGKILL)
        run.wait(timeout=30)
