"""The per-query tables the Dagster UI shows worst first (issue 9): exact order and ``issue`` text on
small frames cut from a real demo run's tables (real columns and dtypes, a few rows edited into the
cases a person must see), and properties on randomly perturbed real tables."""

from __future__ import annotations

from functools import partial

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kebab_eval_pipeline.compare.suspect_gold import SUSPECT_COLUMNS
from kebab_eval_pipeline.compare.verdicts import VERDICT_COLUMNS, VERDICTS, per_query_verdicts
from kebab_eval_pipeline.judge.run import empty_judgements
from kebab_eval_pipeline.orchestration.assets import headline_columns
from kebab_eval_pipeline.reporting.per_query import (
    COLUMN_DESCRIPTIONS,
    QUESTION_CHARS,
    VERDICT_ORDER,
    judgements_worst_first,
    verdicts_worst_first,
    worst_results_first,
    worst_scores_first,
)

PROPERTY = settings(max_examples=50, deadline=None)  # ~0.1 s an example: pandas on small frames


def pick(frame: pd.DataFrame, ids: dict[str, str]) -> pd.DataFrame:
    """The rows of a real table for the demo query ids in ``ids`` (in that order; every row of a
    query for ``hits``), with ``query_id`` renamed to the case names — same columns and dtypes."""
    position = frame["query_id"].map({old: i for i, old in enumerate(ids)}).astype("Float64")
    rows = frame[position.notna().to_numpy(dtype=bool)].copy()
    rows = rows.iloc[np.argsort(position[position.notna()].to_numpy(dtype=float), kind="stable")]
    rows["query_id"] = rows["query_id"].map(ids).astype(frame["query_id"].dtype)
    return rows.reset_index(drop=True)


def edit(frame: pd.DataFrame, query_id: str, values: dict) -> None:
    """Set ``values`` on the row of ``query_id``, keeping every column's dtype."""
    dtypes = frame.dtypes.copy()
    rows = (frame["query_id"] == query_id).to_numpy(dtype=bool)
    assert rows.sum() == 1, query_id
    for column, value in values.items():
        frame.loc[rows, column] = value
    pd.testing.assert_series_equal(frame.dtypes, dtypes)


def long_question(n: int) -> str:
    return ("Why does my sourdough starter smell like nail polish remover after feeding it? " * 3)[:n]


# ---------------------------------------------------------------------------------- query_scores

# demo query → case. Input (golden) order deliberately unlike the expected output order.
SCORE_CASES = {
    "fact-001": "perfect",  # real: rank 1, answered
    "fact-017": "rank-2",  # real: first relevant at rank 2
    "fact-002": "timeout",  # edited: the system timed out, nothing found
    "unans-006": "under-refusal",  # real: unanswerable, answered anyway
    "para-brine-002": "rank-7",  # real: first relevant at rank 7
    "fact-005": "missed",  # edited: answerable, no relevant hit
    "fact-003": "over-refusal",  # real: found at rank 1, refused
    "fact-007": "pending",  # edited: pending gold, nothing found (SPEC: still run and scored)
    "unans-001": "refused-ok",  # real: unanswerable, refused
    "ko-fact-003": "over-refusal-rank-4",  # real: refused, first relevant at rank 4
    "fact-008": "not-applicable",  # edited: answerable without gold supports
    "fact-025": "missed-refused",  # real: missed and refused
    "fact-009": "unclassified",  # edited: failed without an error class
    "unans-002": "unans-5xx",  # edited: unanswerable, HTTP 5xx
    "unans-003": "unans-pending",  # edited: unanswerable, refused, pending gold
}
RETRIEVAL_ZERO = ["mrr", "hit@1", "hit@3", "hit@5", "hit@10", "ndcg@1", "ndcg@3", "ndcg@5", "ndcg@10"]
NO_ANSWER = {
    "refused": pd.NA,
    "n_citations": pd.NA,
    "over_refusal": np.nan,
    "under_refusal": np.nan,
    "refusal_correct": np.nan,
    "chr": np.nan,
    "answer_precision": np.nan,
}
NOT_FOUND = {"first_relevant_rank": pd.NA, **dict.fromkeys(RETRIEVAL_ZERO, 0.0)}
FAILED = {"n_hits": 0, "empty_result": True, "retrieval_ms": np.nan, **NO_ANSWER}

