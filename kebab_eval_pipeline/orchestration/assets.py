"""The evaluation chain as software-defined assets — thin wiring around :mod:`pipeline`.

golden_file / system_under_test (observable sources: content hash, index version)
  → golden_set → retrieval_results → judge → query_scores → run_metrics → comparison_report
Each asset is partitioned by run (``eval_runs``) and records, on every
materialization, the versions that make runs comparable. ``retrieval_results`` and ``judge`` are
graph-backed: a plan op, one op per shard of the run's queries (``DynamicOutput``; retried on its
own, the retrieval shards in the ``kebab_eval_system`` pool) and a collecting op that merges the
shards and publishes the asset (:mod:`kebab_eval_pipeline.chain.shards`) — the judge only for a
config with a judge; without one it is a single step (:meth:`ChainAssets.judged`). Every asset
writes its artifact to the run store itself; the steps pass no artifact between them.
"""

import dataclasses
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import dagster as dg
import pandas as pd

from kebab_eval_pipeline.chain import pipeline
from kebab_eval_pipeline.chain.artifacts import (
    STAGES,
    GoldenArtifact,
    JudgeArtifact,
    QueryScoresArtifact,
    RetrievalArtifact,
    RunMetricsArtifact,
)
from kebab_eval_pipeline.chain.memory import release_free_memory
from kebab_eval_pipeline.chain.run_overrides import variant_settings
from kebab_eval_pipeline.chain.settings import RunSettings
from kebab_eval_pipeline.chain.shards import (
    JudgePiece,
    JudgeShard,
    QueryShard,
    RetrievalShardResult,
    shard_key,
)
from kebab_eval_pipeline.compare.outcome import run_outcome
from kebab_eval_pipeline.compare.runs import (
    COMPARE_VERSION,
)
from kebab_eval_pipeline.contract import SystemInfo
from kebab_eval_pipeline.foundation import progress
from kebab_eval_pipeline.foundation.errors import InputError, Interrupted
from kebab_eval_pipeline.foundation.revision import pipeline_revision
from kebab_eval_pipeline.foundation.run_roles import RunRole, role_of
from kebab_eval_pipeline.golden.load import GOLDEN_PARSER_VERSION, golden_content_sha256
from kebab_eval_pipeline.golden.summary import golden_summary
from kebab_eval_pipeline.judge.metrics import judge_run_metrics, reply_warnings
from kebab_eval_pipeline.judge.run import JUDGE_VERSION
from kebab_eval_pipeline.metrics import catalogue
from kebab_eval_pipeline.metrics.matching_diagnostics import match_line
from kebab_eval_pipeline.orchestration.failures import input_failure, interrupted_failure
from kebab_eval_pipeline.orchestration.io import read_artifact, write_artifact
from kebab_eval_pipeline.orchestration.names import DEFAULT_NAMES, ChainNames
from kebab_eval_pipeline.orchestration.resources import ArtifactStorage
from kebab_eval_pipeline.orchestration.run_config import refuse_ignored_run_config
from kebab_eval_pipeline.orchestration.run_context import (
    RunContext,
    cached_context,
    context_key,
    forget_reads,
    handed_golden,
    handed_system,
    taken_checks,
)
from kebab_eval_pipeline.orchestration.shard_io import remove_finished_runs
from kebab_eval_pipeline.reporting.per_query import (
    SUSPECT_SHOWN,
    column_description,
    judgements_worst_first,
    verdicts_worst_first,
    worst_results_first,
    worst_scores_first,
)
from kebab_eval_pipeline.reporting.summary import gate_tally, render_run_summary
from kebab_eval_pipeline.systems.factory import live_info, system_info
from kebab_eval_pipeline.systems.identity import label as system_label
from kebab_eval_pipeline.systems.versions import mixed_versions

SYSTEM_POOL = "kebab_eval_system"
GROUP = DEFAULT_NAMES.group  # one group per chain: its inputs and assets in one box of the asset graph
IO = "artifact_io"
SHARD_IO = "shard_io"  # the values between a sharded asset's steps (orchestration/shard_io.py)
# A shard is retried on its own when its step raises (an exception no adapter turned into error
# rows): twice, after 2 s then 6 s (exponential). A failing system under test is not that: its
# queries are rows with errors, and the step succeeds. (A worker process that dies is the executor's
# and the run monitor's business, not the op's retry policy.)
SHARD_RETRY = dg.RetryPolicy(max_retries=2, delay=2.0, backoff=dg.Backoff.EXPONENTIAL)
DATA_VERSION_TAG = "dagster/data_version"
TABLE_ROW_LIMIT = 1000  # the UI table stays responsive; the full table is in Parquet
STAGE = "stage"  # asset tag: where in the chain an asset sits (filter the catalog by it)
TABLE_KINDS = {"python", "pandas", "parquet"}


#: The retrieval_results tables run_metrics does not read (pipeline.summarize uses outcomes + system).
SUMMARY_SKIPS = ("hits", "citations", "known_chunks", "repeat_hits", "repeat_citations")


def _stage_tag(asset: str) -> dict[str, str]:
    """The ``stage`` tag of the chain's asset ``asset``, as its declaration says (:data:`STAGES`)."""
    return {STAGE: next(s.tag for s in STAGES if s.asset == asset)}


def _named(asset: str, decorator):
    """``decorator`` applied to the function that defines the chain's asset ``asset`` (its name:
    a definition under another name would carry another asset's declaration)."""

    def apply(fn):
        if fn.__name__ != asset:
            raise ValueError(f"the chain's asset {asset!r} is defined by a function named {fn.__name__!r}")
        return decorator(fn)

    return apply


def _chain_asset(names: ChainNames, asset: str, resources: tuple[str, ...], **kwargs):
    """The chain's asset ``asset`` (declared in :data:`STAGES`): partitioned by run, in the chain's
    group, tagged with its ``stage``; ``resources`` are the chain resources it reads (their keys
    under ``names``). The asset writes its artifact to the run store itself
    (:func:`publish_chain_artifact`); the artifact IO manager is its IO manager still, for a
    definition outside the chain that takes the asset as an input."""
    return _named(
        asset,
        dg.asset(
            key_prefix=names.key_prefix() or None,
            partitions_def=names.partitions,
            group_name=names.group,
            io_manager_key=names.resource(IO),
            kinds=TABLE_KINDS,
            tags=_stage_tag(asset),
            required_resource_keys={names.resource(r) for r in resources},
            **kwargs,
        ),
    )


