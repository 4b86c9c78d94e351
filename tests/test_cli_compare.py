"""`kebab-eval compare A B` as a user runs it (SPEC §8, §12): real subprocesses and exit codes.

Three stored demo runs, made once for the module with `kebab-eval run`: chunk size 300, chunk
size 1200 (another chunker: a fallback comparison) and chunk size 300 again without answers
(the same chunker: an exact comparison).
"""

from __future__ import annotations

import json

import pytest

from kebab_eval_pipeline.foundation.demo import DEMO_GOLDEN
from kebab_eval_pipeline.golden.load import load_golden
from tests.conftest import clean_cli_env, write
from tests.test_cli import cli, no_traceback

SIZE_300 = "md-heading-2:size=300:overlap=0"
SIZE_1200 = "md-heading-2:size=1200:overlap=0"
N_QUERIES = len(load_golden(DEMO_GOLDEN).golden.queries)


def flat(text: str) -> str:
    """Console output with rich's line wrapping undone."""
    return " ".join(text.split())


def strict_json(text: str):
    def no_constants(name: str):
        raise AssertionError(f"non-standard JSON constant {name}")

    return json.loads(text, parse_constant=no_constants)


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """One DAGSTER_HOME (and so one artifact store and index cache) for the module's runs."""
    return clean_cli_env(tmp_path_factory, "compare-cli")


@pytest.fixture(scope="module")
def runs(env):
    """Run ids of the three stored runs."""
    for run_id, args in (
        ("c300", ["--chunk-size", "300"]),
        ("c1200", ["--chunk-size", "1200"]),
        ("c300-quiet", ["--chunk-size", "300", "--no-answers"]),
    ):
        proc = cli(env, "run", "--run-id", run_id, *args)
        assert proc.returncode == 0, proc.stderr
    return "c300", "c1200", "c300-quiet"


@pytest.fixture(scope="module")
def across_chunkers(env, runs) -> dict:
    """`compare c1200 c300 --json`: the 300-character run against the 1200-character baseline."""
    proc = cli(env, "compare", "c1200", "c300", "--json")
    assert proc.returncode == 0, proc.stderr
    no_traceback(proc)
    return strict_json(proc.stdout)


def test_compare_json_document(across_chunkers):
    doc = across_chunkers
    assert set(doc) >= {
        "run_a",
        "run_b",
        "per_metric",
        "per_query",
        "per_slice",
        "gates",
        "warnings",
        "chunker_version_match",
        "verdict_counts",
        "versions_a",
        "versions_b",
    }
    assert (doc["run_a"], doc["run_b"]) == ("c1200", "c300")
    # Both demo runs were scored by path + heading prefix (auto → anchor): the comparison keeps it.
    assert doc["chunker_version_match"] == "fallback_anchor" and doc["matching_criterion"] == "anchor"
    assert doc["rescored"] == []
    assert doc["versions_a"]["chunker_version"] == SIZE_1200
    assert doc["versions_b"]["chunker_version"] == SIZE_300
    assert doc["gates"] == []  # no --config: no regression gates
    assert any(w.startswith("fallback_anchor") for w in doc["warnings"])
    assert len(doc["per_query"]) == N_QUERIES == sum(doc["verdict_counts"].values())
    mrr = next(r for r in doc["per_metric"] if r["metric"] == "mrr")
    assert mrr["delta"] == pytest.approx(round(mrr["b"] - mrr["a"], 4))
    assert {"query_id", "verdict", "a_rank", "b_rank", "note"} <= set(doc["per_query"][0])


def test_compare_prints_markdown_and_writes_html(env, runs, tmp_path):
    out = tmp_path / "report.html"
    proc = cli(env, "compare", "c300", "c1200", "--html", str(out))
    assert proc.returncode == 0, proc.stderr
    no_traceback(proc)
    assert "# Comparison: `c1200` vs baseline `c300`" in proc.stdout
    assert "chunker_version_match" in proc.stdout and "fallback_anchor" in proc.stdout
    assert SIZE_300 in proc.stdout and SIZE_1200 in proc.stdout
    assert "## Metrics (delta = b − a)" in proc.stdout
    assert f"wrote {out}" in flat(proc.stderr)
    html = out.read_text(encoding="utf-8")
    assert html.lstrip().lower().startswith("<!doctype html")
    assert "<svg" in html and "fallback_anchor" in html and "c1200" in html


