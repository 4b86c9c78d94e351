"""The command adapter's persistent mode (``system.protocol: jsonl``): one long-lived process per
worker, one JSON request per line on its stdin, one JSON reply per line on its stdout.

The protocol (docs/site/recipes/command.md is the user-facing copy):

* ``argv`` is started without a shell, in ``cwd``, with this process's environment, in its own
  process group. ``{mode}`` is its only placeholder; everything per query travels in the requests.
* After every start the adapter writes ``{"id": "version", "op": "version"}``. The process
  replies with one object echoing that id — its versions (as a version endpoint would report
  them), ``{"id": "version"}`` when it has none, or ``{"id": "version", "error": "..."}``. That
  reply marks it ready: start-up (loading an index, a model) gets ``startup_timeout_s`` and never
  counts in a query's latency. Stdout lines before it that are not JSON objects are start-up
  noise (a library's banner) and are skipped.
* Then, one at a time per process: ``{"id": QUERY_ID, "query": TEXT, "k": K, "answer": BOOL,
  "mode": MODE or null}`` → ``{"id": QUERY_ID, "hits": [...], "answer": {...}}`` (read by
  :mod:`.wire` through ``system.response``, exactly as per-query output is; an absent or null
  answer leaves the query unanswered) or ``{"id": QUERY_ID, "error": "message"}``.
* End of stdin means exit; a process still running 2 s later is killed with its group.

Failures stay one row per query, with the per-query mode's classes: no reply within
``timeout_s`` → ``timeout`` and the process group is killed (a fresh process serves the next
query); the process exits while holding a query → ``exit_code`` with the exit status and the tail
of its stderr; a reply line that is not JSON → ``bad_json``, one for another id or not an object
→ ``bad_response``, a line longer than ``max_response_mb`` → ``too_large`` (all three restart
the process: it is out of step); ``error`` in the reply →
``system_error``; unreadable hits or answer → ``bad_response`` (the process is kept). A process
that cannot start or crashes is restarted at most ``max_restarts`` times in a row; after that
the remaining queries fail at once, naming the last crash. Stderr is drained continuously (a
chatty system never blocks on a full pipe), keeping its tail for messages.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import selectors
import shlex
import subprocess
import threading
import time
from collections.abc import Sequence
from typing import Any

from kebab_eval_pipeline.contract import SystemInfo
from kebab_eval_pipeline.systems.command import (
    EXIT_DRAIN_S,
    KILL_GRACE_S,
    STDERR_KEEP_BYTES,
    CommandSystem,
    cap_bytes,
    exit_fd,
    kill_group,
    spawn,
    substitute,
    tail,
)
from kebab_eval_pipeline.systems.kinds.command import CommandSystemSettings
from kebab_eval_pipeline.systems.outcome import (
    BAD_JSON,
    BAD_RESPONSE,
    EXCEPTION,
    EXIT_CODE,
    SYSTEM_ERROR,
    TIMEOUT,
    TOO_LARGE,
    Progress,
    QueryFailure,
    QueryOutcome,
    QueryRequest,
    too_large,
)
from kebab_eval_pipeline.systems.per_query import exception_failure
from kebab_eval_pipeline.systems.versions import apply_version_report
from kebab_eval_pipeline.systems.wire import _kind, dig, parse_answer, parse_hit_block, parse_scope

VERSION_ID = "version"
_CLOSE_GRACE_S = 2.0  # after end of stdin, how long a process may take to exit before it is killed
_READ_CHUNK = 1 << 16
_NOISE_KEPT = 3  # start-up noise lines quoted in the run warning


class _Exited(Exception):
    """The process closed its stdout / stdin (it exited or is exiting)."""


class _Left(Exception):
    """The process exited with status 0 instead of replying."""


class _TooLarge(Exception):
    """A line of stdout passed ``max_response_mb``."""


class _TimedOut(Exception):
    """No complete line (read or write) before the deadline."""


class _Process:
    """One running copy of ``argv``: line I/O with deadlines, stderr drained by a thread."""

    def __init__(self, argv: list[str], cwd: str | None, cap: int, start_timeout_s: float) -> None:
        # its own process group (a timeout kills its children too), dying with kebab-eval
        self.proc = spawn(argv, cwd, subprocess.PIPE, start_timeout_s)
        self._cap = cap
        assert self.proc.stdin and self.proc.stdout and self.proc.stderr
        self._in = self.proc.stdin.fileno()
        self._out = self.proc.stdout.fileno()
        os.set_blocking(self._in, False)  # a process that stops reading must not block us past a deadline
        self._buf = bytearray()
        self._released = False
        self._stderr = bytearray()
        self._stderr_lock = threading.Lock()
        self._drain = threading.Thread(target=self._drain_stderr, daemon=True, name="kebab-eval-stderr")
        self._drain.start()
        self._readable = selectors.DefaultSelector()
        self._readable.register(self._out, selectors.EVENT_READ)
        # The exit itself ends a read, not only the close of stdout, which a child it left
        # behind may hold (that would turn a crash into a timeout).
        self._pidfd = exit_fd(self.proc)
        if self._pidfd is not None:
            self._readable.register(self._pidfd, selectors.EVENT_READ)
        self._writable = selectors.DefaultSelector()
        self._writable.register(self._in, selectors.EVENT_WRITE)

    def _drain_stderr(self) -> None:
        assert self.proc.stderr is not None
        fd = self.proc.stderr.fileno()
        try:
            while chunk := os.read(fd, _READ_CHUNK):
                with self._stderr_lock:
                    self._stderr += chunk
                    del self._stderr[:-STDERR_KEEP_BYTES]
        except OSError:  # closed under us by close()
            pass

    def stderr_tail(self) -> str:
        self._drain.join(timeout=1.0)  # after an exit: let the last of stderr arrive
        with self._stderr_lock:
            return tail(self._stderr.decode("utf-8", "replace"))

    def send(self, message: dict, deadline: float) -> None:
        data = memoryview((json.dumps(message, ensure_ascii=False) + "\n").encode("utf-8"))
        while data:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self._writable.select(remaining):
                raise _TimedOut
            try:
                data = data[os.write(self._in, data) :]
            except BlockingIOError:
                continue
            except (BrokenPipeError, ConnectionResetError):
                raise _Exited from None

    def readline(self, deadline: float) -> bytes:
        """The next line of stdout (without the newline). Raises _TimedOut at ``deadline``,
        _Exited when the process closed its stdout or exited without completing a line, and
        _TooLarge when the line passes the cap (``max_response_mb``)."""
        drain_until: float | None = None  # set once the process has exited
        while (end := self._buf.find(b"\n")) < 0:
            if len(self._buf) > self._cap:
                raise _TooLarge
            now = time.monotonic()
            if drain_until is not None and now >= drain_until:
                raise _Exited  # exited without completing the line (a child holds stdout)
            if now >= deadline:
                raise _TimedOut
            until = deadline if drain_until is None else min(deadline, drain_until)
            ready = {key.fd for key, _ in self._readable.select(until - now)}
            if self._out in ready:
                chunk = os.read(self._out, _READ_CHUNK)
                if not chunk:
                    raise _Exited
                self._buf += chunk
            elif self._pidfd is not None and self._pidfd in ready:
                self._readable.unregister(self._pidfd)  # read what the pipe still holds, briefly
                drain_until = time.monotonic() + EXIT_DRAIN_S
        if end > self._cap:
            raise _TooLarge
        line = bytes(self._buf[:end])
        del self._buf[: end + 1]
        return line

    def alive(self) -> bool:
        return self.proc.poll() is None

    def exit_status(self) -> str:
        """How the process ended ("exit code 3", "killed by signal 9"), waiting briefly for it."""
        try:
            code = self.proc.wait(timeout=_CLOSE_GRACE_S)
        except subprocess.TimeoutExpired:  # closed its stdout but lives on: it is of no more use
            self.kill()
            return "closed its stdout (killed)"
        return f"killed by signal {-code}" if code < 0 else f"exit code {code}"

    def exited_cleanly(self) -> bool:
        """Whether the process ended with status 0 (waiting briefly, as :meth:`exit_status`)."""
        self.exit_status()
        return self.proc.returncode == 0

    def kill(self) -> None:
        kill_group(self.proc)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=KILL_GRACE_S)
        self._release()

    def close(self) -> None:
        """End of stdin (the protocol's "exit"), a short grace, then the group is killed."""
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        except OSError:
            pass
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=_CLOSE_GRACE_S)
        self.kill()  # also reaps children the process left behind in its group

    def _release(self) -> None:
        if self._released:
            return
        self._released = True
        for selector in (self._readable, self._writable):
            selector.close()
        if self._pidfd is not None:
            os.close(self._pidfd)
        for pipe in (self.proc.stdin, self.proc.stdout):
            try:
                if pipe is not None:
                    pipe.close()
            except OSError:
                pass
        self._drain.join(timeout=1.0)
        if self.proc.stderr is not None and not self._drain.is_alive():
            self.proc.stderr.close()