def _chain_deps(names: ChainNames, *assets: str) -> list[dg.AssetKey]:
    """The upstream assets of a chain asset: the chain's ``assets`` under ``names`` (read in the
    step: :func:`read_chain_artifact`)."""
    return [names.key(asset) for asset in assets]


def chain_context(context, names: ChainNames = DEFAULT_NAMES) -> RunContext:
    """The run's context (:mod:`.run_context`: made once per process and Dagster run, shared by its
    steps): its effective settings — the chain's ``eval_settings`` resource with its
    ``system_under_test`` overrides applied, and, for a sweep variant's run id (the partition key
    says which: a backfill cannot tag each partition), the variant's settings
    (:func:`~kebab_eval_pipeline.chain.run_overrides.variant_settings`) — and the system built from them.
    A run config naming an op or resource the run does not have fails the step first
    (:mod:`.run_config`; checked when the context is made, and again by every step while it
    cannot be made)."""
    resources = context.resources
    eval_settings = getattr(resources, names.resource("eval_settings"))
    system = getattr(resources, names.resource("system_under_test"))
    run_id = context.partition_key if getattr(context, "has_partition_key", False) else None

    def make() -> RunContext:
        refuse_ignored_run_config(context)
        settings = variant_settings(eval_settings.load(system), run_id)
        # the CLI built this run's system for its checks: its steps in this process use that one
        return RunContext(settings, run_id, handed_system(run_id, settings))

    key = context_key(
        context.run.run_id,
        run_id,
        eval_settings.config_path(),
        (type(eval_settings).__name__, eval_settings.model_dump_json(), system.model_dump_json()),
    )
    return cached_context(key, make)


def chain_settings(context, names: ChainNames = DEFAULT_NAMES) -> RunSettings:
    """The run's effective settings, as every step of a chain reads them (:func:`chain_context`)."""
    return chain_context(context, names).settings


def _op_context(context) -> dg.OpExecutionContext:
    """The op context of an asset's, an op's or an asset check's step."""
    return getattr(context, "op_execution_context", context)


def read_chain_artifact(context, asset: str, names: ChainNames = DEFAULT_NAMES, columns: dict | None = None):
    """The chain's artifact ``asset`` of the step's run partition, read from the run store the
    chain's ``artifact_storage`` resource names (only ``columns`` of the tables it names). The chain's
    assets and checks depend on their upstream assets (``deps``) and read them here, rather than as
    IO-managed inputs: each such input cost the run two event-log writes."""
    op = _op_context(context)
    storage = getattr(op.resources, names.resource("artifact_storage"))
    return read_artifact(storage.base, tuple(names.key(asset).path), op.partition_key, op.run.run_id, columns)


def publish_chain_artifact(
    context, asset: str, art, metadata: dict, names: ChainNames = DEFAULT_NAMES, data_version=None
) -> dg.MaterializeResult:
    """Write the chain's artifact ``asset`` of the step's run partition to the run store (after the
    one-writer check: :func:`~.io.write_artifact`) and materialize it with ``metadata`` and where it
    was stored — what the artifact IO manager did, without an output value (fewer events)."""
    stored = _store_chain_artifact(context, asset, art, names)
    return dg.MaterializeResult(metadata={**metadata, **stored}, data_version=data_version)


def _store_chain_artifact(context, asset: str, art, names: ChainNames) -> dict:
    """Write the chain's artifact ``asset`` of the step's run partition to the run store (after the
    one-writer check: :func:`~.io.write_artifact`); returns the metadata locating what was written."""
    op = _op_context(context)
    storage = getattr(op.resources, names.resource("artifact_storage"))
    return write_artifact(storage.base, asset, op.partition_key, art, op.run, op.instance)


def publish_sharded_artifact(context, asset: str, art, metadata: dict, names: ChainNames) -> dg.Output:
    """A sharded asset's collecting step publishing its artifact: written to the run store as
    :func:`publish_chain_artifact` writes it, the step's output carrying no value (its ``Out`` is
    Nothing-typed: no IO-manager hand-off, one event-log write fewer per asset)."""
    return dg.Output(None, metadata={**metadata, **_store_chain_artifact(context, asset, art, names)})


def _identity_metadata(system: SystemInfo, golden: GoldenArtifact) -> dict:
    """What makes runs comparable, on every materialization: versions, system, golden hash and size."""
    meta: dict[str, Any] = {
        k: dg.MetadataValue.text(str(v) if v is not None else "none") for k, v in system.versions().items()
    }
    meta["system"] = dg.MetadataValue.text(system.kind)
    meta["mode"] = dg.MetadataValue.text(system.mode or "none")  # as the versions: never "None"
    meta["golden_sha256"] = dg.MetadataValue.text(golden.sha256)
    meta["golden_queries"] = dg.MetadataValue.int(len(golden.queries))  # the queries table
    meta["pipeline_version"] = dg.MetadataValue.text(pipeline_revision())
    return meta


def _number(value: float | None) -> dg.MetadataValue:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return dg.MetadataValue.null()
    return dg.MetadataValue.float(float(value))


def _table_metadata(frame: pd.DataFrame) -> dg.MetadataValue:
    """A frame as a UI table with a typed schema (lists joined, nulls as None), capped at
    TABLE_ROW_LIMIT rows — callers order the rows so the ones to look at come first."""
    shown = frame.head(TABLE_ROW_LIMIT)
    types = {
        "int64": "int",
        "Int64": "int",
        "float64": "float",
        "Float64": "float",
        "bool": "bool",
        "boolean": "bool",
    }
    schema = dg.TableSchema(
        columns=[
            dg.TableColumn(
                str(c), types.get(str(shown[c].dtype), "string"), description=column_description(str(c))
            )
            for c in shown.columns
        ]
    )

    def cell(v):
        if isinstance(v, list | tuple) or (
            hasattr(v, "tolist") and not isinstance(v, str | float | int | bool)
        ):
            return ", ".join(map(str, list(v)))
        if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
            return None
        return v.item() if hasattr(v, "item") else v

    records = [dg.TableRecord({str(k): cell(v) for k, v in row.items()}) for row in shown.to_dict("records")]
    return dg.MetadataValue.table(records=records, schema=schema)


