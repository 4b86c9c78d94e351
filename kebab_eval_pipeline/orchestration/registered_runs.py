"""The registered run partitions, read without starting a Dagster instance where that is safe.

``kebab-eval runs list`` needs only the keys of the ``eval_runs`` dynamic partitions. Opening a
Dagster instance for them costs an import of Dagster, SQLAlchemy and Alembic (about a second on
an idle machine, several under load); an instance on Dagster's default SQLite storage keeps them
in one table of ``$DAGSTER_HOME/history/runs/index.db``, read here directly (read-only). Any other
instance (PostgreSQL, a custom storage or instance class, a dagster.yaml that cannot be read) is
asked through Dagster, as is a database whose table is missing or unreadable.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from contextlib import closing
from pathlib import Path

#: The dynamic partitions definition of evaluation runs (one partition per run id).
EVAL_RUNS = "eval_runs"
#: Between a chain's name and a definition's: ``staging__eval_runs`` (orchestration/names.py).
SEPARATOR = "__"


def partitions_name(chain: str | None = None) -> str:
    """The run partitions of the package's own location (``eval_runs``) or of chain ``chain``
    (``staging__eval_runs``)."""
    return f"{chain}{SEPARATOR}{EVAL_RUNS}" if chain else EVAL_RUNS


#: dagster.yaml keys that leave the instance's event log on the default SQLite storage under
#: DAGSTER_HOME; any other key (storage, run_storage, event_log_storage, instance_class, …) may move
#: it, so then Dagster itself is asked.
STORAGE_NEUTRAL_KEYS = frozenset(
    {
        "telemetry",
        "nux",
        "concurrency",
        "run_coordinator",
        "run_launcher",
        "run_monitoring",
        "run_retries",
        "code_servers",
        "sensors",
        "schedules",
        "retention",
        "python_logs",
        "compute_logs",
        "local_artifact_storage",
        "auto_materialize",
        "backfills",
    }
)


def default_sqlite_index(home: Path) -> Path | None:
    """The SQLite index database holding the dynamic partitions of the instance at ``home``, when
    its dagster.yaml (absent, empty or naming only :data:`STORAGE_NEUTRAL_KEYS`) leaves Dagster's
    default storage in place; None otherwise (also when the file cannot be read or parsed)."""
    import yaml

    config = home / "dagster.yaml"
    try:
        doc = yaml.safe_load(config.read_text(encoding="utf-8")) if config.exists() else None
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    if doc is not None and not (isinstance(doc, dict) and set(doc) <= STORAGE_NEUTRAL_KEYS):
        return None
    return home / "history" / "runs" / "index.db"


def read_sqlite_partitions(index: Path, name: str = EVAL_RUNS) -> list[str] | None:
    """Keys of dynamic partitions ``name`` in the SQLite index ``index``, in the order they were
    added (as ``DagsterInstance.get_dynamic_partitions`` returns them); [] when the database does not
    exist yet (nothing registered); None when it cannot be read (no such table, locked, corrupt)."""
    if not index.exists():
        return []
    try:
        # read-only: never create, migrate or lock the instance's database for writers
        with closing(sqlite3.connect(f"{index.as_uri()}?mode=ro", uri=True, timeout=5)) as conn:
            rows = conn.execute(
                "SELECT partition FROM dynamic_partitions WHERE partitions_def_name = ? ORDER BY id",
                (name,),
            ).fetchall()
    except sqlite3.Error:
        return None
    return [row[0] for row in rows]


def registered_runs(home: Path, instance: Callable[[], object], name: str = EVAL_RUNS) -> Sequence[str]:
    """The registered run ids (dynamic partitions ``name``) of the instance at ``home``, in
    registration order: read from its SQLite index when it is on default storage, else from
    ``instance()`` (a DagsterInstance, created only then)."""
    index = default_sqlite_index(home)
    keys = read_sqlite_partitions(index, name) if index is not None else None
    if keys is not None:
        return keys
    return instance().get_dynamic_partitions(name)  # type: ignore[attr-defined]
