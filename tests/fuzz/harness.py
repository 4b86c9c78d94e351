"""Run fuzz cases through real ``kebab-eval`` subprocesses and classify every outcome.

Each case gets its own folder (its files, a fresh ``DAGSTER_HOME``) and one subprocess with an
address-space cap (``RLIMIT_AS``) and a timeout; two run at once (threads, each waiting on its
child). Outcomes:

* ``clean-refused`` — exit 2, stderr names the input (one of the case's ``blame`` strings), and no
  traceback or ``File "…", line N`` frame anywhere in the output;
* ``clean-run`` — exit 0 or 1 (1 only as a gate or system-health verdict, never "an internal
  failure") for a case that does not have to be refused, and what was stored is right: one
  ``query_scores`` row per golden query with the golden ids, every metric finite and in its range,
  the recorded latencies stored (or null where they were impossible); for ``golden validate``,
  ``ok: N queries`` with the expected N;
* ``other`` — everything else: exit 3 or any other code, a signal, a timeout, the memory cap hit,
  a traceback, an accepted must-refuse input, a refusal that does not name the input, a wrong run.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tests.fuzz.cases import EITHER, FLAG, REFUSE, Case

MEMORY_CAP = 2 * 1024**3  # bytes of address space per kebab-eval process
TAIL = 64 * 1024  # bytes of stdout/stderr kept: a process printing endlessly must not fill our memory

# The cap is set in the child itself, before the CLI is imported: ``preexec_fn`` is not safe in a
# process with threads (the child may deadlock on a lock another thread held at fork).
_SHIM = (
    "import resource, runpy, sys\n"
    "cap = int(sys.argv.pop(1))\n"
    "resource.setrlimit(resource.RLIMIT_AS, (cap, cap))\n"
    "sys.argv[0] = 'kebab-eval'\n"
    "runpy.run_module('kebab_eval_pipeline.cli', run_name='__main__', alter_sys=True)\n"
)
_FRAME = re.compile(r'File "[^"]*", line \d+')
RATE_EXEMPT = re.compile(r"(_ms(_p\d+|_max)?$|^n_|^index_)")  # not rates: durations and counts
QUERY_RATE_COLUMNS = re.compile(
    r"^(mrr|hit@\d+|recall(_any|_all)?@\d+|doc_recall@\d+|precision@\d+|ndcg@\d+|refusal_correct|"
    r"under_refusal|over_refusal|citation_ok|chr|answer_precision|attribution_hit|groundedness_rule|"
    r"recency_ok|scope_miss|empty_response)$"
)


@dataclass
class Outcome:
    """What one case did: its class (``clean-refused`` / ``clean-run`` / ``other``) and why."""

    id: str
    kind: str
    expect: str
    command: str
    returncode: int | None
    status: str
    reason: str
    seconds: float
    stderr_tail: str
    note: str

    def render(self) -> str:
        tail = "\n      ".join(self.stderr_tail.strip().splitlines()[-12:])
        return (
            f"  {self.id} [{self.kind}, expect {self.expect}] {self.note}\n"
            f"    $ {self.command}\n"
            f"    exit {self.returncode} after {self.seconds:.1f}s: {self.reason}\n"
            f"    stderr: {tail}"
        )


def child_env(home: Path, extra: dict[str, str]) -> dict[str, str]:
    """The environment of a case's process: ours without KEBAB_EVAL_* / DAGSTER_* (PYTHONPATH kept,
    so the worktree's code runs), a fresh Dagster home, and the case's own variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KEBAB_EVAL_", "DAGSTER_"))}
    env["DAGSTER_HOME"] = str(home)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in [str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH", "")] if p
    )
    return {**env, **extra}


