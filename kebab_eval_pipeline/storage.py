"""Run artifacts as Parquet, one folder per asset per run, written atomically.

Layout under a base path (local folder or any fsspec/UPath URL)::

    {base}/{asset}/{run_id}/_manifest.json          <- written last; the only pointer readers follow
    {base}/{asset}/{run_id}/{attempt}/{table}.parquet
    {base}/{asset}/{run_id}/{attempt}/{file}             <- report files (e.g. comparison.html)

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
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from upath import UPath

from kebab_eval_pipeline import atomic
from kebab_eval_pipeline.errors import InputError, Offender

# defined beside the run ids (no pandas there, for the CLI's checks); importable from here as before
from kebab_eval_pipeline.run_ids import RUN_ID_PATTERN, check_run_id  # noqa: F401

MANIFEST = "_manifest.json"
_READ_RETRIES = 10  # re-publications of one partition tolerated during a single read


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
        dagster_run_id: str | None = None,
    ) -> str:
        """Write one attempt — tables, then any report ``files`` (name → bytes) — and publish it
        by replacing the manifest; returns the attempt id. ``dagster_run_id`` (the Dagster run that
        wrote it) is stamped in the manifest, so a process can tell its own results from another's."""
        run_dir = self._run_dir(asset, run_id)
        attempt = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f") + "-" + uuid.uuid4().hex[:8]
        attempt_dir = run_dir / attempt
        # The attempt's lock is held until it is published: clean-up by other writers removes only
        # attempts whose writer is gone (killed or finished and superseded), never one still writing.
        with atomic.locked(run_dir / attempt):
            attempt_dir.mkdir(parents=True, exist_ok=True)
            for name, frame in tables.items():
                table = pa.Table.from_pandas(frame, preserve_index=False)
                buffer = io.BytesIO()
                pq.write_table(table, buffer)
                atomic.write_bytes(attempt_dir / f"{name}.parquet", buffer.getvalue())
            for name, content in (files or {}).items():
                atomic.write_bytes(attempt_dir / _file_name(name), content)
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
                atomic.write_bytes(run_dir / MANIFEST, payload)
                self._remove_dead_attempts(run_dir, published=attempt)
        return attempt

    def _remove_dead_attempts(self, run_dir: UPath, published: str) -> None:
        """Delete every other attempt whose writer is gone — killed mid-write, or published
        earlier and now superseded — plus stray temporary files. An attempt still being written
        by a live process keeps its folder (its lock is held). Object stores have no locks:
        there only attempts older than ``published`` are removed."""
        local = atomic.is_local(run_dir)
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
        for _ in range(_READ_RETRIES):
            attempt_dir = self._run_dir(asset, run_id) / manifest["attempt"]
            try:
                tables = {name: _read_parquet(attempt_dir / f"{name}.parquet") for name in manifest["tables"]}
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


def _read_parquet(path: UPath) -> pd.DataFrame:
    return pq.read_table(io.BytesIO(path.read_bytes())).to_pandas()


