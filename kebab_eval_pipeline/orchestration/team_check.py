"""An asset check a team attaches to its own asset: evaluate the system that asset describes.

A team's ``search_index`` asset (built by the team's own code) gets a blocking check::

    index_quality = evaluation_check(
        search_index,
        config="eval/gate.yaml",                       # golden set, gates, storage
        system=lambda meta: {"kind": "python", "callable": "team.search:Search",
                             "args": {"index": meta["index_path"]}},
    )
    defs = dg.Definitions(assets=[search_index, deploy_index], asset_checks=[index_quality])

On each materialization of the asset the check builds the system from the materialization's
metadata (or takes a fixed ``system:`` block), evaluates the golden set against it — a partition
of the evaluation chain run in the check's process exactly as ``kebab-eval run`` runs one
(:func:`~kebab_eval_pipeline.orchestration.in_process.execute_partition`; the chain's assets
without their own gate checks, so the comparison is made whatever the gates say: the check is the
verdict), a stored run like any other, named ``<check>-YYYYMMDD-HHMMSS-<run>`` — and fails when a
blocking gate (or the system-health check) fails. A blocking check with ERROR severity is what
makes Dagster skip the assets downstream of ``search_index`` in the same run — ``deploy_index``
never publishes a bad index.
"""

# No `from __future__ import annotations`: Dagster reads the check's context annotation.
import hashlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import dagster as dg

from kebab_eval_pipeline.chain.artifacts import (
    ARTIFACT_TYPES,
    CHAIN_ASSETS,
    ComparisonArtifact,
    GoldenArtifact,
    JudgeArtifact,
    QueryScoresArtifact,
    RetrievalArtifact,
    RunMetricsArtifact,
)
from kebab_eval_pipeline.chain.pipeline import run_role
from kebab_eval_pipeline.chain.settings import load_settings
from kebab_eval_pipeline.foundation.errors import InputError, Offender
from kebab_eval_pipeline.foundation.location import run_storage
from kebab_eval_pipeline.foundation.run_ids import asset_check_run_id
from kebab_eval_pipeline.foundation.run_roles import ROLE_TAG, SETTABLE_ROLES, TEAM_CHECK
from kebab_eval_pipeline.orchestration import run_lock
from kebab_eval_pipeline.orchestration.factory import chain_assets, chain_definitions
from kebab_eval_pipeline.orchestration.failures import raised_error
from kebab_eval_pipeline.orchestration.in_process import Builder, execute_partition
from kebab_eval_pipeline.orchestration.names import ChainNames
from kebab_eval_pipeline.reporting.summary import gate_outcome
from kebab_eval_pipeline.store.runs import RunStore

#: How the check learns the system: a fixed ``system:`` block, or one made from the metadata of
#: the asset's materialization (plain values: paths, text, numbers, JSON).
SystemSource = Mapping[str, Any] | Callable[[Mapping[str, Any]], Mapping[str, Any]]
CHECK_NAME = "evaluation"
HEADLINE = ("mrr", "hit@1", "hit@5", "hit@10", "ndcg@10", "recall@10")


#: The job of a check's chain: the chain's assets without their gate checks.
CHECK_JOB = "check_run"


@dataclass(frozen=True)
class Evaluation:
    """A stored run's artifacts, and the gates its metrics and comparison evaluated."""

    run_id: str
    golden: GoldenArtifact
    retrieval: RetrievalArtifact
    judged: JudgeArtifact
    scores: QueryScoresArtifact
    metrics: RunMetricsArtifact
    comparison: ComparisonArtifact

    @property
    def gates(self) -> list[dict[str, Any]]:
        """Every gate result: the absolute gates (run_metrics), then the regression and verdict
        gates (comparison_report; none without a baseline)."""
        return [*(self.metrics.info.get("gates") or []), *(self.comparison.info.get("gates") or [])]

    @property
    def system_health(self) -> dict[str, Any] | None:
        return self.metrics.info.get("system_health")

    @classmethod
    def stored(cls, store: RunStore, run_id: str) -> "Evaluation":
        """Run ``run_id`` as ``store`` holds it."""
        artifacts = [ARTIFACT_TYPES[a].from_tables(*store.read(a, run_id)) for a in CHAIN_ASSETS]
        return cls(run_id, *artifacts)


def check_chain_definitions(
    chain: str, config_file: str | None, settings: Mapping[str, Any], storage: str
) -> dg.Definitions:
    """The definitions of a check's chain ``chain`` (its config and settings, its runs under
    ``storage``) with :data:`CHECK_JOB`: the chain's assets without their gate checks, on the
    in-process executor holding the run's lock."""
    defs = chain_definitions(chain, config_file, settings=dict(settings) or None, storage=storage)
    names = ChainNames(chain)
    job = dg.define_asset_job(
        names.name(CHECK_JOB),
        selection=dg.AssetSelection.assets(*chain_assets(names).eval_assets).without_checks(),
        executor_def=run_lock.locking_executor(dg.in_process_executor, storage),
    )
    return dg.Definitions.merge(defs, dg.Definitions(jobs=[job]))


