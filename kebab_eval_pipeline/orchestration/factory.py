"""Evaluation chains as definitions a team adds to its own Dagster project.

:func:`evaluation_chain` returns the whole chain for one configuration — observed inputs, the six
partitioned assets, gate checks, the run ranking, the job and its sensors, and the resources they
read — under a name, so several chains (two golden sets; staging and production systems) sit side
by side in one ``Definitions``::

    defs = dg.Definitions.merge(
        dg.Definitions(assets=[search_index, deploy_index]),
        evaluation_chain("staging", config="eval/staging.yaml"),
        evaluation_chain("production", config="eval/production.yaml", settings={"golden": "gold-v2.yaml"}),
    )

:func:`build_chain_definitions` is the one builder: the package's own code location is the chain
with no name (:mod:`kebab_eval_pipeline.definitions`). A ``defs.yaml`` of
:class:`~kebab_eval_pipeline.orchestration.component.EvaluationChainComponent` calls
:func:`evaluation_chain` with its attributes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import dagster as dg

from kebab_eval_pipeline.chain.settings import RunSettings
from kebab_eval_pipeline.foundation.errors import InputError, Offender
from kebab_eval_pipeline.foundation.location import default_storage_base, run_storage
from kebab_eval_pipeline.gates.evaluate import check_gate_names
from kebab_eval_pipeline.orchestration.assets import DEFAULT_CHAIN, ChainAssets, build_chain_assets
from kebab_eval_pipeline.orchestration.automation import build_automation
from kebab_eval_pipeline.orchestration.bisect import build_bisect_asset
from kebab_eval_pipeline.orchestration.checks import gate_checks
from kebab_eval_pipeline.orchestration.golden_health import build_golden_health
from kebab_eval_pipeline.orchestration.io import ArtifactIOManager
from kebab_eval_pipeline.orchestration.names import DEFAULT_NAMES, ChainNames
from kebab_eval_pipeline.orchestration.ranking import build_run_ranking, run_ranking
from kebab_eval_pipeline.orchestration.resources import (
    ArtifactStorage,
    EvalSettingsResource,
    SystemUnderTestResource,
    settings_fields,
)
from kebab_eval_pipeline.orchestration.run_lock import locking_executor
from kebab_eval_pipeline.orchestration.shard_io import ShardIOManager
from kebab_eval_pipeline.orchestration.sweep import build_sweep_definitions

JOB_NAME = "evaluation_run"

#: Builders of further definitions of a chain: (settings, names) → definitions to add.
ChainExtension = Callable[[RunSettings, ChainNames], Sequence[Any]]


def chain_assets(names: ChainNames) -> ChainAssets:
    """The chain's assets under ``names`` (the default chain's are built once, at import)."""
    return DEFAULT_CHAIN if names == DEFAULT_NAMES else build_chain_assets(names)


def build_chain_definitions(
    names: ChainNames,
    resource: EvalSettingsResource,
    system: SystemUnderTestResource,
    storage: str | None = None,
    executor: dg.ExecutorDefinition | None = None,
    job_executor: dg.ExecutorDefinition | None = None,
    watch_asset: dg.AssetKey | None = None,
) -> dg.Definitions:
    """One chain's definitions: its settings (``resource`` with ``system``'s overrides) decide the
    gate checks and sensors; artifacts go to ``storage`` (else the settings' storage, else the
    default base). ``executor`` becomes the Definitions' default executor (the package's own
    location); ``job_executor`` is the chain job's own (a chain inside a team's project, whose
    Definitions keep the team's executor). ``watch_asset``: the system-version sensor starts a run
    on each new materialization of that asset (a team's index) instead of polling versions.
    Raises InputError for invalid settings or gates."""
    settings = resource.load(system)
    # The UI shows the system's effective kind and mode on the resource; the file's own values
    # are not overrides, so this loads the same settings.
    shown_system = SystemUnderTestResource(
        kind=settings.system.kind,
        mode=getattr(settings.system, "mode", None),
        chunk_size=getattr(settings.system, "chunk_size", None),
    )
    check_gate_names(settings, source=resource.config_path() or "<defaults>")
    base = default_storage_base(storage or settings.storage)
    # a run config without a judge: the judge is one step (the launchpad may still turn it on)
    chain = chain_assets(names).judged(settings.judge is not None)
    job = dg.define_asset_job(
        names.name(JOB_NAME),
        # the chain and its gate checks; the two inputs are observed, not materialized
        selection=dg.AssetSelection.assets(*chain.eval_assets),
        description="Materialize the whole evaluation chain (and its gates) for one run partition.",
        executor_def=job_executor,
    )
    ranking = run_ranking if names == DEFAULT_NAMES else build_run_ranking(names)
    owned = dg.map_asset_specs(
        lambda spec: spec.replace_attributes(owners=settings.owners),
        # run_ranking, regression_bisect: unpartitioned, over stored runs named in their config
        # (not in the run's job)
        [*chain.source_assets, *chain.eval_assets, ranking, build_bisect_asset(names)],
    )
    automation = build_automation(job, settings, names, watch_asset)
    chain_defs = dg.Definitions(
        # golden_health: owned by the config's owners already (a multi-asset with its own checks)
        assets=[*owned, build_golden_health(settings, names)],
        asset_checks=[*gate_checks(settings, chain), *automation.asset_checks],
        jobs=[job],
        schedules=automation.schedules,
        sensors=automation.sensors,
        resources={
            names.resource("eval_settings"): resource,
            names.resource("system_under_test"): shown_system,
            names.resource("artifact_io"): ArtifactIOManager(base=base),
            names.resource("shard_io"): ShardIOManager(base=base),
            names.resource("artifact_storage"): ArtifactStorage(base=base),
        },
        executor=executor,
    )
    # the config's sweep: the register_sweep job and sweep_leaderboard (nothing without a sweep)
    return dg.Definitions.merge(chain_defs, build_sweep_definitions(settings, names))


def chain_settings_resource(
    names: ChainNames, config_file: str | None, settings_json: str | None, **fields: Any
) -> EvalSettingsResource:
    """The chain's ``eval_settings``: its config file and settings as the resource type's defaults
    (``fields``: other fields set on it, the CLI's flags for one run).

    Dagster replaces a resource's whole config when a run's config (the launchpad) sets any of its
    fields, and fields left out take the type's defaults — for the package's own resource, "the
    file ``$KEBAB_EVAL_CONFIG`` names". A chain's file must survive such an override (setting
    ``golden`` for one run must not quietly evaluate another configuration), so each chain gets a
    subclass whose defaults are its own file and settings; a chain never reads
    ``$KEBAB_EVAL_CONFIG`` (that is the package's own location's)."""
    cls = type(
        f"EvalSettingsResource_{names.prefix}",
        (EvalSettingsResource,),
        {
            "__module__": __name__,
            "__doc__": EvalSettingsResource.__doc__,
            "__annotations__": {"config_file": str | None, "settings_json": str | None},
            "config_file": config_file,
            "settings_json": settings_json,
            "config_path": _own_config_path,
        },
    )
    return cls(**fields)


def _own_config_path(self: EvalSettingsResource) -> str | None:
    """A chain's config file: its own, never ``$KEBAB_EVAL_CONFIG``."""
    return self.config_file


def evaluation_chain(
    name: str,
    config: str | Path | None = None,
    *,
    settings: Mapping[str, Any] | None = None,
    storage: str | None = None,
    system_kind: str | None = None,
    mode: str | None = None,
    chunk_size: int | None = None,
    watch_asset: dg.AssetsDefinition | dg.AssetKey | str | None = None,
) -> dg.Definitions:
    """An evaluation chain named ``name`` for a team's own Definitions (merge it with
    ``dg.Definitions.merge``).

    Inputs:
      - ``name``: a letter, then letters, digits or underscores; the asset keys are ``name/golden_set``
        …, the resources ``name__eval_settings`` …, the job ``name__evaluation_run``, the run
        partitions ``name__eval_runs``.
      - ``config``: the run config file (the same YAML ``kebab-eval run --config`` reads). Unlike the
        package's own location, ``$KEBAB_EVAL_CONFIG`` is not consulted: a chain names its file.
        ``kebab-eval … --chain name --config FILE`` reads and writes this chain's runs.
      - ``settings``: top-level config keys that replace the file's (``system``, ``golden``,
        ``gates``, ``baseline``, …), validated as if written in the file; relative paths in them
        are relative to the file's folder. With no ``config``, the whole config. The CLI sees only
        the file: keep a chain's settings there when its runs are also read or made by the CLI.
      - ``storage``: where this chain's runs are stored. Default: a folder named ``name`` under
        the config's ``storage`` (else the default base), so two chains never share run ids —
        :func:`kebab_eval_pipeline.foundation.location.run_storage`, where ``--chain name`` looks.
      - ``system_kind`` / ``mode`` / ``chunk_size``: the ``system_under_test`` resource's overrides.
      - ``watch_asset``: a team's asset (its index): each new materialization starts a run of this
        chain (the ``system_version_sensor``, stopped until turned on).

    Raises InputError (naming the field) for a bad name or invalid settings, at load time.
    """
    watched = None
    if watch_asset is not None:
        watched = (
            watch_asset.key
            if isinstance(watch_asset, dg.AssetsDefinition)
            else dg.AssetKey.from_coercible(watch_asset)
        )
    return chain_definitions(
        name,
        config,
        settings=settings,
        storage=storage,
        system=SystemUnderTestResource(kind=system_kind, mode=mode, chunk_size=chunk_size),
        watch_asset=watched,
    )


def chain_definitions(
    name: str,
    config: str | Path | None = None,
    *,
    settings: Mapping[str, Any] | None = None,
    storage: str | None = None,
    system: SystemUnderTestResource | None = None,
    overrides: Mapping[str, Any] | None = None,
    base: str | None = None,
    watch_asset: dg.AssetKey | None = None,
) -> dg.Definitions:
    """:func:`evaluation_chain`'s definitions — also what ``kebab-eval run|sweep|rejudge --chain
    name`` runs in-process, so its runs are the chain's own (job ``name__evaluation_run``, partitions
    ``name__eval_runs``, the chain's storage folder). ``overrides``: ``eval_settings`` fields for one
    run (the CLI's flags); ``base``: the artifact base the chain's folder goes under instead of the
    config's ``storage`` (``kebab-eval sweep --storage``). InputError as :func:`evaluation_chain`."""
    names = ChainNames(name)
    if config is None and not settings:
        raise InputError(
            f"evaluation chain {name!r} has no configuration",
            [Offender("config", "give the run config file, or settings={...} with the whole config")],
        )
    if config is not None and not Path(config).is_file():
        raise InputError(
            f"evaluation chain {name!r}: the run config file does not exist",
            [Offender(str(config), "not a file", field="config")],
        )
    resource = chain_settings_resource(
        names,
        # the absolute file, so the chain loads from any working directory
        config_file=str(Path(config).resolve()) if config is not None else None,
        settings_json=json.dumps(dict(settings), sort_keys=True) if settings else None,
        **settings_fields(overrides or {}),
    )
    system = system or SystemUnderTestResource()
    if storage is None:  # where `kebab-eval … --chain NAME --config FILE` finds the runs too
        storage = run_storage(base or resource.load(system).storage, chain=name)
    # The chain's job holds each run id's lock for the whole run (one writer per run id), as the
    # package's own location's executor does; ad-hoc materializations take the team's executor and
    # every artifact write still checks the lock first (orchestration.io.write_artifact).
    return build_chain_definitions(
        names,
        resource,
        system,
        storage=storage,
        job_executor=locking_executor(dg.in_process_executor, storage),
        watch_asset=watch_asset,
    )
