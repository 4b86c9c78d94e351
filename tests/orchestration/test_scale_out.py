"""Scale-out with Dagster's own machinery (SPEC §11): the multiprocess executor with a concurrency
limit writing artifacts to a second base path given as a ``file://`` URL, and the
``kebab_eval_system`` concurrency pool that keeps parallel runs from overloading the system under
test. Real ``dagster`` processes on one SQLite instance."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest
import yaml

from kebab_eval_pipeline.chain import pipeline
from kebab_eval_pipeline.chain.settings import load_settings
from kebab_eval_pipeline.definitions import build_definitions, executor_from_environment
from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.orchestration.assets import SYSTEM_POOL
from kebab_eval_pipeline.store.runs import RunStore
from tests.conftest import echo_golden, write
from tests.forked_cli import run_cli, start_cli
from tests.test_cli import cli, env, no_traceback

assert env  # the fixture, imported for this module's tests

MATERIALIZE = ["asset", "materialize", "-m", "kebab_eval_pipeline.definitions", "--select", "*"]
HELD = Path(__file__).parent / "fake_systems" / "cmd_held.py"
CHAIN = ("golden_set", "retrieval_results", "judge", "query_scores", "run_metrics", "comparison_report")
FIRST_SHARD = "retrieval_results.retrieve_shard[shard_0000]"
RETRIEVAL_STEPS = ("retrieval_results.plan_retrieval", FIRST_SHARD, "retrieval_results.collect_retrieval")
LOGGED = Path(__file__).parent / "fake_systems" / "cmd_logged.py"


def _materialize(env: dict, partition: str, select: str = "*", **extra: str) -> subprocess.Popen:
    """`dagster asset materialize` of one run partition, forked ready-imported
    (:func:`tests.forked_cli.start_cli`)."""
    return start_cli(
        [*MATERIALIZE[:-1], select, "--partition", partition],
        env={**env, **extra},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        module="dagster",
    )


def _finish(proc: subprocess.Popen) -> str:
    _out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    return err


def _run_of(instance: dg.DagsterInstance, partition: str) -> dg.DagsterRun:
    [run] = instance.get_runs(filters=dg.RunsFilter(tags={"dagster/partition": partition}))
    return run


def _metric_values(store: RunStore, run_id: str) -> dict[str, float]:
    metrics = store.read("run_metrics", run_id)[0]["metrics"]
    # latencies differ between any two runs; everything else is a function of the hits
    return {
        m: float(v)
        for m, v in zip(metrics["metric"], metrics["value"], strict=True)
        if "ms" not in m and not pd.isna(v)
    }


def test_multiprocess_executor_with_a_limit_writes_to_a_file_url_base(env, tmp_path: Path) -> None:
    env = {**env, "KEBAB_EVAL_INDEX_CACHE": os.environ["KEBAB_EVAL_INDEX_CACHE"]}  # the session's index
    second_base = tmp_path / "second-base"
    url = second_base.as_uri()
    assert url.startswith("file:///")
    assert cli(env, "runs", "add", "mp-1").returncode == 0
    err = _finish(
        _materialize(
            env,
            "mp-1",
            KEBAB_EVAL_EXECUTOR="multiprocess",
            KEBAB_EVAL_MAX_CONCURRENT="2",
            KEBAB_EVAL_STORAGE=url,
        )
    )
    assert "RUN_SUCCESS" in err

    with dg.DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
        run = _run_of(instance, "mp-1")
        assert run.status == dg.DagsterRunStatus.SUCCESS
        events = [r.dagster_event for r in instance.all_logs(run.run_id) if r.dagster_event]
    workers = {e.step_key for e in events if e.event_type == dg.DagsterEventType.STEP_WORKER_STARTED}
    # every step (and the checks' step) in a process of its own;
    # the sharded asset's steps are its graph's ops (one shard here); the config has no judge: the
    # judge is one step
    assert workers == {
        *(name for name in CHAIN if name != "retrieval_results"),
        *RETRIEVAL_STEPS,
        # the gates and system health, the judge's spot check and the scores' matching coverage:
        # every check in one step (none of the scoring checks blocks: checks.JOINED)
        "ship_gates",
        "run_ranking",  # selected by '*', runs and materializes nothing without run ids
        "regression_bisect",  # likewise without a metric
        "golden_health",  # likewise inside a run partition (the golden set's health is its own)
    }
    step_pids = {e.pid for e in events if e.event_type == dg.DagsterEventType.STEP_SUCCESS}
    run_pid = next(e.pid for e in events if e.event_type == dg.DagsterEventType.RUN_START)
    assert len(step_pids) == len(workers) and run_pid not in step_pids
    materialized = {
        e.asset_key.path[-1]: e.step_materialization_data.materialization.metadata["storage_path"].value
        for e in events
        if e.event_type == dg.DagsterEventType.ASSET_MATERIALIZATION
    }
    assert set(materialized) == set(CHAIN)
    assert all(path.startswith(f"{url}/") for path in materialized.values())

    # the same artifacts through the URL and the plain folder; equal to the chain's functions
    # called directly in this process (no Dagster, no executor)
    assert (second_base / "run_metrics" / "mp-1" / "_manifest.json").is_file()
    by_url, by_path = RunStore(url), RunStore(second_base)
    default = RunStore(Path(env["DAGSTER_HOME"]) / "kebab-eval" / "artifacts")
    assert not default.exists("run_metrics", "mp-1")
    values = _metric_values(by_url, "mp-1")
    assert values == _metric_values(by_path, "mp-1")
    settings = load_settings(None)
    golden = pipeline.load_golden_artifact(settings)
    retrieval = pipeline.retrieve(settings, golden)
    expected = pipeline.summarize(
        "direct", settings, golden, retrieval, pipeline.score(settings, golden, retrieval)
    )
    assert values == {m: v for m, v in expected.metrics.items() if "ms" not in m and v is not None}
    assert values["mrr"] > 0 and values["n_queries"] > 10
    exported = cli({**env, "KEBAB_EVAL_STORAGE": url}, "export", "mp-1", "--format", "json")
    assert exported.returncode == 0 and '"run_id": "mp-1"' in exported.stdout


@pytest.mark.parametrize(
    ("kind", "limit", "named"),
    [("threads", None, "KEBAB_EVAL_EXECUTOR"), ("multiprocess", "0", "KEBAB_EVAL_MAX_CONCURRENT")],
)
def test_bad_executor_settings_are_named(monkeypatch, env, kind, limit, named) -> None:
    monkeypatch.setenv("KEBAB_EVAL_EXECUTOR", kind)
    if limit is not None:
        monkeypatch.setenv("KEBAB_EVAL_MAX_CONCURRENT", limit)
    with pytest.raises(InputError, match=named):
        executor_from_environment()
    proc = cli({**env, "KEBAB_EVAL_EXECUTOR": kind, "KEBAB_EVAL_MAX_CONCURRENT": limit or "1"}, "run")
    assert proc.returncode == 2 and named in proc.stderr
    no_traceback(proc)


def test_executor_defaults_and_limit(monkeypatch) -> None:
    monkeypatch.delenv("KEBAB_EVAL_EXECUTOR", raising=False)
    executor = build_definitions().executor
    # the in-process executor, wrapped so the run worker holds the run id's lock (one writer per run)
    assert executor.name == "in_process" and executor.config_schema is dg.in_process_executor.config_schema
    monkeypatch.setenv("KEBAB_EVAL_EXECUTOR", "multiprocess")
    monkeypatch.setenv("KEBAB_EVAL_MAX_CONCURRENT", "3")
    executor = executor_from_environment()
    assert executor.name == "multiprocess" and executor is not dg.multiprocess_executor  # configured


def _held_config(folder: Path, golden: Path) -> Path:
    folder.mkdir(parents=True)
    return write(
        folder / "eval.yaml",
        yaml.safe_dump(
            {
                "golden": str(golden),
                "system": {
                    "kind": "command",
                    "search_argv": [sys.executable, str(HELD), str(folder), "{query_id}", "{k}"],
                    "timeout_s": 120,
                    "concurrency": 2,
                },
                "answers": False,
                "baseline": "none",
            }
        ),
    )


def test_pool_limit_serialises_calls_to_the_system_under_test(env, tmp_path: Path) -> None:
    """With ``kebab_eval_system`` limited to 1, run B's retrieval waits (Dagster logs it as blocked)
    until run A's retrieval shard is done, although both runs are in progress at once."""
    ids = ["p1", "p2", "p3"]
    golden = echo_golden(tmp_path / "golden.yaml", "held", ids)
    cfg_a, cfg_b = _held_config(tmp_path / "a", golden), _held_config(tmp_path / "b", golden)
    (tmp_path / "b" / "release").touch()  # B answers at once — when it is let in
    for partition in ("pool-a", "pool-b"):
        assert cli(env, "runs", "add", partition).returncode == 0
    limit = run_cli(["instance", "concurrency", "set", SYSTEM_POOL, "1"], env=env, module="dagster")
    assert limit.returncode == 0, limit.stderr

    run_a = _materialize(env, "pool-a", KEBAB_EVAL_CONFIG=str(cfg_a))
    deadline = time.monotonic() + 120
    while not (tmp_path / "a" / "inside").exists():
        assert run_a.poll() is None and time.monotonic() < deadline, "run A never reached the system"
        time.sleep(0.05)
    run_b = _materialize(env, "pool-b", KEBAB_EVAL_CONFIG=str(cfg_b))
    with dg.DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
        blocked = False
        while not blocked:
            assert run_b.poll() is None and time.monotonic() < deadline, "run B was never blocked"
            runs = instance.get_runs(filters=dg.RunsFilter(tags={"dagster/partition": "pool-b"}))
            blocked = bool(runs) and any(
                f"blocked by limit for pool {SYSTEM_POOL}" in (r.message or "")
                for r in instance.all_logs(runs[0].run_id)
            )
            time.sleep(0.2)
        assert not (tmp_path / "b" / "inside").exists()  # B has not called its system yet
        (tmp_path / "a" / "release").touch()
        _finish(run_a)
        _finish(run_b)

        def step_times(partition: str, step: str) -> dict[str, float]:
            logs = instance.all_logs(_run_of(instance, partition).run_id)
            return {
                r.dagster_event.event_type_value: r.timestamp
                for r in logs
                if r.dagster_event and r.dagster_event.step_key == step
            }

        a = step_times("pool-a", FIRST_SHARD)
        b = step_times("pool-b", "retrieval_results.plan_retrieval")  # B's first step in the pool
    assert b["STEP_START"] >= a["STEP_SUCCESS"]
    for run_id in ("pool-a", "pool-b"):
        store = RunStore(Path(env["DAGSTER_HOME"]) / "kebab-eval" / "artifacts")
        scores = store.read("query_scores", run_id)[0]["query_scores"]
        assert sorted(scores["query_id"]) == ids and scores["hit@1"].tolist() == [1.0, 1.0, 1.0]


