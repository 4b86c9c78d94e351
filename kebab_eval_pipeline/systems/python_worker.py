"""A python system in a supervised worker process of its own (``isolation: process``, the default).

A python system runs the user's code — and the native libraries it loads — inside a process. In
kebab-eval's own process, a system that calls ``os._exit``, crashes in a C extension or is killed by
the OOM killer ends the run with it: no rows, nothing stored, and the exit code the system chose
(``os._exit(0)`` left a run "green"). So by default the system lives in a worker process:

* **One worker per process and configuration**, started when the system is built (the CLI's checks,
  then every step of the run in that process, share it — never one per query). It is a new Python
  interpreter (``sys.executable``; not a fork: the parent has threads), given the parent's
  ``sys.path``; it imports ``system.callable`` and calls the factory once, then serves calls. A
  problem building it is the same FieldValueError building in-process raises (exit 2 naming
  ``system.callable``).
* **Calls go over its stdin and stdout** as length-prefixed pickles: ``search`` / ``ask`` (as plain
  data, :mod:`.python_calls`), ``versions()``, ``catalogue()``. The worker runs each in a thread of
  its own within ``timeout_s``, ``concurrency`` at a time, exactly as in-process. What the system
  prints goes to stderr. What it returns crosses the pipe as plain data: a value pickle cannot
  carry (a class defined inside a function) is a ``bad_response`` row saying so, and the parent
  loads nothing but builtin types from the worker, so no user module is ever imported here.
* **Supervised**: when the worker ends — any exit code, a signal, the OOM killer's SIGKILL — every
  query in flight gets a ``process_ended`` row naming how it ended and the queries it was running
  (``the python system's process ended: signal SIGSEGV during query q7``). The worker is started
  again for the queries that remain, at most :data:`MAX_RESTARTS` times per batch of queries (a
  run's step; a repeat); past that, the rest are ``process_ended`` rows without a call. Any
  ``process_ended`` row fails ``system_health`` whatever the error rate (``FATAL_CLASSES``), and
  the run's other results are stored as usual. A worker that gives no answer within ``timeout_s``
  plus :data:`UNRESPONSIVE_GRACE_S` (a native call holding the interpreter) is ended by the parent
  the same way.
* **Ctrl-C**: the terminal sends SIGINT to the whole process group; the worker ignores it and the
  parent decides (it ends the run with exit 130). The worker ends, quietly, when its stdin closes —
  the parent ended or closed it — whatever its threads are doing.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import itertools
import json
import os
import pickle
import signal
import struct
import subprocess
import sys
import threading
import weakref
from typing import Any, BinaryIO

import yaml

from kebab_eval_pipeline.foundation import cancellation
from kebab_eval_pipeline.foundation.errors import FieldValueError
from kebab_eval_pipeline.foundation.net.secrets import mask_text
from kebab_eval_pipeline.systems.kinds.python import PythonSystemSettings
from kebab_eval_pipeline.systems.outcome import BAD_RESPONSE, PROCESS_ENDED, TIMEOUT, QueryFailure

#: Restarts of an ended worker per batch of queries (a run's step, a repeat): a system that crashes
#: on one query still answers the others; one that crashes on every query fails fast.
MAX_RESTARTS = 2
#: How long past ``timeout_s`` the parent waits for the worker's own answer (it reports a late call
#: itself) before taking the worker as stuck (a native call holding the interpreter) and ending it.
UNRESPONSIVE_GRACE_S = 10.0
_HEADER = struct.Struct(">Q")
_PROTOCOL = pickle.HIGHEST_PROTOCOL
# The worker's entry: the parent's sys.path first (argv[1]), then this module's serve().
_BOOT = (
    "import json, sys\n"
    "sys.path[:0] = [p for p in json.loads(sys.argv[1]) if p not in sys.path]\n"
    "from kebab_eval_pipeline.systems.python_worker import serve\n"
    "serve()\n"
)


# -- the frames both sides exchange -------------------------------------------------------------


def _write(stream: BinaryIO, message: Any) -> None:
    data = pickle.dumps(message, protocol=_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def _read_exact(stream: BinaryIO, n: int) -> bytes | None:
    chunks, left = [], n
    while left:
        chunk = stream.read(left)
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


class _PlainUnpickler(pickle.Unpickler):
    """Loads only what pickle builds without a class (dicts, lists, str, numbers, …): the parent
    never imports a class named by the worker, so no user code runs here."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"a value of type {module}.{name}")


