"""Run artifacts as Parquet, one folder per asset per run, written atomically.

Layout under a base path (local folder or any fsspec/UPath URL)::

    {base}/{asset}/{run_id}/_manifest.json          <- written last; the only pointer readers follow
    {base}/{asset}/{run_id}/{attempt}/{table}.parquet
    {base}/{asset}/{run_id}/{attempt}/{file}             <- report files (e.g. comparison.html)

An attempt writes its tables into a fresh folder and only then replaces the
manifest (an atomic rename locally; a single-object PUT on object stores), so
a half-written attempt is never read as complete and a killed run leaves the
previous complete attempt readable. Older attempts are removed afterwards.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from upath import UPath

from kebab_eval_pipeline.errors import InputError, Offender

MANIFEST = "_manifest.json"
RUN_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def check_run_id(run_id: str) -> str:
    """Run ids become folder names and partition keys: letters, digits, ``._-``; ≤128 chars."""
    if not RUN_ID_PATTERN.match(run_id or "") or ".." in run_id:
        raise InputError(
            "invalid run id",
            [Offender("<run id>", f"{run_id!r}: use letters, digits, '.', '_' or '-' (max 128, no '..')")],
        )
    return run_id


def _is_local(path: UPath) -> bool:
    return getattr(path, "protocol", "") in ("", "file", "local")


class ArtifactStore:
    """Reads and writes run artifacts (tables + a JSON ``info`` mapping) under ``base``."""

    def __init__(self, base: str | os.PathLike):
        self.base = UPath(base)

    def __repr__(self) -> str:
        return f"ArtifactStore({str(self.base)!r})"

    def _run_dir(self, asset: str, run_id: str) -> UPath:
        return self.base / asset / check_run_id(run_id)

    def write(
        self,
        asset: str,
        run_id: str,
        tables: dict[str, pd.DataFrame],
        info: dict[str, Any],
        files: dict[str, bytes] | None = None,
    ) -> str:
        """Write one attempt — tables, then any report ``files`` (name → bytes) — and publish it
        by replacing the manifest; returns the attempt id."""
        run_dir = self._run_dir(asset, run_id)
        attempt = datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:8]
        attempt_dir = run_dir / attempt
        attempt_dir.mkdir(parents=True, exist_ok=True)
        for name, frame in tables.items():
            table = pa.Table.from_pandas(frame, preserve_index=False)
            buffer = io.BytesIO()
            pq.write_table(table, buffer)
            (attempt_dir / f"{name}.parquet").write_bytes(buffer.getvalue())
        for name, content in (files or {}).items():
            (attempt_dir / _file_name(name)).write_bytes(content)
        manifest = {
            "asset": asset,
            "run_id": run_id,
            "attempt": attempt,
            "tables": sorted(tables),
            "files": sorted(files or {}),
            "written_at": datetime.now(UTC).isoformat(),
            "info": info,
        }
        payload = json.dumps(manifest, indent=2, sort_keys=True, default=str).encode("utf-8")
        if _is_local(run_dir):
            tmp = Path(str(run_dir / f".{MANIFEST}.{attempt}.tmp"))
            tmp.write_bytes(payload)
            os.replace(tmp, Path(str(run_dir / MANIFEST)))
        else:
            (run_dir / MANIFEST).write_bytes(payload)
        self._remove_other_attempts(run_dir, keep=attempt)
        return attempt

    def _remove_other_attempts(self, run_dir: UPath, keep: str) -> None:
        for child in run_dir.iterdir():
            if child.is_dir() and child.name != keep:
                with contextlib.suppress(OSError):  # best effort: an unreferenced attempt is harmless
                    child.fs.rm(child.path, recursive=True)

    def manifest(self, asset: str, run_id: str) -> dict[str, Any] | None:
        path = self._run_dir(asset, run_id) / MANIFEST
        if not path.exists():
            return None
        return json.loads(path.read_bytes())

    def exists(self, asset: str, run_id: str) -> bool:
        return self.manifest(asset, run_id) is not None

    def read(self, asset: str, run_id: str) -> tuple[dict[str, pd.DataFrame], dict[str, Any]]:
        """The published tables and info of ``asset`` for ``run_id``; InputError when absent."""
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
        attempt_dir = self._run_dir(asset, run_id) / manifest["attempt"]
        tables = {
            name: pq.read_table(io.BytesIO((attempt_dir / f"{name}.parquet").read_bytes())).to_pandas()
            for name in manifest["tables"]
        }
        return tables, manifest["info"]

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
        root = self.base / asset
        if not root.exists():
            return []
        found = []
        for child in root.iterdir():
            if child.is_dir() and (child / MANIFEST).exists():
                found.append(json.loads((child / MANIFEST).read_bytes()))
        return sorted(
            found, key=lambda m: (m.get("info", {}).get("created_at") or m["written_at"], m["run_id"])
        )


def _file_name(name: str) -> str:
    """Report file names are plain names inside the attempt folder (never paths)."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}", name) or ".." in name:
        raise ValueError(f"invalid report file name {name!r}")
    return name


def default_storage_base(configured: str | None = None) -> str:
    """Where artifacts live: the config's ``storage``, else ``$KEBAB_EVAL_STORAGE``, else beside
    the Dagster instance (``$DAGSTER_HOME/kebab-eval/artifacts``), else ``./.kebab-eval/artifacts``.

    Anchoring to ``DAGSTER_HOME`` keeps the CLI, ``dagster dev`` and ``dagster asset materialize``
    reading the same runs whenever they share an instance.
    """
    if configured:
        return configured
    if os.environ.get("KEBAB_EVAL_STORAGE"):
        return os.environ["KEBAB_EVAL_STORAGE"]
    if os.environ.get("DAGSTER_HOME"):
        return str(Path(os.environ["DAGSTER_HOME"]) / "kebab-eval" / "artifacts")
    return str(Path.cwd() / ".kebab-eval" / "artifacts")
