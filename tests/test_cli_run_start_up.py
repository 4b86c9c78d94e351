"""How ``kebab-eval run`` treats the process it runs in: the instance's SQLite files
(``cli/instance_sqlite.py``) and Python's cyclic collector (``cli/run.py``).

Real files, a real Dagster instance and a real run; nothing timed (speed is measured in
``benchmarks/``): what is checked is the state each leaves behind.
"""

from __future__ import annotations

import gc
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest
from sqlalchemy import create_engine, text

from kebab_eval_pipeline.cli.instance_sqlite import files_kept_open
from kebab_eval_pipeline.foundation.errors import InputError
from tests.test_cli import cli_env

OBSERVED = dg.AssetKey("observed")


def _journal_mode(path: Path) -> str:
    with sqlite3.connect(path) as connection:
        return connection.execute("PRAGMA journal_mode").fetchone()[0]


def _instance_files(home: Path) -> list[Path]:
    return sorted(p for p in home.rglob("*") if p.suffix in (".db", ".db-wal", ".db-shm", ".db-journal"))


def test_the_instance_files_are_kept_open_in_wal_mode_and_let_go_after(tmp_path):
    home, elsewhere = tmp_path / "home", tmp_path / "elsewhere"
    home.mkdir()
    elsewhere.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n", encoding="utf-8")
    other = elsewhere / "other.db"
    with files_kept_open(home):
        instance = dg.DagsterInstance.from_config(str(home))
        for n in range(3):
            instance.report_runless_asset_event(dg.AssetObservation(OBSERVED, metadata={"n": n}))
        index = home / "history" / "runs" / "index.db"
        # Dagster's connections are closed after each event; ours keeps the log in place
        assert index.with_name("index.db-wal").exists()
        # a SQLite file outside the Dagster home is left as SQLAlchemy opens it
        engine = create_engine(f"sqlite:///{other}")
        with engine.connect() as connection:
            connection.execute(text("CREATE TABLE t (x INTEGER)"))
            connection.commit()
            assert connection.execute(text("PRAGMA synchronous")).scalar() == 2  # FULL, untouched
        engine.dispose()
    assert _journal_mode(other) == "delete"
    files = _instance_files(home)
    assert [p.name for p in files if p.suffix != ".db"] == []  # logs checkpointed and removed
    assert {p.name for p in files} >= {"index.db", "runs.db", "schedules.db"}
    for path in files:
        assert _journal_mode(path) == "wal", path
        with sqlite3.connect(path) as connection:
            assert connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok", path
    # everything written is there for the next process (the UI, another run)
    fresh = dg.DagsterInstance.from_config(str(home))
    values = [
        r.asset_observation.metadata["n"].value
        for r in fresh.fetch_observations(OBSERVED, limit=10).records
        if r.asset_observation is not None
    ]
    assert sorted(values) == [0, 1, 2]


def test_a_refused_run_gives_the_collector_back(tmp_path, monkeypatch):
    from kebab_eval_pipeline.cli.run import run_partition

    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    assert gc.isenabled()
    with pytest.raises(InputError):
        run_partition(None, {"golden": str(tmp_path / "missing.yaml")}, "refused-1")
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0


#: A demo run through the console script's ``main`` in this process; prints the collector's state
#: after it and what the instance's folder holds.
PROBE = """
import gc, json, os, sys
from pathlib import Path
from kebab_eval_pipeline import cli
sys.argv = ["kebab-eval", "run", "--run-id", "start-up-1"]
try:
    cli.main()
    code = 0
except SystemExit as exc:
    code = 0 if exc.code is None else exc.code
home = Path(os.environ["DAGSTER_HOME"])
sys.stdout.flush()
print("\\n" + json.dumps({
    "code": code,
    "enabled": gc.isenabled(),
    "frozen": gc.get_freeze_count(),
    "files": sorted(str(p.relative_to(home)) for p in home.rglob("*.db*")),
}))
"""


def test_a_demo_run_leaves_the_collector_as_it_was_and_no_open_logs(tmp_path):
    env = cli_env(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["code"] == 0, proc.stderr
    assert "report:" in proc.stdout  # a real run, reported
    assert result["enabled"] is True and result["frozen"] == 0
    files = result["files"]
    assert "history/runs.db" in files and "history/runs/index.db" in files
    assert not [f for f in files if not f.endswith(".db")], files
    home = Path(env["DAGSTER_HOME"])
    assert all(_journal_mode(home / f) == "wal" for f in files)
    instance = dg.DagsterInstance.from_config(str(home))
    (run,) = instance.get_runs()
    assert run.status == dg.DagsterRunStatus.SUCCESS
    assert len(instance.get_records_for_run(run.run_id, limit=1000).records) > 50  # every event stored
