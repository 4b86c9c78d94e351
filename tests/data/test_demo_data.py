"""Validation of the bundled demo data (fermentation handbook corpus + golden set).

Checks that the demo corpus is large and well-formed enough to exercise the
pipeline, and that every gold support in ``golden.yaml`` really points at an
existing heading chain whose section text holds the ``must_contain`` strings.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest
import yaml

from kebab_eval_pipeline.golden.model import GoldenSet

DEMO_DIR = Path(__file__).resolve().parents[2] / "kebab_eval_pipeline" / "data" / "demo"
CORPUS_DIR = DEMO_DIR / "corpus"
GOLDEN_PATH = DEMO_DIR / "golden.yaml"

UNANSWERABLE_CATEGORIES = {"out_of_scope", "adversarial"}


# --------------------------------------------------------------------------- heading parsing

_FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_ATX_RE = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
_CLOSING_HASHES_RE = re.compile(r"(?:^|[ \t]+)#+[ \t]*$")


@dataclass(frozen=True)
class Heading:
    line: int  # 0-based index into the document's lines
    level: int
    path: tuple[str, ...]  # heading texts from the top-level heading down to this one


def _front_matter_end(lines: list[str]) -> int:
    """Index of the first line after a leading ``---`` YAML front matter block (0 if none)."""
    if lines and lines[0].strip() == "---":
        for i in range(1, len(lines)):
            if lines[i].strip() in ("---", "..."):
                return i + 1
    return 0


def _closes_fence(line: str, marker: str, opening: str) -> bool:
    """A closing fence uses the opening character, is at least as long, and has no info string."""
    same_kind = marker[0] == opening[0] and len(marker) >= len(opening)
    return same_kind and not line.strip()[len(marker) :].strip()


def parse_headings(text: str) -> tuple[list[str], list[Heading]]:
    """ATX headings outside front matter and fenced code blocks, with their heading stacks."""
    lines = text.splitlines()
    headings: list[Heading] = []
    stack: list[tuple[int, str]] = []
    fence: str | None = None
    for i in range(_front_matter_end(lines), len(lines)):
        line = lines[i]
        fence_match = _FENCE_RE.match(line)
        if fence_match:
            marker = fence_match.group(1)
            if fence is None:
                fence = marker
            elif _closes_fence(line, marker, fence):
                fence = None
            continue
        if fence is not None:
            continue
        match = _ATX_RE.match(line)
        if not match:
            continue
        level = len(match.group(1))
        title = _CLOSING_HASHES_RE.sub("", match.group(2) or "").strip()
        stack = [(lvl, t) for lvl, t in stack if lvl < level]
        stack.append((level, title))
        headings.append(Heading(line=i, level=level, path=tuple(t for _, t in stack)))
    return lines, headings


def section_text(lines: list[str], headings: list[Heading], heading: Heading) -> str:
    """Lines from ``heading`` up to the next heading of the same or a higher level."""
    end = len(lines)
    for other in headings:
        if other.line > heading.line and other.level <= heading.level:
            end = other.line
            break
    return "\n".join(lines[heading.line : end])


def hangul_dominant(text: str) -> bool:
    hangul = sum(1 for ch in text if "\uac00" <= ch <= "\ud7a3")
    latin = sum(1 for ch in text if ch.isascii() and ch.isalpha())
    return hangul > latin


# --------------------------------------------------------------------------- fixtures


@cache
def _doc(rel_path: str) -> tuple[list[str], list[Heading]]:
    return parse_headings((CORPUS_DIR / rel_path).read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def docs() -> dict[str, str]:
    return {
        p.relative_to(CORPUS_DIR).as_posix(): p.read_text(encoding="utf-8")
        for p in sorted(CORPUS_DIR.rglob("*.md"))
    }


@pytest.fixture(scope="module")
def golden() -> GoldenSet:
    doc = yaml.safe_load(GOLDEN_PATH.read_text(encoding="utf-8"))
    return GoldenSet(**doc)


# --------------------------------------------------------------------------- parser self-test


def test_heading_parser_skips_code_fences_and_front_matter() -> None:
    text = "---\ntitle: x\n---\n# A\n\n```python\n# not a heading\n```\n## B\n### C\ntext\n## D ##\n"
    lines, heads = parse_headings(text)
    assert [h.path for h in heads] == [("A",), ("A", "B"), ("A", "B", "C"), ("A", "D")]
    assert section_text(lines, heads, heads[1]) == "## B\n### C\ntext"


# --------------------------------------------------------------------------- corpus


def test_corpus_size(docs: dict[str, str]) -> None:
    assert len(docs) >= 40


def test_korean_documents(docs: dict[str, str]) -> None:
    korean = [p for p, text in docs.items() if hangul_dominant(text)]
    assert len(korean) >= 10, korean


CORPUS_FILES = sorted(p.relative_to(CORPUS_DIR).as_posix() for p in CORPUS_DIR.rglob("*.md"))


@pytest.mark.parametrize("rel_path", CORPUS_FILES)
def test_document_has_exactly_one_h1(rel_path: str) -> None:
    _, heads = _doc(rel_path)
    h1 = [h for h in heads if h.level == 1]
    assert len(h1) == 1, f"{rel_path}: {len(h1)} H1 headings"
    assert heads[0].level == 1, f"{rel_path}: first heading is not the H1"


def test_recency_conflict_pair_has_different_dates(docs: dict[str, str]) -> None:
    dates = {}
    for name in ("safety/brine-guidelines-2019.md", "safety/brine-guidelines-2024.md"):
        front = docs[name].split("---")[1]
        dates[name] = yaml.safe_load(front)["updated"]
    assert len(set(dates.values())) == 2


# --------------------------------------------------------------------------- golden set


def test_query_counts(golden: GoldenSet) -> None:
    queries = golden.queries
    assert len(queries) >= 60
    ids = [q.id for q in queries]
    assert len(ids) == len(set(ids)), [i for i, n in Counter(ids).items() if n > 1]

    categories = Counter(q.category for q in queries)
    assert categories["factual"] >= 30
    assert categories["multi_hop"] >= 10
    assert categories["recency_conflict"] >= 2
    assert sum(categories[c] for c in UNANSWERABLE_CATEGORIES) >= 8

    assert sum(1 for q in queries if q.lang == "ko") >= 12
    assert {q.difficulty for q in queries} == {"easy", "medium", "hard"}


def test_unanswerable_queries(golden: GoldenSet) -> None:
    unanswerable = [q for q in golden.queries if not q.answerable]
    assert len(unanswerable) >= 8
    for q in unanswerable:
        assert q.supports == [], q.id
        assert q.category in UNANSWERABLE_CATEGORIES, q.id
    for q in golden.queries:
        if q.category in UNANSWERABLE_CATEGORIES:
            assert not q.answerable, q.id
        else:
            assert q.answerable and q.supports, q.id


def test_paraphrase_groups(golden: GoldenSet) -> None:
    groups: dict[str, list] = {}
    for q in golden.queries:
        if q.group:
            groups.setdefault(q.group, []).append(q)
    assert len(groups) >= 5
    for name, members in groups.items():
        assert len(members) >= 2, name
        first = [s.model_dump() for s in members[0].supports]
        for q in members[1:]:
            assert [s.model_dump() for s in q.supports] == first, f"{name}: {q.id} differs"


def test_multi_hop_queries(golden: GoldenSet) -> None:
    for q in golden.queries:
        if q.category != "multi_hop":
            continue
        assert len(q.supports) >= 2, q.id
        assert len({s.rel_path for s in q.supports}) >= 2, f"{q.id}: supports must span documents"
        assert q.required_support_groups, q.id


def test_recency_queries(golden: GoldenSet) -> None:
    for q in golden.queries:
        if q.category == "recency_conflict":
            assert q.recency_rule is not None, q.id
            paths = {s.rel_path for s in q.supports}
            assert paths == {"safety/brine-guidelines-2019.md", "safety/brine-guidelines-2024.md"}, q.id


def test_required_support_groups_in_range(golden: GoldenSet) -> None:
    for q in golden.queries:
        for group in q.required_support_groups:
            assert group, q.id
            for idx in group:
                assert 0 <= idx < len(q.supports), f"{q.id}: index {idx} out of range"


def _support_cases() -> list:
    doc = yaml.safe_load(GOLDEN_PATH.read_text(encoding="utf-8"))
    cases = []
    for q in GoldenSet(**doc).queries:
        for i, s in enumerate(q.supports):
            cases.append(pytest.param(s.rel_path, tuple(s.heading_path or ()), id=f"{q.id}[{i}]"))
    return cases


@pytest.mark.parametrize(("rel_path", "heading_path"), _support_cases())
def test_support_heading_path_exists(rel_path: str, heading_path: tuple[str, ...]) -> None:
    assert rel_path, "support without rel_path"
    assert (CORPUS_DIR / rel_path).is_file(), f"missing file {rel_path}"
    assert heading_path, f"{rel_path}: empty heading_path"
    _, heads = _doc(rel_path)
    assert any(h.path == heading_path for h in heads), f"{rel_path}: no heading chain {list(heading_path)}"


def _must_contain_cases() -> list:
    doc = yaml.safe_load(GOLDEN_PATH.read_text(encoding="utf-8"))
    return [pytest.param(q, id=q.id) for q in GoldenSet(**doc).queries if q.must_contain]


@pytest.mark.parametrize("query", _must_contain_cases())
def test_must_contain_in_supported_section(query) -> None:
    """Each must_contain string occurs verbatim in (at least one of) the supported sections."""
    sections = []
    for s in query.supports:
        lines, heads = _doc(s.rel_path)
        matches = [h for h in heads if h.path == tuple(s.heading_path)]
        assert matches, f"{query.id}: heading chain not found"
        sections.extend(section_text(lines, heads, h) for h in matches)
    for needle in query.must_contain:
        assert any(needle in text for text in sections), f"{query.id}: {needle!r} not in supported section"
