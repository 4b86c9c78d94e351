"""The command adapter: an external CLI run once per query (SPEC §4 "command").

(``protocol: jsonl`` — one long-lived process per worker speaking JSON lines — is
:mod:`.command_jsonl`, built on this class.)

``search_argv`` (and ``ask_argv`` for answers) is an argv list run without a shell.
``{query}``, ``{query_id}``, ``{k}`` and ``{mode}`` are substituted inside each item in
a single pass, so a query is always exactly one argument, byte for byte — shell
metacharacters, quotes and even a literal ``{k}`` inside the query stay as they are.

Per query: a timeout (the whole process group is killed, so a child the command
spawned cannot keep it alive), stdout read as it arrives up to ``max_response_mb``
(``too_large`` past it) and until the command exits (not until its pipes close), parsed as
``search_hit.v1``-style JSON (see :mod:`.wire`), and a non-zero exit, a timeout or unreadable
output as that query's error with the tail of stderr. Queries run ``concurrency`` at a time.
Every process starts under :mod:`.guard`, so it dies with kebab-eval (see there).

With answers on, a query runs ``search_argv`` and then ``ask_argv`` (two processes); with
``ask_returns_hits`` it runs ``ask_argv`` alone and reads the hits from the same output, so the
hits scored are the ones the answer was built from.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import selectors
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kebab_eval_pipeline.contract import Answer, Hit, SystemInfo
from kebab_eval_pipeline.foundation import cancellation
from kebab_eval_pipeline.foundation.errors import FieldValueError
from kebab_eval_pipeline.foundation.limits import MIB
from kebab_eval_pipeline.foundation.yaml_io import json_loads
from kebab_eval_pipeline.systems.capabilities import Capabilities
from kebab_eval_pipeline.systems.kinds.command import ARGV_FIELDS, CommandSystemSettings
from kebab_eval_pipeline.systems.outcome import (
    BAD_JSON,
    EXCEPTION,
    EXIT_CODE,
    TIMEOUT,
    QueryFailure,
    QueryOutcome,
    QueryRequest,
    too_large,
)
from kebab_eval_pipeline.systems.per_query import PerQueryAdapter, SearchReply, timed_call
from kebab_eval_pipeline.systems.protocol import OpaqueSystem
from kebab_eval_pipeline.systems.templates import PLACEHOLDER_RE
from kebab_eval_pipeline.systems.versions import apply_version_report
from kebab_eval_pipeline.systems.wire import parse_answer, parse_hit_block, parse_scope

STDERR_TAIL_CHARS = 400
STDERR_KEEP_BYTES = 8192  # the stderr tail kept per process (messages show the last 400 chars)
KILL_GRACE_S = 5.0  # after SIGKILL, how long to wait for the process to be reaped
EXIT_DRAIN_S = 0.5  # after the command exits, how long its pipes may take to deliver the rest
_READ_CHUNK = 1 << 16
_POLL_S = 0.05  # without a pidfd (not Linux): how often to check whether the command exited
_GUARD = str(Path(__file__).with_name("guard.py"))


def substitute(argv: Sequence[str], values: dict[str, str]) -> list[str]:
    """``argv`` with ``{query}``, ``{query_id}``, ``{k}``, ``{mode}`` replaced inside each item.

    One regex pass per item, so substituted text is never substituted again (a query
    containing ``{k}`` stays literal). Other braces are left alone.
    """
    return [PLACEHOLDER_RE.sub(lambda m: values[m.group(1)], item) for item in argv]


def tail(text: str, limit: int = STDERR_TAIL_CHARS) -> str:
    """The last ``limit`` characters of ``text`` on one line (whitespace collapsed)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else "…" + flat[-limit:]


def resolve_executable(argv0: str, cwd: str | None) -> str:
    """The program ``argv0`` names: a path (relative to ``cwd``) or a name on PATH.

    Raises ValueError naming the executable and the folder it was looked for from when it cannot
    be found or run, so a misconfigured command fails the run before any query instead of turning
    every row into the same error. A bare name that is not on PATH but is a file in ``cwd`` gets
    a hint to write it as a path (PATH lookups never search the current folder).
    """
    where = cwd or os.getcwd()
    if os.sep in argv0 or (os.altsep and os.altsep in argv0):
        path = Path(argv0)
        if not path.is_absolute() and cwd:
            path = Path(cwd) / path
        if not path.exists():
            raise ValueError(f"executable {argv0!r} not found (cwd {where})")
        if not path.is_file() or not os.access(path, os.X_OK):
            raise ValueError(f"executable {argv0!r} is not an executable file (cwd {where})")
        return str(path)
    found = shutil.which(argv0)
    if found is None:
        hint = f"; ./{argv0} is in that folder: write it as a path" if (Path(where) / argv0).is_file() else ""
        raise ValueError(f"executable {argv0!r} not found on PATH (cwd {where}{hint})")
    return found


