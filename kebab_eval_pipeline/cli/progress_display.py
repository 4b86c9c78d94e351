"""How a run's progress is shown: a live line on a terminal, periodic plain lines elsewhere (CI logs).

The steps report through :mod:`kebab_eval_pipeline.foundation.progress` (a stage name, then ``(done, total)``
per query for the stages that count queries: retrieval and judging); :func:`progress_display`
turns those reports into output on stderr:

- on a terminal, a rich live line — spinner, stage name, a bar, ``done/total queries``, the
  stage's elapsed time — redrawn several times a second, so it moves even while a stage reports
  nothing (an index build, a model load);
- otherwise, :class:`PlainProgress`: one line such as
  ``retrieval_results: 40/105 queries (38%), 12.3 s`` at most every
  ``KEBAB_EVAL_PROGRESS_INTERVAL`` seconds (default 10) while a stage runs, and its final count
  when it ends — nothing for a run faster than the interval.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from kebab_eval_pipeline.cli.terminal import direct_console
from kebab_eval_pipeline.foundation import progress
from kebab_eval_pipeline.foundation.errors import InputError, Offender

INTERVAL_ENV = "KEBAB_EVAL_PROGRESS_INTERVAL"
DEFAULT_INTERVAL_S = 10.0


def progress_interval() -> float:
    """Seconds between plain progress lines: ``$KEBAB_EVAL_PROGRESS_INTERVAL`` (a number > 0),
    else :data:`DEFAULT_INTERVAL_S`. Anything else is an InputError naming the variable."""
    raw = os.environ.get(INTERVAL_ENV)
    if raw is None or not raw.strip():
        return DEFAULT_INTERVAL_S
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not (0 < value < float("inf")):
        raise InputError(
            "invalid progress interval",
            [Offender(INTERVAL_ENV, f"{raw!r}: expected a number of seconds > 0")],
        )
    return value


def progress_line(stage: str, done: int | None, total: int | None, elapsed: float) -> str:
    """One plain progress line: ``stage: done/total queries (pct%), 12.3 s``; a stage that counts
    no queries (or has not reported a count yet) reads ``stage: 12.3 s``. A total of 0 is 100 %."""
    if total is None or done is None:
        return f"{stage}: {elapsed:.1f} s"
    pct = 100 if total <= 0 else int(100 * done / total)
    return f"{stage}: {done}/{total} queries ({pct}%), {elapsed:.1f} s"


class PlainProgress:
    """Progress as plain lines through ``write`` (no cursor movement: every line stays in a log).

    ``stage(name)`` starts a stage (ending the previous one), ``queries(done, total)`` records a
    count (from any thread). A line is written when ``interval`` seconds have passed since the
    stage started or since the last line — on a count, or from a ticker thread so a stage that
    reports nothing for a while still shows it is alive. When a stage that wrote lines ends, its
    final count (e.g. ``105/105``) is written too, unless its last line already showed it.
    ``close()`` ends the last stage and the ticker.
    """

    def __init__(
        self,
        write: Callable[[str], None],
        interval: float,
        clock: Callable[[], float] = time.monotonic,
        ticker: bool = True,
    ):
        self._write, self._interval, self._clock = write, interval, clock
        self._lock = threading.Lock()
        self._stage: str | None = None
        self._done: int | None = None
        self._total: int | None = None
        self._started = self._last = clock()
        self._wrote: int | None = None  # the count of the current stage's last line (-1: no count)
        self._stop = threading.Event()
        self._ticker = None
        if ticker:  # off only where a test drives ``clock`` itself
            self._ticker = threading.Thread(target=self._tick, name="kebab-eval-progress", daemon=True)
            self._ticker.start()

    def stage(self, name: str) -> None:
        with self._lock:
            self._end_stage()
            self._stage, self._done, self._total = name, None, None
            self._started = self._last = self._clock()
            self._wrote = None

    def queries(self, done: int, total: int) -> None:
        with self._lock:
            self._done, self._total = done, total
            self._emit_if_due()

    def close(self) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
        with self._lock:
            self._end_stage()
            self._stage = None

    def _tick(self) -> None:
        # Wakes often enough to keep the interval (within a tenth of it), not so often it costs CPU.
        while not self._stop.wait(min(self._interval / 10, 1.0)):
            with self._lock:
                self._emit_if_due()

    def _emit_if_due(self) -> None:
        if self._stage is not None and self._clock() - self._last >= self._interval:
            self._emit()

    def _emit(self) -> None:
        now = self._clock()
        self._write(progress_line(self._stage, self._done, self._total, now - self._started))
        self._last, self._wrote = now, -1 if self._done is None else self._done

    def _end_stage(self) -> None:
        # The final count of a stage that wrote lines, unless its last line already said it.
        if self._stage is not None and self._wrote is not None and self._done not in (None, self._wrote):
            self._emit()


def _live(console: Console) -> Progress:
    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[count]}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )


@contextmanager
def progress_display(console: Console) -> Iterator[None]:
    """Show the progress the steps report (through :mod:`kebab_eval_pipeline.foundation.progress`) while the
    block runs: live on ``console`` when it is a terminal, else as :class:`PlainProgress` lines on
    it (every :func:`progress_interval` seconds). Either way the output goes to a duplicate of the
    console's descriptor (:func:`~kebab_eval_pipeline.cli.terminal.direct_console`), not through
    Dagster's capture of the step's output."""
    with direct_console(console) as direct, _showing(direct):
        yield


@contextmanager
def _showing(console: Console) -> Iterator[None]:
    if not console.is_terminal:
        plain = PlainProgress(
            lambda line: console.print(line, markup=False, highlight=False, soft_wrap=True),
            progress_interval(),
        )
        try:
            with progress.reporting_to(plain.stage, plain.queries):
                yield
        finally:
            plain.close()
        return
    with _live(console) as bar:
        # No total until a stage counts queries: the bar pulses and the spinner turns meanwhile.
        task = bar.add_task("starting", total=None, count="")

        def on_stage(name: str) -> None:
            nonlocal task  # a new task per stage: its own clock, and no count until it reports one
            bar.remove_task(task)
            task = bar.add_task(name, total=None, count="")

        def on_query(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total, count=f"{done}/{total} queries")

        with progress.reporting_to(on_stage, on_query):
            yield
