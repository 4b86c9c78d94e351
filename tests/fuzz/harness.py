"""Run fuzz cases through real ``kebab-eval`` subprocesses and classify every outcome.

Each case gets its own folder (its files, a fresh ``DAGSTER_HOME``) and one subprocess with an
address-space cap (``RLIMIT_AS``) and a timeout; two run at once (threads, each waiting on its
child). Every outcome is one of issue 44's table columns:

* ``refused`` (clean exit 2) — exit 2, stderr names the input (one of the case's ``blame``
  strings, and every ``must_say`` string), no traceback or ``File "…", line N`` frame anywhere;
* ``plausible`` — exit 0 or 1 (1 only as a gate or system-health verdict, never "an internal
  failure") for a case that does not have to be refused, and what was stored is right: one
  ``query_scores`` row per golden query with the golden ids, every metric finite and in its range,
  the recorded latencies stored (or null where they were impossible); for ``golden validate``,
  ``ok: N queries`` with the expected N; for ``golden convert``, the ids as the file wrote them;
* ``internal`` — exit 3 (or any code the tool does not document), a traceback, the memory cap hit,
  a signal;
* ``hang`` — the timeout, or a Ctrl-C the process took more than :data:`SIGINT_GRACE` s to obey;
* ``wrong`` — an accepted must-refuse input, a refusal that does not name the input, wrong stored
  values, an id changed, a secret found in any output or written file, a green exit when a system
  ended its process, a Ctrl-C that was ignored;
* ``lost`` — a run that should have stored rows stored none, or fewer than one row per query;
* ``skipped`` — a case this machine cannot try (a tmpfs without the right to mount), with why.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import math
import os
import re
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tests.forked_cli import spawn
from tests.fuzz.cases import EITHER, FLAG, READ, REFUSE, Case

#: Bytes of address space per kebab-eval process: room for a run's reservations, a stop for a runaway.
#: A demo run reserves ~2.1 GiB of address space (glibc's 64 MiB malloc arena per thread, the
#: interpreter's and pyarrow's pools) while its resident peak is ~270 MiB; under a 2 GiB cap a
#: thread start after a python system's worker died failed now and then (glibc: "cannot allocate
#: memory for thread-local data: ABORT", exit 127; 2 of 98 process-end cases in a 2,349-case run).
MEMORY_CAP = 4 * 1024**3
TAIL = 64 * 1024  # bytes of stdout/stderr kept: a process printing endlessly must not fill our memory
SIGINT_GRACE = 15.0  # seconds a run may take to stop after Ctrl-C ("promptly", on a loaded machine)
SIGINT_EXIT = 130  # the README's exit code for an interrupted run

# The cap is set in the child itself, before the CLI is imported: ``preexec_fn`` is not safe in a
# process with threads (the child may deadlock on a lock another thread held at fork). SIGINT gets
# Python's default handler back: a process started in the background by a shell without job
# control inherits SIGINT ignored, and a Ctrl-C case must see what a terminal's process sees.
_SHIM = (
    "import resource, runpy, signal, sys\n"
    "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
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

REFUSED, PLAUSIBLE, INTERNAL, HANG, WRONG, LOST, SKIPPED = (
    "refused",
    "plausible",
    "internal",
    "hang",
    "wrong",
    "lost",
    "skipped",
)
#: The issue's table, in its order; the last four must be 0.
COLUMNS = (REFUSED, PLAUSIBLE, INTERNAL, HANG, WRONG, LOST)
FAILURES = (INTERNAL, HANG, WRONG, LOST)


@dataclass
class Outcome:
    """What one case did: its class (one of :data:`COLUMNS`, or ``skipped``) and why."""

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

    @property
    def family(self) -> str:
        return self.id.rsplit("-", 1)[0] if self.id[-1].isdigit() else "special"

    def render(self) -> str:
        tail = "\n      ".join(self.stderr_tail.strip().splitlines()[-12:])
        return (
            f"  {self.id} [{self.kind}, expect {self.expect}] {self.note}\n"
            f"    $ {self.command}\n"
            f"    {self.status}: exit {self.returncode} after {self.seconds:.1f}s: {self.reason}\n"
            f"    stderr: {tail}"
        )


def child_env(home: Path, extra: dict[str, str]) -> dict[str, str]:
    """The environment of a case's process: ours without KEBAB_EVAL_* / DAGSTER_* / GITHUB_* (PYTHONPATH
    kept, so the worktree's code runs), a fresh Dagster home, and the case's own variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KEBAB_EVAL_", "DAGSTER_", "GITHUB_"))}
    env["DAGSTER_HOME"] = str(home)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in [str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH", "")] if p
    )
    return {**env, **extra}


