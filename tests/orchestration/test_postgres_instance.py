"""Dagster instance storage in PostgreSQL, configured by the documented docs/deploy/dagster.yaml.

Each test's DAGSTER_HOME holds that file verbatim; only the KEBAB_EVAL_PG_* variables point it at
the test server (tests/postgres.py). Runs and sensors are driven through the real CLIs, in their
own processes, and read back through a fresh DagsterInstance and with plain SQL.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import dagster as dg
import pytest
import yaml
from dagster._core.scheduler.instigation import InstigatorStatus, InstigatorType

from kebab_eval_pipeline.definitions import JOB_NAME
from kebab_eval_pipeline.foundation.location import default_storage_base
from kebab_eval_pipeline.orchestration.partitions import eval_runs
from kebab_eval_pipeline.store.runs import RunStore
from tests.conftest import REPO
from tests.forked_cli import run_cli
from tests.orchestration.test_chain import VERSION_KEYS
from tests.postgres import PG_DB_ENV, PG_ENV, PostgresServer, require_dagster_postgres
from tests.systems.adapters.conftest import stored_metrics
from tests.test_cli import cli, no_traceback

DOCUMENTED = REPO / "docs" / "deploy" / "dagster.yaml"
CODE_LOCATION = ("-m", "kebab_eval_pipeline.definitions")
CHAIN = {"golden_set", "retrieval_results", "judge", "query_scores", "run_metrics", "comparison_report"}


@pytest.fixture
def pg_home(postgres: PostgresServer, tmp_path, monkeypatch) -> Path:
    """A DAGSTER_HOME with docs/deploy/dagster.yaml copied verbatim and KEBAB_EVAL_PG_* set for
    this process and the CLIs it starts."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copyfile(DOCUMENTED, home / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    for name, value in postgres.dagster_env().items():
        monkeypatch.setenv(name, value)
    for name in ("KEBAB_EVAL_CONFIG", "KEBAB_EVAL_STORAGE"):
        monkeypatch.delenv(name, raising=False)
    return home


def no_sqlite(home: Path) -> None:
    """Dagster's default storage is SQLite files under DAGSTER_HOME; none may appear."""
    assert sorted(p.relative_to(home).as_posix() for p in home.rglob("*.db")) == []


def test_documented_config_takes_every_credential_from_the_environment(tmp_path, monkeypatch):
    config = yaml.safe_load(DOCUMENTED.read_text(encoding="utf-8"))
    connection = config["storage"]["postgres"]["postgres_db"]
    assert connection == {
        "hostname": {"env": "KEBAB_EVAL_PG_HOST"},
        "port": {"env": "KEBAB_EVAL_PG_PORT"},
        "username": {"env": "KEBAB_EVAL_PG_USER"},
        "password": {"env": "KEBAB_EVAL_PG_PASSWORD"},
        "db_name": {"env": PG_DB_ENV},
        "scheme": "postgresql+psycopg2",  # the driver the extra installs, whatever SQLAlchemy's default
    }
    # As the file says: a missing variable is an error naming it, never a silent SQLite fallback.
    shutil.copyfile(DOCUMENTED, tmp_path / "dagster.yaml")
    for name in (*PG_ENV, PG_DB_ENV):
        monkeypatch.setenv(name, "1")
    monkeypatch.delenv("KEBAB_EVAL_PG_PASSWORD")
    require_dagster_postgres()  # loading the instance imports it
    with pytest.raises(dg.DagsterInvalidConfigError, match='"KEBAB_EVAL_PG_PASSWORD" which is not set'):
        dg.DagsterInstance.from_config(str(tmp_path))


