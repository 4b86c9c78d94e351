"""`kebab-eval compare A B C …` (a ranking) as a user runs it: real subprocesses and exit codes.

Three stored demo runs, made once for the module with `kebab-eval run`: lexical with 300- and
1200-character chunks, and hybrid (lexical + vectors) with the default 800. Their chunkers differ,
so all three are matched by anchor (each was scored by it: `auto` → anchor on the demo set).
"""

from __future__ import annotations

import itertools
import json
import os

import pytest

from tests.conftest import clean_cli_env, vectors_or_skip
from tests.test_cli import cli, no_traceback
from tests.test_cli_compare import flat, strict_json

RUNS = ("lex300", "lex1200", "hyb800")


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    # The session's index cache (tests/conftest.py; the workers share it): hyb800 loads the demo's
    # vector index that test_ref_vectors' or test_compare_e2e's hybrid/vector run embedded, instead
    # of embedding the corpus again. The home, and so every stored run, is the module's own.
    return {
        **clean_cli_env(tmp_path_factory, "ranking-cli"),
        "KEBAB_EVAL_INDEX_CACHE": os.environ["KEBAB_EVAL_INDEX_CACHE"],
    }


@pytest.fixture(scope="module")
def runs(env):
    vectors_or_skip()
    for run_id, args in (
        ("lex300", ["--chunk-size", "300"]),
        ("lex1200", ["--chunk-size", "1200"]),
        ("hyb800", ["--mode", "hybrid"]),
    ):
        proc = cli(env, "run", "--run-id", run_id, "--no-answers", "--baseline", "none", *args)
        assert proc.returncode == 0, proc.stderr
    return RUNS


@pytest.fixture(scope="module")
def ranking(env, runs) -> dict:
    proc = cli(env, "compare", *runs, "--json")
    assert proc.returncode == 0, proc.stderr
    no_traceback(proc)
    assert "warning: fallback_anchor" in flat(proc.stderr)
    return strict_json(proc.stdout)


def test_ranking_json_has_every_number(ranking):
    assert ranking["runs"] == list(RUNS) and sorted(ranking["order"]) == sorted(RUNS)
    assert ranking["metrics"] == ["mrr", "ndcg@10", "hit@5"]  # the default set
    assert ranking["n_common"] == 105 and ranking["dropped"] == dict.fromkeys(RUNS, 0)
    assert ranking["matching"]["mode"] == "fallback_anchor" and ranking["matching"]["rescored"] == []
    assert ranking["alpha"] == 0.05 and ranking["seed"] == 0 and ranking["resamples"] == 10_000
    assert len(ranking["per_run"]) == 9 and len(ranking["pairs"]) == 9
    for row in ranking["per_run"]:
        assert row["ci_low"] <= row["mean"] <= row["ci_high"]
        assert row["letters"] and row["rank"] in (1, 2, 3)
    for p in ranking["pairs"]:
        assert 0 < p["p_value"] <= p["p_adjusted"] <= 1
        assert p["significant"] == (p["p_adjusted"] < 0.05)
    # Ranks follow the means (higher is better for all three).
    for metric in ranking["metrics"]:
        rows = [r for r in ranking["per_run"] if r["metric"] == metric]
        for x, y in itertools.permutations(rows, 2):
            if x["mean"] > y["mean"]:
                assert x["rank"] < y["rank"]


def test_means_are_each_runs_own_numbers(env, runs, ranking):
    # Same golden set, each run kept its own stored (anchor) scores: the means are the runs' metrics.
    for run in runs:
        proc = cli(env, "export", run, "--format", "json")
        assert proc.returncode == 0, proc.stderr
        stored = json.loads(proc.stdout)["metrics"]
        for metric in ranking["metrics"]:
            row = next(r for r in ranking["per_run"] if (r["metric"], r["run_id"]) == (metric, run))
            # Stored metrics have 4 decimals. The ranking averages the stored 4-decimal per-query
            # scores (as `compare` does), the run's metric the unrounded ones: equal for 0/1
            # scores, within rounding (≤ 0.5e-4 each) for graded ones.
            if metric == "hit@5":
                assert round(row["mean"], 4) == stored[metric], (run, metric)
            else:
                assert row["mean"] == pytest.approx(stored[metric], abs=1e-4), (run, metric)


