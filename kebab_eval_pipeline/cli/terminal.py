"""The CLI's consoles: fitted to the terminal on a terminal, never wrapped anywhere else.

Rich lays output out at 80 columns when it is not writing to a terminal (or at ``$COLUMNS``), so a
piped report, a gate reason or an error line would be broken at column 80 in a CI log or a file.
When the stream is not a terminal the console is as wide as :data:`PIPED_WIDTH` and soft-wraps:
text is written as it is (one line stays one line) and a table takes its natural width.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from rich.console import Console

#: The layout width when not on a terminal: wider than any line we print, so nothing is wrapped
#: (a table is as wide as its content needs; nothing is padded to this width).
PIPED_WIDTH = 100_000


def make_console(stderr: bool = False, file: TextIO | None = None) -> Console:
    """A console on stdout (or stderr, or ``file``): rich's defaults on a terminal (as rich decides
    it, so ``FORCE_COLOR``/``TTY_COMPATIBLE`` are obeyed); otherwise unwrapped, :data:`PIPED_WIDTH`
    wide."""
    console = Console(stderr=stderr, file=file)
    if console.is_terminal:
        return console
    return Console(stderr=stderr, file=file, width=PIPED_WIDTH, soft_wrap=True)


@contextmanager
def direct_console(console: Console) -> Iterator[Console]:
    """A console like ``console`` on a duplicate of its file descriptor, made now.

    While a step runs, Dagster points descriptors 1 and 2 at the step's log files and a ``tail -F``
    copies them back to the terminal about once a second (and may drop the last second when the
    step ends). Output through the duplicate goes straight to the original terminal or pipe: it
    moves as it is written and stays out of the step logs. A console without a descriptor (a test's
    captured stream) is yielded as it is."""
    try:
        fd = os.dup(console.file.fileno())
    except (AttributeError, OSError, ValueError):
        yield console
        return
    encoding = getattr(console.file, "encoding", None) or "utf-8"
    with open(fd, "w", encoding=encoding, errors="replace", buffering=1) as stream:
        yield make_console(file=stream)
