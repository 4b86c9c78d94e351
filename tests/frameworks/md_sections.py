"""Markdown sections of a corpus file, as Haystack's ``MarkdownHeaderSplitter`` sees them.

A section is an ATX heading (``#`` … ``######`` + space + text, outside fenced code blocks — the
splitter's own rules) plus everything up to the next heading of the same or a higher level. Its
heading path is the splitter's ``parent_headers + [header]``: the open headings above it, levels
that were skipped left out. Lines are 1-based and inclusive; trailing blank lines are not part of
a section.

Used to write and to verify the line spans of ``tests/data/kebab_docs_haystack_golden.yaml``:
``python tests/frameworks/md_sections.py CORPUS [REL_PATH ...]`` lists every section.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

# The same patterns as haystack's MarkdownHeaderSplitter (2.31), applied line by line.
_HEADER = re.compile(r"^(#{1,6}) (.+)$")
_FENCE = re.compile(r"^(`{3,}|~{3,})")


@dataclass(frozen=True)
class Section:
    rel_path: str
    heading_path: tuple[str, ...]
    level: int
    line_start: int  # the heading's line
    line_end: int  # the section's last non-blank line (sub-sections included)


def sections(path: Path, rel_path: str) -> list[Section]:
    """Every heading of ``path`` with its section's span (see the module docstring)."""
    lines = path.read_text(encoding="utf-8").split("\n")
    heads: list[tuple[int, int, tuple[str, ...]]] = []  # (line, level, heading path)
    stack: list[str | None] = [None] * 6
    fence: str | None = None
    for no, line in enumerate(lines, start=1):
        opened = _FENCE.match(line)
        if fence is not None:
            # a fence closes only with the same characters, at least as long (CommonMark)
            closing = opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence)
            if closing and not line[len(opened.group(1)) :].strip():
                fence = None
            continue
        if opened:
            fence = opened.group(1)
            continue
        m = _HEADER.match(line)
        if not m:
            continue
        level = len(m.group(1))
        stack[level - 1] = m.group(2)
        stack[level:] = [None] * (6 - level)
        heads.append((no, level, tuple(h for h in stack[:level] if h is not None)))
    out = []
    for i, (no, level, hpath) in enumerate(heads):
        end = len(lines)
        for later, later_level, _ in heads[i + 1 :]:
            if later_level <= level:
                end = later - 1
                break
        while end > no and not lines[end - 1].strip():
            end -= 1
        out.append(Section(rel_path, hpath, level, no, end))
    return out


def corpus_sections(corpus: Path) -> dict[str, list[Section]]:
    """``{rel_path: sections}`` for every Markdown file under ``corpus``."""
    return {
        p.relative_to(corpus).as_posix(): sections(p, p.relative_to(corpus).as_posix())
        for p in sorted(corpus.rglob("*.md"))
    }


if __name__ == "__main__":
    root = Path(sys.argv[1])
    wanted = set(sys.argv[2:])
    for rel, secs in corpus_sections(root).items():
        if wanted and rel not in wanted:
            continue
        for s in secs:
            print(f"{rel}:{s.line_start}-{s.line_end} L{s.level} {' > '.join(s.heading_path)}")
