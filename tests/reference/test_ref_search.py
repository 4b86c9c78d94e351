from __future__ import annotations

import json
from pathlib import Path

import pytest

from kebab_eval_pipeline.reference.index import ReferenceIndex, compute_index_version


def test_english_query_ranks_right_chunk_first(built_index: ReferenceIndex) -> None:
    hits = built_index.search("How long should I bake the sourdough loaf?", k=5)
    top = hits[0]
    assert (top.doc_path, top.heading_path, top.line_start, top.line_end) == (
        "english/sourdough.md",
        ["Sourdough", "Baking"],
        19,
        22,
    )
    assert [h.rank for h in hits] == list(range(1, len(hits) + 1))
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_korean_query_with_particles_ranks_right_chunk_first(built_index: ReferenceIndex) -> None:
    top = built_index.search("소금물 농도는 얼마인가요?", k=3)[0]
    assert (top.doc_path, top.heading_path, top.line_start, top.line_end) == (
        "korean/kimchi.md",
        ["김치", "절이기", "소금물 농도"],
        14,
        16,
    )
    assert built_index.search("김치를 담그는 법", k=1)[0].doc_path == "korean/kimchi.md"


def test_code_file_is_searchable(built_index: ReferenceIndex) -> None:
    top = built_index.search("brine ratio", k=1)[0]
    assert (top.doc_path, top.line_start, top.line_end) == ("tools/brine.py", 1, 3)


def test_zero_overlap_query_returns_no_hits(built_index: ReferenceIndex) -> None:
    assert built_index.search("What is the capital of France?", k=10) == []
    assert built_index.search("", k=10) == []
    assert built_index.search("?!", k=10) == []


def test_hit_fields(built_index: ReferenceIndex) -> None:
    hits = built_index.search("kombucha scoby", k=3)
    assert len(hits) == 3
    for h in hits:
        assert h.score_kind == "bm25"
        assert h.lexical_score == h.score and h.lexical_rank == h.rank
        assert h.vector_score is None and h.vector_rank is None
        assert h.index_version == built_index.index_version
        assert h.chunker_version == "md-heading-2:size=800:overlap=0"
        assert h.doc_id == h.doc_path
        assert h.snippet == built_index.chunk_text(h.chunk_id)  # whole chunk: gold snippets match anywhere
        assert h.chunk_id in built_index.known_chunk_ids()


def test_snippet_is_the_whole_chunk_even_when_long(tmp_path: Path, make_corpus) -> None:
    make_corpus(tmp_path, {"long.md": "# Long\n\n" + "word " * 400 + "\nthe closing sentence\n"})
    index = ReferenceIndex.build(tmp_path, chunk_size=5000)
    (hit,) = index.search("word", k=5)
    assert hit.snippet == index.chunk_text(hit.chunk_id) and len(hit.snippet) > 2000
    assert hit.snippet.endswith("the closing sentence")  # a gold snippet at the end still matches


def test_ties_break_by_chunk_order(tmp_path: Path, make_corpus) -> None:
    make_corpus(tmp_path, {"b.md": "identical text\n", "a.md": "identical text\n", "c.md": "other\n"})
    hits = ReferenceIndex.build(tmp_path).search("identical", k=10)
    assert [h.doc_path for h in hits] == ["a.md", "b.md"]
    assert hits[0].score == hits[1].score


def test_k_limits_and_validation(built_index: ReferenceIndex) -> None:
    assert len(built_index.search("kombucha", k=2)) == 2
    with pytest.raises(ValueError, match="k must be"):
        built_index.search("kombucha", k=0)


@pytest.mark.parametrize("mode", ["vector", "hybrid"])
def test_vector_modes_need_an_index_with_vectors(built_index: ReferenceIndex, mode: str) -> None:
    with pytest.raises(ValueError, match=r"built without them; rebuild it with .*--with-vectors"):
        built_index.search("kombucha", mode=mode)


