"""The user documentation's pages and the snippets on them, for the tests that run those snippets.

The documentation is the README plus the site's pages (docs/site/**/*.md). A test takes the snippet
it runs from here — the snippet is the test's input, not a copy of it — by what the snippet holds,
not by where it stands: a page may move or be split without every test learning its new path.
:func:`snippet` insists on exactly one match, so two pages showing the same thing differently, or
a snippet gone, fail the test that runs it with the places named.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
SITE = REPO / "docs" / "site"

_FENCE = re.compile(r"^```([\w+-]*)[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$", re.M)


EXAMPLES = REPO / "docs" / "examples"


def pages() -> list[Path]:
    """The README, every page of the site and the README of each example folder (the bundled
    kebab-docs corpus is data, not documentation), in a fixed order."""
    examples = sorted(p for p in EXAMPLES.glob("*/README.md"))
    return [README, *sorted(SITE.rglob("*.md")), *examples]


@cache
def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def page(name: str) -> str:
    """A page's Markdown: ``"README.md"`` or a path under docs/site/ (``"recipes/http.md"``)."""
    return _text(README if name == "README.md" else SITE / name)


def all_text() -> str:
    """Every page's Markdown, one after the other (for what may stand on any page)."""
    return "\n\n".join(_text(p) for p in pages())


@dataclass(frozen=True)
class Snippet:
    """One fenced block: its page, the line its text starts on, its language and its text."""

    page: Path
    line: int
    lang: str
    text: str

    @property
    def where(self) -> str:
        """``path:line`` of the block's first line of text, from the repository's top folder."""
        return f"{self.page.relative_to(REPO)}:{self.line}"


def snippets(lang: str | None = None) -> list[Snippet]:
    """Every fenced block of every page (of one language when ``lang`` is given), page by page."""
    out = []
    for path in pages():
        text = _text(path)
        for m in _FENCE.finditer(text):
            if lang is None or m[1] == lang:
                out.append(Snippet(path, text.count("\n", 0, m.start()) + 2, m[1], m[2]))
    return out


def snippet(lang: str, contains: str, *, starts: bool = False) -> Snippet:
    """The one ``lang`` block that holds ``contains`` (or starts with it, ``starts=True``).

    Raises AssertionError naming the matches when there is not exactly one."""
    found = [s for s in snippets(lang) if (s.text.startswith(contains) if starts else contains in s.text)]
    assert len(found) == 1, (
        f"expected one ```{lang} block holding {contains!r} in the documentation, found "
        f"{[s.where for s in found] or 'none'}"
    )
    return found[0]


def section(heading: str) -> str:
    """The text under the one heading ``heading`` (any level, on any page) up to the next heading
    of the same or a higher level; a bold lead-in (``**Heading.**``) up to the next one."""
    found = []
    for path in pages():
        text = _text(path)
        # headings are looked for outside code blocks (a shell comment is no heading): the blocks'
        # text is blanked, keeping every offset
        masked = _FENCE.sub(lambda m: re.sub(r"[^\n]", " ", m[0]), text)
        for m in _HEADING.finditer(masked):
            if m[2].strip() == heading:
                level = len(m[1])
                end = re.compile(rf"^#{{1,{level}}}[ \t]", re.M).search(masked, m.end())
                found.append(text[m.end() : end.start() if end else len(text)])
        lead = f"**{heading}**"
        if lead in masked:
            start = masked.index(lead) + len(lead)
            end = re.compile(r"^(\*\*|#{1,6}[ \t])", re.M).search(masked, start)
            found.append(text[start : end.start() if end else len(text)])
    assert len(found) == 1, f"expected one section {heading!r} in the documentation, found {len(found)}"
    return found[0]