EXPECTED_SCORES = [
    ("timeout", "error: timeout; missed"),
    ("unclassified", "error: unclassified; missed"),
    ("unans-5xx", "error: http_5xx"),  # ndcg is null for an unanswerable query: after the 0.0 ones
    ("missed", "missed"),
    ("missed-refused", "missed; refused an answerable query"),
    ("under-refusal", "answered an unanswerable query"),
    ("over-refusal-rank-4", "refused an answerable query; first relevant at rank 4"),
    ("over-refusal", "refused an answerable query"),
    ("rank-7", "first relevant at rank 7"),
    ("rank-2", "first relevant at rank 2"),
    ("perfect", "ok"),
    ("refused-ok", "ok"),
    ("pending", "pending gold"),
    ("not-applicable", "not applicable"),
    ("unans-pending", "pending gold"),
]
SCORE_COLUMNS = [
    "query_id",
    "issue",
    "question",
    "category",
    "lang",
    "answerable",
    "first_relevant_rank",
    # the per-query columns of the headline metrics (the rates have no per-query column of that name)
    *["hit@1", "hit@5", "mrr", "recall@5", "precision@5", "ndcg@10", "answer_precision", "chr"],
    "refused",
    "refusal_correct",
    "error_class",
]


@pytest.fixture
def scores(demo_run) -> pd.DataFrame:
    frame = pick(demo_run.scores.scores, SCORE_CASES)
    edit(
        frame,
        "timeout",
        {
            **NOT_FOUND,
            **FAILED,
            "error": "timeout: no response within 30 s",
            "error_class": "timeout",
            "timed_out": True,
        },
    )
    edit(frame, "unclassified", {**NOT_FOUND, **FAILED, "error": "connection reset by peer"})
    edit(
        frame,
        "unans-5xx",
        {**FAILED, "error": "http_5xx: 503 Service Unavailable", "error_class": "http_5xx"},
    )
    edit(frame, "missed", NOT_FOUND)
    edit(frame, "pending", {**NOT_FOUND, "pending": True})
    edit(
        frame,
        "not-applicable",
        {"applicable": False, "first_relevant_rank": pd.NA, **dict.fromkeys(RETRIEVAL_ZERO, np.nan)},
    )
    edit(frame, "unans-pending", {"pending": True})
    return frame


@pytest.fixture
def questions(demo_run) -> pd.DataFrame:
    frame = pick(demo_run.golden.queries, SCORE_CASES)
    edit(frame, "rank-7", {"query": long_question(QUESTION_CHARS + 40)})
    edit(frame, "rank-2", {"query": long_question(QUESTION_CHARS)})  # exactly the limit: kept whole
    return frame[frame["query_id"] != "unans-pending"]  # a query the golden table lacks


def test_the_hand_built_cases_are_what_they_claim(scores):
    """The real rows picked for the cases have the values the cases rely on."""
    s = scores.set_index("query_id")
    assert s.loc["rank-7", "first_relevant_rank"] == 7 and s.loc["rank-2", "first_relevant_rank"] == 2
    assert s.loc["under-refusal", "under_refusal"] == 1 and not s.loc["under-refusal", "answerable"]
    assert s.loc["over-refusal", "over_refusal"] == 1 and s.loc["over-refusal", "first_relevant_rank"] == 1
    assert s.loc["over-refusal-rank-4", "first_relevant_rank"] == 4
    assert pd.isna(s.loc["missed-refused", "first_relevant_rank"]) and s.loc["missed-refused", "refused"]
    assert s.loc["perfect", "ndcg@10"] == 1.0 and not s.loc["perfect", "refused"]
    assert s.loc["refused-ok", "refusal_correct"] == 1


