"""What the CLI prints while and after it works (issue 23, items 4-6): progress that moves — live on
a terminal, periodic lines when piped, never through Dagster's capture of the steps' output —, a
failed gate as an outcome (exit 1, the gate table, one line, no trace unless KEBAB_EVAL_DEBUG), and
tables that fit the terminal without splitting a run id (and nothing wrapped when piped).

Real CLI subprocesses on a real Dagster instance; the terminal is a real pseudo-terminal."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from kebab_eval_pipeline.cli.progress_display import PlainProgress, progress_line
from kebab_eval_pipeline.cli.tables import Field, fit_runs_table
from tests.conftest import write
from tests.test_cli import CLI, cli, cli_env, env, no_traceback

assert env  # the fixture, imported for this module's tests

#: A persistent (jsonl) command system that takes 0.03 s per query: a run long enough to report on.
SLOW_SYSTEM = """\
import json, sys, time
for line in sys.stdin:
    req = json.loads(line)
    if req.get("op") == "version":
        print(json.dumps({"id": req["id"], "index_version": "slow-1"}), flush=True)
        continue
    time.sleep(0.03)
    hit = {"doc_path": "a.md", "snippet": req["query"]}
    print(json.dumps({"id": req["id"], "hits": [hit]}), flush=True)
"""
PLAIN_LINE = re.compile(r"^retrieval_results: (\d+)/(\d+) queries \((\d+)%\), (\d+\.\d) s$")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def slow_config(tmp_path: Path) -> Path:
    script = write(tmp_path / "slow.py", SLOW_SYSTEM)
    return write(
        tmp_path / "slow.yaml",
        f"system:\n  kind: command\n  protocol: jsonl\n  argv: [{sys.executable}, {script}]\n",
    )


def on_pty(env: dict, *args: str, columns: int, timeout: float = 300) -> tuple[int, list[tuple[float, str]]]:
    """Run the CLI on a pseudo-terminal ``columns`` wide: its exit code and what it wrote, as
    (seconds since start, text) chunks in the order they arrived."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    started = time.monotonic()
    proc = subprocess.Popen(
        [*CLI, *args],
        env={**env, "COLUMNS": str(columns), "TERM": "xterm-256color"},
        stdin=follower,
        stdout=follower,
        stderr=follower,
        close_fds=True,
    )
    os.close(follower)
    chunks: list[tuple[float, str]] = []
    try:
        while time.monotonic() - started < timeout:
            ready, _, _ = select.select([leader], [], [], 0.5)
            if ready:
                try:
                    data = os.read(leader, 65536)
                except OSError:  # the terminal closed: every writer is gone
                    break
                if not data:
                    break
                chunks.append((time.monotonic() - started, data.decode("utf-8", "replace")))
            elif proc.poll() is not None:
                break
    finally:
        os.close(leader)
    return proc.wait(timeout=60), chunks


def screen_lines(chunks: list[tuple[float, str]]) -> list[str]:
    """The lines the terminal kept (after the live display erased itself), escapes removed."""
    text = ANSI.sub("", "".join(c for _, c in chunks)).replace("\r\n", "\n")
    return [line.rsplit("\r", 1)[-1] for line in text.split("\n")]


def progress_in_step_logs(home: Path) -> list[str]:
    """Progress text that went into Dagster's captured step output (what the UI shows per step)."""
    found = []
    for log in home.glob("storage/*/compute_logs/*.err"):
        found += [line for line in log.read_text(errors="replace").splitlines() if "/105 queries" in line]
    return found


# -- item 4: progress ---------------------------------------------------------------------------


