"""Ctrl-C in the CLI, at any moment: exit 130 (the shell's code for SIGINT) with one line saying
what was (not) stored, never a traceback.

SIGINT comes from a terminal to the whole process group, or from ``kill -INT`` to the pid. The
handler installed first thing (:func:`install`, by the console script before any heavy import)
requests cancellation (:mod:`kebab_eval_pipeline.foundation.cancellation`: in-flight system
calls end, no query is handed out, nothing more is published) and then, by the mode the command
is in:

- ``exit`` (the default: start-up, imports, config loading, commands that only read or write
  atomically): one line on stderr and the process ends at once — nothing is half done that a
  later reader could take for finished (every file the tool writes is published atomically);
- ``cancel``: nothing more — :func:`run_in_thread` is waiting on a run and settles it itself: the
  run's thread gets :data:`GRACE_S` to record its failure, then the driver says what was stored
  (a second Ctrl-C changes nothing meanwhile).

``golden record`` puts Python's own handler back: its session ends itself on KeyboardInterrupt
(the entry being typed dropped, its summary printed).

A process started with SIGINT ignored (``nohup``, a parent that ignores it) keeps ignoring it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kebab_eval_pipeline.foundation import cancellation
from kebab_eval_pipeline.foundation.errors import ExitCode

EXIT_CODE = ExitCode.INTERRUPTED
EXIT, CANCEL = "exit", "cancel"
#: How long an interrupted run's thread gets to end (its failure recorded in the Dagster instance,
#: its in-flight calls cancelled) before the CLI ends without it: the CLI exits within about this
#: long after Ctrl-C (the test allows GRACE_S + 1.5 s on a loaded machine).
GRACE_S = 1.5
#: What Ctrl-C says in a command that has not said more (see :func:`reset`).
STOPPED = "the command stopped; nothing was left half-written"

_state = {"mode": EXIT, "note": "before the command started: nothing was run or stored"}


def say(message: str) -> None:
    """``message`` as one line on stderr, written straight to the file descriptor: safe inside a
    signal handler (no lock a print in progress may hold) and never raising."""
    with contextlib.suppress(OSError):
        os.write(2, f"interrupted (Ctrl-C): {message}\n".encode("utf-8", "replace"))


def _handler(signum: int, frame: Any) -> None:
    cancellation.request()
    if _state["mode"] == EXIT:
        say(_state["note"])
        os._exit(EXIT_CODE)
    # CANCEL: run_in_thread sees the request and settles the run


def install() -> None:
    """Take over SIGINT (unless it is ignored, or this is not the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        return
    signal.signal(signal.SIGINT, _handler)


def reset() -> None:
    """A command begins (``main``): ``exit`` mode, saying the command stopped. Until a command says
    more (``run``: nothing of the run was stored), what is true of every command is said: the files
    the tool writes are published whole or not at all."""
    _state.update(mode=EXIT, note=STOPPED)


def set_note(note: str) -> None:
    """What the ``exit`` line says from now on (``"nothing was stored"``)."""
    _state["note"] = note


@dataclass
class Ran:
    """How :func:`run_in_thread` ended: ``value`` or ``error`` of the work when it finished;
    ``interrupted`` when cancellation was requested meanwhile — ``before_end`` True when the work
    was still running then (else Ctrl-C came as it ended: it was not cut short); ``finished``
    False when the work was still running after the grace period (abandoned: the process is
    about to end)."""

    value: Any = None
    error: BaseException | None = None
    interrupted: bool = False
    before_end: bool = False
    finished: bool = True


def run_in_thread(work: Callable[[], Any], grace_s: float = GRACE_S) -> Ran:
    """Run ``work()`` in a thread of its own while this (main) thread waits for it or for Ctrl-C.

    The thread blocks SIGINT, and so does every process it starts (a blocked signal mask is
    inherited): Dagster's compute-log ``tail`` and its orphan watcher — which printed
    ``KeyboardInterrupt`` tracebacks of their own when the terminal's Ctrl-C reached them — and
    the systems' processes (which unblock it again before running the system's command). SIGINT
    reaches this thread only, and running off the main thread keeps Dagster's own interrupt
    handling (which turns a signal into a flag nobody reads in an in-process run) out of the way.

    On Ctrl-C (the handler in ``cancel`` mode, or KeyboardInterrupt where no handler of ours is
    installed) cancellation is requested and the work gets ``grace_s`` to end. When it has not,
    stdout and stderr are given back to the terminal (Dagster points them at its compute-log files
    while a step runs) and it is abandoned (a daemon thread)."""
    ran = Ran()

    def target() -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            ran.value = work()
        except BaseException as exc:  # handed to the caller, raised there
            ran.error = exc

    saved = (os.dup(1), os.dup(2))
    before = _state["mode"]
    _state["mode"] = CANCEL
    try:
        thread = threading.Thread(target=target, name="kebab-eval-run", daemon=True)
        thread.start()
        while thread.is_alive() and not cancellation.requested():
            try:
                thread.join(0.1)  # short waits: the handler runs between them
            except KeyboardInterrupt:  # no handler of ours (SIGINT ignored at start, a test)
                cancellation.request()
        if cancellation.requested():
            ran.interrupted, ran.before_end = True, thread.is_alive()
            with contextlib.suppress(KeyboardInterrupt):  # a second Ctrl-C: still settle
                thread.join(grace_s)
            if thread.is_alive():
                ran.finished = False
                os.dup2(saved[0], 1)
                os.dup2(saved[1], 2)
        return ran
    finally:
        for fd in saved:
            os.close(fd)
        if not ran.interrupted:  # interrupted: Ctrl-C again changes nothing until the line is said
            _state["mode"] = before
