"""Judging a run without Dagster: the spot-check sample, the judge inputs of the demo run, and
``judge_items`` with the scripted judge and a real SQLite cache (rows, hashes, cache hits and
misses, failed calls, stored inputs that re-render exactly)."""

from __future__ import annotations

import dataclasses
import json
import math
import random
from fractions import Fraction

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kebab_eval_pipeline.judge.cache import JudgeCache
from kebab_eval_pipeline.judge.config import JudgeSettings
from kebab_eval_pipeline.judge.inputs import judge_inputs, judged_query_ids
from kebab_eval_pipeline.judge.prompts import CRITERIA, JudgeInput, input_hash, render, reply_decoding
from kebab_eval_pipeline.judge.run import JUDGEMENT_COLUMNS, judge_items, spot_check_sample
from tests.judge.scripted import ScriptedJudge, demo_run

# -- the spot-check sample -----------------------------------------------------------------------

query_ids = st.lists(st.text(min_size=1, max_size=8), max_size=60, unique=True)
rates = st.floats(min_value=0, max_value=1, allow_nan=False)


@given(ids=query_ids, rate=rates, seed=st.integers(0, 2**32))
@settings(max_examples=300, deadline=None)
def test_sample_size_is_the_rate_as_written_rounded_up(ids: list[str], rate: float, seed: int) -> None:
    sample = spot_check_sample(ids, rate, seed)
    expected = 0 if rate == 0 or not ids else max(1, math.ceil(Fraction(repr(rate)) * len(ids)))
    assert len(sample) == expected
    assert set(sample) <= set(ids) and len(set(sample)) == len(sample)
    assert sample == [q for q in ids if q in set(sample)]  # in the given order
    assert spot_check_sample(ids, rate, seed) == sample  # deterministic


@given(ids=query_ids, rate=rates, seed=st.integers(0, 2**32), order=st.randoms(use_true_random=False))
@settings(max_examples=300, deadline=None)
def test_membership_does_not_depend_on_the_order(ids, rate, seed, order: random.Random) -> None:
    shuffled = list(ids)
    order.shuffle(shuffled)
    assert set(spot_check_sample(shuffled, rate, seed)) == set(spot_check_sample(ids, rate, seed))
    assert set(spot_check_sample(ids + ids[:3], rate, seed)) == set(spot_check_sample(ids, rate, seed))


@given(a=query_ids, b=query_ids, rate_a=rates, rate_b=rates, seed=st.integers(0, 2**32))
@settings(max_examples=300, deadline=None)
def test_no_two_id_sets_rank_a_pair_of_queries_oppositely(a, b, rate_a, rate_b, seed) -> None:
    """Each query's rank comes from its own seeded hash alone: whatever the other ids, the sample is
    the first queries of one global order, so if p is chosen over q in one set of ids, q is never
    chosen over p in another. (A fixed-size sample cannot make membership itself independent of
    the other ids: a newcomer ranking first pushes the last member out.)"""
    in_a, in_b = set(spot_check_sample(a, rate_a, seed)), set(spot_check_sample(b, rate_b, seed))
    common = set(a) & set(b)
    for p in common & in_a:
        for q in common - in_a:
            assert not (q in in_b and p not in in_b), (p, q)


def test_sample_edges_and_seeds() -> None:
    ids = [f"q{i:03d}" for i in range(100)]
    assert len(spot_check_sample(ids, 0.07, 0)) == 7  # 0.07 × 100 = 7.000000000000001 as floats
    assert len(spot_check_sample(ids[:30], 0.1, 0)) == 3
    assert len(spot_check_sample(ids[:5], 0.01, 0)) == 1  # at least one when the rate is positive
    assert spot_check_sample(ids, 0.0, 0) == [] and spot_check_sample([], 0.5, 0) == []
    assert spot_check_sample(ids, 1.0, 3) == ids
    assert spot_check_sample(ids, 0.1, 0) != spot_check_sample(ids, 0.1, 1)  # the seed matters


# -- the judge inputs of the demo run ------------------------------------------------------------


@pytest.fixture(scope="module")
def demo():
    """(settings, golden, retrieval results) of the demo run."""
    settings, golden, retrieval = demo_run()
    return settings, golden, retrieval.results


def _is_true(value) -> bool:
    return value is not None and not pd.isna(value) and bool(value)


