"""Cancelling the work in progress (Ctrl-C): one process-wide request, and what answers it.

The CLI requests cancellation when SIGINT arrives (``cli/interrupt.py``); everything that could keep
a run going answers it:

- whatever hands out queries (the per-query pool, the runner's batches) calls :func:`check` before
  each one and stops with :class:`~kebab_eval_pipeline.foundation.errors.Interrupted`;
- whatever has calls in flight registers a hook with :func:`on_cancel` that ends them at once (the
  command adapter kills its processes' groups; the http adapter cancels its requests). A hook runs
  in the thread that requests cancellation — the CLI's signal handler, in the main thread, at any
  moment — so it must be quick, take no lock the interrupted code may hold, and never raise
  (an exception from one is dropped);
- the artifact store publishes nothing once cancellation is requested, so an interrupted run never
  stores a result after the moment of the interrupt.

Nothing requests cancellation outside the CLI (a Dagster run, a library call): :func:`requested`
is then always False, and all of this is inert. In-process Python calls cannot be stopped from
outside; they are only no longer made.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

from kebab_eval_pipeline.foundation.errors import Interrupted

_requested = threading.Event()
_hooks: dict[int, Callable[[], None]] = {}
_next = iter(range(1, 1 << 62))


def requested() -> bool:
    """Whether cancellation was requested (and not :func:`reset`)."""
    return _requested.is_set()


def check(what: str = "the run") -> None:
    """Raise :class:`Interrupted` when cancellation was requested."""
    if _requested.is_set():
        raise Interrupted(f"{what} was interrupted")


def request() -> None:
    """Request cancellation: set the flag, then run every registered hook once (their order is
    registration order; an exception from a hook is dropped: the others still run)."""
    if _requested.is_set():
        return
    _requested.set()
    for hook in list(_hooks.values()):  # a copy: a hook's owner may unregister meanwhile
        with contextlib.suppress(Exception):
            hook()


def register(hook: Callable[[], None]) -> None:
    """Run ``hook`` whenever cancellation is requested, for the life of the process (a module's
    own registry of calls in flight, such as the command adapter's processes)."""
    _hooks[next(_next)] = hook


@contextlib.contextmanager
def on_cancel(hook: Callable[[], None]) -> Iterator[None]:
    """Run ``hook`` if cancellation is requested while the block runs (at once when it already was)."""
    key = next(_next)
    _hooks[key] = hook
    try:
        if _requested.is_set():
            with contextlib.suppress(Exception):
                hook()
        yield
    finally:
        _hooks.pop(key, None)


def reset() -> None:
    """Forget a request (tests; a process that goes on after an interrupted piece of work)."""
    _requested.clear()
