"""Ship gates as asset checks (SPEC §7): one check per configured bound.

Blocking gates fail with ERROR severity, which fails the Dagster run, so
``dagster asset materialize`` exits non-zero in CI. Non-blocking gates warn.
Every result carries value, threshold and delta as metadata.
"""

from __future__ import annotations

import dagster as dg

from kebab_eval_pipeline.artifacts import ComparisonArtifact, RunMetricsArtifact
from kebab_eval_pipeline.gates import GateResult, check_name, evaluate_gate, evaluate_regression_gate
from kebab_eval_pipeline.orchestration.assets import comparison_report, run_metrics
from kebab_eval_pipeline.orchestration.partitions import eval_runs
from kebab_eval_pipeline.settings import RunSettings


def _result(r: GateResult) -> dg.AssetCheckResult:
    severity = dg.AssetCheckSeverity.ERROR if r.blocking else dg.AssetCheckSeverity.WARN
    return dg.AssetCheckResult(
        passed=r.passed,
        severity=severity,
        description=r.reason,
        metadata={
            "metric": r.metric,
            "value": dg.MetadataValue.null() if r.value is None else dg.MetadataValue.float(float(r.value)),
            "threshold": dg.MetadataValue.float(float(r.threshold)),
            "delta": dg.MetadataValue.null() if r.delta is None else dg.MetadataValue.float(float(r.delta)),
            "blocking": r.blocking,
            "skipped": r.skipped,
            "reason": r.reason,
        },
    )


def _absolute_check(metric: str, kind: str, gate) -> dg.AssetChecksDefinition:
    bound = gate.min if kind == "min" else gate.max
    op = "≥" if kind == "min" else "≤"

    @dg.asset_check(
        asset=run_metrics,
        name=check_name(metric, kind),
        blocking=gate.blocking,
        partitions_def=eval_runs,
        description=f"{metric} {op} {bound}"
        + (" (blocking)" if gate.blocking else " (warning)")
        + (", skipped when null" if gate.skip_if_null else ""),
    )
    def _check(run_metrics: RunMetricsArtifact) -> dg.AssetCheckResult:
        only = gate.model_copy(
            update={"min": gate.min if kind == "min" else None, "max": gate.max if kind == "max" else None}
        )
        return _result(evaluate_gate(metric, only, run_metrics.metrics)[0])

    return _check


def _regression_check(metric: str, gate) -> dg.AssetChecksDefinition:
    @dg.asset_check(
        asset=comparison_report,
        name=check_name(metric, "max_drop"),
        blocking=gate.blocking,
        partitions_def=eval_runs,
        description=f"{metric} may not drop by more than {gate.max_drop} against the baseline",
    )
    def _check(comparison_report: ComparisonArtifact) -> dg.AssetCheckResult:
        info = comparison_report.info
        baseline = info.get("metrics_a") if info.get("run_a") else None
        return _result(evaluate_regression_gate(metric, gate, info.get("metrics_b", {}), baseline))

    return _check


def gate_checks(settings: RunSettings) -> list[dg.AssetChecksDefinition]:
    """Asset checks for every gate the settings configure (plus the WFGY defaults)."""
    checks = []
    for metric, gate in settings.effective_gates().items():
        for kind in ("min", "max"):
            if getattr(gate, kind) is not None:
                checks.append(_absolute_check(metric, kind, gate))
    checks += [_regression_check(metric, gate) for metric, gate in settings.regression_gates.items()]
    return checks
