"""Turn an anchor-only golden set (rel_path + heading_path) into a line-span golden set.

The demo golden set names its evidence by file and heading path only, so a comparison across
chunkers can only fall back to document matching. For the ``fallback_span`` acceptance test each
support is re-anchored to one line of its file: inside the heading's section (the heading line
down to the next heading of the same or a higher level), the first line that contains the query's
first ``must_contain`` phrase (case-insensitive), else the section's first non-empty line that is
not a heading. Lines are 1-based file lines, front matter included — what the reference system's
hits report.

Independent of the product's parser on purpose: ATX headings only, skipping front matter and
fenced code blocks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from kebab_eval_pipeline.golden.load import load_golden

_ATX = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


@dataclass(frozen=True)
class Heading:
    line: int  # 1-based file line
    level: int
    path: tuple[str, ...]  # heading texts from the H1 down to this heading


def read_lines(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8").removeprefix("\ufeff")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def headings(lines: list[str]) -> list[Heading]:
    """ATX headings with their full heading paths (front matter and fenced code skipped)."""
    start = 0
    if lines and lines[0].strip() == "---":
        for idx in range(1, len(lines)):
            if lines[idx].strip() in ("---", "..."):
                start = idx + 1
                break
    out: list[Heading] = []
    stack: list[tuple[int, str]] = []
    fence: str | None = None
    for idx in range(start, len(lines)):
        line = lines[idx]
        fenced = _FENCE.match(line)
        if fence is not None:
            if fenced and fenced.group(1)[0] == fence[0] and len(fenced.group(1)) >= len(fence):
                fence = None
            continue
        if fenced:
            fence = fenced.group(1)
            continue
        m = _ATX.match(line)
        if not m or not m.group(2).strip():
            continue
        level, text = len(m.group(1)), " ".join(m.group(2).split())
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, text))
        out.append(Heading(idx + 1, level, tuple(t for _, t in stack)))
    return out


def span_line(lines: list[str], heading_path: list[str], phrase: str | None) -> int:
    """The 1-based line a support at ``heading_path`` is anchored to (see the module docstring).

    AssertionError when the heading path is not in the file or its section has no text."""
    found = headings(lines)
    wanted = tuple(" ".join(h.split()) for h in heading_path)
    matches = [h for h in found if h.path == wanted]
    assert matches, f"heading path {wanted} not found (have {[h.path for h in found]})"
    head = matches[0]
    following = [h.line for h in found if h.line > head.line and h.level <= head.level]
    end = (following[0] - 1) if following else len(lines)
    body = range(head.line + 1, end + 1)  # 1-based
    heading_lines = {h.line for h in found}
    if phrase:
        for n in body:
            if phrase.lower() in lines[n - 1].lower():
                return n
    for n in body:
        if lines[n - 1].strip() and n not in heading_lines:
            return n
    raise AssertionError(f"section {wanted} has no text")


def build_span_golden(source: Path, corpus: Path, out: Path, name: str) -> Path:
    """Write ``out``: the canonical golden set of ``source`` with every support re-anchored to
    ``rel_path`` + ``line_start``/``line_end`` (one line); queries without supports unchanged."""
    golden = load_golden(source).golden
    cache: dict[str, list[str]] = {}
    queries = []
    for query in golden.queries:
        doc = query.model_dump(exclude_defaults=True)
        doc.pop("supports", None)
        phrase = query.must_contain[0] if query.must_contain else None
        supports = []
        for support in query.supports:
            assert support.rel_path and support.heading_path, (query.id, support)
            lines = cache.setdefault(support.rel_path, read_lines(corpus / support.rel_path))
            n = span_line(lines, support.heading_path, phrase)
            supports.append({"rel_path": support.rel_path, "line_start": n, "line_end": n})
        if supports:
            doc["supports"] = supports
        queries.append({"id": query.id, "query": query.query, **doc})
    document = {"schema_version": "1", "name": name, "queries": queries}
    out.write_text(yaml.safe_dump(document, allow_unicode=True, sort_keys=False, width=100), encoding="utf-8")
    return out
