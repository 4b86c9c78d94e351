"""Scripts run each in a process of its own, forked from one that has imported the OTLP recipe's
libraries already (tests/frameworks/test_otlp_recipe.py).

Each run of the README's recipe is a fresh process — its own pid, working folder, ``__main__``,
instrumentor and tracer provider, its streams in files beside the script — but it does not import
LlamaIndex, OpenInference, the OpenTelemetry SDK and protobuf again: the module's five runs each
paid that (~2 s of CPU, ~7-11 s of wall time on a loaded two-core machine) before. Only imports
happen here before the fork: the instrumentor patches LlamaIndex when the script calls
``instrument()``, in the forked process.

    runner = RecipeRunner(env)           # starts this file as a process (the zygote)
    code, stderr = runner.run(script)    # forks, runs script as __main__ in its folder; exit code
    runner.close()

Protocol: one script path a line on the zygote's stdin; on its stdout, the forked process's pid,
then its exit code, a line each. The script's stdout and stderr go to ``<script>.stdout`` and
``<script>.stderr``.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import select
import signal
import subprocess
import sys
import threading
from pathlib import Path

#: What the recipe and the LlamaIndex app import: module import only (no patching happens at import).
PRELOAD = (
    "google.protobuf.json_format",
    "opentelemetry.sdk.trace",
    "opentelemetry.sdk.trace.export",
    "opentelemetry.exporter.otlp.proto.common.trace_encoder",
    "openinference.instrumentation.llama_index",
    "llama_index.core",
    "llama_index.core.llms",
    "llama_index.core.node_parser",
    "llama_index.core.query_engine",
    "llama_index.retrievers.bm25",
)


class RecipeRunner:
    """The zygote process, started with ``env``; :meth:`run` one script at a time."""

    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, __file__],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            text=True,
        )

    def run(self, script: Path, timeout_s: float = 600) -> tuple[int, str]:
        """Run ``script`` as ``__main__`` (cwd and ``sys.path[0]``: its folder) in a process forked
        from the zygote; returns its exit code and its stderr."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{script}\n")
        self.proc.stdin.flush()
        pid = int(self.proc.stdout.readline() or 0)  # the forked process's
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout_s)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            if pid:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)  # as subprocess.run(timeout=...) kills its child
            self.close()
            raise AssertionError(f"the recipe zygote ended or {script} took over {timeout_s} s")
        return int(line), Path(f"{script}.stderr").read_text(encoding="utf-8", errors="replace")

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()  # EOF ends the zygote
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _child(script: str) -> None:
    """In the forked process: ``script`` as ``__main__``, then the interpreter's exit (atexit
    functions, the streams flushed) with its exit code."""
    import atexit
    import runpy
    import traceback

    code = 1
    try:
        folder = str(Path(script).parent)
        os.chdir(folder)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)  # not the zygote's request pipe
        for fd, suffix in ((1, ".stdout"), (2, ".stderr")):
            out = os.open(f"{script}{suffix}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(out, fd)
            os.close(out)
        sys.argv, sys.path[0] = [script], folder
        runpy.run_path(script, run_name="__main__")
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def main() -> None:
    for name in PRELOAD:
        importlib.import_module(name)
    # nothing may run in another thread when this process forks
    assert threading.active_count() == 1, threading.enumerate()
    for line in sys.stdin:
        pid = os.fork()
        if pid == 0:
            _child(line.strip())
        print(pid, flush=True)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status), flush=True)


if __name__ == "__main__":
    main()
