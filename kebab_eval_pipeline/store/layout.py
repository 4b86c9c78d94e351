"""Where everything lives under the storage base (a local folder or an fsspec URL)::

    {base}/{asset}/{run_id}/_manifest.json              an asset's published attempt (artifact_store)
    {base}/{asset}/{run_id}/{attempt}/{table}.parquet   its tables
    {base}/{asset}/{run_id}/{attempt}/{file}            its report files (run.md, comparison.html …)
    {base}/_baselines.json                              baseline pins (pins)
    {base}/_run_locks/{run_id}.lock, .json              one writer per run id (local bases only)
    {base}/reports/{run_id}/run.md, comparison.md       the CLI's copies of a run's reports (local only)
    {base}/judge-cache.sqlite                           the LLM judge's reply cache (local bases)

SQLite cannot lock on an object store, so with a remote base the judge cache lives in the user
cache folder (``$XDG_CACHE_HOME`` or ``~/.cache``, ``/kebab-eval/judge-cache.sqlite``); run locks
on a remote base are decided by the Dagster instance's run records instead of files, and report
copies are not written (the stored report files are).
"""

from __future__ import annotations

import os
from pathlib import Path

from kebab_eval_pipeline.foundation.location import is_local, local_path

MANIFEST = "_manifest.json"
PINS_FILE = "_baselines.json"
LOCK_DIR = "_run_locks"
REPORTS_DIR = "reports"
JUDGE_CACHE_FILE = "judge-cache.sqlite"


def local_base(base: str | os.PathLike | None) -> Path | None:
    """The folder a local base names (a plain path or a ``file://`` URL); None for a remote base or
    none at all."""
    if base is None or not str(base) or not is_local(base):
        return None
    return local_path(base)


def lock_folder(base: str | os.PathLike) -> Path:
    """The run locks' folder of a local base."""
    folder = local_base(base)
    if folder is None:
        raise ValueError(f"run lock files need a local storage base, not {base}")
    return folder / LOCK_DIR


def reports_folder(base: str | os.PathLike, run_id: str) -> Path | None:
    """Where the CLI copies a run's reports (None for a remote base: its stored files are the reports)."""
    folder = local_base(base)
    return None if folder is None else folder / REPORTS_DIR / run_id


def judge_cache_path(base: str | os.PathLike | None) -> Path:
    """Where the judge cache lives for a storage base: ``<base>/judge-cache.sqlite`` when the base is
    a local folder (a plain path or a ``file://`` URL); otherwise (no base, or an object store such
    as ``s3://``, where SQLite cannot lock) the user cache folder, ``$XDG_CACHE_HOME`` or
    ``~/.cache``, ``/kebab-eval/judge-cache.sqlite``."""
    folder = local_base(base)
    if folder is not None:
        return folder / JUDGE_CACHE_FILE
    home_cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(home_cache) / "kebab-eval" / JUDGE_CACHE_FILE
