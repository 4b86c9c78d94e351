"""The CLI as a user runs it: real subprocesses, real exit codes, no tracebacks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kebab_eval_pipeline.foundation.demo import DEMO_GOLDEN
from kebab_eval_pipeline.foundation.run_ids import in_ci
from kebab_eval_pipeline.golden.load import load_golden
from tests.conftest import cli_environment, empty_dagster_home, write
from tests.forked_cli import run_cli

CLI = [sys.executable, "-m", "kebab_eval_pipeline.cli"]


def cli_env(tmp_path, bare: bool = False) -> dict[str, str]:
    """This process's environment without KEBAB_EVAL_*/DAGSTER_* settings, and a new empty
    DAGSTER_HOME under ``tmp_path`` (as a first command leaves it: :func:`empty_dagster_home`;
    ``bare``: an empty ``dagster.yaml`` alone, for a test of what a command creates or must not)."""
    home = tmp_path / "dagster_home"
    if not bare:
        return cli_environment(empty_dagster_home(home))
    home.mkdir()
    (home / "dagster.yaml").write_text("")
    return cli_environment(home)


@pytest.fixture
def env(tmp_path):
    return cli_env(tmp_path)


def cli(env, *args, cwd=None) -> subprocess.CompletedProcess:
    """``kebab-eval *args`` as its own process (forked ready-imported: :mod:`tests.forked_cli`)."""
    return run_cli(args, env=env, cwd=cwd, timeout=300)


def no_traceback(proc: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, proc.stderr


def test_run_prints_headline_metrics_then_history_export_compare(env, tmp_path):
    first = cli(env, "run", "--run-id", "demo-1", "--chunk-size", "400")
    assert first.returncode == 0, first.stderr
    assert "mrr" in first.stdout and "hit@5" in first.stdout and "report:" in first.stdout
    second = cli(env, "run", "--run-id", "demo-2")
    assert second.returncode == 0, second.stderr
    assert "comparison: baseline 'demo-1'" in second.stdout

    listed = cli(env, "runs", "list")
    assert "demo-1" in listed.stdout and "demo-2" in listed.stdout

    history = cli(env, "history", "--metric", "mrr", "--metric", "hit@1", "--csv")
    assert history.returncode == 0, history.stderr
    lines = history.stdout.splitlines()
    assert lines[0] == "run_id,created_at,chunker_version,golden,role,outcome,failed,mrr,hit@1"
    assert (
        lines[1].startswith("demo-1,")
        # the role follows CI detection (run_roles): ci where CI is set, else manual
        and f",md-heading-2:size=400:overlap=0,demo-fermentation,{'ci' if in_ci() else 'manual'},passed,,"
        in lines[1]
    )
    assert lines[2].startswith("demo-2,") and len(lines) == 3
    assert "demo-2" in cli(env, "history").stdout

    exported = cli(env, "export", "demo-2", "--format", "json")
    assert exported.returncode == 0, exported.stderr
    doc = json.loads(exported.stdout)
    golden = load_golden(DEMO_GOLDEN).golden
    assert set(doc) >= {
        "run_id",
        "created_at",
        "versions",
        "system",
        "golden",
        "metrics",
        "breakdowns",
        "gates",
        "per_query",
    }
    assert doc["golden"]["queries"] == len(golden.queries) == len(doc["per_query"])
    assert doc["versions"]["chunker_version"] == "md-heading-2:size=800:overlap=0"
    unanswerable = next(
        q for q in doc["per_query"] if q["query_id"] == next(g.id for g in golden.queries if not g.answerable)
    )
    assert unanswerable["scores"]["mrr"] is None  # null, not 0, for an empty denominator
    assert all(isinstance(h["rank"], int) for q in doc["per_query"] for h in q["hits"])

    compared = cli(env, "compare", "demo-1", "demo-2", "--json")
    assert compared.returncode == 0, compared.stderr
    report = json.loads(compared.stdout)
    assert report["versions_a"]["chunker_version"].endswith("size=400:overlap=0")
    assert report["versions_b"]["chunker_version"].endswith("size=800:overlap=0")
    assert sum(report["verdict_counts"].values()) == len(golden.queries)

    trec = cli(env, "export", "demo-2", "--format", "trec", "--out", str(tmp_path / "run.trec"))
    assert trec.returncode == 0
    first_line = (tmp_path / "run.trec").read_text().splitlines()[0].split()
    assert len(first_line) == 6 and first_line[1] == "Q0" and first_line[5] == "demo-2"


def test_runs_add_then_dagster_asset_materialize(env, tmp_path):
    assert cli(env, "runs", "add", "ci-1").returncode == 0
    # `python -m dagster asset materialize ...`: processes of their own, forked ready-imported
    dagster = [
        "asset",
        "materialize",
        "-m",
        "kebab_eval_pipeline",  # the package as Dagster users name it (its `defs` is lazy)
        "--select",
        "*",
        "--partition",
        "ci-1",
    ]
    ok = run_cli(dagster, env=env, cwd=tmp_path, timeout=300, module="dagster")
    assert ok.returncode == 0, ok.stderr[-3000:]
    exported = json.loads(cli(env, "export", "ci-1").stdout)
    assert set(exported["versions"]) >= {
        "chunker_version",
        "embedding_model",
        "prompt_template_version",
        "index_version",
        "parser_version",
    }

    gate = write(tmp_path / "gate.yaml", "gates:\n  mrr: {min: 1.01}\n")
    assert cli(env, "runs", "add", "ci-2").returncode == 0
    # and the module that defines them, as workspace.yaml names it
    by_module = [*dagster[:3], "kebab_eval_pipeline.definitions", *dagster[4:-1], "ci-2"]
    failing = run_cli(
        by_module, env={**env, "KEBAB_EVAL_CONFIG": str(gate)}, cwd=tmp_path, timeout=300, module="dagster"
    )
    assert failing.returncode != 0
    assert "gate_mrr_min" in failing.stderr + failing.stdout


def test_blocking_gate_exit_code_1(env, tmp_path):
    gate = write(tmp_path / "gate.yaml", "gates:\n  mrr: {min: 1.01}\n")
    proc = cli(env, "run", "--run-id", "g1", "--config", str(gate))
    assert proc.returncode == 1, proc.stderr
    assert "FAIL" in proc.stdout and "gate_mrr_min" in proc.stdout
    no_traceback(proc)


@pytest.mark.parametrize(
    ("files", "args", "expected"),
    [
        ({}, ["run", "--golden", "missing.yaml"], ["missing.yaml", "no such file"]),
        (
            {"c.yaml": "golden: [oops\n"},
            ["run", "--config", "c.yaml"],
            ["c.yaml", "line 2", "column", "invalid YAML"],
        ),
        (
            {"g.yaml": "queries:\n  - {id: a, query: x}\n  - {id: a, query: y}\n"},
            ["run", "--golden", "g.yaml"],
            ["g.yaml", "line 3", "query 'a'", "duplicate id"],
        ),
        (
            {"c.yaml": "system:\n  kind: reference\n  chunksize: 3\n"},
            ["run", "--config", "c.yaml"],
            ["c.yaml", "line 3", "system.chunksize", "unknown key"],
        ),
        (
            {"c.yaml": "gates:\n  mrrr: {min: 0.1}\n"},
            ["run", "--config", "c.yaml"],
            ["unknown metric 'mrrr'"],
        ),
        ({}, ["run", "--run-id", "../escape"], ["invalid run id"]),
        ({}, ["compare", "nope-a", "nope-b"], ["no stored golden_set for run 'nope-a'"]),
        ({}, ["golden", "validate", "nothing.yaml"], ["nothing.yaml"]),
    ],
)
def test_bad_input_exit_code_2_without_traceback(env, tmp_path, files, args, expected):
    for name, text in files.items():
        write(tmp_path / name, text)
    proc = cli(env, *args, cwd=tmp_path)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    no_traceback(proc)
    for fragment in expected:
        assert fragment in proc.stderr, (fragment, proc.stderr)


def test_usage_error_is_exit_2(env):
    proc = cli(env, "run", "--no-such-flag")
    assert proc.returncode == 2
    no_traceback(proc)


def test_stale_golden_stops_the_run_before_any_query(env, tmp_path):
    golden = write(
        tmp_path / "g.yaml",
        "queries:\n  - id: q1\n    query: kimchi\n    supports: [{rel_path: korean/no-such-file.md}]\n"
        # a path that reads as console markup is printed as written (it crashed the warning: exit 3)
        "  - id: q2\n    query: miso\n    supports: [{rel_path: 'korean/[/b]miso.md'}]\n",
    )
    proc = cli(env, "run", "--run-id", "stale-1", "--golden", str(golden))
    assert proc.returncode == 2, proc.stderr
    no_traceback(proc)
    assert "golden set is stale" in proc.stderr and "korean/no-such-file.md" in proc.stderr
    assert "korean/[/b]miso.md" in proc.stderr
    assert "stale-1" not in cli(env, "runs", "list").stdout  # nothing registered
    warn = write(tmp_path / "warn.yaml", f"golden: {golden}\nstale_golden: warn\n")
    proc = cli(env, "run", "--run-id", "stale-2", "--config", str(warn))
    assert proc.returncode == 0, proc.stderr
    assert "warning:" in proc.stderr and "no document at this path in the index" in proc.stderr
    assert "korean/[/b]miso.md" in proc.stderr


def test_golden_convert_and_schema(env, tmp_path):
    kebab = write(
        tmp_path / "k.yaml",
        "- id: a\n  query: where?\n  expected_doc_ids: [d.md]\n"
        "- id: b\n  query: nothing\n  expected_doc_ids: []\n",
    )
    out = tmp_path / "canonical[bold].jsonl"  # printed as written, not read as console markup
    proc = cli(env, "golden", "convert", str(kebab), "--to", "canonical", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert f"wrote 2 queries to {out}" in proc.stderr.replace("\n", ""), proc.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert lines == [
        {"id": "a", "query": "where?", "supports": [{"doc_id": "d.md"}]},
        {"id": "b", "query": "nothing", "answerable": False, "category": "unanswerable"},
    ]
    assert load_golden(out).golden.queries == load_golden(kebab).golden.queries
    stdout = cli(env, "golden", "convert", str(kebab)).stdout
    assert stdout.startswith('schema_version: "1"') or stdout.startswith("schema_version: '1'")
    schema = json.loads(cli(env, "golden", "schema").stdout)
    assert schema["properties"]["queries"]["type"] == "array" and "GoldenQuery" in schema["$defs"]
    bad = cli(env, "golden", "convert", str(kebab), "--to", "kebab")
    assert bad.returncode == 2 and "only 'canonical'" in bad.stderr


def test_golden_validate_summary(env):
    proc = cli(env, "golden", "validate", str(DEMO_GOLDEN))
    assert proc.returncode == 0, proc.stderr
    golden = load_golden(DEMO_GOLDEN).golden
    assert proc.stdout.startswith(f"ok: {len(golden.queries)} queries")
    assert Path(DEMO_GOLDEN).exists()
