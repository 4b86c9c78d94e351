"""`golden validate --config` against a command or http system checks what it can and says what it
could not: a real HTTP server on 127.0.0.1 answering like a Haystack pipeline with default settings
(file names without folders, heading paths, no line ranges), a real command, an unreachable server.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from tests.conftest import write
from tests.systems.adapters.conftest import free_port
from tests.test_cli import cli, env, no_traceback  # noqa: F401  (env is a fixture)

QUERIES = [
    {"id": f"q{i}", "query": f"part {i}?", "supports": [
        {"rel_path": f"docs/guide-{i}.md", "heading_path": ["Guide", f"Part {i}"],
         "line_start": 3, "line_end": 5},
    ]}
    for i in (1, 2)
]  # fmt: skip


def search_hits(path_of) -> dict:
    return {
        "hits": [
            {"rank": 1, "chunk_id": "c1", "doc_path": path_of("docs/guide-1.md"),
             "heading_path": ["Guide", "Part 1"]},
            {"rank": 2, "chunk_id": "c2", "doc_path": path_of("docs/other.md"), "heading_path": ["Other"]},
        ]
    }  # fmt: skip


class _Handler(BaseHTTPRequestHandler):
    def _send(self, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._send({"chunker_version": "split-200", "coverage": {"docs_processed": 12, "chunks": 80}})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.server.requests += 1  # type: ignore[attr-defined]
        self._send(search_hits(lambda p: p.rsplit("/", 1)[-1]))  # store_full_path=False: basenames

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def server() -> Iterator[ThreadingHTTPServer]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.requests = 0  # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield httpd
    finally:
        httpd.shutdown()
        httpd.server_close()


def configs(tmp_path, system: dict) -> tuple[str, str]:
    golden = write(tmp_path / "golden.yaml", yaml.safe_dump({"schema_version": "1", "queries": QUERIES}))
    cfg = write(tmp_path / "eval.yaml", yaml.safe_dump({"golden": str(golden), "system": system}))
    return str(golden), str(cfg)


def flat(text: str) -> str:
    return " ".join(text.split())


def test_http_system_is_probed_and_the_basenames_named(env, tmp_path, server):  # noqa: F811
    url = f"http://127.0.0.1:{server.server_address[1]}"
    golden, cfg = configs(
        tmp_path, {"kind": "http", "search_url": f"{url}/search", "version_url": f"{url}/version"}
    )
    proc = cli(env, "golden", "validate", golden, "--config", cfg)
    assert proc.returncode == 0, proc.stderr
    no_traceback(proc)
    out = flat(proc.stdout)
    assert out.startswith("ok: 2 queries")
    assert "system check (http):" in out
    assert (
        "checked: version report (version_url): chunker_version=split-200; docs_processed=12, chunks=80"
        in out
    )
    assert (
        "checked: probe query 'q1': 2 hit(s); hits carry doc paths 2/2, heading paths 2/2, line ranges 0/2, "
        "chunk ids 2/2, doc ids 0/2" in out
    )
    assert "checked: 0 of 2 probe hit(s) name a document of the golden set" in out
    assert "checked: match: auto on hits like these → anchor (2 queries)" in out
    assert "warning matching (lines): 2 of 2 hits carry no line range" in out
    assert (
        "basenames (e.g. 'guide-1.md') where the golden set has relative paths (e.g. 'docs/guide-1.md')"
        in out
    )
    assert "not checked: that the gold references (paths, heading paths, chunk ids, lines) exist" in out
    assert "an http system cannot list what its index holds" in out
    assert server.requests == 1  # one probe query, not the golden set


def test_command_system_without_version_report(env, tmp_path):  # noqa: F811
    script = write(
        tmp_path / "search.py",
        f"import json, sys\nprint(json.dumps({search_hits(lambda p: p)!r}))\n",
    )
    golden, cfg = configs(
        tmp_path, {"kind": "command", "search_argv": [sys.executable, str(script), "{query}"]}
    )
    proc = cli(env, "golden", "validate", golden, "--config", cfg)
    assert proc.returncode == 0, proc.stderr
    out = flat(proc.stdout)
    assert "system check (command):" in out
    assert "checked: 1 of 2 probe hit(s) name a document of the golden set" in out
    assert "not checked: the system's versions and indexing coverage (no version_argv configured)" in out
    assert "matching (doc_path)" not in out  # paths are fine: no path warning


def test_unreachable_system_exits_1_and_says_why(env, tmp_path):  # noqa: F811
    golden, cfg = configs(
        tmp_path,
        {
            "kind": "http",
            "search_url": f"http://127.0.0.1:{free_port()}/search",
            "retries": 0,
            "timeout_s": 5,
        },
    )
    proc = cli(env, "golden", "validate", golden, "--config", cfg)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    no_traceback(proc)
    assert proc.stdout.startswith("ok: 2 queries")  # the golden file itself is valid
    assert "error: system check failed: probe query 'q1' failed: connection" in flat(proc.stderr)


PYTHON_SYSTEMS = str(Path(__file__).parents[1] / "systems")


def test_python_system_is_built_probed_and_its_catalogue_checked(env, tmp_path):  # noqa: F811
    golden, cfg = configs(
        tmp_path, {"kind": "python", "callable": "python_systems:Guide", "path": [PYTHON_SYSTEMS]}
    )
    proc = cli(env, "golden", "validate", golden, "--config", cfg)
    assert proc.returncode == 0, proc.stderr
    no_traceback(proc)
    out = flat(proc.stdout)
    assert "system check (python):" in out
    assert "checked: version report (versions()): chunker_version=guide-parts; docs_processed=2" in out
    assert "checked: probe query 'q1': 2 hit(s); hits carry doc paths 2/2, heading paths 2/2" in out
    assert "checked: 2 of 2 probe hit(s) name a document of the golden set" in out
    assert "checked: the gold references against the system's catalogue (its index's chunks)" in out
    assert "not checked: answers: the python system python_systems:Guide has no ask method" in out
    assert "exist in the system's index" not in out


def test_python_system_whose_catalogue_lacks_a_gold_document_exits_2(env, tmp_path):  # noqa: F811
    golden, cfg = configs(
        tmp_path,
        {
            "kind": "python",
            "callable": "python_systems:Guide",
            "args": {"parts": [1]},
            "path": [PYTHON_SYSTEMS],
        },
    )
    proc = cli(env, "golden", "validate", golden, "--config", cfg)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    no_traceback(proc)
    err = flat(proc.stderr)
    assert "golden set is stale" in err
    assert "query 'q2'" in err and "supports[0].rel_path" in err
    assert "no document at this path in the index ('docs/guide-2.md')" in err


def test_python_search_function_says_what_it_could_not_check(env, tmp_path):  # noqa: F811
    golden, cfg = configs(
        tmp_path, {"kind": "python", "callable": "python_systems:search_fn", "path": [PYTHON_SYSTEMS]}
    )
    proc = cli(env, "golden", "validate", golden, "--config", cfg)
    assert proc.returncode == 0, proc.stderr
    out = flat(proc.stdout)
    assert "checked: probe query 'q1': 10 hit(s)" in out
    assert (
        "not checked: the system's versions and indexing coverage (the python system "
        "python_systems:search_fn has no versions() method)" in out
    )
    assert (
        "not checked: that the gold references (paths, heading paths, chunk ids, lines) exist in the "
        "system's index: the python system python_systems:search_fn has no catalogue() method" in out
    )


def test_python_system_that_cannot_be_built_exits_2(env, tmp_path):  # noqa: F811
    golden, cfg = configs(
        tmp_path, {"kind": "python", "callable": "python_systems:broken_factory", "path": [PYTHON_SYSTEMS]}
    )
    proc = cli(env, "golden", "validate", golden, "--config", cfg)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    no_traceback(proc)
    assert "system.callable" in proc.stderr and "the factory raised" in proc.stderr
