"""Escaping for the Markdown the tool writes (``run.md``, ``comparison.md``, Dagster ``MetadataValue.md``).

Every string a user or a system under test supplies — golden-set names and categories, query
ids, run ids, system names, version strings, gate names, warnings, error messages — passes
through one of these before it is placed in Markdown, so it reads as the same text and can never
become markup: no raw HTML (``<script>``, ``<svg onload=…>``), no extra table columns (``|``), no
heading, link, image, list or emphasis, whatever it holds. Newlines (and every other line
break) become spaces, so a value always stays on its line.

- :func:`md_text` — running text and table cells: every character CommonMark or GFM gives a
  meaning to is backslash-escaped (a backslash escape of ASCII punctuation always renders as the
  character itself), plus what would start a block at the beginning of a line.
- :func:`md_cell` — a table cell (:func:`md_text`; an empty value is an empty cell).
- :func:`md_code` — an inline code span around the text, with a fence longer than any run of
  backticks inside it; ``in_table`` also escapes ``|`` (GFM splits cells before code spans).

The HTML report escapes with ``html.escape`` instead (``compare/html.py``).
"""

from __future__ import annotations

import re

__all__ = ["md_cell", "md_code", "md_text"]

# Characters with inline or block meaning somewhere in CommonMark + GFM tables/strikethrough:
# escapes, code, emphasis, links/images, raw HTML and autolinks, entities, tables, headings,
# strikethrough. Escaped wherever they are: each escape renders as the bare character. An "_"
# between two letters or digits cannot open or close emphasis (CommonMark's flanking rules), so
# ``doc_path`` stays as written; any other "_" is escaped.
_SPECIAL = re.compile(r"([\\`*\[\]<>|#~&!]|(?<![^\W_])_|_(?![^\W_]))")
# Every line break Python knows (and CommonMark's \r, \n), plus NUL: one space each.
_BREAKS = re.compile(r"[\r\n\v\f\x1c-\x1e\x85\u2028\u2029\x00]")
# What starts a block when it opens a line: a list item (-, +, *, 1. / 1)), a setext underline or
# thematic break (=, -), a blockquote (> is already escaped), indented code (leading spaces).
_LINE_START = re.compile(r"^(\s*)(?:([-+=])|(\d+)([.)]))")
_BACKTICKS = re.compile(r"`+")


def _one_line(value: object) -> str:
    return _BREAKS.sub(" ", "" if value is None else str(value))


def md_text(value: object) -> str:
    """``value`` (anything; None is empty) as Markdown text that renders back to itself, on one line.

    Edge cases: line breaks (CR, LF, CRLF, U+2028, …) and NUL become spaces; leading whitespace is
    dropped (four spaces would open a code block at the start of a line); the result can start a
    line, sit in a paragraph or fill a table cell.
    """
    text = _SPECIAL.sub(r"\\\1", _one_line(value)).lstrip()
    return _LINE_START.sub(lambda m: f"{m[1]}\\{m[2]}" if m[2] else f"{m[1]}{m[3]}\\{m[4]}", text)


def md_cell(value: object) -> str:
    """``value`` for a GFM table cell: :func:`md_text` (``|`` escaped, so no column is added)."""
    return md_text(value)


def md_code(value: object, in_table: bool = False) -> str:
    """``value`` as an inline code span (literal, monospace) on one line.

    The fence is one backtick longer than the longest backtick run inside, and a space pads each
    side when the text starts or ends with a backtick or a space (CommonMark strips exactly one).
    ``in_table``: ``|`` is escaped as ``\\|`` (GFM splits table rows before it parses code spans,
    and drops the backslash inside the span). An empty value gives ``""`` with no span.
    """
    text = _one_line(value)
    if not text:
        return ""
    if in_table:
        text = text.replace("|", "\\|")
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text[0] in "` " or text[-1] in "` " else ""
    return f"{fence}{pad}{text}{pad}{fence}"
