"""Hand-worked expectations for the SPEC §6 answer and operational metrics, AP / R-precision / bpref /
judged@k at two relevance levels, their null cases and the edges their definitions imply (the
per-metric files cover the rest; see each section's note).

Every expected number is derived in a comment next to it and asserted unrounded
(``aggregate_metrics(..., round_to=None)``) together with the per-query columns behind it. A metric
whose denominator is empty must be ``None`` — never 0 and never 1.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from kebab_eval_pipeline.golden.model import GoldenQuery, Support
from kebab_eval_pipeline.metrics.aggregate import (
    ANSWER_METRICS,
    BREAKDOWN_DIMENSIONS,
    aggregate_metrics,
    breakdowns,
    build_query_scores,
    metric_denominators,
)
from kebab_eval_pipeline.metrics.retrieval import RETRIEVAL_AT_K

KS = (1, 3)
N = math.nan
#: The answer metrics this file covers (``ANSWER_METRICS`` may hold more, e.g. recency_correctness).
ANSWER_AGGREGATES = (
    "refusal_correctness",
    "under_refusal_rate",
    "over_refusal_rate",
    "citation_coverage",
    "chr",
    "answer_precision",
    "attribution_hit_rate",
    "groundedness_rule",
)
ANSWER_COLUMNS = tuple(column for column, name in ANSWER_METRICS if name in ANSWER_AGGREGATES)
ALL_ANSWER_COLUMNS = tuple(column for column, _ in ANSWER_METRICS)
GOLD = [Support(chunk_id="g")]
CLAIM = ["rejects null keys"]
# Every query that did not error retrieves the gold chunk g at rank 1 and a non-gold chunk n at rank 2.
HIT_ROWS = ({"chunk_id": "g", "doc_path": "p.md"}, {"chunk_id": "n", "doc_path": "p.md"})
KNOWN = frozenset({"g", "n", "r"})  # r is a real chunk of the system that no query retrieves


def _q(qid: str, **kw) -> GoldenQuery:
    return GoldenQuery(id=qid, query="?", **kw)


def _answer(qid: str, text: str, refused: bool = False, **kw) -> dict:
    return {"query_id": qid, "n_hits": 2, "answered": True, "answer_text": text, "refused": refused, **kw}


def _scores(
    tables,
    queries: list[GoldenQuery],
    outcomes: list[dict],
    citations: list[dict] = (),
    *,
    errored: frozenset[str] = frozenset(),
    known: frozenset[str] | None = KNOWN,
) -> pd.DataFrame:
    """``query_scores`` of a run where every query not in ``errored`` retrieved ``HIT_ROWS``."""
    q_table, s_table = tables.golden(*queries)
    hits = tables.concat(
        tables.hits("-"), *[tables.hits(q.id, *HIT_ROWS) for q in queries if q.id not in errored]
    )
    return build_query_scores(
        q_table,
        s_table,
        hits,
        tables.outcomes(*outcomes),
        tables.citations(*citations),
        ks=KS,
        known_chunk_ids=known,
    )


def _column(qs: pd.DataFrame, column: str) -> dict[str, float]:
    return dict(
        zip(qs["query_id"], qs[column].astype("Float64").to_numpy(dtype=float, na_value=N), strict=True)
    )


def _same(got: dict[str, float], expected: dict[str, float]) -> bool:
    return got.keys() == expected.keys() and all(
        (math.isnan(g) and math.isnan(expected[k])) or g == expected[k] for k, g in got.items()
    )


# ------------------------------------------------------------------------------------------------
# Answer metrics: one run with every situation, aggregated by hand
# ------------------------------------------------------------------------------------------------

ANSWER_QUERIES = [
    _q("A1", supports=GOLD, gold_claim_substr=CLAIM),  # right claim, cites gold g
    _q("A2", supports=GOLD, gold_claim_substr=CLAIM),  # right claim, cites the retrieved non-gold n
    _q("A3", supports=GOLD, gold_claim_substr=CLAIM),  # right claim, cites g + real-but-unretrieved r
    _q("A4", supports=GOLD, gold_claim_substr=CLAIM, must_contain=["keys"]),  # refuses, citing g anyway
    _q("A5", supports=GOLD, gold_claim_substr=CLAIM),  # produced an answer, then errored
    _q("U6", answerable=False),  # refuses an unanswerable query (correct)
    _q("U7", answerable=False, forbidden=["made up"]),  # answers an unanswerable query, no citation
    _q("A8", supports=GOLD, must_contain=["alpha", "beta"]),  # no claim list: must_contain decides; fails
    _q("A9", supports=GOLD, must_contain=["alpha"], forbidden=["gamma"]),  # must_contain passes
]
ANSWER_OUTCOMES = [
    _answer("A1", "X REJECTS null keys."),
    _answer("A2", "x rejects null keys"),
    _answer("A3", "x rejects null keys"),
    _answer("A4", "not in context: keys", refused=True),
    _answer("A5", "x rejects null keys", n_hits=0, error="RuntimeError: boom"),
    _answer("U6", "not in context", refused=True),
    _answer("U7", "a made up answer"),
    _answer("A8", "Alpha only"),
    _answer("A9", "ALPHA"),
]
ANSWER_CITATIONS = [
    {"query_id": "A1", "chunk_id": "g"},
    {"query_id": "A2", "chunk_id": "n"},
    {"query_id": "A3", "chunk_id": "g"},
    {"query_id": "A3", "chunk_id": "r"},
    {"query_id": "A4", "chunk_id": "g"},
    {"query_id": "A5", "chunk_id": "g"},
    {"query_id": "A8", "chunk_id": "g"},
    {"query_id": "A9", "chunk_id": "g"},
]

# Has an answer: all but A5 (errored). Refused: A4, U6. Shipped (answered, not refused):
# A1, A2, A3, U7, A8, A9 = 6; of which answerable: A1, A2, A3, A8, A9 = 5.
#                      A1 A2 A3 A4 A5 U6 U7 A8 A9
PER_QUERY = {
    # every citation real (≥ 1 citation): U7 cites nothing; r is real (a known chunk).
    "citation_ok": (1, 1, 1, N, N, N, 0, 1, 1),
    # citations ⊆ retrieved hits and ∩ gold ≠ ∅: A2 cites no gold, A3's r was not retrieved, U7 cites nothing.
    "chr": (1, 0, 0, N, N, N, 0, 1, 1),
    # answerable ∧ claim/must_contain ∧ chr: A8 lacks "beta"; U7 is unanswerable.
    "answer_precision": (1, 0, 0, N, N, N, 0, 0, 1),
    # answerable and shipped; a citation resolving to a gold hit (A3's g does, its r does not matter).
    "attribution_hit": (1, 0, 1, N, N, N, N, 1, 1),
    # shipped with must_contain/forbidden: U7 says the forbidden "made up", A8 lacks "beta", A9 passes.
    # A4 has must_contain but refused → outside the denominator.
    "groundedness_rule": (N, N, N, N, N, N, 0, 0, 1),
    # unanswerable with an answer: U6 refused, U7 answered.
    "refusal_correct": (N, N, N, N, N, 1, 0, N, N),
    "under_refusal": (N, N, N, N, N, 0, 1, N, N),
    # answerable with an answer (A5 errored → excluded): only A4 refused.
    "over_refusal": (0, 0, 0, 1, N, N, N, 0, 0),
}
AGGREGATES = {
    "citation_coverage": (5 / 6, 6),  # 5 of 6 shipped cite only real chunks
    "chr": (3 / 6, 6),  # A1, A8, A9 of 6 shipped → 0.5
    "answer_precision": (2 / 6, 6),  # A1, A9 of 6 shipped → 0.3333
    "attribution_hit_rate": (4 / 5, 5),  # A1, A3, A8, A9 of 5 answerable shipped → 0.8
    "groundedness_rule": (1 / 3, 3),  # A9 of U7, A8, A9 → 0.3333
    "refusal_correctness": (1 / 2, 2),  # U6 of U6, U7
    "under_refusal_rate": (1 / 2, 2),  # U7 of U6, U7
    "over_refusal_rate": (1 / 6, 6),  # A4 of A1, A2, A3, A4, A8, A9 → 0.1667
    "error_rate": (1 / 9, 9),  # A5 of all 9 queries: excluded above, counted here
}


def _answer_run(tables) -> pd.DataFrame:
    return _scores(tables, ANSWER_QUERIES, ANSWER_OUTCOMES, ANSWER_CITATIONS, errored=frozenset({"A5"}))


@pytest.mark.parametrize("column", list(PER_QUERY))
def test_answer_columns_per_query(tables, column: str) -> None:
    qs = _answer_run(tables)
    expected = dict(zip([q.id for q in ANSWER_QUERIES], map(float, PER_QUERY[column]), strict=True))
    assert _same(_column(qs, column), expected), column


@pytest.mark.parametrize("metric", list(AGGREGATES))
def test_answer_aggregates_and_denominators(tables, metric: str) -> None:
    qs = _answer_run(tables)
    value, denominator = AGGREGATES[metric]
    assert aggregate_metrics(qs, KS, round_to=None)[metric] == pytest.approx(value, abs=1e-15)
    assert metric_denominators(qs, KS)[metric] == denominator


def test_rounded_aggregates_are_four_decimals(tables) -> None:
    m = aggregate_metrics(_answer_run(tables), KS)
    assert (m["citation_coverage"], m["answer_precision"], m["over_refusal_rate"]) == (0.8333, 0.3333, 0.1667)


def test_errored_query_with_an_answer_is_outside_every_answer_metric(tables) -> None:
    row = _answer_run(tables).set_index("query_id").loc["A5"]
    assert all(math.isnan(row[c]) for c in ANSWER_COLUMNS)
    assert pd.isna(row["refused"]) and pd.isna(row["n_citations"])
    assert row["error"] == "RuntimeError: boom" and math.isnan(row["empty_response"])


def test_real_chunk_retrieved_by_another_query_only(tables) -> None:
    # Without the system's chunk list, "real" = occurs among the run's hits. X cites g, which only Y
    # retrieved: the citation is real (citation_ok 1) but not among X's own hits (chr 0, precision 0).
    queries = [_q("X", supports=GOLD, gold_claim_substr=CLAIM), _q("Y", supports=GOLD)]
    q_table, s_table = tables.golden(*queries)
    hits = tables.concat(tables.hits("X", {"chunk_id": "n"}), tables.hits("Y", {"chunk_id": "g"}))
    qs = build_query_scores(
        q_table,
        s_table,
        hits,
        tables.outcomes(_answer("X", "x rejects null keys", n_hits=1), {"query_id": "Y", "n_hits": 1}),
        tables.citations({"query_id": "X", "chunk_id": "g"}),
        ks=KS,
        known_chunk_ids=None,
    ).set_index("query_id")
    assert qs.loc["X", "citation_ok"] == 1.0
    assert qs.loc["X", "chr"] == 0.0 and qs.loc["X", "answer_precision"] == 0.0


def test_claim_substring_length_boundary(tables) -> None:
    # "abcde" (5 chars) counts; " abcd " trims to 4 chars and is ignored — and since the query *lists*
    # claim substrings, containment does not fall back to must_contain (as WFGY: vacuous only when []).
    queries = [
        _q("five", supports=GOLD, gold_claim_substr=["abcde"]),
        _q("four", supports=GOLD, gold_claim_substr=[" abcd "], must_contain=["abcd"]),
        _q("none", supports=GOLD),  # neither list: the text test passes, chr decides
    ]
    outcomes = [_answer(q.id, "ABCDE and abcd") for q in queries]
    citations = [{"query_id": q.id, "chunk_id": "g"} for q in queries]
    qs = _scores(tables, queries, outcomes, citations)
    assert _column(qs, "chr") == {"five": 1.0, "four": 1.0, "none": 1.0}
    assert _column(qs, "answer_precision") == {"five": 1.0, "four": 0.0, "none": 1.0}
    assert aggregate_metrics(qs, KS, round_to=None)["answer_precision"] == 2 / 3


# ------------------------------------------------------------------------------------------------
# Answer metrics: each null case (answers present, but the metric's own denominator is empty)
# ------------------------------------------------------------------------------------------------


def _null_case(tables, case: str) -> pd.DataFrame:
    if case == "only_answerable_answered":
        queries = [_q("a", supports=GOLD, gold_claim_substr=CLAIM, must_contain=["null"])]
        return _scores(
            tables, queries, [_answer("a", "x rejects null keys")], [{"query_id": "a", "chunk_id": "g"}]
        )
    if case == "only_unanswerable_refused":
        queries = [_q("u", answerable=False, forbidden=["zzz"])]
        return _scores(tables, queries, [_answer("u", "not in context", refused=True)])
    if case == "answerable_all_refused":
        queries = [_q("a", supports=GOLD, must_contain=["x"]), _q("b", supports=GOLD)]
        outcomes = [_answer("a", "not in context", refused=True), _answer("b", "", refused=True)]
        return _scores(tables, queries, outcomes, [{"query_id": "a", "chunk_id": "g"}])
    if case == "only_unanswerable_answered":
        queries = [_q("u", answerable=False)]
        return _scores(tables, queries, [_answer("u", "made up")], [{"query_id": "u", "chunk_id": "n"}])
    if case == "all_errored":
        queries = [_q("a", supports=GOLD), _q("u", answerable=False)]
        outcomes = [
            {"query_id": "a", "error": "TimeoutError: slow", "timed_out": True, "answered": True},
            {"query_id": "u", "error": "RuntimeError: boom"},
        ]
        return _scores(tables, queries, outcomes, errored=frozenset({"a", "u"}))
    raise AssertionError(case)


NULL_CASES = {
    # case: {metric: expected value (None = empty denominator)} — every answer metric listed.
    "only_answerable_answered": {
        "refusal_correctness": None,  # no unanswerable query
        "under_refusal_rate": None,
        "over_refusal_rate": 0.0,
        "citation_coverage": 1.0,
        "chr": 1.0,
        "answer_precision": 1.0,
        "attribution_hit_rate": 1.0,
        "groundedness_rule": 1.0,
    },
    "only_unanswerable_refused": {
        "refusal_correctness": 1.0,
        "under_refusal_rate": 0.0,
        "over_refusal_rate": None,  # no answerable query
        "citation_coverage": None,  # nothing shipped
        "chr": None,
        "answer_precision": None,  # WFGY's scorer says 1.0 here; SPEC §6 says null
        "attribution_hit_rate": None,
        "groundedness_rule": None,  # has `forbidden`, but refused
    },
    "answerable_all_refused": {
        "refusal_correctness": None,
        "under_refusal_rate": None,
        "over_refusal_rate": 1.0,  # 2 of 2 answerable refused
        "citation_coverage": None,
        "chr": None,  # a's refusal cites gold g: still outside the denominator
        "answer_precision": None,
        "attribution_hit_rate": None,
        "groundedness_rule": None,
    },
    "only_unanswerable_answered": {
        "refusal_correctness": 0.0,
        "under_refusal_rate": 1.0,
        "over_refusal_rate": None,
        "citation_coverage": 1.0,  # n is real
        "chr": 0.0,  # shipped, but n is not gold: 0, not None
        "answer_precision": 0.0,  # unanswerable: never precise
        "attribution_hit_rate": None,  # only answerable queries count
        "groundedness_rule": None,  # no must_contain / forbidden
    },
    "all_errored": dict.fromkeys(ANSWER_AGGREGATES),
}


@pytest.mark.parametrize("case", list(NULL_CASES))
def test_answer_null_cases(tables, case: str) -> None:
    qs = _null_case(tables, case)
    m = aggregate_metrics(qs, KS, round_to=None)
    d = metric_denominators(qs, KS)
    assert {name: m[name] for name in ANSWER_AGGREGATES} == NULL_CASES[case]
    for name, expected in NULL_CASES[case].items():
        assert (d[name] == 0) == (expected is None), name


def test_all_errored_counts_in_error_and_timeout_rates(tables) -> None:
    m = aggregate_metrics(_null_case(tables, "all_errored"), KS, round_to=None)
    assert m["error_rate"] == 1.0  # 2 of 2
    assert m["timeout_rate"] == 0.5  # a of 2
    assert m["empty_result_rate"] == 1.0  # errors have no hits
    assert m["empty_response_rate"] is None  # no query has an answer


# ------------------------------------------------------------------------------------------------
# Operational metrics (rates over all queries, empty responses, versions, latency)
# ------------------------------------------------------------------------------------------------


def test_empty_response_rate_ignores_refusals(tables) -> None:
    queries = [_q(i, supports=GOLD) for i in ("e1", "e2", "e3", "e4", "e5")]
    outcomes = [
        _answer("e1", " \n\t"),  # shipped and blank → 1
        _answer("e2", "", refused=True),  # a blank refusal is a refusal, not an empty response → 0
        _answer("e3", "ok"),  # → 0
        _answer("e4", "", n_hits=0, error="RuntimeError: boom"),  # errored → outside
        {"query_id": "e5", "n_hits": 2},  # no answer requested → outside
    ]
    qs = _scores(tables, queries, outcomes, errored=frozenset({"e4"}))
    assert _same(_column(qs, "empty_response"), {"e1": 1.0, "e2": 0.0, "e3": 0.0, "e4": N, "e5": N})
    assert aggregate_metrics(qs, KS, round_to=None)["empty_response_rate"] == 1 / 3
    assert metric_denominators(qs, KS)["empty_response_rate"] == 3
    # empty_result_rate: of all 5 queries, only the errored e4 has no hits → 0.2
    assert aggregate_metrics(qs, KS, round_to=None)["empty_result_rate"] == 0.2


def test_mixed_version_rate_counts_hits_once(tables) -> None:
    # Run-wide most common values: index_version A (3 of 4 reported), embedding_model m1 (2 of 3).
    # h2 differs in the model, h3 in both fields (counted once); h4/h5 report nothing that differs.
    queries, supports = tables.golden(_q("q1"), _q("q2"))
    hits = tables.concat(
        tables.hits(
            "q1",
            {"chunk_id": "h1", "index_version": "A", "embedding_model": "m1"},
            {"chunk_id": "h2", "index_version": "A", "embedding_model": "m2"},
            {"chunk_id": "h3", "index_version": "B", "embedding_model": "m1"},
        ),
        tables.hits("q2", {"chunk_id": "h4", "index_version": "A"}, {"chunk_id": "h5"}),
    )
    outcomes = tables.outcomes({"query_id": "q1", "n_hits": 3}, {"query_id": "q2", "n_hits": 2})
    qs = build_query_scores(queries, supports, hits, outcomes, tables.citations(), ks=KS)
    assert qs["mixed_version_hits"].tolist() == [2, 0]
    assert aggregate_metrics(qs, KS, round_to=None)["mixed_version_rate"] == 2 / 5  # of 5 hits
    assert metric_denominators(qs, KS)["mixed_version_rate"] == 5


def test_latency_percentiles_one_value_and_missing_values(tables) -> None:
    queries = [_q(i) for i in ("l1", "l2", "l3", "l4")]
    outcomes = [
        {
            "query_id": "l1",
            "n_hits": 2,
            "retrieval_ms": 40.0,
            "answered": True,
            "answer_text": "a",
            "answer_ms": 10.0,
        },
        {
            "query_id": "l2",
            "n_hits": 2,
            "answered": True,
            "answer_text": "b",
            "answer_ms": 30.0,
        },  # no retrieval_ms
        {
            "query_id": "l3",
            "error": "TimeoutError: slow",
            "timed_out": True,
            "answer_ms": 50.0,
        },  # errored: still timed
        {"query_id": "l4", "n_hits": 2},  # nothing recorded
    ]
    qs = _scores(tables, queries, outcomes, errored=frozenset({"l3"}))
    m = aggregate_metrics(qs, KS, round_to=None)
    d = metric_denominators(qs, KS)
    # retrieval: the single value 40 → p50 = p95 = max = 40 (over 1 recorded latency, not 4 queries)
    assert (m["retrieval_ms_p50"], m["retrieval_ms_p95"], m["retrieval_ms_max"]) == (40.0, 40.0, 40.0)
    assert d["retrieval_ms_p50"] == d["retrieval_ms_max"] == 1
    # answer: sorted [10, 30, 50]; p50 = 30; p95 at position 0.95 × 2 = 1.9 → 30 + 0.9 × 20 = 48; max 50
    assert m["answer_ms_p50"] == 30.0 and m["answer_ms_p95"] == pytest.approx(48.0, abs=1e-12)
    assert m["answer_ms_max"] == 50.0 and d["answer_ms_p95"] == 3
    # total suite time: 40 + 10 + 30 + 50 = 130 over 4 recorded latencies
    assert m["total_suite_ms"] == 130.0 and d["total_suite_ms"] == 4
    assert m["error_rate"] == 0.25 and m["timeout_rate"] == 0.25  # l3 of all 4 queries


def test_operational_nulls_on_an_empty_run(tables) -> None:
    qs = _scores(tables, [_q("x")], [{"query_id": "x", "n_hits": 2}]).iloc[:0]
    m = aggregate_metrics(qs, KS, round_to=None)
    for name in (
        "error_rate",
        "timeout_rate",
        "empty_result_rate",
        "empty_response_rate",
        "mixed_version_rate",
        "retrieval_ms_p50",
        "retrieval_ms_p95",
        "retrieval_ms_max",
        "answer_ms_p50",
        "answer_ms_p95",
        "answer_ms_max",
        "total_suite_ms",
    ):
        assert m[name] is None, name


# ------------------------------------------------------------------------------------------------
# Retrieval edges named by the issue: multi-hop groups, heading prefix, null retrieval aggregates
# ------------------------------------------------------------------------------------------------


def test_multi_hop_recall_any_vs_recall_all(tables) -> None:
    three = [Support(chunk_id="s0"), Support(chunk_id="s1"), Support(chunk_id="s2")]
    queries, supports = tables.golden(
        _q("only_group0", supports=three, required_support_groups=[[0], [1, 2]]),
        _q("alternative", supports=three, required_support_groups=[[0], [1, 2]]),
        _q("no_groups", supports=three[:2]),  # each support its own group
        _q("late", supports=three, required_support_groups=[[0], [1, 2]]),
    )
    hits = tables.concat(
        tables.hits("only_group0", {"chunk_id": "s0"}, {"chunk_id": "x"}, {"chunk_id": "y"}),
        tables.hits("alternative", {"chunk_id": "s0"}, {"chunk_id": "s2"}),  # s2 stands in for s1
        tables.hits("no_groups", {"chunk_id": "s0"}, {"chunk_id": "x"}),
        tables.hits("late", {"chunk_id": "x"}, {"chunk_id": "s2"}, {"chunk_id": "s0"}),
    )
    outcomes = tables.outcomes(*[{"query_id": q, "n_hits": 3} for q in queries["query_id"]])
    qs = build_query_scores(queries, supports, hits, outcomes, tables.citations(), ks=KS)
    assert _column(qs, "recall_any@1") == {
        "only_group0": 1.0,
        "alternative": 1.0,
        "no_groups": 1.0,
        "late": 0.0,
    }
    assert _column(qs, "recall_all@1") == {
        "only_group0": 0.0,
        "alternative": 0.0,
        "no_groups": 0.0,
        "late": 0.0,
    }
    # @3: group [1, 2] is satisfied by s2 (rank 2) for "alternative" and "late" (s2 rank 2, s0 rank 3).
    assert _column(qs, "recall_any@3") == {
        "only_group0": 1.0,
        "alternative": 1.0,
        "no_groups": 1.0,
        "late": 1.0,
    }
    assert _column(qs, "recall_all@3") == {
        "only_group0": 0.0,
        "alternative": 1.0,
        "no_groups": 0.0,
        "late": 1.0,
    }
    m = aggregate_metrics(qs, KS, round_to=None)
    assert (m["recall_any@1"], m["recall_all@1"]) == (3 / 4, 0.0)
    assert (m["recall_any@3"], m["recall_all@3"]) == (1.0, 2 / 4)


@pytest.mark.parametrize("criterion", ["auto", "anchor"])
def test_heading_prefix_rule_end_to_end(tables, criterion: str) -> None:
    # Gold `A > B` matches a hit at `A > B > C`, never one at `A > Bx`.
    gold = [Support(rel_path="a.md", heading_path=["A", "B"])]
    queries, supports = tables.golden(_q("deeper", supports=gold), _q("sibling", supports=gold))
    hits = tables.concat(
        tables.hits(
            "deeper",
            {"doc_path": "a.md", "heading_path": ["A", "Bx"]},
            {"doc_path": "a.md", "heading_path": ["A", "B", "C"]},
        ),
        tables.hits("sibling", {"doc_path": "a.md", "heading_path": ["A", "Bx"]}),
    )
    outcomes = tables.outcomes({"query_id": "deeper", "n_hits": 2}, {"query_id": "sibling", "n_hits": 1})
    qs = build_query_scores(queries, supports, hits, outcomes, tables.citations(), ks=KS, criterion=criterion)
    # deeper: first relevant rank 2 → mrr 1/2, hit@1 0, hit@3 1; sibling: nothing relevant.
    assert _column(qs, "mrr") == {"deeper": 0.5, "sibling": 0.0}
    assert _column(qs, "hit@1") == {"deeper": 0.0, "sibling": 0.0}
    assert _column(qs, "hit@3") == {"deeper": 1.0, "sibling": 0.0}
    assert _column(qs, "precision@3") == {"deeper": 1 / 3, "sibling": 0.0}  # fixed denominator k = 3


def test_every_retrieval_aggregate_is_null_without_applicable_queries(tables) -> None:
    # Unanswerable, answerable-without-supports and grade-0-only queries are never applicable.
    queries = [
        _q("u", answerable=False, group="g"),
        _q("nosup", group="g"),
        _q("grade0", supports=[Support(chunk_id="g", grade=0)]),
    ]
    qs = _scores(tables, queries, [{"query_id": q.id, "n_hits": 2} for q in queries])
    m = aggregate_metrics(qs, KS, round_to=None)
    d = metric_denominators(qs, KS)
    names = [
        "mrr",
        *[f"{r}@{k}" for r in RETRIEVAL_AT_K for k in KS],
        *[f"group_consistency@{k}" for k in KS],
    ]
    assert m["n_applicable"] == 0
    assert {n: m[n] for n in names} == dict.fromkeys(names)
    assert all(d[n] == 0 for n in names)


# ------------------------------------------------------------------------------------------------
# AP / AP@k, R-precision, bpref and judged@k, at relevance level 1 and 2 (trec_eval -l)
# ------------------------------------------------------------------------------------------------

# Supports are documents (doc_id), so hits repeat them. Grades: A has D1 (2), D2 (1), D3 (3, never
# retrieved), N1 and N2 (0: judged non-relevant, N2 never retrieved); B has E (1) and no hits; C has
# only a grade-0 support; D has R1, R2 (1) and M1, M2, M3 (0); U is unanswerable.
RANKED_QUERIES = [
    _q(
        "A",
        supports=[
            Support(doc_id="D1", grade=2),
            Support(doc_id="D2", grade=1),
            Support(doc_id="D3", grade=3),
            Support(doc_id="N1", grade=0),
            Support(doc_id="N2", grade=0),
        ],
    ),
    _q("B", supports=[Support(doc_id="E")]),
    _q("C", supports=[Support(doc_id="N1", grade=0)]),
    _q(
        "D",
        supports=[
            Support(doc_id="R1"),
            Support(doc_id="R2"),
            Support(doc_id="M1", grade=0),
            Support(doc_id="M2", grade=0),
            Support(doc_id="M3", grade=0),
        ],
    ),
    _q("U", answerable=False, supports=[Support(doc_id="D1")]),
]
RANKED_HITS = {
    # A: N1 (judged non-relevant), D1, X (no support: unjudged), N1 again (a repeat: judged for
    # judged@k, but no second judged document for bpref), D2.
    "A": ["N1", "D1", "X", "N1", "D2"],
    "C": ["N1"],
    "D": ["M1", "R1", "M2", "M3", "R2"],
    "U": ["D1"],
}
RANKED_KS = (1, 3, 5)

# Level 1 — A: R = 3 (D1, D2, D3), N = 2 (N1, N2); relevant hits at ranks 2 and 5.
#   map = (1/2 + 2/5) / 3 = 0.3; map@1 = 0; map@3 = (1/2) / 3 = 1/6; map@5 = 0.3 (still ÷ R = 3)
#   rprec: ranks ≤ R = 3 hold one relevant hit → 1/3
#   bpref: rank 2 has 1 judged non-relevant above (rank 1; rank 3 is unjudged) → 1 − min(1, 3)/min(2, 3)
#     = 1/2; rank 5 also 1 (rank 4 repeats N1: unjudged) → 1/2; (1/2 + 1/2) / 3 = 1/3
#   judged@1 = 1/1; judged@3 = 2/3 (X is unjudged); judged@5 = 4/5 (the repeat of N1 is judged)
# B: R = 1, no hits → 0 everywhere (judged@k too: ir_measures scores a query without hits 0).
# C (grade 0 only) and U (unanswerable): not applicable → null.
# D: R = 2, N = 3; relevant at ranks 2 and 5.
#   map = (1/2 + 2/5) / 2 = 0.45 = map@5; map@1 = 0; map@3 = (1/2) / 2 = 1/4; rprec = 1/2
#   bpref: rank 2 → 1 − min(1, 2)/min(3, 2) = 1/2; rank 5 has 3 above → 1 − min(3, 2)/2 = 0
#     (at most R non-relevant count); (1/2 + 0) / 2 = 1/4.  judged@k = 1 (every hit matches).
# Level 2 — only grades ≥ 2 are relevant: A: R = 2 (D1, D3), N = 3 (D2, N1, N2); D2 at rank 5 is now
#   judged non-relevant. map = (1/2) / 2 = 1/4 = map@3 = map@5; map@1 = 0; rprec: rank ≤ 2 → 1/2;
#   bpref: rank 2 → 1 − min(1, 2)/min(3, 2) = 1/2, ÷ 2 = 1/4; judged@k does not depend on the level.
#   B and D have no support of grade ≥ 2: not applicable.
#                      A      B    C  D     U
RANKED_LEVEL_1 = {
    "map": (0.3, 0.0, N, 0.45, N),
    "map@1": (0.0, 0.0, N, 0.0, N),
    "map@3": (1 / 6, 0.0, N, 1 / 4, N),
    "map@5": (0.3, 0.0, N, 0.45, N),
    "rprec": (1 / 3, 0.0, N, 1 / 2, N),
    "bpref": (1 / 3, 0.0, N, 1 / 4, N),
    "judged@1": (1.0, 0.0, N, 1.0, N),
    "judged@3": (2 / 3, 0.0, N, 1.0, N),
    "judged@5": (4 / 5, 0.0, N, 1.0, N),
}
RANKED_LEVEL_2 = {
    "map": (1 / 4, N, N, N, N),
    "map@1": (0.0, N, N, N, N),
    "map@3": (1 / 4, N, N, N, N),
    "map@5": (1 / 4, N, N, N, N),
    "rprec": (1 / 2, N, N, N, N),
    "bpref": (1 / 4, N, N, N, N),
    "judged@1": (1.0, N, N, N, N),
    "judged@3": (2 / 3, N, N, N, N),
    "judged@5": (4 / 5, N, N, N, N),
}
# Means over the applicable queries — level 1: A, B, D (3); level 2: A (1).
RANKED_AGGREGATES = {
    1: {
        "map": (0.3 + 0 + 0.45) / 3,  # 0.25
        "map@3": (1 / 6 + 0 + 1 / 4) / 3,  # 5/36
        "rprec": (1 / 3 + 0 + 1 / 2) / 3,  # 5/18
        "bpref": (1 / 3 + 0 + 1 / 4) / 3,  # 7/36
        "judged@3": (2 / 3 + 0 + 1) / 3,  # 5/9
        "judged@5": (4 / 5 + 0 + 1) / 3,  # 0.6
    },
    2: {"map": 1 / 4, "map@3": 1 / 4, "rprec": 1 / 2, "bpref": 1 / 4, "judged@3": 2 / 3, "judged@5": 4 / 5},
}


def _ranked_run(tables, level: int) -> pd.DataFrame:
    q_table, s_table = tables.golden(*RANKED_QUERIES)
    hits = tables.concat(
        *[
            tables.hits(qid, *[{"chunk_id": f"{qid}-{i}", "doc_id": doc} for i, doc in enumerate(docs)])
            for qid, docs in RANKED_HITS.items()
        ]
    )
    outcomes = tables.outcomes(
        *[{"query_id": q.id, "n_hits": len(RANKED_HITS.get(q.id, []))} for q in RANKED_QUERIES]
    )
    return build_query_scores(
        q_table,
        s_table,
        hits,
        outcomes,
        tables.citations(),
        ks=RANKED_KS,
        criterion="doc",
        relevance_level=level,
    )


@pytest.mark.parametrize("level", [1, 2])
def test_ap_rprec_bpref_judged_by_hand(tables, level: int) -> None:
    qs = _ranked_run(tables, level)
    for column, values in (RANKED_LEVEL_1 if level == 1 else RANKED_LEVEL_2).items():
        expected = dict(zip([q.id for q in RANKED_QUERIES], map(float, values), strict=True))
        got = _column(qs, column)
        assert got.keys() == expected.keys(), column
        for qid, value in expected.items():
            assert (math.isnan(value) and math.isnan(got[qid])) or got[qid] == pytest.approx(
                value, abs=1e-15
            ), (
                column,
                qid,
                got[qid],
            )
    m = aggregate_metrics(qs, RANKED_KS, round_to=None)
    d = metric_denominators(qs, RANKED_KS)
    for metric, value in RANKED_AGGREGATES[level].items():
        assert m[metric] == pytest.approx(value, abs=1e-15), metric
        assert d[metric] == (3 if level == 1 else 1), metric
    assert m["n_applicable"] == (3 if level == 1 else 1)


def test_the_level_changes_relevance_not_ndcg_gains(tables) -> None:
    # A at level 2: the first relevant hit is still D1 at rank 2 (mrr 1/2), but D2 (grade 1) no longer
    # counts for recall@5 (1 of R = 2) or precision@5 (1/5); nDCG keeps the raw grades at both levels:
    # DCG@5 = 2/log2(3) + 1/log2(6), ideal 3/log2(2) + 2/log2(3) + 1/log2(4).
    one = _ranked_run(tables, 1).set_index("query_id").loc["A"]
    two = _ranked_run(tables, 2).set_index("query_id").loc["A"]
    assert (one["mrr"], two["mrr"]) == (0.5, 0.5)
    assert (one["recall@5"], two["recall@5"]) == (2 / 3, 1 / 2)
    assert (one["precision@5"], two["precision@5"]) == (2 / 5, 1 / 5)
    ndcg = (2 / math.log2(3) + 1 / math.log2(6)) / (3 + 2 / math.log2(3) + 1 / math.log2(4))
    assert one["ndcg@5"] == pytest.approx(ndcg, abs=1e-15) and two["ndcg@5"] == one["ndcg@5"]
    assert (one["recall_all@5"], two["recall_all@5"]) == (0.0, 0.0)  # D3 is never found
    assert (one["recall_any@1"], one["recall_any@3"], two["recall_any@3"]) == (0.0, 1.0, 1.0)


# ------------------------------------------------------------------------------------------------
# Group consistency on a hand-built query_scores table
# ------------------------------------------------------------------------------------------------


def test_group_consistency_by_hand() -> None:
    # g1: a, b both hit@1 → consistent; g2: c hits, d misses → not; g3: e is not applicable (NaN)
    # → not a group with a defined member; f has no group. hit@1 consistency = 1 of 2 groups.
    # @3: d hits too → 2 of 2.
    qs = pd.DataFrame(
        {
            "query_id": list("abcdef"),
            "group": pd.array(["g1", "g1", "g2", "g2", "g3", None], dtype="string"),
            "hit@1": [1.0, 1.0, 1.0, 0.0, N, 0.0],
            "hit@3": [1.0, 1.0, 1.0, 1.0, N, 0.0],
        }
    )
    m = aggregate_metrics(qs, KS, round_to=None)
    assert (m["group_consistency@1"], m["group_consistency@3"]) == (0.5, 1.0)
    assert metric_denominators(qs, KS)["group_consistency@1"] == 2
    ungrouped = qs.assign(group=pd.array([None] * 6, dtype="string"))
    assert aggregate_metrics(ungrouped, KS, round_to=None)["group_consistency@1"] is None
    assert metric_denominators(ungrouped, KS)["group_consistency@1"] == 0


# ------------------------------------------------------------------------------------------------
# Breakdowns: a slice's value is the metric recomputed on that slice's rows (property test)
# ------------------------------------------------------------------------------------------------


def _random_query_scores(rng: np.random.Generator, n: int) -> pd.DataFrame:
    def maybe(p_nan: float, values: np.ndarray) -> np.ndarray:
        return np.where(rng.random(n) < p_nan, N, values)

    answerable = rng.random(n) < 0.7
    applicable = answerable & (rng.random(n) < 0.8)
    cols: dict[str, object] = {
        "query_id": [f"q{i}" for i in range(n)],
        "category": pd.array(rng.choice(["factual", "code", "", None], n), dtype="string"),
        "difficulty": pd.array(rng.choice(["easy", "hard", None], n), dtype="string"),
        "lang": pd.array(rng.choice(["en", "ko"], n), dtype="string"),
        "tags": [list(rng.choice(["x", "y", "z"], int(rng.integers(0, 3)), replace=False)) for _ in range(n)],
        "group": pd.array(rng.choice(["g1", "g2", "g3", None], n), dtype="string"),
        "answerable": pd.array(np.where(rng.random(n) < 0.05, None, answerable), dtype="boolean"),
        "applicable": applicable,
        "n_hits": rng.integers(0, 6, n),
        "mrr": np.where(applicable, rng.choice([0.0, 1.0, 0.5, 1 / 3], n), N),
    }
    for metric in RETRIEVAL_AT_K:
        for k in KS:
            cols[f"{metric}@{k}"] = np.where(applicable, rng.choice([0.0, 1.0, 1 / 3, 2 / 3], n), N)
    for column in ALL_ANSWER_COLUMNS:
        cols[column] = maybe(0.4, rng.integers(0, 2, n).astype(float))
    cols["error"] = pd.array(np.where(rng.random(n) < 0.2, "RuntimeError: x", None), dtype="string")
    cols["timed_out"] = rng.random(n) < 0.1
    cols["empty_result"] = cols["n_hits"] == 0
    cols["empty_response"] = maybe(0.5, rng.integers(0, 2, n).astype(float))
    cols["mixed_version_hits"] = np.minimum(rng.integers(0, 3, n), cols["n_hits"])
    cols["retrieval_ms"] = maybe(0.2, rng.gamma(2.0, 20.0, n))
    cols["answer_ms"] = maybe(0.5, rng.gamma(2.0, 50.0, n))
    return pd.DataFrame(cols)


def _slice_rows(qs: pd.DataFrame, dimension: str, value: str) -> np.ndarray:
    if dimension == "tag":
        return np.array([value in tags for tags in qs["tags"]])
    if dimension == "answerable":
        flag = qs["answerable"]
        label = flag.map({True: "true", False: "false"}).astype(object).where(flag.notna(), "(none)")
        return (label == value).to_numpy()
    labels = qs[dimension].astype(object).where(qs[dimension].notna() & (qs[dimension] != ""), "(none)")
    return (labels == value).to_numpy()


@pytest.mark.parametrize("seed", range(5))
def test_breakdown_slices_equal_the_metric_on_the_slice(seed: int) -> None:
    rng = np.random.default_rng(seed)
    qs = _random_query_scores(rng, int(rng.integers(20, 60)))
    table = breakdowns(qs, KS, round_to=None)
    assert set(table["dimension"]) == set(BREAKDOWN_DIMENSIONS)
    for (dimension, value), rows in table.groupby(["dimension", "value"], sort=False):
        part = qs[_slice_rows(qs, dimension, value)]
        assert len(part), (dimension, value)
        expected = aggregate_metrics(part, KS, round_to=None)
        denominators = metric_denominators(part, KS)
        for metric, score, n in zip(rows["metric"], rows["score"], rows["n"], strict=True):
            e = expected[metric]
            assert (e is None and math.isnan(score)) or score == pytest.approx(e, abs=1e-12), (
                dimension,
                value,
                metric,
            )
            assert n == denominators[metric], (dimension, value, metric)


# ------------------------------------------------------------------------------------------------
# WFGY worked example: the values are asserted in tests/data/test_wfgy_example.py; here the
# denominators and per-query columns behind them (S = 2 shipped, U = 1 unanswerable, A = 2 answerable).
# ------------------------------------------------------------------------------------------------

WFGY_CONFIG = Path(__file__).resolve().parents[2] / "docs" / "examples" / "wfgy" / "replay.yaml"


def test_wfgy_worked_example_denominators_and_rows() -> None:
    from kebab_eval_pipeline.chain import pipeline
    from kebab_eval_pipeline.chain.settings import load_settings

    settings = load_settings(WFGY_CONFIG)
    golden = pipeline.load_golden_artifact(settings)
    retrieval = pipeline.retrieve(settings, golden)
    qs = pipeline.score(settings, golden, retrieval).scores
    m = aggregate_metrics(qs, settings.k, round_to=None)
    d = metric_denominators(qs, settings.k)
    # Precision = 2/2, CHR = 2/2, under-refusal = 0/1, over-refusal = 0/2 (A0002 refused correctly).
    assert (m["answer_precision"], d["answer_precision"]) == (1.0, 2)
    assert (m["chr"], d["chr"]) == (1.0, 2)
    assert (m["under_refusal_rate"], d["under_refusal_rate"]) == (0.0, 1)
    assert (m["over_refusal_rate"], d["over_refusal_rate"]) == (0.0, 2)
    assert (m["refusal_correctness"], d["refusal_correctness"]) == (1.0, 1)
    assert _same(_column(qs, "chr"), {"A0001": 1.0, "A0002": N, "A0003": 1.0})
    assert _same(_column(qs, "answer_precision"), {"A0001": 1.0, "A0002": N, "A0003": 1.0})
    assert _same(_column(qs, "refusal_correct"), {"A0001": N, "A0002": 1.0, "A0003": N})
