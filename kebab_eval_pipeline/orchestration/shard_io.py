"""Stores the values passed between the steps of a sharded asset as Parquet under the storage base.

A sharded asset's plan, shard and collecting steps (:mod:`kebab_eval_pipeline.chain.shards`) may run on
workers that share no disk, so their values cannot live in Dagster's default ``fs_io_manager``
under the local ``DAGSTER_HOME``: they go where the run's artifacts go (the same base, a local
folder or an fsspec URL such as ``s3://…``)::

    {base}/_shards/{run_id}/{dagster_run_id}/{step_key}/{output}[/{mapping_key}]/{table}.parquet
    {base}/_shards/{run_id}/{dagster_run_id}/{step_key}/{output}[/{mapping_key}]/_value.json

``_value.json`` (the value's type and its ``info``) is written last: a value without it was never
completely written, and reading it fails rather than returning part of it. A retried step writes
its value again over the same names. A run's values are kept after it ends (re-executing a failed
run from its failed step reads them) and removed when a later run of the same run id plans its
shards (:func:`remove_finished_runs`).
"""

from __future__ import annotations

import contextlib
import io
import json

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq
from upath import UPath

from kebab_eval_pipeline.chain.shards import SHARD_TYPES
from kebab_eval_pipeline.foundation import atomic
from kebab_eval_pipeline.foundation.location import is_local, local_path
from kebab_eval_pipeline.foundation.parquet_parts import ParquetParts
from kebab_eval_pipeline.orchestration.run_lock import PARTITION_TAG
from kebab_eval_pipeline.store.frames import table_to_frame

SHARDS_DIR = "_shards"
VALUE_FILE = "_value.json"


def shards_root(base: str) -> UPath:
    """``{base}/_shards`` (a local base as the folder it names, as the artifact store reads it)."""
    root = UPath(local_path(base)) if is_local(base) else UPath(base)
    return root / SHARDS_DIR


def _partition(context) -> str:
    partition = context.step_context.dagster_run.tags.get(PARTITION_TAG)
    if partition is None:
        raise dg.DagsterInvariantViolationError("a sharded asset runs for one run partition")
    return partition


def _folder(base: str, partition: str, identifier) -> UPath:
    folder = shards_root(base) / partition
    for part in identifier:
        folder = folder / str(part)
    return folder


def write_value(folder: UPath, value) -> None:
    """``value`` (a :data:`~kebab_eval_pipeline.chain.shards.SHARD_TYPES` instance) as Parquet tables and
    ``_value.json``, the latter last."""
    tables, info = value.to_tables()
    folder.mkdir(parents=True, exist_ok=True)
    for name, frame in tables.items():
        buffer = io.BytesIO()
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), buffer)
        atomic.write_bytes(folder / f"{name}.parquet", buffer.getvalue())
    doc = {"type": type(value).__name__, "tables": sorted(tables), "info": info}
    atomic.write_bytes(folder / VALUE_FILE, json.dumps(doc, sort_keys=True, default=str).encode("utf-8"))


def read_value(folder: UPath):
    """The value :func:`write_value` stored in ``folder``."""
    doc = json.loads((folder / VALUE_FILE).read_bytes())
    kind = SHARD_TYPES[doc["type"]]
    # Tables a value type leaves in their files (a retrieval shard's hits: the collecting step
    # writes them into the run's table part by part, never holding them all: ParquetParts).
    in_files = getattr(kind, "PARQUET_PARTS", ())
    tables = {}
    for name in doc["tables"]:
        path = folder / f"{name}.parquet"
        if name in in_files:
            tables[name] = ParquetParts.open(path)
        else:
            tables[name] = table_to_frame(pq.read_table(io.BytesIO(path.read_bytes())))
    return kind.from_tables(tables, doc["info"])


class ShardIOManager(dg.ConfigurableIOManager):
    """The values between a sharded asset's steps, as Parquet under ``{base}/_shards`` (see the
    module docstring): readable by any worker that can read the run's artifacts."""

    base: str

    def handle_output(self, context: dg.OutputContext, obj) -> None:
        folder = _folder(self.base, _partition(context), context.get_identifier())
        write_value(folder, obj)
        context.add_output_metadata({"shard_path": dg.MetadataValue.path(str(folder))})

    def load_input(self, context: dg.InputContext):
        upstream = context.upstream_output
        assert upstream is not None  # a shard value is always another step's output
        # the producing run's id: a re-execution reads the values its parent run wrote
        return read_value(_folder(self.base, _partition(context), upstream.get_identifier()))


def remove_finished_runs(base: str, partition: str, keep: str, instance) -> list[str]:
    """Remove the stored shard values of run id ``partition`` written by Dagster runs other than
    ``keep`` that have finished (or that ``instance`` does not know); returns their Dagster run ids.
    A value of a run still in progress is never removed."""
    folder = shards_root(base) / partition
    if not folder.exists():
        return []
    removed = []
    for child in folder.iterdir():
        if not child.is_dir() or child.name == keep:
            continue
        run = instance.get_run_by_id(child.name) if instance is not None else None
        if run is not None and not run.is_finished:
            continue
        with contextlib.suppress(OSError):  # best effort: a leftover folder is harmless
            child.fs.rm(child.path, recursive=True)
            removed.append(child.name)
    return removed