def test_query_scores_worst_first_with_plain_issues(scores, questions):
    before = scores.copy(deep=True)
    out = worst_scores_first(scores, headline_columns([1, 3, 5, 10]), questions)
    assert list(zip(out["query_id"], out["issue"], strict=True)) == EXPECTED_SCORES
    assert list(out.columns) == SCORE_COLUMNS
    pd.testing.assert_frame_equal(scores, before)  # the input is not touched

    # every copied column holds the input's value (and dtype) for that query
    copied = [c for c in SCORE_COLUMNS if c not in ("issue", "question")]
    pd.testing.assert_frame_equal(
        out[copied].set_index("query_id"),
        scores.set_index("query_id").loc[out["query_id"], copied[1:]],
    )
    assert str(out["issue"].dtype) == str(out["question"].dtype) == "string"


def test_questions_are_cut_to_80_characters_with_an_ellipsis(scores, questions):
    out = worst_scores_first(scores, ["ndcg@10"], questions).set_index("query_id")["question"]
    long = long_question(QUESTION_CHARS + 40)
    assert out["rank-7"] == long[: QUESTION_CHARS - 1] + "…" and len(out["rank-7"]) == QUESTION_CHARS
    assert out["rank-2"] == long_question(QUESTION_CHARS)
    assert out["perfect"] == questions.set_index("query_id").loc["perfect", "query"]
    assert pd.isna(out["unans-pending"])  # not in the golden table given
    assert worst_scores_first(scores, ["ndcg@10"])["question"].isna().all()  # no golden table


def test_metric_columns_missing_from_the_table_are_skipped(scores):
    out = worst_scores_first(scores, ["mrr", "ndcg@7", "ndcg@10"])
    assert [c for c in out.columns if c in ("mrr", "ndcg@7", "ndcg@10")] == ["mrr", "ndcg@10"]


def test_within_a_tier_the_weaker_graded_score_leads_then_golden_order(scores):
    """Two misses with different nDCG@10 (a miss within the cutoff can still score): the weaker
    first, whatever the golden order; equal ones keep it."""
    frame = scores.copy()
    edit(frame, "missed", {"ndcg@10": 0.2})  # golden order: missed before missed-refused
    out = worst_scores_first(frame, headline_columns([1, 3, 5, 10]))
    missed = out.loc[out["issue"].str.startswith("missed"), "query_id"].tolist()
    assert missed == ["missed-refused", "missed"]
    unchanged = worst_scores_first(scores, ["ndcg@10"])
    assert unchanged.loc[unchanged["issue"].str.startswith("missed"), "query_id"].tolist() == [
        "missed",
        "missed-refused",
    ]


# -------------------------------------------------------------------------------- retrieval results

OUTCOME_CASES = {
    "fact-001": "fast",
    "fact-002": "http-5xx",
    "fact-003": "slow",
    "fact-004": "empty",
    "fact-005": "timeout",
    "fact-006": "late",  # flagged timed_out without an error (a run stored before replay made it one)
    "fact-007": "medium",
    "fact-008": "medium-tie",
    "fact-009": "long-question",
}
EXPECTED_RESULTS = [
    ("http-5xx", "error: http_5xx"),
    ("timeout", "error: timeout"),
    ("late", "timed out"),
    ("empty", "no hits"),
    ("slow", "ok"),
    ("medium", "ok"),
    ("medium-tie", "ok"),  # same latency as medium: golden order
    ("long-question", "ok"),
    ("fast", "ok"),
]
RESULT_COLUMNS = [
    "query_id",
    "issue",
    "question",
    "n_hits",
    "top_hit",
    "retrieval_ms",
    "answer_ms",
    "attempts",
    "answered",
    "refused",
    "error_class",
    "error",
]