def test_unknown_mode(built_index: ReferenceIndex) -> None:
    with pytest.raises(ValueError, match="unknown retrieval mode"):
        built_index.search("kombucha", mode="semantic")


def test_info(built_index: ReferenceIndex) -> None:
    info = built_index.info()
    assert info.kind == "reference"
    assert info.mode == "lexical"
    assert info.parser_version == "ingest-2:md-parser-2+text-1+code-1"
    assert info.embedding_model is None and info.embedding_version == "none"
    assert info.prompt_template_version == "extractive-1"
    assert info.embedding_model is None
    assert info.index_version == built_index.index_version and len(info.index_version) == 16
    assert info.details["tokenizer_version"] == "mixed-ko-en-1"
    assert info.details["n_chunks"] == "14"
    assert built_index.stats.chunks == 14


def test_index_version_tracks_chunking_and_corpus(tmp_path: Path, make_corpus) -> None:
    root = make_corpus(tmp_path / "c")
    v1 = ReferenceIndex.build(root).index_version
    assert ReferenceIndex.build(root).index_version == v1
    assert ReferenceIndex.build(root, chunk_size=400).index_version != v1
    (root / "notes.txt").write_text("changed\n")
    v2 = ReferenceIndex.build(root)
    assert v2.index_version != v1
    assert v2.index_version == compute_index_version(v2.chunker_version, v2.manifest["corpus_sha256"])


def test_empty_corpus_builds_and_finds_nothing(tmp_path: Path) -> None:
    index = ReferenceIndex.build(tmp_path)
    assert index.search("anything", k=5) == []
    assert index.known_chunk_ids() == frozenset()
    index.save(tmp_path / "idx")
    assert ReferenceIndex.load(tmp_path / "idx").search("anything", k=5) == []


QUERIES = [
    "How long should I bake the sourdough loaf?",
    "소금물 농도는 얼마인가요?",
    "kombucha scoby tea",
    "brine ratio",
    "What is the capital of France?",
]


def test_save_load_round_trip(built_index: ReferenceIndex, tmp_path: Path) -> None:
    built_index.save(tmp_path / "idx")
    loaded = ReferenceIndex.load(tmp_path / "idx")
    for q in QUERIES:
        assert [h.model_dump() for h in loaded.search(q, k=10)] == [
            h.model_dump() for h in built_index.search(q, k=10)
        ]
        hits = loaded.search(q, k=5)
        assert loaded.ask(q, hits) == built_index.ask(q, hits)
    assert loaded.info() == built_index.info()
    assert loaded.known_chunk_ids() == built_index.known_chunk_ids()
    assert loaded.stats == built_index.stats


def test_saved_files_identical_across_rebuilds(corpus_dir: Path, tmp_path: Path) -> None:
    ReferenceIndex.build(corpus_dir).save(tmp_path / "one")
    ReferenceIndex.build(corpus_dir).save(tmp_path / "two")
    files = sorted(p.relative_to(tmp_path / "one") for p in (tmp_path / "one").rglob("*") if p.is_file())
    assert Path("manifest.json") in files and Path("chunks.jsonl") in files
    for rel in files:
        assert (tmp_path / "one" / rel).read_bytes() == (tmp_path / "two" / rel).read_bytes(), rel


def test_load_rejects_missing_and_foreign_folders(tmp_path: Path, built_index: ReferenceIndex) -> None:
    with pytest.raises(FileNotFoundError):
        ReferenceIndex.load(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="not a reference index"):
        ReferenceIndex.load(tmp_path / "empty")
    built_index.save(tmp_path / "idx")
    manifest_path = tmp_path / "idx" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["tokenizer_version"] = "some-older-tokenizer"
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="rebuild the index"):
        ReferenceIndex.load(tmp_path / "idx")


def test_build_missing_corpus(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        ReferenceIndex.build(tmp_path / "nope")