@dataclass
class Ran:
    """How a process ended: its code (None: timed out), wall seconds, and for a Ctrl-C case when
    the SIGINT was sent (s after start) and how long the process took to end after it."""

    code: int | None
    seconds: float
    sigint_at: float | None = None
    after_sigint: float | None = None


def kebab_eval(
    args: list[str],
    env: dict[str, str],
    cwd: Path,
    timeout: float,
    out: Path,
    err: Path,
    interrupt: tuple[float, str, str | None] | None = None,
) -> Ran:
    """Run ``kebab-eval args`` capped at :data:`MEMORY_CAP`: forked from the test process's CLI
    zygote (:func:`tests.forked_cli.spawn`), or a new interpreter through :data:`_SHIM`.

    Output goes to files (never pipes into our memory); the child leads its own session so a
    timeout kills it and anything it started. ``interrupt=(delay, "group" | "pid", anchor)`` sends
    SIGINT ``delay`` s after the start — or after the file ``anchor`` appears — to the child's
    process group (as a terminal's Ctrl-C does) or to its pid alone."""
    start = time.monotonic()
    sigint_at = None
    with out.open("wb") as o, err.open("wb") as e, open(os.devnull, "rb") as nothing:
        # forked ready-imported (tests.forked_cli: its own session, the cap set before it runs);
        # a new interpreter through the shim when it cannot be forked
        streams = (nothing.fileno(), o.fileno(), e.fileno())
        proc = spawn(
            args, env, cwd, streams, session=True, rlimit_as=MEMORY_CAP, sigint=True
        ) or subprocess.Popen(
            [sys.executable, "-c", _SHIM, str(MEMORY_CAP), *args],
            stdin=subprocess.DEVNULL,
            stdout=o,
            stderr=e,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
        try:
            if interrupt is not None:
                delay, target, anchor = interrupt
                if anchor:  # the moment the system is first called: wait for its marker file
                    while proc.poll() is None and not Path(anchor).exists():
                        if time.monotonic() - start > timeout:
                            break
                        time.sleep(0.02)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=delay)
                if proc.returncode is None:
                    sigint_at = time.monotonic() - start
                    with contextlib.suppress(ProcessLookupError):
                        if target == "group":
                            os.killpg(proc.pid, signal.SIGINT)
                        else:
                            os.kill(proc.pid, signal.SIGINT)
            code: int | None = proc.wait(timeout=max(0.1, timeout - (time.monotonic() - start)))
        except subprocess.TimeoutExpired:
            code = None
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # the group: grandchildren too
            proc.wait()
    seconds = time.monotonic() - start
    after = None if sigint_at is None or code is None else seconds - sigint_at
    return Ran(code, seconds, sigint_at, after)


def tail(path: Path) -> str:
    if not path.exists():
        return ""
    with path.open("rb") as f:
        f.seek(max(0, path.stat().st_size - TAIL))
        return f.read().decode("utf-8", "replace")


_MOUNT_OK: bool | None = None
_MOUNT_LOCK = threading.Lock()


def can_mount_tmpfs(scratch: Path) -> bool:
    """Whether this process may mount a tmpfs (root, and a kernel/container that permits it)."""
    global _MOUNT_OK
    with _MOUNT_LOCK:
        if _MOUNT_OK is None:
            probe = scratch / ".mount-probe"
            probe.mkdir(parents=True, exist_ok=True)
            try:
                ok = (
                    subprocess.run(
                        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(probe)],
                        capture_output=True,
                        timeout=10,
                    ).returncode
                    == 0
                )
            except (OSError, subprocess.TimeoutExpired):
                ok = False
            if ok:
                subprocess.run(["umount", "-l", str(probe)], capture_output=True, timeout=10)
            _MOUNT_OK = ok
        return _MOUNT_OK


