"""SIGKILL a real `dagster asset materialize` inside `retrieval_results` and mid-write, then recover.

The system under test is the command adapter running ``fake_systems/cmd_gated.py``: it answers
deterministically, and on request blocks after a few queries (so the run is provably inside
``retrieval_results`` when killed). A second fault, a kill while the artifact store writes the
retrieval tables, is placed exactly by ``fake_systems/pause_hook`` (a ``sitecustomize`` that
pauses the run at the rename of ``hits.parquet``), so neither kill depends on timing.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest

from kebab_eval_pipeline.chain.artifacts import QueryScoresArtifact, RetrievalArtifact, RunMetricsArtifact
from kebab_eval_pipeline.store.layout import MANIFEST
from kebab_eval_pipeline.store.runs import RunStore
from tests.conftest import write
from tests.forked_cli import start_cli
from tests.orchestration.test_chain import run_partition

FAKES = Path(__file__).parent / "fake_systems"
MATERIALIZE = ["asset", "materialize", "-m", "kebab_eval_pipeline.definitions", "--select", "*"]
CHAIN = ("golden_set", "retrieval_results", "judge", "query_scores", "run_metrics", "comparison_report")
TOPICS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot")
TOPICS += ("golf", "hotel", "india", "juliet", "kilo", "lima")
WAIT_S = 180.0  # generous: a loaded CI machine starts Dagster slowly; a hang still fails


# ---------------------------------------------------------------------------------------------
# Real `dagster asset materialize` processes (also used by test_concurrent_runs.py)


def start_materialize(run_id: str, config: Path, log: Path, **env: str) -> subprocess.Popen:
    """`dagster asset materialize` of the whole chain for one run partition, in its own process
    group, with the code location's config from ``config`` and output to ``log``. The partition
    must be registered already; DAGSTER_HOME (and any other variable) comes from ``os.environ``
    plus ``env``. Forked ready-imported (:func:`tests.forked_cli.start_cli`), unless ``env`` gives
    it a ``sitecustomize`` (the pause hook): that takes a started interpreter."""
    with log.open("wb") as out:
        return start_cli(
            [*MATERIALIZE, "--partition", run_id],
            env={**os.environ, "KEBAB_EVAL_CONFIG": str(config), **env},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            module="dagster",
        )


def log_tail(log: Path, lines: int = 40) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def finish(proc: subprocess.Popen, log: Path) -> None:
    """Wait for a materialize process; fail with the end of its log unless it exited 0."""
    try:
        code = proc.wait(timeout=WAIT_S)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        pytest.fail(f"dagster asset materialize did not finish in {WAIT_S:g} s:\n{log_tail(log)}")
    assert code == 0, f"exit code {code}:\n{log_tail(log)}"


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the process group (no handler runs, nothing is cleaned up) and reap the leader."""
    with contextlib.suppress(ProcessLookupError):  # already gone
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


def wait_for_file(path: Path, proc: subprocess.Popen, log: Path) -> None:
    """Block until ``path`` exists; fail if the process ends first or nothing happens in time."""
    deadline = time.monotonic() + WAIT_S
    while not path.exists():
        if proc.poll() is not None:
            pytest.fail(
                f"the run ended (exit {proc.returncode}) before {path.name} appeared:\n{log_tail(log)}"
            )
        if time.monotonic() > deadline:
            kill_group(proc)
            pytest.fail(f"{path.name} did not appear within {WAIT_S:g} s:\n{log_tail(log)}")
        time.sleep(0.05)


def partition_runs(instance: dg.DagsterInstance, run_id: str) -> list[dg.DagsterRun]:
    """The instance's runs of one partition, oldest first."""
    runs = instance.get_runs(filters=dg.RunsFilter(tags={"dagster/partition": run_id}))
    return sorted(runs, key=lambda r: instance.get_run_record_by_id(r.run_id).create_timestamp)


# ---------------------------------------------------------------------------------------------
# The fake system, its golden set, and what is on disk


