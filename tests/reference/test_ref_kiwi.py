"""The reference system's tokenizer choice: ``words+bigrams`` (default) and ``kiwi`` (real Kiwi).

Tests that analyse Korean with Kiwi skip without the korean extra, unless
``KEBAB_EVAL_REQUIRE_KOREAN=1`` (CI) makes that a failure.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from kebab_eval_pipeline.chain.settings import RunSettings
from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.reference import tokenizers
from kebab_eval_pipeline.reference.answer import ExtractiveAnswerer
from kebab_eval_pipeline.reference.cache import cache_key, cached_index
from kebab_eval_pipeline.reference.cli import ref_app
from kebab_eval_pipeline.reference.index import ReferenceIndex
from kebab_eval_pipeline.reference.tokenize import tokenize as words_bigrams_tokenize
from kebab_eval_pipeline.reference.tokenizers import get_tokenizer, tokenizer_for_manifest
from kebab_eval_pipeline.systems.factory import build_system
from kebab_eval_pipeline.systems.kinds.reference import ReferenceSystemSettings
from kebab_eval_pipeline.systems.reference_adapter import ReferenceSystem
from tests.conftest import korean_or_skip

runner = CliRunner()


@pytest.fixture
def kiwi():
    korean_or_skip()
    return get_tokenizer("kiwi")


@pytest.fixture(scope="module")
def kiwi_index(tmp_path_factory: pytest.TempPathFactory) -> ReferenceIndex:
    korean_or_skip()
    from tests.reference.conftest import write_corpus

    return ReferenceIndex.build(write_corpus(tmp_path_factory.mktemp("kiwi-corpus")), tokenizer="kiwi")


# --- tokens -------------------------------------------------------------------------------


def test_kiwi_keeps_nouns_and_dictionary_form_stems(kiwi) -> None:
    # Particles (를, 에, 과, 의) and endings (는, 여, 인, 이다) are gone; stems are lemmas.
    assert kiwi.tokenize("김치를 담그는 법") == ["김치", "담그다", "법"]
    assert kiwi.tokenize("김치는 배추를 소금에 절여 양념과 버무린 한국의 발효 음식이다.") == [
        "김치",
        "배추",
        "소금",
        "절이다",
        "양념",
        "버무리다",
        "한국",
        "발효",
        "음식",
    ]


def test_kiwi_particles_and_irregular_forms_meet(kiwi) -> None:
    assert kiwi.tokenize("김치를") == kiwi.tokenize("김치는") == kiwi.tokenize("김치") == ["김치"]
    # 하얗다 is irregular: 하얗고 and 하얀 share no leading bigram rule, but one lemma.
    assert "하얗다" in kiwi.tokenize("하얗고 쭈글쭈글한 막") and "하얗다" in kiwi.tokenize("하얀 막")
    # Adjacent nouns are also emitted joined, so a compound written solid matches itself.
    assert kiwi.tokenize("엿기름물") == ["엿기름", "물", "엿기름물"]


def test_kiwi_leaves_english_exactly_as_words_bigrams(kiwi) -> None:
    for text in [
        "How do I make the Kimchi? chunk_size=800, 3.5% brine",
        "Salting, salted and salts",
        "ＫＩＭＣＨＩ Brewing",
        "",
        "?! -- ...",
    ]:
        assert kiwi.tokenize(text) == words_bigrams_tokenize(text), text
    # In mixed text the Latin/digit runs keep their tokens and their order among the Korean ones.
    assert kiwi.tokenize("kebab ask는 score_gate 0.30을 쓴다") == [
        "kebab",
        "ask",
        "score",
        "gate",
        "0",
        "30",
        "쓰다",
    ]


def test_kiwi_query_terms_drop_question_words(kiwi) -> None:
    terms = kiwi.query_terms("동치미 국물은 소금을 얼마나 넣어야 하나요? 어떻게 해요?")
    assert [t.surface for t in terms] == ["동치미", "국물", "소금", "넣다"]
    assert all(t.tokens == (t.surface,) for t in terms)
    # One-syllable nouns (장) are not evidence for the gate; BM25 still gets them.
    assert [t.surface for t in kiwi.query_terms("장은 언제 담그나요?")] == ["담그다"]
    assert kiwi.tokenize("장은 언제 담그나요?") == ["장", "담그다"]
    # A compound Kiwi splits is one term for the gate (weighed once), evidenced by all its tokens.
    (term,) = kiwi.query_terms("엿기름물은?")
    assert (term.surface, term.tokens) == ("엿기름물", ("엿기름", "물", "엿기름물"))


def test_kiwi_version_names_library_and_model(kiwi) -> None:
    import kiwipiepy
    import kiwipiepy_model

    assert kiwi.version == f"kiwi-1+kiwipiepy-{kiwipiepy.__version__}+model-{kiwipiepy_model.__version__}"
    assert get_tokenizer("kiwi") is kiwi  # one instance (and one Kiwi) per process


def test_unknown_tokenizer_name() -> None:
    with pytest.raises(ValueError, match="unknown tokenizer 'mecab'; expected one of words\\+bigrams, kiwi"):
        get_tokenizer("mecab")


def test_kiwi_missing_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    # A None entry in sys.modules makes the import fail as if kiwipiepy were not installed.
    monkeypatch.setitem(sys.modules, "kiwipiepy", None)
    monkeypatch.setattr(tokenizers, "_KIWI_TOKENIZER", None)
    with pytest.raises(ValueError, match=r'pip install -e "\.\[korean\]"'):
        get_tokenizer("kiwi")
    with pytest.raises(ValueError, match=r"korean.*rebuild the index with another tokenizer"):
        tokenizer_for_manifest({"tokenizer": "kiwi", "tokenizer_version": "kiwi-1+kiwipiepy-0.24.1"})


# --- retrieval and the gate ---------------------------------------------------------------


def test_particle_laden_query_finds_the_bare_noun(tmp_path: Path, kiwi) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "dongchimi.md").write_text(
        "# 동치미\n\n동치미 국물 만들기: 물 4 L에 천일염 120 g을 녹인다.\n", encoding="utf-8"
    )
    (corpus / "kkakdugi.md").write_text(
        "# 깍두기\n\n깍두기 무는 굵은소금과 설탕에 절인다. 만들기 쉽다.\n", encoding="utf-8"
    )
    index = ReferenceIndex.build(corpus, tokenizer="kiwi")
    hits = index.search("동치미를 담글 때 국물은 어떻게 만들어요?", k=2)
    assert hits[0].doc_path == "dongchimi.md"
    # 동치미 and 국물 are matched as whole nouns; 만들다 in both documents adds evenly.
    assert index.lexical.doc_freq("동치미") == 1 and index.lexical.doc_freq("만들다") == 2


def test_gate_uses_the_index_tokenizer(kiwi_index: ReferenceIndex) -> None:
    text = "배추를 반으로 갈라 소금물에 여섯 시간 절인다."
    # kiwi: 절이나요 and 절인다 are both 절이다; words+bigrams only guesses the stem 절이.
    kiwi_gate = ExtractiveAnswerer(kiwi_index.lexical, tokenizer=kiwi_index.tokenizer)
    assert kiwi_gate.coverage("배추를 절이나요?", text) == 1.0
    assert ExtractiveAnswerer(kiwi_index.lexical).coverage("배추를 절이나요?", text) < 1.0


def test_gate_answers_on_topic_and_refuses_off_topic(kiwi_index: ReferenceIndex) -> None:
    on_topic = "소금물 농도는 얼마가 알맞나요?"
    answer = kiwi_index.ask(on_topic, kiwi_index.search(on_topic, k=5))
    assert not answer.refused
    assert answer.text.startswith("소금물 농도는 물 1리터에 소금 100그램으로 약 10퍼센트가 알맞다. [#1]")
    assert answer.citations[0].doc_path == "korean/kimchi.md"
    # Shares 배추 with the corpus, nothing else: hits come back, the gate refuses.
    off_topic = "배추 가격은 요즘 시장에서 얼마나 오르고 있나요?"
    hits = kiwi_index.search(off_topic, k=5)
    assert hits
    refused = kiwi_index.ask(off_topic, hits)
    assert refused.refused
    assert refused.refusal_reason.startswith("score_gate: top hit covers 0.")


# --- the index records its tokenizer -------------------------------------------------------


def test_round_trip_keeps_the_tokenizer(tmp_path: Path, kiwi_index: ReferenceIndex, kiwi) -> None:
    kiwi_index.save(tmp_path / "idx")
    manifest = json.loads((tmp_path / "idx" / "manifest.json").read_text(encoding="utf-8"))
    assert (manifest["tokenizer"], manifest["tokenizer_version"]) == ("kiwi", kiwi.version)
    loaded = ReferenceIndex.load(tmp_path / "idx")
    assert loaded.tokenizer is kiwi and loaded.index_version == kiwi_index.index_version
    query = "배추는 몇 시간 동안 절이나요?"
    assert loaded.search(query, k=3) == kiwi_index.search(query, k=3)


def test_index_version_depends_on_the_tokenizer(built_index: ReferenceIndex, kiwi_index) -> None:
    # Same corpus and chunking, different tokenizer: a different index.
    assert built_index.manifest["corpus_sha256"] == kiwi_index.manifest["corpus_sha256"]
    assert built_index.index_version != kiwi_index.index_version
    assert built_index.manifest["tokenizer"] == "words+bigrams"
    assert built_index.manifest["tokenizer_version"] == "mixed-ko-en-1"


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({"tokenizer_version": "kiwi-1+kiwipiepy-0.1.0+model-0.1.0"}, "version .*rebuild the index"),
        (
            {"tokenizer": "mecab", "tokenizer_version": "mecab-1"},
            "unknown tokenizer 'mecab'.*rebuild the index",
        ),
        ({"tokenizer": None, "tokenizer_version": "kiwi-0"}, "unknown tokenizer None.*rebuild the index"),
    ],
)
def test_load_refuses_other_tokenizer_versions(
    tmp_path: Path, kiwi_index: ReferenceIndex, edit: dict, message: str
) -> None:
    kiwi_index.save(tmp_path / "idx")
    path = tmp_path / "idx" / "manifest.json"
    manifest = json.loads(path.read_text(encoding="utf-8"))
    manifest.update(edit)
    if manifest["tokenizer"] is None:
        del manifest["tokenizer"]
    path.write_text(json.dumps(manifest), encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        ReferenceIndex.load(tmp_path / "idx")


def test_manifest_without_tokenizer_name_is_words_bigrams(
    tmp_path: Path, built_index: ReferenceIndex
) -> None:
    # Indexes written before the tokenizer could be chosen carry only tokenizer_version.
    built_index.save(tmp_path / "idx")
    path = tmp_path / "idx" / "manifest.json"
    manifest = json.loads(path.read_text(encoding="utf-8"))
    del manifest["tokenizer"]
    path.write_text(json.dumps(manifest), encoding="utf-8")
    loaded = ReferenceIndex.load(tmp_path / "idx")
    assert loaded.tokenizer.name == "words+bigrams"
    assert loaded.search("소금물 농도", k=1)[0].heading_path == ["김치", "절이기", "소금물 농도"]


def test_system_info_records_the_kiwi_version(kiwi_index: ReferenceIndex, kiwi) -> None:
    import kiwipiepy

    details = ReferenceSystem(kiwi_index).info().details
    assert details["tokenizer_version"] == kiwi.version
    assert details["tokenizer_version"].startswith(f"kiwi-1+kiwipiepy-{kiwipiepy.__version__}+model-")


# --- settings, cache, CLI ----------------------------------------------------------------


def test_settings_accept_and_reject_tokenizers() -> None:
    assert ReferenceSystemSettings().tokenizer == "words+bigrams"
    assert ReferenceSystemSettings(tokenizer="kiwi").tokenizer == "kiwi"
    with pytest.raises(ValidationError, match="tokenizer"):
        ReferenceSystemSettings(tokenizer="mecab")


def test_cache_keys_differ_per_tokenizer(corpus_dir: Path, kiwi, tmp_path: Path) -> None:
    default = cache_key(corpus_dir, 800, 0, False)
    assert cache_key(corpus_dir, 800, 0, False, tokenizer="words+bigrams") == default
    assert cache_key(corpus_dir, 800, 0, False, tokenizer="kiwi") != default
    built, hit = cached_index(corpus_dir, tokenizer="kiwi", cache_dir=tmp_path / "cache")
    again, hit_again = cached_index(corpus_dir, tokenizer="kiwi", cache_dir=tmp_path / "cache")
    assert (hit, hit_again) == (False, True)
    assert again.tokenizer is kiwi and again.index_version == built.index_version


def test_run_config_builds_a_kiwi_system(corpus_dir: Path, kiwi, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("KEBAB_EVAL_INDEX_CACHE", str(tmp_path / "cache"))
    settings = RunSettings.model_validate(
        {"system": {"kind": "reference", "corpus": str(corpus_dir), "tokenizer": "kiwi"}}
    )
    system = build_system(settings)
    assert system.info().details["tokenizer_version"] == kiwi.version


def test_index_setting_must_match_the_index_tokenizer(corpus_dir: Path, tmp_path: Path) -> None:
    ReferenceIndex.build(corpus_dir).save(tmp_path / "idx")
    settings = RunSettings.model_validate(
        {"system": {"kind": "reference", "index": str(tmp_path / "idx"), "tokenizer": "kiwi"}}
    )
    with pytest.raises(InputError) as info:
        build_system(settings)
    assert "built with 'words+bigrams'" in str(info.value.offenders[0].reason)


def test_cli_index_with_kiwi_then_search(corpus_dir: Path, tmp_path: Path, kiwi) -> None:
    out = tmp_path / "idx"
    result = runner.invoke(ref_app, ["index", str(corpus_dir), "--out", str(out), "--tokenizer", "kiwi"])
    assert result.exit_code == 0, result.output
    assert f"tokenizer kiwi ({kiwi.version})" in result.stdout
    result = runner.invoke(ref_app, ["search", str(out), "소금물 농도는?", "--k", "1", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["hits"][0]["heading_path"] == ["김치", "절이기", "소금물 농도"]


def test_cli_index_rejects_unknown_tokenizer(corpus_dir: Path, tmp_path: Path) -> None:
    result = runner.invoke(
        ref_app, ["index", str(corpus_dir), "--out", str(tmp_path / "i"), "--tokenizer", "x"]
    )
    assert result.exit_code == 2
    assert "unknown tokenizer 'x'" in result.stderr


def test_kiwi_from_many_threads_gives_the_serial_tokens(kiwi) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from tests.reference.conftest import KIMCHI_MD

    texts = [line for line in KIMCHI_MD.splitlines() if line.strip()] * 8
    serial = [kiwi.tokenize(t) for t in texts]
    with ThreadPoolExecutor(max_workers=8) as pool:
        assert list(pool.map(kiwi.tokenize, texts)) == serial