def _loads_plain(data: bytes) -> Any:
    return _PlainUnpickler(io.BytesIO(data)).load()


def _read(stream: BinaryIO) -> Any:
    """The next message; None at the end of the stream (the other side ended)."""
    header = _read_exact(stream, _HEADER.size)
    if header is None:
        return None
    data = _read_exact(stream, _HEADER.unpack(header)[0])
    return None if data is None else _loads_plain(data)


# -- the worker process --------------------------------------------------------------------------


def settings_payload(settings: PythonSystemSettings) -> dict[str, Any]:
    """The settings as another process reads them (:func:`settings_from_payload`): ``args`` travel
    as YAML — the form they were written in — so a value YAML gave (a date) reaches the factory as
    the same type it gets in-process; the rest as JSON. yaml.YAMLError for ``args`` given in Python
    that YAML cannot hold."""
    return {
        "settings": settings.model_dump(mode="json", exclude={"args"}, exclude_unset=True),
        "args": yaml.safe_dump(dict(settings.args), sort_keys=False, allow_unicode=True),
    }


def settings_from_payload(data: dict[str, Any]) -> PythonSystemSettings:
    """The settings :func:`settings_payload` sent."""
    return PythonSystemSettings.model_validate({**data["settings"], "args": yaml.safe_load(data["args"])})


def _failure(exc: BaseException) -> tuple:
    from kebab_eval_pipeline.systems.per_query import exception_failure

    failure = exc if isinstance(exc, QueryFailure) else exception_failure(exc)
    return ("fail", failure.error_class, failure.message, failure.timed_out)