def _judged_by_hand(outcomes: pd.DataFrame) -> list[str]:
    return [
        str(row["query_id"])
        for row in outcomes.to_dict("records")
        if _is_true(row["answered"])
        and not _is_true(row["refused"])
        and pd.isna(row["error"])
        and isinstance(row["answer_text"], str)
        and row["answer_text"].strip()
    ]


def test_judge_inputs_of_the_demo_run(demo) -> None:
    _, golden, results = demo
    outcomes, hits, citations = results.outcomes, results.hits, results.citations
    items = judge_inputs(golden.queries, outcomes, hits, citations, context_k=2, context_chars=60)
    expected = _judged_by_hand(outcomes)
    assert list(items) == expected == list(judged_query_ids(outcomes))
    refused = {str(q) for q, r in zip(outcomes["query_id"], outcomes["refused"], strict=True) if _is_true(r)}
    assert refused and not refused & set(items)  # the demo refuses some queries: they are not judged
    golden_order = [q for q in golden.queries["query_id"].astype(str) if q in items]
    assert list(items) == golden_order

    question = dict(zip(golden.queries["query_id"].astype(str), golden.queries["query"], strict=True))
    answer = dict(zip(outcomes["query_id"].astype(str), outcomes["answer_text"], strict=True))
    cut = 0
    for qid, item in items.items():
        assert item.question == question[qid] and item.answer == answer[qid]
        top = hits[hits["query_id"] == qid].sort_values("rank").head(2)
        assert [c["ref"] for c in item.context] == [str(r) for r in top["rank"]]
        assert [c["doc_path"] for c in item.context] == list(top["doc_path"])
        assert [c["text"] for c in item.context] == [s[:60] for s in top["snippet"]]
        assert [c["heading"] for c in item.context] == [" > ".join(h) for h in top["heading_path"]]
        cut += sum(len(s) > 60 for s in top["snippet"])
        cited = citations[citations["query_id"] == qid].sort_values("position")
        assert list(item.citations) == [
            f"{r.marker} {r.doc_path}:{r.line_start}-{r.line_end}" for r in cited.itertuples()
        ]
    assert cut > 0  # the snippets really were cut to context_chars
    assert any(item.citations for item in items.values())


def test_judge_inputs_skip_errors_empty_and_unknown_answers(demo) -> None:
    _, golden, results = demo
    outcomes = results.outcomes.copy()
    judged = _judged_by_hand(outcomes)
    position = {q: i for i, q in enumerate(outcomes["query_id"].astype(str))}
    errored, empty, unknown = judged[:3]
    outcomes.loc[position[errored], "error"] = "HTTP 500"
    outcomes.loc[position[empty], "answer_text"] = "   "
    outcomes["answered"] = outcomes["answered"].astype("boolean")
    outcomes.loc[position[unknown], "answered"] = pd.NA
    items = judge_inputs(golden.queries, outcomes, results.hits, results.citations, 3, 600)
    assert list(items) == judged[3:]
    none = outcomes.assign(answered=False)
    assert judge_inputs(golden.queries, none, results.hits, results.citations, 3, 600) == {}


# -- judge_items with the scripted judge and a real cache ----------------------------------------


@pytest.fixture(scope="module")
def items(demo) -> dict[str, JudgeInput]:
    _, golden, results = demo
    return judge_inputs(golden.queries, results.outcomes, results.hits, results.citations, 3, 600)


def judge_with(
    items: dict[str, JudgeInput], cache: JudgeCache | None, judge: ScriptedJudge, **settings
) -> tuple[pd.DataFrame, dict]:
    """``judge_items`` with ``judge`` answering for every judge the settings describe."""
    return judge_items(JudgeSettings(**settings), items, cache, make_backend=lambda _: judge)


