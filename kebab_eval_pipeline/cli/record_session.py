"""The interactive loop of ``kebab-eval golden record``: ask, search, show, append.

Everything the user types goes through :mod:`kebab_eval_pipeline.golden.record` (selection,
entry, ids, the atomic append); this module only talks: it prompts through ``ask`` (rich's
``Console.input`` on a terminal, plain lines from a pipe — the same code), prints the hits as a
numbered table, and ends on an empty question, end of input or Ctrl-C with a summary. What was
appended before stays: every entry is its own atomic write.
"""

from __future__ import annotations

import contextlib
import re
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import yaml
from rich.console import Console
from rich.table import Table
from rich.text import Text

from kebab_eval_pipeline.contract import Hit
from kebab_eval_pipeline.foundation.errors import ExitCode
from kebab_eval_pipeline.golden.convert import query_document
from kebab_eval_pipeline.golden.record import (
    RecordConflict,
    RecordFile,
    SelectionError,
    build_entry,
    parse_selection,
    parse_tags,
    parse_yes_no,
    typed_id_problem,
)

#: ``ask(prompt)``: one line typed after ``prompt`` (plain text, shown as it is).
Ask = Callable[[str], str]
#: ``search(question, query_id)`` → (the hits, best first; an error message or None).
Search = Callable[[str, str], tuple[Sequence[Hit], str | None]]
SNIPPET_CHARS = 100


class _Skip(Exception):
    """The user dropped the current question (``skip`` at a prompt)."""


def system_search(system, k: int) -> Search:
    """A :data:`Search` over a system under test: one request of ``k`` hits, no answer asked.

    A failed query (timeout, a bad response, an exception the adapter let through) is its
    message, never an exception: the session shows it and goes on."""
    from kebab_eval_pipeline.contract import as_block
    from kebab_eval_pipeline.systems.outcome import QueryRequest

    def search(question: str, query_id: str) -> tuple[Sequence[Hit], str | None]:
        try:
            outcome = system.run_queries([QueryRequest(query_id, question)], k, False)[0]
        except Exception as exc:  # Ctrl-C (KeyboardInterrupt) is no Exception: it ends the session
            return [], f"{type(exc).__name__}: {exc}"
        if outcome.error_class is not None:
            return [], f"{outcome.error_class}: {outcome.error or ''}".rstrip(": ")
        return list(as_block(outcome.hits).head(k)), None

    return search


def hits_table(hits: Sequence[Hit], width: int) -> Table:
    """The hits, numbered by rank: path (or doc id / chunk id), heading path, lines, score and
    the start of the snippet (whitespace collapsed), for a console ``width`` columns wide. Cells
    are plain text, never markup. The snippet gets what the other columns leave (none below 12
    columns); on a narrow terminal the path and heading path wrap (shown whole: they become the
    anchors), and the number, lines and score keep their width."""
    rows = []
    for rank, hit in enumerate(hits, start=1):
        rows.append(
            [
                str(rank),
                hit.doc_path or hit.doc_id or hit.chunk_id or "",
                " > ".join(hit.heading_path),
                "" if hit.line_start is None and hit.line_end is None else _span(hit),
                "" if hit.score is None else f"{hit.score:.4f}",
                re.sub(r"\s+", " ", hit.snippet or "").strip()[:SNIPPET_CHARS],
            ]
        )

    def widest(i: int, title: str) -> int:
        return max([len(title), *(len(row[i]) for row in rows)])

    # Rich squeezes every column, no-wrap ones to nothing, when the natural widths pass the
    # console's: the snippet (the only column that may be cut) is sized to the room left.
    others = sum(widest(i, t) for i, t in enumerate(("#", "path", "heading path", "lines", "score")))
    room = min(width - others - 3 * 6, SNIPPET_CHARS)
    table = Table(pad_edge=False)
    table.add_column("#", justify="right", no_wrap=True, min_width=widest(0, "#"))
    table.add_column("path", overflow="fold", min_width=min(widest(1, "path"), 24))
    table.add_column("heading path", min_width=min(widest(2, "heading path"), 16))
    table.add_column("lines", no_wrap=True, min_width=widest(3, "lines"))
    table.add_column("score", justify="right", no_wrap=True, min_width=widest(4, "score"))
    if room >= 12:
        table.add_column("snippet", overflow="ellipsis", no_wrap=True, max_width=room)
    for row in rows:
        table.add_row(*(Text(cell) for cell in row[: len(table.columns)]))
    return table


