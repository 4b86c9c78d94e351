from __future__ import annotations

import math

import pytest

from kebab_eval_pipeline.contract import Hit
from kebab_eval_pipeline.reference.answer import (
    PROMPT_TEMPLATE_VERSION,
    REFUSAL_TEXT,
    ExtractiveAnswerer,
    split_sentences,
)
from kebab_eval_pipeline.reference.index import ReferenceIndex


def _ask(index: ReferenceIndex, query: str, k: int = 5, **kw):
    hits = index.search(query, k=k)
    return hits, index.ask(query, hits, **kw)


def test_english_answer_cites_right_chunk(built_index: ReferenceIndex) -> None:
    hits, answer = _ask(built_index, "How long should I bake the sourdough loaf?")
    assert not answer.refused and answer.grounded
    assert answer.text == "Bake the loaf at 230 degrees Celsius for forty minutes. [#1]"
    (citation,) = answer.citations
    assert citation.marker == "[#1]"
    assert (citation.chunk_id, citation.doc_path, citation.line_start, citation.line_end) == (
        hits[0].chunk_id,
        "english/sourdough.md",
        19,
        22,
    )
    assert answer.prompt_template_version == PROMPT_TEMPLATE_VERSION == "extractive-1"


def test_korean_answer_cites_right_chunk(built_index: ReferenceIndex) -> None:
    hits, answer = _ask(built_index, "소금물 농도는 얼마인가요?")
    assert not answer.refused
    assert answer.text.startswith("소금물 농도는 물 1리터에 소금 100그램으로 약 10퍼센트가 알맞다. [#1]")
    assert answer.citations[0].marker == "[#1]"
    assert answer.citations[0].chunk_id == hits[0].chunk_id
    assert (answer.citations[0].line_start, answer.citations[0].line_end) == (14, 16)


def test_sentences_from_several_hits_get_their_own_markers(built_index: ReferenceIndex) -> None:
    _, answer = _ask(built_index, "kombucha second fermentation with fruit juice, scoby culture")
    markers = [c.marker for c in answer.citations]
    assert markers[0] == "[#1]" and len(markers) == len(set(markers))
    for marker in markers:
        assert marker in answer.text


def test_score_gate_refuses_off_topic_query(built_index: ReferenceIndex) -> None:
    hits, answer = _ask(built_index, "Which football team lost the sourdough championship in 1998?")
    assert hits, "the query shares 'sourdough' with the corpus, so retrieval does return hits"
    # Only "sourdough" (df = 3 of 14 chunks) is covered; the five other content words are
    # unseen and each weighs the maximal IDF ln(1 + 14.5 / 0.5).
    covered = math.log(1 + (14 - 3 + 0.5) / (3 + 0.5))
    expected = covered / (covered + 5 * math.log(1 + 14.5 / 0.5))
    assert round(expected, 2) == 0.08
    assert answer.refused and not answer.grounded
    assert answer.citations == []
    assert answer.text == REFUSAL_TEXT
    assert answer.refusal_reason == "score_gate: top hit covers 0.08 of the query's IDF mass (threshold 0.35)"


def test_score_gate_no_hits_and_no_content_words(built_index: ReferenceIndex) -> None:
    _, answer = _ask(built_index, "What is the capital of France?")
    assert answer.refused and answer.refusal_reason == "score_gate: no hits"
    hits = built_index.search("sourdough", k=3)
    answer = built_index.ask("what is it?", hits)
    assert answer.refused and answer.refusal_reason == "score_gate: query has no content words"


def test_threshold_is_configurable(built_index: ReferenceIndex) -> None:
    query = "Which football team lost the sourdough championship in 1998?"
    _, answer = _ask(built_index, query, gate_threshold=0.05)
    assert not answer.refused and answer.citations[0].marker == "[#1]"
    with pytest.raises(ValueError):
        ExtractiveAnswerer(built_index.lexical, threshold=1.5)


def test_coverage_is_one_when_top_chunk_has_every_word(built_index: ReferenceIndex) -> None:
    answerer = ExtractiveAnswerer(built_index.lexical)
    hit = built_index.search("sourdough starter flour", k=1)[0]
    # "sourdough" is only in the heading path; the gate looks at path + text, as retrieval does.
    assert answerer.coverage("sourdough starter flour", hit.snippet) < 1.0
    text = "\n".join([*hit.heading_path, hit.snippet])
    assert answerer.coverage("sourdough starter flour", text) == 1.0
    assert answerer.coverage("the of", text) is None


def test_heading_only_match_falls_back_to_first_sentence(built_index: ReferenceIndex) -> None:
    # "양념" appears in the heading path and in the body; "Bottling" only in a heading.
    hits, answer = _ask(built_index, "Bottling")
    assert hits[0].heading_path == ["Kombucha", "Bottling"]
    assert answer.text == "Bottle the kombucha with a little fruit juice for a second fermentation. [#1]"


def test_unknown_chunk_ids_use_the_snippet(built_index: ReferenceIndex) -> None:
    hit = Hit(rank=1, chunk_id="elsewhere", doc_path="x.md", snippet="Sourdough needs a starter.")
    answer = built_index.ask("sourdough starter", [hit])
    assert answer.text == "Sourdough needs a starter. [#1]"
    assert answer.citations[0].chunk_id == "elsewhere"


def test_split_sentences() -> None:
    text = (
        "## Heading\n\nFirst sentence. Second one\ncontinues here! Third?\n\n"
        "- item one\n- item two\n\n```\ncode line\n```\n| a | b |"
    )
    assert split_sentences(text) == [
        "First sentence.",
        "Second one continues here!",
        "Third?",
        "item one",
        "item two",
        "code line",
        "| a | b |",
    ]
    assert split_sentences("") == []
    assert split_sentences("# Only a heading") == []