def test_documented_config_puts_runs_events_and_schedules_in_postgres(pg_home, postgres):
    from dagster_postgres import PostgresEventLogStorage, PostgresRunStorage, PostgresScheduleStorage

    with dg.DagsterInstance.from_config(str(pg_home)) as instance:
        assert isinstance(instance.run_storage, PostgresRunStorage)
        assert isinstance(instance.event_log_storage, PostgresEventLogStorage)
        assert isinstance(instance.schedule_storage, PostgresScheduleStorage)
        # the run queue cap documented beside the storage is the one in force
        documented = yaml.safe_load(DOCUMENTED.read_text(encoding="utf-8"))["concurrency"]["runs"]
        queue = instance.get_concurrency_config().run_queue_config
        assert queue is not None and queue.max_concurrent_runs == documented["max_concurrent_runs"]
        assert type(instance.run_coordinator).__name__ == "QueuedRunCoordinator"
    # Dagster created its tables in the test database, logging in with the password from the env.
    tables = {row[0] for row in postgres.query("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
    assert {"runs", "event_logs", "dynamic_partitions", "jobs", "job_ticks"} <= tables
    no_sqlite(pg_home)


def test_a_cli_run_is_read_back_from_postgres_with_its_metadata(pg_home, postgres):
    key = f"pg-{uuid.uuid4().hex[:10]}"  # unique, so a reused server (CI's) never sees it twice
    proc = cli(dict(os.environ), "run", "--run-id", key)
    no_traceback(proc)
    assert proc.returncode == 0, proc.stderr

    # A new instance, built from the same dagster.yaml: everything below comes out of PostgreSQL.
    with dg.DagsterInstance.from_config(str(pg_home)) as instance:
        assert key in instance.get_dynamic_partitions(eval_runs.name)
        [run] = instance.get_runs(filters=dg.RunsFilter(tags={"dagster/partition": key}))
        assert run.status == dg.DagsterRunStatus.SUCCESS and run.job_name == JOB_NAME
        records = instance.get_records_for_run(
            run.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION
        ).records
        mats = {m.asset_key.path[-1]: m for m in (r.event_log_entry.asset_materialization for r in records)}
        assert set(mats) == CHAIN and {m.partition for m in mats.values()} == {key}
        latest = instance.get_latest_materialization_event(dg.AssetKey("run_metrics"))
        assert latest is not None and latest.run_id == run.run_id

    # The metadata read back equals what the run stored in its Parquet artifacts.
    stored = stored_metrics(RunStore(default_storage_base()), key)
    meta = mats["run_metrics"].metadata
    assert meta["metrics"].value == stored.metrics
    assert 0.0 < meta["metric/mrr"].value <= 1.0 and meta["metric/mrr"].value == stored.metrics["mrr"]
    assert meta["golden_queries"].value == stored.metrics["n_queries"]
    versions = stored.info["versions"]
    for name in VERSION_KEYS:
        assert meta[name].value == ("none" if versions[name] is None else str(versions[name])), name
    assert meta["chunker_version"].value == "md-heading-2:size=800:overlap=0"
    assert f"# Evaluation run `{key}`" in meta["report"].value

    # And PostgreSQL itself holds the rows: the run, its events, the partition.
    assert postgres.query("SELECT status, partition FROM runs WHERE run_id = %s", (run.run_id,)) == [
        ("SUCCESS", key)
    ]
    materialized = postgres.query(
        "SELECT asset_key, partition FROM event_logs"
        " WHERE run_id = %s AND dagster_event_type = 'ASSET_MATERIALIZATION'",
        (run.run_id,),
    )
    assert sorted(materialized) == sorted((dg.AssetKey(name).to_string(), key) for name in CHAIN)
    [(events,)] = postgres.query("SELECT count(*) FROM event_logs WHERE run_id = %s", (run.run_id,))
    assert events > len(CHAIN)  # run start/success, steps, checks, logs besides the materializations
    assert postgres.query(
        "SELECT partition FROM dynamic_partitions WHERE partitions_def_name = %s AND partition = %s",
        (eval_runs.name, key),
    ) == [(key,)]
    no_sqlite(pg_home)


def test_sensor_started_with_the_dagster_cli_is_stored_in_postgres(pg_home, postgres):
    proc = run_cli(  # `dagster sensor start`, forked ready-imported
        ["sensor", "start", "golden_change_sensor", *CODE_LOCATION],
        cwd=pg_home,
        timeout=300,
        module="dagster",
    )
    assert proc.returncode == 0, proc.stderr
    with dg.DagsterInstance.from_config(str(pg_home)) as instance:
        states = [
            s
            for s in instance.all_instigator_state(instigator_type=InstigatorType.SENSOR)
            if s.status == InstigatorStatus.RUNNING
        ]
        try:
            # the golden-change sensor is on; the other sensors stay at their default, stopped
            assert [s.name for s in states] == ["golden_change_sensor"]
            [state] = states
            rows = postgres.query(
                "SELECT status, job_type FROM jobs WHERE job_origin_id = %s", (state.instigator_origin_id,)
            )
            assert rows == [("RUNNING", "SENSOR")]
        finally:
            # the server may be CI's and outlive this test: leave no running sensor behind
            for s in states:
                instance.schedule_storage.delete_instigator_state(s.instigator_origin_id, s.selector_id)
    no_sqlite(pg_home)
