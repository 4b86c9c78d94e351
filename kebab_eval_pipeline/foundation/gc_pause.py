"""Pausing Python's cyclic garbage collector while bulk data is built.

Reading a golden set or a replayed trace, and turning a run's hits into columns, create millions of
small containers and no reference cycles; the collector's full collections rescan the growing heap
each time, which at 100k queries cost more than the work itself. Reference counting still frees
everything as usual while the collector is paused.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic collector off inside the block (restored as it was, also on an exception)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