def crash_setup(tmp_path: Path) -> tuple[Path, Path]:
    """A 12-query golden set and a run config for ``cmd_gated.py``; returns (config, state dir)."""
    state = tmp_path / "fake-state"
    state.mkdir()
    entries = "".join(
        f"  - id: q{n:02d}\n    query: where is {topic}\n    supports: [{{rel_path: docs/{topic}.md}}]\n"
        for n, topic in enumerate(TOPICS, start=1)
    )
    golden = write(tmp_path / "golden.yaml", f"name: crash-set\nqueries:\n{entries}")
    # -S: the fake needs only the standard library (site's .pth files are a third of each call's start)
    argv = [sys.executable, "-S", str(FAKES / "cmd_gated.py"), str(state), "{query_id}", "{query}", "{k}"]
    config = write(
        tmp_path / "eval.yaml",
        f"golden: {golden}\nanswers: false\nk: [1, 3, 5]\nbaseline: none\ndefault_gates: false\n"
        f"system:\n  kind: command\n  search_argv: {argv!r}\n  timeout_s: 120\n  concurrency: 2\n",
    )
    return config, state


def golden_ids() -> list[str]:
    return [f"q{n:02d}" for n in range(1, len(TOPICS) + 1)]


def expected_mrr() -> float:
    """cmd_gated.py puts the relevant document at rank n % 3 + 1 for query qN."""
    return sum(1 / (n % 3 + 1) for n in range(1, len(TOPICS) + 1)) / len(TOPICS)


def snapshot(base: Path, run_id: str) -> dict[str, str]:
    """sha256 of every file (tables, reports, manifests) stored for ``run_id``, by path."""
    return {
        str(path.relative_to(base)): hashlib.sha256(path.read_bytes()).hexdigest()
        for asset_dir in sorted(base.iterdir())
        if (asset_dir / run_id).is_dir()
        for path in sorted((asset_dir / run_id).rglob("*"))
        if path.is_file()
    }


def leftovers(base: Path, asset: str, run_id: str) -> list[str]:
    """Names in a run folder other than its manifest, the published attempt and lock files
    (empty coordination files that no reader follows)."""
    run_dir = base / asset / run_id
    if not run_dir.is_dir():
        return []
    manifest = RunStore(base).manifest(asset, run_id)
    published = {MANIFEST} | ({manifest["attempt"]} if manifest else set())
    return sorted(p.name for p in run_dir.iterdir() if p.name not in published and p.suffix != ".lock")


def wait_until_gone(pids: list[int]) -> list[int]:
    """Wait (briefly) for processes to exit; returns those still alive."""
    deadline = time.monotonic() + 20
    alive = pids
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = [pid for pid in alive if _alive(pid)]
    return alive


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not yet reaped by its new parent) counts as gone
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(")")[-1].split()[0] == "Z")


def assert_complete_run(store: RunStore, run_id: str) -> pd.DataFrame:
    """A finished run of the crash set: exactly one row per golden query at every stage, scores
    as the fake system's ranks dictate. Returns the stored outcomes."""
    ids = golden_ids()
    retrieval = RetrievalArtifact.from_tables(*store.read("retrieval_results", run_id)).results
    assert sorted(retrieval.outcomes["query_id"]) == ids  # no duplicate, no missing id
    assert retrieval.outcomes["error"].isna().all()
    hits = retrieval.hits
    assert sorted(hits["query_id"].unique()) == ids
    # k = max(k list, mrr_cutoff) = 10 hits per query, ranked 1..10
    assert hits.groupby("query_id")["rank"].apply(list).map(lambda r: r == list(range(1, 11))).all()
    scores = QueryScoresArtifact.from_tables(*store.read("query_scores", run_id)).scores
    assert sorted(scores["query_id"]) == ids
    ranks = scores.set_index("query_id")["first_relevant_rank"]
    assert {q: int(r) for q, r in ranks.items()} == {q: int(q[1:]) % 3 + 1 for q in ids}
    metrics = RunMetricsArtifact.from_tables(*store.read("run_metrics", run_id)).metrics
    assert metrics["n_queries"] == len(ids) and metrics["error_rate"] == 0.0
    assert metrics["mrr"] == pytest.approx(expected_mrr(), abs=1e-4)
    return retrieval.outcomes


# ---------------------------------------------------------------------------------------------


