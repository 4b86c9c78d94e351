"""`kebab-eval bisect` over a real history: three `kebab-eval run`s of the reference system on the
bundled demo, with known setting changes, made once for the module.

- ``d1``: lexical, 300-character chunks;
- ``d2``: lexical, the default 800 (the chunker changes; MRR barely moves);
- ``d3``: the corpus without its ``beverages/`` folder (a config's ``system.exclude``; the golden
  set still asks about those documents): its queries lose their gold documents, MRR drops.

The bisect must name d2 → d3 as the one change, with the settings that differ there (the
corpus hash, the number of documents, the index version), and not d1 → d2 (whose chunker
changed, listed but not a change). Every number is checked against values computed here from the
stored query_scores (scipy for the p-values).
"""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import permutation_test
from statsmodels.stats.multitest import multipletests

from kebab_eval_pipeline.chain.artifacts import QueryScoresArtifact
from kebab_eval_pipeline.store.runs import RunStore
from tests.conftest import clean_cli_env
from tests.test_cli import cli, no_traceback

RUNS = ("d1", "d2", "d3")


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    return clean_cli_env(tmp_path_factory, "bisect-cli")


@pytest.fixture(scope="module")
def runs(env, tmp_path_factory):
    folder = tmp_path_factory.mktemp("bisect-configs")
    without = folder / "without-beverages.yaml"
    # stale_golden: warn — the golden set still names the excluded documents, on purpose
    without.write_text(
        "answers: false\nbaseline: none\nstale_golden: warn\n"
        "system:\n  kind: reference\n  exclude: ['beverages/']\n",
        encoding="utf-8",
    )
    for run_id, args in (
        ("d1", ["--chunk-size", "300"]),
        ("d2", []),
        ("d3", ["--config", str(without)]),
    ):
        proc = cli(env, "run", "--run-id", run_id, "--no-answers", "--baseline", "none", *args)
        assert proc.returncode == 0, proc.stderr
    return RUNS


@pytest.fixture(scope="module")
def stored(env, runs) -> dict[str, pd.DataFrame]:
    """Each run's stored per-query scores, read straight from the run store."""
    store = RunStore(str(Path(env["DAGSTER_HOME"]) / "kebab-eval" / "artifacts"))
    return {r: QueryScoresArtifact.from_tables(*store.read("query_scores", r)).scores for r in runs}


@pytest.fixture(scope="module")
def report(env, runs) -> dict:
    proc = cli(env, "bisect", "mrr", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    no_traceback(proc)
    return json.loads(proc.stdout)


def paired(stored, a: str, b: str) -> pd.DataFrame:
    left, right = stored[a][["query_id", "mrr"]], stored[b][["query_id", "mrr"]]
    both = left.merge(right, on="query_id", suffixes=("_a", "_b")).dropna()
    return both.assign(d=both["mrr_b"].astype(float) - both["mrr_a"].astype(float))


def test_bisect_names_the_run_where_the_corpus_changed(report, stored):
    assert report["runs"] == list(RUNS) and report["metric"] == "mrr"
    assert "ordered by start time" in report["order"]
    assert [s["changed"] for s in report["steps"]] == [False, True]
    (change,) = report["changes"]
    assert (change["run_a"], change["run_b"], change["direction"]) == ("d2", "d3", "worse")
    fields = [s["field"] for s in change["settings"]]
    assert {"index_version", "system.corpus_sha256", "system.n_docs"} <= set(fields)
    assert "chunker_version" not in fields and "system.chunk_size" not in fields
    n_docs = next(s for s in change["settings"] if s["field"] == "system.n_docs")
    assert int(n_docs["value_a"]) > int(n_docs["value_b"])  # documents left the corpus
    # The chunker change of d1 → d2 is listed on its step, which is not a change.
    first = report["steps"][0]
    assert {"chunker_version", "system.chunk_size"} <= set(first["changed_fields"])
    assert first["p_adjusted"] >= report["alpha"]


def test_numbers_match_the_stored_query_scores(report, stored):
    p_scipy = []
    for step, (a, b) in zip(report["steps"], pairwise(RUNS), strict=True):
        both = paired(stored, a, b)
        assert step["n_paired"] == len(both)
        assert step["delta"] == pytest.approx(both["d"].mean(), abs=1e-12)
        d = both["d"].to_numpy()
        d = d[d != 0]
        res = permutation_test(
            (d,), lambda x, axis: np.mean(x, axis=axis), permutation_type="samples", n_resamples=9999, rng=1
        )
        p_scipy.append(float(res.pvalue))
        # Both Monte Carlo: within a few standard errors of each other.
        assert abs(step["p_raw"] - res.pvalue) < 0.02, (a, b, step["p_raw"], res.pvalue)
    holm = multipletests([s["p_raw"] for s in report["steps"]], method="holm")[1]
    assert [s["p_adjusted"] for s in report["steps"]] == pytest.approx(list(holm))
    assert p_scipy[0] > 0.05 and p_scipy[1] < 0.001
    # The flipped queries of the change, worst first, exactly those whose MRR moved.
    both = paired(stored, "d2", "d3")
    moved = both[both["d"] != 0].sort_values(["d", "query_id"])
    (change,) = report["changes"]
    assert [f["query_id"] for f in change["flips"]] == moved["query_id"].tolist()
    assert change["n_worse"] == int((moved["d"] < 0).sum()) and change["n_better"] == int(
        (moved["d"] > 0).sum()
    )
    # The lost queries are those about the excluded folder's documents.
    assert {"para-kombucha-001", "fact-018"} <= set(moved.loc[moved["mrr_b"] == 0, "query_id"])


def test_text_report(env, runs):
    proc = cli(env, "bisect", "mrr", "--max-flips", "3")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith("bisect mrr over 3 runs (2 steps), higher is better")
    assert "1 change:" in out and "step 2: d2 → d3  worse" in out
    assert "system.n_docs: 53 → " in out and "… and " in out  # three shown, the rest counted


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope"], "'nope' is not a metric; known: mrr, hit@1"),
        (["mrr", "--until", "d1"], "fewer than 2 runs to bisect"),
        (["mrr", "--since", "2026-02-30"], "--since: '2026-02-30' is neither a stored run id nor a date"),
    ],
)
def test_bad_input_exits_2(env, runs, args, message):
    proc = cli(env, "bisect", *args)
    assert proc.returncode == 2, proc.stderr
    no_traceback(proc)
    assert message in " ".join(proc.stderr.split()), proc.stderr
