"""The metric catalogue is the one source of metric facts: a real (judged) demo run produces exactly
the declared metrics, names parse in one place, and gates / paired tests follow the declarations."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kebab_eval_pipeline.chain import pipeline
from kebab_eval_pipeline.chain.artifacts import JudgeArtifact
from kebab_eval_pipeline.chain.settings import settings_from_dict
from kebab_eval_pipeline.compare.deltas import directions
from kebab_eval_pipeline.compare.significance import compare_query_scores
from kebab_eval_pipeline.gates.evaluate import check_gate_names, evaluate_regression_gate
from kebab_eval_pipeline.gates.settings import RegressionGateSettings
from kebab_eval_pipeline.judge.config import JudgeSettings
from kebab_eval_pipeline.judge.run import judge_run
from kebab_eval_pipeline.metrics import catalogue
from kebab_eval_pipeline.metrics.aggregate import QUERY_META_COLUMNS, aggregate_metrics, breakdowns
from tests.judge.scripted import ScriptedJudge, demo_run

#: query_scores columns that are facts about a query, not the per-query value of any metric.
NOT_METRIC_COLUMNS = {
    *QUERY_META_COLUMNS,
    "applicable",
    "n_hits",
    "first_relevant_rank",
    "refused",
    "n_citations",
    "error_class",
    "attempts",
    "match_criterion",
}


@pytest.fixture(scope="module")
def judged_run():
    """The demo run (reference system) judged by the scripted judge: scores and run metrics."""
    settings, golden, retrieval = demo_run()
    r = retrieval.results
    judgements, info = judge_run(
        JudgeSettings(), golden.queries, r.outcomes, r.hits, r.citations, None, lambda _: ScriptedJudge()
    )
    judged = JudgeArtifact(judgements, info)
    scores = pipeline.score(settings, golden, retrieval, judged)
    metrics = pipeline.summarize("catalogue-1", settings, golden, retrieval, scores, judged)
    return settings, scores.scores, metrics


def test_a_judged_run_produces_exactly_the_declared_metrics(judged_run):
    settings, _, art = judged_run
    assert list(art.metrics) == [m for m in catalogue.metric_names(settings.k) if m in art.metrics]
    # the judge's calibration metrics need a person's labels (judge.calibration): not configured here
    calibrated = set(catalogue.family_names("judge_calibration"))
    assert calibrated and not calibrated & set(art.metrics)
    assert set(art.metrics) == set(catalogue.metric_names(settings.k)) - calibrated
    # sliced: exactly the sliceable metrics (counts and run-level numbers have no slices)
    sliced = set(art.breakdowns["metric"])
    assert sliced == {m for m in catalogue.metric_names(settings.k) if catalogue.is_sliceable(m)}


def test_every_query_scores_column_is_a_declared_metric_column_or_a_fact(judged_run):
    settings, scores, _ = judged_run
    declared: set[str] = set()
    for entry in catalogue.measures():
        for k in settings.k if entry.at_k else [None]:
            for template in (entry.column, *entry.reads):
                if template is not None:
                    declared.add(template.replace("{k}", str(k)))
    undeclared = set(scores.columns) - declared - NOT_METRIC_COLUMNS
    assert not undeclared, f"per-query columns no metric declares: {sorted(undeclared)}"
    # and every declared per-query column is there, so each mean metric can be computed
    assert not {c for c in declared if c not in scores.columns}


def test_the_core_never_lists_judge_metrics_the_judge_registers_them():
    judge = [e for e in catalogue.measures() if e.family in ("judge", "judge_run")]
    assert {e.name for e in judge} >= {"judge_groundedness", "judge_disagreement_rate", "judge_cost_usd"}
    source = catalogue.__file__
    with open(source, encoding="utf-8") as f:
        assert "judge_groundedness" not in f.read()


def test_facts_read_from_the_catalogue():
    assert catalogue.metric_column("citation_coverage") == "citation_ok"
    assert catalogue.metric_column("ndcg@10") == "ndcg@10" and catalogue.metric_column("hit") is None
    assert catalogue.trec_names("ndcg@10") == ("ndcg_cut_10", "nDCG@10")
    assert catalogue.trec_names("precision@5") == ("P_5", "P@5")
    assert catalogue.trec_names("mrr") == ("recip_rank", "RR")
    assert catalogue.trec_names("doc_recall@5") == (None, None)
    assert catalogue.test_kind("hit@3") == "binary" and catalogue.test_kind("mrr") == "graded"
    assert catalogue.test_kind("error_rate") is None
    assert catalogue.lower_is_better("retrieval_ms_p95") and not catalogue.lower_is_better("mrr")
    assert catalogue.direction("index_chunks") == "none"
    assert pipeline.HEADLINE[:3] == ("hit@1", "hit@5", "mrr")
    at_5_or_10 = {"hit@5", "recall@5", "precision@5", "ndcg@10"}
    assert catalogue.headline_names([1, 3]) == [n for n in pipeline.HEADLINE if n not in at_5_or_10]
    assert catalogue.column_description("hit@3") == "1 when a relevant hit is among the top 3"


# ---------------------------------------------------------------------------------------------
# the one parser

_stems = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True)
_dims = st.from_regex(r"[A-Za-z_][A-Za-z0-9_ -]{0,8}[A-Za-z0-9_]|[A-Za-z_]", fullmatch=True)
_values = st.text(
    st.characters(blacklist_characters="[]", blacklist_categories=("Cs", "Zs", "Cc")), max_size=8
)


@given(_stems, st.none() | st.integers(1, 10_000), st.none() | st.tuples(_dims, _values))
def test_names_round_trip(stem, k, piece):
    dimension, value = piece or (None, None)
    text = catalogue.format_name(stem, k, dimension, value)
    parsed = catalogue.parse(text)
    assert (parsed.stem, parsed.k, parsed.dimension, parsed.value) == (stem, k, dimension, value)
    assert parsed.label == text
    # spaces around the parts are not part of the name
    if dimension is not None:
        assert catalogue.parse(f" {stem}{'' if k is None else f'@{k}'}[ {dimension} = {value} ] ") == parsed


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("hit@0", "positive integer"),
        ("hit@05", "positive integer"),
        ("hit@x", "positive integer"),
        ("mrr[lang=ko", "expected NAME or NAME@K"),
        ("", "NAME must be"),
        ("9hit", "NAME must be"),
        ("mrr[=ko]", "empty DIMENSION"),
        ("hit@5@3", "expected NAME or NAME@K"),
    ],
)
def test_malformed_names_are_rejected_with_the_reason(text, why):
    with pytest.raises(catalogue.MetricNameError, match=why) as info:
        catalogue.parse(text)
    assert repr(text) in str(info.value)


def test_unknown_dimensions_are_rejected_when_the_caller_names_them():
    with pytest.raises(catalogue.MetricNameError, match="unknown breakdown dimension 'language'"):
        catalogue.parse("mrr[language=ko]", dimensions=("lang",))


# ---------------------------------------------------------------------------------------------
# consumers follow a declaration


def _pair() -> tuple[pd.DataFrame, pd.DataFrame]:
    ids = [f"q{i}" for i in range(8)]
    a = pd.DataFrame({"query_id": ids, "badness": [0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0]})
    b = pd.DataFrame({"query_id": ids, "badness": [1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0]})
    return a, b


def _badness(**facts) -> catalogue.Measure:
    base = {
        "name": "badness_rate",
        "family": "answer",
        "description": "share of bad answers (test metric)",
        "denominator": "answered queries",
        "column": "badness",
        "test": "binary",
        "direction": "lower",
    }
    return catalogue.Measure(**(base | facts))


def test_gate_direction_and_test_kind_come_from_the_declaration():
    gate = RegressionGateSettings(max_drop=0.1)
    a, b = _pair()
    # a rise of 0.5 of a lower-is-better metric is a regression; the paired test is exact McNemar
    with catalogue.registered(_badness()):
        [result] = evaluate_regression_gate(
            "badness_rate", gate, {"badness_rate": 0.625}, {"badness_rate": 0.125}
        )
        assert not result.passed and "allowed rise 0.1" in result.reason
        [row] = compare_query_scores(a, b, ["badness_rate"]).to_dict("records")
        assert row["test"] == "mcnemar_exact" and row["column"] == "badness"
        assert row["p_value"] == pytest.approx(0.125)  # 4 discordant pairs, all 0→1: 2 × 0.5⁴
        assert list(directions(pd.Series(["badness_rate"]), pd.Series([0.5]))) == ["worse"]
    # declared higher-is-better and graded: the same rise passes and is tested by randomization
    with catalogue.registered(_badness(direction="higher", test="graded")):
        [result] = evaluate_regression_gate(
            "badness_rate", gate, {"badness_rate": 0.625}, {"badness_rate": 0.125}
        )
        assert result.passed and "allowed drop 0.1" in result.reason
        [row] = compare_query_scores(a, b, ["badness_rate"]).to_dict("records")
        assert row["test"] == "randomization"
        assert list(directions(pd.Series(["badness_rate"]), pd.Series([0.5]))) == ["better"]
    # gone again: unknown to every consumer
    assert catalogue.measure("badness_rate") is None
    assert compare_query_scores(a, b, ["badness_rate"])["test"].isna().all()


def test_a_declared_mean_metric_is_aggregated_sliced_and_gateable():
    qs = pd.DataFrame(
        {"query_id": ["a", "b", "c"], "lang": ["en", "ko", "ko"], "badness": [1.0, np.nan, 0.0]}
    )
    with catalogue.registered(_badness()):
        assert aggregate_metrics(qs, ks=[1])["badness_rate"] == 0.5
        table = breakdowns(qs, ks=[1])
        ko = table[(table["metric"] == "badness_rate") & (table["value"] == "ko")]
        assert ko["score"].tolist() == [0.0] and ko["n"].tolist() == [1]
        check_gate_names(settings_from_dict({"gates": {"badness_rate[lang=ko]": {"max": 0.1}}}))
    with (
        catalogue.registered(_badness(sliceable=False)),
        pytest.raises(Exception, match="no breakdown slices"),
    ):
        check_gate_names(settings_from_dict({"gates": {"badness_rate[lang=ko]": {"max": 0.1}}}))
    assert "badness_rate" not in aggregate_metrics(qs, ks=[1])


def test_the_trec_measures_judged_and_the_relevance_level_flags():
    assert catalogue.trec_names("map") == ("map", "AP")
    assert catalogue.trec_names("map@10") == ("map_cut_10", "AP@10")
    assert catalogue.trec_names("rprec") == ("Rprec", "Rprec")
    assert catalogue.trec_names("bpref") == ("bpref", "Bpref")
    assert catalogue.trec_names("judged@5") == (None, "Judged@5")
    assert catalogue.metric_column("map") == "map" and catalogue.metric_column("map@3") == "map@3"
    assert all(catalogue.test_kind(m) == "graded" for m in ("map", "map@3", "rprec", "bpref", "judged@3"))
    assert catalogue.direction("judged@10") == "none" and catalogue.direction("bpref") == "higher"
    retrieval = catalogue.metric_names([1, 5], ["retrieval"])
    assert retrieval[retrieval.index("ndcg@5") + 1 :] == [
        "map",
        "map@1",
        "map@5",
        "rprec",
        "bpref",
        "judged@1",
        "judged@5",
        "group_consistency@1",
        "group_consistency@5",
        "scope_miss_rate",
    ]
    # none of them is a headline, summary or card metric
    shown = {*catalogue.headline_names(), *catalogue.summary_names(), *catalogue.card_names()}
    assert not {n for n in shown if catalogue.parse(n).stem in ("map", "rprec", "bpref", "judged")}
    # which measures follow the run's relevance level (nDCG keeps raw grades, judged@k any grade)
    honour = {e.name for e in catalogue.measures() if e.relevance_level}
    assert honour == {
        "mrr",
        "hit",
        "recall",
        "doc_recall",
        "recall_any",
        "recall_all",
        "precision",
        "map",
        "rprec",
        "bpref",
    }


def test_a_stem_is_declared_once_plain_and_once_as_an_at_k_family():
    assert catalogue.measure("map").at_k is False and catalogue.measure("map@5").at_k is True
    assert catalogue.measure("rprec@5") is None and catalogue.measure("judged") is None
    plain = catalogue.measure("map")
    with pytest.raises(ValueError, match="'map' is already declared"):
        catalogue.register(catalogue.Measure("map", "retrieval", "another map", "—", untestable="x"))
    with pytest.raises(ValueError, match="'map@k' is already declared"):
        catalogue.register(
            catalogue.Measure("map", "retrieval", "another map@k", "—", at_k=True, untestable="x")
        )
    assert catalogue.register(plain) is plain  # the same declaration again is allowed
