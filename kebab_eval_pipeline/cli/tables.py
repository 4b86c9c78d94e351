"""Tables of runs that fit the terminal without ever splitting a run id (``history``, ``runs list``).

Rich squeezes a too-wide table by folding cells, which cut run ids and dates over several lines.
:func:`fit_runs_table` instead tries layouts from the widest to the narrowest and keeps the first
that fits ``width``:

1. ``wide`` — one column per field, nothing wrapped;
2. ``stacked`` — the run id with its time under it in one cell, the labels (golden set, chunker
   version) likewise, and metric headers broken after each ``_`` (``refusal_`` / ``correctness``);
   boxed, else (when that is too wide) with a rule under the header only;
3. ``narrow`` — ``stacked`` without the label cell (the dropped columns are named in a note);
4. ``records`` — one block per run: its id and time on one line, then ``name value`` pairs,
   filled up to ``width`` without splitting a pair.

Run ids are never wrapped, folded or truncated in any layout. ``width=None`` (output that is not
a terminal) always gives ``wide``: nothing is wrapped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich import box
from rich.console import Console, Group, RenderableType
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

_HUGE = 100_000


@dataclass(frozen=True)
class Field:
    """One column of the runs table: its header and one cell per run (already formatted)."""

    name: str
    cells: Sequence[str]


@dataclass(frozen=True)
class Fitted:
    """The chosen layout's name, what to print, and the label columns it leaves out."""

    layout: str
    renderable: RenderableType
    dropped: tuple[str, ...] = ()

    @property
    def soft_wrap(self) -> bool:
        """Print with ``soft_wrap=True``: a ``records`` line longer than the width (an id longer than
        the terminal) is written whole for the terminal to wrap, never cropped by rich."""
        return self.layout == "records"


def _natural_width(console: Console, table: Table) -> int:
    return Measurement.get(console, console.options.update_width(_HUGE), table).maximum


def _broken_header(name: str) -> str:
    """``refusal_correctness`` → ``refusal_`` / ``correctness`` (a break after each ``_``)."""
    return name.replace("_", "_\n")


def _wide(run_id: Field, time: Field | None, labels: list[Field], numbers: list[Field]) -> Table:
    table = Table()
    table.add_column(run_id.name, no_wrap=True, overflow="ignore")
    if time is not None:
        table.add_column(time.name, no_wrap=True, overflow="ignore")
    for f in labels:
        table.add_column(f.name, no_wrap=True, overflow="ignore")
    for f in numbers:
        # (overflow "ignore" would drop the justification; a fitted table never overflows anyway)
        table.add_column(f.name, no_wrap=True, justify="right")
    columns = [run_id, *([time] if time else []), *labels, *numbers]
    for row in zip(*(f.cells for f in columns), strict=True):
        table.add_row(*row)
    return table


def _stacked(
    run_id: Field, time: Field | None, labels: list[Field], numbers: list[Field], compact: bool = False
) -> Table:
    # compact: a rule under the header only, no outer edge (four columns narrower)
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False) if compact else Table()
    table.add_column(run_id.name + (f"\n{time.name}" if time else ""), no_wrap=True, overflow="ignore")
    if labels:
        table.add_column("\n".join(f.name for f in labels), no_wrap=True, overflow="ellipsis")
    for f in numbers:
        table.add_column(_broken_header(f.name), no_wrap=True, justify="right")
    for i, rid in enumerate(run_id.cells):
        first = Text(rid)
        if time is not None and time.cells[i]:
            first.append("\n" + time.cells[i], style="dim")
        row: list[RenderableType] = [first]
        if labels:
            row.append("\n".join(f.cells[i] for f in labels))
        row += [f.cells[i] for f in numbers]
        table.add_row(*row)
    return table


def _records(run_id: Field, time: Field | None, fields: list[Field], width: int) -> Group:
    lines: list[Text] = []
    for i, rid in enumerate(run_id.cells):
        head = Text(rid, style="bold")
        if time is not None and time.cells[i]:
            head.append("  " + time.cells[i], style="dim")
        lines.append(head)
        line = "  "
        for f in fields:
            pair = f"{f.name} {f.cells[i]}"
            if len(line) > 2 and len(line) + 2 + len(pair) > width:
                lines.append(Text(line.rstrip()))
                line = "  "
            line += ("  " if len(line) > 2 else "") + pair
        if len(line) > 2:
            lines.append(Text(line))
    for line in lines:
        line.no_wrap, line.overflow = True, "ignore"
    return Group(*lines)


def fit_runs_table(
    console: Console,
    run_id: Field,
    time: Field | None = None,
    labels: Sequence[Field] = (),
    numbers: Sequence[Field] = (),
    width: int | None = None,
) -> Fitted:
    """The first layout (``wide``, ``stacked``, ``narrow``, ``records``; see the module) whose
    natural width is at most ``width``; ``width=None`` means unbounded (``wide``). ``run_id``,
    ``time`` and every field hold one cell per run, in the same order; ``labels`` are the fields
    that may be dropped at narrow widths, ``numbers`` are right-aligned."""
    labels, numbers = list(labels), list(numbers)
    wide = _wide(run_id, time, labels, numbers)
    if width is None or _natural_width(console, wide) <= width:
        return Fitted("wide", wide)
    for compact in (False, True):
        stacked = _stacked(run_id, time, labels, numbers, compact)
        if _natural_width(console, stacked) <= width:
            return Fitted("stacked", stacked)
    if labels:
        for compact in (False, True):
            narrow = _stacked(run_id, time, [], numbers, compact)
            if _natural_width(console, narrow) <= width:
                return Fitted("narrow", narrow, tuple(f.name for f in labels))
    return Fitted("records", _records(run_id, time, [*labels, *numbers], width))