@pytest.fixture
def results(demo_run) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    r = demo_run.retrieval.results
    outcomes = pick(r.outcomes, OUTCOME_CASES)
    no_answer = {"answered": False, "refused": pd.NA, "answer_text": pd.NA, "n_hits": 0}
    edit(
        outcomes,
        "http-5xx",
        {**no_answer, "error": "http_5xx: 503", "error_class": "http_5xx", "retrieval_ms": 12.0},
    )
    edit(
        outcomes,
        "timeout",
        {
            **no_answer,
            "error": "timeout: 30 s",
            "error_class": "timeout",
            "timed_out": True,
            "retrieval_ms": np.nan,
        },
    )
    edit(outcomes, "late", {"timed_out": True, "retrieval_ms": 0.1})
    edit(outcomes, "empty", {"n_hits": 0, "retrieval_ms": 900.0})
    for case, ms in (("slow", 250.0), ("medium", 5.0), ("medium-tie", 5.0), ("long-question", 1.0)):
        edit(outcomes, case, {"retrieval_ms": ms})
    edit(outcomes, "fast", {"retrieval_ms": 0.5})
    hits = pick(r.hits, OUTCOME_CASES)
    hits = hits[~hits["query_id"].isin(["http-5xx", "timeout", "empty"])]
    hits = hits.iloc[::-1].reset_index(drop=True)  # rank 1 is no query's first row
    assert (hits.groupby("query_id")["rank"].first() > 1).all()
    queries = pick(demo_run.golden.queries, OUTCOME_CASES)
    edit(queries, "long-question", {"query": long_question(QUESTION_CHARS + 1)})
    return outcomes, hits, queries


def test_retrieval_results_worst_first(results):
    outcomes, hits, queries = results
    before = [f.copy(deep=True) for f in results]
    out = worst_results_first(outcomes, hits, queries)
    assert list(zip(out["query_id"], out["issue"], strict=True)) == EXPECTED_RESULTS
    assert list(out.columns) == RESULT_COLUMNS
    for frame, copy in zip(results, before, strict=True):
        pd.testing.assert_frame_equal(frame, copy)

    by_id = out.set_index("query_id")
    rank_1 = hits[hits["rank"] == 1].set_index("query_id")["doc_path"]
    for case in ("fast", "slow", "late", "medium", "long-question"):
        assert by_id.loc[case, "top_hit"] == rank_1[case]
    assert by_id[["top_hit"]].loc[["http-5xx", "timeout", "empty"]].isna().all().all()
    question = by_id.loc["long-question", "question"]
    assert question == long_question(QUESTION_CHARS - 1) + "…" and len(question) == QUESTION_CHARS
    copied = [c for c in RESULT_COLUMNS if c not in ("issue", "question", "top_hit")]
    pd.testing.assert_frame_equal(
        out[copied].set_index("query_id"), outcomes.set_index("query_id").loc[out["query_id"], copied[1:]]
    )


def test_the_real_demo_results_are_all_ok_slowest_first(demo_run):
    r = demo_run.retrieval.results
    out = worst_results_first(r.outcomes, r.hits, demo_run.golden.queries)
    assert (out["issue"] == "ok").all() and len(out) == len(r.outcomes)
    assert out["retrieval_ms"].is_monotonic_decreasing
    assert out["top_hit"].notna().all()


# ------------------------------------------------------------------------------- comparison verdicts


def run_frame(rows: dict[str, tuple]) -> pd.DataFrame:
    """One run's per-query inputs to the verdicts: query → (applicable, rank, answerable, refused)."""
    return pd.DataFrame(
        {
            "query_id": pd.array(list(rows), dtype="string"),
            "applicable": [r[0] for r in rows.values()],
            "rank": pd.array([r[1] for r in rows.values()], dtype="Int64"),
            "answerable": [r[2] for r in rows.values()],
            "refused": pd.array([r[3] for r in rows.values()], dtype="boolean"),
            "grounded": np.nan,
        }
    )


