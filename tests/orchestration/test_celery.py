"""The chain on a distributed executor: dagster-celery with a Redis broker, two Celery worker
processes, the Dagster instance in PostgreSQL and the artifacts in an S3-compatible server — all
real servers on 127.0.0.1 (tests/celery_cluster.py), configured as docs/site/recipes/celery.md says.

Runs are started as an operator would (``dagster asset materialize``, whose process is the run
worker submitting steps to the queue); ``kebab-eval run`` on the same instance and bucket is the
in-process reference the Celery runs must equal.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest
import yaml

from kebab_eval_pipeline.definitions import build_definitions, executor_from_environment
from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.store.runs import RunStore
from tests import docs_pages
from tests.celery_cluster import (
    Worker,
    celery_workers,
    deployment_env,
    deployment_environ,
    redis_server,
    require_celery_extra,
    s3_server,
    write_replay_run,
)
from tests.conftest import echo_golden, write
from tests.postgres import PostgresServer
from tests.test_cli import cli, cli_env, no_traceback

#: The Celery recipe's run (docs/site/recipes/celery.md): its `kebab-eval runs add ID` and its
#: `dagster asset materialize … --partition ID` as written, ID the page's partition.
RUNS_ADD, MATERIALIZE = (
    shlex.split(line) for line in docs_pages.snippet("sh", "dagster asset materialize").text.splitlines()
)
DOCUMENTED_PARTITION = MATERIALIZE[-1]


def test_the_documented_run_commands_are_what_the_tests_run():
    """The page's two lines register and materialize one partition, the whole chain."""
    assert RUNS_ADD == ["kebab-eval", "runs", "add", DOCUMENTED_PARTITION]
    assert MATERIALIZE[:3] == ["dagster", "asset", "materialize"] and MATERIALIZE[-2] == "--partition"
    assert MATERIALIZE[3:-2] == ["-m", "kebab_eval_pipeline.definitions", "--select", "*"]


HOLD_ONE = Path(__file__).parent / "fake_systems" / "cmd_hold_one.py"
WORKERS = 2
#: Queries of the replayed run: enough for every kind of row, few enough for CI.
REPLAY_QUERIES = 1000
#: Columns that differ between any two runs of the same inputs (timings, attempt stamps).
VOLATILE = ("latency", "_ms", "started_at", "finished_at", "written_at", "attempt")


@pytest.fixture(scope="module")
def cluster(postgres: PostgresServer, tmp_path_factory) -> Iterator[dict]:
    """Redis and S3 (moto) for the module; yields the deployment environment. Each test starts its
    own workers: a worker loads the code location from its own environment (KEBAB_EVAL_CONFIG), so
    workers and run worker must be started with the same one, as in any Dagster deployment."""
    home = tmp_path_factory.mktemp("celery-home") / "dagster_home"
    prefix = f"kebab-{uuid.uuid4().hex[:8]}"  # unique: CI's PostgreSQL may outlive the test
    with redis_server() as broker, s3_server() as s3:
        yield {"env": deployment_env(dict(os.environ), home, broker, s3, postgres, prefix=prefix), "s3": s3}


@contextmanager
def _workers(env: dict) -> Iterator[list[Worker]]:
    started = time.monotonic()
    with celery_workers(env, WORKERS) as workers:
        print(f"\n{WORKERS} celery workers ready in {time.monotonic() - started:.1f}s")
        yield workers