class CommandSystem(OpaqueSystem, PerQueryAdapter):
    """Runs ``settings.search_argv`` / ``ask_argv`` per query (see the module docstring)."""

    def __init__(self, settings: CommandSystemSettings) -> None:
        if settings.cwd and not Path(settings.cwd).is_dir():
            raise FieldValueError("system.cwd", f"cwd {settings.cwd!r} is not a folder")
        for name in ARGV_FIELDS:
            argv = getattr(settings, name)
            if argv:
                try:
                    resolve_executable(argv[0], settings.cwd)
                except ValueError as exc:  # named as the field that holds the executable
                    raise FieldValueError(f"system.{name}[0]", str(exc)) from None
        self.settings = settings
        self.concurrency = settings.concurrency
        self.can_answer = settings.ask_argv is not None
        self._info: SystemInfo | None = None
        self._info_lock = threading.Lock()

    # -- one process -------------------------------------------------------------------------

    def _values(self, request: QueryRequest, k: int) -> dict[str, str]:
        return {
            "query": request.query,
            "query_id": request.query_id,
            "k": str(k),
            "mode": self.settings.mode or "",
        }

    def run_process(self, argv: list[str]) -> str:
        """Run ``argv`` (no shell) and return its stdout; QueryFailure on timeout, exit code, or
        output past ``max_response_mb`` (see :func:`run_to_exit`)."""
        s = self.settings
        result = run_to_exit(argv, s.cwd, s.timeout_s, cap_bytes(s.max_response_mb))
        stdout, stderr, code = result
        if code != 0:
            what = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
            err = tail(stderr.decode("utf-8", "replace"))
            raise QueryFailure(EXIT_CODE, f"{what}" + (f"; stderr: {err}" if err else "; no stderr"))
        try:
            return stdout.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise QueryFailure(BAD_JSON, f"output is not UTF-8 (byte {exc.start})") from None

    def _json(self, argv_template: list[str], request: QueryRequest, k: int) -> Any:
        stdout = self.run_process(substitute(argv_template, self._values(request, k)))
        return parse_json_output(stdout)

    # -- the adapter -------------------------------------------------------------------------

    def search_one(self, request: QueryRequest, k: int) -> SearchReply:
        assert self.settings.search_argv is not None
        payload = self._json(self.settings.search_argv, request, k)
        hits, warnings = parse_hit_block(payload, k, self.settings.response)
        return SearchReply(hits, warnings, 1, parse_scope(payload, self.settings.response))

    def ask_one(self, request: QueryRequest, k: int, hits: Sequence[Hit]) -> tuple[Answer, int]:
        assert self.settings.ask_argv is not None
        return parse_answer(self._json(self.settings.ask_argv, request, k), self.settings.response), 1

    def run_one(self, request: QueryRequest, k: int, answers: bool) -> QueryOutcome:
        """Search and ask as two processes, or — ``ask_returns_hits`` with answers on — one ask
        process whose output gives both (then ``retrieval_ms`` and ``answer_ms`` are both its time)."""
        if not (answers and self.settings.ask_returns_hits):
            return super().run_one(request, k, answers)
        assert self.settings.ask_argv is not None
        outcome = QueryOutcome(query_id=request.query_id)

        def both() -> int:
            payload = self._json(self.settings.ask_argv, request, k)
            outcome.hits, outcome.warnings = parse_hit_block(payload, k, self.settings.response)
            outcome.scope = parse_scope(payload, self.settings.response)
            outcome.answer = parse_answer(payload, self.settings.response)
            return 1

        outcome.retrieval_ms = outcome.answer_ms = timed_call(outcome, both)
        return outcome

    def _details(self) -> dict[str, str]:
        s = self.settings
        details = {"search_argv": shlex.join(s.search_argv or []), "timeout_s": f"{s.timeout_s:g}"}
        details["concurrency"] = str(s.concurrency)
        if s.ask_argv:
            details["ask_argv"] = shlex.join(s.ask_argv)
        if s.ask_returns_hits:
            details["ask_returns_hits"] = "true"
        return details

    def _version_report(self) -> Any:
        """What ``version_argv`` prints (JSON, else the text); QueryFailure when it fails."""
        s = self.settings
        assert s.version_argv is not None
        values = {"query": "", "query_id": "", "k": "0", "mode": s.mode or ""}
        stdout = self.run_process(substitute(s.version_argv, values))
        try:
            return json.loads(stdout)
        except ValueError:
            return stdout

    def capabilities(self) -> Capabilities:
        """What its runs can carry: the settings' declaration (``CommandSystemSettings.capabilities``)."""
        return self.settings.capabilities()

    def info(self) -> SystemInfo:
        """Kind, mode, the argv templates and, when ``version_argv`` is set, what it reports
        (run once; a failure is recorded in ``details["version_error"]``, never raised)."""
        with self._info_lock:
            if self._info is None:
                s = self.settings
                info = SystemInfo(kind="command", mode=s.mode, details=self._details())
                if s.version_argv:
                    try:
                        info = apply_version_report(info, self._version_report())
                    except QueryFailure as failure:
                        info.details["version_error"] = str(failure)
                self._info = info
            return self._info.model_copy(deep=True)