def test_piped_run_prints_periodic_progress_lines_with_rising_counts(env, tmp_path):
    proc = cli(
        {**env, "KEBAB_EVAL_PROGRESS_INTERVAL": "0.3"},
        "run",
        "--run-id",
        "slow-1",
        "--config",
        str(slow_config(tmp_path)),
    )
    assert proc.returncode == 0, proc.stderr
    no_traceback(proc)
    lines = [m.groups() for m in map(PLAIN_LINE.match, proc.stderr.splitlines()) if m]
    assert len(lines) >= 3, proc.stderr  # ~3 s of queries at one line per 0.3 s
    done = [int(d) for d, _total, _pct, _s in lines]
    seconds = [float(s) for *_rest, s in lines]
    assert all(int(total) == 105 for _d, total, _p, _s in lines)
    # rising while queries run; the stage may repeat its last count while it builds its tables
    assert done == sorted(done) and len(set(done)) >= 3 and done[-1] == 105, done
    assert seconds == sorted(seconds) and seconds[0] >= 0.3
    assert [int(p) for _d, _t, p, _s in lines] == [100 * d // 105 for d in done]
    # written past Dagster's capture of the step's stderr: not delayed by its tail, not in the UI's step log
    assert progress_in_step_logs(Path(env["DAGSTER_HOME"])) == []


def test_fast_piped_run_prints_no_progress_lines(env, tmp_path):
    """The default interval (10 s) is longer than this run: a quick run's log stays as it was."""
    proc = cli(env, "run", "--run-id", "slow-quick", "--config", str(slow_config(tmp_path)))
    assert proc.returncode == 0, proc.stderr
    assert not [line for line in proc.stderr.splitlines() if PLAIN_LINE.match(line)], proc.stderr


def test_terminal_run_shows_a_live_progress_line_that_moves(env, tmp_path):
    code, chunks = on_pty(
        env, "run", "--run-id", "slow-tty", "--config", str(slow_config(tmp_path)), columns=100
    )
    assert code == 0, "".join(c for _, c in chunks)[-3000:]
    # redraws of the live line (carriage return, erase line), each with the stage and its count
    counts = [
        (at, int(m.group(1)))
        for at, chunk in chunks
        for m in re.finditer(r"retrieval_results[^\r\n]*?(\d+)/105 queries", ANSI.sub("", chunk))
    ]
    assert len({n for _, n in counts}) >= 5, counts
    assert [n for _, n in counts] == sorted(n for _, n in counts) and counts[-1][1] == 105
    # it moved while the step ran (not all at once when the step's captured output was copied back)
    assert counts[-1][0] - counts[0][0] >= 1.5, counts
    assert any("\r\x1b[2K" in chunk and "retrieval_results" in chunk for _, chunk in chunks)
    assert progress_in_step_logs(Path(env["DAGSTER_HOME"])) == []
    text = "\n".join(screen_lines(chunks))
    assert "run slow-tty — demo-fermentation (105 queries, command: " in text


def test_bad_progress_interval_is_refused_before_the_run(env):
    proc = cli({**env, "KEBAB_EVAL_PROGRESS_INTERVAL": "soon"}, "run", "--run-id", "never")
    assert proc.returncode == 2, proc.stderr
    assert "KEBAB_EVAL_PROGRESS_INTERVAL" in proc.stderr and "'soon'" in proc.stderr
    no_traceback(proc)


def test_plain_progress_writes_at_the_interval_and_ends_with_the_final_count():
    now = [0.0]
    lines: list[str] = []
    plain = PlainProgress(lines.append, interval=5.0, clock=lambda: now[0], ticker=False)
    plain.stage("golden_set")
    now[0] = 1.0
    plain.stage("retrieval_results")  # golden_set took 1 s < interval: no line for it
    for done in range(1, 21):
        now[0] += 1.0
        plain.queries(done, 20)
    now[0] += 0.5
    plain.stage("query_scores")
    now[0] += 6.0  # query_scores counts no queries: its final line would have no count
    plain.close()
    assert lines == [
        "retrieval_results: 5/20 queries (25%), 5.0 s",
        "retrieval_results: 10/20 queries (50%), 10.0 s",
        "retrieval_results: 15/20 queries (75%), 15.0 s",
        "retrieval_results: 20/20 queries (100%), 20.0 s",
    ]


@given(done=st.integers(0, 10**6), extra=st.integers(0, 10**6), elapsed=st.floats(0, 1e6))
def test_progress_line_states_count_share_and_time(done, extra, elapsed):
    total = done + extra
    line = progress_line("judge", done, total, elapsed)
    count, share = re.fullmatch(r"judge: (\d+/\d+) queries \((\d+)%\), \d+\.\d s", line).groups()
    assert count == f"{done}/{total}" and 0 <= int(share) <= 100
    assert int(share) == (100 if total == 0 else 100 * done // total)
    assert progress_line("query_scores", None, None, 2.25) == "query_scores: 2.2 s"


# -- item 5: a failed gate ----------------------------------------------------------------------


def test_failed_gate_is_exit_1_with_the_gate_table_and_one_line_no_trace(env, tmp_path):
    config = write(tmp_path / "gate.yaml", "gates:\n  mrr: {min: 0.99}\n")
    proc = cli(env, "run", "--run-id", "gated", "--config", str(config))
    assert proc.returncode == 1, proc.stderr
    both = proc.stdout + proc.stderr
    for trace in ("Traceback", "Stack Trace", "DagsterAssetCheckFailedError", "execute_plan.py"):
        assert trace not in both, both
    assert re.search(r"^  gate FAIL gate_mrr_min: mrr = 0\.\d{4} misses ≥ 0\.99$", proc.stdout, re.M)
    assert "│ mrr " in proc.stdout  # the metrics table
    failed = [line for line in proc.stderr.splitlines() if line.startswith("gate failed:")]
    assert len(failed) == 1 and proc.stderr.count("gate failed") == 1, proc.stderr
    # one whole line: the reason is not wrapped onto a second line
    assert re.fullmatch(
        r"gate failed: run gated: blocking check\(s\) failed: gate_mrr_min: mrr = 0\.\d{4} misses ≥ 0\.99",
        failed[0],
    ), proc.stderr
    assert [line for line in proc.stderr.splitlines() if line.strip()] == failed, proc.stderr

    debug = cli({**env, "KEBAB_EVAL_DEBUG": "1"}, "run", "--run-id", "gated-debug", "--config", str(config))
    assert debug.returncode == 1, debug.stderr
    assert "DagsterAssetCheckFailedError" in debug.stderr and "Stack Trace" in debug.stderr
    assert debug.stderr.rstrip().splitlines()[-1].startswith("gate failed: run gated-debug:")


# -- item 6: tables that fit --------------------------------------------------------------------

LONG_ID = "ci-20261125-031137-0a1b2c3d4e5f"  # a CI-style id: time and commit
IDS = (LONG_ID, "nightly-20261125-020000")


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """A Dagster home with two stored demo runs under long ids (the second compared with the first)."""
    environment = cli_env(tmp_path_factory.mktemp("tables"))
    for run_id in IDS:
        proc = cli(environment, "run", "--run-id", run_id)
        assert proc.returncode == 0, proc.stderr
    return environment


@pytest.mark.parametrize("columns", [80, 120])
@pytest.mark.parametrize("command", [("history",), ("runs", "list")])
def test_run_tables_on_a_terminal_fit_and_keep_every_id_whole(two_runs, command, columns):
    code, chunks = on_pty(two_runs, *command, columns=columns)
    lines = screen_lines(chunks)
    assert code == 0, lines
    assert all(len(line) <= columns for line in lines), "\n".join(lines)
    for run_id in IDS:
        assert [line for line in lines if run_id in line], (run_id, "\n".join(lines))
    if command == ("history",):
        # the numbers are all there, and so is each run's time (generated ids carry it, too)
        assert sum("0.6985" in line for line in lines) >= 2 and sum("2026-" in line for line in lines) >= 2
        if columns == 120:  # room for everything: golden set and chunker version stay
            assert any("md-heading-2:size=800:overlap=0" in line for line in lines)


@pytest.mark.parametrize("columns", [80, 120])
def test_run_tables_piped_are_not_wrapped(two_runs, columns):
    environment = {**two_runs, "COLUMNS": str(columns)}
    history = cli(environment, "history")
    assert history.returncode == 0, history.stderr
    # one line per run, with every field on it: nothing folded, nothing dropped
    for run_id in IDS:
        [row] = [line for line in history.stdout.splitlines() if run_id in line]
        assert "demo-fermentation" in row and "md-heading-2:size=800:overlap=0" in row and "0.6985" in row
    listed = cli(environment, "runs", "list")
    for run_id in IDS:
        [row] = [line for line in listed.stdout.splitlines() if run_id in line]
        assert re.search(r"20\d\d-\d\d-\d\d \d\d:\d\d:\d\d .*yes", row), row


def test_compare_piped_prints_its_markdown_unwrapped(two_runs):
    proc = cli({**two_runs, "COLUMNS": "80"}, "compare", *IDS)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    table_rows = [line for line in lines if line.startswith("|")]
    assert table_rows and all(line.endswith("|") for line in table_rows), proc.stdout
    assert max(map(len, lines)) > 80  # it had more to say than 80 columns, and said it on one line


def test_run_headline_title_is_one_line(two_runs):
    proc = cli({**two_runs, "COLUMNS": "80"}, "run", "--run-id", "title-" + "x" * 60)
    assert proc.returncode == 0, proc.stderr
    assert (
        f"run title-{'x' * 60} — demo-fermentation (105 queries, reference, mode lexical)"
        in proc.stdout.splitlines()
    )


@given(
    ids=st.lists(
        st.text("abcdefghijklmnopqrstuvwxyz0123456789-._", min_size=1, max_size=60),
        min_size=1,
        max_size=4,
        unique=True,
    ),
    width=st.integers(20, 160),
)
def test_fitted_table_never_splits_an_id_nor_exceeds_the_width_when_a_table(ids, width):
    console = Console(width=width, force_terminal=False)
    n = len(ids)
    fitted = fit_runs_table(
        console,
        Field("run_id", ids),
        Field("created_at", ["2026-11-25T03:10:35"] * n),
        labels=[Field("golden", ["demo-fermentation"] * n), Field("chunker_version", ["md-heading-2"] * n)],
        numbers=[Field("mrr", ["0.6985"] * n), Field("refusal_correctness", ["0.7692"] * n)],
        width=width,
    )
    with console.capture() as captured:
        console.print(fitted.renderable, soft_wrap=fitted.soft_wrap)
    lines = captured.get().splitlines()
    for run_id in ids:
        assert any(run_id in line for line in lines), (fitted.layout, lines)
    if fitted.layout != "records":
        assert max(len(line.rstrip()) for line in lines) <= width
