"""Reference indexes cached on disk by corpus content and settings."""

from __future__ import annotations

from pathlib import Path

from kebab_eval_pipeline.reference.cache import cache_key, cached_index


def _entries(cache: Path) -> list[str]:
    return sorted(p.name for p in cache.iterdir()) if cache.exists() else []


def test_build_once_then_load(corpus_dir: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first, hit1 = cached_index(corpus_dir, cache_dir=cache)
    second, hit2 = cached_index(corpus_dir, cache_dir=cache)
    assert (hit1, hit2) == (False, True)
    assert second.index_version == first.index_version
    assert [c.chunk_id for c in second.chunks] == [c.chunk_id for c in first.chunks]
    assert _entries(cache) == [cache_key(corpus_dir, 800, 0, False)]  # no staging folder left behind


def test_content_and_settings_make_new_entries(corpus_dir: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    base, _ = cached_index(corpus_dir, cache_dir=cache)
    smaller, hit = cached_index(corpus_dir, chunk_size=300, cache_dir=cache)
    assert not hit and smaller.chunker_version != base.chunker_version
    excluded, hit = cached_index(corpus_dir, exclude=("notes.txt",), cache_dir=cache)
    assert not hit and excluded.manifest["n_docs"] == base.manifest["n_docs"] - 1
    # Touching a file without changing its bytes is still a hit; changing one byte is not.
    notes = corpus_dir / "notes.txt"
    notes.write_text(notes.read_text(encoding="utf-8"), encoding="utf-8")
    assert cached_index(corpus_dir, cache_dir=cache)[1] is True
    notes.write_text("Plain text notes about koji.\n", encoding="utf-8")
    edited, hit = cached_index(corpus_dir, cache_dir=cache)
    assert not hit and edited.index_version != base.index_version
    assert len(_entries(cache)) == 4


def test_broken_entry_is_rebuilt(corpus_dir: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    index, _ = cached_index(corpus_dir, cache_dir=cache)
    entry = cache / cache_key(corpus_dir, 800, 0, False)
    (entry / "chunks.jsonl").write_text('{"chunk_id": "x"}\n', encoding="utf-8")  # a corrupted entry
    rebuilt, hit = cached_index(corpus_dir, cache_dir=cache)
    assert hit is False and rebuilt.index_version == index.index_version
    assert cached_index(corpus_dir, cache_dir=cache)[1] is True


def test_vector_entries_reuse_earlier_embeddings(
    needs_vectors: None, corpus_dir: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    first, _ = cached_index(corpus_dir, with_vectors=True, cache_dir=cache)
    assert first.manifest["build"]["embeddings_reused"] == 0
    (corpus_dir / "notes.txt").write_text("Plain text notes about koji.\n", encoding="utf-8")
    second, hit = cached_index(corpus_dir, with_vectors=True, cache_dir=cache)
    assert not hit and second.has_vectors
    assert second.manifest["build"] == {"embedded": 1, "embeddings_reused": len(second.chunks) - 1}


def test_pipeline_system_builds_through_the_cache(corpus_dir: Path, tmp_path: Path, monkeypatch) -> None:
    from kebab_eval_pipeline.chain.settings import RunSettings
    from kebab_eval_pipeline.systems.factory import build_system

    cache = tmp_path / "cache"
    monkeypatch.setenv("KEBAB_EVAL_INDEX_CACHE", str(cache))
    settings = RunSettings.model_validate(
        {"system": {"kind": "reference", "corpus": str(corpus_dir), "chunk_size": 500}}
    )
    system = build_system(settings)
    assert _entries(cache) == [cache_key(corpus_dir, 500, 0, False)]
    assert system.info().chunker_version == "md-heading-2:size=500:overlap=0"
