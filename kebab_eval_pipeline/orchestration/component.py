"""An evaluation chain as a Dagster Component: a team adds one with a ``defs.yaml``.

::

    # my_project/defs/staging/defs.yaml
    type: kebab_eval_pipeline.orchestration.EvaluationChainComponent
    attributes:
      name: staging                 # asset keys staging/golden_set … staging/comparison_report
      config: eval.yaml             # the run config (system, golden set, gates), beside this file
      gated_asset:                  # optional: a blocking check on the team's own asset
        key: search_index
        check_name: index_quality

``dg check defs`` validates the attributes (an unknown or mistyped field, a bad chain name, a
missing config file, an invalid run config: each named with its place in the file) and ``dg list
defs`` shows the chain's assets, checks, job, schedules and sensors. The component only maps its
attributes onto the Python factory — :func:`~kebab_eval_pipeline.orchestration.factory.evaluation_chain`
for the chain, :func:`~kebab_eval_pipeline.orchestration.team_check.evaluation_check` for the gated
asset — so a chain from YAML and one from Python are the same definitions. The type is registered
under the ``dagster_dg_cli.registry_modules`` entry point (``kebab_eval_pipeline.orchestration``),
so ``dg list components`` in a project that installs this package shows it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any

import dagster as dg
from pydantic import Field

from kebab_eval_pipeline.foundation.errors import InputError, Offender
from kebab_eval_pipeline.foundation.location import CHAIN_NAME
from kebab_eval_pipeline.orchestration.factory import evaluation_chain
from kebab_eval_pipeline.orchestration.team_check import CHECK_NAME, evaluation_check


def _doc(text: str) -> dg.Resolver:
    """A field's description, shown by ``dg list components --json`` and the defs.yaml schema."""
    return dg.Resolver.default(description=text)


class GatedAsset(dg.Resolvable, dg.Model):
    """A blocking evaluation check on the team's own asset (an ``evaluation_check``): on each
    materialization of ``key`` it evaluates the golden set against the system that asset describes."""

    key: Annotated[
        dg.AssetKey,
        dg.Resolver(
            lambda context, key: dg.AssetKey.from_user_string(context.resolve_value(key, as_type=str)),
            model_field_type=str,
            description="The team's asset the check gates (`search_index`, `team/index`).",
        ),
    ]
    check_name: Annotated[str, _doc("The asset check's name.")] = CHECK_NAME
    config: Annotated[
        str | None,
        _doc(
            "The check's run config (golden set, gates), relative to this defs.yaml; "
            "default: the chain's run config (its file and settings)."
        ),
    ] = None
    settings: Annotated[
        dict[str, Any] | None, _doc("Top-level run-config keys replacing the check's config's.")
    ] = None
    system: Annotated[
        dict[str, Any] | None, _doc("The `system:` block evaluated; default: the config's.")
    ] = None
    system_from_metadata: Annotated[
        dict[str, str] | None,
        _doc(
            "System fields set from the asset's latest materialization metadata: a dotted field "
            "of the `system:` block → a metadata entry name, e.g. `{args.index: index_path}`."
        ),
    ] = None
    blocking: Annotated[
        bool, _doc("Fail with ERROR severity, so Dagster skips the asset's downstream assets.")
    ] = True
    storage: Annotated[
        str | None, _doc("Where the check's runs are stored; default: the asset's folder under storage.")
    ] = None
    description: Annotated[
        str | None, _doc("The check's description in the UI; default: what it evaluates.")
    ] = None