RUN_A = {
    "q01": (True, 1, True, False),
    "q02": (True, None, True, False),
    "q03": (True, 2, True, False),
    "q04": (True, 1, True, False),
    "q05": (True, 3, True, False),  # only in the baseline
    "q07": (False, None, True, False),
    "q08": (True, 4, True, False),
    "q09": (True, 1, True, False),
    "q10": (False, None, False, True),
    "q11": (True, 1, True, False),
    "q12": (True, 1, True, False),
    "q13": (True, None, True, False),
}
RUN_B = {
    **{q: v for q, v in RUN_A.items() if q != "q05"},
    "q02": (True, 2, True, False),
    "q03": (True, None, True, False),
    "q04": (True, 3, True, False),
    "q06": (True, 1, True, False),  # only in this run
    "q08": (True, 1, True, False),
    "q09": (True, None, True, False),
    "q10": (False, None, False, False),
    "q12": (True, 2, True, False),
}
EXPECTED_VERDICTS = [
    ("q09", "regression"),  # baseline rank 1: the biggest fall leads
    ("q03", "regression"),
    ("q10", "regression"),  # unanswerable, now answered: no rank, last of its verdict
    ("q04", "loss"),
    ("q12", "loss"),  # same baseline rank as q04: input order
    ("q05", "only_a"),
    ("q06", "only_b"),
    ("q07", "not_scored"),
    ("q08", "win"),
    ("q02", "win"),
    ("q01", "draw"),
    ("q11", "draw"),
    ("q13", "draw"),
]


def test_verdicts_regressions_first_then_by_baseline_rank():
    per_query = per_query_verdicts(run_frame(RUN_A), run_frame(RUN_B))
    assert per_query["query_id"].is_monotonic_increasing  # what the comparison stores
    before = per_query.copy(deep=True)
    out = verdicts_worst_first(per_query)
    assert list(zip(out["query_id"], out["verdict"], strict=True)) == EXPECTED_VERDICTS
    pd.testing.assert_frame_equal(per_query, before)
    pd.testing.assert_frame_equal(out, per_query.set_index("query_id").loc[out["query_id"]].reset_index())
    assert set(VERDICT_ORDER) == set(VERDICTS)


def test_unknown_and_missing_verdicts_go_last_in_input_order():
    per_query = per_query_verdicts(run_frame(RUN_A), run_frame(RUN_B))
    per_query.loc[per_query["query_id"] == "q01", "verdict"] = "mystery"
    per_query.loc[per_query["query_id"] == "q02", "verdict"] = pd.NA
    out = verdicts_worst_first(per_query)
    assert out["query_id"].tolist()[-2:] == ["q01", "q02"]


# -------------------------------------------------------------------------------- empty in, empty out


def test_empty_tables_give_empty_tables_with_the_same_columns(scores, results):
    metrics = headline_columns([1, 3, 5, 10])
    full = worst_scores_first(scores, metrics)
    empty = worst_scores_first(scores.iloc[0:0], metrics)
    assert len(empty) == 0 and empty.dtypes.equals(full.dtypes)
    outcomes, hits, queries = results
    full = worst_results_first(outcomes, hits, queries)
    empty = worst_results_first(outcomes.iloc[0:0], hits.iloc[0:0], queries)
    assert len(empty) == 0 and empty.dtypes.equals(full.dtypes)
    per_query = per_query_verdicts(run_frame(RUN_A), run_frame(RUN_B))
    empty = verdicts_worst_first(per_query.iloc[0:0])
    assert len(empty) == 0 and empty.dtypes.equals(per_query.dtypes)


def test_column_descriptions_name_columns_the_tables_have(scores, results):
    produced = set(worst_scores_first(scores, []).columns) | set(worst_results_first(*results).columns)
    verdict_columns = set(per_query_verdicts(run_frame(RUN_A), run_frame(RUN_B)).columns)
    judgement_columns = set(judgements_worst_first(empty_judgements()).columns)
    suspect_columns = set(SUSPECT_COLUMNS)  # the comparison's suspect-gold queue
    assert set(COLUMN_DESCRIPTIONS) <= produced | verdict_columns | judgement_columns | suspect_columns
    assert {"issue", "question", "top_hit", "first_relevant_rank"} <= set(COLUMN_DESCRIPTIONS)
    assert str(QUESTION_CHARS) in COLUMN_DESCRIPTIONS["question"]


# ---------------------------------------------------------------------------------------- properties

# Tiers re-derived from the issue text alone: a row's tier is that of its worst label.
SCORE_TIERS = {
    "error: ": 0,
    "missed": 1,
    "answered an unanswerable query": 2,
    "refused an answerable query": 3,
    "first relevant at rank ": 4,
    "ok": 5,
    "pending gold": 6,
    "not applicable": 6,
}
RESULT_TIERS = {"error: ": 0, "timed out": 1, "no hits": 2, "ok": 3}
ERROR_CLASSES = st.none() | st.sampled_from(["timeout", "http_5xx", "bad_output"])


