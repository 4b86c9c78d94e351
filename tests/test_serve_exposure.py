"""Servers without authentication stay on loopback unless forced (issue 22 item 13).

`kebab-eval judge serve` and `kebab-eval ref serve` as real processes: a non-loopback ``--host``
without a key exits 2 before anything listens; ``--allow-unauthenticated`` binds and warns on stderr.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from kebab_eval_pipeline.foundation.net.serve import is_loopback
from kebab_eval_pipeline.reference.index import ReferenceIndex
from tests.conftest import stop_server
from tests.forked_cli import run_cli
from tests.judge.conftest import judge_or_skip
from tests.reference.conftest import write_corpus

CLI = [sys.executable, "-m", "kebab_eval_pipeline.cli"]
REFUSED = "without authentication"
WARNED = "WITHOUT AUTHENTICATION"


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True), ("127.255.0.9", True), ("localhost", True), ("LOCALHOST.", True),
        ("::1", True), ("[::1]", True), ("::ffff:127.0.0.1", True),
        ("0.0.0.0", False), ("::", False), ("", False), ("10.0.0.1", False), ("192.168.1.5", False),
        ("example.com", False), ("localhost.evil.com", False), ("128.0.0.1", False), ("::2", False),
    ],
)  # fmt: skip
def test_loopback_means_only_this_machine(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DAGSTER_", "KEBAB_EVAL_"))}
    return env | extra


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(*args: str, **extra: str) -> subprocess.CompletedProcess:
    proc = run_cli(args, env=_env(**extra), timeout=120)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def _nothing_listens(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("idx")
    ReferenceIndex.build(write_corpus(tmp_path_factory.mktemp("corpus"))).save(out)
    return out


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.1.2.3"])
def test_judge_serve_refuses_a_reachable_bind_without_a_key(host: str) -> None:
    port = _free_port()
    proc = _run("judge", "serve", "--host", host, "--port", str(port))
    assert proc.returncode == 2, proc.stderr
    message = " ".join(proc.stderr.split())  # the CLI wraps long error lines
    assert f"refusing to serve the judge model on '{host}' {REFUSED}" in message
    assert "--api-key-env" in message and "--allow-unauthenticated" in message
    assert proc.stdout == "" and _nothing_listens(port)


def test_judge_serve_with_a_key_or_forced_goes_on_to_load_the_model(tmp_path: Path) -> None:
    # A missing model file is the next check (exit 2 naming it), so reaching it proves the bind passed.
    model = str(tmp_path / "absent.gguf")
    keyed = _run(
        "judge", "serve", "--host", "0.0.0.0", "--port", "0", "--model", model,
        "--api-key-env", "JUDGE_KEY", JUDGE_KEY="s3cret",
    )  # fmt: skip
    assert keyed.returncode == 2 and "absent.gguf" in keyed.stderr and REFUSED not in keyed.stderr
    assert WARNED not in keyed.stderr
    forced = _run(
        "judge", "serve", "--host", "0.0.0.0", "--port", "0", "--model", model, "--allow-unauthenticated"
    )
    assert forced.returncode == 2 and "absent.gguf" in forced.stderr
    assert forced.stderr.startswith("WARNING: serving the judge model on '0.0.0.0' WITHOUT AUTHENTICATION")


def _serve(argv: list[str], port: int) -> tuple[str, str, dict]:
    """Start a server on 0.0.0.0:PORT, read its serving line, GET /health over loopback, stop it;
    returns (serving line, stderr, health body)."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
    try:
        line = proc.stdout.readline().strip() if proc.stdout else ""
        assert line.startswith("serving "), (line, proc.stderr.read() if proc.poll() is not None else "")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=30) as resp:
            health = json.loads(resp.read())
    finally:
        stderr = stop_server(proc)
    return line, stderr, health


def test_ref_serve_refuses_a_reachable_bind(index_dir: Path) -> None:
    port = _free_port()
    proc = _run("ref", "serve", str(index_dir), "--host", "0.0.0.0", "--port", str(port))
    assert proc.returncode == 2, proc.stderr
    assert f"refusing to serve the reference index (its corpus text) on '0.0.0.0' {REFUSED}" in proc.stderr
    assert proc.stdout == "" and _nothing_listens(port)


def test_ref_serve_forced_on_every_interface_listens_and_warns(index_dir: Path) -> None:
    port = _free_port()
    argv = [*CLI, "ref", "serve", str(index_dir), "--host", "0.0.0.0", "--port", str(port)]
    line, stderr, health = _serve([*argv, "--allow-unauthenticated"], port)
    assert line == f"serving http://0.0.0.0:{port}" and health == {"status": "ok"}
    assert f"WARNING: serving the reference index (its corpus text) on '0.0.0.0' {WARNED}" in stderr


def test_judge_serve_forced_on_every_interface_listens_and_warns() -> None:
    judge_or_skip()  # the port is bound after the default model is found and hashed
    port = _free_port()
    argv = [*CLI, "judge", "serve", "--host", "0.0.0.0", "--port", str(port), "--allow-unauthenticated"]
    line, stderr, health = _serve(argv, port)
    assert line.endswith(f"on http://0.0.0.0:{port}/v1") and health
    assert f"WARNING: serving the judge model on '0.0.0.0' {WARNED}" in stderr
