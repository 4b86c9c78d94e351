"""Edge cases of markdown parsing and heading-aware chunking, plus a property test.

Complements test_ref_chunk.py / test_ref_ingest.py: odd markdown (nested fences, indented
code, quotes, setext, tables), front matter / CRLF / BOM at chunk level, exact overlap spans,
chunk-id versioning by overlap, and chunk invariants on generated documents.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kebab_eval_pipeline.reference.chunk import Chunk, chunk_corpus, chunk_documents
from kebab_eval_pipeline.reference.ingest import Document, Heading, parse_document, read_corpus


def _spans(chunks: list[Chunk]) -> list[tuple[list[str], int, int]]:
    return [(c.heading_path, c.line_start, c.line_end) for c in chunks]


def _is_slice(doc: Document, c: Chunk, size: int) -> bool:
    """True when ``c.text`` is its exact file span, or a slice of an over-long single line."""
    exact = "\n".join(doc.lines[c.line_start - 1 : c.line_end])
    if c.text == exact:
        return True
    line = doc.lines[c.line_start - 1]
    return c.line_start == c.line_end and len(line) > size and len(c.text) <= size and c.text in line


# --- markdown oddities -------------------------------------------------------------------------

ODD_MD = """\
# Real

```
# fake one
```

~~~text
## fake two
~~~

````markdown
```
# fake three

```
````

    # indented, not a heading

> # quoted heading
> quoted text

Setext title
============

Setext sub
----------

## Second