def test_strict_chunker_version_refuses_differing_chunkers(env, runs):
    proc = cli(env, "compare", "c300", "c1200", "--strict-chunker-version")
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    no_traceback(proc)
    message = flat(proc.stderr)
    assert SIZE_300 in message and SIZE_1200 in message and "strict-chunker-version" in message
    assert proc.stdout == ""


def test_strict_chunker_version_accepts_the_same_chunker(env, runs):
    proc = cli(env, "compare", "c300", "c300-quiet", "--strict-chunker-version", "--json")
    assert proc.returncode == 0, proc.stderr
    no_traceback(proc)
    doc = strict_json(proc.stdout)
    assert doc["chunker_version_match"] == "exact"
    assert doc["versions_a"]["chunker_version"] == doc["versions_b"]["chunker_version"] == SIZE_300


def test_failing_blocking_regression_gates_exit_1(env, runs, across_chunkers, tmp_path):
    # What the demo's chunkers give (matched by document): the 300-character run loses a little
    # MRR and ranks some first relevant hits lower (losses), but misses nothing outright.
    counts = across_chunkers["verdict_counts"]
    mrr = next(r for r in across_chunkers["per_metric"] if r["metric"] == "mrr")
    assert mrr["delta"] < 0, mrr
    assert counts["loss"] > 0 and counts["regression"] == 0, counts
    gates = write(
        tmp_path / "gates.yaml",
        "gates:\n  regression:\n    mrr: {max_drop: 0.0}\n    regression: {max: 0}\n    loss: {max: 0}\n"
        "    hit@10: {max_drop: 0.0, blocking: false}\n",
    )
    proc = cli(env, "compare", "c1200", "c300", "--config", str(gates), "--json")
    assert proc.returncode == 1, (proc.stdout[-2000:], proc.stderr)
    no_traceback(proc)
    doc = strict_json(proc.stdout)  # the report is still printed, with the gate results
    assert doc["verdict_counts"] == counts
    by_name = {g["name"]: g for g in doc["gates"]}
    assert set(by_name) == {
        "gate_mrr_max_drop",
        "gate_regression_max",
        "gate_loss_max",
        "gate_hit_at_10_max_drop",
    }
    drop = by_name["gate_mrr_max_drop"]
    assert not drop["passed"] and drop["blocking"] and drop["delta"] == pytest.approx(mrr["delta"])
    assert by_name["gate_regression_max"]["passed"] and by_name["gate_regression_max"]["value"] == 0
    loss = by_name["gate_loss_max"]
    assert not loss["passed"] and loss["value"] == counts["loss"]
    losses = [q["query_id"] for q in doc["per_query"] if q["verdict"] == "loss"]
    assert losses[0] in loss["reason"]
    assert by_name["gate_hit_at_10_max_drop"]["passed"]  # hit@10 did not move
    message = flat(proc.stderr)
    assert "gate failed: 2 blocking gate(s) failed" in message
    assert "gate_mrr_max_drop" in message and "gate_loss_max" in message
    assert "gate pass gate_regression_max" in message

    # The other way round mrr rises; only a query c300 found and c1200 missed could fail.
    only_metric = write(
        tmp_path / "metric.yaml",
        "gates:\n  regression:\n    mrr: {max_drop: 0.0}\n    regression: {max: 0}\n",
    )
    reversed_regressions = [
        q for q in across_chunkers["per_query"] if q["verdict"] == "win" and q["a_rank"] is None
    ]
    proc = cli(env, "compare", "c300", "c1200", "--config", str(only_metric))
    no_traceback(proc)
    assert proc.returncode == (1 if reversed_regressions else 0), proc.stderr
    assert "gate pass gate_mrr_max_drop" in flat(proc.stderr)


def test_unknown_run_is_bad_input(env, runs):
    proc = cli(env, "compare", "no-such-run", "c300")
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    no_traceback(proc)
    assert "no stored golden_set for run 'no-such-run'" in flat(proc.stderr)
    assert proc.stdout == ""
