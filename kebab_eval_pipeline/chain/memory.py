"""Giving memory back between the steps of a run that runs in one process.

``kebab-eval run`` materializes the whole chain in one process, so what one step leaves behind is
still resident when the next, heavier one starts. The objects themselves are gone (each step reads
its inputs from the run store, and the run's parsed inputs are let go by reference counting once
the golden_set step has stored the golden set and the retrieval is collected: nothing caches them
per process), but the allocators keep their pages: glibc keeps freed heap pages mapped for reuse,
and so does Arrow's allocator (mimalloc or jemalloc), so the process's RSS stays near its
high-water mark. :func:`release_free_memory` hands the free pages back before the run's largest
step (``malloc_trim(0)``, glibc only; Arrow's ``release_unused``) and from then on has glibc give
every large block back as it is freed (:func:`return_large_blocks`).
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


#: glibc ``mallopt`` parameter number of ``M_MMAP_THRESHOLD`` (malloc.h).
_M_MMAP_THRESHOLD = -3
#: Blocks from this size up are mapped on their own and unmapped when freed.
LARGE_BLOCK = 1 << 20


def return_large_blocks() -> bool:
    """Have the C heap map every block of ``LARGE_BLOCK`` (1 MiB) or more on its own, so freeing
    it returns its pages to the operating system at once; False where the C library is not glibc.

    glibc starts out mapping blocks from 128 KiB up this way, but raises that threshold to the
    size of each mapped block freed, up to 32 MiB: after the first few freed arrays, the per-query
    NumPy arrays of a million-query run (8 MB each) and most temporaries of the metric kernels
    come from the heap, whose freed pages stay resident until a trim. The ``query_scores`` step of
    a 1M queries × 10 hits run, replayed alone, peaked at 2,847 MiB with the threshold fixed at
    1 MiB against 3,540 MiB without, at the same speed (the whole run:
    ``benchmarks/bench_million.py``). A fixed threshold also stops that adjustment."""
    libc = _libc()
    if libc is None or not hasattr(libc, "mallopt"):
        return False
    return bool(libc.mallopt(_M_MMAP_THRESHOLD, LARGE_BLOCK))


def release_free_memory() -> None:
    """Hand the memory earlier steps freed back to the operating system before a heavy step: the C
    heap's free pages (:func:`trim_heap`) and the free memory Arrow's allocator keeps for reuse
    (at a million queries, hundreds of MiB that would otherwise add to the scoring step's peak);
    from then on, large blocks go back as they are freed (:func:`return_large_blocks`)."""
    import pyarrow as pa

    return_large_blocks()
    trim_heap()
    pa.default_memory_pool().release_unused()