tail
"""


def test_only_top_level_atx_headings_outside_code_are_headings() -> None:
    doc = parse_document("odd.md", ODD_MD.encode())
    assert doc.headings == [Heading(1, "Real", 1), Heading(2, "Second", 29)]
    assert doc.lines[12] == "# fake three"  # inside the 4-backtick fence, after a 3-backtick line
    assert doc.lines[17] == "    # indented, not a heading"
    assert doc.lines[19] == "> # quoted heading"
    assert doc.title == "Real"  # not "Setext title", not "quoted heading"


def test_odd_markdown_sections_and_fence_blocks() -> None:
    doc = parse_document("odd.md", ODD_MD.encode())
    # Whole section fits: everything up to "## Second" is one chunk under "Real".
    assert _spans(chunk_documents([doc], chunk_size=800)) == [(["Real"], 1, 27), (["Real", "Second"], 29, 31)]
    # Small size: each fence (the 4-backtick one with a blank line inside too) stays one block,
    # the quote with its "#" line is ordinary text, the setext blocks are paragraphs.
    assert _spans(chunk_documents([doc], chunk_size=40)) == [
        (["Real"], 1, 5),
        (["Real"], 7, 9),
        (["Real"], 11, 16),
        (["Real"], 18, 18),
        (["Real"], 20, 21),
        (["Real"], 23, 24),
        (["Real"], 26, 27),
        (["Real", "Second"], 29, 31),
    ]


def test_heading_text_inside_fence_never_starts_a_chunk_or_path() -> None:
    doc = parse_document("odd.md", ODD_MD.encode())
    for size in (15, 30, 60, 800):
        chunks = chunk_documents([doc], chunk_size=size)
        assert {tuple(c.heading_path) for c in chunks} == {("Real",), ("Real", "Second")}
        assert all(_is_slice(doc, c, size) for c in chunks)
        assert not any(c.line_start < 29 <= c.line_end for c in chunks)


def test_fence_line_with_info_string_does_not_close_a_fence() -> None:
    # CommonMark: a closing fence cannot carry an info string, so lines 5-11 are one code block.
    text = "# F\n\nintro paragraph here\n\n```\nx = 1\n\n```js\ny = 2\n\n```\n\nafter text\n"
    doc = parse_document("f.md", text.encode())
    assert [(c.line_start, c.line_end) for c in chunk_documents([doc], chunk_size=30)] == [
        (1, 3),
        (5, 11),
        (13, 13),
    ]


def test_lone_carriage_return_does_not_shift_heading_lines() -> None:
    doc = parse_document("cr.md", b"# A\n\nold\rmac line\n\n# B\n\nbody b\n")
    assert doc.lines[4] == "# B"
    assert doc.headings == [Heading(1, "A", 1), Heading(1, "B", 5)]
    assert _spans(chunk_documents([doc])) == [(["A"], 1, 3), (["B"], 5, 7)]


@pytest.mark.parametrize(
    ("opener", "inner", "closer"), [("```", "~~~", "```"), ("~~~", "```", "~~~"), ("````", "```", "````")]
)
def test_fenced_block_with_blank_lines_is_packed_as_one_block(opener: str, inner: str, closer: str) -> None:
    # Lines 5-11 are one code block (27-29 characters) with blank lines inside: at size 40 it
    # does not fit after the intro, so it must start a chunk of its own and end one too.
    fence = f"{opener}\ncode a\n\n{inner}\n\ncode b\n{closer}"
    text = f"# S\n\npara text of twenty.\n\n{fence}\n\nafter the fence, more text\n"
    doc = parse_document("f.md", text.encode())
    assert doc.headings == [Heading(1, "S", 1)]
    chunks = chunk_documents([doc], chunk_size=40)
    assert [(c.line_start, c.line_end) for c in chunks] == [(1, 3), (5, 11), (13, 13)]
    assert chunks[1].text.startswith(opener + "\n") and chunks[1].text.endswith("\n" + closer)


TABLE_ROWS = [f"| {i:02d} | value {i:02d} |" for i in range(12)]
TABLE_MD = (
    "# Table\n\nIntro paragraph that is long enough to matter.\n\n| id | value |\n|----|-------|\n"
    + "\n".join(TABLE_ROWS)
    + "\n\nAfter the table.\n"
)  # table on lines 5-18 (245 characters), "After the table." on line 20


def test_table_that_fits_stays_in_one_chunk() -> None:
    doc = parse_document("t.md", TABLE_MD.encode())
    chunks = chunk_documents([doc], chunk_size=260)
    assert _spans(chunks) == [(["Table"], 1, 3), (["Table"], 5, 18), (["Table"], 20, 20)]
    assert chunks[1].text == "\n".join(doc.lines[4:18])
    assert len(chunks[1].text) == 245


@pytest.mark.parametrize("size", [50, 60, 100])
def test_long_table_splits_only_at_row_boundaries(size: int) -> None:
    doc = parse_document("t.md", TABLE_MD.encode())
    chunks = chunk_documents([doc], chunk_size=size)
    table_lines = set(range(5, 19))
    seen: list[int] = []
    for c in chunks:
        assert c.text == "\n".join(doc.lines[c.line_start - 1 : c.line_end])  # whole lines only
        assert len(c.text) <= size + len("# Table\n\n") * (c.line_start == 1)
        seen.extend(ln for ln in range(c.line_start, c.line_end + 1) if ln in table_lines)
    assert seen == sorted(table_lines)  # every row exactly once, in order (no overlap)
    assert len([c for c in chunks if table_lines & set(range(c.line_start, c.line_end + 1))]) > 1


def test_front_matter_is_never_chunked_but_counts_for_line_numbers() -> None:
    text = "---\ntitle: T\n# a YAML comment, not a heading\n...\nFirst body line.\n# H\nbody\n"
    doc = parse_document("fm.md", text.encode())
    assert (doc.front_matter, doc.body_start) == ({"title": "T"}, 5)
    assert doc.headings == [Heading(1, "H", 6)]
    chunks = chunk_documents([doc])
    assert [(c.heading_path, c.line_start, c.line_end, c.text) for c in chunks] == [
        ([], 5, 5, "First body line."),
        (["H"], 6, 7, "# H\nbody"),
    ]
    for size in (5, 12, 800):
        assert all(c.line_start >= 5 for c in chunk_documents([doc], chunk_size=size))


def test_crlf_and_bom_files_chunk_exactly_like_lf(tmp_path: Path) -> None:
    lf = "---\ntitle: T\n---\n\n# One\n\nalpha beta\n\n## Two\n\ngamma\n"
    (tmp_path / "lf.md").write_bytes(lf.encode())
    (tmp_path / "crlf.md").write_bytes(lf.replace("\n", "\r\n").encode())
    (tmp_path / "bom.md").write_bytes(b"\xef\xbb\xbf" + lf.replace("\n", "\r\n").encode())
    docs = {d.doc_id: d for d in read_corpus(tmp_path)}
    assert len({d.content_sha256 for d in docs.values()}) == 3  # the bytes do differ
    expected = [(["One"], 5, 7), (["One", "Two"], 9, 11)]
    texts = None
    for name in ("lf.md", "crlf.md", "bom.md"):
        doc = docs[name]
        assert doc.front_matter == {"title": "T"} and doc.title == "T"
        chunks = chunk_documents([doc])
        assert _spans(chunks) == expected
        assert not any("\r" in c.text or "\ufeff" in c.text for c in chunks)
        texts = texts or [c.text for c in chunks]
        assert [c.text for c in chunks] == texts == ["# One\n\nalpha beta", "## Two\n\ngamma"]


def test_zero_chunk_documents_are_counted(tmp_path: Path, make_corpus) -> None:
    make_corpus(
        tmp_path,
        {
            "a_heading_only.md": "# Just a title\n",
            "b_headings_only.md": "# A\n\n## B\n\n### C\n",
            "c_front_matter_only.md": "---\ntitle: x\n---\n",
            "d_empty.md": "",
            "e_real.md": "# R\n\nreal text\n",
        },
    )
    result = chunk_corpus(read_corpus(tmp_path))
    assert _spans(result.chunks) == [(["R"], 1, 3)]
    assert result.stats.docs_processed == 5
    assert result.stats.docs_with_zero_chunks == 4
    assert result.stats.zero_chunk_docs == [
        "a_heading_only.md",
        "b_headings_only.md",
        "c_front_matter_only.md",
        "d_empty.md",
    ]
    assert result.stats.skipped == {"heading_only": 4}
    assert result.skipped == [
        ("a_heading_only.md", 1, "heading_only"),
        ("b_headings_only.md", 1, "heading_only"),
        ("b_headings_only.md", 3, "heading_only"),
        ("b_headings_only.md", 5, "heading_only"),
    ]


# --- spans, overlap, ids -----------------------------------------------------------------------


@pytest.mark.parametrize(("size", "overlap"), [(40, 0), (40, 20), (120, 60), (300, 0), (800, 200)])
def test_every_chunk_is_its_file_slice_and_never_crosses_a_heading(
    corpus_dir: Path, size: int, overlap: int
) -> None:
    docs = {d.doc_id: d for d in read_corpus(corpus_dir)}
    chunks = chunk_documents(list(docs.values()), chunk_size=size, chunk_overlap=overlap)
    assert chunks
    for c in chunks:
        doc = docs[c.doc_id]
        assert _is_slice(doc, c, size), (c.doc_id, c.line_start, c.line_end)
        assert not any(c.line_start < h.line <= c.line_end for h in doc.headings)


# One heading (4 chars), a blank line, then ten 18-character lines forming one paragraph (lines 3-12).
OVERLAP_MD = "# Ov\n\n" + "\n".join(f"row {i:02d} abcdefghijk" for i in range(10)) + "\n"


@pytest.mark.parametrize(
    ("overlap", "spans"),
    [
        (0, [(1, 5), (6, 8), (9, 11), (12, 12)]),
        # 25 characters hold one 18-character line: each chunk repeats the previous one's last line.
        (25, [(1, 5), (5, 7), (7, 9), (9, 11), (11, 12)]),
        # 40 hold two lines (37 with the newline), but the next chunk must still fit in 70.
        (40, [(1, 5), (4, 6), (5, 7), (6, 8), (7, 9), (8, 10), (9, 11), (10, 12)]),
    ],
)
def test_overlap_shares_boundary_lines_and_always_advances(
    overlap: int, spans: list[tuple[int, int]]
) -> None:
    doc = parse_document("ov.md", OVERLAP_MD.encode())
    assert all(len(line) == 18 for line in doc.lines[2:])
    chunks = chunk_documents([doc], chunk_size=70, chunk_overlap=overlap)
    assert [(c.line_start, c.line_end) for c in chunks] == spans
    for prev, nxt in itertools.pairwise(chunks):
        assert nxt.line_start > prev.line_start and nxt.line_end > prev.line_end  # always advances
        if overlap:
            assert nxt.line_start <= prev.line_end  # shares its boundary lines
            shared = doc.lines[nxt.line_start - 1 : prev.line_end]
            assert prev.text.endswith("\n".join(shared)) and nxt.text.startswith("\n".join(shared))
        else:
            assert nxt.line_start > prev.line_end
        assert len(nxt.text) <= 70


def test_chunk_ids_change_with_overlap_and_stay_otherwise() -> None:
    doc = parse_document("ov.md", OVERLAP_MD.encode())
    other = parse_document("0_other.md", b"# Other\n\nunrelated text\n")
    no_overlap = chunk_documents([doc], chunk_size=70, chunk_overlap=0)
    with_overlap = chunk_documents([doc], chunk_size=70, chunk_overlap=25)
    # Same span, same text, different chunker version → different id.
    assert (no_overlap[0].line_start, no_overlap[0].line_end, no_overlap[0].text) == (
        with_overlap[0].line_start,
        with_overlap[0].line_end,
        with_overlap[0].text,
    )
    assert no_overlap[0].chunk_id != with_overlap[0].chunk_id
    assert {c.chunk_id for c in no_overlap}.isdisjoint(c.chunk_id for c in with_overlap)
    # Same parameters: same ids, whether re-parsed or chunked next to another document.
    again = chunk_documents(
        [other, parse_document("ov.md", OVERLAP_MD.encode())], chunk_size=70, chunk_overlap=25
    )
    assert [c.chunk_id for c in again if c.doc_id == "ov.md"] == [c.chunk_id for c in with_overlap]
    # A different doc_id (a renamed file) with identical bytes gets new ids.
    renamed = chunk_documents(
        [parse_document("moved.md", OVERLAP_MD.encode())], chunk_size=70, chunk_overlap=25
    )
    assert {c.chunk_id for c in renamed}.isdisjoint(c.chunk_id for c in with_overlap)


# --- property: generated markdown --------------------------------------------------------------

_WORD = st.sampled_from(["brine", "salt", "x", "김치", "소금물", "42", "a1b2", "yyyyyyyyyyyy"])
_WORDS = st.lists(_WORD, min_size=1, max_size=10).map(" ".join)


@st.composite
def _fence(draw) -> list[str]:
    char = draw(st.sampled_from("`~"))
    n = draw(st.integers(3, 5))
    opener = char * n + draw(st.sampled_from(["", "python", "text"]))
    inner = ["# fake heading", "## fake two", "", "~~~" if char == "`" else "```", "x = 1"]
    if n > 3:
        inner.append(char * (n - 1))  # a shorter fence line does not close it
    body = draw(st.lists(st.sampled_from(inner) | _WORDS, max_size=6))
    return [opener, *body, char * draw(st.integers(n, n + 1))]


# Each block: (lines, heading text or None). Only an ATX "heading" block makes a heading.
_HEADING = st.builds(lambda lvl, w: (["#" * lvl + " " + w], w), st.integers(1, 6), _WORDS)
_PARAGRAPH = st.lists(_WORDS, min_size=1, max_size=5).map(lambda ls: (ls, None))
_BLOCK = st.one_of(
    _HEADING,
    _HEADING,
    _HEADING,  # listed several times to make headings and paragraphs the common blocks
    _PARAGRAPH,
    _PARAGRAPH,
    _fence().map(lambda ls: (ls, None)),
    st.just((["    # indented code"], None)),
    st.just((["> # quoted", "> quote text"], None)),
    st.just((["Setext words", "======"], None)),
    st.integers(60, 250).map(lambda n: (["y" * n], None)),  # often an over-long line
)


@st.composite
def _markdown(draw) -> tuple[str, list[tuple[int, str]]]:
    """A document and its true ATX headings as (1-based line, text)."""
    lines: list[str] = []
    expected: list[tuple[int, str]] = []
    if draw(st.booleans()):
        lines += ["---", "title: generated", "---"]
    prev_heading = True
    for block, heading in draw(st.lists(_BLOCK, min_size=4, max_size=16)):
        # Blocks are separated by blank lines, except a heading may touch its neighbours.
        blanks = draw(st.integers(0 if (heading or prev_heading) else 1, 2))
        if block[0].startswith("    "):
            blanks = max(blanks, 1)  # indented code cannot interrupt a paragraph
        lines += [""] * blanks
        if heading is not None:
            expected.append((len(lines) + 1, heading))
        lines += block
        prev_heading = heading is not None
    if draw(st.booleans()):
        lines += ["", "```", "# in an unclosed fence", "", "## still code"]  # runs to the end
    return "\n".join(lines) + "\n", expected


def _check_invariants(doc: Document, chunks: list[Chunk], size: int, overlap: int) -> None:
    heading_lines = {h.line for h in doc.headings}
    ids = [c.chunk_id for c in chunks]
    assert len(ids) == len(set(ids))
    for c in chunks:
        assert doc.body_start <= c.line_start <= c.line_end <= len(doc.lines)
        assert _is_slice(doc, c, size)
        assert not any(c.line_start < ln <= c.line_end for ln in heading_lines)
        if c.line_start in heading_lines:
            # Only the heading line and the blank lines under it may exceed the size.
            rest = doc.lines[c.line_start : c.line_end]
            while rest and not rest[0].strip():
                rest = rest[1:]
            assert len("\n".join(rest)) <= size
        elif not (c.line_start == c.line_end and len(doc.lines[c.line_start - 1]) > size):
            assert len(c.text) <= size
    for prev, nxt in itertools.pairwise(chunks):
        same_long_line = prev.line_start == prev.line_end == nxt.line_start == nxt.line_end
        assert (nxt.line_start, nxt.line_end) > (prev.line_start, prev.line_end) or same_long_line
        if overlap == 0 and not same_long_line:
            assert nxt.line_start > prev.line_end


@settings(max_examples=60, deadline=None)
@given(
    generated=_markdown(),
    size=st.integers(20, 300),
    overlap_share=st.floats(0, 0.9),
    crlf=st.booleans(),
    bom=st.booleans(),
)
def test_property_generated_markdown_chunk_invariants(
    generated: tuple[str, list[tuple[int, str]]], size: int, overlap_share: float, crlf: bool, bom: bool
) -> None:
    text, expected_headings = generated
    overlap = int(size * overlap_share)
    doc = parse_document("gen.md", text.encode())
    assert [(h.line, h.text) for h in doc.headings] == expected_headings
    chunks = chunk_documents([doc], chunk_size=size, chunk_overlap=overlap)
    _check_invariants(doc, chunks, size, overlap)
    # Deterministic, and line-ending / BOM agnostic: the same chunks, ids included.
    raw = text.replace("\n", "\r\n") if crlf else text
    variant = parse_document("gen.md", (b"\xef\xbb\xbf" if bom else b"") + raw.encode())
    assert chunk_documents([variant], chunk_size=size, chunk_overlap=overlap) == chunks


def test_heading_before_an_over_long_first_line_is_kept_as_its_own_chunk() -> None:
    doc = parse_document("h.md", ("# H\n\n" + "x" * 25 + "\n").encode())
    chunks = chunk_documents([doc], chunk_size=10)
    assert [(c.line_start, c.line_end, c.text) for c in chunks] == [
        (1, 1, "# H"),
        (3, 3, "x" * 10),
        (3, 3, "x" * 10),
        (3, 3, "x" * 5),
    ]
    assert len({c.chunk_id for c in chunks}) == 4  # slices of one line still get distinct ids