def headline_breakdowns(breakdowns: pd.DataFrame) -> pd.DataFrame:
    """The rows of a run's breakdowns (``dimension``, ``value``, ``metric``, ``score``, ``n``) that
    its UI table shows: the catalogue's headline metrics of every slice with queries to measure
    them. The whole table — every metric of every slice, empty ones included, 6,834 rows for the
    demo — is the ``file/breakdowns`` Parquet file and the export's; shown whole, its first 1,000
    rows held a few dimensions' empty slices and left the rest out."""
    headline = breakdowns["metric"].isin(catalogue.summary_names())
    return breakdowns[headline & (breakdowns["n"].fillna(0) > 0)].reset_index(drop=True)


def _not_run_metadata(meta: dict, info: dict, system: SystemInfo | None = None) -> None:
    """What the asset could not measure or check, in its metadata: the metrics the run could not
    carry the inputs of (``not_measured``), the system's capabilities, and the gate checks that could
    not run (``skipped_checks``: check name → reason; Dagster shows such a check as skipped, the
    reason is here, and the check's step logs it). Not repeated in the run's log: each line is an
    event-log write, and the CLI prints the run's not-measured line from the stored info."""
    if system is not None and system.capabilities is not None:
        meta["capabilities"] = dg.MetadataValue.json(system.capabilities)
    if "not_measured" in info:
        meta["not_measured"] = dg.MetadataValue.json(info["not_measured"])
    skipped = {g["name"]: g["reason"] for g in info.get("gates") or [] if g.get("skipped")}
    if skipped:
        meta["skipped_checks"] = dg.MetadataValue.json(skipped)


def headline_columns(ks: list[int]) -> list[str]:
    """Per-query columns of the headline metrics for the configured cutoffs (hit@1, mrr, ndcg@10, …)."""
    return catalogue.headline_names(ks)


def golden_file_observation(sha256: str, names: ChainNames = DEFAULT_NAMES) -> dg.AssetObservation:
    return dg.AssetObservation(
        asset_key=names.key("golden_file"), tags={DATA_VERSION_TAG: sha256}, metadata={"sha256": sha256}
    )


def _observed(context, key: dg.AssetKey, version: str) -> bool:
    """Whether the latest observation of input ``key`` already records data version ``version``
    (the CLI observed it just before the run: :func:`observe_inputs`). A step then need not record
    it again — an observation is an event-log write — and the run's provenance is the same."""
    records = context.instance.fetch_observations(key, limit=1).records
    if not records or records[0].asset_observation is None:
        return False
    return records[0].asset_observation.tags.get(DATA_VERSION_TAG) == version


def system_data_version(info) -> str:
    """The index version names parser, chunker, embedding and corpus; else the whole system info."""
    return info.index_version or info.model_dump_json()


def system_observation(info, names: ChainNames = DEFAULT_NAMES) -> dg.AssetObservation:
    return dg.AssetObservation(
        asset_key=names.key("system_under_test"),
        tags={DATA_VERSION_TAG: system_data_version(info)},
        metadata={k: dg.MetadataValue.text(str(v)) for k, v in info.versions().items()},
    )


def _golden_sha256(settings) -> str:
    """The configured golden set's content hash (every file it is read from)."""
    paths, _, options = settings.golden_input()
    return golden_content_sha256(paths, options)


def observe_inputs(
    instance: dg.DagsterInstance, settings, names: ChainNames = DEFAULT_NAMES, system=None
) -> None:
    """Record the current golden hash and index version before a run starts.

    Dagster reads an asset's input data versions when its step starts, so observing here
    (CLI, sensors) makes each run's provenance name exactly what it read; a later edit
    then shows the run as stale. The system is the one this process builds for its run (the CLI
    runs the chain in this process, on that object: ``system``, when it is built already); the
    sensors read live instead.
    """
    instance.report_runless_asset_event(golden_file_observation(_golden_sha256(settings), names))
    instance.report_runless_asset_event(system_observation(system_info(settings, system), names))


def _run_role(context, settings: RunSettings) -> RunRole:
    """The role of the partition's run (:func:`pipeline.run_role`: its sweep variant, else its Dagster
    run's tags); a ``kebab-eval/role`` tag that is no role is bad input (the step fails, not retried)."""
    try:
        return pipeline.run_role(settings, context.partition_key, context.run.tags)
    except InputError as exc:
        raise input_failure(exc) from None