def parse_json_output(stdout: str) -> Any:
    """JSON from a process's stdout; QueryFailure(``bad_json``) with position and a preview."""
    if not stdout.strip():
        raise QueryFailure(BAD_JSON, "no output on stdout")
    try:
        return json_loads(stdout)
    except json.JSONDecodeError as exc:
        preview = " ".join(stdout.split())[:120]
        raise QueryFailure(
            BAD_JSON, f"{exc.msg} at line {exc.lineno} column {exc.colno}: {preview!r}"
        ) from None
    except (ValueError, RecursionError) as exc:  # an integer past Python's digit limit, deep nesting
        raise QueryFailure(BAD_JSON, f"unreadable JSON: {str(exc)[:120]}") from None


def cap_bytes(max_response_mb: float) -> int:
    """``system.max_response_mb`` in bytes."""
    return int(max_response_mb * MIB)


# -- starting processes ------------------------------------------------------------------------
# Every system process starts under guard.py, from one long-lived thread: the guard's death signal
# fires when the thread that forked it ends, and a query worker thread ends before the run does.

_spawner: ThreadPoolExecutor | None = None
_spawner_lock = threading.Lock()


def _forget_spawner() -> None:
    global _spawner, _spawner_lock
    _spawner, _spawner_lock = None, threading.Lock()  # a forked child has no copy of the thread


os.register_at_fork(after_in_child=_forget_spawner)


#: Every system process alive (a weak set: a process forgotten by its caller leaves it). Ctrl-C
#: (kebab_eval_pipeline.foundation.cancellation) kills their groups at once: the calls in flight end now,
#: not when the system answers.
_live: weakref.WeakSet[subprocess.Popen] = weakref.WeakSet()


def _kill_live() -> None:
    """Kill every live system process's group (a cancellation hook: no lock, never raises)."""
    for proc in list(_live):  # list(): one C call, no other thread runs meanwhile
        if proc.returncode is None:  # not reaped: its pid is still its own
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)


cancellation.register(_kill_live)


def _popen(args: list[str], kwargs: dict[str, Any]) -> subprocess.Popen:
    global _spawner
    with _spawner_lock:
        if _spawner is None:
            _spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kebab-eval-spawn")
        spawner = _spawner
    return spawner.submit(subprocess.Popen, args, **kwargs).result()


def spawn(argv: list[str], cwd: str | None, stdin: int, timeout_s: float | None = None) -> subprocess.Popen:
    """Start ``argv`` (no shell) in ``cwd`` under :mod:`.guard`: in a new session and process group
    led by the guard (so ``kill_group`` kills it with its children), dying with this process.

    stdout and stderr are pipes; ``stdin`` is ``subprocess.PIPE`` or ``subprocess.DEVNULL``.
    Raises OSError (``strerror`` says why) when the command cannot be executed, TimeoutError when
    the supervisor does not report within ``timeout_s`` (a machine too loaded to start Python).
    """
    cancellation.check()  # Ctrl-C: no new system process
    status_read, status_write = os.pipe()
    try:
        proc = _popen(
            [sys.executable, "-I", "-S", _GUARD, str(os.getpid()), str(status_write), *argv],
            {
                "stdin": stdin,
                "stdout": subprocess.PIPE,
                "stderr": subprocess.PIPE,
                "cwd": cwd,
                "bufsize": 0,
                "start_new_session": True,
                "pass_fds": (status_write,),
            },
        )
    except BaseException:
        os.close(status_read)
        raise
    finally:
        os.close(status_write)
    _live.add(proc)
    if cancellation.requested():  # requested while it started: the hook did not see it
        kill_group(proc)
    try:
        with os.fdopen(status_read, "rb") as status_pipe:
            # the guard writes once, then closes: ~12 ms
            if timeout_s is not None and not select.select([status_pipe], [], [], timeout_s)[0]:
                raise TimeoutError(f"the process did not start within {timeout_s:g} s")
            status = status_pipe.read()
    except BaseException:
        kill_group(proc)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=KILL_GRACE_S)
        _close_pipes(proc)
        raise
    if status != b"R":
        kill_group(proc)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=KILL_GRACE_S)
        _close_pipes(proc)
        code = int(status[1:] or 0) if status[1:].isdigit() else 0
        if not status.startswith(b"E"):
            raise OSError(0, "the process supervisor (guard.py) did not start")
        raise OSError(code, os.strerror(code) if code else "cannot execute", argv[0])
    return proc


