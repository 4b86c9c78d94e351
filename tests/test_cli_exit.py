"""The console script ends the process itself (``cli.main.console_main``): main's exit code, every
line it printed, and no interpreter teardown in which a native thread pool could abort a finished
run. Checked on real processes, through a pipe (what CI reads) and for every exit class."""

from __future__ import annotations

import subprocess
import sys

import pytest

ENTRY = "import sys; from kebab_eval_pipeline.cli import console_main as m; sys.argv[0] = 'kebab-eval'; m()"


def _run(*args: str, env=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", ENTRY, *args], capture_output=True, text=True, timeout=120, env=env
    )


def test_success_keeps_everything_printed_and_exits_0():
    proc = _run("golden", "schema")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.rstrip().endswith("}")  # the whole JSON Schema came through the pipe
    assert '"$schema"' in proc.stdout or '"properties"' in proc.stdout


@pytest.mark.parametrize(
    ("args", "code", "said"),
    [
        (("golden", "validate", "/nonexistent/golden.yaml"), 2, "error:"),
        (("no-such-command",), 2, "No such command"),
    ],
)
def test_exit_codes_and_messages_survive_the_direct_exit(args, code, said):
    proc = _run(*args)
    assert proc.returncode == code
    assert said in proc.stderr


def test_python_dash_m_uses_the_same_entry():
    proc = subprocess.run(
        [sys.executable, "-m", "kebab_eval_pipeline.cli", "golden", "validate", "/nonexistent/g.yaml"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "error:" in proc.stderr
