"""Calling in-process code with a time limit: each call in a thread of its own, abandoned when late.

A Python thread cannot be stopped from outside. A call that passes ``timeout_s`` is therefore left
running in its (daemon) thread — it cannot keep the process alive at exit — and its result, when it
finally comes, is discarded; the caller gets a ``timeout`` failure at once and moves on.

Abandoned threads are bounded: a :class:`CallLimiter` holds one slot per running thread, released
when the thread *ends* (not when the caller stops waiting). With ``concurrency`` callers and
``spare`` extra slots, at most ``concurrency + spare`` threads exist; when every slot is held by
late calls, the next call waits up to ``timeout_s`` for one to end and otherwise fails as
``timeout`` without being made (the message says why).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from kebab_eval_pipeline.systems.outcome import TIMEOUT, QueryFailure
from kebab_eval_pipeline.systems.per_query import exception_failure


class CallLimiter:
    """Runs calls in threads, each within a time limit (see the module docstring)."""

    def __init__(self, concurrency: int, spare: int | None = None) -> None:
        self.slots = concurrency + (concurrency if spare is None else spare)
        self._free = threading.BoundedSemaphore(self.slots)
        self._lock = threading.Lock()
        self._late = 0  # calls past their time limit that are still running

    @property
    def late(self) -> int:
        """Abandoned calls still running."""
        with self._lock:
            return self._late

    def call(self, fn: Callable[..., Any], timeout_s: float, *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` in a new thread; its result, or its exception re-raised.

        Raises QueryFailure(``timeout``, timed_out) when it has not returned within ``timeout_s``
        (it goes on running; see the module docstring), or when no thread slot freed up within
        ``timeout_s``."""
        if not self._free.acquire(timeout=timeout_s):
            raise QueryFailure(
                TIMEOUT,
                f"not called: {self.late} earlier call(s) still running past the time limit hold "
                f"every one of the {self.slots} call threads",
                timed_out=True,
            )
        done = threading.Event()
        box: dict[str, Any] = {}
        abandoned = False
        lock = self._lock

        def run() -> None:
            nonlocal abandoned
            try:
                box["value"] = fn(*args, **kwargs)
            except BaseException as exc:  # SystemExit in a thread ends only the thread: report it
                box["error"] = exc
            finally:
                with lock:
                    if abandoned:
                        self._late -= 1
                    done.set()
                self._free.release()

        thread = threading.Thread(target=run, name="kebab-eval-python-call", daemon=True)
        try:
            thread.start()
        except BaseException:
            self._free.release()
            raise
        if not done.wait(timeout_s):
            with lock:
                if not done.is_set():  # decided under the lock: the thread cannot finish in between
                    abandoned = True
                    self._late += 1
            if abandoned:
                raise QueryFailure(
                    TIMEOUT,
                    f"no result within {timeout_s:g} s (the call goes on in its thread; "
                    "its result will be discarded)",
                    timed_out=True,
                )
        if "error" in box:
            error = box.pop("error")
            if not isinstance(error, Exception):  # SystemExit, KeyboardInterrupt: this query's failure
                raise exception_failure(error) from None
            raise error
        return box.get("value")