def rebuilt_check_chain(chain: str) -> dg.Definitions:
    """What a check's chain run's record names to rebuild it with: it cannot be (its system comes
    from the team's materialization, in the check's step), so this says so."""
    raise InputError(
        f"the evaluation run of check chain {chain!r} runs inside the check's step and cannot be "
        "launched again from its record: materialize the checked asset again"
    )


def _chain_name(key: dg.AssetKey, name: str) -> str:
    """The check's chain prefix: the checked asset's key and the check's name, in the characters a
    chain name allows."""
    raw = "_".join([*key.path, name])
    cleaned = re.sub(r"_+", "_", "".join(c if c.isascii() and c.isalnum() else "_" for c in raw))
    cleaned = cleaned.strip("_") if cleaned[:1].isalpha() else f"check_{cleaned.strip('_')}"
    if len(cleaned) > 48:  # a chain name's limit: shortened, kept distinct by a digest of the whole
        cleaned = f"{cleaned[:39]}_{hashlib.sha256(raw.encode()).hexdigest()[:8]}"
    return cleaned


def _evaluate(
    context, chain: str, config_file, settings: Mapping[str, Any], base: str, run_id: str, role: str
) -> Evaluation:
    """Run partition ``run_id`` of the check's chain in this process (writing on behalf of the
    check's Dagster run, which holds the partition's lock) and read the stored run back. InputError
    when the chain found bad input (the step's own message), RuntimeError for another failure."""
    names = ChainNames(chain)
    context.instance.add_dynamic_partitions(names.partitions_name, [run_id])
    result = execute_partition(
        check_chain_definitions(chain, config_file, settings, base),
        names.name(CHECK_JOB),
        Builder(__name__, rebuilt_check_chain.__name__, {"chain": chain}),
        instance=context.instance,
        partition_key=run_id,
        owner=context.run.run_id,
        tags={ROLE_TAG: role} if role in SETTABLE_ROLES else {},
    )
    if not result.success:
        for event in result.get_step_failure_events():
            ours = raised_error(event.step_failure_data)
            if isinstance(ours, InputError):
                raise ours
            error = event.step_failure_data.error
            raise RuntimeError(f"run {run_id} failed in step {event.step_key}: {error.message.strip()}")
        raise RuntimeError(f"run {run_id} failed (Dagster run {result.run_id})")
    return Evaluation.stored(RunStore(base), run_id)


def _plain(value: Any) -> Any:
    """A metadata entry's value as plain Python (a path's path, a JSON's data, a number)."""
    inner = getattr(value, "value", value)
    for attr in ("path", "url", "text", "md_str", "data"):
        if hasattr(inner, attr) and not isinstance(inner, str | int | float | bool):
            return getattr(inner, attr)
    return inner


def materialization_metadata(instance: dg.DagsterInstance, key: dg.AssetKey) -> tuple[dict, str | None]:
    """The latest materialization of ``key``: its metadata as plain values, and its Dagster run id
    (``({}, None)`` when it was never materialized)."""
    event = instance.get_latest_materialization_event(key)
    if event is None or event.asset_materialization is None:
        return {}, None
    return {k: _plain(v) for k, v in event.asset_materialization.metadata.items()}, event.run_id


def _by_how_much(gate: dict) -> str:
    """``mrr = 0.2143 misses ≥ 0.6 by 0.3857`` — which gate, and by how much."""
    if gate.get("value") is None or gate.get("delta") is None:
        return f"{gate['name']}: {gate['reason']}"
    return f"{gate['name']}: {gate['reason']} (by {abs(float(gate['delta'])):.4f})"


def check_result(
    evaluation: Evaluation, blocking: bool, storage: str, extra: Mapping[str, Any] | None = None
) -> dg.AssetCheckResult:
    """The check's verdict on a stored evaluation: fails when a blocking gate failed or the
    system-health check did (every failed gate named with its value, threshold and distance);
    non-blocking misses are listed as warnings. Metadata: the run id, headline metrics, every gate."""
    gates = evaluation.gates
    failed = [g for g in gates if gate_outcome(g) == "FAIL"]
    warned = [g for g in gates if gate_outcome(g) == "warn"]
    health = evaluation.system_health or {}
    unhealthy = health and not health.get("healthy", True) and health.get("blocking", False)
    passed = not failed and not unhealthy
    metrics = evaluation.metrics.metrics
    lines = [_by_how_much(g) for g in failed]
    if unhealthy:
        lines.append(f"system health: {health.get('message')}")
    if passed:
        description = f"run {evaluation.run_id}: every blocking gate passed" + (
            f" ({len(warned)} warning(s))" if warned else ""
        )
    else:
        description = f"run {evaluation.run_id}: " + "; ".join(lines)
    meta: dict[str, Any] = {
        "run_id": dg.MetadataValue.text(evaluation.run_id),
        "failed_gates": dg.MetadataValue.json([g["name"] for g in failed]),
        "failures": dg.MetadataValue.md("\n".join(f"- {line}" for line in lines) or "none"),
        "warnings": dg.MetadataValue.json([_by_how_much(g) for g in warned]),
        "gates": dg.MetadataValue.json(
            {
                g["name"]: {"outcome": gate_outcome(g)}
                | {k: g.get(k) for k in ("value", "threshold", "delta", "blocking")}
                for g in gates
            }
        ),
        "storage": dg.MetadataValue.path(storage),
        "queries": dg.MetadataValue.int(len(evaluation.scores.scores)),
        "baseline": dg.MetadataValue.text(str(evaluation.comparison.info.get("run_a"))),
        **(extra or {}),
    }
    for name in HEADLINE:
        value = metrics.get(name)
        if value is not None:
            meta[f"metric/{name}"] = dg.MetadataValue.float(float(value))
    for g in failed:  # the first failure's numbers at the top level: what an alert reads
        meta.setdefault("gate", dg.MetadataValue.text(g["name"]))
        if g.get("value") is not None:
            meta.setdefault("value", dg.MetadataValue.float(float(g["value"])))
            meta.setdefault("threshold", dg.MetadataValue.float(float(g["threshold"])))
            meta.setdefault("missed_by", dg.MetadataValue.float(abs(float(g["delta"]))))
    severity = dg.AssetCheckSeverity.ERROR if blocking else dg.AssetCheckSeverity.WARN
    return dg.AssetCheckResult(passed=passed, severity=severity, description=description, metadata=meta)


