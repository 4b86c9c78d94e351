"""Ship gates as asset checks (SPEC §7): one check per configured bound.

The gates are evaluated once, where the chain makes the numbers they bound
(:func:`pipeline.summarize`, :func:`pipeline.compare`), and stored with those assets (``gates`` in
their info); these checks publish the stored results. Blocking gates fail with ERROR severity,
which fails the Dagster run, so ``dagster asset materialize`` exits non-zero in CI. Non-blocking
gates warn. Every result carries value, threshold and delta as metadata.

A check that could not run — a gate skipped on a null metric (``skip_if_null``), a regression gate
without a baseline, a default gate on a metric the run could not measure, the judge's spot check
without a judge — yields no result: the checks are multi-checks that can subset (their results are
optional outputs), and Dagster shows a check planned but not evaluated in a run that succeeded as
*skipped*, never as passed. The reason is logged in the run and stored in the asset's metadata
(``skipped_checks``, ``not_measured``); the CLI and JUnit still list the gate as skipped with it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import dagster as dg

from kebab_eval_pipeline.chain.artifacts import STAGES
from kebab_eval_pipeline.chain.settings import RunSettings
from kebab_eval_pipeline.gates.evaluate import GateResult, check_name, regression_kinds
from kebab_eval_pipeline.judge.metrics import disagreement
from kebab_eval_pipeline.metrics.health import CHECK_NAME
from kebab_eval_pipeline.metrics.matching_diagnostics import match_line
from kebab_eval_pipeline.orchestration.assets import DEFAULT_CHAIN, ChainAssets, read_chain_artifact
from kebab_eval_pipeline.reporting.summary import gate_outcome


@dataclass(frozen=True)
class CheckPart:
    """Checks of the chain on one asset (``asset``): their ``specs``, and ``evaluate(context,
    artifact)``, which yields the results of those of ``selected`` (check name → gate key) that
    could run — from the asset's stored artifact, read once for the whole step."""

    asset: dg.AssetsDefinition
    specs: list[dg.AssetCheckSpec]
    evaluate: Callable[..., Iterator[dg.AssetCheckResult]]


def _result(r: GateResult, asset_key: dg.AssetKey) -> dg.AssetCheckResult:
    """A gate's check result. A non-blocking gate that misses is ``passed=False`` with WARN
    severity: Dagster's own warning (a yellow warning icon, counted as a warning by asset health;
    the run goes on), where ``passed=True`` would show a green "Succeeded" for a missed threshold.
    Dagster 1.13 labels every failed check "Failed", whatever its severity, so the result's
    description and ``outcome`` metadata say "warning"/"warn", the CLI's word for it."""
    severity = dg.AssetCheckSeverity.ERROR if r.blocking else dg.AssetCheckSeverity.WARN
    outcome = gate_outcome(r.as_dict())
    return dg.AssetCheckResult(
        asset_key=asset_key,
        check_name=r.name,
        passed=r.passed,
        severity=severity,
        description=f"warning (non-blocking, the run goes on): {r.reason}" if outcome == "warn" else r.reason,
        metadata={
            "outcome": outcome,
            "metric": r.metric,
            "p_value": dg.MetadataValue.null()
            if r.p_value is None
            else dg.MetadataValue.float(float(r.p_value)),
            "value": dg.MetadataValue.null() if r.value is None else dg.MetadataValue.float(float(r.value)),
            "threshold": dg.MetadataValue.float(float(r.threshold)),
            "delta": dg.MetadataValue.null() if r.delta is None else dg.MetadataValue.float(float(r.delta)),
            "blocking": r.blocking,
            "skipped": r.skipped,
            "reason": r.reason,
            # max_p: the unadjusted p beside the adjusted one the gate read; margins: the verdict.
            **({} if r.p_raw is None else {"p_raw": dg.MetadataValue.float(float(r.p_raw))}),
            **({} if r.verdict is None else {"verdict": r.verdict}),
        },
    )


def _selected(context, specs: list[dg.AssetCheckSpec]) -> dict[str, str]:
    """The specs of the checks this step runs (a job may select some), as check name → gate key."""
    chosen = {key.name for key in context.selected_asset_check_keys}
    return {spec.name: (spec.metadata or {}).get("gate", spec.name) for spec in specs if spec.name in chosen}


