"""Run artifacts as Parquet, one folder per asset per run, written atomically.

Under the storage base (:mod:`.layout`; a local folder or any fsspec/UPath URL), each asset of each
run is ``{asset}/{run_id}/_manifest.json`` — written last, the only pointer readers follow — naming
one attempt folder with the asset's tables (``{table}.parquet``) and report files.

An attempt writes its tables into a fresh folder (each file to a temporary name,
then renamed) and only then replaces the manifest (an atomic rename locally; a
single-object PUT on object stores), so a half-written attempt is never read as
complete and a killed run leaves the previous complete attempt readable. Older
attempts and stray temporary files are removed when the next attempt publishes.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from upath import UPath

from kebab_eval_pipeline.foundation import atomic, cancellation
from kebab_eval_pipeline.foundation.errors import InputError, Offender
from kebab_eval_pipeline.foundation.location import is_local, local_path
from kebab_eval_pipeline.foundation.parquet_parts import ParquetParts
from kebab_eval_pipeline.foundation.run_ids import RUN_ID_PATTERN, check_run_id  # noqa: F401

# defined beside the run ids (no pandas there, for the CLI's checks); importable from here as before
from kebab_eval_pipeline.store.frames import table_to_frame
from kebab_eval_pipeline.store.layout import MANIFEST

_READ_RETRIES = 10  # re-publications of one partition tolerated during a single read


class ArtifactStore:
    """Reads and writes run artifacts (tables + a JSON ``info`` mapping) under ``base``."""

    def __init__(self, base: str | os.PathLike):
        self.base = UPath(base)  # as given: what messages and metadata show
        # Where files are read and written: a local base (a plain path or a file:// URL) as the
        # folder it names (location.local_path: percent-decoded, file://localhost), the same folder
        # the judge cache, run reports and locks use; any other base as the URL.
        self.root = UPath(local_path(base)) if is_local(base) else self.base

    def __repr__(self) -> str:
        return f"ArtifactStore({str(self.base)!r})"

    def _run_dir(self, asset: str, run_id: str) -> UPath:
        return self.root / asset / check_run_id(run_id)

    def write(
        self,
        asset: str,
        run_id: str,
        tables: dict[str, pd.DataFrame | pa.Table | ParquetParts],
        info: dict[str, Any],
        files: dict[str, bytes] | None = None,
        dagster_run_id: str | None = None,
    ) -> str:
        """Write one attempt — tables (DataFrames, or Arrow tables made from them, or the parts of
        one in their files: written as they are), then any report ``files`` (name → bytes) — and publish it
        by replacing the manifest; returns the attempt id. ``dagster_run_id`` (the Dagster run that
        wrote it) is stamped in the manifest, so a process can tell its own results from another's."""
        run_dir = self._run_dir(asset, run_id)
        attempt = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f") + "-" + uuid.uuid4().hex[:8]
        attempt_dir = run_dir / attempt
        # The attempt's lock is held until it is published: clean-up by other writers removes only
        # attempts whose writer is gone (killed or finished and superseded), never one still writing.
        with atomic.locked(run_dir / attempt):
            try:
                self._write_attempt(attempt_dir, tables, files)
            except BaseException:
                # Never published: its files are unreachable (its manifest is the old one), so they
                # go at once — a full disk gets its space back, not only at the next publish.
                with contextlib.suppress(OSError):
                    attempt_dir.fs.rm(attempt_dir.path, recursive=True)
                raise
            manifest = {
                "asset": asset,
                "run_id": run_id,
                "attempt": attempt,
                "tables": sorted(tables),
                "files": sorted(files or {}),
                "written_at": datetime.now(UTC).isoformat(),
                "dagster_run_id": dagster_run_id,
                "info": info,
            }
            payload = json.dumps(manifest, indent=2, sort_keys=True, default=str).encode("utf-8")
            # Publishing and clean-up are serialised per run folder (several writers of one
            # partition: a retried run racing a stale one).
            with atomic.locked(run_dir / MANIFEST):
                # Ctrl-C (cancellation.py): an interrupted run publishes nothing after the moment
                # of the interrupt, so what the CLI reports as stored stays true (see mark()).
                if cancellation.requested():
                    with contextlib.suppress(OSError):  # never published: gone at once
                        attempt_dir.fs.rm(attempt_dir.path, recursive=True)
                    cancellation.check(f"publishing {asset} of run {run_id}")
                atomic.write_bytes(run_dir / MANIFEST, payload)
                self._remove_dead_attempts(run_dir, published=attempt)
        return attempt

    def mark(
        self,
        asset: str,
        run_id: str,
        dagster_run_id: str,
        update: Callable[[dict[str, Any]], Mapping[str, Any]],
    ) -> bool:
        """Merge ``update(info)`` into the ``info`` of the published ``asset`` of ``run_id`` when Dagster
        run ``dagster_run_id`` published it (True); else change nothing (False). Serialised with
        publishing (the manifest's lock): a write racing the mark is either marked or refused."""
        run_dir = self._run_dir(asset, run_id)
        with atomic.locked(run_dir / MANIFEST):
            manifest = self.manifest(asset, run_id)
            if manifest is None or manifest.get("dagster_run_id") != dagster_run_id:
                return False
            info = dict(manifest.get("info") or {})
            manifest["info"] = {**info, **update(info)}
            payload = json.dumps(manifest, indent=2, sort_keys=True, default=str).encode("utf-8")
            atomic.write_bytes(run_dir / MANIFEST, payload)
        return True

    @staticmethod
    def _write_attempt(
        attempt_dir: UPath,
        tables: dict[str, pd.DataFrame | pa.Table | ParquetParts],
        files: dict[str, bytes] | None,
    ) -> None:
        """An attempt's tables and report files, each written atomically into ``attempt_dir``."""
        attempt_dir.mkdir(parents=True, exist_ok=True)
        for name, frame in tables.items():
            buffer = io.BytesIO()
            if isinstance(frame, ParquetParts):  # a sharded run's hits: one shard at a time
                frame.write_parquet(buffer)
            else:
                table = (
                    frame
                    if isinstance(frame, pa.Table)
                    else pa.Table.from_pandas(frame, preserve_index=False)
                )
                pq.write_table(table, buffer)
            atomic.write_bytes(attempt_dir / f"{name}.parquet", buffer.getvalue())
        for name, content in (files or {}).items():
            atomic.write_bytes(attempt_dir / _file_name(name), content)

    def _remove_dead_attempts(self, run_dir: UPath, published: str) -> None:
        """Delete every other attempt whose writer is gone — killed mid-write, or published
        earlier and now superseded — plus stray temporary files. An attempt still being written
        by a live process keeps its folder (its lock is held). Object stores have no locks:
        there only attempts older than ``published`` are removed."""
        local = is_local(run_dir)
        for child in run_dir.iterdir():
            name = child.name
            if name.startswith(".") and name.endswith(".tmp"):
                with contextlib.suppress(OSError):  # a manifest temp of a killed publisher
                    child.fs.rm(child.path)
            if not child.is_dir() or name == published or (not local and name > published):
                continue
            with atomic.held_elsewhere(run_dir / name) as alive:
                if alive:
                    continue
                with contextlib.suppress(OSError):  # best effort: an unreferenced attempt is harmless
                    child.fs.rm(child.path, recursive=True)
                    if local:
                        atomic.lock_file(run_dir / name).unlink(missing_ok=True)

    def manifest(self, asset: str, run_id: str) -> dict[str, Any] | None:
        path = self._run_dir(asset, run_id) / MANIFEST
        if not path.exists():
            return None
        return json.loads(path.read_bytes())

    def exists(self, asset: str, run_id: str) -> bool:
        return self.manifest(asset, run_id) is not None

    def read(
        self,
        asset: str,
        run_id: str,
        columns: Mapping[str, Sequence[str]] | None = None,
        sparse: Collection[str] = (),
        keys: Mapping[str, Collection[str]] | None = None,
    ) -> tuple[dict[str, pd.DataFrame], dict[str, Any]]:
        """The published tables and info of ``asset`` for ``run_id``; InputError when absent.

        ``columns`` names, per table, the only columns to read (those the file holds, in its order;
        ``[]``: none, the rows still counted by the index): a step that needs a few columns of a big
        table — the hits of 100k queries × 100 hits are 10M rows — never decodes the others. A
        table it does not name is read whole. The tables named in ``sparse`` are read without
        their columns that hold no value at all (every row null, by the file's statistics), for
        readers that treat an absent column as all null: a system that reports no paths, lines or
        versions leaves seven such hit columns, 540 MiB of null offsets at 10M hits.

        ``keys`` names, per table, string columns to read as pandas ``Categorical`` straight from
        the file's dictionary pages (:func:`read_frame`): for a reader whose kernels take codes
        (the hits' ``query_id``: 100 hits per query, so 10M strings are 100k distinct values)."""
        manifest = self.manifest(asset, run_id)
        if manifest is None:
            raise InputError(
                f"no stored {asset} for run {run_id!r}",
                [
                    Offender(
                        str(self.base / asset / run_id), "not materialized (or not under this storage path)"
                    )
                ],
            )
        for _ in range(_READ_RETRIES):
            attempt_dir = self._run_dir(asset, run_id) / manifest["attempt"]
            try:
                tables = {
                    name: _read_parquet(
                        attempt_dir / f"{name}.parquet",
                        (columns or {}).get(name),
                        name in sparse,
                        (keys or {}).get(name, ()),
                    )
                    for name in manifest["tables"]
                }
                return tables, manifest["info"]
            except FileNotFoundError:
                # A newer attempt was published (and this one removed) while we read: follow it.
                latest = self.manifest(asset, run_id)
                if latest is None or latest["attempt"] == manifest["attempt"]:
                    raise
                manifest = latest
        raise InputError(
            f"{asset} for run {run_id!r} kept changing while being read",
            [Offender(str(self.base / asset / run_id), f"re-published {_READ_RETRIES} times during a read")],
        )

    def attempt_location(self, asset: str, run_id: str, attempt: str) -> str:
        """Where an attempt's files are, as the base was given (a path or a URL): for metadata."""
        return f"{self.base}/{asset}/{check_run_id(run_id)}/{attempt}"

    def table_path(self, asset: str, run_id: str, table: str) -> str:
        """The Parquet file of one published table (for DuckDB and other readers)."""
        manifest = self.manifest(asset, run_id)
        if manifest is None:
            raise InputError(f"no stored {asset} for run {run_id!r}", [Offender(str(self.base), "missing")])
        return str(self._run_dir(asset, run_id) / manifest["attempt"] / f"{table}.parquet")

    def file_path(self, asset: str, run_id: str, name: str) -> str | None:
        """Where a published report file lives (None when the attempt has no such file)."""
        manifest = self.manifest(asset, run_id)
        if manifest is None or name not in manifest.get("files", []):
            return None
        return str(self._run_dir(asset, run_id) / manifest["attempt"] / _file_name(name))

    def read_file(self, asset: str, run_id: str, name: str) -> bytes:
        """The bytes of a published report file; InputError when absent."""
        path = self.file_path(asset, run_id, name)
        if path is None:
            raise InputError(
                f"no stored {name} for run {run_id!r}",
                [Offender(str(self.base / asset / run_id), f"{asset} has no file {name!r}")],
            )
        return UPath(path).read_bytes()

    def runs(self, asset: str) -> list[dict[str, Any]]:
        """Manifests of every published run of ``asset``, oldest first."""
        root = self.root / asset
        if not root.exists():
            return []
        found = []
        for child in root.iterdir():
            if child.is_dir() and (child / MANIFEST).exists():
                found.append(json.loads((child / MANIFEST).read_bytes()))
        return sorted(
            found, key=lambda m: (m.get("info", {}).get("created_at") or m["written_at"], m["run_id"])
        )


