"""A real nondeterministic system whose flakiness is known, asked through ``kebab-eval run --repeat``.

``flaky_system.py`` (a command-adapter system, protocol jsonl, a real subprocess) swaps the gold hit
of each query from rank 1 to rank 4 with probability P on every call, independently, and answers
"second" instead of "first" with probability Q. The run's stored numbers must re-derive from its
stored repeats, and match P within binomial confidence intervals computed here.
"""

from __future__ import annotations

import sys
from math import comb, sqrt
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import pytrec_eval
import yaml
from scipy.stats import binomtest, chi2

from kebab_eval_pipeline.store.runs import RunStore
from tests.test_cli import cli, cli_env, no_traceback

#: Half a unit of the stored 4th decimal (a stored value is the exact one rounded).
HALF_UNIT = 0.5e-4 + 1e-9

SCRIPT = Path(__file__).with_name("flaky_system.py")
P_SWAP, P_ANSWER = 0.3, 0.2
QUERIES, REPEATS = 400, 4
CONFIDENCE = 0.999  # a correct pipeline fails one of these checks about once in a thousand runs


def flaky_config(
    tmp_path: Path, p_swap: float = P_SWAP, p_answer: float = P_ANSWER, queries: int = QUERIES
) -> Path:
    """A run config of the flaky system (``queries`` golden queries, one gold chunk each)."""
    golden_queries = [
        {"id": f"q{i:03d}", "query": f"question {i}", "supports": [{"chunk_id": f"q{i:03d}-gold"}]}
        for i in range(queries)
    ]
    golden = tmp_path / "golden.yaml"
    golden.write_text(yaml.safe_dump({"schema_version": "1", "name": "flaky", "queries": golden_queries}))
    config = tmp_path / "flaky.yaml"
    argv = [sys.executable, str(SCRIPT), str(p_swap), str(p_answer)]
    config.write_text(
        yaml.safe_dump(
            {
                "golden": str(golden),
                "storage": str(tmp_path / "store"),
                "answers": True,
                "baseline": "none",
                "system": {"kind": "command", "protocol": "jsonl", "argv": argv},
            }
        )
    )
    return config


def gold_ranks(outcomes: pd.DataFrame, hits: pd.DataFrame) -> np.ndarray:
    """Per query (in ``outcomes`` order): the rank of its gold hit, recounted from the stored hits."""
    gold = hits[hits["chunk_id"] == hits["query_id"] + "-gold"].set_index("query_id")["rank"]
    return gold.reindex(outcomes["query_id"]).to_numpy(dtype=np.int64)


def swap_evidence(swapped: np.ndarray) -> str:
    """What a failed statistical check prints, to tell chance from a defect: the swapped calls per
    repeat, and per pair of repeats the queries swapped in both (independent draws: about P²·Q)."""
    n = len(swapped)
    both = {
        f"{i + 1}&{j + 1}": int((swapped[i] & swapped[j]).sum()) for i in range(n) for j in range(i + 1, n)
    }
    expected = swapped.mean() ** 2 * swapped.shape[1]
    return (
        f"swapped per repeat {swapped.sum(axis=1).tolist()}; in both {both} (about {expected:.0f} expected)"
    )


