from __future__ import annotations

from kebab_eval_pipeline.reference.tokenize import (
    TOKENIZER_VERSION,
    QueryTerm,
    query_terms,
    stem,
    tokenize,
)


def test_korean_run_plus_bigrams() -> None:
    assert tokenize("김치를 담그는 법") == ["김치를", "김치", "치를", "담그는", "담그", "그는", "법"]


def test_korean_particle_still_matches_bare_word() -> None:
    # The bigram 김치 is shared by 김치를 / 김치는 / 김치, which is how particles are handled.
    assert "김치" in tokenize("김치를") and "김치" in tokenize("김치는") and tokenize("김치") == ["김치"]


def test_english_stopwords_stemming_and_punctuation() -> None:
    assert tokenize("How do I make the Kimchi? chunk_size=800, 3.5% brine") == [
        "make",
        "kimchi",
        "chunk",
        "size",
        "800",
        "3",
        "5",
        "brine",
    ]
    assert tokenize("Salting, salted and salts") == ["salt", "salt", "salt"]


def test_nfkc_and_lowercase() -> None:
    # Full-width letters and compatibility jamo fold to their plain forms.
    assert tokenize("ＫＩＭＣＨＩ Brewing") == ["kimchi", "brew"]


def test_mixed_script_word_splits_into_runs() -> None:
    assert tokenize("kimchi김치") == ["kimchi", "김치"]


def test_empty_and_punctuation_only() -> None:
    assert tokenize("") == []
    assert tokenize("?! -- ...") == []
    assert tokenize("the of and") == []


def test_porter_step_one_examples() -> None:
    examples = {
        "berries": "berri",
        "berry": "berri",
        "fermented": "ferment",
        "fermenting": "ferment",
        "making": "make",
        "hopping": "hop",
        "agreed": "agree",
        "caresses": "caress",
        "yeasts": "yeast",
        "fermentation": "fermentation",
        "gas": "ga",
        "ok": "ok",
        "mp3": "mp3",
        "café": "café",
    }
    assert {w: stem(w) for w in examples} == examples


def test_query_terms_strip_particles_and_question_words() -> None:
    assert query_terms("김치 소금물 농도는 얼마인가요?") == [
        QueryTerm("김치", ("김치",)),
        QueryTerm("소금물", ("소금",)),  # a Korean word is evidenced by its leading bigram
        QueryTerm("농도", ("농도",)),
    ]
    # Conjugation changes the end of a stem, not its start.
    assert query_terms("하얗고 쭈글쭈글한") == [
        QueryTerm("하얗고", ("하얗",)),
        QueryTerm("쭈글쭈글한", ("쭈글",)),
    ]
    # 법 is a single syllable: too ambiguous to count as evidence.
    assert [t.surface for t in query_terms("김치를 담그는 법")] == ["김치", "담그"]
    assert query_terms("What is the brine ratio, the BRINE ratio?") == [
        QueryTerm("brine", ("brine",)),
        QueryTerm("ratio", ("ratio",)),
    ]
    assert query_terms("what is it?") == []
    # The gate's English stopwords are wider than BM25's: contraction pieces and "before" go.
    assert [t.surface for t in query_terms("What's left before bottling? It isn't fizzy")] == [
        "left",
        "bottl",
        "fizzi",
    ]
    assert tokenize("before bottling") == ["before", "bottl"]


def test_deterministic_and_versioned() -> None:
    text = "막걸리 누룩 비율과 fermentation temperatures"
    assert tokenize(text) == tokenize(text)
    assert TOKENIZER_VERSION == "mixed-ko-en-1"