def _read_parquet(
    path: UPath, columns: Sequence[str] | None = None, sparse: bool = False, keys: Collection[str] = ()
) -> pd.DataFrame:
    """One stored table as a DataFrame (only ``columns``, in the file's order, when given).

    A local file is mapped once and only the wanted column chunks are decoded from it: the whole
    file is never decoded (the hits of 100k queries × 100 hits with every column are hundreds of
    MB, of which scoring reads three columns) and, once open, the attempt's removal by a concurrent
    re-publication cannot cut the read short. A remote file (fsspec/UPath URL) is fetched whole,
    then decoded. ``keys``: string columns read as ``Categorical`` (see :func:`read_frame`)."""
    if is_local(str(path)):
        # Memory-mapped: Parquet pages are decoded from the page cache, not copied through a
        # Python file object first (half the system time of a 10M-row read). The mapping holds
        # the file, so a concurrent re-publication removing it cannot cut the read short (files
        # are only ever replaced by rename, never truncated in place).
        with pa.memory_map(os.fspath(local_path(str(path)))) as handle:
            return _read_columns(handle, columns, sparse, keys)
    return _read_columns(pa.BufferReader(path.read_bytes()), columns, sparse, keys)


def _read_columns(
    source: pa.NativeFile, columns: Sequence[str] | None, sparse: bool = False, keys: Collection[str] = ()
) -> pd.DataFrame:
    file = pq.ParquetFile(source)  # the footer only: schema, row groups, statistics
    names = file.schema_arrow.names
    if columns is not None:  # in the file's (the declared) order
        wanted = set(columns)
        names = [c for c in names if c in wanted]
    if sparse:
        empty = null_columns(file.metadata)
        names = [c for c in names if c not in empty]
    keys = [c for c in names if c in set(keys) and _is_text(file.schema_arrow.field(c).type)]
    selected = names if (columns is not None or sparse) else None
    if file.metadata.num_rows == 0:  # nothing to decode: the schema as ParquetFile gives it
        if keys:
            file = pq.ParquetFile(source, read_dictionary=keys)
        return table_to_frame(file.read(columns=selected), categorical=keys)
    return table_to_frame(_scan_row_groups(source, file.metadata, selected, keys), categorical=keys)