def _file_name(name: str) -> str:
    """Report file names are plain names inside the attempt folder (never paths)."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}", name) or ".." in name:
        raise ValueError(f"invalid report file name {name!r}")
    return name


#: fsspec protocols that cannot hold artifacts: read-only ones, and ``memory`` (gone with the process).
_REFUSED_PROTOCOLS = {
    "memory": "an in-memory store: every artifact would vanish when the process exits",
    "http": "read-only over fsspec (http:// cannot be written); use a folder or an object store",
    "https": "read-only over fsspec (https:// cannot be written); use a folder or an object store",
    "github": "read-only (github://); use a folder or an object store",
    "git": "read-only (git://); use a folder or an object store",
    "zip": "an archive, not a store; use a folder or an object store",
    "tar": "read-only (tar://); use a folder or an object store",
    "libarchive": "read-only (libarchive://); use a folder or an object store",
    "reference": "read-only (reference://); use a folder or an object store",
    "data": "read-only (data:); use a folder or an object store",
}
#: Kernel file systems: writing runs there fails mid-run (or writes into the kernel).
_VIRTUAL_ROOTS = (Path("/proc"), Path("/sys"), Path("/dev"))


def storage_problem(value: str, *, check_local: bool = True) -> str | None:
    """Why ``value`` cannot be an artifact base (``storage`` / ``$KEBAB_EVAL_STORAGE``), or None.

    Refused: an empty value; ``memory://`` (artifacts vanish with the process); read-only fsspec
    protocols (``http(s)://`` …); a protocol fsspec does not know; a known one whose library is
    not installed (the message names the package). For a local path or ``file://`` URL (when
    ``check_local``; a relative path is only checked once made absolute): a place under
    ``/proc``, ``/sys`` or ``/dev``, an existing path that is not a folder (``/dev/null``, a file),
    a path below a file, or a folder that cannot be written.
    """
    if not value or not value.strip():
        return "empty: give a folder or a storage URL (or leave the key out for the default)"
    if "\x00" in value:
        return "not a usable path: embedded null byte"
    protocol = value.split("://", 1)[0].lower() if "://" in value else ""
    if protocol in ("", "file", "local"):
        if not check_local:
            return None
        path = Path(value.split("://", 1)[1]) if protocol else Path(value)
        if not path.is_absolute():
            return None if not protocol else f"{value!r}: a file:// URL needs an absolute path"
        return _local_storage_problem(path)
    import fsspec
    from fsspec.registry import known_implementations, registry

    if protocol in _REFUSED_PROTOCOLS:
        return _REFUSED_PROTOCOLS[protocol]
    known = known_implementations.get(protocol)
    if known is None and protocol not in registry:
        return f"unknown storage protocol {protocol + '://'!r} (use a folder, file://, s3://, gs:// …)"
    try:
        fsspec.get_filesystem_class(protocol)
    except ImportError:
        hint = (known or {}).get("err") or f"install the fsspec implementation of {protocol}://"
        return f"{protocol}:// needs a package that is not installed: {hint}"
    except ValueError as exc:
        return f"{protocol}:// cannot be used: {exc}"
    return None


def _local_storage_problem(path: Path) -> str | None:
    try:
        resolved = path.resolve()  # symlinks too: /tmp/x -> /dev/null is /dev/null
    except (OSError, RuntimeError) as exc:
        return f"not a usable path: {exc}"
    for root in _VIRTUAL_ROOTS:
        if resolved == root or root in resolved.parents:
            return f"{resolved} is on the kernel's {root} file system, not storage; use a folder"
    try:  # stat fails with more than "missing": a name past the OS limit, a loop, permissions
        existing = resolved
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        if not existing.is_dir():
            what = "a file" if existing.is_file() else "not a folder (a device, FIFO or socket)"
            where = "is" if existing == resolved else f"is below {existing}, which is"
            return f"{resolved} {where} {what}; storage must be a folder"
    except OSError as exc:
        return f"not a usable path: {exc.strerror or exc}"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"{existing} cannot be written (permission denied)"
    return None


def check_storage(value: str, source: str, field: str = "storage") -> str:
    """``value`` when it can hold artifacts (see :func:`storage_problem`), else InputError naming
    ``source`` and ``field``."""
    problem = storage_problem(value)
    if problem is not None:
        raise InputError(f"unusable {field}", [Offender(source, problem, field=field)])
    return value


def check_storage_reachable(base: str) -> None:
    """Create (or reach) the artifact base ``base`` before a run starts, so a store that cannot be
    reached or written (an unknown host, missing credentials, a read-only mount) fails at once with
    its reason — InputError naming ``storage`` — instead of inside the first step that writes.
    Credentials written in the URL (``scheme://user:secret@host``) are not repeated."""
    try:
        UPath(base).mkdir(parents=True, exist_ok=True)
    except Exception as exc:  # every fsspec backend raises its own: socket, botocore, OSError…
        shown = re.sub(r"//[^/@]*@", "//***@", base)
        reason = re.sub(r"//[^/@\s]*@", "//***@", f"{type(exc).__name__}: {exc}")[:300]
        raise InputError(
            "storage cannot be reached or written",
            [Offender(shown, f"{reason} (checked before the run started)", field="storage")],
        ) from None


def default_storage_base(configured: str | None = None) -> str:
    """Where artifacts live: the config's ``storage`` (checked when the config loaded), else
    ``$KEBAB_EVAL_STORAGE`` (checked here: InputError naming it when unusable), else beside
    the Dagster instance (``$DAGSTER_HOME/kebab-eval/artifacts``), else ``./.kebab-eval/artifacts``.

    Anchoring to ``DAGSTER_HOME`` keeps the CLI, ``dagster dev`` and ``dagster asset materialize``
    reading the same runs whenever they share an instance.
    """
    if configured:
        return configured
    if os.environ.get("KEBAB_EVAL_STORAGE"):  # set but empty counts as unset, like KEBAB_EVAL_CONFIG
        value = probe = os.environ["KEBAB_EVAL_STORAGE"]
        if "://" not in value and value.strip() and "\x00" not in value:
            with contextlib.suppress(RuntimeError):  # "~nobody/x": checked as given
                probe = str(Path(value).expanduser().absolute())  # relative: the working folder's
        check_storage(probe, "$KEBAB_EVAL_STORAGE", field="KEBAB_EVAL_STORAGE")
        return value
    if os.environ.get("DAGSTER_HOME"):
        return str(Path(os.environ["DAGSTER_HOME"]) / "kebab-eval" / "artifacts")
    return str(Path.cwd() / ".kebab-eval" / "artifacts")
