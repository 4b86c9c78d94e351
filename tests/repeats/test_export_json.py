"""A repeated run of the flaky system exported as JSON: the document a run of one repeat gets, its
per-query scores the means over the repeats, its noise floor (``se`` = std / √n) in ``repeats`` —
every number re-derived here from the stored per-repeat tables, not from what the export read."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from kebab_eval_pipeline.metrics.flakiness import FLAKINESS_COLUMNS
from kebab_eval_pipeline.reporting.export import FROM_REPEAT_FIELDS
from kebab_eval_pipeline.store.runs import RunStore
from tests.repeats.test_flaky_system import flaky_config, gold_ranks
from tests.test_cli import cli, cli_env, no_traceback

REPEATS = 4
#: Half a unit of the stored 4th decimal.
HALF_UNIT = 0.5e-4 + 1e-9


def exported(env, config, run_id: str) -> dict:
    proc = cli(env, "export", run_id, "--format", "json", "--config", str(config))
    no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_a_repeated_run_exports_as_one_json_document_of_its_means_and_noise_floor(tmp_path):
    env = cli_env(tmp_path)
    config = flaky_config(tmp_path, queries=60)
    for run_id, args in (("once", []), ("four", ["--repeat", str(REPEATS)])):
        proc = cli(env, "run", "--run-id", run_id, "--config", str(config), *args)
        no_traceback(proc)
        assert proc.returncode == 0, proc.stderr
    single, doc = exported(env, config, "once"), exported(env, config, "four")

    # The shape of a single run's document, plus the repeats: a script reads both the same way.
    assert set(doc) == set(single) | {"repeats"} and "repeats" not in single
    assert set(doc["per_query"][0]) == set(single["per_query"][0]) | {"flakiness", "from_repeat"}
    assert set(doc["per_query"][0]["scores"]) == set(single["per_query"][0]["scores"])

    store = RunStore(tmp_path / "store")
    tables, _ = store.read("retrieval_results", "four")
    again = tables["repeat_outcomes"].groupby("repeat")
    outcomes = [tables["outcomes"]] + [g.drop(columns="repeat").reset_index(drop=True) for _, g in again]
    hits = [tables["hits"]] + [g for _, g in tables["repeat_hits"].groupby("repeat")]
    ranks = np.vstack([gold_ranks(o, h) for o, h in zip(outcomes, hits, strict=True)])  # (N, Q)
    texts = np.vstack([o["answer_text"].to_numpy(dtype=object) for o in outcomes])
    ids = tables["outcomes"]["query_id"].tolist()
    assert [q["query_id"] for q in doc["per_query"]] == ids

    # Per query: the mean over repeats recounted from the stored hits (hit@1, mrr = 1/rank).
    hit1 = np.round((ranks == 1).mean(axis=0), 4)
    mrr = np.round((1.0 / ranks).mean(axis=0), 4)
    np.testing.assert_allclose([q["scores"]["hit@1"] for q in doc["per_query"]], hit1, atol=1e-12)
    np.testing.assert_allclose([q["scores"]["mrr"] for q in doc["per_query"]], mrr, atol=1e-12)
    # ... the modal rank (a tie: the better one), and the flakiness counted by hand.
    swaps = (ranks == 4).sum(axis=0)
    modal = np.where(swaps > REPEATS - swaps, 4, 1)
    assert [q["scores"]["first_relevant_rank"] for q in doc["per_query"]] == modal.tolist()
    second = (texts == "second").sum(axis=0)
    for i, q in enumerate(doc["per_query"]):
        assert set(q["flakiness"]) == set(FLAKINESS_COLUMNS) and q["flakiness"]["repeats"] == REPEATS
        assert q["flakiness"]["rank_flips"] == min(swaps[i], REPEATS - swaps[i])
        assert q["flakiness"]["answer_flips"] == min(second[i], REPEATS - second[i])
        assert not set(FLAKINESS_COLUMNS) - {"repeats"} & set(q["scores"])
        # what cannot be a mean is repeat 1's, and says so: its hits are repeat 1's stored hits
        assert q["from_repeat"] == 1
        assert [h["rank"] for h in q["hits"] if h["chunk_id"] == f"{q['query_id']}-gold"] == [ranks[0, i]]
        assert q["answer"]["text"] == texts[0, i]
    assert doc["repeats"]["per_query"]["from_repeat"] == 1
    assert doc["repeats"]["per_query"]["fields_from_repeat"] == list(FROM_REPEAT_FIELDS)
    assert doc["repeats"]["count"] == REPEATS

    # The headline: the mean over queries of the per-query means = the mean of the per-repeat values.
    assert doc["metrics"]["hit@1"] == pytest.approx((ranks == 1).mean(), abs=HALF_UNIT)

    # The noise floor per metric, from the stored per-repeat run values with numpy.
    per_repeat = store.read("query_scores", "four")[0]["repeat_metrics"]
    assert per_repeat["repeat"].max() == REPEATS
    for metric in ("hit@1", "mrr", "ndcg@10", "answer_precision"):
        values = per_repeat.loc[per_repeat["metric"] == metric, "value"].astype(float).to_numpy()
        floor = doc["repeats"]["noise_floor"][metric]
        std = np.std(values, ddof=1)
        assert floor["repeats"] == REPEATS == len(values)
        assert floor["std"] == pytest.approx(std, abs=HALF_UNIT)
        assert floor["se"] == pytest.approx(std / np.sqrt(REPEATS), abs=HALF_UNIT)
        assert floor["spread"] == pytest.approx(values.max() - values.min(), abs=1e-9)
    # hit@1 per repeat is the share of queries whose gold hit was at rank 1 in that repeat.
    hit1_values = per_repeat.loc[per_repeat["metric"] == "hit@1", "value"].astype(float).to_numpy()
    np.testing.assert_allclose(hit1_values, np.round((ranks == 1).mean(axis=1), 4), atol=1e-12)
    assert doc["repeats"]["noise_floor"]["hit@5"]["se"] == 0.0  # rank 4 is a hit@5 every time
    flaky = int((((swaps > 0) & (swaps < REPEATS)) | ((second > 0) & (second < REPEATS))).sum())
    assert doc["repeats"]["flaky_queries"] == flaky and doc["repeats"]["deterministic"] is (flaky == 0)
    assert doc["repeats"]["auto"] is None  # a fixed count

    # JSON-valid throughout, and the same document written with --out.
    out = tmp_path / "four.json"
    proc = cli(env, "export", "four", "--format", "json", "--out", str(out), "--config", str(config))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text())["repeats"] == doc["repeats"]
    assert pd.notna(doc["metrics"]["mrr"])
