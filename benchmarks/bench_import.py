"""Benchmark: what importing the package costs a fresh process, before and after a change.

    python benchmarks/bench_import.py                               # this checkout, 15 runs each
    python benchmarks/bench_import.py --repo /tmp/old --repo . -n 21   # two checkouts side by side

``import kebab_eval_pipeline`` must stay light: the command adapter runs ``kebab-eval ref search``
once per query, and every CLI command pays it. The package names its Dagster code location
(``defs``, for ``dagster … -m kebab_eval_pipeline``) lazily, so that only Dagster's loader pays for
Dagster. For each checkout (``PYTHONPATH=PATH``) this times, in fresh processes, alternating the
checkouts run by run:

* ``pass`` — the interpreter alone (the floor);
* ``import kebab_eval_pipeline`` — what the package's ``__init__`` costs;
* ``import kebab_eval_pipeline.cli.main`` — the CLI's import before a command runs;
* ``kebab_eval_pipeline.defs`` — the code location loaded, as ``dagster -m kebab_eval_pipeline`` does;
* ``a demo run's modules`` — every module a first demo ``kebab-eval run`` (fresh ``DAGSTER_HOME``)
  had imported when it ended, recorded once per checkout by such a run, then imported in that
  order in a fresh process: the import part of a run's wall time, without the run's work. Its
  count of modules is printed below the table (``--no-run`` skips this case).

It prints each median wall time, the part above the interpreter's floor, whether Dagster was
imported, and with two checkouts the first one's median over the last one's. Not a test: timings
depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
CASES = {
    "pass": "pass",
    "import kebab_eval_pipeline": "import kebab_eval_pipeline",
    "import kebab_eval_pipeline.cli.main": "import kebab_eval_pipeline.cli.main",
    "kebab_eval_pipeline.defs": "import kebab_eval_pipeline as p; p.defs",
}
PROBE = "\nimport sys; print('dagster' in sys.modules)"
#: Imports the modules listed (JSON) in the file ``{modules}``, in order; one that cannot be
#: imported on its own (``__main__``, a platform's module) is skipped.
RUN_MODULES = """
import importlib, json
for name in json.load(open({modules!r})):
    try:
        importlib.import_module(name)
    except BaseException:
        pass
"""
#: A first demo run, in this process; then the modules it imported, in the order they were.
RECORD_RUN = """
import json, sys
from kebab_eval_pipeline.cli.main import main
into, sys.argv = sys.argv[1], ["kebab-eval", "run"]
try:
    main()
except SystemExit as exc:
    assert not exc.code, exc.code
names = [n for n in sys.modules if not n.startswith("__") and n != "kebab_eval_pipeline.cli.__main__"]
json.dump(names, open(into, "w"))
"""


def _env(repo: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KEBAB_EVAL_", "DAGSTER_", "PYTHONPATH"))}
    env["PYTHONPATH"] = str(repo)
    return env


def record_run_modules(repo: Path, into: Path) -> int:
    """Record the modules a first demo run of ``repo`` imports into ``into``; how many."""
    with tempfile.TemporaryDirectory() as work:
        env = {**_env(repo), "DAGSTER_HOME": work}
        done = subprocess.run(
            [sys.executable, "-c", RECORD_RUN, str(into)], env=env, cwd=work, capture_output=True, text=True
        )
    if done.returncode:
        sys.exit(f"{repo}: the demo run failed:\n{done.stderr[-2000:]}")
    return len(json.loads(into.read_text()))


def _time(repo: Path, code: str) -> tuple[float, bool] | None:
    """Seconds and whether Dagster was imported; None when the checkout cannot run ``code`` (an
    older one without a lazy ``defs``). The working folder is empty: ``-c`` puts it first on
    sys.path, and a checkout there would shadow PYTHONPATH."""
    with tempfile.TemporaryDirectory() as empty:
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", code + PROBE], env=_env(repo), capture_output=True, text=True, cwd=empty
        )
        seconds = time.perf_counter() - start
    return None if done.returncode else (seconds, done.stdout.strip() == "True")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", action="append", type=Path, help="a checkout (repeatable)")
    parser.add_argument("-n", type=int, default=15, help="runs per case and checkout")
    parser.add_argument("--no-run", action="store_true", help="skip the case of a demo run's modules")
    args = parser.parse_args()
    repos = [r.resolve() for r in (args.repo or [HERE])]
    times: dict[tuple[Path, str], list[float]] = {}
    dagster: dict[tuple[Path, str], bool] = {}
    cases = dict(CASES)
    recorded = Path(tempfile.mkdtemp(prefix="bench-import-"))
    counts = {}
    if not args.no_run:
        cases["a demo run's modules"] = RUN_MODULES
        counts = {repo: record_run_modules(repo, recorded / f"{i}.json") for i, repo in enumerate(repos)}
    for _ in range(args.n):
        for label, code in cases.items():
            for i, repo in enumerate(repos):  # alternating, so a change in load falls on every checkout alike
                timed = _time(repo, code.format(modules=str(recorded / f"{i}.json")))
                if timed is not None:
                    times.setdefault((repo, label), []).append(timed[0])
                    dagster[(repo, label)] = timed[1]
    print(f"median wall time of a fresh process, {args.n} runs each ({sys.version.split()[0]})")
    floor = {repo: statistics.median(times[(repo, "pass")]) for repo in repos}
    header = f"{'case':40}" + "".join(f"{r.name[:22]:>24}" for r in repos)
    print(header + ("   first/last" if len(repos) > 1 else ""))
    for label in cases:
        cells = []
        for repo in repos:
            if (repo, label) not in times:
                cells.append("fails")
                continue
            median = statistics.median(times[(repo, label)])
            extra = median - floor[repo]
            mark = " D" if dagster[(repo, label)] else "  "
            cells.append(f"{median * 1000:9.1f} ms (+{extra * 1000:6.1f}){mark}")
        line = f"{label:40}" + "".join(f"{c:>24}" for c in cells)
        if len(repos) > 1 and all((r, label) in times for r in (repos[0], repos[-1])):
            first = statistics.median(times[(repos[0], label)])
            last = statistics.median(times[(repos[-1], label)])
            line += f"   ×{first / last:.2f}"
        print(line)
    print("(+ms: above the interpreter's floor; D: Dagster was imported)")
    for repo, count in counts.items():
        print(f"{repo}: a first demo run imports {count} modules")
    bytecode = "not written" if os.environ.get("PYTHONDONTWRITEBYTECODE") else "written"
    cached = [r.name for r in repos if (r / "kebab_eval_pipeline" / "__pycache__").is_dir()]
    print(f"bytecode {bytecode} on import; the package's cached in: {', '.join(cached) or 'no checkout'}")
    shutil.rmtree(recorded)


if __name__ == "__main__":
    main()
