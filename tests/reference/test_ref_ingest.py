from __future__ import annotations

from pathlib import Path

import pytest

from kebab_eval_pipeline.reference.ingest import (
    PARSER_VERSION,
    Heading,
    corpus_sha256,
    parse_document,
    read_corpus,
)


def test_read_corpus_sorted_relative_paths_and_kinds(corpus_dir: Path) -> None:
    docs = read_corpus(corpus_dir)
    assert [d.doc_id for d in docs] == [
        "english/kombucha.md",
        "english/sourdough.md",
        "korean/empty.md",
        "korean/kimchi.md",
        "notes.txt",
        "tools/brine.py",
    ]
    assert all(d.doc_id == d.rel_path for d in docs)
    assert [d.kind for d in docs] == ["markdown", "markdown", "markdown", "markdown", "text", "code"]
    assert PARSER_VERSION == "ingest-2:md-parser-2+text-1+code-1"
    assert [d.parser_version for d in docs] == ["md-parser-2"] * 4 + ["text-1", "code-1"]


def test_front_matter_title_and_true_line_numbers(corpus_dir: Path) -> None:
    doc = {d.doc_id: d for d in read_corpus(corpus_dir)}["korean/kimchi.md"]
    assert doc.front_matter == {"title": "김치 담그기", "tags": ["korean", "fermentation"]}
    assert doc.title == "김치 담그기"
    assert doc.body_start == 5
    # Front matter stays in `lines`, so lines[n - 1] is file line n.
    assert doc.lines[0] == "---"
    assert doc.lines[13] == "### 소금물 농도"
    assert doc.headings == [
        Heading(1, "김치", 6),
        Heading(2, "절이기", 10),
        Heading(3, "소금물 농도", 14),
        Heading(2, "양념", 18),
    ]
    assert doc.warnings == []


def test_headings_inside_code_fences_are_ignored(corpus_dir: Path) -> None:
    doc = {d.doc_id: d for d in read_corpus(corpus_dir)}["english/sourdough.md"]
    assert doc.headings == [Heading(1, "Sourdough", 1), Heading(2, "Starter", 5), Heading(2, "Baking", 19)]
    assert doc.lines[10] == "# not a heading"
    assert doc.lines[15] == "# also not a heading"
    assert doc.title == "Sourdough"  # no front matter: first H1


def test_text_and_code_files_have_no_headings(corpus_dir: Path) -> None:
    docs = {d.doc_id: d for d in read_corpus(corpus_dir)}
    assert docs["notes.txt"].headings == []
    assert docs["tools/brine.py"].headings == []
    assert docs["tools/brine.py"].title == "brine"
    assert docs["tools/brine.py"].lines == [
        "# brine calculator",
        "def brine_ratio(salt, water):",
        "    return salt / water",
    ]


def test_atx_closing_hashes_and_empty_heading() -> None:
    doc = parse_document("a.md", b"## Brine ratio ##\ntext\n#\nmore\n   ### Indented up to three\n")
    assert doc.headings == [Heading(2, "Brine ratio", 1), Heading(3, "Indented up to three", 5)]


def test_setext_headings_are_not_headings() -> None:
    doc = parse_document("a.md", b"Title\n=====\n\nbody\n")
    assert doc.headings == []


def test_malformed_front_matter_is_text_with_warning() -> None:
    doc = parse_document("bad.md", b"---\ntitle: [unclosed\n---\n# Real heading\nbody\n")
    assert doc.front_matter == {}
    assert doc.body_start == 1
    assert len(doc.warnings) == 1 and "malformed front matter" in doc.warnings[0]
    assert doc.headings == [Heading(1, "Real heading", 4)]


def test_unclosed_front_matter_is_text_with_warning() -> None:
    doc = parse_document("open.md", b"---\ntitle: x\n# Heading\n")
    assert doc.front_matter == {}
    assert "never closed" in doc.warnings[0]
    assert doc.headings == [Heading(1, "Heading", 3)]


def test_non_mapping_front_matter_is_text_with_warning() -> None:
    doc = parse_document("list.md", b"---\n- a\n- b\n---\nbody\n")
    assert doc.front_matter == {}
    assert "not a mapping" in doc.warnings[0]


def test_invalid_utf8_is_replaced_and_warned() -> None:
    doc = parse_document("latin1.md", "café\n".encode("latin-1"))
    assert doc.lines == ["caf\ufffd"]
    assert doc.warnings == ["latin1.md: invalid UTF-8 at byte 3, replaced undecodable bytes"]


def test_crlf_bom_and_form_feed() -> None:
    doc = parse_document("w.md", "\ufeff# T\r\nline\x0cwith form feed\r\n".encode())
    # \x0c is not a line break for editors, so it must not be one here either.
    assert doc.lines == ["# T", "line\x0cwith form feed"]
    assert doc.headings == [Heading(1, "T", 1)]


def test_hidden_folders_and_other_suffixes_are_skipped(tmp_path: Path, make_corpus) -> None:
    make_corpus(tmp_path, {"a.md": "# A\n", ".git/x.md": "# no\n", "img.png": "x", "b.yaml": "k: v\n"})
    assert [d.doc_id for d in read_corpus(tmp_path)] == ["a.md", "b.yaml"]


def test_missing_or_file_corpus_dir(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_corpus(tmp_path / "nope")
    (tmp_path / "f.md").write_text("x")
    with pytest.raises(NotADirectoryError):
        read_corpus(tmp_path / "f.md")


def test_corpus_hash_tracks_content_not_order(tmp_path: Path, make_corpus) -> None:
    make_corpus(tmp_path, {"a.md": "alpha\n", "b.md": "beta\n"})
    docs = read_corpus(tmp_path)
    first = corpus_sha256(docs)
    assert first == corpus_sha256(list(reversed(docs)))
    (tmp_path / "b.md").write_text("beta changed\n")
    assert corpus_sha256(read_corpus(tmp_path)) != first
    (tmp_path / "b.md").write_text("beta\n")
    assert corpus_sha256(read_corpus(tmp_path)) == first
    (tmp_path / "b.md").rename(tmp_path / "c.md")
    assert corpus_sha256(read_corpus(tmp_path)) != first