class _Slot:
    """A worker's process (None until started, or after it was killed / crashed)."""

    def __init__(self) -> None:
        self.process: _Process | None = None

    def drop(self, kill: bool = True) -> None:
        if self.process is not None:
            self.process.kill() if kill else self.process.close()
            self.process = None


class JsonlCommandSystem(CommandSystem):
    """``protocol: jsonl`` (see the module docstring): ``concurrency`` long-lived processes."""

    def __init__(self, settings: CommandSystemSettings) -> None:
        super().__init__(settings)
        assert settings.argv is not None
        self._argv = substitute(
            settings.argv, {"query": "", "query_id": "", "k": "", "mode": settings.mode or ""}
        )
        self._cap = cap_bytes(settings.max_response_mb)
        self._lock = threading.Lock()
        self._crashes = 0  # consecutive: reset by any query reply
        self._last_crash: QueryFailure | None = None
        self._version: tuple[str, Any] | None = None  # ("report", dict) or ("error", message)
        self._slots: queue.SimpleQueue[_Slot] | None = None
        self._starts = 0
        self._noise: list[str] = []
        self._noise_count = 0
        self._unanswered = 0

    # -- run -------------------------------------------------------------------------------------

    def run_queries(
        self,
        requests: Sequence[QueryRequest],
        k: int,
        answers: bool,
        progress: Progress | None = None,
    ) -> list[QueryOutcome]:
        """One outcome per request, in request order, over ``concurrency`` processes that live
        for this call (started on first use, closed at the end)."""
        slots = [_Slot() for _ in range(self.concurrency)]
        self._slots = queue.SimpleQueue()
        for slot in slots:
            self._slots.put(slot)
        try:
            return super().run_queries(requests, k, answers, progress)
        finally:
            self._slots = None
            for slot in slots:
                slot.drop(kill=False)

    def run_one(self, request: QueryRequest, k: int, answers: bool) -> QueryOutcome:
        """One request line, one reply line, on a process of the pool; never raises."""
        assert self._slots is not None, "run_one outside run_queries"
        slot = self._slots.get()
        try:
            return self._query(slot, request, k, answers)
        finally:
            self._slots.put(slot)

    def _query(self, slot: _Slot, request: QueryRequest, k: int, answers: bool) -> QueryOutcome:
        outcome = QueryOutcome(query_id=request.query_id)
        message = {
            "id": request.query_id,
            "query": request.query,
            "k": k,
            "answer": answers,
            "mode": self.settings.mode,
        }
        # A process that exits with status 0 instead of replying has left (it may serve one
        # request per start): the query is sent once more, to a new process.
        for attempt in (1, 2):
            try:
                process = self._ready(slot)
            except QueryFailure as failure:  # nothing (more) was sent
                return outcome.fail(failure)
            except Exception as exc:  # a bug must still leave a row
                slot.drop()
                return outcome.fail(exception_failure(exc))
            started = time.perf_counter()
            outcome.attempts = attempt
            try:
                reply = self._exchange(slot, process, message, retry_clean_exit=attempt == 1)
                self._read_reply(reply, outcome, k, answers)
            except _Left:
                continue
            except QueryFailure as failure:
                outcome.fail(failure)
            except Exception as exc:
                slot.drop()
                outcome.fail(exception_failure(exc))
            break
        elapsed = (time.perf_counter() - started) * 1000.0
        outcome.retrieval_ms = elapsed
        if outcome.answer is not None:  # one request gave both: the answer took the same time
            outcome.answer_ms = elapsed
        return outcome

    def _exchange(self, slot: _Slot, process: _Process, message: dict, retry_clean_exit: bool) -> dict:
        """Send ``message``, return its reply object; QueryFailure (process dropped) otherwise, or
        _Left when the process exited with status 0 and ``retry_clean_exit``."""
        timeout_s = self.settings.timeout_s
        deadline = time.monotonic() + timeout_s
        try:
            process.send(message, deadline)
            line = process.readline(deadline)
        except _TimedOut:
            slot.drop()
            err = process.stderr_tail()
            text = f"no reply within {timeout_s:g} s; process killed (a new one serves the next query)"
            raise QueryFailure(TIMEOUT, text + (f"; stderr: {err}" if err else ""), timed_out=True) from None
        except _TooLarge:
            slot.drop()
            failure = too_large(self._cap, "the reply line")
            raise QueryFailure(TOO_LARGE, failure.message + "; process restarted") from None
        except _Exited:
            if retry_clean_exit and process.exited_cleanly():
                slot.drop()
                raise _Left from None
            raise self._crashed(slot, process, "while handling this query") from None
        try:
            reply = json.loads(line.decode("utf-8"))
        except UnicodeDecodeError as exc:
            slot.drop()
            raise QueryFailure(
                BAD_JSON, f"reply is not UTF-8 (byte {exc.start}); process restarted"
            ) from None
        except (ValueError, RecursionError) as exc:
            slot.drop()
            reason = (
                f"{exc.msg} at column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else "unreadable"
            )
            preview = " ".join(line.decode("utf-8", "replace").split())[:120]
            raise QueryFailure(
                BAD_JSON,
                f"reply line is not JSON ({reason}): {preview!r}; stdout is for replies only "
                "(log to stderr); process restarted",
            ) from None
        if not isinstance(reply, dict):
            slot.drop()
            raise QueryFailure(
                BAD_RESPONSE, f"reply: expected a JSON object, got {_kind(reply)}; process restarted"
            )
        if reply.get("id") != message["id"]:
            slot.drop()
            got = "no id" if "id" not in reply else f"id {reply.get('id')!r}"
            raise QueryFailure(
                BAD_RESPONSE, f"reply has {got}, expected id {message['id']!r}; process restarted"
            )
        with self._lock:
            self._crashes = 0  # the process works
        return reply

    def _read_reply(self, reply: dict, outcome: QueryOutcome, k: int, answers: bool) -> None:
        error = reply.get("error")
        if error is not None:
            text = error if isinstance(error, str) else json.dumps(error, ensure_ascii=False)
            raise QueryFailure(SYSTEM_ERROR, " ".join(text.split())[:500] or "(empty error)")
        mapping = self.settings.response
        outcome.hits, outcome.warnings = parse_hit_block(reply, k, mapping)
        outcome.scope = parse_scope(reply, mapping)
        if not answers:
            return
        if mapping.answer:
            present = dig(reply, mapping.answer, None)
        elif mapping.answer_fields:  # the answer's fields are mapped from the reply itself
            present = reply
        else:
            present = reply.get("answer")
        if present is None:
            with self._lock:
                self._unanswered += 1
            return
        outcome.answer = parse_answer(reply, mapping)

    # -- processes -------------------------------------------------------------------------------

    def _ready(self, slot: _Slot) -> _Process:
        """The slot's running process, started (and greeted) if needed; QueryFailure when it
        cannot start or the restart budget is spent."""
        process = slot.process
        if process is not None and process.alive():
            return process
        if process is not None:  # exited between queries, after its last reply
            if process.exited_cleanly():
                slot.drop()  # it left; not a crash
            else:
                self._crashed(slot, process, "after its last reply")
        with self._lock:
            if self._crashes > self.settings.max_restarts:
                last = self._last_crash
                assert last is not None
                raise QueryFailure(
                    last.error_class,
                    f"not restarted after {self._crashes} consecutive failed starts or crashes "
                    f"(max_restarts {self.settings.max_restarts}); last: {last.message}",
                )
        slot.process = self._start()
        return slot.process

    def _start(self) -> _Process:
        """A new process that has answered the version line; QueryFailure (counted) otherwise."""
        with self._lock:
            self._starts += 1
        try:
            process = _Process(self._argv, self.settings.cwd, self._cap, self.settings.startup_timeout_s)
        except TimeoutError as exc:
            raise self._count(QueryFailure(TIMEOUT, f"{exc}; process killed", timed_out=True)) from None
        except OSError as exc:
            failure = QueryFailure(EXCEPTION, f"cannot start {self._argv[0]!r}: {exc.strerror or exc}")
            raise self._count(failure) from None
        deadline = time.monotonic() + self.settings.startup_timeout_s
        try:
            process.send({"id": VERSION_ID, "op": "version"}, deadline)
            while True:
                line = process.readline(deadline)
                reply = _json_object(line)
                if reply is not None:
                    break
                self._note_noise(line)
        except _TimedOut:
            process.kill()
            failure = QueryFailure(
                TIMEOUT,
                f"no reply to the version line within startup_timeout_s "
                f"({self.settings.startup_timeout_s:g} s); process killed" + _stderr(process),
                timed_out=True,
            )
            raise self._count(failure) from None
        except _TooLarge:
            process.kill()
            failure = too_large(self._cap, "a stdout line before the version reply")
            raise self._count(QueryFailure(TOO_LARGE, failure.message + "; process killed")) from None
        except _Exited:
            status = process.exit_status()
            process.kill()
            failure = QueryFailure(
                EXIT_CODE, f"{self._argv[0]!r} ended during start-up ({status})" + _stderr(process)
            )
            raise self._count(failure) from None
        if reply.get("id") != VERSION_ID:
            process.kill()
            failure = QueryFailure(
                BAD_RESPONSE,
                f"the first reply must answer {{'id': 'version', 'op': 'version'}}; got "
                f"{json.dumps(reply, ensure_ascii=False)[:120]}",
            )
            raise self._count(failure) from None
        with self._lock:
            if self._version is None:
                if reply.get("error") is not None:
                    self._version = ("error", f"the system replied: {str(reply['error'])[:300]}")
                else:
                    self._version = ("report", {k: v for k, v in reply.items() if k != "id"})
        return process

    def _crashed(self, slot: _Slot, process: _Process, when: str) -> QueryFailure:
        """The process exited: drop it and count a crash; the failure names the exit and stderr."""
        status = process.exit_status()
        err = _stderr(process)
        slot.drop()
        return self._count(
            QueryFailure(EXIT_CODE, f"the process ended {when} ({status})" + (err or "; no stderr"))
        )

    def _count(self, failure: QueryFailure) -> QueryFailure:
        with self._lock:
            self._crashes += 1
            self._last_crash = failure
        return failure

    def _note_noise(self, line: bytes) -> None:
        with self._lock:
            self._noise_count += 1
            if len(self._noise) < _NOISE_KEPT:
                self._noise.append(" ".join(line.decode("utf-8", "replace").split())[:80])

    @property
    def run_warnings(self) -> list[str]:
        """About the run as a whole: start-up noise skipped, answers requested but not given."""
        warnings = []
        if self._noise_count:
            warnings.append(
                f"skipped {self._noise_count} stdout line(s) that were not JSON before the version "
                f"reply (start-up noise): {', '.join(map(repr, self._noise))}"
            )
        if self._unanswered:
            warnings.append(f"answers were requested but {self._unanswered} replies carried no answer")
        return warnings

    # -- info ------------------------------------------------------------------------------------

    def _details(self) -> dict[str, str]:
        s = self.settings
        assert s.argv is not None
        return {
            "protocol": "jsonl",
            "argv": shlex.join(s.argv),
            "timeout_s": f"{s.timeout_s:g}",
            "startup_timeout_s": f"{s.startup_timeout_s:g}",
            "concurrency": str(s.concurrency),
            "max_restarts": str(s.max_restarts),
        }

    def info(self) -> SystemInfo:
        """Kind, mode, the argv and the versions: from ``version_argv`` when set, else from the
        reply to the version line (the run's first start; a process is started for it only if
        none was). A failure is recorded in ``details["version_error"]``, never raised."""
        with self._info_lock:
            if self._info is None:
                s = self.settings
                info = SystemInfo(kind="command", mode=s.mode, details=self._details())
                try:
                    if s.version_argv:
                        info = apply_version_report(info, self._version_report())
                    else:
                        info = self._apply_version_line(info)
                except QueryFailure as failure:
                    info.details["version_error"] = str(failure)
                self._info = info
            return self._info.model_copy(deep=True)

    def _apply_version_line(self, info: SystemInfo) -> SystemInfo:
        with self._lock:
            version, started = self._version, self._starts
        if version is None and not started:  # info() before any run: greet one process
            self._start().close()
            with self._lock:
                version = self._version
        if version is None:
            last = self._last_crash
            raise QueryFailure(EXCEPTION, f"no process answered the version line; {last}")
        kind, value = version
        if kind == "error":
            info.details["version_error"] = value
            return info
        return apply_version_report(info, value)


def _json_object(line: bytes) -> dict | None:
    """``line`` as a JSON object, or None when it is something else (start-up noise)."""
    try:
        value = json.loads(line.decode("utf-8"))
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _stderr(process: _Process) -> str:
    err = process.stderr_tail()
    return f"; stderr: {err}" if err else ""