def test_sigkill_in_retrieval_and_mid_write_then_rematerialize(instance, tmp_path):
    config, state = crash_setup(tmp_path)
    base = Path(os.environ["DAGSTER_HOME"]) / "kebab-eval" / "artifacts"  # where both CLIs store
    store = RunStore(base)
    logs = tmp_path / "logs"
    logs.mkdir()

    # Another run, complete, whose files must not change while "r1" is killed and redone.
    defs, other = run_partition(instance, "other", config=config)
    assert other.success
    assert RunStore(defs.resources["artifact_storage"].base).base == store.base
    assert_complete_run(store, "other")
    before = snapshot(base, "other")
    # the chain's assets, and the values between the sharded assets' steps (kept for re-execution)
    assert {path.split("/")[0] for path in before} == {*CHAIN, "_shards"} and len(before) > 15

    instance.add_dynamic_partitions("eval_runs", ["r1"])  # what `kebab-eval runs add r1` does

    # 1. Killed inside retrieval_results: the fake system has answered 4 queries and blocks.
    shutil.rmtree(state / "answered")  # count this run's answers only
    (state / "block_after").write_text("4")
    proc = start_materialize("r1", config, logs / "killed.log")
    try:
        wait_for_file(state / "inside", proc, logs / "killed.log")
    finally:
        kill_group(proc)
    blocked = [int(p.name) for p in (state / "blocked").iterdir()]
    assert wait_until_gone(blocked) == [], "the blocked fake queries outlived the killed run"
    answered_before_kill = {p.name for p in (state / "answered").iterdir()}
    assert 4 <= len(answered_before_kill) < 12

    assert store.exists("golden_set", "r1")  # finished before the kill: complete and published
    for asset in CHAIN[1:]:
        assert not store.exists(asset, "r1"), asset  # nothing half-done reads as complete
        assert leftovers(base, asset, "r1") == [], asset
    assert "r1" not in instance.get_materialized_partitions(dg.AssetKey("retrieval_results"))
    assert [r.status for r in partition_runs(instance, "r1")] == [dg.DagsterRunStatus.STARTED]

    # 2. Re-materialised: completes with exactly one row per query.
    (state / "block_after").unlink()
    proc = start_materialize("r1", config, logs / "redo.log")
    finish(proc, logs / "redo.log")
    outcomes = assert_complete_run(store, "r1")
    for asset in CHAIN:
        assert leftovers(base, asset, "r1") == [], asset
    assert "r1" in instance.get_materialized_partitions(dg.AssetKey("retrieval_results"))
    assert [r.status for r in partition_runs(instance, "r1")][-1] == dg.DagsterRunStatus.SUCCESS
    published = {asset: store.manifest(asset, "r1") for asset in CHAIN}

    # 3. Killed while the artifact store writes retrieval_results: outcomes.parquet is in place,
    # hits.parquet is a finished temporary file about to be renamed, no manifest yet.
    marker = tmp_path / "paused"
    hook_env = {
        "PYTHONPATH": os.pathsep.join(
            filter(None, [str(FAKES / "pause_hook"), os.environ.get("PYTHONPATH")])
        ),
        "KEBAB_TEST_PAUSE_RENAME": f"{base}/retrieval_results/r1/*/hits.parquet",
        "KEBAB_TEST_PAUSE_MARKER": str(marker),
    }
    proc = start_materialize("r1", config, logs / "mid-write.log", **hook_env)
    try:
        wait_for_file(marker, proc, logs / "mid-write.log")
    finally:
        kill_group(proc)
    partial = leftovers(base, "retrieval_results", "r1")
    assert len(partial) == 1, partial  # the unpublished attempt
    written = sorted(p.name for p in (base / "retrieval_results" / "r1" / partial[0]).iterdir())
    assert "outcomes.parquet" in written and "hits.parquet" not in written, written
    assert any(name.startswith(".hits.parquet") and name.endswith(".tmp") for name in written), written
    # Readers still get the previous complete attempt of every asset after retrieval.
    for asset in CHAIN[1:]:
        assert store.manifest(asset, "r1") == published[asset], asset
    pd.testing.assert_frame_equal(assert_complete_run(store, "r1"), outcomes)

    # 4. Re-materialised again: completes, and the killed attempt is cleaned up.
    proc = start_materialize("r1", config, logs / "redo-2.log")
    finish(proc, logs / "redo-2.log")
    redone = assert_complete_run(store, "r1")
    assert store.manifest("retrieval_results", "r1")["attempt"] != published["retrieval_results"]["attempt"]
    for asset in CHAIN:
        assert leftovers(base, asset, "r1") == [], asset
    timing = ["retrieval_ms", "answer_ms"]
    pd.testing.assert_frame_equal(redone.drop(columns=timing), outcomes.drop(columns=timing))
    statuses = [r.status for r in partition_runs(instance, "r1")]
    assert statuses.count(dg.DagsterRunStatus.SUCCESS) == 2 and len(statuses) == 4

    # The other run: the same files, byte for byte.
    assert snapshot(base, "other") == before
