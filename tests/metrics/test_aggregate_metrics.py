"""query_scores assembly, aggregation (None for empty denominators), denominators and breakdowns."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from kebab_eval_pipeline.golden.model import GoldenQuery, Support
from kebab_eval_pipeline.metrics.aggregate import (
    BREAKDOWN_COLUMNS,
    QUERY_META_COLUMNS,
    aggregate_metrics,
    breakdowns,
    build_query_scores,
    metric_denominators,
    metric_names,
)

KS = (1, 3)


def _scores(tables, answers: bool = True) -> pd.DataFrame:
    queries, supports = tables.golden(
        GoldenQuery(
            id="a",
            query="?",
            category="factual",
            lang="en",
            tags=["x", "y"],
            group="g1",
            supports=[Support(chunk_id="c1")],
        ),
        GoldenQuery(
            id="b",
            query="?",
            category="factual",
            lang="ko",
            tags=["x"],
            group="g1",
            supports=[Support(chunk_id="c1")],
        ),
        GoldenQuery(
            id="c",
            query="?",
            category="code",
            difficulty="hard",
            group="g2",
            supports=[Support(chunk_id="c2")],
        ),
        GoldenQuery(id="d", query="?", category="code", answerable=False, group="g2", tags=["y"]),
    )
    hits = tables.concat(
        tables.hits("a", {"chunk_id": "c1"}),  # hit@1
        tables.hits("b", {"chunk_id": "z"}, {"chunk_id": "c1"}),  # hit@3 only
        tables.hits("c", {"chunk_id": "z"}),  # miss
    )
    rows = [
        {"query_id": "a", "n_hits": 1, "retrieval_ms": 1.0},
        {"query_id": "b", "n_hits": 2, "retrieval_ms": 2.0},
        {"query_id": "c", "n_hits": 1, "retrieval_ms": 3.0},
        {"query_id": "d", "n_hits": 0, "retrieval_ms": 4.0},
    ]
    if answers:
        rows[0].update(answered=True, answer_text="yes", refused=False, answer_ms=10.0)
        rows[3].update(answered=True, answer_text="no", refused=True, answer_ms=20.0)
    citations = tables.citations({"query_id": "a", "chunk_id": "c1"}) if answers else tables.citations()
    return build_query_scores(
        queries, supports, hits, tables.outcomes(*rows), citations, ks=KS, known_chunk_ids=frozenset({"c1"})
    )


def test_query_scores_columns(tables) -> None:
    qs = _scores(tables)
    assert list(qs.columns[: len(QUERY_META_COLUMNS)]) == list(QUERY_META_COLUMNS)
    for column in (
        "applicable",
        "first_relevant_rank",
        "mrr",
        "hit@1",
        "ndcg@3",
        "chr",
        "error",
        "retrieval_ms",
    ):
        assert column in qs.columns
    assert qs["query_id"].tolist() == ["a", "b", "c", "d"]
    assert qs["tags"].tolist()[0] == ["x", "y"]


def test_aggregate_values(tables) -> None:
    qs = _scores(tables)
    m = aggregate_metrics(qs, KS)
    assert list(m) == [n for n in metric_names(KS) if n in m]
    assert m["n_queries"] == 4 and m["n_applicable"] == 3
    assert m["hit@1"] == round(1 / 3, 4) and m["hit@3"] == round(2 / 3, 4)
    assert m["mrr"] == round((1 + 0.5 + 0) / 3, 4)
    assert m["precision@3"] == round((1 / 3 + 1 / 3 + 0) / 3, 4)
    # g1 = {a: hit@1 1, b: hit@1 0}; g2 = {c: 0, d: not applicable} → consistency@1 = 0, @3 = 1/2
    assert m["group_consistency@1"] == 0.0 and m["group_consistency@3"] == 0.5
    assert m["refusal_correctness"] == 1.0 and m["under_refusal_rate"] == 0.0
    assert m["over_refusal_rate"] == 0.0  # a answered (b, c produced no answer)
    assert m["citation_coverage"] == 1.0 and m["chr"] == 1.0 and m["attribution_hit_rate"] == 1.0
    assert m["answer_precision"] == 1.0  # no claim substrings / must_contain: the citation decides
    assert m["groundedness_rule"] is None  # nobody has must_contain / forbidden
    assert m["error_rate"] == 0.0 and m["empty_result_rate"] == 0.25
    assert m["retrieval_ms_p50"] == 2.5 and m["answer_ms_max"] == 20.0 and m["total_suite_ms"] == 40.0


def test_unrounded_path(tables) -> None:
    qs = _scores(tables)
    assert aggregate_metrics(qs, KS, round_to=None)["hit@1"] == 1 / 3
    assert aggregate_metrics(qs, KS)["hit@1"] == 0.3333


def test_empty_denominators_are_none_never_zero_or_one(tables) -> None:
    qs = _scores(tables, answers=False)
    m = aggregate_metrics(qs, KS)
    for name in (
        "refusal_correctness",
        "under_refusal_rate",
        "over_refusal_rate",
        "citation_coverage",
        "chr",
        "answer_precision",
        "attribution_hit_rate",
        "groundedness_rule",
        "answer_ms_p50",
        "empty_response_rate",
    ):
        assert m[name] is None, name
    json.dumps(m)  # None serialises as null
    d = metric_denominators(qs, KS)
    assert d["chr"] == 0 and d["hit@1"] == 3 and d["error_rate"] == 4 and d["group_consistency@3"] == 2

    nothing = qs.iloc[:0]
    m0 = aggregate_metrics(nothing, KS)
    assert m0["n_queries"] == 0 and m0["n_applicable"] == 0
    assert all(v is None for k, v in m0.items() if k not in ("n_queries", "n_applicable"))


def test_only_unanswerable_queries_have_no_retrieval_metrics(tables) -> None:
    qs = _scores(tables)
    m = aggregate_metrics(qs[qs["query_id"] == "d"], KS)
    assert (
        m["hit@1"] is None and m["mrr"] is None and m["ndcg@3"] is None and m["group_consistency@1"] is None
    )
    assert m["refusal_correctness"] == 1.0


def test_ks_are_inferred(tables) -> None:
    qs = _scores(tables)
    assert aggregate_metrics(qs) == aggregate_metrics(qs, KS)


def test_breakdowns(tables) -> None:
    qs = _scores(tables)
    b = breakdowns(qs, KS)
    assert {c: str(t) for c, t in b.dtypes.items()} == BREAKDOWN_COLUMNS
    assert set(b["dimension"]) == {"category", "difficulty", "lang", "tag", "answerable"}
    get = b.set_index(["dimension", "value", "metric"]).sort_index()
    assert get.loc[("category", "factual", "hit@1"), "score"] == 0.5
    assert get.loc[("category", "factual", "hit@1"), "n"] == 2
    assert get.loc[("category", "code", "hit@3"), "score"] == 0.0
    assert get.loc[("tag", "x", "mrr"), "score"] == 0.75  # a (1) and b (1/2)
    assert get.loc[("tag", "y", "hit@1"), "n"] == 1  # d is tagged y but not applicable
    assert get.loc[("tag", "y", "refusal_correctness"), "score"] == 1.0
    assert get.loc[("difficulty", "(none)", "hit@1"), "n"] == 2
    assert get.loc[("lang", "(none)", "error_rate"), "n"] == 2
    assert get.loc[("answerable", "false", "over_refusal_rate"), "n"] == 0
    assert math.isnan(get.loc[("answerable", "false", "over_refusal_rate"), "score"])
    assert get.loc[("answerable", "true", "group_consistency@3"), "score"] == 0.5
    # per slice, every score equals aggregate_metrics on the slice
    slice_m = aggregate_metrics(qs[qs["category"] == "code"], KS)
    for metric, row in get.loc[("category", "code")].iterrows():
        expected = slice_m[metric]
        assert (expected is None and np.isnan(row["score"])) or row["score"] == expected, metric


def test_breakdowns_of_empty_scores(tables) -> None:
    b = breakdowns(_scores(tables).iloc[:0], KS)
    assert len(b) == 0 and list(b.columns) == list(BREAKDOWN_COLUMNS)


@pytest.mark.parametrize("criterion", ["auto", "chunk", "doc", "anchor", "span"])
def test_every_criterion_builds(tables, criterion: str) -> None:
    queries, supports = tables.golden(
        GoldenQuery(id="a", query="?", supports=[Support(chunk_id="c1", rel_path="p.md")])
    )
    hits = tables.hits("a", {"chunk_id": "c1", "doc_path": "p.md"})
    qs = build_query_scores(
        queries,
        supports,
        hits,
        tables.outcomes({"query_id": "a", "n_hits": 1}),
        tables.citations(),
        criterion=criterion,
    )
    assert qs.loc[0, "hit@1"] == 1.0


def test_parquet_round_trip_of_inputs_gives_the_same_scores(tables, tmp_path) -> None:
    queries, supports = tables.golden(
        GoldenQuery(
            id="a",
            query="?",
            tags=["x"],
            must_contain=["yes"],
            gold_claim_substr=["yes it is"],
            supports=[Support(chunk_id="c1", heading_path=["H"])],
            required_support_groups=[[0]],
        ),
        GoldenQuery(id="b", query="?", answerable=False, forbidden=["no"]),
    )
    hits = tables.concat(tables.hits("a", {"chunk_id": "c1", "heading_path": ["H", "I"]}), tables.hits("b"))
    outcomes = tables.outcomes(
        {"query_id": "a", "n_hits": 1, "answered": True, "answer_text": "Yes it is", "refused": False},
        {"query_id": "b", "answered": True, "answer_text": "not in context", "refused": True},
    )
    citations = tables.citations({"query_id": "a", "chunk_id": "c1"})
    frames = {"q": queries, "s": supports, "h": hits, "o": outcomes, "c": citations}
    for name, frame in frames.items():
        frame.to_parquet(tmp_path / f"{name}.parquet")
    loaded = {name: pd.read_parquet(tmp_path / f"{name}.parquet") for name in frames}
    direct = build_query_scores(queries, supports, hits, outcomes, citations, ks=KS)
    stored = build_query_scores(loaded["q"], loaded["s"], loaded["h"], loaded["o"], loaded["c"], ks=KS)
    metric_cols = [c for c in direct.columns if c not in QUERY_META_COLUMNS]
    pd.testing.assert_frame_equal(direct[metric_cols], stored[metric_cols], check_dtype=False)
    assert direct.loc[0, "answer_precision"] == 1.0 and direct.loc[0, "groundedness_rule"] == 1.0
    assert direct.loc[0, "recall_all@1"] == 1.0 and direct.loc[1, "refusal_correct"] == 1.0


def test_stored_scores_are_rounded_and_the_summary_comes_from_exact_values() -> None:
    from kebab_eval_pipeline.metrics.aggregate import round_scores, summarize_scores

    # Three per-query nDCG values whose rounding errors add up: exact mean 0.00006 → 0.0001, but the
    # mean of the rounded values (0, 0, 0.0001) would be 0.0000333 → 0.0.
    exact = pd.DataFrame(
        {
            "query_id": pd.array(["a", "b", "c"], dtype="string"),
            "applicable": [True, True, True],
            "ndcg@1": [0.00004, 0.00004, 0.0001],
            "hit@1": [0.0, 0.0, 1.0],
            "first_relevant_rank": pd.array([None, None, 1], dtype="Int64"),
        }
    )
    stored = round_scores(exact)
    assert stored["ndcg@1"].tolist() == [0.0, 0.0, 0.0001]
    assert stored["first_relevant_rank"].dtype == "Int64" and stored["query_id"].dtype == "string"
    assert summarize_scores(exact, [1]).metrics["ndcg@1"] == 0.0001
    assert summarize_scores(stored, [1]).metrics["ndcg@1"] == 0.0


def test_pipeline_stores_four_decimals() -> None:
    import numpy as np

    from kebab_eval_pipeline.chain import pipeline
    from kebab_eval_pipeline.chain.settings import settings_from_dict

    settings = settings_from_dict({"baseline": "none"})
    golden = pipeline.load_golden_artifact(settings)
    scores = pipeline.score(settings, golden, pipeline.retrieve(settings, golden))
    floats = scores.scores.select_dtypes("float64")
    assert {"mrr", "ndcg@10", "retrieval_ms"} <= set(floats.columns)
    values = floats.to_numpy()
    ok = ~np.isnan(values)
    assert np.array_equal(values[ok], np.round(values[ok], 4))
    assert scores.summary is not None and scores.summary.metrics["mrr"] == 0.6985  # the demo's MRR