def build_chain_assets(names: ChainNames = DEFAULT_NAMES) -> "ChainAssets":
    """The chain's assets and ops under ``names`` (asset keys, op names, resource keys, partitions)."""
    settings_keys = ("eval_settings", "system_under_test")
    storage_keys = (*settings_keys, "artifact_storage")

    def storage_of(context) -> ArtifactStorage:
        return getattr(context.resources, names.resource("artifact_storage"))

    def _observed_input(key: str, kind: str, description: str):
        """An observed input of the chain, in the chain's group (settings and system resources)."""
        spec = dg.AssetSpec(
            names.key(key),
            group_name=names.group,
            kinds={kind},
            tags={STAGE: "input"},
            description=description,
        )
        return dg.multi_observable_source_asset(
            name=names.name(key),
            specs=[spec],
            required_resource_keys={names.resource(r) for r in settings_keys},
        )

    @_observed_input(
        "golden_file",
        "file",
        "The golden file(s) on disk. Its data version is the content sha256, so editing the golden set "
        "marks every run's golden_set as stale.",
    )
    def golden_file(context) -> dg.ObserveResult:
        settings = chain_settings(context, names)
        sha = _golden_sha256(settings)
        return dg.ObserveResult(
            asset_key=names.key("golden_file"),
            data_version=dg.DataVersion(sha),
            metadata={"path": dg.MetadataValue.path(str(settings.golden_path())), "sha256": sha},
        )

    @_observed_input(
        "system_under_test",
        "python",
        "The configured system under test (the `system_under_test` resource). Its data version is the "
        "index version (parser + chunker + embedding versions + corpus hash), so a new chunker or corpus "
        "marks results stale.",
    )
    def system_under_test(context) -> dg.ObserveResult:
        # read live: an observation says what a run started now would read, whatever this process
        # built before (a python system is imported and built in a process of its own for it)
        info = live_info(chain_settings(context, names))
        return dg.ObserveResult(
            asset_key=names.key("system_under_test"),
            data_version=dg.DataVersion(system_data_version(info)),
            metadata={k: dg.MetadataValue.text(str(v)) for k, v in info.versions().items()},
        )

    @_chain_asset(
        names,
        "golden_set",
        storage_keys,
        code_version=GOLDEN_PARSER_VERSION,
        deps=[names.key("golden_file")],
        description="The golden query set, parsed and validated into the canonical model "
        "(queries + supports).",
    )
    def golden_set(
        context: dg.AssetExecutionContext,
    ) -> dg.MaterializeResult:
        progress.stage("golden_set")
        run = chain_context(context, names)
        settings = run.settings
        _run_role(context, settings)  # a kebab-eval/role tag that is no role: refused before any query runs
        # the CLI's checks parsed the set for this run (handed over once), else it is parsed here;
        # no later step reads the files again (they read the stored artifact)
        art = pipeline.load_golden_artifact(settings, handed_golden(run.run_id, settings))
        # Record the hash of what was actually read: if it differs from the version observed before
        # the step started, the UI shows this run stale (conservative) instead of wrongly fresh.
        if not _observed(context, names.key("golden_file"), art.sha256):
            context.log_event(golden_file_observation(art.sha256, names))
        for warning in art.info["warnings"]:
            context.log.warning(warning)
        summary = golden_summary(art.queries)
        meta = {
            **_identity_metadata(system_info(settings, run.system()), art),
            "golden_path": dg.MetadataValue.path(art.info["source"]),
            "golden_format": art.info["format"],
            **{k: v for k, v in summary.items() if not k.startswith("per_")},
            **{k: dg.MetadataValue.json(v) for k, v in summary.items() if k.startswith("per_")},
        }
        return publish_chain_artifact(
            context,
            "golden_set",
            art,
            meta,
            names,
            data_version=dg.DataVersion(f"{GOLDEN_PARSER_VERSION}:{art.sha256}"),
        )

    def _sharded_chain_asset(asset: str, **kwargs):
        """A sharded asset of the chain (:mod:`kebab_eval_pipeline.chain.shards`): a graph of a plan step, one
        step per shard and a collecting step, which publishes the asset as :func:`_chain_asset` does
        (its ``Out`` names the artifact IO manager)."""
        return _named(
            asset,
            dg.graph_asset(
                key_prefix=names.key_prefix() or None,
                partitions_def=names.partitions,
                group_name=names.group,
                kinds=TABLE_KINDS,
                tags=_stage_tag(asset),
                **kwargs,
            ),
        )

    def _shard_outputs(shards) -> Iterator[dg.DynamicOutput]:
        """A plan step's outputs: one dynamic output per shard (its step is ``…[shard_0000]``). What the
        plan found for the run as a whole travels with the shards (to keep the steps' inputs, and the
        events Dagster records for each, few: the one-shard default costs little more than one step)."""
        for shard in shards:
            yield dg.DynamicOutput(shard, mapping_key=shard_key(shard.index))

    def _clear_old_shards(context: dg.OpExecutionContext, storage: ArtifactStorage) -> None:
        """This run id's shard values of earlier, finished Dagster runs: no longer needed once a new run
        plans its own (a re-execution from a failed step does not re-plan, and reads its parent's)."""
        remove_finished_runs(storage.base, context.partition_key, context.run_id, context.instance)

    @dg.op(
        name=names.name("plan_retrieval"),
        ins={"golden_set": dg.In(dg.Nothing), "system_observed": dg.In(dg.Nothing)},
        out=dg.DynamicOut(io_manager_key=names.resource(SHARD_IO)),
        required_resource_keys={names.resource(r) for r in storage_keys},
        # the stale-golden check asks the system under test for its catalogue: that is a call, too
        pool=SYSTEM_POOL,
    )
    def plan_retrieval(context: dg.OpExecutionContext):
        """Check the run's inputs against the system (source root, stale golden set) and cut the golden
        queries into shards of ``shard_queries``."""
        progress.stage("retrieval_results")
        run = chain_context(context, names)
        settings = run.settings
        golden_set = read_chain_artifact(context, "golden_set", names)
        # the CLI checked this run's gates and golden set against the system before it started: once
        checked = taken_checks(run.run_id, settings, golden_set.sha256)
        shards = pipeline.plan_retrieval(
            settings,
            golden_set,
            system=run.system(),
            stale=None if checked is None else checked.stale_warnings,
        )
        _clear_old_shards(context, storage_of(context))
        yield from _shard_outputs(shards)

    @dg.op(
        name=names.name("retrieve_shard"),
        out=dg.Out(io_manager_key=names.resource(SHARD_IO)),
        # the artifact storage too: with `repeat: auto` the shard scores each repeat (the golden set)
        required_resource_keys={names.resource(r) for r in storage_keys},
        # Every shard's calls to the system under test claim a slot of this Dagster concurrency pool, so
        # `dagster instance concurrency set kebab_eval_system N` caps the load on it across shards and runs.
        pool=SYSTEM_POOL,
        retry_policy=SHARD_RETRY,
    )
    def retrieve_shard(
        context: dg.OpExecutionContext,
        shard: QueryShard,
    ) -> RetrievalShardResult:
        """One shard's queries through the system under test: a row per query, errors included."""
        try:
            run = chain_context(context, names)
            system = run.system()  # the run's, built once per process (a replayed trace parsed once)
        except InputError as exc:  # bad input is not retried
            raise input_failure(exc) from None
        # repeat: auto scores each repeat to decide whether to ask again: it needs the golden set
        auto = run.settings.repeat == "auto"
        golden_set = read_chain_artifact(context, "golden_set", names) if auto else None
        try:
            return pipeline.retrieve_shard(run.settings, shard, system, golden_set)
        except Interrupted as exc:  # Ctrl-C: stop, not retry
            raise interrupted_failure(exc) from None

    @dg.op(
        name=names.name("collect_retrieval"),
        ins={"golden_set": dg.In(dg.Nothing)},
        # the artifact is written to the run store in the step (publish_sharded_artifact); the IO
        # manager reads it for a definition outside the chain that takes the asset as an input
        out=dg.Out(dg.Nothing, io_manager_key=names.resource(IO)),
        required_resource_keys={names.resource(r) for r in storage_keys},
    )
    def collect_retrieval(
        context: dg.OpExecutionContext,
        pieces: list,
    ) -> dg.Output:
        """The shards' pieces merged in shard order into the run's retrieval_results, published with its
        metadata and warnings (once per run, whatever the number of shards)."""
        run = chain_context(context, names)
        settings = run.settings
        # every shard has run: the system (a replayed trace, an index) is no longer asked
        run.release_system()
        golden_set = read_chain_artifact(context, "golden_set", names)
        art = pipeline.merge_retrieval(settings, golden_set, pieces)
        r = art.results
        for warning in art.info["stale_golden"]:
            context.log.warning(f"stale golden reference: {warning}")
        # what the run's system reported, when it is not what was observed before the run
        if not _observed(context, names.key("system_under_test"), system_data_version(r.system)):
            context.log_event(system_observation(r.system, names))
        errors = int(r.outcomes["error"].notna().sum())
        classes = art.info["error_classes"]
        if errors:
            by_class = ", ".join(f"{n} {c}" for c, n in classes.items())
            context.log.warning(
                f"{errors} of {len(r.outcomes)} queries failed ({by_class}); see the 'error' column"
            )
        for warning in art.info["adapter_warnings"]:
            context.log.warning(f"system under test: {warning}")
        mixed = mixed_versions(r.system)
        for name, values in mixed.items():
            context.log.warning(
                f"versions disagree within this run: {name.removeprefix('mixed_')} = {values}"
            )
        attempts = r.outcomes["attempts"].astype("Int64")
        meta = {
            **_identity_metadata(r.system, golden_set),
            "queries": len(r.outcomes),
            "hits": len(r.hits),
            "errors": errors,
            "error_classes": dg.MetadataValue.json(classes),
            "timeouts": int(r.outcomes["timed_out"].sum()),
            "requests_sent": int(attempts.sum()),
            "answers": settings.answers,
            "k_requested": art.info["k_requested"],
            "shards": len(pieces),
            "stale_golden_references": len(art.info["stale_golden"]),
            "versions_reported": dg.MetadataValue.json(art.info["versions_reported"]),
            "mixed_versions": dg.MetadataValue.json(mixed),
            "adapter_warnings": len(art.info["adapter_warnings"]),
            "system_details": dg.MetadataValue.json(r.system.details),
            "system_identity": dg.MetadataValue.text(
                str((art.info.get("system_identity") or {}).get("label"))
            ),
            # failed, timed-out and empty queries first, then the slowest; the whole table: file/outcomes
            "per_query": _table_metadata(worst_results_first(r.outcomes, r.hits, golden_set.queries)),
            "per_query_rows_shown": min(len(r.outcomes), TABLE_ROW_LIMIT),
        }
        return publish_sharded_artifact(context, "retrieval_results", art, meta, names)

    @_sharded_chain_asset(
        "retrieval_results",
        code_version=pipeline.RUNNER_VERSION,
        ins={
            "golden_set": dg.AssetIn(key=names.key("golden_set"), dagster_type=dg.Nothing),
            "system_under_test": dg.AssetIn(key=names.key("system_under_test"), dagster_type=dg.Nothing),
        },
        description="Per-query results of the system under test: ranked hits, answers with citations, "
        "latencies and errors. A failing query is a row with an error, never a missing row. Runs in "
        "shards of `shard_queries` queries, each a step of its own (retried on its own, in the "
        "kebab_eval_system concurrency pool), merged in order.",
    )
    def retrieval_results(golden_set, system_under_test):
        shards = plan_retrieval(golden_set=golden_set, system_observed=system_under_test)
        pieces = shards.map(retrieve_shard)
        return collect_retrieval(golden_set=golden_set, pieces=pieces.collect())

    def _judge_metadata(context, art: JudgeArtifact, shards: int) -> dict:
        """The judge asset's materialization metadata (and its warnings, logged): whether it was on,
        both judges pinned, the spot check, the run's judge metrics and the worst judgements."""
        if not art.enabled:
            return {"enabled": False, "judgements": 0}
        info = art.info
        main, spot = info["judge"], info["spot_check_judge"]
        metrics, _ = judge_run_metrics(art.judgements, info)
        if main.get("note"):
            context.log.warning(f"judge: {main['note']}")
        if not main.get("pinned", True):
            context.log.warning(
                f"judge: model {main['model']!r} is not pinned to a digest ({main['digest']})"
            )
        failed = int(art.judgements["error"].notna().sum())
        if failed:
            context.log.warning(f"judge: {failed} judge call(s) failed; see the 'error' column of judgements")
        replies = reply_warnings(art.judgements)
        for warning in replies:
            context.log.warning(f"judge: {warning}")
        meta = {
            "enabled": True,
            "judge_backend": main["backend"],
            "judge_model": main["model"],
            "judge_digest": main["digest"],
            "judge_pinned": bool(main.get("pinned", True)),
            "prompt_version": main["prompt_version"],
            "decoding": dg.MetadataValue.json(main["decoding"]),
            "judge_note": dg.MetadataValue.text(main.get("note") or "none"),
            "reply_warnings": dg.MetadataValue.text("\n".join(replies) or "none"),
            "spot_check_judge": dg.MetadataValue.json(
                {k: spot[k] for k in ("backend", "model", "digest", "prompt_version")}
            )
            if spot
            else dg.MetadataValue.null(),
            "spot_check_queries": len(info["spot_check_queries"]),
            "judged_queries": info["judged_queries"],
            "judgements": len(art.judgements),
            "shards": shards,
            **{
                f"judge/{k.removeprefix('judge_')}": dg.MetadataValue.int(v)
                if isinstance(v, int)
                else _number(v)
                for k, v in metrics.items()
            },
            "cache": dg.MetadataValue.path(info["cache"]),
            # unparseable and failed judgements first, then the lowest scores
            "per_query": _table_metadata(judgements_worst_first(art.judgements)),
        }
        return meta

    def _judge_plan(context, settings: RunSettings) -> list[JudgeShard]:
        """The run's judge shards (none when the judge is off: nothing is read then)."""
        if settings.judge is None:
            return []
        golden_set = read_chain_artifact(context, "golden_set", names)
        retrieval_results = read_chain_artifact(
            context, "retrieval_results", names, columns={"hits": [], "repeat_hits": []}
        )
        retrieval_results = pipeline.with_stored_hits(
            retrieval_results,
            storage_of(context).store(),
            context.partition_key,
            pipeline.JUDGE_HIT_COLUMNS,
            "judge",
        )
        return pipeline.plan_judge(settings, golden_set, retrieval_results)

    def judge(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        """The judge in one step: the chain's judge when its settings have no judge (the run then
        stores the judge's "off" artifact in one step instead of a plan and a collecting step). A
        run whose settings turn the judge on (the launchpad's ``judge: true``) is judged here, its
        shards one after the other — the same artifact as the sharded judge's, without a step (and
        a retry) per shard."""
        progress.stage("judge")
        settings = chain_settings(context, names)
        try:
            shards = _judge_plan(context, settings)
            store = storage_of(context).store()
            pieces = [pipeline.judge_shard(settings, store, shard) for shard in shards]
        except InputError as exc:  # a missing judge model or API key: bad input
            raise input_failure(exc) from None
        except Interrupted as exc:  # Ctrl-C: stop
            raise interrupted_failure(exc) from None
        art = pipeline.merge_judge(settings, pieces)
        meta = _judge_metadata(context, art, len(pieces))
        return publish_chain_artifact(context, "judge", art, meta, names)

    judge_in_step = _chain_asset(
        names,
        "judge",
        storage_keys,
        code_version=JUDGE_VERSION,
        deps=_chain_deps(names, "golden_set", "retrieval_results"),
        description="The LLM judge (off: this run config has no judge: block; the launchpad's judge: true "
        "turns it on for one run): judge_groundedness and judge_correctness (0–5) of every answered query, "
        "with the judge's claims and reasoning, the full judge input, the pinned model digest and prompt "
        "version, and a fixed-seed spot check. One step; a config with a judge: block shards it.",
    )(judge)

    @dg.op(
        name=names.name("plan_judging"),
        out=dg.DynamicOut(io_manager_key=names.resource(SHARD_IO)),
        required_resource_keys={names.resource(r) for r in storage_keys},
        # The hits are read in the step, and only when the judge is on (pipeline.with_stored_hits):
        # a run without a judge never loads them again after collect_retrieval wrote them.
        # The judge judges repeat 1's answers: the other repeats' hits are never read here.
        ins={"golden_set": dg.In(dg.Nothing), "retrieval_results": dg.In(dg.Nothing)},
    )
    def plan_judging(context: dg.OpExecutionContext):
        """The answered queries' judge inputs and the run's spot-check sample, in shards of
        ``shard_queries`` (no shard when the judge is off)."""
        progress.stage("judge")
        shards = _judge_plan(context, chain_settings(context, names))
        _clear_old_shards(context, storage_of(context))
        yield from _shard_outputs(shards)

    @dg.op(
        name=names.name("judge_shard"),
        out=dg.Out(io_manager_key=names.resource(SHARD_IO)),
        retry_policy=SHARD_RETRY,
        required_resource_keys={names.resource(r) for r in storage_keys},
    )
    def judge_shard(
        context: dg.OpExecutionContext,
        shard: JudgeShard,
    ) -> JudgePiece:
        """One shard's judge calls (cached): a row per judgement, failed calls included."""
        try:
            settings = chain_settings(context, names)
            return pipeline.judge_shard(settings, storage_of(context).store(), shard)
        except InputError as exc:  # a missing judge model or API key: bad input, not retried
            raise input_failure(exc) from None
        except Interrupted as exc:  # Ctrl-C: stop, not retry
            raise interrupted_failure(exc) from None

    @dg.op(
        name=names.name("collect_judgements"),
        out=dg.Out(dg.Nothing, io_manager_key=names.resource(IO)),  # as collect_retrieval's
        required_resource_keys={names.resource(r) for r in storage_keys},
    )
    def collect_judgements(
        context: dg.OpExecutionContext,
        pieces: list,
    ) -> dg.Output:
        """The shards' judgements merged in shard order into the run's judge artifact, published with
        its metadata and warnings."""
        settings = chain_settings(context, names)
        art = pipeline.merge_judge(settings, pieces)
        meta = _judge_metadata(context, art, len(pieces))
        return publish_sharded_artifact(context, "judge", art, meta, names)

    @_sharded_chain_asset(
        "judge",
        code_version=JUDGE_VERSION,
        ins={
            asset: dg.AssetIn(key=names.key(asset), dagster_type=dg.Nothing)
            for asset in ("golden_set", "retrieval_results")
        },
        description="The LLM judge (off unless the run config has a judge: block): judge_groundedness and "
        "judge_correctness (0–5) of every answered query, with the judge's claims and reasoning, the full "
        "judge input, the pinned model digest and prompt version, and a fixed-seed spot check. Runs in "
        "shards of `shard_queries` queries, each a step of its own (retried on its own), merged in order.",
    )
    def judge(golden_set, retrieval_results):
        shards = plan_judging(golden_set=golden_set, retrieval_results=retrieval_results)
        return collect_judgements(pieces=shards.map(judge_shard).collect())

    @_chain_asset(
        names,
        "query_scores",
        storage_keys,
        code_version=pipeline.METRICS_VERSION,
        # The hits (10M rows at 100k queries × 100 hits) are read in the step, in the columns the run's
        # settings and golden supports make scoring consult (pipeline.with_scoring_hits): the read below
        # reads none of them.
        # A repeated run's other repeats' hits too: read a repeat at a time while scoring.
        deps=_chain_deps(names, "golden_set", "retrieval_results", "judge"),
        description="One row per golden query: first relevant rank, hit@k, MRR, recall@k, doc_recall@k, "
        "precision@k, nDCG@k, MAP, R-precision, bpref, judged@k, refusal and answer checks. Null where a "
        "metric does not apply.",
    )
    def query_scores(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        progress.stage("query_scores")
        settings = chain_settings(context, names)
        golden_set: GoldenArtifact = read_chain_artifact(context, "golden_set", names)
        retrieval_results: RetrievalArtifact = read_chain_artifact(
            context, "retrieval_results", names, columns={"hits": [], "repeat_hits": []}
        )
        judge: JudgeArtifact = read_chain_artifact(context, "judge", names)
        release_free_memory()  # what the collecting step freed, before the run's largest step
        retrieval_results = pipeline.with_scoring_hits(
            retrieval_results,
            storage_of(context).store(),
            context.partition_key,
            settings,
            supports=golden_set.supports,
        )
        art = pipeline.score(settings, golden_set, retrieval_results, judge)
        r = retrieval_results.results
        worst = worst_scores_first(art.scores, headline_columns(settings.k), golden_set.queries)
        meta = {
            # errors, misses and wrong refusals first; the whole table: file/query_scores
            "per_query": _table_metadata(worst),
            "per_query_rows_shown": min(len(worst), TABLE_ROW_LIMIT),
            "rows": len(art.scores),
            "queries_with_issues": int((worst["issue"] != "ok").sum()),
            **_identity_metadata(r.system, golden_set),
        }
        # Which criterion matched the hits, and why matching may score 0 (matching_coverage check).
        meta["match"] = dg.MetadataValue.text(match_line(art.info) or str(settings.match))
        meta["match_by_query"] = dg.MetadataValue.json(art.info.get("match_by_query") or {})
        meta["matching_warnings"] = dg.MetadataValue.json(art.info.get("matching_warnings") or [])
        for warning in art.info.get("matching_warnings") or []:
            context.log.warning(f"matching ({warning['field']}): {warning['message']}")
        if art.info.get("hit_verdicts") is not None:  # source_root configured: hits checked on disk
            meta["hit_verdicts"] = dg.MetadataValue.json(art.info["hit_verdicts"])
        return publish_chain_artifact(context, "query_scores", art, meta, names)

    @_chain_asset(
        names,
        "run_metrics",
        storage_keys,
        code_version=pipeline.METRICS_VERSION,
        # Run metrics need the outcomes and the system's identity of retrieval_results, not its hit,
        # citation or chunk rows: those tables are read without columns (their row counts only).
        deps=_chain_deps(names, "golden_set", "retrieval_results", "query_scores", "judge"),
        description="Aggregate metrics of the run (null for empty denominators), breakdowns by category, "
        "difficulty, language, tag and answerability, and the run report. Gates are checks on this asset.",
    )
    def run_metrics(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        progress.stage("run_metrics")
        settings = chain_settings(context, names)
        golden_set: GoldenArtifact = read_chain_artifact(context, "golden_set", names)
        retrieval_results: RetrievalArtifact = read_chain_artifact(
            context, "retrieval_results", names, columns={table: [] for table in SUMMARY_SKIPS}
        )
        query_scores: QueryScoresArtifact = read_chain_artifact(context, "query_scores", names)
        judge: JudgeArtifact = read_chain_artifact(context, "judge", names)
        role = _run_role(context, settings)
        art = pipeline.summarize(
            context.partition_key, settings, golden_set, retrieval_results, query_scores, judge, role=role
        )
        gates = art.info["gates"]
        headline = pipeline.headline(art.metrics, settings.k)
        # What a person reads first comes first: the UI lists metadata in this order.
        meta = {
            "summary": dg.MetadataValue.md(
                render_run_summary(context.partition_key, art.info, headline, art.denominators, gates)
            ),
            # numeric entries: the asset's Plots tab draws each across run partitions
            **{f"metric/{k}": _number(v) for k, v in headline.items()},
            **{f"gates/{k}": dg.MetadataValue.int(v) for k, v in gate_tally(gates).items()},
            # what the run is, and whether it passed so far: an automatic baseline is a passing run
            # of the same role family
            "role": dg.MetadataValue.text(role.label),
            "role_source": dg.MetadataValue.text(role.source),
            "outcome": dg.MetadataValue.text(
                f"{run_outcome(art.info).label()}: system health and absolute gates "
                "(the regression and verdict gates: comparison_report)"
            ),
            **_identity_metadata(retrieval_results.results.system, golden_set),
            # which system this run evaluated: an automatic baseline is a run of the same one
            "system_identity": dg.MetadataValue.text(system_label(art.info)),
            "metrics": dg.MetadataValue.json({k: v for k, v in art.metrics.items()}),
            "k": dg.MetadataValue.json(settings.k),
            "relevance_level": dg.MetadataValue.int(settings.relevance_level),  # trec_eval -l
            "breakdowns": _table_metadata(headline_breakdowns(art.breakdowns)),
            "report": dg.MetadataValue.md(art.report or ""),
        }
        if "judge" in art.info:  # what pins the judge scores (model digest, prompt version, decoding)
            meta["judge"] = dg.MetadataValue.json(art.info["judge"])
        # the judge measured: against a person's labels, against the golden set, against itself
        for key in ("judge_calibration", "judge_relevance_calibration", "judge_self_consistency"):
            if art.info.get(key):
                meta[key] = dg.MetadataValue.json(art.info[key])
        _not_run_metadata(meta, art.info, retrieval_results.results.system)
        forget_reads(context.run.run_id)  # the golden set's and the results' last reader in the run
        return publish_chain_artifact(context, "run_metrics", art, meta, names)

    @_chain_asset(
        names,
        "comparison_report",
        storage_keys,
        deps=_chain_deps(names, "run_metrics"),
        code_version=COMPARE_VERSION,
        description="This run against its baseline: per-metric deltas, per-query win/loss/regression/draw, "
        "both runs' versions side by side, golden-set drift. No baseline is a note, not a failure.",
    )
    def comparison_report(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        progress.stage("comparison_report")
        settings = chain_settings(context, names)
        run_metrics: RunMetricsArtifact = read_chain_artifact(context, "run_metrics", names)
        try:
            art = pipeline.compare(context.partition_key, settings, storage_of(context).store(), run_metrics)
        except InputError as exc:  # --strict-chunker-version: refuse, saying why
            raise input_failure(exc) from None
        baseline = art.info.get("run_a")
        note = art.info.get("baseline_note") or ""  # a comparison of two systems says so in its note
        context.log.info(note)
        for warning in art.info.get("warnings", []):
            context.log.warning(warning)
        counts = art.info["verdict_counts"]
        headline = pipeline.headline(run_metrics.metrics, settings.k)
        meta = {
            "report": dg.MetadataValue.md(art.markdown),
            "baseline_run": dg.MetadataValue.text(str(baseline)),
            "baseline_note": note,
            # the later runs `previous` passed over (failed, another role family) and why
            "baseline_skipped": dg.MetadataValue.json(art.info.get("baseline_skipped") or []),
            "role": dg.MetadataValue.text(role_of(context.partition_key, run_metrics.info).label),
            # the run's whole outcome: its metrics' part and this comparison's gates
            "outcome": dg.MetadataValue.text(run_outcome(run_metrics.info, art.info).label()),
            "systems": dg.MetadataValue.text(str(art.info.get("systems_note") or "")),
            "chunker_version_match": dg.MetadataValue.text(str(art.info.get("chunker_version_match"))),
            **{f"verdict/{k}": dg.MetadataValue.int(v) for k, v in counts.items()},
            **{f"flip/{k}": dg.MetadataValue.int(v) for k, v in art.info.get("flip_counts", {}).items()},
            "warnings": dg.MetadataValue.json(art.info.get("warnings", [])),
            "versions": dg.MetadataValue.json(
                {"a": art.info.get("versions_a", {}), "b": art.info.get("versions_b", {})}
            ),
            **{
                f"delta/{r.metric}": _number(r.delta)
                for r in art.per_metric.itertuples()
                if r.metric in headline
            },
            **{
                f"p_value/{r.metric}": _number(r.p_value)
                for r in art.per_metric.itertuples()
                if r.metric in headline and not pd.isna(r.p_value)
            },
            # the smallest true change each headline test would find with 80% power (compare/power.py)
            **{
                f"mde/{r.metric}": _number(r.mde)
                for r in art.per_metric.itertuples()
                if r.metric in headline and not pd.isna(getattr(r, "mde", None))
            },
        }
        restriction = art.info.get("golden_restriction")
        if restriction:  # two golden-set versions: the numbers are over the unchanged queries only
            meta["golden/compared_queries"] = dg.MetadataValue.int(restriction["n_compared"])
            meta["golden/dropped_queries"] = dg.MetadataValue.int(restriction["n_dropped"])
            meta["golden_restriction"] = dg.MetadataValue.json(restriction)
        if len(art.per_query):
            # regressions and losses first: the queries a reviewer must look at
            meta["per_query"] = _table_metadata(
                verdicts_worst_first(art.per_query)[
                    ["query_id", "verdict", "a_rank", "b_rank", "note", "refusal_flip", "groundedness_flip"]
                ]
            )
        if art.suspect_gold is not None:
            # b's unjudged hits above its first relevant hit, worst first (compare.suspect_gold)
            meta["suspect_gold/hits"] = dg.MetadataValue.int(len(art.suspect_gold))
            if len(art.suspect_gold):
                meta["suspect_gold"] = _table_metadata(art.suspect_gold[list(SUSPECT_SHOWN)])
        provisional = art.info.get("provisional")
        if provisional:  # unjudged hits labelled by the judge, and by people (compare.provisional)
            meta["provisional"] = dg.MetadataValue.json(provisional)
            agreed = (provisional.get("people") or {}).get("agreement") or {}
            if agreed.get("kappa") is not None:  # the relevance judge against people's labels
                meta["provisional/people_kappa"] = _number(agreed["kappa"])
        _not_run_metadata(meta, art.info)
        return publish_chain_artifact(context, "comparison_report", art, meta, names)

    return ChainAssets(
        names=names,
        golden_file=golden_file,
        system_under_test=system_under_test,
        golden_set=golden_set,
        retrieval_results=retrieval_results,
        judge=judge,
        judge_in_step=judge_in_step,
        query_scores=query_scores,
        run_metrics=run_metrics,
        comparison_report=comparison_report,
    )


@dataclass(frozen=True)
class ChainAssets:
    """One chain's definitions: its two observed inputs and its six partitioned assets."""

    names: ChainNames
    golden_file: dg.AssetsDefinition
    system_under_test: dg.AssetsDefinition
    golden_set: dg.AssetsDefinition
    retrieval_results: dg.AssetsDefinition
    judge: dg.AssetsDefinition  # sharded: a plan step, a step per shard, a collecting step
    query_scores: dg.AssetsDefinition
    run_metrics: dg.AssetsDefinition
    comparison_report: dg.AssetsDefinition
    # the judge in one step, for a chain whose settings have no judge (:meth:`judged`)
    judge_in_step: dg.AssetsDefinition | None = None

    def judged(self, on: bool) -> "ChainAssets":
        """The chain for settings with the judge ``on`` (its sharded judge) or off (the judge in one
        step: a run without a judge pays one step for it, not two). Decided when the definitions
        are built from the config file, as the gate checks are, so the CLI, the UI, ``dagster
        asset materialize`` and every executor's step processes build the same steps."""
        if on or self.judge_in_step is None:
            return self
        return dataclasses.replace(self, judge=self.judge_in_step, judge_in_step=None)

    def asset(self, name: str) -> dg.AssetsDefinition:
        """The chain's asset declared as ``name`` in :data:`~kebab_eval_pipeline.chain.artifacts.STAGES`."""
        return getattr(self, name)

    @property
    def eval_assets(self) -> list[dg.AssetsDefinition]:
        """The chain the job materializes, in order (:data:`~kebab_eval_pipeline.chain.artifacts.STAGES`)."""
        return [self.asset(stage.asset) for stage in STAGES]

    @property
    def source_assets(self) -> list[dg.AssetsDefinition]:
        """The observed inputs (golden file, system under test)."""
        return [self.golden_file, self.system_under_test]


#: The package's own code location's chain (bare keys, ``eval_runs``).
DEFAULT_CHAIN = build_chain_assets(DEFAULT_NAMES)
golden_file = DEFAULT_CHAIN.golden_file
system_under_test = DEFAULT_CHAIN.system_under_test
golden_set = DEFAULT_CHAIN.golden_set
retrieval_results = DEFAULT_CHAIN.retrieval_results
judge = DEFAULT_CHAIN.judge
query_scores = DEFAULT_CHAIN.query_scores
run_metrics = DEFAULT_CHAIN.run_metrics
comparison_report = DEFAULT_CHAIN.comparison_report
EVAL_ASSETS = DEFAULT_CHAIN.eval_assets
SOURCE_ASSETS = DEFAULT_CHAIN.source_assets
