from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kebab_eval_pipeline.reference.chunk import (
    Chunk,
    chunk_corpus,
    chunk_documents,
    chunker_version,
)
from kebab_eval_pipeline.reference.ingest import Document, parse_document, read_corpus


def _by_doc(chunks: list[Chunk], doc_id: str) -> list[Chunk]:
    return [c for c in chunks if c.doc_id == doc_id]


def _doc(docs: list[Document], doc_id: str) -> Document:
    return next(d for d in docs if d.doc_id == doc_id)


def test_heading_paths_and_line_spans_korean(corpus_dir: Path) -> None:
    docs = read_corpus(corpus_dir)
    chunks = _by_doc(chunk_documents(docs), "korean/kimchi.md")
    assert [(c.heading_path, c.line_start, c.line_end) for c in chunks] == [
        (["김치"], 6, 8),
        (["김치", "절이기"], 10, 12),
        (["김치", "절이기", "소금물 농도"], 14, 16),
        (["김치", "양념"], 18, 20),
    ]
    doc = _doc(docs, "korean/kimchi.md")
    # Spans point at the right file lines: the heading first, the text is the exact slice.
    assert doc.lines[chunks[2].line_start - 1] == "### 소금물 농도"
    body = "소금물 농도는 물 1리터에 소금 100그램으로 약 10퍼센트가 알맞다."
    assert chunks[2].text == "### 소금물 농도\n\n" + body
    for c in chunks:
        assert c.text == "\n".join(doc.lines[c.line_start - 1 : c.line_end])
        assert c.doc_path == "korean/kimchi.md"


def test_code_fence_comment_does_not_split_section(corpus_dir: Path) -> None:
    chunks = _by_doc(chunk_documents(read_corpus(corpus_dir)), "english/sourdough.md")
    assert [(c.heading_path, c.line_start, c.line_end) for c in chunks] == [
        (["Sourdough"], 1, 3),
        (["Sourdough", "Starter"], 5, 17),
        (["Sourdough", "Baking"], 19, 22),
    ]
    assert "# not a heading" in chunks[1].text and "# also not a heading" in chunks[1].text


def test_text_and_code_files_are_one_section_without_headings(corpus_dir: Path) -> None:
    chunks = chunk_documents(read_corpus(corpus_dir))
    (notes,) = _by_doc(chunks, "notes.txt")
    (code,) = _by_doc(chunks, "tools/brine.py")
    assert (notes.heading_path, notes.line_start, notes.line_end) == ([], 1, 2)
    assert (code.heading_path, code.line_start, code.line_end) == ([], 1, 3)


def test_long_section_splits_at_paragraphs_within_size(corpus_dir: Path) -> None:
    chunks = _by_doc(chunk_documents(read_corpus(corpus_dir), chunk_size=800), "english/kombucha.md")
    assert [(c.heading_path, c.line_start, c.line_end) for c in chunks] == [
        (["Kombucha", "Long notes"], 3, 21),
        (["Kombucha", "Long notes"], 23, 39),
        (["Kombucha", "Long notes"], 41, 57),
        (["Kombucha", "Long notes"], 59, 63),
        (["Kombucha", "Bottling"], 65, 67),
    ]
    assert chunks[0].text.startswith("## Long notes\n\nParagraph 00:")
    assert chunks[1].text.startswith("Paragraph 09:")  # paragraph i is on line 5 + 2i
    assert all(len(c.text) <= 800 for c in chunks)


def test_overlap_repeats_whole_trailing_lines(corpus_dir: Path) -> None:
    chunks = _by_doc(
        chunk_documents(read_corpus(corpus_dir), chunk_size=800, chunk_overlap=200), "english/kombucha.md"
    )
    spans = [(c.line_start, c.line_end) for c in chunks]
    assert spans == [(3, 21), (19, 35), (33, 49), (47, 63), (65, 67)]
    # Two 85-character paragraphs (172 characters with the blank line) fit in 200.
    assert chunks[1].text.startswith("Paragraph 07:")
    assert all(len(c.text) <= 800 for c in chunks)


def test_heading_only_section_is_skipped_and_counted(corpus_dir: Path) -> None:
    result = chunk_corpus(read_corpus(corpus_dir))
    stats = result.stats
    assert stats.docs_processed == 6
    assert stats.docs_with_zero_chunks == 1
    assert stats.zero_chunk_docs == ["korean/empty.md"]
    assert stats.chunks == 14
    assert stats.skipped == {"heading_only": 1}  # "# Kombucha" has only a sub-heading under it
    assert result.skipped == [("english/kombucha.md", 1, "heading_only")]
    assert (stats.tokens_min, stats.tokens_max) == (9, 129)