@pytest.mark.parametrize("version", ["v2", "v1"])
def test_judge_items_rows_hashes_and_scores(items, tmp_path, version) -> None:
    """v2 (the default) asks for the score alone: one token, read from its log probabilities; v1
    for a JSON object with claims and reasoning."""
    judge = ScriptedJudge()
    with JudgeCache(tmp_path / "cache.sqlite") as cache:
        table, info = judge_with(items, cache, judge, prompt_version=version)
    sample = info["spot_check_queries"]
    assert sample == spot_check_sample(list(items), 0.1, 0) and len(sample) == math.ceil(0.1 * len(items))
    assert len(table) == 2 * len(items) + 2 * len(sample) == judge.calls == info["model_calls"]
    assert info["cache_hits"] == 0 and info["judged_queries"] == len(items)
    assert list(table.columns) == list(JUDGEMENT_COLUMNS)
    assert {c: str(table[c].dtype) for c in JUDGEMENT_COLUMNS} == {
        c: "object" if t == "object" else str(pd.Series([], dtype=t).dtype)
        for c, t in JUDGEMENT_COLUMNS.items()
    }
    primary = table[table["role"] == "primary"]
    spot = table[table["role"] == "spot_check"]
    assert list(zip(primary["query_id"], primary["criterion"], strict=True)) == [
        (q, c) for q in items for c in CRITERIA
    ]
    assert list(zip(spot["query_id"], spot["criterion"], strict=True)) == [
        (q, c) for q in sample for c in CRITERIA
    ]
    alt = f"{version}-alt"
    assert set(primary["prompt_version"]) == {version} and set(spot["prompt_version"]) == {alt}
    assert info["judge"]["prompt_version"] == version and info["spot_check_judge"]["prompt_version"] == alt
    decoding = JudgeSettings().decoding()
    if version == "v2":  # one token, whatever max_tokens says
        decoding = dataclasses.replace(decoding, max_tokens=1)
        assert JudgeSettings().prompt_version == "v2"  # the default
    assert info["judge"]["decoding"] == decoding.as_dict()
    assert set(table["digest"]) == {judge.digest()} and set(table["model"]) == {judge.model}
    methods = set()
    for row in table.itertuples(index=False):
        messages = render(row.criterion, row.prompt_version, items[row.query_id])
        assert row.input_hash == input_hash(messages, decoding)
        assert json.loads(row.messages) == messages
        want = judge.expected_score(messages)
        if want is None:
            why = "is not a score 0–5" if version == "v2" else "no JSON object"
            assert pd.isna(row.score) and row.method == "unparseable" and why in row.problem
        else:
            assert row.score == pytest.approx(want, abs=1e-12)
        methods.add(row.method)
        assert row.cached is False and pd.isna(row.error)
        assert row.cost_usd == 0.0  # the local backend's price: free
    if version == "v2":  # every reply is one token: no claims, no reasoning
        assert methods == {"logprobs", "unparseable"}
        assert set(table["completion_tokens"]) == {1} and table["reasoning"].isna().all()
        assert all(len(c) == 0 for c in table["supported_claims"])
        return
    assert methods == {"json", "logprobs", "unparseable"}  # every parsing path was taken
    json_rows = table[table["method"] == "json"]
    assert all(list(c) == ["scripted claim"] for c in json_rows["supported_claims"])
    assert set(json_rows["reasoning"]) == {"ok"}


def test_a_second_judging_is_served_by_the_cache(items, tmp_path) -> None:
    with JudgeCache(tmp_path / "cache.sqlite") as cache:
        first, _ = judge_with(items, cache, ScriptedJudge())
    again = ScriptedJudge()
    with JudgeCache(tmp_path / "cache.sqlite") as cache:  # a new connection: what a new process sees
        second, info = judge_with(items, cache, again)
        assert cache.hits == len(second) and cache.misses == 0
    assert again.calls == 0 and info["model_calls"] == 0 and info["cache_hits"] == len(second) == len(first)
    assert second["cached"].all()
    same = ["query_id", "criterion", "role", "input_hash", "score", "method", "reply", "prompt_tokens"]
    pd.testing.assert_frame_equal(first[same], second[same])
    # cached rows carry the tokens and latency of the call that produced them
    pd.testing.assert_series_equal(first["latency_ms"], second["latency_ms"])