def evaluation_check(
    asset: dg.AssetsDefinition | dg.AssetKey | str,
    config: str | Path | None = None,
    *,
    system: SystemSource | None = None,
    settings: Mapping[str, Any] | None = None,
    name: str = CHECK_NAME,
    blocking: bool = True,
    storage: str | None = None,
    description: str | None = None,
) -> dg.AssetChecksDefinition:
    """A check on a team's own ``asset`` that evaluates the golden set against the system it
    describes, each time the asset is materialized.

    Inputs:
      - ``config``: the run config (golden set, gates, storage, matching; the same YAML
        ``kebab-eval run`` reads); ``settings``: top-level keys replacing the file's.
      - ``system``: the ``system:`` block, or a function from the materialization's metadata (plain
        values) to it — how the check finds the index the asset just built. None: the config's.
      - ``blocking``: fail with ERROR severity, so Dagster keeps the asset's downstream assets in
        the run from materializing (default); False warns only.
      - ``storage``: where the check's runs are stored (default: the config's, else the default
        base, in a folder named after the asset) — listed, compared and bisected like any run;
        the automatic baseline is the previous run of the same system identity.
    Bad configuration fails the check with the configuration error as its description (a check
    that cannot evaluate never passes).
    """
    key = asset.key if isinstance(asset, dg.AssetsDefinition) else dg.AssetKey.from_coercible(asset)
    if config is None and not settings:
        raise InputError(
            f"evaluation check on {key.to_user_string()} has no configuration",
            [Offender("config", "give the run config file, or settings={...} with the whole config")],
        )
    config_file = str(Path(config).resolve()) if config is not None else None
    replace = dict(settings or {})
    fixed_system = dict(system) if isinstance(system, Mapping) else None
    # Fail at load time, naming the file, when the configuration cannot even be read.
    base_settings = load_settings(
        config_file, replace={**replace, **({"system": fixed_system} if fixed_system else {})}
    )
    # where `kebab-eval … --gate ASSET --config FILE` finds the runs too
    base = storage or run_storage(base_settings.storage, gate=key.path)
    gates = ", ".join(sorted(base_settings.effective_gates())) or "none"
    chain = _chain_name(key, name)

    @dg.asset_check(
        asset=key,
        name=name,
        blocking=blocking,
        description=description
        or f"Evaluates the golden set {base_settings.golden_path().name} against the system this asset "
        f"describes on each materialization; fails when a blocking gate fails (gates: {gates}).",
    )
    def _evaluation_check(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        metadata, materialized_by = materialization_metadata(context.instance, key)
        try:
            block = fixed_system
            if callable(system):
                block = dict(system(metadata))
            chosen = {**replace, **({"system": block} if block else {})}
            run_settings = load_settings(config_file, replace=chosen)
            run_id = asset_check_run_id(name, datetime.now(UTC), context.run.run_id)
            # a team-check run, unless the team's Dagster run says otherwise (a kebab-eval/role tag)
            role = run_role(run_settings, run_id, context.run.tags, default=TEAM_CHECK)
            with run_lock.holding(base, run_id, context.run.run_id, context.instance):
                evaluation = _evaluate(context, chain, config_file, chosen, base, run_id, role.role)
        except InputError as exc:
            return dg.AssetCheckResult(
                passed=False,
                severity=dg.AssetCheckSeverity.ERROR if blocking else dg.AssetCheckSeverity.WARN,
                description=f"could not evaluate: {exc.render()}",
                metadata={"input_error": dg.MetadataValue.text(exc.render())},
            )
        extra = {"materialization_run": dg.MetadataValue.text(str(materialized_by))}
        if block:
            extra["system"] = dg.MetadataValue.json(json.loads(json.dumps(block, default=str)))
        result = check_result(evaluation, blocking, base, extra)
        context.log.info(result.description or "")
        return result

    return _evaluation_check
