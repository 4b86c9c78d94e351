"""Reading hits and answers out of a system's JSON (``systems/wire.py``): unit and property tests.

The contract: ``parse_hits`` / ``parse_answer`` understand kebab ``search_hit.v1`` (flat or with
kebab's nested ``retrieval`` / ``citation`` objects), bare lists, ``{"hits": [...]}``, chunk-id
strings, WFGY ``answer_json`` and the answer shapes of the module docstring; anything else raises
``QueryFailure`` of class ``bad_response`` naming the field — never another exception.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from kebab_eval_pipeline.contract import Answer, Citation, Hit
from kebab_eval_pipeline.golden.tables import typed_frame
from kebab_eval_pipeline.systems.base import CITATION_COLUMNS, HIT_COLUMNS, OUTCOME_COLUMNS
from kebab_eval_pipeline.systems.outcome import BAD_RESPONSE, QueryFailure
from kebab_eval_pipeline.systems.wire import ResponseMap, dig, hit_list, parse_answer, parse_hits

PROPERTY = settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)

# kebab's own search_hit.v1 example (seeds/kebab-score-kind-and-rag-v2-diff.txt), as kebab prints it.
KEBAB_HIT = {
    "schema_version": "search_hit.v1",
    "rank": 1,
    "chunk_id": "c1",
    "doc_id": "d1",
    "doc_path": "a.md",
    "heading_path": [],
    "section_label": None,
    "snippet": "x",
    "citation": {"kind": "line", "path": "a.md", "start": 1, "end": 1, "section": None},
    "retrieval": {
        "method": "lexical",
        "fusion_score": 0.5,
        "lexical_score": 0.5,
        "vector_score": None,
        "lexical_rank": 1,
        "vector_rank": None,
    },
    "index_version": "v1",
    "embedding_model": None,
    "chunker_version": "c1",
    "indexed_at": "2026-05-10T12:00:00Z",
    "stale": False,
}


def bad(call, *args, **kwargs) -> str:
    """The message of the bad_response QueryFailure ``call`` raises."""
    with pytest.raises(QueryFailure) as info:
        call(*args, **kwargs)
    assert info.value.error_class == BAD_RESPONSE
    assert str(info.value) == f"bad_response: {info.value.message}"
    return info.value.message


def ids(hits: list[Hit]) -> list[str | None]:
    return [h.chunk_id for h in hits]


# ---------------------------------------------------------------------------------------------
# hits: shapes
# ---------------------------------------------------------------------------------------------


def test_flat_search_hit_v1_reads_every_field():
    raw = {
        "schema_version": "search_hit.v1",
        "rank": 1,
        "score": 0.82,
        "score_kind": "rrf",
        "chunk_id": "9b4a8c1e7d3f2a05",
        "doc_id": "3f9a2c10ee4d6b78",
        "doc_path": "notes/rust/kebab-architecture.md",
        "heading_path": ["Kebab", "Architecture"],
        "line_start": 12,
        "line_end": 30,
        "snippet": "the pipeline",
        "lexical_score": 7.5,
        "vector_score": 0.61,
        "lexical_rank": 2,
        "vector_rank": 1,
        "index_version": "idx-3",
        "embedding_model": "minilm",
        "chunker_version": "md-2",
    }
    hits, warnings = parse_hits([raw], k=10)
    assert warnings == []
    assert hits == [
        Hit(
            rank=1,
            chunk_id="9b4a8c1e7d3f2a05",
            doc_id="3f9a2c10ee4d6b78",
            doc_path="notes/rust/kebab-architecture.md",
            heading_path=["Kebab", "Architecture"],
            line_start=12,
            line_end=30,
            snippet="the pipeline",
            score=0.82,
            score_kind="rrf",
            lexical_score=7.5,
            vector_score=0.61,
            lexical_rank=2,
            vector_rank=1,
            index_version="idx-3",
            embedding_model="minilm",
            chunker_version="md-2",
        )
    ]


def test_bare_list_and_hits_object_read_the_same():
    raw = [{"chunk_id": "a", "rank": 1}, {"chunk_id": "b", "rank": 2}]
    assert parse_hits(raw, k=5) == parse_hits({"hits": raw, "next_cursor": None, "truncated": False}, k=5)
    assert ids(parse_hits(raw, k=5)[0]) == ["a", "b"]
    assert parse_hits({"hits": None}, k=5) == ([], [])
    assert parse_hits({"hits": []}, k=5) == ([], [])
    assert parse_hits([], k=5) == ([], [])


def test_strings_are_chunk_ids_with_defaults():
    hits, warnings = parse_hits(["p1#1", "p1#2", "p2#1"], k=10)
    assert warnings == []
    assert hits == [
        Hit(rank=1, chunk_id="p1#1"),
        Hit(rank=2, chunk_id="p1#2"),
        Hit(rank=3, chunk_id="p2#1"),
    ]
    assert hits[0].score_kind == "other" and hits[0].heading_path == [] and hits[0].snippet == ""
    mixed, _ = parse_hits(["a", {"chunk_id": "b", "doc_path": "b.md"}], k=10)
    assert [(h.rank, h.chunk_id, h.doc_path) for h in mixed] == [(1, "a", None), (2, "b", "b.md")]


def test_kebab_nested_retrieval_and_citation_objects():
    (hit,), warnings = parse_hits({"hits": [KEBAB_HIT]}, k=10)
    assert warnings == []
    assert hit.rank == 1 and hit.chunk_id == "c1" and hit.doc_id == "d1"
    assert hit.score == 0.5  # retrieval.fusion_score
    assert hit.score_kind == "bm25"  # retrieval.method "lexical"
    assert (hit.lexical_score, hit.vector_score, hit.lexical_rank, hit.vector_rank) == (0.5, None, 1, None)
    assert (hit.doc_path, hit.line_start, hit.line_end) == ("a.md", 1, 1)
    assert (hit.index_version, hit.embedding_model, hit.chunker_version) == ("v1", None, "c1")


def test_nested_objects_fill_only_what_the_flat_fields_leave_out():
    raw = {
        "chunk_id": "c9",
        "score": 0.82,
        "score_kind": "cosine",
        "lexical_rank": 4,
        "line_start": 7,
        "citation": {"kind": "line", "path": "docs/x.md", "start": 3, "end": 9},
        "retrieval": {"method": "hybrid", "fusion_score": 0.1, "lexical_rank": 99, "vector_rank": 2},
    }
    (hit,), _ = parse_hits([raw], k=1)
    assert hit.score == 0.82 and hit.score_kind == "cosine"  # flat fields win
    assert hit.lexical_rank == 4 and hit.vector_rank == 2
    assert (hit.doc_path, hit.line_start, hit.line_end) == ("docs/x.md", 7, 9)


@pytest.mark.parametrize(
    ("raw", "kind"),
    [
        ({"retrieval": {"method": "lexical"}}, "bm25"),
        ({"retrieval": {"method": "vector"}}, "cosine"),
        ({"retrieval": {"method": "hybrid"}}, "rrf"),
        ({"retrieval": {"method": "sparse"}}, "other"),
        ({"retrieval": {}}, "other"),
        ({"score_kind": "bm25", "retrieval": {"method": "vector"}}, "bm25"),
        ({"score_kind": "splade"}, "other"),
        ({"score_kind": "RRF"}, "other"),
        ({"score_kind": None}, "other"),
        ({}, "other"),
    ],
)
def test_score_kind(raw, kind):
    (hit,), _ = parse_hits([{"chunk_id": "c", **raw}], k=1)
    assert hit.score_kind == kind


@pytest.mark.parametrize(
    ("heading", "expected"),
    [
        ("A > B", ["A", "B"]),
        ("  Intro >  Setup > > Linux ", ["Intro", "Setup", "Linux"]),
        ("Only", ["Only"]),
        # a ">" without white space on both sides belongs to the heading (kebab's own docs have these)
        (
            "Data flow — `kebab ask --session <id>` (multi-turn)",
            ["Data flow — `kebab ask --session <id>` (multi-turn)"],
        ),
        ("Setup > `a->b` > x>y", ["Setup", "`a->b`", "x>y"]),
        ("", []),
        (["A", "B"], ["A", "B"]),
        (None, []),
    ],
)
def test_heading_path_as_string_or_list(heading, expected):
    (hit,), _ = parse_hits([{"chunk_id": "c", "heading_path": heading}], k=1)
    assert hit.heading_path == expected
    # the same through a response mapping (read hit by hit, not as columns)
    mapping = ResponseMap.model_validate({"hit_fields": {"chunk_id": "id", "heading_path": "h"}})
    (mapped,), _ = parse_hits([{"id": "c", "h": heading}], k=1, mapping=mapping)
    assert mapped.heading_path == expected


def test_unknown_hit_fields_are_ignored():
    (hit,), _ = parse_hits([{"chunk_id": "c", "indexed_at": "2026", "stale": True, "extra": {"x": 1}}], k=1)
    assert hit == Hit(rank=1, chunk_id="c")


# ---------------------------------------------------------------------------------------------
# hits: ranks and k
# ---------------------------------------------------------------------------------------------


def test_ranks_in_order_are_kept_without_warning():
    hits, warnings = parse_hits([{"chunk_id": c, "rank": r} for c, r in (("a", 1), ("b", 2), ("c", 3))], k=3)
    assert [(h.rank, h.chunk_id) for h in hits] == [(1, "a"), (2, "b"), (3, "c")]
    assert warnings == []


def test_out_of_order_ranks_are_sorted_and_renumbered_with_a_warning():
    raw = [{"chunk_id": "a", "rank": 3}, {"chunk_id": "b", "rank": 1}, {"chunk_id": "c", "rank": 2}]
    hits, warnings = parse_hits(raw, k=10)
    assert [(h.rank, h.chunk_id) for h in hits] == [(1, "b"), (2, "c"), (3, "a")]
    assert warnings == ["reported ranks [3, 1, 2] are not 1..3; renumbered"]


def test_gapped_zero_based_and_float_ranks_are_renumbered():
    hits, warnings = parse_hits([{"chunk_id": "a", "rank": 10}, {"chunk_id": "b", "rank": 20}], k=10)
    assert [(h.rank, h.chunk_id) for h in hits] == [(1, "a"), (2, "b")]
    assert warnings == ["reported ranks [10, 20] are not 1..2; renumbered"]
    hits, warnings = parse_hits([{"chunk_id": "a", "rank": 0}, {"chunk_id": "b", "rank": 1}], k=10)
    assert [(h.rank, h.chunk_id) for h in hits] == [(1, "a"), (2, "b")]
    assert warnings == ["reported ranks [0, 1] are not 1..2; renumbered"]
    hits, warnings = parse_hits([{"chunk_id": "a", "rank": 2.5}, {"chunk_id": "b", "rank": 1.5}], k=10)
    assert ids(hits) == ["b", "a"] and [h.rank for h in hits] == [1, 2]
    assert warnings == ["reported ranks [2.5, 1.5] are not 1..2; renumbered"]
    # integral floats equal to 1..n are "already 1..n"
    hits, warnings = parse_hits([{"chunk_id": "a", "rank": 1.0}, {"chunk_id": "b", "rank": 2.0}], k=10)
    assert ids(hits) == ["a", "b"] and warnings == []


def test_missing_ranks_keep_list_order():
    hits, warnings = parse_hits([{"chunk_id": c} for c in "xyz"], k=10)
    assert [(h.rank, h.chunk_id) for h in hits] == [(1, "x"), (2, "y"), (3, "z")]
    assert warnings == []  # nothing reported, nothing renumbered


def test_partly_missing_ranks_go_after_the_ranked_hits_in_list_order():
    raw = [{"chunk_id": "a"}, {"chunk_id": "b", "rank": 2}, {"chunk_id": "c"}, {"chunk_id": "d", "rank": 1}]
    hits, warnings = parse_hits(raw, k=10)
    assert [(h.rank, h.chunk_id) for h in hits] == [(1, "d"), (2, "b"), (3, "a"), (4, "c")]
    assert warnings == ["reported ranks [null, 2, null, 1] are not 1..4; renumbered"]


def test_duplicate_ranks_are_stable():
    raw = [{"chunk_id": "a", "rank": 1}, {"chunk_id": "b", "rank": 1}, {"chunk_id": "c", "rank": 0}]
    hits, warnings = parse_hits(raw, k=10)
    assert [(h.rank, h.chunk_id) for h in hits] == [(1, "c"), (2, "a"), (3, "b")]
    assert warnings == ["reported ranks [1, 1, 0] are not 1..3; renumbered"]


def test_more_than_k_hits_are_truncated_after_sorting():
    raw = [{"chunk_id": f"c{r}", "rank": r} for r in (5, 4, 3, 2, 1)]
    hits, warnings = parse_hits(raw, k=3)
    assert [(h.rank, h.chunk_id) for h in hits] == [(1, "c1"), (2, "c2"), (3, "c3")]
    assert warnings == [
        "reported ranks [5, 4, 3, 2, 1] are not 1..5; renumbered",
        "returned 5 hits for k=3; kept the first 3",
    ]
    hits, warnings = parse_hits(["a", "b", "c"], k=2)
    assert ids(hits) == ["a", "b"] and warnings == ["returned 3 hits for k=2; kept the first 2"]
    assert parse_hits(["a", "b"], k=2)[1] == []


def test_long_rank_lists_are_previewed():
    raw = [{"chunk_id": str(i), "rank": 20 - i} for i in range(12)]
    _, warnings = parse_hits(raw, k=100)
    assert warnings == ["reported ranks [20, 19, 18, 17, 16, 15, 14, 13, …] are not 1..12; renumbered"]


# ---------------------------------------------------------------------------------------------
# hits: wrong shapes
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ("hits", "response: expected a list of hits or an object with 'hits', got str"),
        (None, "response: expected a list of hits or an object with 'hits', got null"),
        (3, "response: expected a list of hits or an object with 'hits', got int"),
        ({"results": []}, "response: expected a list of hits or an object with 'hits', got dict"),
        ({"hits": "a,b"}, "hits: expected a list, got str"),
        ({"hits": {"0": "a"}}, "hits: expected a list, got dict"),
        (["a", "b", 7], "hits[2]: expected an object or a chunk-id string, got int"),
        (["a", None], "hits[1]: expected an object or a chunk-id string, got null"),
        ([["a"]], "hits[0]: expected an object or a chunk-id string, got list"),
        (["a", "b", {"chunk_id": "c", "rank": "first"}], "hits[2].rank: expected a number, got 'first'"),
        ([{"chunk_id": "c", "rank": True}], "hits[0].rank: expected a number, got True"),
        ([{"chunk_id": "c", "rank": [1]}], "hits[0].rank: expected a number, got [1]"),
    ],
)
def test_wrong_shapes_name_the_field(payload, message):
    assert bad(parse_hits, payload, k=10) == message


@pytest.mark.parametrize(
    ("raw", "prefix"),
    [
        ({"chunk_id": 5}, "hits[1]: chunk_id: "),
        ({"chunk_id": "c", "line_start": "ten"}, "hits[1]: line_start: "),
        ({"chunk_id": "c", "line_end": 2.5}, "hits[1]: line_end: "),
        ({"chunk_id": "c", "score": "high"}, "hits[1]: score: "),
        ({"chunk_id": "c", "heading_path": 5}, "hits[1]: heading_path: "),
        ({"chunk_id": "c", "heading_path": ["A", 2]}, "hits[1]: heading_path.1: "),
        ({"chunk_id": "c", "snippet": {"text": "x"}}, "hits[1]: snippet: "),
        ({"chunk_id": "c", "citation": {"start": "one"}}, "hits[1]: line_start: "),
        ({"chunk_id": "c", "retrieval": {"lexical_rank": "2nd"}}, "hits[1]: lexical_rank: "),
    ],
)
def test_unreadable_hit_fields_name_hit_and_field(raw, prefix):
    message = bad(parse_hits, ["ok", raw], k=10)
    assert message.startswith(prefix), message
    assert len(message) > len(prefix)


@pytest.mark.parametrize("field", ["line_start", "line_end", "lexical_rank", "vector_rank"])
def test_integers_past_int64_are_bad_responses_not_crashes(field):
    # the hits table stores them as int64: a lying system must fail its query, not the run
    (hit,), _ = parse_hits([{"chunk_id": "c", field: 2**63 - 1}], k=1)
    typed_frame([{"query_id": "q", **hit.model_dump()}], HIT_COLUMNS)
    message = bad(parse_hits, [{"chunk_id": "c", field: 2**63}], k=1)
    assert message.startswith(f"hits[0]: {field}: Input should be less than or equal to"), message
    message = bad(parse_hits, [{"chunk_id": "c", field: -(2**63) - 1}], k=1)
    assert message.startswith(f"hits[0]: {field}: Input should be greater than or equal to"), message
    # a huge reported *rank* is only an ordering key: the hit is renumbered
    (hit,), warnings = parse_hits([{"chunk_id": "c", "rank": 10**30}], k=1)
    assert hit.rank == 1 and warnings


def test_one_bad_hit_fails_the_whole_list():
    # a query's hits are all-or-nothing: a half-read list would score a different ranking
    with pytest.raises(QueryFailure):
        parse_hits(["a", "b", {"chunk_id": "c", "rank": "x"}, "d"], k=2)


# ---------------------------------------------------------------------------------------------
# ResponseMap and dig
# ---------------------------------------------------------------------------------------------


def test_dig_walks_dicts_and_lists():
    doc = {"a": {"b": [{"id": "x"}, {"id": "y"}]}, "0": "zero", "n": None}
    assert dig(doc, "a.b.0.id") == "x"
    assert dig(doc, "a.b.1.id") == "y"
    assert dig(doc, "a.b.-1.id") == "y"
    assert dig(doc, "a.b.-2.id") == "x"
    assert dig(doc, "0") == "zero"  # a digit key of an object is a key
    assert dig(doc, "n") is None  # present and null is not missing
    assert dig(doc, "a.b") == [{"id": "x"}, {"id": "y"}]
    assert dig([[1, 2], [3]], "1.0") == 3


@pytest.mark.parametrize(
    ("path", "missing"),
    [("a.c", "c"), ("a.b.2.id", "2"), ("a.b.-3", "-3"), ("a.b.x", "x"), ("a.b.0.id.more", "more"), ("", "")],
)
def test_dig_missing_step(path, missing):
    doc = {"a": {"b": [{"id": "x"}, {"id": "y"}]}}
    with pytest.raises(KeyError) as info:
        dig(doc, path)
    assert info.value.args == (missing,)
    assert dig(doc, path, None) is None
    assert dig(doc, path, "fallback") == "fallback"


def test_response_map_reads_a_foreign_search_response():
    payload = {
        "data": {
            "results": [
                {"id": "c2", "meta": {"source": "b.md", "lines": [4, 9]}, "pos": 2, "relevance": 0.4},
                {"id": "c1", "meta": {"source": "a.md", "lines": [1, 3]}, "pos": 1, "relevance": 0.9},
            ]
        }
    }
    mapping = ResponseMap(
        hits="data.results",
        hit_fields={
            "chunk_id": "id",
            "doc_path": "meta.source",
            "line_start": "meta.lines.0",
            "line_end": "meta.lines.1",
            "rank": "pos",
            "score": "relevance",
            "doc_id": "meta.missing",
        },
    )
    hits, warnings = parse_hits(payload, k=10, mapping=mapping)
    assert [(h.rank, h.chunk_id, h.doc_path, h.line_start, h.line_end, h.score) for h in hits] == [
        (1, "c1", "a.md", 1, 3, 0.9),
        (2, "c2", "b.md", 4, 9, 0.4),
    ]
    assert all(h.doc_id is None for h in hits)  # a mapped path that is missing reads as null
    assert warnings == ["reported ranks [2, 1] are not 1..2; renumbered"]
    assert bad(parse_hits, {"data": {}}, k=10, mapping=mapping) == "data.results: missing from the response"
    assert bad(parse_hits, {"data": {"results": 3}}, k=10, mapping=mapping) == (
        "data.results: expected a list, got int"
    )
    assert hit_list({"data": {"results": []}}, mapping) == []


def test_response_map_reads_a_foreign_answer():
    payload = {
        "output": {
            "content": "Use the -j flag.",
            "refs": [{"ref": "c1", "n": 1}, {"ref": "c2", "n": 2}],
            "tokens": {"in": 120, "out": 9},
            "llm": "m-1",
        }
    }
    mapping = ResponseMap(
        answer="output",
        answer_fields={
            "text": "content",
            "citations": "refs",
            "prompt_tokens": "tokens.in",
            "completion_tokens": "tokens.out",
            "model": "llm",
        },
        citation_fields={"chunk_id": "ref", "marker": "n"},
    )
    answer = parse_answer(payload, mapping)
    assert answer == Answer(
        text="Use the -j flag.",
        citations=[Citation(chunk_id="c1", marker="[#1]"), Citation(chunk_id="c2", marker="[#2]")],
        grounded=True,
        refused=False,
        model="m-1",
        prompt_tokens=120,
        completion_tokens=9,
    )
    assert parse_answer({"out": "just text"}, ResponseMap(answer="out")).text == "just text"
    assert bad(parse_answer, {}, ResponseMap(answer="out")) == "out: missing from the response"
    assert (
        bad(parse_answer, {"out": 4}, ResponseMap(answer="out"))
        == "out: expected an object or a string, got int"
    )


def test_response_map_rejects_unknown_fields():
    with pytest.raises(ValidationError) as info:
        ResponseMap(hit_fields={"chunk_id": "id", "bogus": "x", "also_bogus": "y"})
    assert "hit_fields: unknown field(s) also_bogus, bogus" in str(info.value)
    with pytest.raises(ValidationError, match=r"answer_fields: unknown field\(s\) claim"):
        ResponseMap(answer_fields={"claim": "c"})
    with pytest.raises(ValidationError, match=r"citation_fields: unknown field\(s\) url"):
        ResponseMap(citation_fields={"url": "u"})
    with pytest.raises(ValidationError):
        ResponseMap(hitz="results")  # type: ignore[call-arg]
    ResponseMap(answer_fields={"prompt_tokens": "a", "completion_tokens": "b", "citations": "c"})


# ---------------------------------------------------------------------------------------------
# answers
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "payload",
    [
        {"text": "Rye needs 5 days.", "citations": ["c1"]},
        {"answer": {"text": "Rye needs 5 days.", "citations": ["c1"]}},
        {"answer": "Rye needs 5 days.", "citations": ["c1"]},
        {"answer": "Rye needs 5 days.", "sources": ["c1"]},
        {"claim": "Rye needs 5 days.", "citations": ["c1"]},
        {
            "qid": "A1",
            "retrieved_ids": ["c1"],
            "answer_json": {"claim": "Rye needs 5 days.", "citations": ["c1"]},
        },
    ],
)
def test_answer_shapes(payload):
    answer = parse_answer(payload)
    assert answer == Answer(
        text="Rye needs 5 days.", citations=[Citation(chunk_id="c1")], grounded=True, refused=False
    )


def test_answer_with_every_field():
    answer = parse_answer(
        {
            "answer": {
                "text": "Ferment for five days [#1].",
                "citations": [
                    {"chunk_id": "c1", "doc_path": "a.md", "line_start": 3, "line_end": 8, "marker": "[#1]"}
                ],
                "grounded": True,
                "prompt_template_version": "rag-v2",
                "model": "qwen2.5:7b",
                "usage": {"prompt_tokens": 812, "completion_tokens": 41, "total_tokens": 853},
            }
        }
    )
    assert answer == Answer(
        text="Ferment for five days [#1].",
        citations=[Citation(chunk_id="c1", doc_path="a.md", line_start=3, line_end=8, marker="[#1]")],
        grounded=True,
        refused=False,
        prompt_template_version="rag-v2",
        model="qwen2.5:7b",
        prompt_tokens=812,
        completion_tokens=41,
    )


def test_token_counts_top_level_win_over_usage():
    answer = parse_answer(
        {"text": "t", "prompt_tokens": 5, "usage": {"prompt_tokens": 9, "completion_tokens": 2}}
    )
    assert (answer.prompt_tokens, answer.completion_tokens) == (5, 2)
    answer = parse_answer({"text": "t", "usage": "n/a"})
    assert (answer.prompt_tokens, answer.completion_tokens) == (None, None)
    assert bad(parse_answer, {"text": "t", "usage": {"prompt_tokens": "many"}}).startswith(
        "answer: prompt_tokens: "
    )
    assert bad(parse_answer, {"text": "t", "usage": {"completion_tokens": 2**64}}).startswith(
        "answer: completion_tokens: Input should be less than or equal to"
    )
    assert bad(parse_answer, {"text": "t", "citations": [{"line_end": 10**20}]}).startswith(
        "citations[0]: line_end: "
    )


@pytest.mark.parametrize(
    ("payload", "refused", "grounded", "reason"),
    [
        ({"text": "An answer."}, False, True, None),
        ({"text": ""}, False, True, None),  # blank is not a refusal (empty_response counts it)
        ({"text": "x", "refused": True}, True, False, None),
        ({"text": "not in context", "refused": False}, False, True, None),  # explicit refused wins
        ({"text": "x", "refusal_reason": "weak evidence"}, True, False, "weak evidence"),
        ({"text": "x", "refusal_reason": ""}, False, True, ""),
        ({"text": "x", "refused": False, "refusal_reason": "r"}, False, True, "r"),
        ({"claim": "not in context", "citations": []}, True, False, None),
        ({"claim": "  Not In Context "}, True, False, None),
        ({"claim": "not in context."}, False, True, None),  # the token is exact
        ({"answer": "NOT IN CONTEXT"}, True, False, None),
        ({"text": "x", "grounded": False}, True, False, None),  # kebab marks refusals grounded: false
        ({"text": "x", "grounded": True}, False, True, None),
        ({"text": "x", "refused": True, "grounded": True}, True, True, None),
        ({"text": "x", "refused": False, "grounded": False}, False, False, None),
        ({"text": "x", "refusal_reason": 3}, True, False, "3"),
    ],
)
def test_refusal_rules(payload, refused, grounded, reason):
    answer = parse_answer(payload)
    assert (answer.refused, answer.grounded, answer.refusal_reason) == (refused, grounded, reason)


def test_citation_shapes():
    answer = parse_answer(
        {
            "text": "t",
            "citations": [
                "c1",
                {"chunk_id": "c2", "marker": 2},
                {"marker": "[#3]", "doc_path": "x.md"},
                {"kind": "line", "path": "a.md", "start": 4, "end": 6},
                {"chunk_id": "c5", "citation": {"kind": "line", "path": "b.md", "start": 1, "end": 2}},
                {"citation": {"chunk_id": "c6", "path": "c.md", "start": 9, "end": 9}},
                {"doc_path": "d.md", "path": "ignored.md", "line_start": 1, "start": 5},
            ],
        }
    )
    assert answer.citations == [
        Citation(chunk_id="c1"),
        Citation(chunk_id="c2", marker="[#2]"),
        Citation(doc_path="x.md", marker="[#3]"),
        Citation(doc_path="a.md", line_start=4, line_end=6),
        Citation(chunk_id="c5", doc_path="b.md", line_start=1, line_end=2),
        Citation(chunk_id="c6", doc_path="c.md", line_start=9, line_end=9),
        Citation(doc_path="d.md", line_start=1),
    ]


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ([1, 2], "response: expected an answer object, got list"),
        ("text", "response: expected an answer object, got str"),
        (None, "response: expected an answer object, got null"),
        ({"text": 5}, "answer.text: expected a string, got int"),
        ({"claim": ["a"]}, "answer.text: expected a string, got list"),
        ({"text": "t", "citations": "c1"}, "answer.citations: expected a list, got str"),
        ({"text": "t", "citations": {"c": 1}}, "answer.citations: expected a list, got dict"),
        (
            {"text": "t", "citations": ["c1", 3]},
            "citations[1]: expected an object or a chunk-id string, got int",
        ),
        (
            {"text": "t", "citations": [None]},
            "citations[0]: expected an object or a chunk-id string, got null",
        ),
        ({"text": "t", "refused": "yes"}, "answer.refused: expected true or false, got 'yes'"),
        ({"text": "t", "grounded": 1}, "answer.grounded: expected true or false, got 1"),
    ],
)
def test_answer_wrong_shapes_name_the_field(payload, message):
    assert bad(parse_answer, payload) == message


@pytest.mark.parametrize(
    ("citation", "prefix"),
    [
        ({"chunk_id": 7}, "citations[1]: chunk_id: "),
        ({"line_start": "x"}, "citations[1]: line_start: "),
        ({"kind": "line", "start": "one"}, "citations[1]: line_start: "),
        ({"marker": [1]}, "citations[1]: marker: "),
        ({"marker": True}, "citations[1]: marker: "),  # a boolean is not a citation number
    ],
)
def test_unreadable_citation_fields(citation, prefix):
    message = bad(parse_answer, {"text": "t", "citations": ["ok", citation]})
    assert message.startswith(prefix), message


# ---------------------------------------------------------------------------------------------
# properties
# ---------------------------------------------------------------------------------------------

TEXT = st.text(max_size=10)
KEYS = (
    st.sampled_from(
        [
            "hits",
            "rank",
            "chunk_id",
            "doc_path",
            "heading_path",
            "line_start",
            "line_end",
            "score",
            "score_kind",
            "retrieval",
            "citation",
            "method",
            "path",
            "start",
            "end",
            "answer",
            "answer_json",
            "text",
            "claim",
            "citations",
            "sources",
            "refused",
            "grounded",
            "refusal_reason",
            "marker",
            "usage",
            "prompt_tokens",
            "model",
        ]
    )
    | TEXT
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from([2**63, -(2**63) - 1, 10**30]),  # past the tables' int64
    st.floats(allow_nan=True, allow_infinity=True),
    TEXT,
    st.sampled_from(["lexical", "vector", "hybrid", "rrf", "not in context", "A > B", "[#1]"]),
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=5),
    max_leaves=12,
)
K = st.integers(min_value=1, max_value=6)


def check_hits(payload: Any, k: int) -> list[Hit] | None:
    try:
        hits, warnings = parse_hits(payload, k)
    except QueryFailure as failure:
        assert failure.error_class == BAD_RESPONSE
        assert failure.message and not failure.timed_out
        return None
    assert all(isinstance(h, Hit) for h in hits)
    assert [h.rank for h in hits] == list(range(1, len(hits) + 1))
    assert len(hits) <= k
    assert all(isinstance(w, str) and w for w in warnings)
    for h in hits:
        assert h.score_kind in ("rrf", "bm25", "cosine", "other")
        assert all(isinstance(x, str) for x in h.heading_path)
    # what the runner does with them: every value fits its declared column
    typed_frame([{"query_id": "q", **h.model_dump()} for h in hits], HIT_COLUMNS)
    return hits


def check_answer(payload: Any) -> Answer | None:
    try:
        answer = parse_answer(payload)
    except QueryFailure as failure:
        assert failure.error_class == BAD_RESPONSE
        assert failure.message and not failure.timed_out
        return None
    assert isinstance(answer, Answer)
    assert isinstance(answer.text, str)
    assert isinstance(answer.refused, bool) and isinstance(answer.grounded, bool)
    assert all(isinstance(c, Citation) for c in answer.citations)
    assert all(c.marker is None or isinstance(c.marker, str) for c in answer.citations)
    typed_frame(
        [{"query_id": "q", "position": i, **c.model_dump()} for i, c in enumerate(answer.citations)],
        CITATION_COLUMNS,
    )
    row = {"query_id": "q", "n_hits": 0, "timed_out": False, "answered": True, **answer.model_dump()}
    row["answer_text"] = row.pop("text")
    del row["citations"]
    typed_frame([row], OUTCOME_COLUMNS)
    return answer


@PROPERTY
@given(payload=JSON, k=K)
def test_parse_hits_never_raises_anything_but_bad_response(payload, k):
    check_hits(payload, k)
    check_hits({"hits": payload}, k)


@PROPERTY
@given(payload=JSON)
def test_parse_answer_never_raises_anything_but_bad_response(payload):
    check_answer(payload)
    check_answer({"answer": payload})


HIT_LIKE = st.fixed_dictionaries(
    {"chunk_id": st.text(min_size=1, max_size=4)},
    optional={
        "rank": st.none() | st.integers(-3, 12) | st.floats(-3, 12, allow_nan=False),
        "score": st.none() | st.floats(allow_nan=False, allow_infinity=False),
        "score_kind": st.sampled_from(["rrf", "bm25", "cosine", "other", "x"]),
        "heading_path": st.lists(TEXT, max_size=3) | TEXT,
        "retrieval": st.fixed_dictionaries(
            {},
            optional={
                "method": st.sampled_from(["lexical", "vector", "hybrid", "dense"]),
                "fusion_score": st.floats(0, 1),
            },
        ),
    },
)


@PROPERTY
@given(raw=st.lists(HIT_LIKE | st.text(min_size=1, max_size=4), max_size=10), k=K)
def test_hits_are_a_stable_sort_by_reported_rank_cut_at_k(raw, k):
    hits, warnings = parse_hits(raw, k)
    inf = float("inf")
    reported = [r.get("rank") if isinstance(r, dict) else None for r in raw]
    order = sorted(range(len(raw)), key=lambda i: (inf if reported[i] is None else reported[i], i))
    expected = [raw[i] if isinstance(raw[i], str) else raw[i]["chunk_id"] for i in order][:k]
    assert ids(hits) == expected
    assert [h.rank for h in hits] == list(range(1, len(hits) + 1))
    renumbered = reported != list(range(1, len(raw) + 1)) and any(r is not None for r in reported)
    assert any("renumbered" in w for w in warnings) == renumbered
    assert any(f"kept the first {k}" in w for w in warnings) == (len(raw) > k)


@st.composite
def walk(draw) -> tuple[Any, str, Any]:
    """A JSON value, a dotted path into it (keys without dots, list items by index), the value there."""
    doc = draw(JSON)
    steps: list[str] = []
    here = doc
    while draw(st.booleans()):
        if isinstance(here, dict):
            keys = [k for k in here if k and "." not in k]
            if not keys:
                break
            key = draw(st.sampled_from(keys))
            steps.append(key)
            here = here[key]
        elif isinstance(here, list) and here:
            i = draw(st.integers(-len(here), len(here) - 1))
            steps.append(str(i))
            here = here[i]
        else:
            break
    if not steps:
        doc, steps, here = {"root": doc}, ["root"], doc
    return doc, ".".join(steps), here


@PROPERTY
@given(case=walk())
def test_dig_finds_what_a_walk_reached(case):
    doc, path, expected = case
    found = dig(doc, path)
    assert found is expected


def test_scope_is_read_from_the_response_object_or_a_mapped_path():
    from kebab_eval_pipeline.systems.wire import parse_scope

    assert parse_scope({"hits": [], "scope": ["a", "b/c"]}) == ["a", "b/c"]
    assert parse_scope({"hits": [], "scope": "a"}) == ["a"]
    assert parse_scope({"hits": [], "scope": []}) == []
    assert parse_scope({"hits": []}) is None
    assert parse_scope([{"chunk_id": "c"}]) is None  # a bare hit list reports no scope
    mapped = ResponseMap(scope="meta.folders")
    assert parse_scope({"meta": {"folders": ["x"]}}, mapped) == ["x"]
    assert parse_scope({"meta": {}}, mapped) is None
    with pytest.raises(QueryFailure) as info:
        parse_scope({"meta": {"folders": {"x": 1}}}, mapped)
    assert info.value.error_class == BAD_RESPONSE
    assert "meta.folders: expected a folder or a list of folders, got dict" in str(info.value)


@pytest.mark.parametrize(
    ("raw_hit", "field"),
    [
        ({"chunk_id": "a", "score": float("nan")}, "score"),
        ({"chunk_id": "a", "score": float("inf")}, "score"),
        ({"chunk_id": "a", "lexical_score": float("-inf")}, "lexical_score"),
        ({"chunk_id": "a", "vector_score": float("nan")}, "vector_score"),
        ({"chunk_id": "a", "rank": float("nan")}, "rank"),
        ({"chunk_id": "a", "rank": float("inf")}, "rank"),
    ],
)
def test_non_finite_scores_and_ranks_fail_the_query_as_bad_response(raw_hit, field):
    # json.loads reads NaN/Infinity; stored, they would reorder TREC run files and fusion silently
    payload = json.loads(json.dumps({"hits": [raw_hit]}))
    with pytest.raises(QueryFailure) as info:
        parse_hits(payload, k=10)
    assert info.value.error_class == "bad_response"
    assert "hits[0]" in str(info.value) and field in str(info.value)