def kebab_eval(args: list[str], env: dict[str, str], cwd: Path, timeout: float, out: Path, err: Path):
    """Run ``kebab-eval args`` capped at :data:`MEMORY_CAP`; (return code or None on timeout, s).

    Output goes to files (never pipes into our memory); the child leads its own session so a
    timeout kills it and anything it started."""
    start = time.monotonic()
    with out.open("wb") as o, err.open("wb") as e:
        proc = subprocess.Popen(
            [sys.executable, "-c", _SHIM, str(MEMORY_CAP), *args],
            stdin=subprocess.DEVNULL,
            stdout=o,
            stderr=e,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
        try:
            code: int | None = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # the group: grandchildren too
            proc.wait()
    return code, time.monotonic() - start


def tail(path: Path) -> str:
    with path.open("rb") as f:
        f.seek(max(0, path.stat().st_size - TAIL))
        return f.read().decode("utf-8", "replace")


def prepare(case: Case, root: Path) -> tuple[Path, list[str]]:
    """Write the case's files (``{dir}`` → its folder) and FIFOs; return (folder, argv)."""
    folder = root / case.id
    home = folder / "home"
    home.mkdir(parents=True)
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    marker = b"{dir}"
    for name, content in case.files.items():
        (folder / name).write_bytes(content.replace(marker, str(folder).encode()))
    for name in case.fifos:
        os.mkfifo(folder / name)
    return folder, [a.replace("{dir}", str(folder)) for a in case.args]


def run_case(case: Case, root: Path) -> Outcome:
    """Run one case and classify it (never raises for anything the case did)."""
    folder, argv = prepare(case, root)
    env = child_env(folder / "home", case.env)
    code, seconds = kebab_eval(argv, env, folder, case.timeout, folder / "stdout", folder / "stderr")
    stdout, stderr = tail(folder / "stdout"), tail(folder / "stderr")
    status, reason = classify(case, code, stdout, stderr, folder, env)
    shown = " ".join(repr(a) if (not a or set(a) & set(" \t\n'\"")) else a for a in ["kebab-eval", *argv])
    prefix = " ".join(f"{k}={v}" for k, v in case.env.items())
    return Outcome(
        id=case.id,
        kind=case.kind,
        expect=case.expect,
        command=f"{prefix} {shown}".strip(),
        returncode=code,
        status=status,
        reason=reason,
        seconds=seconds,
        stderr_tail=stderr[-3000:],
        note=case.note,
    )


def classify(
    case: Case, code: int | None, stdout: str, stderr: str, folder: Path, env: dict
) -> tuple[str, str]:
    if code is None:
        return "other", f"timed out after {case.timeout:.0f}s"
    if code < 0:
        return "other", f"killed by signal {-code}"
    both = stdout + stderr
    if "Traceback" in both or _FRAME.search(both):
        return "other", "a traceback in the output"
    if "MemoryError" in both:
        return "other", f"hit the {MEMORY_CAP >> 30} GiB memory cap"
    if code == 2:
        squeezed = "".join(stderr.split())
        if any("".join(b.split()) in squeezed for b in case.blame):
            return "clean-refused", "exit 2 naming the input"
        return "other", f"exit 2 without naming any of {case.blame}"
    if code not in (0, 1):
        return "other", f"exit {code}"
    if "internal failure" in stderr:
        return "other", f"exit {code} for an internal failure"
    if case.expect == REFUSE:
        return "other", f"exit {code}: accepted an input that must be refused"
    problems = (
        check_validate(case, code, stdout) if case.command == "validate" else check_run(case, folder, env)
    )
    if problems:
        return "other", f"exit {code} but " + "; ".join(problems[:5])
    return "clean-run", f"exit {code}, results checked"


def check_validate(case: Case, code: int, stdout: str) -> list[str]:
    if code != 0:
        return ["golden validate exits 0 or 2"]
    found = re.match(r"ok: (\d+) quer", stdout)
    if not found:
        return [f"no 'ok: N queries' line: {stdout[:200]!r}"]
    if case.queries is not None and int(found.group(1)) != case.queries:
        return [f"validated {found.group(1)} queries, the file has {case.queries}"]
    return []


def _null(value: Any) -> bool:
    import pandas as pd

    return value is None or bool(pd.isna(value))


def check_run(case: Case, folder: Path, env: dict) -> list[str]:
    """What a run stored is right: rows, ids, metric values and ranges, latencies."""
    from kebab_eval_pipeline.store.runs import RunStore

    store = RunStore(Path(env["DAGSTER_HOME"]) / "kebab-eval" / "artifacts")
    problems: list[str] = []
    try:
        scores = store.read("query_scores", case.run_id)[0]["query_scores"]
        metrics = store.read("run_metrics", case.run_id)[0]["metrics"]
    except Exception as exc:  # nothing stored where a run stores it: that is the finding
        return [f"no stored results ({type(exc).__name__}: {str(exc)[:200]})"]
    ids = list(scores["query_id"])
    if case.queries is not None and len(ids) != case.queries:
        problems.append(f"{len(ids)} query_scores rows for {case.queries} golden queries")
    if len(set(ids)) != len(ids):
        problems.append("a query id stored twice")
    if case.query_ids is not None and sorted(ids) != sorted(case.query_ids):
        problems.append(f"stored ids {sorted(ids)[:6]} != golden ids {sorted(case.query_ids)[:6]}")
    for column in scores.columns:
        if QUERY_RATE_COLUMNS.match(column):
            bad = [v for v in scores[column] if not _null(v) and not 0 <= float(v) <= 1]
            if bad:
                problems.append(f"query_scores.{column} outside [0, 1]: {bad[:3]}")
    for column in ("retrieval_ms", "answer_ms"):
        bad = [v for v in scores[column] if not _null(v) and not (math.isfinite(v) and v >= 0)]
        if bad:
            problems.append(f"query_scores.{column} impossible: {bad[:3]}")
    for name, value in zip(metrics["metric"], metrics["value"], strict=True):
        if _null(value):
            continue
        value = float(value)
        if not math.isfinite(value):
            problems.append(f"metric {name} = {value}")
        elif RATE_EXEMPT.search(name):
            if value < 0:
                problems.append(f"metric {name} = {value} < 0")
        elif not 0 <= value <= 1:
            problems.append(f"metric {name} = {value} outside [0, 1]")
    n = dict(zip(metrics["metric"], metrics["value"], strict=True)).get("n_queries")
    if case.queries is not None and (n is None or _null(n) or int(n) != case.queries):
        problems.append(f"n_queries = {n}, the golden set has {case.queries}")
    if case.latencies:
        stored = dict(zip(scores["query_id"], scores["retrieval_ms"], strict=True))
        for qid, expected in case.latencies.items():
            got = stored.get(qid)
            if expected is None and not _null(got):
                problems.append(
                    f"query {qid!r}: retrieval_ms {got} stored, expected null (impossible/missing)"
                )
            elif expected is not None and (
                _null(got) or not math.isclose(float(got), expected, abs_tol=1e-9)
            ):
                problems.append(f"query {qid!r}: retrieval_ms {got}, recorded {expected}")
    if case.trec and not problems:
        problems += check_trec(case, folder, env)
    if case.markdown:
        problems += check_markdown(Path(env["DAGSTER_HOME"]) / "kebab-eval" / "artifacts", case.run_id)
    return problems


# A backslash before "<" or "|" is Markdown's escape: the text shows literally, which is the aim.
_RAW_MARKUP = re.compile(
    r"(?<!\\)<script|(?<!\\)<svg|^#+ Injected|(?<!\\)\| injected-col", re.IGNORECASE | re.MULTILINE
)


def check_markdown(base: Path, run_id: str) -> list[str]:
    """The run report shows user text as text: no raw tag, injected heading or table column."""
    report = base / "reports" / run_id / "run.md"
    if not report.is_file():
        return [f"no run report at {report}"]
    found = sorted({m.group(0) for m in _RAW_MARKUP.finditer(report.read_text(encoding="utf-8"))})
    return [f"run.md holds raw markup from the golden set: {found}"] if found else []


def check_trec(case: Case, folder: Path, env: dict) -> list[str]:
    """``export --format trec``: every line of the run file and the qrels has its six / four fields."""
    out = folder / "run.trec"
    args = ["export", case.run_id, "--format", "trec", "--out", str(out)]
    code, _ = kebab_eval(args, env, folder, 60, folder / "trec.out", folder / "trec.err")
    if code != 0:
        return [f"export --format trec exit {code}: {tail(folder / 'trec.err')[-300:]!r}"]
    problems = []
    qrels = sorted(folder.glob("run*qrels*"))
    for path, fields in [(out, 6), *[(q, 4) for q in qrels]]:
        for n, line in enumerate(path.read_text(encoding="utf-8").split("\n"), 1):
            if line and len(line.split()) != fields:
                problems.append(f"{path.name} line {n} has {len(line.split())} fields: {line[:80]!r}")
    return problems[:3]


def run_all(cases: list[Case], root: Path, workers: int = 2) -> list[Outcome]:
    """Every case, ``workers`` at a time; outcomes in case order."""
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda c: run_case(c, root), cases))


