"""A warned gate is a warning in Dagster, not a failure (issue 23): what the UI reads.

Dagster 1.13's UI (dagster_webserver's bundle, asset-checks/util.tsx) shows a check evaluation
with ``passed=False`` and WARN severity with a yellow warning icon — and the word "Failed", which
it uses for every failed check; ``passed=True`` would be a green "Succeeded" whatever the
severity. So a non-blocking gate that misses stays ``passed=False`` with WARN severity (the run
goes on), and its description and ``outcome`` metadata say warning / warn, as the CLI does; a
blocking gate that misses is ERROR and fails the run.
"""

from __future__ import annotations

import dagster as dg

from kebab_eval_pipeline.chain.artifacts import RunMetricsArtifact
from kebab_eval_pipeline.reporting.summary import gate_tally
from kebab_eval_pipeline.store.runs import RunStore
from tests.conftest import write
from tests.orchestration.test_chain import run_partition


def evaluations(result) -> dict[str, dg.AssetCheckEvaluation]:
    return {
        e.event_specific_data.check_name: e.event_specific_data
        for e in result.all_events
        if e.event_type_value == "ASSET_CHECK_EVALUATION"
    }


def test_a_missed_warning_gate_is_a_warn_check_and_the_run_goes_on(instance, tmp_path):
    cfg = write(
        tmp_path / "eval.yaml",
        "default_gates: false\ngates:\n  mrr: {min: 0.0}\n  hit@1: {min: 0.99, blocking: false}\n",
    )
    defs, result = run_partition(instance, "warned", config=cfg)
    assert result.success  # a warning never fails the run
    checks = evaluations(result)
    warned, passed = checks["gate_hit_at_1_min"], checks["gate_mrr_min"]
    assert (warned.passed, warned.severity, warned.blocking) == (False, dg.AssetCheckSeverity.WARN, False)
    assert warned.metadata["outcome"].value == "warn"
    assert warned.description.startswith("warning (non-blocking, the run goes on): hit@1 = ")
    assert warned.description.endswith("misses ≥ 0.99")
    assert (passed.passed, passed.severity, passed.metadata["outcome"].value) == (
        True,
        dg.AssetCheckSeverity.ERROR,
        "pass",
    )
    # The counts the CLI and run_metrics report are the same outcomes.
    store = RunStore(defs.resources["artifact_storage"].base)
    info = RunMetricsArtifact.from_tables(*store.read("run_metrics", "warned")).info
    assert gate_tally(info["gates"]) == {"passed": 1, "failed": 0, "warned": 1, "skipped": 0}


def test_a_missed_blocking_gate_is_an_error_check_that_fails_the_run(instance, tmp_path):
    cfg = write(tmp_path / "eval.yaml", "default_gates: false\ngates:\n  mrr: {min: 1.01}\n")
    _, result = run_partition(instance, "blocked", config=cfg)
    assert not result.success
    failed = evaluations(result)["gate_mrr_min"]
    assert (failed.passed, failed.severity, failed.blocking) == (False, dg.AssetCheckSeverity.ERROR, True)
    assert failed.metadata["outcome"].value == "FAIL" and not failed.description.startswith("warning")