def prepare(case: Case, root: Path, port: int | None = None) -> tuple[Path, list[str]]:
    """Write the case's files (``{dir}`` → its folder, ``{port}`` → the echo server's port),
    FIFOs, symlinks and tmpfs mounts; return (folder, argv)."""
    folder = root / case.id
    home = folder / "home"
    for name, size in case.tmpfs.items():
        (folder / name).mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder / name)],
            check=True,
            capture_output=True,
            timeout=10,
        )
    home.mkdir(parents=True, exist_ok=True)
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    for name, content in case.files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(subst(content, folder, port))
    for name in case.fifos:
        os.mkfifo(folder / name)
    for name, target in case.links.items():
        os.symlink(target, folder / name)
    return folder, [subst(a, folder, port) for a in case.args]


def subst(text: Any, folder: Path, port: int | None) -> Any:
    """``{dir}`` and ``{port}`` in a str or bytes (None stays None)."""
    if text is None:
        return None
    if isinstance(text, bytes):
        return text.replace(b"{dir}", str(folder).encode()).replace(b"{port}", str(port).encode())
    return text.replace("{dir}", str(folder)).replace("{port}", str(port))


def run_case(case: Case, root: Path, port: int | None = None) -> Outcome:
    """Run one case and classify it (never raises for anything the case did)."""
    shown = " ".join(
        repr(a) if (not a or set(a) & set(" \t\n'\"")) else a for a in ["kebab-eval", *case.args]
    )
    prefix = " ".join(f"{k}={v}" for k, v in case.env.items())
    outcome = Outcome(
        case.id, case.kind, case.expect, f"{prefix} {shown}".strip(), None, "", "", 0.0, "", case.note
    )
    if case.tmpfs and not can_mount_tmpfs(root):
        outcome.status, outcome.reason = SKIPPED, "cannot mount a tmpfs here (needs root and mount rights)"
        return outcome
    folder, argv = prepare(case, root, port)
    try:
        env = child_env(folder / "home", {k: subst(v, folder, port) for k, v in case.env.items()})
        interrupt = case.interrupt and (*case.interrupt[:2], subst(case.interrupt[2], folder, port))
        ran = kebab_eval(argv, env, folder, case.timeout, folder / "stdout", folder / "stderr", interrupt)
        if ran.code in (0, 1):
            for n, extra in enumerate(case.after):
                kebab_eval(
                    [subst(a, folder, port) for a in extra],
                    env,
                    folder,
                    60,
                    folder / f"after{n}.out",
                    folder / f"after{n}.err",
                )
        stdout, stderr = tail(folder / "stdout"), tail(folder / "stderr")
        status, reason = classify(case, ran, stdout, stderr, folder, env)
    finally:
        for name in case.tmpfs:
            subprocess.run(["umount", "-l", str(folder / name)], capture_output=True, timeout=10)
    outcome.returncode, outcome.status, outcome.reason = ran.code, status, reason
    outcome.seconds, outcome.stderr_tail = ran.seconds, stderr[-3000:]
    return outcome


def classify(
    case: Case, ran: Ran | int | None, stdout: str, stderr: str, folder: Path, env: dict
) -> tuple[str, str]:
    """(status, reason) of one case: see the module docstring. A secret found anywhere wins over
    everything but a hang: it is the finding however the run ended."""
    if not isinstance(ran, Ran):
        ran = Ran(ran, 0.0)
    code = ran.code
    if code is None:
        return HANG, f"timed out after {case.timeout:.0f}s"
    if case.secrets and (leaks := find_secrets(case.secrets, folder, stdout + stderr)):
        return WRONG, "a secret written out: " + "; ".join(leaks[:4])
    if case.check == "sigint" and ran.sigint_at is not None:  # else: it ended first, judged as is
        return check_sigint(case, ran, stdout, stderr, folder, env)
    if case.check == "process-end":
        return check_process_end(case, code, stdout, stderr, folder, env)
    if code < 0:
        return INTERNAL, f"killed by signal {-code}"
    both = stdout + stderr
    if "Traceback" in both or _FRAME.search(both):
        return INTERNAL, "a traceback in the output"
    if "MemoryError" in both:
        return INTERNAL, f"hit the {MEMORY_CAP >> 30} GiB memory cap"
    if code == 2 and case.expect == READ:
        return WRONG, "exit 2: refused an input that must be read"
    if code == 2:
        squeezed = "".join(stderr.split())
        blame = [subst(b, folder, None) for b in case.blame]
        if not any("".join(b.split()) in squeezed for b in blame):
            return WRONG, f"exit 2 without naming any of {case.blame}"
        missing = [m for m in case.must_say if m.lower() not in stderr.lower()]
        if missing:
            return WRONG, f"exit 2 without saying {missing}"
        return REFUSED, "exit 2 naming the input"
    if code not in (0, 1):
        return INTERNAL, f"exit {code}"
    if "internal failure" in stderr:
        return INTERNAL, f"exit {code} for an internal failure"
    if case.expect == REFUSE:
        return WRONG, f"exit {code}: accepted an input that must be refused"
    if case.command == "validate":
        problems = check_validate(case, code, stdout)
    elif case.command == "convert":
        problems = check_convert(case, code, folder)
    else:
        problems = check_run(case, code, folder, env, stdout + stderr)
    if problems:
        worst = LOST if any(s == LOST for s, _ in problems) else WRONG
        return worst, f"exit {code} but " + "; ".join(p for _, p in problems[:5])
    return PLAUSIBLE, f"exit {code}, results checked"