def _stored_results(
    context: dg.AssetCheckExecutionContext, info: dict, names: dict[str, str], asset_key: dg.AssetKey
) -> Iterator[dg.AssetCheckResult]:
    """The check result of each gate of ``names`` (check name → gate key) from the gate results an
    asset stored (``info["gates"]``). A gate that could not run — skipped (a null metric skipped as
    configured, no baseline), or a default gate left out on a metric the run could not measure
    (``info["not_measured"]``) — yields nothing, its reason logged: Dagster shows it skipped. A
    check whose gate the asset did not evaluate otherwise — an artifact stored by another
    configuration, or before gates were stored with it — fails, saying so: a gate is never
    silently green."""
    stored = {g["name"]: GateResult(**g) for g in info.get("gates") or []}
    unmeasured = info.get("not_measured") or {}
    for name, key in names.items():
        metric = key.split("[", 1)[0].strip()
        if name in stored and stored[name].skipped:
            context.log.info(f"check {name} skipped: {stored[name].reason}")
        elif name in stored:
            yield _result(stored[name], asset_key)
        elif metric in unmeasured:
            context.log.info(f"check {name} skipped: {metric} not measured: {unmeasured[metric]}")
        else:
            yield dg.AssetCheckResult(
                asset_key=asset_key,
                check_name=name,
                passed=False,
                severity=dg.AssetCheckSeverity.ERROR,
                description="not evaluated: the stored artifact has no result for this gate "
                "(stored by another configuration); materialize the asset again",
                metadata={"outcome": "FAIL", "skipped": False, "reason": "not evaluated"},
            )


def _absolute_gates(
    settings: RunSettings, chain: ChainAssets, asset: dg.AssetsDefinition
) -> CheckPart | None:
    """The absolute gates (``min``/``max`` bounds) as one multi-check on ``asset`` (run_metrics)."""
    bounds = [
        (metric, kind, gate)
        for metric, gate in settings.effective_gates().items()
        for kind in ("min", "max")
        if getattr(gate, kind) is not None
    ]
    if not bounds:
        return None

    def describe(metric: str, kind: str, gate) -> str:
        op = "≥" if kind == "min" else "≤"
        extra = " (blocking)" if gate.blocking else " (warning)"
        return f"{metric} {op} {getattr(gate, kind)}{extra}" + (
            ", skipped when null" if gate.skip_if_null else ""
        )

    specs = [
        dg.AssetCheckSpec(
            check_name(metric, kind),
            asset=asset,
            blocking=gate.blocking,
            partitions_def=chain.names.partitions,
            description=describe(metric, kind, gate),
            metadata={"gate": metric},
        )
        for metric, kind, gate in bounds
    ]

    def ship_gates(context, run_metrics, selected):
        yield from _stored_results(context, run_metrics.info, selected, asset.key)

    return CheckPart(asset, specs, ship_gates)


def _comparison_gates(
    settings: RunSettings, chain: ChainAssets, asset: dg.AssetsDefinition
) -> CheckPart | None:
    """Regression gates (metric deltas, paired p-values) and verdict gates (per-query verdict
    counts, e.g. ``regression[tag=critical]``) as one multi-check on ``comparison_report``."""
    if not settings.regression_gates and not settings.verdict_gates:
        return None

    def describe(metric: str, kind: str, gate) -> str:
        if kind == "max_drop":
            return f"{metric} may not drop by more than {gate.max_drop} against the baseline"
        if kind == "non_inferior":
            return (
                f"{metric} must be shown no worse than the baseline by more than {gate.non_inferior} "
                f"(one-sided {1 - settings.compare.alpha:.0%} bound of the paired delta)"
            )
        if kind == "equivalent":
            return (
                f"{metric} must be shown equivalent to the baseline within ±{gate.equivalent} "
                f"(two one-sided tests at α = {settings.compare.alpha})"
            )
        which = "adjusted (Holm) " if settings.compare.significance == "adjusted" else ""
        return (
            f"{metric} may not drop with a {which}paired-test p-value below {gate.max_p} against the baseline"
        )

    specs = [
        dg.AssetCheckSpec(
            check_name(metric, kind),
            asset=asset,
            blocking=gate.blocking,
            partitions_def=chain.names.partitions,
            description=describe(metric, kind, gate),
            metadata={"gate": metric},
        )
        for metric, gate in settings.regression_gates.items()
        for kind in regression_kinds(gate)
    ] + [
        dg.AssetCheckSpec(
            check_name(key, "max"),
            asset=asset,
            blocking=gate.blocking,
            partitions_def=chain.names.partitions,
            description=f"at most {gate.max} query verdict(s) {key} against the baseline",
            metadata={"gate": key},
        )
        for key, gate in settings.verdict_gates.items()
    ]

    def regression_gates(context, comparison_report, selected):
        # a gate without a baseline yields nothing: skipped, not passed
        yield from _stored_results(context, comparison_report.info, selected, asset.key)

    return CheckPart(asset, specs, regression_gates)