def _inside(state: Path) -> list[tuple[float, float]]:
    """(enter, exit) of every call of ``cmd_logged.py`` that logged into ``state``."""
    spans = []
    for log in state.glob("*.log"):
        times = dict(line.split() for line in log.read_text().splitlines())
        spans.append((float(times["enter"]), float(times["exit"])))
    return sorted(spans)


def test_pool_limit_holds_across_the_shards_of_one_run(env, tmp_path: Path) -> None:
    """One run in two shards on the multiprocess executor: the executor starts the shards side by
    side (Dagster logs the ones the pool holds back), and with ``kebab_eval_system`` limited to 1
    no two calls to the system under test overlap; every query still has its row."""
    ids = ["s1", "s2"]
    golden = echo_golden(tmp_path / "golden.yaml", "sharded", ids)
    state = tmp_path / "state"
    state.mkdir()
    config = write(
        tmp_path / "eval.yaml",
        yaml.safe_dump(
            {
                "golden": str(golden),
                "system": {
                    "kind": "command",
                    "search_argv": [sys.executable, str(LOGGED), str(state), "{query_id}"],
                    "timeout_s": 60,
                    "concurrency": 1,
                },
                "answers": False,
                "baseline": "none",
                "shard_queries": 1,
            }
        ),
    )
    with dg.DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:  # no CLI processes: cheaper
        instance.add_dynamic_partitions("eval_runs", ["sharded"])
        instance.event_log_storage.set_concurrency_slots(SYSTEM_POOL, 1)
    _finish(
        _materialize(
            env,
            "sharded",
            "golden_set,retrieval_results",  # the rest of the chain proves nothing more here
            KEBAB_EVAL_CONFIG=str(config),
            KEBAB_EVAL_EXECUTOR="multiprocess",
            KEBAB_EVAL_MAX_CONCURRENT="2",
        )
    )
    spans = _inside(state)
    assert len(spans) == len(ids)
    assert all(later[0] >= earlier[1] for earlier, later in itertools.pairwise(spans)), spans  # one at a time
    with dg.DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
        run = _run_of(instance, "sharded")
        logs = instance.all_logs(run.run_id)
    shard_steps = {
        r.dagster_event.step_key: r.dagster_event.pid
        for r in logs
        if r.dagster_event
        and r.dagster_event.event_type == dg.DagsterEventType.STEP_SUCCESS
        and r.dagster_event.step_key.startswith("retrieval_results.retrieve_shard[")
    }
    assert len(shard_steps) == len(ids) and len(set(shard_steps.values())) == len(ids)  # a process each
    held_back = {
        r.step_key
        for r in logs
        if f"blocked by limit for pool {SYSTEM_POOL}" in (r.message or "") and r.step_key
    }
    assert held_back & set(shard_steps)  # launched side by side: the pool, not the executor, serialised
    store = RunStore(Path(env["DAGSTER_HOME"]) / "kebab-eval" / "artifacts")
    outcomes = store.read("retrieval_results", "sharded")[0]["outcomes"]
    assert outcomes["query_id"].tolist() == ids and outcomes["error"].isna().all()
    assert outcomes["n_hits"].tolist() == [1] * len(ids)