def tier_of(issue: str, tiers: dict[str, int]) -> int:
    found = [t for label in issue.split("; ") for prefix, t in tiers.items() if label.startswith(prefix)]
    assert found, issue
    return min(found)


def na(value) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value))


def error_label(row: dict) -> list[str]:
    """The error label of a row, written out per row (the module is vectorised)."""
    if na(row["error"]):
        return []
    return ["error: " + ("unclassified" if na(row["error_class"]) else row["error_class"])]


def expected_score_issue(row: dict) -> str:
    """The ``issue`` of one query_scores row, written out per row (the module is vectorised)."""
    scored = bool(row["applicable"]) and not row["pending"]
    rank = row["first_relevant_rank"]
    labels = error_label(row)
    if scored and row["answerable"] and na(rank):
        labels.append("missed")
    if row["under_refusal"] == 1:
        labels.append("answered an unanswerable query")
    if row["over_refusal"] == 1:
        labels.append("refused an answerable query")
    if scored and not na(rank) and rank > 1:
        labels.append(f"first relevant at rank {rank}")
    if row["pending"]:
        labels.append("pending gold")
    elif not scored and row["answerable"]:
        labels.append("not applicable")
    return "; ".join(labels) or "ok"


def draw_column(draw, n: int, strategy: st.SearchStrategy) -> list:
    """``n`` values of one column."""
    return draw(st.lists(strategy, min_size=n, max_size=n))


def draw_failures(draw, n: int) -> dict[str, list]:
    """``error`` / ``error_class`` columns: about one query in four failed, some unclassified."""
    failed = draw_column(draw, n, st.sampled_from([False, False, False, True]))
    classes = draw_column(draw, n, ERROR_CLASSES)
    return {
        "error": [f"{c or 'unknown'}: boom" if f else None for c, f in zip(classes, failed, strict=True)],
        "error_class": [c if f else None for c, f in zip(classes, failed, strict=True)],
    }


def with_columns(frame: pd.DataFrame, values: dict[str, list]) -> pd.DataFrame:
    """A copy of ``frame`` with ``values`` replacing whole columns, in each column's own dtype."""
    out = frame.copy()
    for column, column_values in values.items():
        out[column] = pd.Series(column_values, index=out.index, dtype=frame[column].dtype)
    return out


@st.composite
def rows_of(draw, table: pd.DataFrame, max_rows: int = 25) -> pd.DataFrame:
    """Distinct rows of a real table, shuffled, under a shuffled non-default index."""
    picked = draw(st.lists(st.integers(0, len(table) - 1), unique=True, max_size=max_rows))
    frame = table.iloc[picked].copy()
    frame.index = draw(st.permutations(range(1000, 1000 + len(frame))))
    return frame


PERTURBED_SCORE_COLUMNS = (
    "answerable",
    "pending",
    "applicable",
    "first_relevant_rank",
    "error",
    "error_class",
    "under_refusal",
    "over_refusal",
    "ndcg@10",
)


@st.composite
def perturbed_scores(draw, table: pd.DataFrame) -> pd.DataFrame:
    frame = draw(rows_of(table))
    n = len(frame)
    column = partial(draw_column, draw, n)
    # Mostly benign values, so rows without any issue (and ties) are common, not rare.
    flag = st.sampled_from([np.nan, 0.0, 0.0, 1.0])
    return with_columns(
        frame,
        {
            "answerable": column(st.booleans()),
            "pending": column(st.booleans()),
            "applicable": column(st.sampled_from([True, True, False])),
            "first_relevant_rank": column(st.sampled_from([None, 1, 1, 2, 7, 12])),
            **draw_failures(draw, n),
            "under_refusal": column(flag),
            "over_refusal": column(flag),
            "ndcg@10": column(st.sampled_from([np.nan, 0.0, 0.3869, 1.0])),
        },
    )


