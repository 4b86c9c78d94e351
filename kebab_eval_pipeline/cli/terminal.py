"""The CLI's consoles: fitted to the terminal on a terminal, never wrapped anywhere else.

Rich lays output out at 80 columns when it is not writing to a terminal (or at ``$COLUMNS``), so a
piped report, a gate reason or an error line would be broken at column 80 in a CI log or a file.
When the stream is not a terminal the console is as wide as :data:`PIPED_WIDTH` and soft-wraps:
text is written as it is (one line stays one line) and a table takes its natural width.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from rich.console import Console

from kebab_eval_pipeline.foundation.net.secrets import mask_text

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


class MaskedStream:
    """A text stream that writes to ``stream`` with every secret of the run configs this process
    loaded masked (:func:`~kebab_eval_pipeline.foundation.net.secrets.mask_text`): the last-line pass over
    what the CLI prints, whoever prints it (rich consoles, ``print``, a library writing to
    ``sys.stderr``). Everything else — ``fileno``, ``isatty``, ``encoding`` — is the stream's."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(mask_text(text))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def mask_standard_streams() -> None:
    """Put :class:`MaskedStream` in front of ``sys.stdout`` and ``sys.stderr`` (once)."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, MaskedStream):
            setattr(sys, name, MaskedStream(stream))


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
        yield make_console(file=MaskedStream(stream))  # type: ignore[arg-type]
