"""Files parsed once per process while they are unchanged, for readers that come back to them.

A run no longer needs this: it parses its golden set and builds its system once (its run context,
the CLI's hand-over) and lets both go when the chain is done with them. What still asks for the same
file again and again is a long-lived process: a sensor in the daemon reads a replayed system's
versions at every tick (a 200,000-query trace: 2.7 s parsed, nothing while kept), and a code
server's runs share a reference index while its files are unchanged (``systems/kinds/reference.py``
uses :func:`fingerprint`). A :class:`ReadOnce` cache keeps the last parse of each input with the
files' :func:`fingerprint`, and parses again as soon as a fingerprint differs.

Why a fingerprint, not a content hash: hashing means reading every byte again on each call, which
is what the cache is there to avoid; the stat fields below change on any write (the inode change
time, ctime, is set by the kernel on every write and cannot be set back by a program). What stat
cannot see is a rewrite to the same size within one tick of the file system's clock (a few
milliseconds on Linux, 2 s on FAT): so, as git does with "racily clean" index entries, a file
modified less than :data:`RACY_NS` before it was parsed is not kept — it is parsed again on every
call until it has been left alone for that long (a file written just before a run costs a second
parse, never a stale one). The stored hash of what was read (``sha256`` in the run's metadata)
still names the exact content a run used.
"""

from __future__ import annotations

import stat
import time
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path
from typing import Any

Fingerprint = tuple[int, int, int, int, int]
#: A file changed less than this long before it was parsed may change again unseen within the same
#: clock tick: such a parse is not kept.
RACY_NS = 3_000_000_000


def fingerprint(path: Path) -> Fingerprint | None:
    """Device, inode, size, modification and change time (ns) of a regular file; None for anything
    else (missing, a folder, a device or FIFO: never cached, the reader reports it)."""
    try:
        st = path.stat()
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class ReadOnce:
    """The last ``size`` parses, each kept with the fingerprints of the files it read.

    ``loads`` counts the parses actually made (what the read-once promise is tested by). A parse
    that raises is not kept, so a bad file reports its error on every call; neither is the parse of a
    file written to while it was parsed, or less than :data:`RACY_NS` before.
    """

    def __init__(self, size: int = 2) -> None:
        self.size = size
        self.loads = 0
        self._entries: dict[Hashable, tuple[tuple, Any]] = {}

    def get(self, key: Hashable, files: Sequence[Path], load: Callable[[], Any]) -> Any:
        """``load()``'s value for ``key``, parsed again only when a file of ``files`` changed."""
        before = tuple(fingerprint(f) for f in files)
        cached = self._entries.get(key)
        if cached is not None and cached[0] == before and None not in before:
            return cached[1]
        self.loads += 1
        started = time.time_ns()
        value = load()
        self._entries.pop(key, None)
        settled = all(f is not None and f[3] < started - RACY_NS for f in before)  # mtime
        if settled and tuple(fingerprint(f) for f in files) == before:
            while len(self._entries) >= self.size:
                self._entries.pop(next(iter(self._entries)))  # the oldest
            self._entries[key] = (before, value)
        return value

    def clear(self) -> None:
        self._entries.clear()
