"""Real judge endpoints on 127.0.0.1 for tests.

* :func:`judge_server` — ``kebab-eval judge serve --port 0`` as a subprocess (the real local
  model); yields its base URL, which also carries the served ``model`` and ``digest``.
* :func:`app_server` — any Starlette app (e.g. ``serve.create_app`` over an in-test backend)
  served by Uvicorn in a thread of this process.
* :func:`chat_body` — a valid ``chat.completion`` body for a scripted endpoint (``FaultServer``
  from ``tests/systems/adapters/fault_server.py``), built by the server's own serialiser.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import uvicorn
from starlette.applications import Starlette

from kebab_eval_pipeline.foundation.net.serve import bind
from kebab_eval_pipeline.judge.completion import Completion
from kebab_eval_pipeline.judge.serve import chat_completion
from tests.reference.test_ref_server import CLI, Server, stop


class JudgeURL(str):
    """``http://127.0.0.1:PORT/v1`` plus what the server announced: ``model`` and ``digest``."""

    model: str
    digest: str


def parse_serving_line(line: str) -> JudgeURL:
    """Read ``serving MODEL DIGEST on URL`` (the model may contain spaces, the rest cannot)."""
    if not line.startswith("serving ") or " on http://" not in line:
        raise AssertionError(f"judge serve did not start: {line!r}")
    head, url = line.removeprefix("serving ").rsplit(" on ", 1)
    model, digest = head.rsplit(" ", 1)
    served = JudgeURL(url)
    served.model, served.digest = model, digest
    return served


@contextmanager
def judge_server(
    model: str | None = None, env: Mapping[str, str] | None = None, args: Sequence[str] = ()
) -> Iterator[JudgeURL]:
    """``kebab-eval judge serve --port 0 [--model MODEL]`` with ``env`` added to the environment;
    yields the announced base URL; terminates the server (SIGTERM) afterwards and checks that it
    wrote no traceback."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("DAGSTER_")} | dict(env or {})
    argv = [*CLI, "judge", "serve", "--port", "0", *(["--model", model] if model else []), *args]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full_env)
    line = proc.stdout.readline().strip() if proc.stdout else ""
    try:
        served = parse_serving_line(line)
    except AssertionError:
        proc.kill()
        raise AssertionError(f"judge serve did not start: {line!r}\n{proc.communicate()[1]}") from None
    try:
        yield served
    finally:
        stderr = stop(Server(proc, served))
        assert "Traceback" not in stderr, stderr


@contextmanager
def app_server(app: Starlette) -> Iterator[str]:
    """Serve ``app`` with Uvicorn on a free 127.0.0.1 port in a thread; yields
    ``http://127.0.0.1:PORT``; stops the server afterwards."""
    sock = bind("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off"))
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"  # listening already: bind() did listen()
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def chat_body(completion: Completion, model: str = "m", digest: str = "sha256:0") -> dict[str, Any]:
    """The ``chat.completion`` body an endpoint serving ``model`` sends for ``completion``."""
    return chat_completion(completion, model, digest, completion.tokens is not None, key="scripted")