def test_each_pair_equals_compare_a_b(env, runs, ranking):
    for a, b in itertools.combinations(runs, 2):
        proc = cli(env, "compare", a, b, "--json")
        assert proc.returncode == 0, proc.stderr
        report = {m["metric"]: m for m in strict_json(proc.stdout)["per_metric"]}
        for metric in ranking["metrics"]:
            pair = next(
                p for p in ranking["pairs"] if (p["metric"], p["run_a"], p["run_b"]) == (metric, a, b)
            )
            assert pair["p_value"] == report[metric]["p_value"], (a, b, metric)
            assert round(pair["delta"], 4) == report[metric]["paired_delta"]
            assert (round(pair["ci_low"], 4), round(pair["ci_high"], 4)) == (
                report[metric]["ci_low"],
                report[metric]["ci_high"],
            )
            assert pair["n"] == report[metric]["n_paired"]


def test_markdown_and_files(env, runs, ranking, tmp_path):
    out = tmp_path / "out"
    page = tmp_path / "page.html"
    proc = cli(
        env, "compare", *runs, "--metric", "hit@5", "--metric", "mrr", "--out", str(out), "--html", str(page)
    )
    assert proc.returncode == 0, proc.stderr
    no_traceback(proc)
    assert proc.stdout.startswith("# Ranking of 3 runs")
    assert "| # | run | system | chunker | hit@5 (higher is better) | mrr (higher is better) |" in proc.stdout
    assert "### hit@5 (n = 92, mcnemar_exact)" in proc.stdout and "p (Holm)" in proc.stdout
    assert sorted(p.name for p in out.iterdir()) == ["ranking.html", "ranking.json", "ranking.md"]
    assert (out / "ranking.md").read_text(encoding="utf-8") == proc.stdout.removesuffix("\n")  # print's own
    assert page.read_bytes() == (out / "ranking.html").read_bytes()
    html = page.read_text(encoding="utf-8")
    assert html.lower().startswith("<!doctype html") and html.count("<svg") == 1
    doc = json.loads((out / "ranking.json").read_text(encoding="utf-8"))
    assert doc["metrics"] == ["hit@5", "mrr"]
    hit5 = {r["run_id"]: r for r in doc["per_run"] if r["metric"] == "hit@5"}
    assert {r["mean"] for r in hit5.values()} == {
        r["mean"] for r in ranking["per_run"] if r["metric"] == "hit@5"
    }
    # Written files for two runs too (the pairwise report, unchanged on stdout).
    two = tmp_path / "two"
    proc = cli(env, "compare", runs[0], runs[1], "--out", str(two))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("# Comparison")
    assert sorted(p.name for p in two.iterdir()) == ["comparison.html", "comparison.json", "comparison.md"]


def test_bad_input_names_every_offender(env, runs):
    proc = cli(env, "compare", "lex300", "nope-1", "nope-2", "--metric", "bogus", "--metric", "error_rate")
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    no_traceback(proc)
    message = flat(proc.stderr)
    assert "cannot rank these runs (4 problems)" in message
    for text in (
        "run nope-1: no stored golden_set",
        "run nope-2: no stored golden_set",
        "unknown metric 'bogus'",
    ):
        assert text in message
    assert "'error_rate' cannot be ranked" in message and proc.stdout == ""

    proc = cli(env, "compare", *runs, "--metric", "hit@7")
    assert proc.returncode == 2 and "'hit@7' is not scored by run(s) lex300, lex1200, hyb800" in flat(
        proc.stderr
    )
    proc = cli(env, "compare", *runs, "--strict-chunker-version")
    assert proc.returncode == 2 and "--strict-chunker-version" in flat(proc.stderr)
    assert "run lex1200: chunker_version 'md-heading-2:size=1200:overlap=0'" in flat(proc.stderr)
    proc = cli(env, "compare", "lex300")
    assert proc.returncode == 2 and "1 given: two to compare (A B), three or more to rank" in flat(
        proc.stderr
    )
    proc = cli(env, "compare", "lex300", "lex1200", "--metric", "mrr")
    assert proc.returncode == 2 and "--metric: ranks three or more runs" in flat(proc.stderr)
    proc = cli(env, "compare", *runs, "--alpha", "1.5")
    assert proc.returncode == 2 and "--alpha: 1.5: must be above 0 and below 1" in flat(proc.stderr)