def check_permutation(out: pd.DataFrame, frame: pd.DataFrame, derived: tuple[str, ...]) -> None:
    """Same queries, one row each; every column not computed here is the input's value."""
    assert sorted(out["query_id"]) == sorted(frame["query_id"]) and len(out) == len(frame)
    copied = [c for c in out.columns if c not in derived]
    pd.testing.assert_frame_equal(
        out[copied].set_index("query_id"), frame.set_index("query_id").loc[out["query_id"], copied[1:]]
    )


def expected_score_order(frame: pd.DataFrame) -> list[str]:
    """The query ids of ``frame`` in the order ``worst_scores_first`` must give, written out per row:
    the tier of the worst issue; within a tier the deeper first relevant rank first (an answerable
    query without a relevant hit is deeper than any rank, an unanswerable one without a rank is
    shallower than rank 1); then the lower ndcg@10 (none last); then the golden order."""
    rows = frame.set_index("query_id")[list(PERTURBED_SCORE_COLUMNS)].to_dict("index")

    def key(position: int) -> tuple:
        row = rows[frame["query_id"].iloc[position]]
        rank = row["first_relevant_rank"]
        depth = (np.inf if row["answerable"] else 0.0) if na(rank) else float(rank)
        ndcg = np.inf if na(row["ndcg@10"]) else row["ndcg@10"]
        return tier_of(expected_score_issue(row), SCORE_TIERS), -depth, ndcg, position

    return [frame["query_id"].iloc[i] for i in sorted(range(len(frame)), key=key)]


def check_query_scores(frame: pd.DataFrame, out: pd.DataFrame) -> None:
    """``out`` is ``frame`` worst first: the same rows, the ``issue`` of each, the exact order."""
    check_permutation(out, frame, ("issue", "question"))
    rows = frame.set_index("query_id")[list(PERTURBED_SCORE_COLUMNS)].to_dict("index")
    assert out["issue"].tolist() == [expected_score_issue(rows[q]) for q in out["query_id"]]
    tiers = [tier_of(i, SCORE_TIERS) for i in out["issue"]]
    assert tiers == sorted(tiers)
    assert out["query_id"].tolist() == expected_score_order(frame)


@PROPERTY
@given(data=st.data())
def test_property_query_scores(demo_run, data):
    frame = data.draw(perturbed_scores(demo_run.scores.scores))
    before = frame.copy(deep=True)
    out = worst_scores_first(frame, ["mrr", "ndcg@10"], demo_run.golden.queries)
    pd.testing.assert_frame_equal(frame, before)
    check_query_scores(frame, out)


@pytest.mark.parametrize("tier", ["error", "not scored"])
def test_no_rank_no_ndcg_the_answerable_query_leads_the_unanswerable_one(demo_run, tier):
    """Issue 23: two queries of one tier, neither with a first relevant rank nor an ndcg@10, one
    answerable and one not (unanswerable first in golden order). The answerable one found nothing it
    should have found, so it leads; it is not a tie. The property's old tie rule took the two
    missing ranks for equal ranks (``None == None``) and failed with ``assert 1 < 0``."""
    frame = pick(demo_run.scores.scores, {"unans-002": "unanswerable", "fact-002": "answerable"})
    assert frame["answerable"].tolist() == [False, True]
    same = {"first_relevant_rank": pd.NA, "ndcg@10": np.nan, "under_refusal": np.nan, "over_refusal": np.nan}
    if tier == "error":
        same |= {"error": "timeout: no response within 30 s", "error_class": "timeout", "pending": False}
    else:
        same |= {"error": pd.NA, "error_class": pd.NA, "pending": True}
    for query_id in ("unanswerable", "answerable"):
        edit(frame, query_id, same)
    out = worst_scores_first(frame, ["mrr", "ndcg@10"], demo_run.golden.queries)
    label = "error: timeout" if tier == "error" else "pending gold"
    assert list(zip(out["query_id"], out["issue"], strict=True)) == [
        ("answerable", label + ("; missed" if tier == "error" else "")),
        ("unanswerable", label),
    ]
    check_query_scores(frame, out)


