"""Heading-aware chunker (SPEC §4.1, chunking).

The rules, chosen to be predictable rather than clever:

* A *section* is a heading line plus its body up to the next heading of any
  level; text before the first heading is a section with ``heading_path == []``.
  Plain text and code files are one section. Front matter is metadata, never
  chunked.
* A chunk never leaves its section, so it never crosses a heading.
* A section that fits in ``chunk_size`` characters is one chunk. A longer one is
  packed greedily from blocks (paragraphs; a fenced code block counts as one
  paragraph even with blank lines inside), a block that is itself too long from
  its lines, and a single line longer than ``chunk_size`` is cut into
  ``chunk_size``-character slices (all with that line as their span).
* The heading line always sits with the text after it, so the first chunk of a
  section may exceed ``chunk_size`` by the heading line's length — unless the
  section opens with a line longer than ``chunk_size``; then the heading line is
  a chunk of its own. A heading with no body is skipped (its words live on in the
  sub-sections' ``heading_path``).
* ``chunk_overlap`` repeats trailing whole lines of the previous chunk (at most
  that many characters) at the start of the next chunk of the same section.
* ``text`` is the exact file slice ``lines[line_start-1 : line_end]`` joined by
  newlines (except the slices of an over-long line), so spans can be verified.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

import numpy as np
from pydantic import BaseModel, Field

from kebab_eval_pipeline.reference.ingest import Document

CHUNKER_NAME = "md-heading-2"

# Fence detectors, used only to keep a code block together when packing; whether a
# `#` line is a heading was already decided by the parser in ingest. As in CommonMark,
# a closing fence carries no info string: "```js" inside a block does not close it.
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_CLOSING_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})[ \t]*$")


@dataclass(frozen=True)
class Chunk:
    """One retrievable unit: a span of 1-based inclusive file lines inside one section."""

    chunk_id: str
    doc_id: str
    doc_path: str
    heading_path: list[str]
    line_start: int
    line_end: int
    text: str


class ChunkStats(BaseModel):
    """What the chunker did, for the index manifest and for sanity checks."""

    docs_processed: int = 0
    docs_with_zero_chunks: int = 0
    zero_chunk_docs: list[str] = Field(default_factory=list)
    chunks: int = 0
    tokens_min: int = 0
    tokens_mean: float = 0.0
    tokens_p95: float = 0.0
    tokens_max: int = 0
    skipped: dict[str, int] = Field(default_factory=dict)


@dataclass
class ChunkingResult:
    chunks: list[Chunk]
    stats: ChunkStats
    skipped: list[tuple[str, int, str]] = field(default_factory=list)  # (doc_id, line, reason)


def chunker_version(chunk_size: int, chunk_overlap: int) -> str:
    """The chunker's version string, e.g. ``"md-heading-2:size=800:overlap=0"``.

    Size and overlap are part of it because they change every chunk (and so
    every chunk id); two runs are comparable only when this string matches.
    """
    return f"{CHUNKER_NAME}:size={chunk_size}:overlap={chunk_overlap}"


def chunk_documents(docs: list[Document], chunk_size: int = 800, chunk_overlap: int = 0) -> list[Chunk]:
    """Chunk documents; see :func:`chunk_corpus` (this drops the statistics)."""
    return chunk_corpus(docs, chunk_size, chunk_overlap).chunks


def chunk_corpus(docs: list[Document], chunk_size: int = 800, chunk_overlap: int = 0) -> ChunkingResult:
    """Chunk every document and report :class:`ChunkStats`.

    Inputs: documents in corpus order; ``chunk_size`` (characters, ≥ 1) and
    ``chunk_overlap`` (characters, 0 ≤ overlap < size).

    Output: chunks in document order, then file order, and the statistics.
    "Tokens" in the statistics are whitespace-separated words, a tokenizer-free
    proxy for length.

    Edge cases: invalid sizes raise ``ValueError``; empty documents and
    heading-only sections produce no chunk and are counted (zero-chunk docs,
    ``skipped["heading_only"]`` / ``skipped["empty"]``).
    """
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    if not 0 <= chunk_overlap < chunk_size:
        raise ValueError(f"chunk_overlap must be in [0, chunk_size), got {chunk_overlap}")
    version = chunker_version(chunk_size, chunk_overlap)
    chunks: list[Chunk] = []
    skipped: list[tuple[str, int, str]] = []
    zero_docs: list[str] = []
    for doc in docs:
        before = len(chunks)
        for section in _sections(doc):
            chunks.extend(_chunk_section(doc, section, chunk_size, chunk_overlap, version, skipped))
        if len(chunks) == before:
            zero_docs.append(doc.doc_id)
    stats = _stats(len(docs), zero_docs, chunks, skipped)
    return ChunkingResult(chunks=chunks, stats=stats, skipped=skipped)


@dataclass(frozen=True)
class _Section:
    start: int  # 1-based first line (the heading line when heading_line is set)
    end: int  # 1-based last line, inclusive
    heading_path: list[str]
    heading_line: int | None


def _sections(doc: Document) -> list[_Section]:
    n = len(doc.lines)
    if doc.body_start > n:
        return []
    sections: list[_Section] = []
    first_heading = doc.headings[0].line if doc.headings else n + 1
    if first_heading > doc.body_start:
        sections.append(_Section(doc.body_start, first_heading - 1, [], None))
    stack: list[tuple[int, str]] = []  # (level, text) from H1 down
    for idx, heading in enumerate(doc.headings):
        # A heading closes every open heading of its level or deeper; skipped
        # levels (H1 then H3) simply leave no entry for H2.
        while stack and stack[-1][0] >= heading.level:
            stack.pop()
        stack.append((heading.level, heading.text))
        end = doc.headings[idx + 1].line - 1 if idx + 1 < len(doc.headings) else n
        sections.append(_Section(heading.line, end, [text for _, text in stack], heading.line))
    return sections


def _blocks(doc: Document, start: int, end: int) -> list[tuple[int, int]]:
    """Paragraph-like blocks (1-based inclusive spans of non-blank lines) in [start, end]."""
    blocks: list[tuple[int, int]] = []
    cur: int | None = None
    fence: str | None = None
    for ln in range(start, end + 1):
        line = doc.lines[ln - 1]
        if doc.kind == "markdown":
            if fence is None:
                match = _FENCE.match(line)
                if match:
                    fence = match.group(1)
            else:
                match = _CLOSING_FENCE.match(line)
                if match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence):
                    fence = None
        if line.strip() or fence is not None:
            if cur is None:
                cur = ln
        elif cur is not None:
            blocks.append((cur, ln - 1))
            cur = None
    if cur is not None:
        blocks.append((cur, _last_nonblank(doc, cur, end)))
    return blocks


def _last_nonblank(doc: Document, start: int, end: int) -> int:
    # An unclosed fence runs to the section end; trailing blank lines are trimmed.
    while end > start and not doc.lines[end - 1].strip():
        end -= 1
    return end


def _chunk_section(
    doc: Document,
    section: _Section,
    size: int,
    overlap: int,
    version: str,
    skipped: list[tuple[str, int, str]],
) -> list[Chunk]:
    body_start = section.start + 1 if section.heading_line is not None else section.start
    blocks = _blocks(doc, body_start, section.end)
    if not blocks:
        # Blank lines before the first heading are layout, not a skipped chunk;
        # a heading with nothing under it is worth counting.
        if section.heading_line is not None:
            skipped.append((doc.doc_id, section.start, "heading_only"))
        return []

    def span_len(a: int, b: int) -> int:
        return sum(len(doc.lines[i - 1]) for i in range(a, b + 1)) + (b - a)

    # Pieces: whole blocks when they fit, else their lines; a line that alone
    # exceeds the size is marked for slicing.
    pieces: list[tuple[int, int, bool]] = []  # (start, end, is_overlong_line)
    for a, b in blocks:
        if span_len(a, b) <= size:
            pieces.append((a, b, False))
        else:
            # Blank lines (kept inside fences) are not pieces: a chunk should not
            # start or end on one. They stay in the text when between pieces.
            lines = [ln for ln in range(a, b + 1) if doc.lines[ln - 1].strip()]
            pieces.extend((ln, ln, len(doc.lines[ln - 1]) > size) for ln in lines)

    spans: list[tuple[int, int, int | None]] = []  # (start, end, slice offset or None)
    heading_only = (section.heading_line, section.heading_line) if section.heading_line else None
    cur: tuple[int, int] | None = heading_only
    for a, b, overlong in pieces:
        if overlong:
            # Whatever is pending goes out first — the heading line too, as its own chunk, when the
            # section opens with a line too long to share a chunk with it (else it would be lost).
            if cur is not None:
                spans.append((cur[0], cur[1], None))
            cur = None
            spans.extend((a, a, off) for off in range(0, len(doc.lines[a - 1]), size))
            continue
        if cur is None:
            cur = (a, b)
        elif cur == heading_only or span_len(cur[0], b) <= size:
            cur = (cur[0], b)
        else:
            spans.append((cur[0], cur[1], None))
            cur = (_overlap_start(doc, cur, a, b, size, overlap, span_len), b)
    if cur is not None and cur != heading_only:
        spans.append((cur[0], cur[1], None))

    chunks = []
    for a, b, offset in spans:
        text = "\n".join(doc.lines[a - 1 : b]) if offset is None else doc.lines[a - 1][offset : offset + size]
        if not text.strip():
            skipped.append((doc.doc_id, a, "empty"))
            continue
        chunks.append(
            Chunk(
                chunk_id=_chunk_id(version, doc.doc_id, a, b, offset, text),
                doc_id=doc.doc_id,
                doc_path=doc.rel_path,
                heading_path=list(section.heading_path),
                line_start=a,
                line_end=b,
                text=text,
            )
        )
    return chunks


def _overlap_start(
    doc: Document, prev: tuple[int, int], a: int, b: int, size: int, overlap: int, span_len
) -> int:
    """First line of the next chunk: ``a``, or earlier to repeat the previous chunk's tail.

    The repeated tail is whole non-blank lines, at most ``overlap`` characters,
    strictly shorter than the previous chunk (so chunks always advance), and the
    new chunk must still fit in ``size``.
    """
    best = a
    if overlap <= 0:
        return best
    for start in range(prev[1], prev[0], -1):
        if span_len(start, prev[1]) > overlap or span_len(start, b) > size:
            break
        if doc.lines[start - 1].strip():
            best = start
    return best


def _chunk_id(version: str, doc_id: str, start: int, end: int, offset: int | None, text: str) -> str:
    # Version first: a different chunk size or overlap gives every chunk a new
    # id, so results from differently-chunked indexes are never confused.
    span = f"{start}-{end}" if offset is None else f"{start}-{end}@{offset}"
    payload = "\0".join((version, doc_id, span, text)).encode("utf-8")
    return hashlib.sha256(payload).hexdigest()[:16]


def _stats(
    n_docs: int, zero_docs: list[str], chunks: list[Chunk], skipped: list[tuple[str, int, str]]
) -> ChunkStats:
    reasons: dict[str, int] = {}
    for _, _, reason in skipped:
        reasons[reason] = reasons.get(reason, 0) + 1
    base = ChunkStats(
        docs_processed=n_docs,
        docs_with_zero_chunks=len(zero_docs),
        zero_chunk_docs=zero_docs,
        skipped=dict(sorted(reasons.items())),
    )
    counts = np.array([len(c.text.split()) for c in chunks], dtype=float)
    if counts.size == 0:
        return base
    return base.model_copy(
        update=dict(
            chunks=len(chunks),
            tokens_min=int(counts.min()),
            tokens_mean=round(float(counts.mean()), 2),
            tokens_p95=round(float(np.percentile(counts, 95)), 2),
            tokens_max=int(counts.max()),
        )
    )
