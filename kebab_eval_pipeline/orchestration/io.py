"""Stores every asset's value as Parquet per partition in the run store (:mod:`kebab_eval_pipeline.store`)."""

from __future__ import annotations

import json

import dagster as dg

from kebab_eval_pipeline.chain.artifacts import ARTIFACT_TYPES, STAGES
from kebab_eval_pipeline.foundation.errors import RunInProgress
from kebab_eval_pipeline.orchestration import run_context, run_lock
from kebab_eval_pipeline.orchestration.failures import run_in_progress_failure
from kebab_eval_pipeline.store.runs import RunStore

#: The chain's artifacts read by several steps of a run (``read_once`` in its declaration): read once
#: per run and process (:func:`.run_context.read_once`), let go once run_metrics, their last reader,
#: has run.
READ_ONCE = tuple(s.asset for s in STAGES if s.read_once)


def _location(path: str) -> dg.MetadataValue:
    """A stored file as UI metadata: a copyable path on disk, a link when it lives behind a URL."""
    scheme = path.split("://", 1)[0] if "://" in path else ""
    if scheme in ("http", "https"):
        return dg.MetadataValue.url(path)
    return dg.MetadataValue.path(path)


def write_artifact(base: str, asset: str, partition: str, obj, dagster_run, instance) -> dict:
    """Write artifact ``obj`` of ``asset`` for run id ``partition`` atomically under
    ``base/{asset}/{run_id}/``, stamped with ``dagster_run``, after checking that run owns the
    partition (:mod:`run_lock`: one writer per run id; a live other owner is refused,
    RunInProgress as a failure). Returns the metadata that locates what was written (the stored
    folder, each table's Parquet file, each rendered report file). Every write of a chain
    artifact goes through here: the assets that publish their artifact themselves and the IO
    manager alike."""
    store = RunStore(base)
    try:
        run_lock.verify(base, partition, run_lock.owner_of(dagster_run), instance)
    except RunInProgress as exc:
        raise run_in_progress_failure(exc) from None
    attempt, tables, files = store.write_artifact(asset, partition, obj, dagster_run_id=dagster_run.run_id)
    folder = store.attempt_location(asset, partition, attempt)
    meta: dict = {"storage_path": folder}
    for name in files:
        # e.g. report_html → .../comparison_report/<run>/<attempt>/comparison.html
        meta[f"report_{name.rsplit('.', 1)[-1]}"] = _location(f"{folder}/{name}")
    for name in tables:
        # The whole table (the UI shows at most the first rows): file/query_scores → …parquet
        meta[f"file/{name}"] = _location(f"{folder}/{name}.parquet")
    return meta


def read_artifact(
    base: str, asset_path: tuple[str, ...], partition: str, dagster_run_id: str, columns: dict | None = None
):
    """The artifact of the asset at ``asset_path`` (its last part names the chain's asset) for run id
    ``partition``, read from the run store — with only ``columns`` of the tables it names
    (``{"hits": []}`` reads no hit rows). An artifact several steps read (``read_once``) is read once
    per Dagster run and process (:func:`.run_context.read_once`)."""
    asset = asset_path[-1]

    def read():
        tables, info = RunStore(base).read(asset, partition, columns=columns)
        return ARTIFACT_TYPES[asset].from_tables(tables, info)

    if asset not in READ_ONCE:
        return read()
    # the golden set and the retrieval results have several readers in a run: read once each
    key = (base, tuple(asset_path), json.dumps(columns, sort_keys=True))
    return run_context.read_once(dagster_run_id, partition, key, read)


class ArtifactIOManager(dg.ConfigurableIOManager):
    """Writes ``(tables, info)`` of an artifact atomically under ``base/{asset}/{run_id}/``, stamped
    with the Dagster run that wrote it, after checking that run owns the partition (:mod:`run_lock`):
    :func:`write_artifact`. The chain's assets write their artifact themselves (:func:`write_artifact`,
    no output value: fewer events per run); the IO manager reads one back for a definition outside
    the chain that takes a chain asset as an input."""

    base: str

    def _store(self) -> RunStore:
        return RunStore(self.base)

    def handle_output(self, context: dg.OutputContext, obj) -> None:
        step = context.step_context
        meta = write_artifact(
            self.base,
            context.asset_key.path[-1],
            context.asset_partition_key,
            obj,
            step.dagster_run,
            step.instance,
        )
        context.add_output_metadata(meta)

    def load_input(self, context: dg.InputContext):
        # An input declared with metadata {"columns": {table: [column, ...]}} reads only those
        # columns of those tables (a step that needs few columns of the 10M hit rows).
        columns = (context.definition_metadata or {}).get("columns")
        return read_artifact(
            self.base,
            tuple(context.asset_key.path),
            context.asset_partition_key,
            context.step_context.run_id,
            columns,
        )