@st.composite
def perturbed_results(draw, outcomes: pd.DataFrame, hits: pd.DataFrame):
    frame = draw(rows_of(outcomes))
    n = len(frame)
    column = partial(draw_column, draw, n)
    frame = with_columns(
        frame,
        {
            **draw_failures(draw, n),
            "timed_out": column(st.booleans()),
            "n_hits": column(st.sampled_from([0, 3, 10])),
            "retrieval_ms": column(st.sampled_from([np.nan, 0.0, 0.5, 2.0, 40.0])),
        },
    )
    chosen = hits[hits["query_id"].isin(frame["query_id"])]
    keep = draw(st.lists(st.booleans(), min_size=len(chosen), max_size=len(chosen)))
    chosen = chosen[np.asarray(keep, dtype=bool)]  # some queries lose their rank-1 hit
    return frame, chosen.sample(frac=1.0, random_state=draw(st.integers(0, 2**16)))


def expected_result_issue(row: dict) -> str:
    labels = error_label(row)
    failed = bool(labels)
    if row["timed_out"] and not failed:
        labels.append("timed out")
    if row["n_hits"] == 0 and not failed:
        labels.append("no hits")
    return "; ".join(labels) or "ok"


@PROPERTY
@given(data=st.data())
def test_property_retrieval_results(demo_run, data):
    r = demo_run.retrieval.results
    frame, hits = data.draw(perturbed_results(r.outcomes, r.hits))
    before = (frame.copy(deep=True), hits.copy(deep=True))
    out = worst_results_first(frame, hits, demo_run.golden.queries)
    pd.testing.assert_frame_equal(frame, before[0])
    pd.testing.assert_frame_equal(hits, before[1])
    check_permutation(out, frame, ("issue", "question", "top_hit"))

    rows = frame.set_index("query_id")[["error", "error_class", "timed_out", "n_hits"]].to_dict("index")
    assert out["issue"].tolist() == [expected_result_issue(rows[q]) for q in out["query_id"]]
    first = hits[hits["rank"] == 1].drop_duplicates("query_id").set_index("query_id")["doc_path"]
    assert out["top_hit"].tolist() == [first.get(q, pd.NA) for q in out["query_id"]]
    tiers = [tier_of(i, RESULT_TIERS) for i in out["issue"]]
    assert tiers == sorted(tiers)
    ms = out["retrieval_ms"].fillna(0.0).tolist()
    position = {q: i for i, q in enumerate(frame["query_id"])}
    for i in range(1, len(out)):
        if tiers[i - 1] == tiers[i]:
            assert ms[i - 1] >= ms[i]  # slowest first
            if ms[i - 1] == ms[i]:
                assert position[out["query_id"][i - 1]] < position[out["query_id"][i]]


@st.composite
def verdict_tables(draw) -> pd.DataFrame:
    n = draw(st.integers(0, 25))
    column = partial(draw_column, draw, n)
    frame = pd.DataFrame(
        {
            "query_id": [f"q{i:02d}" for i in range(n)],
            "verdict": column(st.sampled_from([*VERDICTS, "mystery"]) | st.none()),
            "a_rank": column(st.none() | st.integers(1, 5)),
            "b_rank": column(st.none() | st.integers(1, 5)),
            "note": "",
            "refusal_flip": None,
            "groundedness_flip": None,
        }
    ).astype(VERDICT_COLUMNS)
    frame.index = draw(st.permutations(range(500, 500 + n)))
    return frame


@PROPERTY
@given(frame=verdict_tables())
def test_property_verdicts(frame):
    before = frame.copy(deep=True)
    out = verdicts_worst_first(frame)
    pd.testing.assert_frame_equal(frame, before)
    check_permutation(out, frame, ())

    verdicts, ranks = frame["verdict"].tolist(), frame["a_rank"].tolist()

    def key(i: int) -> tuple:
        verdict, rank = verdicts[i], ranks[i]
        known = not na(verdict) and verdict in VERDICT_ORDER
        order = VERDICT_ORDER.index(verdict) if known else len(VERDICT_ORDER)
        return order, np.inf if na(rank) else rank, i

    expected = sorted(range(len(frame)), key=key)
    pd.testing.assert_frame_equal(out, frame.iloc[expected].reset_index(drop=True))