@contextlib.contextmanager
def _interrupt_deferred() -> Iterator[None]:
    """Ctrl-C held back while the block runs, then raised: an append and its count stay together."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt


def _span(hit: Hit) -> str:
    start, end = hit.line_start, hit.line_end
    return f"{start}-{end}" if start is not None and end is not None else str(start if end is None else end)


@dataclass
class RecordSession:
    """One session: ``ask(prompt)`` reads a line (raises EOFError at the end of input and
    KeyboardInterrupt on Ctrl-C), ``search`` asks the system, ``console`` shows what happens."""

    file: RecordFile
    search: Search
    ask: Ask
    console: Console
    recorded: list[str] = field(default_factory=list)

    def run(self) -> int:
        """Record until an empty question or end of input (0) or Ctrl-C (130, the shell's code for
        an interrupt). Prints the summary either way; an entry being typed is dropped, never half
        written. A :class:`~kebab_eval_pipeline.golden.record.RecordConflict` propagates (exit 2)."""
        code = 0
        try:
            while self._one():
                pass
        except EOFError:
            self.console.print()
        except KeyboardInterrupt:
            self.console.print("\ninterrupted", highlight=False)
            code = ExitCode.INTERRUPTED
        except RecordConflict:
            self._summary()  # what this session did record, then the error (exit 2)
            raise
        self._summary()
        return code

    def _summary(self) -> None:
        n = len(self.recorded)
        total = len(self.file.queries)
        if n:
            self.console.print(
                f"recorded {n} quer{'y' if n == 1 else 'ies'} ({', '.join(self.recorded)}) in "
                f"{self.file.path}: {total} in the file",
                markup=False,
                highlight=False,
            )
        else:
            self.console.print(
                f"nothing recorded; {self.file.path} is unchanged", markup=False, highlight=False
            )

    def _prompt(self, label: str) -> str:
        return self.ask(label + " ").strip()

    def _one(self) -> bool:
        """One question, start to end; False when the user ends the session."""
        question = self._prompt("question (empty line to finish)>")
        if not question:
            return False
        qid = self.file.next_id()
        while True:
            hits, error = self.search(question, qid)
            if error is None:
                break
            self.console.print(Text.assemble(("system failed: ", "red"), error))
            if parse_yes_no(self._prompt("retry the same question? [y/N]>")) is not True:
                self.console.print("skipped: type the question again or another one", highlight=False)
                return True
        try:
            entry = self._entry(qid, question, hits)
        except _Skip:
            self.console.print("skipped: nothing recorded for this question", highlight=False)
            return True
        self.console.print(Text(yaml.safe_dump([query_document(entry)], sort_keys=False, allow_unicode=True)))
        with _interrupt_deferred():  # Ctrl-C now: the entry is written (or not) and counted, then the end
            in_place = self.file.append(entry)
            self.recorded.append(entry.id)
        how = "" if in_place else " (the file was written again in the canonical layout)"
        self.console.print(
            f"recorded {entry.id} ({len(entry.supports)} supports) in {self.file.path}{how}",
            markup=False,
            highlight=False,
        )
        return True

    def _entry(self, qid: str, question: str, hits: Sequence[Hit]):
        """Ask what the entry holds and build it (re-asking what cannot be used)."""
        if hits:
            self.console.print(hits_table(hits, self.console.width))
            while True:
                typed = self._prompt("relevant hits (1 3, 1-3, all, none; skip drops the question)>")
                if typed.lower() == "skip":
                    raise _Skip
                try:
                    selection = parse_selection(typed, len(hits))
                    break
                except SelectionError as exc:
                    self.console.print(Text(str(exc), style="yellow"))
        else:
            self.console.print("no hits", highlight=False)
            selection = ()
        answerable = True
        if not selection:
            while (answerable := parse_yes_no(self._prompt("is the question answerable? [y/n]>"))) is None:
                self.console.print(Text("answer y or n", style="yellow"))
        category = self._prompt("category [general]>")
        tags = parse_tags(self._prompt("tags (comma or space separated) []>"))
        used = self.file.ids()
        while True:
            typed = self._prompt(f"id [{qid}]>")
            if not typed:
                break
            problem = typed_id_problem(typed, used)
            if problem is None:
                qid = typed
                break
            self.console.print(Text(problem, style="yellow"))
        try:
            return build_entry(qid, question, hits, selection, answerable, category, tags)
        except ValueError as exc:  # a hit whose fields no golden set accepts (e.g. lines 9-3)
            self.console.print(Text(f"cannot record this entry: {exc}", style="red"))
            raise _Skip from None
