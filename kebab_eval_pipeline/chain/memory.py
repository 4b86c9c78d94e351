"""Giving memory back between the steps of a run that runs in one process.

``kebab-eval run`` materializes the whole chain in one process, so what one step leaves behind is
still resident when the next, heavier one starts. The objects themselves are gone (each step reads
its inputs from the run store, and the run's parsed inputs are let go by reference counting once
the golden_set step has stored the golden set and the retrieval is collected: nothing caches them
per process), but the allocators keep their pages: glibc keeps freed heap pages mapped for reuse,
and so does Arrow's allocator (mimalloc or jemalloc), so the process's RSS stays near its
high-water mark. :func:`release_free_memory` hands the free pages back before the run's largest
step (``malloc_trim(0)``, glibc only; Arrow's ``release_unused``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from functools import cache


@cache
def _libc():
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc if hasattr(libc, "malloc_trim") else None  # musl has none
    except OSError:
        return None


def trim_heap() -> bool:
    """Return the C heap's free pages to the operating system (glibc ``malloc_trim(0)``); False
    where the C library has no such call."""
    libc = _libc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True


def release_free_memory() -> None:
    """Hand the memory earlier steps freed back to the operating system before a heavy step: the C
    heap's free pages (:func:`trim_heap`) and the free memory Arrow's allocator keeps for reuse
    (at a million queries, hundreds of MiB that would otherwise add to the scoring step's peak)."""
    import pyarrow as pa

    trim_heap()
    pa.default_memory_pool().release_unused()
