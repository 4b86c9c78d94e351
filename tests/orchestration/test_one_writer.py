"""One writer per run id: two runs of the same partition at once — two `kebab-eval run` processes,
or `dagster asset materialize` against `kebab-eval run` — end with exactly one winner, whose numbers
are the ones stored and printed; the loser is refused (exit 4) naming the run that holds the run id.
A SIGKILLed holder does not block the run id.

The system under test (``fake_systems/cmd_release.py``) holds every query until the test releases
it, so the runs overlap deterministically; each config puts the relevant document at another rank,
so the two runs would store different numbers (MRR 1.0 against 0.5).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest

from kebab_eval_pipeline.chain.artifacts import RunMetricsArtifact
from kebab_eval_pipeline.store.runs import RunStore
from tests.conftest import write
from tests.forked_cli import run_cli, start_cli
from tests.orchestration.test_crash_recovery import (
    WAIT_S,
    finish,
    kill_group,
    log_tail,
    partition_runs,
    start_materialize,
    wait_for_file,
)

FAKE = Path(__file__).parent / "fake_systems" / "cmd_release.py"
TOPICS = ("alpha", "bravo", "charlie")


def release_config(tmp_path: Path, name: str, rank: int) -> tuple[Path, Path]:
    """A config whose command system holds each query until ``state/release`` exists, then ranks the
    relevant document at ``rank``; returns (config, state dir)."""
    state = tmp_path / f"state-{name}"
    state.mkdir()
    entries = "".join(
        f"  - id: q{n}\n    query: where is {topic}\n    supports: [{{rel_path: docs/{topic}.md}}]\n"
        for n, topic in enumerate(TOPICS, start=1)
    )
    golden = tmp_path / "golden.yaml"
    if not golden.exists():
        write(golden, f"name: one-writer\nqueries:\n{entries}")
    argv = [sys.executable, str(FAKE), str(state), str(rank), "{query}", "{k}"]
    config = write(
        tmp_path / f"{name}.yaml",
        f"golden: {golden}\nanswers: false\nk: [1, 3]\nbaseline: none\ndefault_gates: false\n"
        f"system:\n  kind: command\n  search_argv: {argv!r}\n  timeout_s: 120\n  concurrency: 1\n",
    )
    return config, state


def start_run(args: list[str], log: Path) -> subprocess.Popen:
    """`kebab-eval ARGS` in its own process group; stdout to ``log``, stderr to ``log``.err
    (forked ready-imported: :func:`tests.forked_cli.start_cli`)."""
    with log.open("w") as out, log.with_suffix(".err").open("w") as err:
        return start_cli(
            args,
            env=dict(os.environ),  # DAGSTER_HOME: the instance fixture's; PYTHONPATH: this checkout
            stdout=out,
            stderr=err,
            start_new_session=True,
        )


def printed_mrr(stdout: str) -> float:
    match = re.search(r"\bmrr\b\W+([0-9.]+)", stdout)
    assert match, stdout
    return float(match.group(1))


def stored(run_id: str) -> tuple[float, dict]:
    """The stored MRR of ``run_id`` and the Dagster run stamped on each stored asset."""
    store = RunStore(Path(os.environ["DAGSTER_HOME"]) / "kebab-eval" / "artifacts")
    mrr = RunMetricsArtifact.from_tables(*store.read("run_metrics", run_id)).metrics["mrr"]
    stamps = {
        asset: store.manifest(asset, run_id)["dagster_run_id"]
        for asset in ("golden_set", "retrieval_results", "query_scores", "run_metrics", "comparison_report")
    }
    return mrr, stamps


def test_two_cli_runs_of_one_run_id_exactly_one_wins(instance, tmp_path):
    configs = {"a": release_config(tmp_path, "a", 1), "b": release_config(tmp_path, "b", 2)}
    logs = {name: tmp_path / f"{name}.log" for name in configs}
    procs = {
        name: start_run(["run", "--run-id", "same", "--config", str(cfg)], logs[name])
        for name, (cfg, _) in configs.items()
    }
    try:
        # Started together: the loser is refused at once, while the winner waits inside retrieval
        # (its queries are held until released) — if both got through, neither would exit here.
        deadline = time.monotonic() + WAIT_S
        while all(p.poll() is None for p in procs.values()):
            assert time.monotonic() < deadline, "neither run was refused"
            time.sleep(0.05)
        loser = next(name for name, p in procs.items() if p.poll() is not None)
        winner = "b" if loser == "a" else "a"
        for _, state in configs.values():
            (state / "release").touch()
        assert procs[winner].wait(timeout=WAIT_S) == 0, logs[winner].with_suffix(".err").read_text()
    finally:
        for p in procs.values():
            if p.poll() is None:
                kill_group(p)

    loser_err = logs[loser].with_suffix(".err").read_text()
    assert procs[loser].returncode == 4, loser_err
    runs = partition_runs(instance, "same")
    assert [r.status for r in runs] == [dg.DagsterRunStatus.SUCCESS]  # the loser never started one
    winner_run = runs[0].run_id
    assert "run same is already in progress" in loser_err and winner_run in loser_err, loser_err
    assert "Traceback" not in loser_err and "mrr" not in logs[loser].read_text()

    # What the winner printed is what is stored, and every stored asset is the winner's.
    mrr, stamps = stored("same")
    assert mrr == pytest.approx(1.0 if winner == "a" else 0.5)
    assert printed_mrr(logs[winner].read_text()) == pytest.approx(mrr, abs=1e-4)
    assert set(stamps.values()) == {winner_run}


def test_materialize_and_cli_run_of_one_run_id_exclude_each_other(instance, tmp_path):
    (config_a, state_a), (config_b, state_b) = (
        release_config(tmp_path, "a", 1),
        release_config(tmp_path, "b", 2),
    )
    instance.add_dynamic_partitions("eval_runs", ["m1"])  # `kebab-eval runs add m1`

    # 1. `dagster asset materialize` holds the run id (its run worker): the CLI run is refused.
    materialize = start_materialize("m1", config_a, tmp_path / "m.log")
    try:
        wait_for_file(state_a / "inside", materialize, tmp_path / "m.log")
        refused = run_cli(["run", "--run-id", "m1", "--config", config_b], timeout=WAIT_S)
        (state_a / "release").touch()
        finish(materialize, tmp_path / "m.log")
    finally:
        if materialize.poll() is None:
            kill_group(materialize)
    holder = partition_runs(instance, "m1")[0].run_id
    assert refused.returncode == 4, refused.stderr
    assert "run m1 is already in progress" in refused.stderr and holder in refused.stderr
    assert "mrr" not in refused.stdout
    mrr, stamps = stored("m1")
    assert mrr == pytest.approx(1.0) and set(stamps.values()) == {holder}

    # 2. A CLI run holds it: `dagster asset materialize` fails, having written nothing.
    cli = start_run(["run", "--run-id", "m1", "--config", str(config_b)], tmp_path / "cli.log")
    try:
        wait_for_file(state_b / "inside", cli, tmp_path / "cli.log")
        second = start_materialize("m1", config_a, tmp_path / "m2.log")
        assert second.wait(timeout=WAIT_S) != 0, log_tail(tmp_path / "m2.log")
        assert "run m1 is already in progress" in (tmp_path / "m2.log").read_text()
        (state_b / "release").touch()
        assert cli.wait(timeout=WAIT_S) == 0, (tmp_path / "cli.err").read_text()
    finally:
        if cli.poll() is None:
            kill_group(cli)
    runs = partition_runs(instance, "m1")
    statuses = [r.status for r in runs]
    assert statuses == [dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE]
    mrr, stamps = stored("m1")
    assert mrr == pytest.approx(0.5) and set(stamps.values()) == {runs[1].run_id}
    assert printed_mrr((tmp_path / "cli.log").read_text()) == pytest.approx(0.5)


def test_a_sigkilled_run_does_not_block_its_run_id(instance, tmp_path):
    config, state = release_config(tmp_path, "k", 1)
    log = tmp_path / "killed.log"
    proc = start_run(["run", "--run-id", "k1", "--config", str(config)], log)
    try:
        wait_for_file(state / "inside", proc, log)
        record = Path(os.environ["DAGSTER_HOME"]) / "kebab-eval" / "artifacts" / "_run_locks" / "k1.json"
        assert json.loads(record.read_text())["pid"] == proc.pid  # the killed run owned the run id
    finally:
        kill_group(proc)
    (state / "release").touch()
    again = run_cli(["run", "--run-id", "k1", "--config", config], timeout=WAIT_S)
    assert again.returncode == 0, again.stderr
    statuses = [r.status for r in partition_runs(instance, "k1")]
    assert statuses == [dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.SUCCESS]  # the killed one stays
    assert stored("k1")[0] == pytest.approx(1.0)
