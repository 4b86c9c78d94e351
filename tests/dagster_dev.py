"""``dagster dev`` as a reader starts it from the documentation: a bash script in a folder, the UI
polled until its code locations have loaded, then stopped with Ctrl-C as a user stops it."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

_LOCATIONS = (
    "{ workspaceOrError { ... on Workspace"
    " { locationEntries { name locationOrLoadError { __typename } } } } }"
)


def loaded_locations(
    script: str, port: int, cwd: Path, env: dict[str, str], log: Path
) -> list[tuple[str, str]]:
    """Runs ``script`` (a bash script whose ``dagster dev`` serves on ``port``) in ``cwd`` until the
    UI lists its code locations, each loaded or failed; returns them as (name, GraphQL type:
    ``RepositoryLocation`` when loaded, ``PythonError`` when not). Ctrl-C ends the session (its
    webserver, daemon and code servers: the whole process group) whatever happens."""
    with log.open("wb") as out:
        proc = subprocess.Popen(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # 127.0.0.1: no proxy
    try:
        deadline = time.monotonic() + 180
        while True:
            assert proc.poll() is None, log.read_text(errors="replace")[-3000:]
            request = urllib.request.Request(
                f"http://127.0.0.1:{port}/graphql",
                data=json.dumps({"query": _LOCATIONS}).encode(),
                headers={"Content-Type": "application/json"},
            )
            with contextlib.suppress(OSError):
                with opener.open(request, timeout=10) as response:
                    entries = json.load(response)["data"]["workspaceOrError"]["locationEntries"]
                if entries and all(e["locationOrLoadError"] is not None for e in entries):
                    return [(e["name"], e["locationOrLoadError"]["__typename"]) for e in entries]
            assert time.monotonic() < deadline, "dagster dev did not serve the UI in 180 s"
            time.sleep(1)
    finally:
        # Ctrl-C, as a user stops it; a session slow to wind down (its daemon, on a loaded machine)
        # is killed after 10 s: what is tested is that the UI served, not how long it takes to stop
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        with contextlib.suppress(ProcessLookupError):  # the daemon and code servers, should any outlive it
            os.killpg(proc.pid, signal.SIGKILL)