def figures(outcomes: list[Outcome], wall: float) -> dict[str, Any]:
    """The counts the test prints and stores: tried, clean-refused, clean-run, other, per kind."""
    by_kind: dict[str, dict[str, int]] = {}
    per_family: dict[str, list[float]] = {}
    for o in outcomes:
        per_family.setdefault(o.id.rsplit("-", 1)[0] if o.id[-1].isdigit() else "special", []).append(
            o.seconds
        )
        counts = by_kind.setdefault(o.kind, {})
        counts[o.status] = counts.get(o.status, 0) + 1
    return {
        "tried": len(outcomes),
        "clean_refused": sum(o.status == "clean-refused" for o in outcomes),
        "clean_run": sum(o.status == "clean-run" for o in outcomes),
        "other": sum(o.status == "other" for o in outcomes),
        "wall_seconds": round(wall, 1),
        "by_kind": dict(sorted(by_kind.items())),
        # CPU-bound subprocess seconds per family: what sizing the default case counts rests on
        "seconds_by_family": {
            family: {
                "cases": len(times),
                "total": round(sum(times), 1),
                "mean": round(sum(times) / len(times), 2),
            }
            for family, times in sorted(per_family.items())
        },
        "others": [asdict(o) for o in outcomes if o.status == "other"],
        "outcomes": [
            {k: getattr(o, k) for k in ("id", "kind", "status", "returncode", "seconds", "reason")}
            for o in outcomes
        ],
    }


__all__ = ["EITHER", "FLAG", "REFUSE", "Outcome", "classify", "figures", "run_all", "run_case"]