def _judge_spot_check(settings: RunSettings, chain: ChainAssets, asset: dg.AssetsDefinition) -> CheckPart:
    """The judge's spot-check warning on the chain's ``judge`` asset."""

    spec = dg.AssetCheckSpec(
        "judge_spot_check",
        asset=asset,
        blocking=False,
        partitions_def=chain.names.partitions,
        description="The judge's reliability: the share of spot-checked queries whose second judgement moved "
        "a score by more than 1 point stays at or below judge.disagreement_warn (default 20%). A warning, "
        "never blocking; skipped, saying why in the run's log, when the judge is off or nothing was "
        "spot-checked.",
    )

    def judge_spot_check(context, judge, selected):
        if "judge_spot_check" not in selected:
            return
        threshold = float(judge.info.get("disagreement_warn", 0.2))
        disagreeing, compared = disagreement(judge.judgements) if judge.enabled else (0, 0)
        rate = disagreeing / compared if compared else None
        if rate is None:
            why = (
                "judge off (judge: null): nothing to check"
                if not judge.enabled
                else "no spot-checked query was scored by both judges"
            )
            context.log.info(f"check judge_spot_check skipped: {why}")
            return
        reason = f"{disagreeing} of {compared} spot-checked queries disagree by more than 1 point"
        yield dg.AssetCheckResult(
            asset_key=asset.key,
            check_name="judge_spot_check",
            passed=rate <= threshold,
            severity=dg.AssetCheckSeverity.WARN,
            description=reason,
            metadata={
                "value": dg.MetadataValue.float(rate),
                "threshold": dg.MetadataValue.float(threshold),
                "spot_check_n": compared,
                "disagreeing": disagreeing,
                "skipped": False,
                "reason": reason,
            },
        )

    return CheckPart(asset, [spec], judge_spot_check)


def _judge_calibration_check(
    settings: RunSettings, chain: ChainAssets, asset: dg.AssetsDefinition
) -> CheckPart | None:
    """``judge_calibration`` on ``run_metrics`` (configured by ``judge.calibration``): the judge's κ
    against a person's labels at or above ``min_kappa`` on every criterion with ``min_labels``
    labelled items. A warning unless ``blocking``; skipped, saying why, when no criterion had enough
    labels, the labels file does not exist yet, or the run was not judged."""
    calibration = settings.judge.calibration if settings.judge is not None else None
    if calibration is None:
        return None
    blocking = calibration.blocking
    spec = dg.AssetCheckSpec(
        "judge_calibration",
        asset=asset,
        blocking=blocking,
        partitions_def=chain.names.partitions,
        description=f"The judge agrees with a person's labels ({calibration.labels}): Cohen's κ "
        f"({calibration.kappa}) at least {calibration.min_kappa:g} on every criterion with "
        f"{calibration.min_labels} or more labelled items. "
        + ("Blocking (judge.calibration.blocking: true)." if blocking else "A warning."),
    )

    def judge_calibration(context, run_metrics, selected):
        if "judge_calibration" not in selected:
            return
        record = run_metrics.info.get("judge_calibration")
        if record is None:
            context.log.info("check judge_calibration skipped: the run was not judged")
            return
        check = record["check"]
        if check["status"] == "skipped":
            context.log.warning(f"check judge_calibration skipped: {check['reason']}")
            return
        yield dg.AssetCheckResult(
            asset_key=asset.key,
            check_name="judge_calibration",
            passed=check["status"] == "passed",
            severity=dg.AssetCheckSeverity.ERROR if record["blocking"] else dg.AssetCheckSeverity.WARN,
            description=check["reason"],
            metadata={
                "labels": dg.MetadataValue.path(record["labels"]),
                "labels_sha256": record["labels_sha256"] or "",
                "kappa": record["kappa"],
                "min_kappa": dg.MetadataValue.float(float(record["min_kappa"])),
                "blocking": bool(record["blocking"]),
                "reason": check["reason"],
            },
        )

    return CheckPart(asset, [spec], judge_calibration)


