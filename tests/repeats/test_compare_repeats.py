"""Comparing repeated runs of the flaky system (what `kebab-eval compare` does): tests on per-query
means (randomization, not McNemar), deltas within the noise floor marked, verdicts within the
queries' repeat ranges drawn, the flakiest queries listed."""

from __future__ import annotations

import math
import sys
from decimal import ROUND_HALF_DOWN, ROUND_HALF_UP, Decimal

import numpy as np
import pytest
import yaml

from kebab_eval_pipeline.chain import pipeline
from kebab_eval_pipeline.chain.settings import load_settings
from kebab_eval_pipeline.compare.runs import compare_runs
from kebab_eval_pipeline.store.runs import StoredRun
from tests.repeats.test_flaky_system import SCRIPT

QUERIES, REPEATS = 150, 3


def config(tmp_path, name: str, p_swap: float):
    queries = [
        {"id": f"q{i:03d}", "query": f"question {i}", "supports": [{"chunk_id": f"q{i:03d}-gold"}]}
        for i in range(QUERIES)
    ]
    golden = tmp_path / "golden.yaml"
    golden.write_text(yaml.safe_dump({"schema_version": "1", "name": "flaky", "queries": queries}))
    argv = [sys.executable, str(SCRIPT), str(p_swap), "0"]
    doc = {
        "golden": str(golden),
        "storage": str(tmp_path / "store"),
        "answers": False,
        "baseline": "none",
        "system": {"kind": "command", "protocol": "jsonl", "argv": argv},
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def ranges(scores):
    """Per query id: (best, worst) rank over the repeats, a miss as infinity."""
    worst = np.where(scores["miss_repeats"] > 0, np.inf, scores["rank_worst"].astype(float))
    return dict(
        zip(scores["query_id"], zip(scores["rank_best"].astype(float), worst, strict=True), strict=True)
    )


def rounded_mean_delta(a, b) -> set[float]:
    """The mean of b − a over the stored (4-decimal) scores, computed exactly and rounded to 4
    decimals: one value, or — when the exact mean falls on a half (sums of 4-decimal values over
    150 queries can: 0.65335) — its two neighbours, since float sums in different orders (the
    comparison's and pandas') land on either side of the tie."""
    exact = (sum(Decimal(str(v)) for v in b) - sum(Decimal(str(v)) for v in a)) / len(a)
    step = Decimal("0.0001")
    return {float(exact.quantize(step, rounding=r)) for r in (ROUND_HALF_DOWN, ROUND_HALF_UP)}


def stored_run(tmp_path, run_id: str, p_swap: float) -> StoredRun:
    """A run of the flaky system asked REPEATS times, through the chain's own functions."""
    settings = load_settings(config(tmp_path, run_id, p_swap)).model_copy(update={"repeat": REPEATS})
    golden = pipeline.load_golden_artifact(settings)
    retrieval = pipeline.retrieve(settings, golden)
    scores = pipeline.score(settings, golden, retrieval)
    metrics = pipeline.summarize(run_id, settings, golden, retrieval, scores)
    return StoredRun(run_id, golden, retrieval, scores, metrics)


def test_compare_repeated_runs_uses_the_repeats(tmp_path):
    runs = {r: stored_run(tmp_path, r, p) for r, p in (("a", 0.3), ("b", 0.3), ("c", 0.95))}
    for a, b in (("a", "b"), ("a", "c")):
        comparison = compare_runs(runs[a], runs[b])
        per_metric = comparison.per_metric.astype(object).where(comparison.per_metric.notna(), None)
        rows = {r["metric"]: r for r in per_metric.to_dict("records")}
        per_query = comparison.per_query.astype(object).where(comparison.per_query.notna(), None)
        info = comparison.info
        floors = [runs[x].metrics.info["repeats"]["noise_floor"] for x in (a, b)]
        # hit@1 is binary per call, a fraction per query: the randomization test on the means.
        hit = rows["hit@1"]
        assert hit["test"] == "randomization"
        qa, qb = runs[a].scores.scores, runs[b].scores.scores
        assert hit["paired_delta"] in rounded_mean_delta(qa["hit@1"], qb["hit@1"])
        # within noise: |delta| <= the standard error of the delta from the repeats,
        # √(sd_a²/N_a + sd_b²/N_b), and the paired test not significant (adjusted p ≥ 0.05)
        for name, row in rows.items():
            stats = [f[name] for f in floors if name in f and f[name]["std"] is not None]
            if row["delta"] is None or len(stats) < 2:
                assert row["within_noise"] is None, name
                continue
            floor = math.sqrt(sum(s["std"] ** 2 / s["repeats"] for s in stats))
            assert row["noise_floor"] == pytest.approx(floor, abs=1e-12), name
            p = row["p_adjusted"] if row["p_adjusted"] is not None else row["p_value"]
            significant = p is not None and p < 0.05
            assert row["within_noise"] == (abs(row["delta"]) <= floor + 1e-12 and not significant), name
            if significant:
                assert row["within_noise"] is False, name  # never relabelled as noise
        # per query: a decisive modal-rank verdict stands only outside the repeat ranges
        ra, rb = ranges(qa), ranges(qb)
        noisy = 0
        for v in per_query.to_dict("records"):
            (lo_a, hi_a), (lo_b, hi_b) = ra[v["query_id"]], rb[v["query_id"]]
            overlap = lo_a <= hi_b and lo_b <= hi_a
            if v["a_rank"] == v["b_rank"]:
                assert v["verdict"] == "draw"
            elif overlap:
                assert v["verdict"] == "draw" and v["note"].startswith("within repeat noise"), v
                noisy += 1
            else:
                assert v["verdict"] == ("win" if v["b_rank"] < v["a_rank"] else "loss"), v
        assert info["repeats_a"] == info["repeats_b"] == REPEATS
        assert info["flakiest_b"] == runs[b].metrics.info["repeats"]["flakiest"]
        assert "## Repeats" in comparison.markdown and "Flakiest queries of b" in comparison.markdown
        if b == "b":  # one system against itself: the flips are noise, not losses
            assert noisy > 0 and info["verdict_counts"]["loss"] <= 5
        else:  # p 0.95 against 0.3: hit@1 dropped far beyond the noise floor
            assert rows["hit@1"]["within_noise"] is False and rows["hit@1"]["delta"] < -0.5
            # a loss needs a never swapped in 3 calls and c always: 0.343 x 0.857 of the queries
            assert info["verdict_counts"]["loss"] > QUERIES // 6