def _scan_row_groups(
    source: pa.NativeFile, metadata: pq.FileMetaData, columns: list[str] | None, keys: list[str]
) -> pa.Table:
    """The file's rows (``columns`` only, when given) with one chunk per row group, the row groups
    decoded in parallel; ``keys`` decoded from their dictionary pages into Arrow dictionaries,
    never into a string per row.

    ``ParquetFile.read`` gives the same values but concatenates each column's row groups into one
    buffer: at 10M hit rows fresh 80–170 MB buffers per column, whose first touch (page faults,
    huge pages under Arrow's default mimalloc pool) cost the read 0.6–0.8 s of system time against
    0.05–0.15 s here, where each row group's buffers are a few MB and reused
    (``benchmarks/bench_metrics.py``). The kernels take chunked columns as they are."""
    import pyarrow.dataset as pds  # not imported by runs that never read a stored table

    parquet = pds.ParquetFileFormat(read_options=pds.ParquetReadOptions(dictionary_columns=keys))
    # A batch never spans row groups: a batch as large as the largest one is one chunk per group.
    batch = max(metadata.row_group(i).num_rows for i in range(metadata.num_row_groups))
    return parquet.make_fragment(source).to_table(columns=columns, batch_size=max(batch, 1))


def _is_text(kind: pa.DataType) -> bool:
    return pa.types.is_string(kind) or pa.types.is_large_string(kind)