SYSTEM_HEALTH = CHECK_NAME


def _system_health_check(settings: RunSettings, chain: ChainAssets, asset: dg.AssetsDefinition) -> CheckPart:
    """Fails (blocking by default) when the system under test errored on every query or on more
    than ``system_health.max_error_rate`` of them. On ``run_metrics``, so the failed run's results,
    scores and report are still stored; only comparison_report waits on it."""
    health = settings.system_health
    blocking = health is not None and health.blocking
    if health is None:
        rule = "off (system_health: null): reports the share of failed queries as a warning only"
    else:
        rule = f"fails when every query errored or more than {health.max_error_rate:g} of them did" + (
            "" if blocking else " (warning only: blocking: false)"
        )

    spec = dg.AssetCheckSpec(
        SYSTEM_HEALTH,
        asset=asset,
        blocking=blocking,
        partitions_def=chain.names.partitions,
        description=f"The system under test answered: {rule}.",
    )

    def system_health(context, run_metrics, selected):
        if SYSTEM_HEALTH not in selected:
            return
        verdict = run_metrics.info.get("system_health")
        if verdict is None:  # metrics stored before this check existed, checked on their own
            why = "not recorded for this run (stored before system-health checks)"
            context.log.info(f"check {SYSTEM_HEALTH} skipped: {why}")
            return
        rate = verdict["error_rate"]
        yield dg.AssetCheckResult(
            asset_key=asset.key,
            check_name=SYSTEM_HEALTH,
            passed=bool(verdict["healthy"]),
            severity=dg.AssetCheckSeverity.ERROR if verdict["blocking"] else dg.AssetCheckSeverity.WARN,
            description=verdict["message"],
            metadata={
                "failed": verdict["failed"],
                "queries": verdict["queries"],
                "value": dg.MetadataValue.null() if rate is None else dg.MetadataValue.float(float(rate)),
                "threshold": dg.MetadataValue.float(float(verdict["max_error_rate"])),
                "error_classes": dg.MetadataValue.json(verdict["classes"]),
                "blocking": bool(verdict["blocking"]),
                "reason": verdict["message"],
            },
        )

    return CheckPart(asset, [spec], system_health)


def matching_coverage_check(
    settings: RunSettings, chain: ChainAssets = DEFAULT_CHAIN, asset: dg.AssetsDefinition | None = None
) -> CheckPart:
    """``matching_coverage`` on ``query_scores``: fails when the hits cannot support what the golden
    set needs (``matching_warnings`` in the asset's info: no line ranges, no heading paths, no chunk
    ids, document paths that match no gold path, nothing matched at all). A warning by default;
    ``matching_coverage: fail`` in the config makes it blocking (the run fails)."""
    blocking = settings.matching_coverage == "fail"

    asset = asset if asset is not None else chain.query_scores
    spec = dg.AssetCheckSpec(
        "matching_coverage",
        asset=asset,
        blocking=blocking,
        partitions_def=chain.names.partitions,
        description="The hits carry what the golden set's matching needs (line ranges, heading paths, "
        "chunk ids, document paths that name gold documents), so no score is 0 for want of a field. "
        + ("Blocking (matching_coverage: fail)." if blocking else "A warning (matching_coverage: warn)."),
    )

    def matching_coverage(context, query_scores, selected):
        if "matching_coverage" not in selected:
            return
        warnings = query_scores.info.get("matching_warnings") or []
        used = match_line(query_scores.info)
        reason = (
            "; ".join(f"{w['field']}: {w['message']}" for w in warnings)
            if warnings
            else "the hits carry every field the golden set's matching needs"
        )
        yield dg.AssetCheckResult(
            asset_key=asset.key,
            check_name="matching_coverage",
            passed=not warnings,
            severity=dg.AssetCheckSeverity.ERROR if blocking else dg.AssetCheckSeverity.WARN,
            description=reason,
            metadata={
                "match": dg.MetadataValue.text(used or str(query_scores.info.get("match"))),
                "match_by_query": dg.MetadataValue.json(query_scores.info.get("match_by_query") or {}),
                "warnings": dg.MetadataValue.json(warnings),
                "fields": dg.MetadataValue.text(", ".join(w["field"] for w in warnings) or "none"),
                "blocking": blocking,
            },
        )

    return CheckPart(asset, [spec], matching_coverage)