def _close_pipes(proc: subprocess.Popen) -> None:
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()


def exit_fd(proc: subprocess.Popen) -> int | None:
    """A pidfd that becomes readable when ``proc`` exits (Linux 5.3+), else None."""
    try:
        return os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        return None


def run_to_exit(argv: list[str], cwd: str | None, timeout_s: float, cap: int) -> tuple[bytes, bytes, int]:
    """Run ``argv`` and read its stdout and stderr until it exits: ``(stdout, stderr tail, code)``.

    * Output is read as it arrives; stdout past ``cap`` bytes fails the query as ``too_large``
      at once (the group is killed), and only the last ``STDERR_KEEP_BYTES`` of stderr are kept.
    * The end is the command's exit, not its pipes' close: after the exit, whatever is still
      buffered is read for up to ``EXIT_DRAIN_S``, then the process group is killed, so a
      background child left holding stdout costs half a second, not the timeout, and the
      result stands.
    * No exit within ``timeout_s`` → ``timeout``; the group is killed in every case.

    Raises QueryFailure (``exception`` when the command cannot start).
    """
    deadline = time.monotonic() + timeout_s
    try:
        proc = spawn(argv, cwd, subprocess.DEVNULL, timeout_s)
    except TimeoutError as exc:
        raise QueryFailure(TIMEOUT, f"{exc}; process killed", timed_out=True) from None
    except OSError as exc:
        raise QueryFailure(EXCEPTION, f"cannot start {argv[0]!r}: {exc.strerror or exc}") from None
    assert proc.stdout is not None and proc.stderr is not None
    out, err = bytearray(), bytearray()
    pidfd = exit_fd(proc)
    selector = selectors.DefaultSelector()
    streams = {proc.stdout.fileno(): out, proc.stderr.fileno(): err}
    for fd in streams:
        selector.register(fd, selectors.EVENT_READ)
    if pidfd is not None:
        selector.register(pidfd, selectors.EVENT_READ)
    exited = False
    try:
        while streams:
            now = time.monotonic()
            if not exited and (proc.poll() is not None if pidfd is None else False):
                exited, deadline = True, min(deadline, now + EXIT_DRAIN_S)
            if now >= deadline:
                break
            wait = deadline - now if pidfd is not None else min(deadline - now, _POLL_S)
            for key, _ in selector.select(wait):
                if key.fd == pidfd:
                    selector.unregister(pidfd)
                    exited, deadline = True, min(deadline, time.monotonic() + EXIT_DRAIN_S)
                    continue
                chunk = os.read(key.fd, _READ_CHUNK)
                if not chunk:
                    selector.unregister(key.fd)
                    del streams[key.fd]
                    continue
                buffer = streams[key.fd]
                buffer += chunk
                if buffer is err:
                    del err[:-STDERR_KEEP_BYTES]
                elif len(out) > cap:
                    raise too_large(cap, "stdout")
        if not exited:  # both pipes closed: wait for the exit itself
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
                exited = True
            except subprocess.TimeoutExpired:
                pass
        if not exited:
            text = tail(err.decode("utf-8", "replace"))
            message = f"no result within {timeout_s:g} s; process killed"
            raise QueryFailure(TIMEOUT, message + (f"; stderr: {text}" if text else ""), timed_out=True)
    finally:
        kill_group(proc)  # children left behind in the group (some may hold the pipes)
        selector.close()
        if pidfd is not None:
            os.close(pidfd)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=KILL_GRACE_S)
        _close_pipes(proc)
    return bytes(out), bytes(err), proc.returncode


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the process's whole group (it runs in a session of its own), else the process."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):  # it may have gone meanwhile
            proc.kill()