def null_columns(metadata: pq.FileMetaData) -> set[str]:
    """The top-level, non-nested columns of a Parquet file with rows whose every value is null, by
    the statistics of each row group (a column without statistics in any row group is not one)."""
    if metadata.num_rows == 0:
        return set()
    found = set()
    for i in range(metadata.num_columns):
        path = metadata.schema.column(i).path
        if "." in path:  # a list or struct: its leaf's counts are not the column's rows
            continue
        chunks = [metadata.row_group(g).column(i) for g in range(metadata.num_row_groups)]
        if all(
            c.is_stats_set and c.statistics.has_null_count and c.statistics.null_count == c.num_values
            for c in chunks
        ):
            found.add(path)
    return found


def read_frame(
    source: str | os.PathLike,
    columns: list[str] | None = None,
    *,
    sparse: bool = False,
    keys: Collection[str] = (),
) -> pd.DataFrame:
    """One stored Parquet table (only ``columns``, when given) as the DataFrame that was written.

    ``to_pandas`` keeps a column written with pandas' ``string`` dtype (every declared string
    column of the typed tables) over the Arrow buffers just read — zero-copy, measured at 0.01 s
    for the 10M-row hits of 100k queries × 100 hits — so the cost of a read is Parquet decoding,
    which only reading fewer columns reduces (``benchmarks/bench_metrics_engine.py``). The same
    reader as :meth:`ArtifactStore.read` (columns in the file's order; ``sparse``: without the
    columns that hold no value at all).

    ``keys`` names string columns to read as pandas ``Categorical`` (categories Arrow-backed
    strings, integer codes; a null is code -1) from the file's dictionary pages, without decoding
    a string per row: the hits' ``query_id`` (10M rows, 100k distinct values at 100k queries ×
    100 hits) decoded as strings cost more than the rest of the read
    (``benchmarks/bench_metrics.py``). The metric kernels take such a column's codes directly
    (:func:`kebab_eval_pipeline.metrics.columns.key_codes`); anything else sees the same values.
    A column written in plain pages (the dictionary grew too big) is dictionary-encoded as read.
    """
    return _read_parquet(UPath(os.fspath(source)), columns, sparse, keys)


def _file_name(name: str) -> str:
    """Report file names are plain names inside the attempt folder (never paths)."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}", name) or ".." in name:
        raise ValueError(f"invalid report file name {name!r}")
    return name