class EvaluationChainComponent(dg.Component, dg.Resolvable, dg.Model):
    """An evaluation chain — its system, golden set and gates (a run config file), optionally the
    team asset it gates — under a name: assets ``NAME/golden_set`` … ``NAME/comparison_report``,
    their gate checks, the ``NAME__evaluation_run`` job, its schedule and sensors."""

    name: Annotated[
        str,
        _doc(
            "The chain's name: a letter, then letters, digits or underscores. Asset keys are "
            "`NAME/golden_set` …, the job `NAME__evaluation_run`, the run partitions `NAME__eval_runs`."
        ),
        # in the schema, so `dg check defs` points at the line (and an editor's YAML schema too)
        Field(pattern=CHAIN_NAME.pattern),
    ]
    config: Annotated[
        str | None,
        _doc(
            "The run config file (what `kebab-eval run --config` reads), relative to this defs.yaml. "
            "`kebab-eval … --chain NAME --config FILE` reads and makes the chain's runs."
        ),
    ] = None
    settings: Annotated[
        dict[str, Any] | None,
        _doc(
            "Top-level run-config keys replacing the file's (`system`, `golden`, `gates`, …); with "
            "no `config`, the whole config. The CLI sees only the file."
        ),
    ] = None
    storage: Annotated[
        str | None, _doc("Where the chain's runs are stored; default: `NAME` under the config's storage.")
    ] = None
    system_kind: Annotated[str | None, _doc("Override of the system's kind.")] = None
    mode: Annotated[str | None, _doc("Override of the system's retrieval mode.")] = None
    chunk_size: Annotated[int | None, _doc("Override of the system's chunk size.")] = None
    watch_asset: Annotated[
        str | None,
        _doc(
            "A team asset (`search_index`, `team/index`) whose every new materialization starts a run "
            "of the chain (the system-version sensor, stopped until turned on)."
        ),
    ] = None
    gated_asset: Annotated[
        GatedAsset | None, _doc("A blocking evaluation check on the team's own asset.")
    ] = None

    def build_defs(self, context: dg.ComponentLoadContext) -> dg.Definitions:
        """The factory's definitions for these attributes; paths relative to the defs.yaml's folder.
        A configuration the factory refuses (a missing file, an invalid run config or gate) is an
        :class:`InputError` naming the defs.yaml and the field."""
        here = context.path
        try:
            chain = evaluation_chain(
                self.name,
                _relative(here, self.config),
                settings=self.settings,
                storage=self.storage,
                system_kind=self.system_kind,
                mode=self.mode,
                chunk_size=self.chunk_size,
                watch_asset=dg.AssetKey.from_user_string(self.watch_asset) if self.watch_asset else None,
            )
            if self.gated_asset is None:
                return chain
            gate = self.gated_asset
            check = evaluation_check(
                gate.key,
                _relative(here, gate.config) or _relative(here, self.config),
                # the chain's run config as the chain reads it, unless the check names its own file
                settings=gate.settings if gate.config else {**(self.settings or {}), **(gate.settings or {})},
                system=_system_source(gate.system, gate.system_from_metadata),
                name=gate.check_name,
                blocking=gate.blocking,
                storage=gate.storage,
                description=gate.description,
            )
        except InputError as exc:
            raise InputError(f"{_defs_yaml(here)}: {exc.summary}", exc.offenders) from None
        return dg.Definitions.merge(chain, dg.Definitions(asset_checks=[check]))


def _relative(folder: Path, path: str | None) -> Path | None:
    """``path`` relative to the defs.yaml's folder (an absolute path as is)."""
    return None if path is None else folder / Path(path).expanduser()


def _defs_yaml(folder: Path) -> str:
    yaml = folder / "defs.yaml"
    return str(yaml if yaml.is_file() else folder)


def _system_source(
    system: Mapping[str, Any] | None, from_metadata: Mapping[str, str] | None
) -> Mapping[str, Any] | Callable[[Mapping[str, Any]], Mapping[str, Any]] | None:
    """The check's system: the fixed block, or — with ``from_metadata`` — a function of the
    materialization's metadata that sets each dotted field to its metadata entry's value. A missing
    entry is an InputError naming it (the check then fails: it could not evaluate)."""
    if not from_metadata:
        return system
    fixed = dict(system or {})

    def from_materialization(metadata: Mapping[str, Any]) -> Mapping[str, Any]:
        missing = sorted(entry for entry in from_metadata.values() if entry not in metadata)
        if missing:
            raise InputError(
                "the asset's latest materialization lacks the metadata the system is built from",
                [
                    Offender(f"system_from_metadata.{field}", f"no metadata entry {entry!r}")
                    for field, entry in from_metadata.items()
                    if entry in missing
                ],
            )
        block: dict[str, Any] = _deep_copy(fixed)
        for field, entry in from_metadata.items():
            *parents, leaf = field.split(".")
            node = block
            for part in parents:
                node = node.setdefault(part, {})
            node[leaf] = metadata[entry]
        return block

    return from_materialization


def _deep_copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _deep_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_copy(v) for v in value]
    return value
