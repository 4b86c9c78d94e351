"""Ship gates (SPEC §7) as pure functions: thresholds in, verdicts with their numbers out.

The Dagster layer turns each gate into an asset check; the CLI and exports use
the same :class:`GateResult`.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass

from kebab_eval_pipeline.errors import InputError, Offender
from kebab_eval_pipeline.metrics.aggregate import metric_names
from kebab_eval_pipeline.settings import GateSettings, RegressionGateSettings, RunSettings


def known_metric(name: str, ks: list[int]) -> bool:
    """True when a run with these ``ks`` computes ``name`` (the metric catalogue is the single source)."""
    return name in metric_names(ks)


def check_gate_names(settings: RunSettings, source: str = "<config>") -> None:
    """Reject gates on metrics the run will never compute (a typo would otherwise always skip)."""
    offenders = [
        Offender(source, f"unknown metric {name!r} (k values: {settings.k})", field=f"{where}.{name}")
        for where, names in (("gates", settings.gates), ("gates.regression", settings.regression_gates))
        for name in names
        if not known_metric(name, settings.k)
    ]
    if offenders:
        raise InputError("run config is invalid", offenders)


@dataclass(frozen=True)
class GateResult:
    name: str  # check name, e.g. "gate_mrr_min"
    metric: str
    kind: str  # min | max | max_drop
    passed: bool
    skipped: bool
    blocking: bool
    value: float | None
    threshold: float
    delta: float | None  # value − threshold (absolute gates) or b − a (regression gates)
    reason: str

    def as_dict(self) -> dict:
        return asdict(self)


def check_name(metric: str, kind: str) -> str:
    """A Dagster-safe check name: ``hit@5`` + ``min`` → ``gate_hit_at_5_min``."""
    return "gate_" + re.sub(r"[^A-Za-z0-9_]", "_", metric.replace("@", "_at_")) + f"_{kind}"


def _is_null(value: float | None) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def evaluate_gate(metric: str, gate: GateSettings, metrics: dict[str, float | None]) -> list[GateResult]:
    """One result per configured bound (``min`` and/or ``max``)."""
    value = metrics.get(metric)
    results = []
    for kind, threshold in (("min", gate.min), ("max", gate.max)):
        if threshold is None:
            continue
        name = check_name(metric, kind)
        if _is_null(value):
            skipped = gate.skip_if_null
            reason = f"{metric} is null (empty denominator): " + (
                "skipped as configured" if skipped else "a gate on a null metric fails"
            )
            results.append(
                GateResult(name, metric, kind, skipped, skipped, gate.blocking, None, threshold, None, reason)
            )
            continue
        passed = value >= threshold if kind == "min" else value <= threshold
        op = "≥" if kind == "min" else "≤"
        reason = f"{metric} = {value:.4f} {'meets' if passed else 'misses'} {op} {threshold}"
        results.append(
            GateResult(
                name,
                metric,
                kind,
                passed,
                False,
                gate.blocking,
                value,
                threshold,
                round(value - threshold, 4),
                reason,
            )
        )
    return results


def evaluate_regression_gate(
    metric: str,
    gate: RegressionGateSettings,
    metrics: dict[str, float | None],
    baseline: dict[str, float | None] | None,
) -> GateResult:
    """Fails when ``metric`` dropped by more than ``max_drop`` against the baseline run."""
    name = check_name(metric, "max_drop")
    value, before = metrics.get(metric), (baseline or {}).get(metric)
    if baseline is None:
        return GateResult(
            name,
            metric,
            "max_drop",
            True,
            True,
            gate.blocking,
            value,
            -gate.max_drop,
            None,
            "no baseline run: nothing to regress against",
        )
    if _is_null(value) or _is_null(before):
        return GateResult(
            name,
            metric,
            "max_drop",
            False,
            False,
            gate.blocking,
            value,
            -gate.max_drop,
            None,
            f"{metric} is null in {'this run' if _is_null(value) else 'the baseline'}",
        )
    delta = round(value - before, 4)
    passed = delta >= -gate.max_drop - 1e-12
    reason = f"{metric} moved {delta:+.4f} ({before:.4f} → {value:.4f}); allowed drop {gate.max_drop}"
    return GateResult(
        name, metric, "max_drop", passed, False, gate.blocking, value, -gate.max_drop, delta, reason
    )


def evaluate_gates(settings: RunSettings, metrics: dict[str, float | None]) -> list[GateResult]:
    """Every absolute gate (configured + defaults) against one run's metrics."""
    return [
        r for metric, gate in settings.effective_gates().items() for r in evaluate_gate(metric, gate, metrics)
    ]
