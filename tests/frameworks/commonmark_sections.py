"""An independent view of the sections of Markdown files, to check the heading path of every chunk a
framework's splitter makes.

Built from markdown-it-py's CommonMark tokens: neither a framework's own splitter nor this package's
reference parser decides where a section starts, so a recipe cannot agree with it by sharing a bug.

- A leading YAML front matter block (``---`` … ``---`` from the first line) is not Markdown: it is
  not parsed (CommonMark would read its closing ``---`` as the underline of a setext heading), and
  belongs to the lines before the first heading.
- Every heading CommonMark sees starts a section (fences, indented code and HTML blocks are
  CommonMark's own rules). A section's *heading path* is the headings open above it and its own —
  levels that were skipped left out (``#`` then ``###`` is a path of two) — and its *own text* the
  lines from its heading to the next heading of any level. The lines before the first heading are
  the section with the empty path.

:func:`wrong_chunks` checks chunks against it: a chunk is right when its text (whitespace collapsed,
leading heading lines left out: a splitter may keep its section's heading line, or merge an empty
section's heading into the next chunk) lies in the own text of a section of its file with the
chunk's heading path (whitespace collapsed). A chunk that carries its parent's path instead of its
own lies in no own text of the parent, so it is counted; so is a path with a heading cut in two.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from markdown_it import MarkdownIt

_FRONT_MATTER = re.compile(r"\A---[ \t]*\n(.*?\n)?---[ \t]*(\n|\Z)", re.S)
_HEADING_LINE = re.compile(r"^[ \t]{0,3}#{1,6}(?:[ \t].*)?$")
_FENCE_LINE = re.compile(r"^\s*(```|~~~)")


@dataclass(frozen=True)
class Section:
    rel_path: str
    heading_path: tuple[str, ...]
    own_text: str  # whitespace collapsed


def _collapse(text: str) -> str:
    return " ".join(text.split())


def sections_of(text: str, rel_path: str) -> list[Section]:
    """The sections of one Markdown text (see the module docstring), in file order."""
    lines = text.split("\n")
    skip = 0
    front = _FRONT_MATTER.match(text)
    if front:
        skip = front.group(0).count("\n")
    body = "\n".join(lines[skip:])
    tokens = MarkdownIt("commonmark").parse(body)
    heads: list[tuple[int, int, str]] = []  # (first line, level, text), lines of the whole file
    for i, token in enumerate(tokens):
        if token.type == "heading_open" and token.map is not None:
            heads.append((token.map[0] + skip, int(token.tag[1]), tokens[i + 1].content))
    out = []
    start_lines = [h[0] for h in heads]
    if not heads or heads[0][0] > 0:  # the lines above the first heading, front matter included
        end = start_lines[0] if heads else len(lines)
        out.append(Section(rel_path, (), _collapse("\n".join(lines[:end]))))
    stack: list[tuple[int, str]] = []
    for n, (first, level, heading) in enumerate(heads):
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, _collapse(heading)))
        end = start_lines[n + 1] if n + 1 < len(heads) else len(lines)
        own = _collapse("\n".join(lines[first:end]))
        out.append(Section(rel_path, tuple(h for _, h in stack), own))
    return out


def corpus_sections(corpus: Path) -> dict[str, list[Section]]:
    """``{rel_path: sections}`` for every ``*.md`` file under ``corpus``."""
    return {
        p.relative_to(corpus).as_posix(): sections_of(
            p.read_text(encoding="utf-8"), p.relative_to(corpus).as_posix()
        )
        for p in sorted(corpus.rglob("*.md"))
        if p.is_file()
    }


def nested_fence_line(text: str) -> int | None:
    """The first line (1-based) inside a CommonMark fenced code block that itself starts like a
    fence (a heredoc holding a fenced block, say), or None. From there on, Markdown splitters that
    toggle "in code" at every fence-like line (LlamaIndex's, LangChain's) and CommonMark disagree
    about which lines are code and which are headings: the file's sections are ambiguous."""
    front = _FRONT_MATTER.match(text)
    skip = front.group(0).count("\n") if front else 0
    tokens = MarkdownIt("commonmark").parse("\n".join(text.split("\n")[skip:]))
    for token in tokens:
        if token.type == "fence" and token.map is not None:
            for offset, line in enumerate(token.content.split("\n")):
                if _FENCE_LINE.match(line):
                    return skip + token.map[0] + 2 + offset  # the opening fence is line map[0] + 1
    return None


def _body(text: str) -> str:
    """The chunk's text without its leading heading lines, whitespace collapsed."""
    lines = text.strip().split("\n")
    while lines and _HEADING_LINE.match(lines[0]):
        lines.pop(0)
    return _collapse("\n".join(lines))


def wrong_chunks(
    chunks: Iterable[tuple[str, list[str] | None, str]], sections: dict[str, list[Section]]
) -> list[tuple[str, tuple[str, ...], str]]:
    """The chunks — ``(rel_path, heading_path, text)`` each — whose heading path is not the section
    their text lies in (module docstring), as ``(rel_path, heading_path, text start)``."""
    own: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for rel, secs in sections.items():
        for s in secs:
            own.setdefault((rel, s.heading_path), []).append(s.own_text)
    wrong = []
    for rel, heading_path, text in chunks:
        path = tuple(_collapse(h) for h in heading_path or ())
        body = _body(text)
        if not any(body in candidate for candidate in own.get((rel, path), ())):
            wrong.append((rel, path, body[:80]))
    return wrong