def test_another_prompt_version_misses_what_the_cache_has_not_seen(items, tmp_path) -> None:
    cache_path = tmp_path / "cache.sqlite"
    with JudgeCache(cache_path) as cache:
        judge_with(items, cache, ScriptedJudge(), spot_check_rate=0)  # v2 only
        judge = ScriptedJudge()
        table, info = judge_with(items, cache, judge, prompt_version="v2-alt", spot_check_rate=0)
    assert not table["cached"].any() and judge.calls == 2 * len(items) == info["model_calls"]

    # With the default spot check (the v2-alt variant), a v2 judging also stores v2-alt replies of
    # its sample: re-judging with v2-alt hits exactly those; the spot check then equals the primary.
    with JudgeCache(tmp_path / "other.sqlite") as cache:
        first, first_info = judge_with(items, cache, ScriptedJudge())
        judge = ScriptedJudge()
        table, info = judge_with(items, cache, judge, prompt_version="v2-alt")
    sample = set(first_info["spot_check_queries"])
    primary = table[table["role"] == "primary"]
    assert list(primary["cached"]) == [q in sample for q in primary["query_id"]]
    assert judge.calls == 2 * (len(items) - len(sample)) == info["model_calls"]
    stored = first[first["role"] == "spot_check"].set_index(["query_id", "criterion"])["reply"]
    hits = primary[primary["cached"]].set_index(["query_id", "criterion"])["reply"]
    pd.testing.assert_series_equal(hits.sort_index(), stored.sort_index())


def test_a_failed_call_is_a_row_with_its_error(items, tmp_path) -> None:
    clean, info = judge_with(items, None, ScriptedJudge())
    victim = info["spot_check_queries"][0]  # sampled: its primary and spot-check calls both fail
    failing = ScriptedJudge(fail=(f"ANSWER: {items[victim].answer}\n",))
    with JudgeCache(tmp_path / "cache.sqlite") as cache:
        table, _ = judge_with(items, cache, failing)
    assert len(table) == len(clean)
    bad = table["query_id"] == victim
    assert bad.sum() == 4
    failed = table[bad]
    assert set(failed["error"]) == {"the scripted judge failed"}
    assert failed["score"].isna().all() and set(failed["method"]) == {"error"}
    assert failed["cost_usd"].isna().all() and failed["problem"].isna().all()
    assert (failed["reply"] == "").all() and not failed["cached"].any()
    same = ["query_id", "criterion", "role", "score", "method", "reply", "input_hash"]
    pd.testing.assert_frame_equal(table.loc[~bad, same], clean.loc[~bad, same])
    assert table.loc[~bad, "error"].isna().all()

    # failures are not cached: the next judging calls the model for exactly those four
    retry = ScriptedJudge()
    with JudgeCache(tmp_path / "cache.sqlite") as cache:
        healed, _ = judge_with(items, cache, retry)
    assert retry.calls == 4
    pd.testing.assert_frame_equal(healed[same], clean[same])


def test_the_stored_input_re_renders_exactly(items) -> None:
    """Every row stores the judge input and the messages: rendering the stored input again gives the
    stored messages and, with the run's decoding, the stored input hash (the cache key)."""
    for overrides in (
        {"spot_check_rate": 0.5},
        {"max_tokens": 7, "logprobs": False, "prompt_version": "v1-alt"},
    ):
        settings = JudgeSettings(**overrides)
        decoding = reply_decoding(settings.prompt_version, settings.decoding())
        table, _ = judge_with(items, None, ScriptedJudge(), **overrides)
        assert len(table) == 2 * len(items) + 2 * len(
            spot_check_sample(list(items), overrides.get("spot_check_rate", 0.1), 0)
        )
        for row in table.itertuples(index=False):
            stored = JudgeInput.from_json(row.judge_input)
            assert stored == items[row.query_id]
            messages = render(row.criterion, row.prompt_version, stored)
            assert json.loads(row.messages) == messages
            assert input_hash(messages, decoding) == row.input_hash


def test_reply_warnings_name_unparseable_replies_and_scores_read_from_little_probability():
    from kebab_eval_pipeline.judge.metrics import LOW_DIGIT_MASS, reply_warnings

    table = pd.DataFrame(
        {
            "method": ["logprobs", "logprobs", "logprobs", "json", "unparseable", "error"],
            "digit_mass": [0.9, 0.31, 0.04, 0.2, None, None],
        }
    )
    assert LOW_DIGIT_MASS == 0.5
    unparseable, low = reply_warnings(table)
    assert unparseable.startswith("1 of 6 judge replies did not parse")
    # a JSON score stands on its own: only scores read from the log probabilities are counted
    assert low.startswith("2 of 3 scores read from log probabilities put less than 50% of the")
    assert "(lowest 0.04)" in low
    assert reply_warnings(table.iloc[:1]) == [] and reply_warnings(table.iloc[:0]) == []
