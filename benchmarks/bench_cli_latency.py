"""Benchmark: the wall time of each ``kebab-eval`` command as a user runs it — a fresh process.

    python benchmarks/bench_cli_latency.py                          # this checkout, 5 runs each
    python benchmarks/bench_cli_latency.py --repo /work/main --repo . -n 7   # before / after
    python benchmarks/bench_cli_latency.py --repo A --repo B --full-runs 0    # skip the full runs

For each checkout (``--repo PATH``, repeatable; default: the one holding this file) the commands
run as ``python -m kebab_eval_pipeline.cli …`` with ``PYTHONPATH=PATH``, so that checkout's code
answers, in a temporary folder of its own (its own ``DAGSTER_HOME`` and artifact store, no
``KEBAB_EVAL_*``/``DAGSTER_*`` settings from the caller):

* ``--help``;
* ``run`` with a typo'd config key (``golen:``), with a missing golden file, with a bad golden file
  (the demo's 105 queries with a duplicate id and an ``answerable: maybe``) — each exits 2;
* ``runs list``, ``history``, ``export RUN`` (JSON) and ``compare A B`` on a store holding two real
  demo runs, made once per checkout with ``kebab-eval run`` before the clock starts;
* full ``kebab-eval run``s of the demo (``--full-runs``, default 1: they take seconds, not a
  fraction of one): the first run in a fresh ``DAGSTER_HOME`` and folder (what README's first
  command does), and a run in the store holding the two runs above, which compares with the
  earlier run (statistics and charts). Below the table: the Dagster events each full run wrote
  (its run's event log, by type, and the rows mirrored into the instance's index), read from the
  SQLite files without importing Dagster.

Python compiles a module's source on every import when no bytecode is cached beside it, which is
every time under ``PYTHONDONTWRITEBYTECODE=1`` in a checkout never compiled: ``--compile`` compiles
each checkout's package first (``compileall``, into its ``__pycache__``, git-ignored), so that
checkouts compare on equal terms; the header says which state was measured.

Each command runs ``-n`` times (default 5), the checkouts alternating (A, B, A, B …, so a change in
the machine's load falls on both alike); the table shows the median wall time per checkout, the
exit code (the same every time, or the codes seen) and, with two or more checkouts, the ratio of
the first one's median to the last one's (``×3.0``: the last is three times faster). Not a test:
timings depend on the machine and its load (say how loaded it was when you quote them).
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent


@dataclass
class Checkout:
    """One checkout under test: its code (``repo``) and its own working folder and instance."""

    repo: Path
    work: Path
    times: dict[str, list[float]] = field(default_factory=dict)
    codes: dict[str, set[int]] = field(default_factory=dict)
    surprises: dict[str, str] = field(default_factory=dict)  # label → stderr of an unexpected exit

    def record(self, label: str, seconds: float, proc: subprocess.CompletedProcess, expected: int) -> None:
        self.times.setdefault(label, []).append(seconds)
        self.codes.setdefault(label, set()).add(proc.returncode)
        if proc.returncode != expected:
            self.surprises.setdefault(label, proc.stderr.strip()[-600:])

    def env(self) -> dict[str, str]:
        environment = {
            k: v for k, v in os.environ.items() if not k.startswith(("KEBAB_EVAL_", "DAGSTER_", "PYTHONPATH"))
        }
        environment["PYTHONPATH"] = str(self.repo)
        environment["DAGSTER_HOME"] = str(self.work / "dagster_home")
        environment["COLUMNS"] = "120"
        return environment

    def cli(self, *args: str, home: Path | None = None) -> tuple[float, subprocess.CompletedProcess]:
        """Run ``kebab-eval ARGS`` in this checkout's folder (or in ``home``, a folder that is then
        also its ``DAGSTER_HOME``): (wall seconds, the finished process)."""
        env = self.env()
        if home is not None:
            env["DAGSTER_HOME"] = str(home)
        start = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "kebab_eval_pipeline.cli", *args],
            cwd=home or self.work,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        return time.perf_counter() - start, proc


def prepare(checkout: Checkout, demo_golden: Path) -> None:
    """The input files of the error cases and a store with two real runs (bench-1, bench-2)."""
    work = checkout.work
    (work / "dagster_home").mkdir(parents=True)
    (work / "typo.yaml").write_text("golen: golden.yaml\nk: [1, 5, 10]\n", encoding="utf-8")
    text = demo_golden.read_text(encoding="utf-8")
    bad = text.replace("id: fact-002", "id: fact-001", 1).replace("answerable: true", "answerable: maybe", 1)
    assert bad != text, "the demo golden set changed: update the bad-golden edit"
    (work / "bad-golden.yaml").write_text(bad, encoding="utf-8")
    for run_id in ("bench-1", "bench-2"):
        seconds, proc = checkout.cli("run", "--run-id", run_id)
        if proc.returncode != 0:
            sys.exit(f"{checkout.repo}: setup run {run_id} failed ({proc.returncode}):\n{proc.stderr}")
        print(f"  {checkout.repo}: setup run {run_id} in {seconds:.1f} s", file=sys.stderr)


#: (label, arguments, expected exit code)
COMMANDS: list[tuple[str, tuple[str, ...], int]] = [
    ("--help", ("--help",), 0),
    ("run: typo'd config key", ("run", "--config", "typo.yaml"), 2),
    ("run: missing golden file", ("run", "--golden", "missing-golden.yaml"), 2),
    ("run: bad golden file", ("run", "--golden", "bad-golden.yaml"), 2),
    ("runs list", ("runs", "list"), 0),
    ("history", ("history",), 0),
    ("export (json)", ("export", "bench-2", "--format", "json"), 0),
    ("compare", ("compare", "bench-1", "bench-2"), 0),
]


def event_counts(home: Path, run_id: str) -> tuple[Counter, int]:
    """The Dagster events of partition ``run_id``'s run in the instance at ``home`` (default SQLite
    storage), by type (``LOG`` for a ``context.log`` line), and the rows the instance's index
    mirrors of them (asset and check events, run status): read with sqlite3, not Dagster."""
    runs = home / "history" / "runs"
    with sqlite3.connect(home / "history" / "runs.db") as db:
        found = db.execute(
            "SELECT run_id FROM runs WHERE partition = ? ORDER BY create_timestamp DESC LIMIT 1", (run_id,)
        ).fetchone()
    if found is None:
        return Counter(), 0
    with sqlite3.connect(runs / f"{found[0]}.db") as db:
        types = Counter(
            t or "LOG" for (t,) in db.execute("SELECT dagster_event_type FROM event_logs").fetchall()
        )
    with sqlite3.connect(runs / "index.db") as db:
        (mirrored,) = db.execute("SELECT COUNT(*) FROM event_logs WHERE run_id = ?", found).fetchone()
    return types, mirrored


def compile_checkout(repo: Path) -> None:
    """Byte-compile the checkout's package (what a process would otherwise compile each time)."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(repo / "kebab_eval_pipeline")], check=True)