def test_chunk_ids_stable_and_versioned(corpus_dir: Path) -> None:
    docs = read_corpus(corpus_dir)
    first = [c.chunk_id for c in chunk_documents(docs)]
    again = [c.chunk_id for c in chunk_documents(read_corpus(corpus_dir))]
    assert first == again
    assert len(set(first)) == len(first)
    assert all(len(i) == 16 for i in first)
    # Same spans and text for kimchi at size 900, but a different chunker version → new ids.
    kimchi_800 = [c.chunk_id for c in _by_doc(chunk_documents(docs, chunk_size=800), "korean/kimchi.md")]
    kimchi_900 = [c.chunk_id for c in _by_doc(chunk_documents(docs, chunk_size=900), "korean/kimchi.md")]
    assert set(kimchi_800).isdisjoint(kimchi_900)
    assert chunker_version(800, 0) == "md-heading-2:size=800:overlap=0"
    assert chunker_version(512, 64) == "md-heading-2:size=512:overlap=64"


def test_editing_one_section_changes_only_its_chunk_id() -> None:
    before = chunk_documents([parse_document("a.md", b"# A\n\none\n\n## B\n\ntwo\n")])
    after = chunk_documents([parse_document("a.md", b"# A\n\none\n\n## B\n\ntwo!\n")])
    assert before[0].chunk_id == after[0].chunk_id
    assert before[1].chunk_id != after[1].chunk_id


def test_overlong_line_is_sliced_on_its_own_line() -> None:
    doc = parse_document("x.md", ("# H\n\nshort\n\n" + "x" * 25 + "\n").encode())
    chunks = chunk_documents([doc], chunk_size=10)
    assert [(c.line_start, c.line_end, c.text) for c in chunks] == [
        (1, 3, "# H\n\nshort"),
        (5, 5, "x" * 10),
        (5, 5, "x" * 10),
        (5, 5, "x" * 5),
    ]
    assert len({c.chunk_id for c in chunks}) == 4  # identical slices still get distinct ids


def test_preamble_before_first_heading_has_empty_path() -> None:
    doc = parse_document("p.md", b"---\ntitle: t\n---\n\nintro line\n\n# First\n\nbody\n")
    chunks = chunk_documents([doc])
    assert [(c.heading_path, c.line_start, c.line_end) for c in chunks] == [([], 5, 5), (["First"], 7, 9)]


def test_skipped_heading_levels() -> None:
    doc = parse_document("s.md", b"# A\n\na\n\n### C\n\nc\n\n## B\n\nb\n")
    assert [c.heading_path for c in chunk_documents([doc])] == [["A"], ["A", "C"], ["A", "B"]]


@pytest.mark.parametrize(("size", "overlap"), [(0, 0), (10, 10), (10, -1)])
def test_invalid_sizes_raise(size: int, overlap: int) -> None:
    with pytest.raises(ValueError):
        chunk_documents([], chunk_size=size, chunk_overlap=overlap)


# --- property: for random markdown, chunks never cross headings ------------------------------

_WORD = st.text(alphabet="abcxyz김치소금 0123456789", min_size=1, max_size=12).map(str.strip).filter(bool)
_LINE = st.one_of(
    st.builds(lambda lvl, w: "#" * lvl + " " + w, st.integers(1, 6), _WORD),  # heading
    st.just(""),
    st.just("```"),
    st.just("~~~"),
    st.just("# inside-or-outside a fence"),
    st.lists(_WORD, min_size=1, max_size=12).map(" ".join),  # text
    st.integers(40, 400).map(lambda n: "y" * n),  # possibly over-long line
)


@settings(max_examples=200, deadline=None)
@given(
    lines=st.lists(_LINE, max_size=40),
    front_matter=st.booleans(),
    size=st.integers(20, 300),
    overlap_share=st.floats(0, 0.9),
)
def test_property_chunks_stay_inside_sections(
    lines: list[str], front_matter: bool, size: int, overlap_share: float
) -> None:
    text = ("---\ntitle: t\n---\n" if front_matter else "") + "\n".join(lines) + "\n"
    doc = parse_document("r.md", text.encode())
    overlap = int(size * overlap_share)
    chunks = chunk_documents([doc], chunk_size=size, chunk_overlap=overlap)
    heading_lines = {h.line for h in doc.headings}
    covered: set[int] = set()
    for c in chunks:
        assert doc.body_start <= c.line_start <= c.line_end <= len(doc.lines)
        # A heading may open a chunk, never sit inside one.
        assert not any(c.line_start < ln <= c.line_end for ln in heading_lines)
        # The heading path is that of the last heading at or before the chunk.
        stack: list[tuple[int, str]] = []
        for h in doc.headings:
            if h.line > c.line_start:
                break
            while stack and stack[-1][0] >= h.level:
                stack.pop()
            stack.append((h.level, h.text))
        assert c.heading_path == [t for _, t in stack]
        assert c.text.strip()
        assert c.text in "\n".join(doc.lines[c.line_start - 1 : c.line_end])
        covered.update(range(c.line_start, c.line_end + 1))
    # Every non-blank body line that is not a heading ends up in some chunk.
    for ln in range(doc.body_start, len(doc.lines) + 1):
        if doc.lines[ln - 1].strip() and ln not in heading_lines:
            assert ln in covered, (ln, doc.lines[ln - 1])