#: Every asset check of the chain by name, in the order the checks are defined: name → builder
#: ``(settings, chain, asset)`` → the check's :class:`CheckPart`, or None when the settings configure
#: nothing to check. Which asset a check is on is declared with the asset (``checks`` of
#: :data:`~kebab_eval_pipeline.chain.artifacts.STAGES`).
CHECKS = {
    "gates": _absolute_gates,
    "regression_gates": _comparison_gates,
    "system_health": _system_health_check,
    "judge_spot_check": _judge_spot_check,
    "judge_calibration": _judge_calibration_check,
    "matching_coverage": matching_coverage_check,
}

#: The step each check runs in: the checks of one step are one multi-asset check, which reads each
#: asset it checks once and reports every check's own result (a step costs a run some ten event-log
#: writes). The run's metrics' checks run together; the judge's spot check and the scores'
#: matching coverage run together once both exist — in the metrics' step (:data:`JOINED`) unless
#: one of them blocks (a step holding a blocking check on an asset can never also wait for that
#: asset's downstream: a blocking matching_coverage is not with run_metrics' checks).
STEPS = {
    "gates": "ship_gates",
    "system_health": "ship_gates",
    "regression_gates": "regression_gates",
    "judge_spot_check": "scoring_checks",
    "judge_calibration": "ship_gates",
    "matching_coverage": "scoring_checks",
}
#: A step whose checks run in another step when none of them is blocking: scoring_checks' checks
#: in ship_gates (which runs after run_metrics, so after judge and query_scores) — one step fewer
#: per run with ``matching_coverage: warn``, the default.
JOINED = {"scoring_checks": "ship_gates"}


def _step(name: str, parts: list[CheckPart], chain: ChainAssets) -> dg.AssetChecksDefinition:
    """One multi-asset check running ``parts``: each checked asset read once from the run store (the
    step depends on it; no IO-managed input), each part given the checks of it the step runs. It can
    subset: a check that could not run yields no result, and Dagster shows it skipped."""
    specs = [spec for part in parts for spec in part.specs]
    assets = list(dict.fromkeys(part.asset.key.path[-1] for part in parts))

    @dg.multi_asset_check(
        specs=specs,
        name=chain.names.name(name),
        can_subset=True,
        required_resource_keys={chain.names.resource("artifact_storage")},
    )
    def run_checks(context):
        selected = _selected(context, specs)
        read = {asset: read_chain_artifact(context, asset, chain.names) for asset in assets}
        for part in parts:
            chosen = {n: key for n, key in selected.items() if n in {s.name for s in part.specs}}
            if chosen:
                yield from part.evaluate(context, read[part.asset.key.path[-1]], chosen)

    return run_checks


def gate_checks(settings: RunSettings, chain: ChainAssets = DEFAULT_CHAIN) -> list[dg.AssetChecksDefinition]:
    """The checks the chain's assets declare (:data:`~kebab_eval_pipeline.chain.artifacts.STAGES`): the gate
    checks the settings configure (plus the WFGY defaults), the system-health check, the judge's
    spot-check warning and the matching-coverage check, in the steps :data:`STEPS` names (one fewer
    when none of a :data:`JOINED` step's checks blocks)."""
    on = {name: stage.asset for stage in STAGES for name in stage.checks}
    unknown = sorted(set(on) - set(CHECKS))
    if unknown:  # a declaration naming a check nobody builds: a programming error, said at load
        raise ValueError(f"STAGES names checks with no builder in CHECKS: {unknown}")
    steps: dict[str, list[CheckPart]] = {}
    for name in CHECKS:
        if name in on:
            part = CHECKS[name](settings, chain, chain.asset(on[name]))
            if part is not None:
                steps.setdefault(STEPS[name], []).append(part)
    for step, into in JOINED.items():
        parts = steps.get(step, [])
        if into in steps and not any(spec.blocking for part in parts for spec in part.specs):
            steps[into].extend(steps.pop(step, []))
    return [_step(name, parts, chain) for name, parts in steps.items()]