Problems = list[tuple[str, str]]  # (LOST or WRONG, what)


def check_validate(case: Case, code: int, stdout: str) -> Problems:
    if code != 0:
        return [(WRONG, "golden validate exits 0 or 2")]
    found = re.match(r"ok: (\d+) quer", stdout)
    if not found:
        return [(WRONG, f"no 'ok: N queries' line: {stdout[:200]!r}")]
    if case.queries is not None and int(found.group(1)) != case.queries:
        return [(WRONG, f"validated {found.group(1)} queries, the file has {case.queries}")]
    return []


def check_convert(case: Case, code: int, folder: Path) -> Problems:
    """``golden convert … --out out.json``: every expected field (``queries.0.id``,
    ``queries.0.supports.1.doc_id`` …) holds the text the source file wrote."""
    if code != 0:
        return [(WRONG, "golden convert exits 0 or 2")]
    try:
        doc = json.loads((folder / "out.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return [(LOST, f"no converted set: {exc}")]
    problems: Problems = []
    queries = doc.get("queries", [])
    if case.queries is not None and len(queries) != case.queries:
        problems.append((LOST, f"{len(queries)} queries converted, the file has {case.queries}"))
    for path, want in case.expected.items():
        if path == "ids":  # the set of query ids, in any order
            got_ids = sorted(str(q.get("id")) for q in queries)
            if got_ids != want:
                problems.append((WRONG, f"query ids {got_ids[:6]}, the file wrote {want[:6]}"))
            continue
        got: Any = doc
        for step in path.split("."):
            try:
                got = got[int(step)] if isinstance(got, list) else got[step]
            except (KeyError, IndexError, TypeError, ValueError):
                got = "<absent>"
                break
        if got != want:
            problems.append((WRONG, f"{path} = {got!r}, the file wrote {want!r}"))
    return problems


def _null(value: Any) -> bool:
    import pandas as pd

    return value is None or bool(pd.isna(value))


def _store(case: Case, folder: Path, env: dict):
    from kebab_eval_pipeline.store.runs import RunStore

    base = (
        Path(subst(case.storage, folder, None))
        if case.storage
        else Path(env["DAGSTER_HOME"]) / "kebab-eval" / "artifacts"
    )
    return RunStore(base), base


def check_run(case: Case, code: int, folder: Path, env: dict, output: str = "") -> Problems:
    """What a run stored is right: rows, ids, metric values and ranges, latencies, and the
    family's own expectation (``case.check``)."""
    store, base = _store(case, folder, env)
    problems: Problems = []
    try:
        scores = store.read("query_scores", case.run_id)[0]["query_scores"]
        metrics = store.read("run_metrics", case.run_id)[0]["metrics"]
    except Exception as exc:  # nothing stored where a run stores it: that is the finding
        return [(LOST, f"no stored results ({type(exc).__name__}: {str(exc)[:200]})")]
    ids = list(scores["query_id"])
    if case.queries is not None and len(ids) != case.queries:
        status = LOST if len(ids) < case.queries else WRONG
        problems.append((status, f"{len(ids)} query_scores rows for {case.queries} golden queries"))
    if len(set(ids)) != len(ids):
        problems.append((WRONG, "a query id stored twice"))
    if case.query_ids is not None and sorted(ids) != sorted(case.query_ids):
        problems.append((WRONG, f"stored ids {sorted(ids)[:6]} != golden ids {sorted(case.query_ids)[:6]}"))
    for column in scores.columns:
        if QUERY_RATE_COLUMNS.match(column):
            bad = [v for v in scores[column] if not _null(v) and not 0 <= float(v) <= 1]
            if bad:
                problems.append((WRONG, f"query_scores.{column} outside [0, 1]: {bad[:3]}"))
    for column in ("retrieval_ms", "answer_ms"):
        bad = [v for v in scores[column] if not _null(v) and not (math.isfinite(v) and v >= 0)]
        if bad:
            problems.append((WRONG, f"query_scores.{column} impossible: {bad[:3]}"))
    for name, value in zip(metrics["metric"], metrics["value"], strict=True):
        if _null(value):
            continue
        value = float(value)
        if not math.isfinite(value):
            problems.append((WRONG, f"metric {name} = {value}"))
        elif RATE_EXEMPT.search(name):
            if value < 0:
                problems.append((WRONG, f"metric {name} = {value} < 0"))
        elif not 0 <= value <= 1:
            problems.append((WRONG, f"metric {name} = {value} outside [0, 1]"))
    n = dict(zip(metrics["metric"], metrics["value"], strict=True)).get("n_queries")
    if case.queries is not None and (n is None or _null(n) or int(n) != case.queries):
        problems.append((WRONG, f"n_queries = {n}, the golden set has {case.queries}"))
    if case.latencies:
        stored = dict(zip(scores["query_id"], scores["retrieval_ms"], strict=True))
        for qid, expected in case.latencies.items():
            got = stored.get(qid)
            if expected is None and not _null(got):
                problems.append(
                    (WRONG, f"query {qid!r}: retrieval_ms {got} stored, expected null (impossible/missing)")
                )
            elif expected is not None and (
                _null(got) or not math.isclose(float(got), expected, abs_tol=1e-9)
            ):
                problems.append((WRONG, f"query {qid!r}: retrieval_ms {got}, recorded {expected}"))
    rows = {qid: row for qid, row in zip(scores["query_id"], scores.to_dict("records"), strict=True)}
    if case.check == "dup-support":
        problems += check_scored_once(case, rows)
    elif case.check == "recorded-error":
        problems += check_recorded_error(case, rows)
    elif case.check == "slice-gate":
        if code != 0 or case.expected["bad_message"] in output:
            problems.append((WRONG, f"the gate on the empty slice value failed the run: exit {code}"))
    elif case.check == "output-full" and (code == 0 or case.expected["path"] not in output):
        problems.append((WRONG, f"{case.expected['path']} could not be written: exit {code} not naming it"))
    if case.trec and not problems:
        problems += [(WRONG, p) for p in check_trec(case, folder, env)]
    if case.markdown:
        problems += [(WRONG, p) for p in check_markdown(base, case.run_id)]
    return problems


def check_scored_once(case: Case, rows: dict[str, dict]) -> Problems:
    """A support listed twice counts once: with the gold document at rank 1 and no other gold,
    every ranking measure of that query is 1 (the issue: ``map`` etc. stored as 0.5)."""
    qid = case.expected["query"]
    row = rows.get(qid)
    if row is None:
        return [(LOST, f"no row for {qid}")]
    bad = {
        c: round(float(v), 4)
        for c, v in row.items()
        if re.fullmatch(r"(mrr|map|rprec|bpref|recall@\d+|ndcg@\d+)", c) and not _null(v) and float(v) != 1.0
    }
    return [(WRONG, f"query {qid}: the duplicate support changed its scores: {bad}")] if bad else []


def check_recorded_error(case: Case, rows: dict[str, dict]) -> Problems:
    """A trace row recording an error is an error row (error_class set) and not scored from its
    hits: its mrr is 0 or null, never the 1.0 its hits would give."""
    qid = case.expected["query"]
    row = rows.get(qid)
    if row is None:
        return [(LOST, f"no row for {qid}")]
    problems: Problems = []
    if _null(row.get("error_class")):
        problems.append((WRONG, f"query {qid}: recorded error not an error row"))
    if not _null(row.get("mrr")) and float(row["mrr"]) > 0:
        problems.append((WRONG, f"query {qid}: recorded error scored from its hits (mrr {row['mrr']})"))
    return problems


def check_process_end(
    case: Case, code: int, stdout: str, stderr: str, folder: Path, env: dict
) -> tuple[str, str]:
    """A python system that ended its process: expected exit 1 (system_health failed) with one
    row per query, the ended calls error rows. A green exit is wrong whatever was stored."""
    store, _ = _store(case, folder, env)
    try:
        scores = store.read("query_scores", case.run_id)[0]["query_scores"]
    except Exception:
        scores = None
    if code == 0:
        what = "nothing stored" if scores is None else f"{len(scores)} rows stored"
        return WRONG, f"exit 0 although the system ended its process ({what})"
    if scores is None:
        return LOST, f"exit {code}, nothing stored"
    if len(scores) < (case.queries or 0):
        return LOST, f"exit {code}, {len(scores)} rows for {case.queries} queries"
    if code != 1 or "Traceback" in stdout + stderr or "internal failure" in stderr:
        return INTERNAL, f"exit {code} (rows stored)"
    errors = scores[~scores["error_class"].isna()]
    if errors.empty:
        return WRONG, f"exit {code}, but no error row for the call that ended the process"
    return PLAUSIBLE, f"exit {code}, {len(scores)} rows, {len(errors)} error rows"


def check_sigint(case: Case, ran: Ran, stdout: str, stderr: str, folder: Path, env: dict) -> tuple[str, str]:
    """Ctrl-C during a run: exit 130, within :data:`SIGINT_GRACE` s, no traceback, and no run
    stored as complete (``run_metrics`` for the run id, unless marked ``interrupted``)."""
    at = f"SIGINT to the {case.interrupt[1]} at {ran.sigint_at:.1f}s"
    if case.interrupt[2]:
        at += " (after the first system call)"
    both = stdout + stderr
    traceback = "Traceback" in both or bool(_FRAME.search(both))
    if ran.code in (0, 1):
        return WRONG, f"{at}: ignored, the run carried on and exited {ran.code}" + (
            " (with a traceback)" if traceback else ""
        )
    if traceback:
        return INTERNAL, f"{at}: a traceback, exit {ran.code}"
    store, _ = _store(case, folder, env)
    try:
        _, info = store.read("run_metrics", case.run_id)
        # stopped after its metrics were stored: kept, marked interrupted (judged failed, never a
        # baseline) — not stored as complete
        complete = not info.get("interrupted")
    except Exception:
        complete = False
    if ran.code != SIGINT_EXIT:
        return INTERNAL, f"{at}: exit {ran.code}, expected {SIGINT_EXIT}"
    if ran.after_sigint is not None and ran.after_sigint > SIGINT_GRACE:
        return HANG, f"{at}: took {ran.after_sigint:.1f}s to stop"
    if complete:
        return WRONG, f"{at}: exit {SIGINT_EXIT}, but run_metrics stored as for a complete run"
    return PLAUSIBLE, f"{at}: exit {SIGINT_EXIT} after {ran.after_sigint:.1f}s, nothing stored as complete"


def _texts(path: Path):
    """The bytes of a written file as a search would see them: Parquet as its values' text (its
    pages may be compressed), gzip decompressed, everything else as it is."""
    data = path.read_bytes()
    yield data
    if path.suffix == ".parquet":
        with contextlib.suppress(Exception):
            import pyarrow.parquet as pq

            table = pq.read_table(path)
            yield json.dumps(table.to_pylist(), default=str, ensure_ascii=False).encode()
            yield json.dumps(
                table.schema.metadata and {k.decode(): v.decode() for k, v in table.schema.metadata.items()}
            ).encode()
    elif data[:2] == b"\x1f\x8b":
        with contextlib.suppress(Exception):
            yield gzip.decompress(data)


def find_secrets(forms: list[str], folder: Path, output: str) -> list[str]:
    """Where any of ``forms`` appears: the process's output and every file under the case
    folder (storage, DAGSTER_HOME, --junit / --pr-comment / summary / export files)."""
    needles = [f.encode() for f in forms]
    found = [f"output holds {f!r}" for f in forms if f in output]
    for path in sorted(folder.rglob("*")):
        if not path.is_file() or path.is_symlink():
            continue
        for text in _texts(path):
            hit = next((n for n in needles if n in text), None)
            if hit:
                found.append(f"{path.relative_to(folder)} holds {hit.decode()!r}")
                break
    return found


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
    ran = kebab_eval(args, env, folder, 60, folder / "trec.out", folder / "trec.err")
    if ran.code != 0:
        return [f"export --format trec exit {ran.code}: {tail(folder / 'trec.err')[-300:]!r}"]
    problems = []
    qrels = sorted(folder.glob("run*qrels*"))
    for path, fields in [(out, 6), *[(q, 4) for q in qrels]]:
        for n, line in enumerate(path.read_text(encoding="utf-8").split("\n"), 1):
            if line and len(line.split()) != fields:
                problems.append(f"{path.name} line {n} has {len(line.split())} fields: {line[:80]!r}")
    return problems[:3]


def run_all(cases: list[Case], root: Path, workers: int = 2) -> list[Outcome]:
    """Every case, ``workers`` at a time; outcomes in case order. The echo server (one, on
    127.0.0.1) runs for the cases that need it."""
    from tests.fuzz.echo_server import echo_server

    with contextlib.ExitStack() as stack:
        port = stack.enter_context(echo_server()) if any(c.server for c in cases) else None
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(lambda c: run_case(c, root, port), cases))


def table(outcomes: list[Outcome]) -> dict[str, dict[str, int]]:
    """The issue's table per family and in total: tried and each column (skipped apart)."""
    rows: dict[str, dict[str, int]] = {}
    for o in outcomes:
        for key in (o.family, "total"):
            row = rows.setdefault(key, {"tried": 0, **dict.fromkeys(COLUMNS, 0), SKIPPED: 0})
            row["tried"] += o.status != SKIPPED
            row[o.status] += 1
    total = rows.pop("total", None)
    return {**dict(sorted(rows.items())), **({"total": total} if total else {})}


def render_table(rows: dict[str, dict[str, int]]) -> str:
    """The table as text: tried / clean exit 2 / plausible / internal / hang / wrong / lost."""
    head = ["tried", "clean exit 2", "plausible", "internal", "hang", "wrong", "lost"]
    keys = ["tried", *COLUMNS]
    lines = [f"  {'family':14}" + "".join(f"{h:>14}" for h in head)]
    for family, row in rows.items():
        skipped = f"   ({row[SKIPPED]} skipped)" if row[SKIPPED] else ""
        lines.append(f"  {family:14}" + "".join(f"{row[k]:>14}" for k in keys) + skipped)
    return "\n".join(lines)


def figures(outcomes: list[Outcome], wall: float) -> dict[str, Any]:
    """The counts the test prints and stores: the table per family and in total, per kind."""
    by_kind: dict[str, dict[str, int]] = {}
    per_family: dict[str, list[float]] = {}
    for o in outcomes:
        per_family.setdefault(o.family, []).append(o.seconds)
        counts = by_kind.setdefault(o.kind, {})
        counts[o.status] = counts.get(o.status, 0) + 1
    rows = table(outcomes)
    total = rows.get("total", {"tried": 0, **dict.fromkeys(COLUMNS, 0), SKIPPED: 0})
    return {
        **total,
        "wall_seconds": round(wall, 1),
        "table": rows,
        "by_kind": dict(sorted(by_kind.items())),
        # wall seconds per family (mostly CPU-bound subprocess time): what sizing the default
        # case counts rests on
        "seconds_by_family": {
            family: {
                "cases": len(times),
                "total": round(sum(times), 1),
                "mean": round(sum(times) / len(times), 2),
            }
            for family, times in sorted(per_family.items())
        },
        "failures": [asdict(o) for o in outcomes if o.status in FAILURES],
        "outcomes": [
            {k: getattr(o, k) for k in ("id", "kind", "status", "returncode", "seconds", "reason")}
            for o in outcomes
        ],
    }


__all__ = [
    "COLUMNS",
    "EITHER",
    "FAILURES",
    "FLAG",
    "READ",
    "REFUSE",
    "Outcome",
    "classify",
    "figures",
    "render_table",
    "run_all",
    "run_case",
]