def test_measured_flakiness_matches_the_known_swap_probability(tmp_path):
    env = cli_env(tmp_path)
    config = flaky_config(tmp_path)
    proc = cli(env, "run", "--run-id", "flaky", "--config", str(config), "--repeat", str(REPEATS))
    no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    assert "noise floor" in proc.stdout and f"changed across {REPEATS} repeats" in proc.stdout

    store = RunStore(tmp_path / "store")
    tables, info = store.read("retrieval_results", "flaky")
    assert info["repeat"] == REPEATS
    # Every repeat is stored: repeat 1 in the ordinary tables, 2..N beside them.
    assert len(tables["outcomes"]) == QUERIES and len(tables["hits"]) == QUERIES * 6
    assert tables["repeat_outcomes"]["repeat"].tolist() == [
        r for r in range(2, REPEATS + 1) for _ in range(QUERIES)
    ]
    assert len(tables["repeat_hits"]) == QUERIES * 6 * (REPEATS - 1)
    outcomes = [tables["outcomes"]] + [
        g.drop(columns="repeat").reset_index(drop=True)
        for _, g in tables["repeat_outcomes"].groupby("repeat")
    ]
    hits = [tables["hits"]] + [g for _, g in tables["repeat_hits"].groupby("repeat")]
    ranks = np.vstack([gold_ranks(o, h) for o, h in zip(outcomes, hits, strict=True)])  # (N, Q)
    assert set(np.unique(ranks)) == {1, 4}
    swapped = ranks == 4

    scores, score_info = store.read("query_scores", "flaky")
    qs = scores["query_scores"]
    assert score_info["repeat"] == REPEATS and list(qs["query_id"]) == list(tables["outcomes"]["query_id"])
    # Per query, from the stored repeats by hand: flips = repeats off the modal rank = min(S, N - S).
    s = swapped.sum(axis=0)
    assert qs["rank_flips"].tolist() == np.minimum(s, REPEATS - s).tolist()
    assert qs["distinct_ranks"].tolist() == (1 + ((s > 0) & (s < REPEATS))).tolist()
    assert qs["rank_best"].tolist() == np.where(s < REPEATS, 1, 4).tolist()
    assert qs["rank_worst"].tolist() == np.where(s > 0, 4, 1).tolist()
    # the modal rank (ties: the better one) and hit@1 as the mean over repeats
    assert qs["first_relevant_rank"].tolist() == np.where(s > REPEATS - s, 4, 1).tolist()
    np.testing.assert_allclose(qs["hit@1"], np.round(1 - s / REPEATS, 4))
    texts = np.vstack([o["answer_text"].to_numpy(dtype=object) for o in outcomes])
    second = (texts == "second").sum(axis=0)
    assert qs["answer_flips"].tolist() == np.minimum(second, REPEATS - second).tolist()
    assert (qs["refusal_flips"] == 0).all() and (qs["miss_repeats"] == 0).all()

    # The headline: per-query mean over repeats, then the mean over queries = 1 - the swap rate.
    metrics = store.stored_run("flaky").metrics
    calls, k = QUERIES * REPEATS, int(swapped.sum())
    # Stored to 4 decimals; k/1600 can end in an exact half (0.70125), which float means round either way.
    assert metrics.metrics["hit@1"] == pytest.approx(1 - k / calls, abs=HALF_UNIT)
    # The measured flip rate (swapped calls / calls) matches P within its exact binomial interval.
    ci = binomtest(k, calls, P_SWAP).proportion_ci(confidence_level=CONFIDENCE, method="exact")
    assert ci.low <= P_SWAP <= ci.high, (k / calls, ci)
    # Share of queries that flipped at all: 1 - P^N - (1-P)^N, a binomial proportion over queries.
    flaky = int((qs["rank_flips"] > 0).sum())
    expected = 1 - P_SWAP**REPEATS - (1 - P_SWAP) ** REPEATS
    ci = binomtest(flaky, QUERIES, expected).proportion_ci(confidence_level=CONFIDENCE, method="exact")
    assert ci.low <= expected <= ci.high, (flaky / QUERIES, expected, ci)
    # Mean rank flips per query: E[min(S, N - S)], S ~ Bin(N, P); within 3.3 standard errors.
    pmf = [comb(REPEATS, j) * P_SWAP**j * (1 - P_SWAP) ** (REPEATS - j) for j in range(REPEATS + 1)]
    mean = sum(p * min(j, REPEATS - j) for j, p in enumerate(pmf))
    var = sum(p * min(j, REPEATS - j) ** 2 for j, p in enumerate(pmf)) - mean**2
    assert abs(qs["rank_flips"].mean() - mean) <= 3.3 * sqrt(var / QUERIES)

    # The noise floor of hit@1: the per-repeat run values, recounted from the hits.
    per_repeat = 1 - swapped.mean(axis=1)
    floor = metrics.info["repeats"]["noise_floor"]["hit@1"]
    assert floor["min"] == pytest.approx(per_repeat.min(), abs=HALF_UNIT)
    assert floor["max"] == pytest.approx(per_repeat.max(), abs=HALF_UNIT)
    # (to the stored 4 decimals: a value at a half may round either way in another summation order)
    assert abs(floor["std"] - float(np.std(np.round(per_repeat, 4), ddof=1))) <= 0.5e-4 + 1e-9
    assert floor["spread"] == round(floor["max"] - floor["min"], 4)
    # ... and its variance is that of a binomial share, P(1-P)/Q, within a chi-square interval.
    stat = (REPEATS - 1) * floor["std"] ** 2 / (P_SWAP * (1 - P_SWAP) / QUERIES)
    assert (
        chi2.ppf((1 - CONFIDENCE) / 2, REPEATS - 1) <= stat <= chi2.ppf((1 + CONFIDENCE) / 2, REPEATS - 1)
    ), (
        stat,
        swap_evidence(swapped),
    )
    # A metric no repeat changes has a zero noise floor.
    assert metrics.info["repeats"]["noise_floor"]["hit@5"]["std"] == 0.0
    assert metrics.info["repeats"]["deterministic"] is False
    top = metrics.info["repeats"]["flakiest"]
    assert top and top[0]["flips"] == int(qs["flips"].max())

    # Exports: one TREC run file per repeat; trec_eval (pytrec_eval) re-derives each repeat, and the
    # mean over repeats is the headline.
    out = tmp_path / "export" / "flaky.trec"
    out.parent.mkdir()
    proc = cli(env, "export", "flaky", "--format", "trec", "--out", str(out), "--config", str(config))
    no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    measures = {"success_1": "hit@1", "recip_rank": "mrr", "ndcg_cut_10": "ndcg@10", "P_5": "precision@5"}
    values = {m: [] for m in measures}
    for r in range(1, REPEATS + 1):
        run_file = out.with_name(f"flaky.r{r}.trec")
        run, qrels = {}, {}
        for line in run_file.read_text().splitlines():
            qid, _, doc, _, score, tag = line.split()
            assert tag == f"flaky.r{r}"
            run.setdefault(qid, {})[doc] = float(score)
        for line in run_file.with_name(run_file.name + ".qrels").read_text().splitlines():
            qid, _, doc, grade = line.split()
            qrels.setdefault(qid, {})[doc] = int(grade)
        evaluated = pytrec_eval.RelevanceEvaluator(qrels, set(measures)).evaluate(run)
        assert len(evaluated) == QUERIES
        for m in measures:
            values[m].append(np.mean([e[m] for e in evaluated.values()]))
        # repeat r re-derived: its stored per-repeat hit@1
        assert values["success_1"][-1] == pytest.approx(per_repeat[r - 1], abs=2 * HALF_UNIT)
    for m, name in measures.items():
        assert float(np.mean(values[m])) == pytest.approx(metrics.metrics[name], abs=HALF_UNIT), name
