"""``--help`` of every command reads as written (issue 23, item 8).

Each page is rendered as ``kebab-eval`` renders it (the tidied command tree main() runs, at
COLUMNS=100) and checked against the help strings in the source: no flag labelled ``<bool>``, no
bracketed word swallowed as Rich markup (``pip install -e ".[vectors]"``), every paragraph and
option help shown whole and ending with punctuation, and no line broken mid-sentence where the
next word would still have fitted (a docstring's own line breaks must not show).
"""

from __future__ import annotations

import itertools
import re
import subprocess
import sys

import pytest
import typer
from hypothesis import given
from hypothesis import strategies as st

from kebab_eval_pipeline.cli import app
from kebab_eval_pipeline.cli.help import reflow, tidy, walk
from tests.test_cli import cli_env

WIDTH = 100
BOX = re.compile(r"[│╭╮╰╯─]")
BRACKETED = re.compile(r"\[[^\[\]]*\]")
SENTENCE_END = (".", "!", "?", ":", ";")
PARAGRAPH_END = (".", "!", "?", ")")  # a help paragraph ends a sentence (or its parenthesis)
#: In a panel, a row starts within the first few columns (a "*" for required, then the name); a
#: line indented this far or more continues the help column of the row above.
CONTINUATION_INDENT = 8


def source_tree():
    """The command tree as the source defines it (help strings untouched)."""
    return typer.main.get_command(app)


PATHS = [path for path, _ in walk(source_tree())]


def render(path: tuple[str, ...], capsys, monkeypatch) -> str:
    """``kebab-eval <path> --help`` as main() renders it, at COLUMNS=WIDTH."""
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    monkeypatch.setenv("NO_COLOR", "1")
    capsys.readouterr()
    code = tidy(typer.main.get_command(app))([*path, "--help"], prog_name="kebab-eval", standalone_mode=False)
    assert code in (0, None)
    return capsys.readouterr().out


def flat(text: str) -> str:
    """``text`` without panel borders, whitespace collapsed: what a reader reads, line breaks aside."""
    return " ".join(BOX.sub(" ", text).split())


def source_texts(command) -> list[str]:
    """The help paragraphs of ``command`` and the help of each of its parameters, whitespace
    collapsed (click's ``\\f`` tail dropped)."""
    paragraphs = (command.help or "").partition("\f")[0].split("\n\n")
    texts = [" ".join(p.split()) for p in paragraphs]
    texts += [" ".join(p.help.split()) for p in command.params if getattr(p, "help", None)]
    return [t for t in texts if t]


def mid_sentence_breaks(page: str) -> list[str]:
    """Line breaks inside a sentence where the next word would have fitted on the line.

    Outside panels: consecutive lines of the same indentation. Inside a panel (``│ … │``): a
    continuation line (indented CONTINUATION_INDENT or more) and the line above it, which has text
    starting in the same column; the room is the column's width up to the right border."""
    lines = page.splitlines()
    found = []
    for above, below in itertools.pairwise(lines):
        if not above.strip() or not below.strip():
            continue
        in_panel = above.startswith("│") and below.startswith("│")
        if in_panel:
            above, below = above[1:].rstrip()[:-1], below[1:].rstrip()[:-1]
        elif above.startswith(("│", "╭", "╰")) or below.startswith(("│", "╭", "╰")):
            continue
        column = len(below) - len(below.lstrip())
        if in_panel:
            starts_here = len(above) > column and above[column] != " " and above[column - 1] == " "
            if column < CONTINUATION_INDENT or not starts_here:
                continue  # a new row, or no text of the line above starts in this column
            room = len(above) - column - 1  # the cell's right padding
        else:
            if column != len(above) - len(above.lstrip()):
                continue  # e.g. the usage line's aligned continuation
            room = WIDTH - 2 - column
        segment, word = above[column:].rstrip(), below.split()[0]
        if not segment.endswith(SENTENCE_END) and len(segment) + 1 + len(word) <= room:
            found.append(f"{segment!r} / {word!r}")
    return found


@pytest.mark.parametrize("path", PATHS, ids=lambda p: " ".join(p) or "kebab-eval")
def test_help_page_reads_as_written(path, capsys, monkeypatch):
    command = dict(walk(source_tree()))[path]
    page = render(path, capsys, monkeypatch)
    text = flat(page)
    assert "<bool>" not in page, page
    for source in source_texts(command):
        for bracketed in BRACKETED.findall(source):  # e.g. ".[vectors]", "[#n]", "[tag=critical]"
            assert bracketed in text, f"{bracketed!r} swallowed from {source!r}:\n{page}"
        assert source.endswith(PARAGRAPH_END), f"help ends mid-sentence: {source!r}"
        assert source in text, f"help not shown whole: {source!r}\n{page}"
    assert mid_sentence_breaks(page) == [], page


def test_every_option_and_argument_has_help():
    missing = [
        f"{' '.join(path) or 'kebab-eval'}: {param.name}"
        for path, command in walk(source_tree())
        for param in command.params
        if not getattr(param, "help", None)
    ]
    assert missing == []


def test_flags_show_both_forms_and_no_value(capsys, monkeypatch):
    page = render(("run",), capsys, monkeypatch)
    row = next(line for line in page.splitlines() if "--judge" in line)
    assert "--no-judge" in row and "<" not in row.split("--no-judge")[1].split("Turn")[0], row


def test_kebab_eval_ref_index_help_shows_the_vectors_extra(tmp_path):
    """Through the console entry itself (main()), as a user types it."""
    env = {**cli_env(tmp_path), "COLUMNS": str(WIDTH), "NO_COLOR": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "kebab_eval_pipeline.cli", "ref", "index", "--help"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert 'pip install -e ".[vectors]"' in flat(proc.stdout), proc.stdout
    assert "<bool>" not in proc.stdout


@given(
    st.lists(
        st.text(alphabet=st.sampled_from("ab [].\\/=#\n"), min_size=1, max_size=30), min_size=1, max_size=4
    )
)
def test_reflow_prints_every_paragraph_as_written(paragraphs):
    """Rich renders the reflowed text as the source's words, paragraph by paragraph."""
    from rich.text import Text

    paragraphs = [" ".join(p.split()) for p in paragraphs]
    paragraphs = [p for p in paragraphs if p]
    source = "\n\n".join(p.replace(" ", "\n", 1) for p in paragraphs)  # a docstring's own breaks
    shown = Text.from_markup(reflow(source) or "").plain
    assert shown.split("\n\n") == (paragraphs or [""])