def _materialize(env: dict, partition: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", *MATERIALIZE[:-1], partition],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@contextmanager
def _materialize_on_workers(env: dict, partition: str) -> Iterator[tuple[subprocess.Popen, list[Worker]]]:
    """``dagster asset materialize`` of ``partition`` started, then the workers: the run worker's
    start-up (Dagster's CLI, the code location, the instance) overlaps the workers' (10-20 s on a
    loaded two-core machine) instead of following it. Its steps wait in the broker's queue until a
    worker takes them, as in a deployment whose workers come up after a run was submitted. Yields
    (the materialize process, the workers, ready); a process left running at the end is killed."""
    proc = _materialize(env, partition)
    try:
        with _workers(env) as workers:
            yield proc, workers
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def _finish(proc: subprocess.Popen, timeout_s: float = 300) -> str:
    _out, err = proc.communicate(timeout=timeout_s)
    assert proc.returncode == 0, err[-4000:]
    return err


def _events(env: dict, partition: str) -> tuple[dg.DagsterRun, list[dg.DagsterEvent]]:
    """The run of ``partition`` and its events, read from the deployment's instance (PostgreSQL)."""
    with deployment_environ(env), dg.DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
        [run] = instance.get_runs(filters=dg.RunsFilter(tags={"dagster/partition": partition}))
        return run, [r.dagster_event for r in instance.all_logs(run.run_id) if r.dagster_event]


def _stable(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` without what differs between two runs of the same inputs: timing columns, and
    the rows of timing metrics (``metric`` naming a latency) in the summary tables."""
    keep = [c for c in frame.columns if not any(v in c for v in VOLATILE)]
    frame = frame[keep]
    if "metric" in frame.columns:
        names = frame["metric"].astype(str)
        frame = frame[~(names.str.contains("latency") | names.str.contains("_ms"))]
    return frame.reset_index(drop=True)


def _assert_same_tables(store: RunStore, asset: str, celery_run: str, in_process_run: str) -> None:
    a, _ = store.read(asset, celery_run)
    b, _ = store.read(asset, in_process_run)
    assert sorted(a) == sorted(b)
    for name in a:
        left, right = _stable(a[name]), _stable(b[name])
        if "run_id" in left.columns:
            left, right = left.drop(columns="run_id"), right.drop(columns="run_id")
        pd.testing.assert_frame_equal(left, right, check_dtype=True, obj=f"{asset}/{name}")


def _metric_values(store: RunStore, run_id: str) -> dict[str, float]:
    metrics = store.read("run_metrics", run_id)[0]["metrics"]
    return {
        m: float(v)
        for m, v in zip(metrics["metric"], metrics["value"], strict=True)
        if "ms" not in m and not pd.isna(v)
    }


def test_demo_run_on_celery_workers_equals_the_in_process_run(cluster) -> None:
    env, s3 = cluster["env"], cluster["s3"]
    assert cli(env, *RUNS_ADD[1:-1], "cel-demo").returncode == 0
    started = time.monotonic()
    with _materialize_on_workers(env, "cel-demo") as (celery_run, workers):
        # meanwhile the reference: kebab-eval run is always in-process (same instance and bucket)
        reference = cli(env, "run", "--run-id", "inproc-demo")
        err = _finish(celery_run)
        celery_s = time.monotonic() - started
        pool_pids = set().union(*(w.pool_pids() for w in workers))
    assert "RUN_SUCCESS" in err
    no_traceback(reference)
    assert reference.returncode == 0, reference.stderr
    print(f"\ndemo on celery (beside the in-process run), workers' start included: {celery_s:.1f}s wall")

    run, events = _events(env, "cel-demo")
    assert run.status == dg.DagsterRunStatus.SUCCESS
    submitted = {
        e.step_key
        for e in events
        if e.event_type == dg.DagsterEventType.ENGINE_EVENT
        and e.message
        and e.message.startswith("Submitting celery task")
    }
    for asset in ("golden_set", "retrieval_results", "judge", "query_scores", "run_metrics"):
        # an asset's own step, or the steps of a sharded one (retrieval_results.retrieve_shard[…])
        assert any(key == asset or key.startswith(f"{asset}.") for key in submitted), (asset, submitted)
    # each step ran in a Celery pool process, none in the run worker (this materialize process)
    run_pid = next(e.pid for e in events if e.event_type == dg.DagsterEventType.RUN_START)
    step_pids = {e.pid for e in events if e.event_type == dg.DagsterEventType.STEP_SUCCESS}
    assert run_pid not in step_pids and step_pids <= pool_pids, (step_pids, pool_pids)
    paths = [
        e.step_materialization_data.materialization.metadata["storage_path"].value
        for e in events
        if e.event_type == dg.DagsterEventType.ASSET_MATERIALIZATION
    ]
    assert len(paths) == 6 and all(p.startswith(env["KEBAB_EVAL_STORAGE"] + "/") for p in paths)
    # the credentials are in the environment only: not in the run's config, tags or event log
    stored = json.dumps([run.run_config, run.tags]) + "".join(str(e) for e in events)
    assert s3.secret_key not in stored and s3.access_key not in stored

    with deployment_environ(env):
        store = RunStore(env["KEBAB_EVAL_STORAGE"])
        for asset in ("retrieval_results", "query_scores"):
            _assert_same_tables(store, asset, "cel-demo", "inproc-demo")
        values = _metric_values(store, "cel-demo")
        assert values == _metric_values(store, "inproc-demo")
    assert values["mrr"] > 0.5 and values["n_queries"] == 105


def test_a_replayed_run_on_celery_equals_the_in_process_run(cluster, tmp_path) -> None:
    """A generated trace of REPLAY_QUERIES queries (hits at seeded ranks, misses, out-of-scope
    queries, recorded timeouts) scored on the workers and in-process: the same tables. (The 100k
    trace runs in benchmarks/bench_celery_throughput.py --replay 100000.)"""
    config = write_replay_run(tmp_path / "replay", REPLAY_QUERIES)
    env = {**cluster["env"], "KEBAB_EVAL_CONFIG": str(config)}
    assert cli(env, *RUNS_ADD[1:-1], "cel-replay").returncode == 0
    started = time.monotonic()
    with _materialize_on_workers(env, "cel-replay") as (celery_run, _):
        reference = cli(env, "run", "--run-id", "inproc-replay")
        _finish(celery_run)
        took = time.monotonic() - started
        print(f"\nreplay of {REPLAY_QUERIES} queries on celery, workers' start included: {took:.1f}s")
    assert reference.returncode == 0, reference.stderr
    run, _ = _events(env, "cel-replay")
    assert run.status == dg.DagsterRunStatus.SUCCESS
    with deployment_environ(env):
        store = RunStore(env["KEBAB_EVAL_STORAGE"])
        for asset in ("retrieval_results", "query_scores"):
            _assert_same_tables(store, asset, "cel-replay", "inproc-replay")
        values = _metric_values(store, "cel-replay")
        assert values == _metric_values(store, "inproc-replay")
        outcomes = store.read("retrieval_results", "cel-replay")[0]["outcomes"]
    assert len(outcomes) == REPLAY_QUERIES and outcomes["query_id"].is_unique
    assert values["error_rate"] == pytest.approx(0.02) and 0 < values["mrr"] < 1


def _calls(state: Path) -> list[tuple[set[int], str]]:
    """(the caller's ancestor pids, query id) of every call of the held system, in order."""
    lines = (state / "calls.log").read_text().split("\n")
    return [
        ({int(p) for p in pids.split(",")}, query) for pids, query in (line.split() for line in lines if line)
    ]


def _kill_the_held_step(
    state: Path, held: str, workers: list[Worker]
) -> tuple[int, list[tuple[set[int], str]]]:
    """SIGKILL the process that asked for the held query — a Celery pool process; returns its pid
    and the calls made so far."""
    before = _calls(state)
    [caller] = [pids for pids, query in before if query == held]
    pool = set().union(*(w.pool_pids() for w in workers))
    [victim] = caller & pool  # the step runs in a Celery pool process
    os.kill(victim, signal.SIGKILL)
    return victim, before


def test_a_step_whose_worker_process_is_killed_runs_again_without_losing_a_query(cluster, tmp_path) -> None:
    """Twelve queries in three shards of four, each shard its own step: SIGKILL the Celery pool
    process running the second shard after it answered three of its queries, with the fourth held.
    The shard's task goes back on the queue, a worker runs that shard again, whole, and the run ends
    with every query exactly once; the other shards ran once."""
    env = cluster["env"]
    ids = [f"k{i:02d}" for i in range(12)]
    held = "k07"
    golden = echo_golden(tmp_path / "golden.yaml", "kill", ids)
    state = tmp_path / "state"
    state.mkdir()
    argv = [sys.executable, str(HOLD_ONE), str(state), held, "{query_id}", "{k}"]
    config = write(
        tmp_path / "eval.yaml",
        yaml.safe_dump(
            {
                "golden": str(golden),
                "system": {"kind": "command", "search_argv": argv, "timeout_s": 120, "concurrency": 1},
                "answers": False,
                "baseline": "none",
                "shard_queries": 4,
            }
        ),
    )
    run_env = {**env, "KEBAB_EVAL_CONFIG": str(config)}
    assert cli(run_env, *RUNS_ADD[1:-1], "cel-kill").returncode == 0
    started = time.monotonic()
    with _materialize_on_workers(run_env, "cel-kill") as (proc, workers):
        deadline = time.monotonic() + 180
        while not (state / "inside").exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the held query was never asked"
            time.sleep(0.05)
        victim, before = _kill_the_held_step(state, held, workers)
        (state / "release").touch()  # the re-run (and the orphaned command) answer at once
        _finish(proc)
    # mid-shard: the victim asked for k04, k05, k06 (answered) and k07 (held)
    assert [q for pids, q in before if victim in pids] == ["k04", "k05", "k06", "k07"]

    print(f"\nkill test: run finished {time.monotonic() - started:.1f}s after it started")

    run, events = _events(env, "cel-kill")
    assert run.status == dg.DagsterRunStatus.SUCCESS
    shard = "retrieval_results.retrieve_shard[shard_0001]"
    starts = [e.pid for e in events if e.event_type == dg.DagsterEventType.STEP_START and e.step_key == shard]
    successes = [
        e.pid for e in events if e.event_type == dg.DagsterEventType.STEP_SUCCESS and e.step_key == shard
    ]
    # started in the killed process, started again (and finished) in another one
    assert len(starts) == 2 and starts[0] == victim and successes == [starts[1]] != [victim]
    calls = _calls(state)
    # after the kill, the process that re-ran the shard asked for its four queries again (it may
    # have run another shard before or after: a pool process takes step after step)
    again = [q for pids, q in calls[len(before) :] if starts[1] in pids]
    assert [q for q in again if q in ("k04", "k05", "k06", "k07")] == ["k04", "k05", "k06", "k07"]
    asked = [q for _, q in calls]
    for query in ids:  # the other shards' queries once; the killed shard's twice (once per attempt)
        assert asked.count(query) == (2 if query in ("k04", "k05", "k06", "k07") else 1), query
    shard_steps = {
        e.step_key
        for e in events
        if e.event_type == dg.DagsterEventType.STEP_SUCCESS and "retrieve_shard" in (e.step_key or "")
    }
    assert len(shard_steps) == 3
    with deployment_environ(env):
        store = RunStore(env["KEBAB_EVAL_STORAGE"])
        outcomes = store.read("retrieval_results", "cel-kill")[0]["outcomes"]
        scores = store.read("query_scores", "cel-kill")[0]["query_scores"]
    assert sorted(outcomes["query_id"]) == ids and outcomes["error"].isna().all()
    assert sorted(scores["query_id"]) == ids and scores["hit@1"].tolist() == [1.0] * len(ids)


def test_celery_without_a_broker_is_refused_naming_the_variable(monkeypatch, tmp_path) -> None:
    require_celery_extra()
    monkeypatch.setenv("KEBAB_EVAL_EXECUTOR", "celery")
    monkeypatch.delenv("KEBAB_EVAL_CELERY_BROKER", raising=False)
    with pytest.raises(InputError, match="KEBAB_EVAL_CELERY_BROKER"):
        executor_from_environment()
    env = {**cli_env(tmp_path), "KEBAB_EVAL_EXECUTOR": "celery"}
    proc = cli(env, "run")
    assert proc.returncode == 2 and "KEBAB_EVAL_CELERY_BROKER" in proc.stderr
    no_traceback(proc)
    # with a broker the executor is dagster-celery's, wrapped by the run lock
    monkeypatch.setenv("KEBAB_EVAL_CELERY_BROKER", "redis://127.0.0.1:1/0")
    assert build_definitions().executor.name == "celery"


def test_a_python_system_that_ends_its_process_on_celery_keeps_every_row(cluster, tmp_path) -> None:
    """A python system's worker process, started by a Celery pool process, ends with os._exit(0) on
    q3: the step records q3 as a ``process_ended`` row, a new worker answers q4 and q5, and the run
    fails ``system_health`` with every row stored."""
    ids = ["q1", "q2", "q3", "q4", "q5"]
    doc = {
        "golden": str(echo_golden(tmp_path / "golden.yaml", "enders", ids)),
        "system": {
            "kind": "python",
            "callable": "process_enders:Ender",
            "path": [str(Path(__file__).parents[1] / "systems")],
            "args": {"how": "exit0", "on": "q3"},
        },
        "k": [1],
        "baseline": "none",
    }
    env = {**cluster["env"], "KEBAB_EVAL_CONFIG": str(write(tmp_path / "run.yaml", yaml.safe_dump(doc)))}
    assert cli(env, *RUNS_ADD[1:-1], "cel-python").returncode == 0
    with _materialize_on_workers(env, "cel-python") as (proc, workers):
        _out, err = proc.communicate(timeout=300)
        pool_pids = set().union(*(w.pool_pids() for w in workers))
    assert proc.returncode != 0 and "system_health" in err, err[-4000:]
    run, events = _events(env, "cel-python")
    assert run.status == dg.DagsterRunStatus.FAILURE
    step_pids = {e.pid for e in events if e.event_type == dg.DagsterEventType.STEP_SUCCESS}
    assert step_pids <= pool_pids, (step_pids, pool_pids)  # the steps ran on the Celery workers
    with deployment_environ(env):
        tables, _ = RunStore(env["KEBAB_EVAL_STORAGE"]).read("retrieval_results", "cel-python")
    errors = tables["outcomes"].set_index("query_id")["error"]
    assert errors.index.tolist() == ids
    assert errors["q3"] == "process_ended: the python system's process ended: exit code 0 during query q3"
    assert errors.drop("q3").isna().all()
    answered_in = set(tables["hits"]["snippet"].astype(int))
    assert len(answered_in) == 2 and not answered_in & (pool_pids | {proc.pid})  # two workers of its own