def measure(checkouts: list[Checkout], label: str, args: tuple[str, ...], expected: int, rounds: int) -> None:
    """Run ``args`` ``rounds`` times in every checkout, alternating between them."""
    for _ in range(rounds):
        for checkout in checkouts:
            seconds, proc = checkout.cli(*args)
            checkout.record(label, seconds, proc, expected)


def table(checkouts: list[Checkout], expected: dict[str, int]) -> str:
    """Markdown: one row per command, the median seconds (and exit codes) per checkout, the ratio."""
    names = [str(c.repo) for c in checkouts]
    head = ["command", *(f"{n} (s)" for n in names)]
    if len(checkouts) > 1:
        head.append("first/last")
    rows = [head, ["---"] * len(head)]
    for label in checkouts[0].times:
        medians = [statistics.median(c.times[label]) for c in checkouts]
        cells = [label]
        for c, m in zip(checkouts, medians, strict=True):
            codes = sorted(c.codes[label])
            note = "" if codes == [expected[label]] else f" (exit {','.join(map(str, codes))}!)"
            cells.append(f"{m:.2f}{note}")
        if len(checkouts) > 1:
            cells.append(f"×{medians[0] / medians[-1]:.1f}")
        rows.append(cells)
    return "\n".join("| " + " | ".join(r) + " |" for r in rows)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repo", action="append", type=Path, help="A checkout to time (repeatable).")
    parser.add_argument("-n", "--rounds", type=int, default=5, help="Runs of each command (median).")
    parser.add_argument("--full-runs", type=int, default=1, help="Full demo runs of each kind (0: none).")
    parser.add_argument("--compile", action="store_true", help="Byte-compile each checkout first.")
    args = parser.parse_args()
    repos = [r.resolve() for r in (args.repo or [HERE])]
    for repo in repos:
        if not (repo / "kebab_eval_pipeline" / "__init__.py").is_file():
            parser.error(f"{repo}: not a kebab-eval-pipeline checkout")
        if args.compile:
            compile_checkout(repo)
    demo_golden = HERE / "kebab_eval_pipeline" / "data" / "demo" / "golden.yaml"
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as tmp:
        checkouts = [Checkout(repo, Path(tmp) / f"checkout-{i}") for i, repo in enumerate(repos)]
        for checkout in checkouts:
            prepare(checkout, demo_golden)
        expected = {label: code for label, _, code in COMMANDS}
        for label, cli_args, code in COMMANDS:
            measure(checkouts, label, cli_args, code, args.rounds)
            print(f"  timed {label}", file=sys.stderr)
        events: dict[tuple[int, str], tuple[Counter, int]] = {}
        for i in range(args.full_runs):  # a new run id each time: a real run, not a refusal
            for n, checkout in enumerate(checkouts):
                fresh = Path(tmp) / f"fresh-{n}-{i}"
                fresh.mkdir()
                seconds, proc = checkout.cli("run", "--run-id", "demo", home=fresh)
                checkout.record("run: demo, fresh home", seconds, proc, 0)
                events[(n, "run: demo, fresh home")] = event_counts(fresh, "demo")
                seconds, proc = checkout.cli("run", "--run-id", f"bench-full-{i}")
                checkout.record("run: demo, compared", seconds, proc, 0)
                events[(n, "run: demo, compared")] = event_counts(
                    checkout.work / "dagster_home", f"bench-full-{i}"
                )
            expected["run: demo, fresh home"] = expected["run: demo, compared"] = 0
        load = os.getloadavg()
        print(
            f"\n{args.rounds} run(s) each; median wall seconds; {os.cpu_count()} CPUs, "
            f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the end; bytecode: "
            + ("compiled first (--compile)" if args.compile else _bytecode_state(repos))
            + "\n"
        )
        print(table(checkouts, expected))
        for (n, label), (types, mirrored) in sorted(events.items()):
            top = ", ".join(f"{t} {c}" for t, c in types.most_common())
            total = sum(types.values())
            print(
                f"\n{checkouts[n].repo} — {label}: {total} events ({top}); {mirrored} mirrored in the index"
            )
        for checkout in checkouts:  # an unexpected exit code means the timing is not of that state
            for label, stderr in checkout.surprises.items():
                print(f"\n{checkout.repo} — {label}: unexpected exit; stderr ends:\n{stderr}")


def _bytecode_state(repos: list[Path]) -> str:
    cached = [r.name for r in repos if (r / "kebab_eval_pipeline" / "__pycache__").is_dir()]
    writes = (
        "not written (PYTHONDONTWRITEBYTECODE)" if os.environ.get("PYTHONDONTWRITEBYTECODE") else "written"
    )
    return f"cached in {', '.join(cached) or 'no checkout'}, {writes}"


if __name__ == "__main__":
    main()