def serve() -> None:
    """The worker's work (run by :data:`_BOOT`, never in the parent): read the settings, build the
    system, answer ``ready`` (or ``load_error``), then serve calls until stdin closes, and end."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the parent decides
    requests = os.fdopen(os.dup(0), "rb")
    replies = os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)  # the system reading stdin must not eat the calls
    os.dup2(2, 1)  # the system's own prints (Python's or a C library's) go to stderr
    sys.stdout = sys.stderr
    write_lock = threading.Lock()

    def reply(message: tuple) -> None:
        try:
            with write_lock:
                _write(replies, message)
        except (OSError, ValueError):  # the parent is gone
            os._exit(0)

    first = _read(requests)
    if first is None:
        os._exit(0)
    from kebab_eval_pipeline.systems.python_calls import LocalCalls

    settings = settings_from_payload(first)
    try:
        calls = LocalCalls(settings)
    except FieldValueError as exc:  # what load_system checks: import, factory, methods
        reply(("load_error", exc.field, str(exc)))
        os._exit(0)
    reply(("ready", sorted(calls.has), calls.packages()))

    def handle(call_id: int, op: str, args: tuple) -> None:
        what = args[0] if op == "query" else f"{op}()"
        try:
            value = getattr(calls, op)(*args)
        except BaseException as exc:  # the user's code: SystemExit too is this call's failure
            reply((call_id, *_failure(exc)))
            return
        try:
            data = pickle.dumps(value, protocol=_PROTOCOL)
        except Exception as exc:  # a class pickle cannot find by name (defined in a function), …
            text = str(exc).strip().splitlines()
            reason = f"{type(exc).__name__}: {text[0][:300]}" if text else type(exc).__name__
            message = (
                f"{what} returned what cannot be sent from the python system's process ({reason}); "
                "return plain data — dicts, lists, str, numbers — or objects it can be made of"
            )
            reply((call_id, "fail", BAD_RESPONSE, message, False))
            return
        reply((call_id, "ok", data))

    while True:
        message = _read(requests)
        if message is None or message == "close":
            break
        call_id, op, args = message
        threading.Thread(target=handle, args=(call_id, op, args), daemon=True).start()
    # The parent closed the pipe (it is done, or gone): end now, whatever the system's threads do.
    sys.stderr.flush()
    os._exit(0)


# -- the parent's side ---------------------------------------------------------------------------


def ending(code: int) -> str:
    """How a process ended, from its return code: ``exit code 0``, ``signal SIGSEGV``."""
    if code >= 0:
        return f"exit code {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"{-code}"
    hint = " (the OOM killer, or another process, killed it)" if -code == signal.SIGKILL else ""
    return f"signal {name}{hint}"


def _during(query_ids: list[str]) -> str:
    if not query_ids:
        return "between queries"
    if len(query_ids) == 1:
        return f"during query {query_ids[0]}"
    return f"during queries {', '.join(query_ids)} (running at once)"


class _Call:
    __slots__ = ("done", "query_id", "result")

    def __init__(self, query_id: str) -> None:
        self.done = threading.Event()
        self.query_id = query_id
        self.result: tuple | None = None


class WorkerProcess:
    """One worker process and the calls in flight to it. Raises FieldValueError when the system
    cannot be built there (or the worker ends while building it)."""

    def __init__(self, settings: PythonSystemSettings) -> None:
        self.settings = settings
        self.ended: str | None = None  # how it ended, once it has
        self._why: str | None = None  # set when the parent ends it itself
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()  # the frames of two calls must not interleave
        self._calls: dict[int, _Call] = {}
        self._ids = itertools.count(1)
        try:
            payload = settings_payload(settings)
        except yaml.YAMLError as exc:  # args given in Python (not from a file) that YAML cannot hold
            raise FieldValueError(
                "system.args", f"{settings.callable}: cannot be passed to its process: {exc}"
            ) from None
        path = json.dumps([p for p in sys.path if isinstance(p, str)])
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _BOOT, path],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        _LIVE.add(self)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        threading.Thread(
            target=_forward_stderr,
            args=(self.proc.stderr,),
            name="kebab-eval-python-worker-stderr",
            daemon=True,
        ).start()
        self._requests, self._replies = self.proc.stdin, self.proc.stdout
        try:
            _write(self._requests, payload)
            first = _read(self._replies)
        except OSError:
            first = None
        if first is None:
            code = self.proc.wait()
            raise FieldValueError(
                "system.callable",
                f"{settings.callable}: the python system's process ended while building the system: "
                f"{ending(code)}",
            )
        if first[0] == "load_error":
            self.close()
            raise FieldValueError(first[1], first[2])
        _, has, packages = first
        self.has = frozenset(has)
        self.packages = dict(packages)
        threading.Thread(target=self._read_replies, name="kebab-eval-python-worker", daemon=True).start()

    def _read_replies(self) -> None:
        while True:
            try:
                message = _read(self._replies)
            except (OSError, pickle.UnpicklingError, EOFError, ValueError):
                message = None
            if message is None:
                break
            call_id, *result = message
            with self._lock:
                call = self._calls.pop(call_id, None)
            if call is not None:
                call.result = tuple(result)
                call.done.set()
        code = self.proc.wait()
        with self._lock:
            self.ended = self._why or ending(code)
            in_flight = sorted(self._calls.items())
            self._calls.clear()
        during = _during([c.query_id for _, c in in_flight])
        for _, call in in_flight:
            call.result = ("ended", f"the python system's process ended: {self.ended} {during}")
            call.done.set()

    def call(self, op: str, args: tuple, query_id: str, timeout_s: float | None) -> Any:
        """``op(*args)`` in the worker: its plain-data result; QueryFailure for a failed call, a late
        one, or the worker ending (``process_ended``)."""
        call = _Call(query_id)
        with self._lock:
            if self.ended is not None:
                raise QueryFailure(PROCESS_ENDED, f"the python system's process ended: {self.ended}")
            call_id = next(self._ids)
            self._calls[call_id] = call
        try:
            with self._send_lock:
                _write(self._requests, (call_id, op, args))
        except (OSError, ValueError):  # it is ending: the reader reports how
            pass
        limit = None if timeout_s is None else timeout_s + UNRESPONSIVE_GRACE_S
        if not call.done.wait(limit):
            with self._lock:
                self._calls.pop(call_id, None)  # this call's row is the timeout below
            self.stop(
                f"kebab-eval ended it, stuck with no answer for {query_id} within {limit:g} s "
                f"(timeout_s {timeout_s:g} + {UNRESPONSIVE_GRACE_S:g}),"
            )
            raise QueryFailure(
                TIMEOUT,
                f"the python system's process gave no answer within {limit:g} s and was ended",
                timed_out=True,
            )
        assert call.result is not None
        kind, *rest = call.result
        if kind == "ok":
            try:
                return _loads_plain(rest[0])
            except Exception as exc:
                what = args[0] if op == "query" else f"{op}()"
                raise QueryFailure(
                    BAD_RESPONSE,
                    f"{what} returned {exc}, which kebab-eval does not load from the python system's "
                    "process; return plain data — dicts, lists, str, numbers",
                ) from None
        if kind == "ended":
            raise QueryFailure(PROCESS_ENDED, rest[0])
        error_class, message, timed_out = rest
        raise QueryFailure(error_class, message, timed_out=timed_out)

    def stop(self, why: str) -> None:
        """End the worker now (it is stuck): taken as ended at once, so the next call starts a new
        one; the calls in flight get ``process_ended`` once it is gone."""
        with self._lock:
            if self.ended is None:
                self.ended = self._why = why
        with contextlib.suppress(OSError):
            self.proc.kill()

    def close(self) -> None:
        """Let the worker end: close its stdin (it ends at once), reap it."""
        with contextlib.suppress(OSError):
            self._requests.close()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


_LIVE: weakref.WeakSet[WorkerProcess] = weakref.WeakSet()


def _forward_stderr(stream: BinaryIO | None) -> None:
    """What the system prints, passed on to this process's stderr line by line — through
    :func:`mask_text`, as everything the tool prints is: a system that prints its credential must
    not get it past the masking by writing to an inherited descriptor."""
    if stream is None:
        return
    for line in iter(stream.readline, b""):
        with contextlib.suppress(Exception):  # a closed or replaced stderr must not end the reader
            sys.stderr.write(mask_text(line.decode("utf-8", "replace")))
            sys.stderr.flush()
    stream.close()


def _kill_live() -> None:
    """Ctrl-C (:mod:`kebab_eval_pipeline.foundation.cancellation`): end every worker now, so calls in flight
    end with it instead of running on past the run (a cancellation hook: never raises)."""
    for worker in list(_LIVE):  # no lock: a hook may run in a signal handler on any thread's behalf
        if worker.ended is None:
            worker.ended = worker._why = "kebab-eval ended it: the run was interrupted (Ctrl-C)"
        with contextlib.suppress(OSError):
            worker.proc.kill()


cancellation.register(_kill_live)


@atexit.register
def close_workers() -> None:
    """End every worker this process started, and reap them: a process that ends with ``os._exit``
    (the CLI does) calls this first, so no worker outlives it even for a moment (each would end
    anyway once this process's end closes its stdin)."""
    for worker in list(_LIVE):
        worker.close()


class WorkerCalls:
    """:class:`~.python_calls.PythonCalls` answered by a supervised worker process (see the module
    docstring): restarted when it ended, at most :data:`MAX_RESTARTS` times per batch."""

    def __init__(self, settings: PythonSystemSettings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._worker = WorkerProcess(settings)  # FieldValueError: not built (exit 2 at config time)
        self.has = self._worker.has
        self._restarts_left = MAX_RESTARTS
        self._endings = 0  # workers that ended in this batch

    def packages(self) -> dict[str, str]:
        return dict(self._worker.packages)

    def begin(self) -> None:
        with self._lock:
            self._restarts_left = MAX_RESTARTS
            self._endings = 0

    def _live(self) -> WorkerProcess:
        """The running worker, started again when it ended and the batch's budget allows."""
        with self._lock:
            worker = self._worker
            if worker.ended is None:
                return worker
            if self._restarts_left <= 0:
                raise QueryFailure(
                    PROCESS_ENDED,
                    f"not run: the python system's process ended {self._endings + 1} time(s) in this "
                    f"batch (last: {worker.ended}); it is restarted at most {MAX_RESTARTS} times",
                )
            self._endings += 1
            self._restarts_left -= 1
            try:
                self._worker = WorkerProcess(self.settings)
            except FieldValueError as exc:
                self._restarts_left = 0
                raise QueryFailure(
                    PROCESS_ENDED, f"not run: the python system's process could not be started again: {exc}"
                ) from None
            return self._worker

    def query(self, method: str, query: str, k: int, query_id: str) -> Any:
        cancellation.check()  # Ctrl-C: no new call, and no worker started again
        return self._live().call("query", (method, query, k, query_id), query_id, self.settings.timeout_s)

    def versions(self) -> Any:
        return self._live().call("versions", (), "versions()", self.settings.timeout_s)

    def catalogue(self) -> Any:
        return self._live().call("catalogue", (), "catalogue()", None)
