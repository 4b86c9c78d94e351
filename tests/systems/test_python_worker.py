"""``kind: python`` in its supervised worker process (``isolation: process``, the default).

Real systems that end their process (tests/systems/process_enders.py) — ``os._exit(0)``,
``os._exit(3)``, a segfault in C, a SIGKILL from outside mid-run, an allocation past ``RLIMIT_AS`` —
and values that cannot leave the worker, each through the real ``kebab-eval run`` (its exit code,
the stored rows: one per golden query, the affected one an error row naming what happened, the
others answered by a restarted worker) and through a real Dagster materialization in this process
(which survives the system's end). ``isolation: in_process`` still runs the system in kebab-eval's
own process. Ctrl-C's SIGINT leaves the worker quiet and alive; closing it ends it at once.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import dagster as dg
import pytest
import yaml

from kebab_eval_pipeline.chain.artifacts import RetrievalArtifact, RunMetricsArtifact
from kebab_eval_pipeline.chain.settings import settings_from_dict
from kebab_eval_pipeline.systems import python_worker
from kebab_eval_pipeline.systems.outcome import QueryFailure
from kebab_eval_pipeline.systems.python_worker import MAX_RESTARTS, WorkerCalls
from tests.conftest import as_a_terminal_job, clean_cli_env, echo_golden, write
from tests.forked_cli import run_cli
from tests.systems.adapters.conftest import run_config
from tests.test_cli import CLI, cli, no_traceback

IDS = ["q1", "q2", "q3", "q4", "q5"]
HERE = Path(__file__).parent
ENDED = "process_ended: the python system's process ended: "


def run_yaml(folder: Path, how: str, **system) -> Path:
    golden = echo_golden(folder / "golden.yaml", "enders", IDS)
    doc = {
        "golden": str(golden),
        "system": {
            "kind": "python",
            "callable": "process_enders:Ender",
            "path": [str(HERE)],
            "args": {"how": how, "on": "q3"},
            **system,
        },
        "k": [1],
        "baseline": "none",
    }
    return write(folder / "run.yaml", yaml.safe_dump(doc))


def cli_pid(env, *args: str) -> tuple[subprocess.CompletedProcess, int]:
    """``kebab-eval *args`` run to its end (a process of its own, forked ready-imported:
    :mod:`tests.forked_cli`), and the pid it ran as."""
    pids: list[int] = []
    proc = run_cli(args, env=env, timeout=300, started=pids.append)
    return proc, pids[0]


def exported(env, run_id: str) -> dict[str, dict]:
    proc = cli(env, "export", run_id, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    return {q["query_id"]: q for q in json.loads(proc.stdout)["per_query"]}


def snippets(env, run_id: str) -> dict[str, str]:
    """The pid each answered query was answered in (the Ender's snippet)."""
    from kebab_eval_pipeline.store.runs import RunStore

    store = RunStore(Path(env["DAGSTER_HOME"]) / "kebab-eval" / "artifacts")
    hits = RetrievalArtifact.from_tables(*store.read("retrieval_results", run_id)).results.hits
    return dict(zip(hits["query_id"], hits["snippet"], strict=True))


@pytest.mark.parametrize(
    ("how", "error"),
    [
        ("exit0", ENDED + "exit code 0 during query q3"),
        ("exit3", ENDED + "exit code 3 during query q3"),
        ("segv", ENDED + "signal SIGSEGV during query q3"),
    ],
)
def test_cli_a_system_that_ends_its_process_fails_health_and_keeps_every_row(
    tmp_path_factory, tmp_path, how, error
):
    env = clean_cli_env(tmp_path_factory, f"ender-{how}")
    proc, pid = cli_pid(env, "run", "--config", str(run_yaml(tmp_path, how)), "--run-id", how)
    no_traceback(proc)
    assert proc.returncode == 1, f"{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    text = " ".join((proc.stdout + proc.stderr).split())
    assert "FAIL system health: 1 of 5 queries failed" in text and "process_ended ×1" in text
    rows = exported(env, how)
    assert list(rows) == IDS  # one row per golden query
    assert rows["q3"]["error"] == error
    assert [rows[q]["error"] for q in ("q1", "q2", "q4", "q5")] == [None] * 4
    assert [rows[q]["scores"]["mrr"] for q in ("q1", "q2", "q4", "q5")] == [1.0] * 4
    pids = snippets(env, how)
    # q1, q2 in the first worker; q4, q5 in the one started again; neither is kebab-eval's process
    assert pids["q1"] == pids["q2"] != pids["q4"] == pids["q5"]
    assert int(pids["q1"]) != pid


def test_cli_a_worker_killed_from_outside_mid_run(tmp_path_factory, tmp_path):
    """What the OOM killer does: SIGKILL to the worker while it runs q3."""
    env = clean_cli_env(tmp_path_factory, "ender-kill")
    started = tmp_path / "started"
    config = run_yaml(tmp_path, "wait_kill", args={"how": "wait_kill", "on": "q3", "started": str(started)})
    with ThreadPoolExecutor(1) as pool:  # the command runs (forked ready-imported) while we wait
        running = pool.submit(cli, env, "run", "--config", str(config), "--run-id", "killed")
        deadline = time.monotonic() + 120
        while not started.exists() or not started.read_text():
            assert time.monotonic() < deadline and not running.done(), running.result()
            time.sleep(0.05)
        os.kill(int(started.read_text()), signal.SIGKILL)
        proc = running.result(timeout=120)
    out, err = proc.stdout, proc.stderr
    assert "Traceback" not in out + err, err
    assert proc.returncode == 1, f"{out[-2000:]}\n{err[-2000:]}"
    rows = exported(env, "killed")
    assert list(rows) == IDS
    assert rows["q3"]["error"] == (
        ENDED + "signal SIGKILL (the OOM killer, or another process, killed it) during query q3"
    )
    assert [rows[q]["error"] for q in ("q1", "q2", "q4", "q5")] == [None] * 4


def test_cli_ctrl_c_to_the_process_group_leaves_the_decision_to_kebab_eval(tmp_path_factory, tmp_path):
    """A terminal's Ctrl-C reaches kebab-eval and the worker alike: the worker, mid-call, ignores it
    without a word; kebab-eval ends it (the call in flight cannot hold the run) and exits 130."""
    env = clean_cli_env(tmp_path_factory, "ender-sigint")
    started = tmp_path / "started"
    config = run_yaml(tmp_path, "wait_kill", args={"how": "wait_kill", "on": "q3", "started": str(started)})
    proc = subprocess.Popen(
        [*CLI, "run", "--config", str(config), "--run-id", "interrupted"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # a process group of its own, as a terminal's foreground job has
        preexec_fn=as_a_terminal_job,
    )
    deadline = time.monotonic() + 120
    while not started.exists() or not started.read_text():
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    worker_pid = int(started.read_text())
    os.killpg(proc.pid, signal.SIGINT)
    signalled = time.monotonic()
    out, err = proc.communicate(timeout=120)
    # kebab-eval ends the worker (the call in flight with it) and stops at once: exit 130, one line
    assert proc.returncode == 130, out[-2000:] + err[-2000:]
    assert time.monotonic() - signalled < 5, "the call in flight held the run past Ctrl-C"
    assert "interrupted (Ctrl-C)" in err and "Traceback" not in out + err, err[-3000:]
    # the worker says nothing: no traceback of it, nor of the system's code it was running
    assert "python_worker" not in err and "process_enders" not in err, err[-3000:]
    deadline = time.monotonic() + 10
    while Path(f"/proc/{worker_pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{worker_pid}").exists()  # the worker did not outlive the run


def test_cli_an_allocation_past_rlimit_as_is_a_memory_error_row_and_the_worker_goes_on(
    tmp_path_factory, tmp_path
):
    env = clean_cli_env(tmp_path_factory, "ender-oom")
    config = run_yaml(tmp_path, "oom", args={"how": "oom", "on": "q3", "limit_mb": 512})
    proc = cli(env, "run", "--config", str(config), "--run-id", "oom")
    no_traceback(proc)
    assert proc.returncode == 1, proc.stderr[-2000:]  # 1 of 5 > max_error_rate 0.1
    rows = exported(env, "oom")
    assert list(rows) == IDS
    assert rows["q3"]["error"] == "exception: MemoryError"
    pids = snippets(env, "oom")
    assert len({pids[q] for q in ("q1", "q2", "q4", "q5")}) == 1  # the same worker: it did not end


@pytest.mark.parametrize(
    ("how", "error"),
    [
        (
            "local_str",
            "bad_response: search returned what cannot be sent from the python system's process "
            "(AttributeError: Can't pickle local object 'Ender.search.<locals>.Local'); return plain "
            "data — dicts, lists, str, numbers — or objects it can be made of",
        ),
        (
            "module_str",
            "bad_response: search returned a value of type process_enders.Tag, which kebab-eval does "
            "not load from the python system's process; return plain data — dicts, lists, str, numbers",
        ),
    ],
)
def test_cli_a_value_that_cannot_leave_the_worker_is_a_clear_error_row(
    tmp_path_factory, tmp_path, how, error
):
    env = clean_cli_env(tmp_path_factory, f"ender-{how}")
    proc = cli(env, "run", "--config", str(run_yaml(tmp_path, how)), "--run-id", how)
    no_traceback(proc)
    assert proc.returncode == 1, proc.stderr[-2000:]
    rows = exported(env, how)
    assert list(rows) == IDS and rows["q3"]["error"] == error
    assert [rows[q]["error"] for q in ("q1", "q2", "q4", "q5")] == [None] * 4


def test_cli_in_process_opt_in_runs_the_system_in_kebab_evals_own_process(tmp_path_factory, tmp_path):
    env = clean_cli_env(tmp_path_factory, "ender-inproc")
    config = run_yaml(tmp_path, "none", isolation="in_process")
    proc, pid = cli_pid(env, "run", "--config", str(config), "--run-id", "inproc")
    no_traceback(proc)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert set(snippets(env, "inproc").values()) == {str(pid)}


def test_cli_sweep_variants_each_get_a_worker_of_their_own(tmp_path_factory, tmp_path):
    env = clean_cli_env(tmp_path_factory, "ender-sweep")
    doc = yaml.safe_load(run_yaml(tmp_path, "exit0").read_text())
    doc["sweep"] = {"name": "enders", "grid": {"system.concurrency": [1, 2]}}
    proc = cli(env, "sweep", str(write(tmp_path / "sweep.yaml", yaml.safe_dump(doc))))
    no_traceback(proc)
    assert proc.returncode == 1, proc.stderr[-2000:]
    text = " ".join((proc.stdout + proc.stderr).split())
    assert "gate failed: 2 variant(s) failed" in text
    runs = set(re.findall(r"\bsweep-enders-[\w.-]+-[0-9a-f]{6}\b", text))
    assert len(runs) == 2, text
    for run_id in runs:
        rows = exported(env, run_id)
        assert list(rows) == IDS and rows["q3"]["error"].startswith(ENDED + "exit code 0 during ")
        # with concurrency 2 a query in flight beside q3 ends with it (and says so) — q5 too when
        # q4 finished before q3 ran (seen under load); at most one query is beside q3, so q4 or q5
        # comes after the restart, from a new worker
        for q in ("q1", "q2", "q4", "q5"):
            error = rows[q]["error"]
            assert error is None or (error.startswith(ENDED) and "q3" in error and q in error), error
        assert rows["q4"]["error"] is None or rows["q5"]["error"] is None


# -- a real Dagster materialization, in this process ----------------------------------------------


@pytest.mark.parametrize(
    ("how", "error"),
    [("exit0", ENDED + "exit code 0 during query q3"), ("segv", ENDED + "signal SIGSEGV during query q3")],
)
def test_dagster_materialization_survives_the_system_and_fails_system_health(instance, tmp_path, how, error):
    result, store = run_config(instance, run_yaml(tmp_path, how), f"mat-{how}")
    assert not result.success  # this test's own process is still here to say so
    health = next(e for e in result.get_asset_check_evaluations() if e.check_name == "system_health")
    assert not health.passed and health.severity == dg.AssetCheckSeverity.ERROR
    assert health.description.startswith(
        "system health: 1 of 5 queries failed (error_rate 0.2 > max 0.1): process_ended ×1; first: q3: "
    )
    assert health.metadata["error_classes"].value == {"process_ended": 1}
    outcomes = RetrievalArtifact.from_tables(*store.read("retrieval_results", f"mat-{how}")).results.outcomes
    assert outcomes["query_id"].tolist() == IDS
    assert outcomes.set_index("query_id")["error"].isna().tolist() == [True, True, False, True, True]
    assert outcomes.set_index("query_id").loc["q3", "error"] == error
    info = RunMetricsArtifact.from_tables(*store.read("run_metrics", f"mat-{how}")).info
    assert info["system_health"]["healthy"] is False


def test_dagster_fatal_class_fails_health_even_under_the_error_rate(instance, tmp_path):
    """One crash in five queries with max_error_rate 0.5: the rate passes, the crash does not."""
    doc = yaml.safe_load(run_yaml(tmp_path, "exit0").read_text())
    config = write(
        tmp_path / "lenient.yaml", yaml.safe_dump({**doc, "system_health": {"max_error_rate": 0.5}})
    )
    result, _ = run_config(instance, config, "lenient")
    health = next(e for e in result.get_asset_check_evaluations() if e.check_name == "system_health")
    assert not result.success and not health.passed
    assert health.description.startswith(
        "system health: 1 of 5 queries failed (process_ended: the system's process ended, which fails "
        "the run whatever the error rate)"
    )


def test_dagster_repeats_each_get_their_rows_and_their_own_restarts(instance, tmp_path):
    doc = yaml.safe_load(run_yaml(tmp_path, "exit0").read_text())
    config = write(tmp_path / "repeat.yaml", yaml.safe_dump({**doc, "repeat": 2}))
    result, store = run_config(instance, config, "repeated")
    assert not result.success
    tables, info = store.read("retrieval_results", "repeated")
    assert info["repeat"] == 2
    for outcomes in (tables["outcomes"], tables["repeat_outcomes"]):
        assert outcomes["query_id"].tolist() == IDS
        errors = outcomes.set_index("query_id")["error"]
        assert errors["q3"] == ENDED + "exit code 0 during query q3"
        assert errors.drop("q3").isna().all(), errors


def test_dagster_in_process_opt_in(instance, tmp_path):
    result, store = run_config(instance, run_yaml(tmp_path, "none", isolation="in_process"), "mat-inproc")
    assert result.success
    hits = RetrievalArtifact.from_tables(*store.read("retrieval_results", "mat-inproc")).results.hits
    assert set(hits["snippet"]) == {str(os.getpid())}


# -- the worker itself: restarts, Ctrl-C, closing ---------------------------------------------------


def worker(how: str, **system) -> WorkerCalls:
    settings = settings_from_dict(
        {
            "system": {
                "kind": "python",
                "callable": "process_enders:Ender",
                "path": [str(HERE)],
                "args": {"how": how, "on": "q3"},
                **system,
            }
        }
    )
    return WorkerCalls(settings.system)


def test_restarts_are_bounded_per_batch_then_the_rest_are_rows_without_a_call():
    calls = worker("exit0")
    calls.begin()
    errors = []
    for _ in range(MAX_RESTARTS + 2):
        try:
            calls.query("search", "q3", 1, "q3")
        except Exception as exc:
            errors.append(str(exc))
    assert errors[: MAX_RESTARTS + 1] == [ENDED + "exit code 0 during query q3"] * (MAX_RESTARTS + 1)
    assert errors[-1] == (
        "process_ended: not run: the python system's process ended 3 time(s) in this batch (last: exit "
        "code 0); it is restarted at most 2 times"
    )
    calls.begin()  # a new batch (the next step, a repeat) gets the worker started again
    assert calls.query("search", "q1", 1, "q1")[0]["chunk_id"] == "q1-c1"


@pytest.fixture
def short_grace(monkeypatch):
    """UNRESPONSIVE_GRACE_S at 2 s, not its 10 s: a stuck worker is ended 2 s past ``timeout_s``
    (the parent reads the grace at each call), so a test of it does not wait 10 s out. 2 s, not
    less: the in-flight test sends its second call 1 s after the stuck one, still within the limit."""
    monkeypatch.setattr(python_worker, "UNRESPONSIVE_GRACE_S", 2.0)


def test_a_worker_stuck_in_native_code_is_ended_and_replaced(short_grace):
    calls = worker("gil", timeout_s=0.5)
    calls.begin()
    started = time.monotonic()
    with pytest.raises(QueryFailure) as late:
        calls.query("search", "q3", 1, "q3")
    assert 2.5 <= time.monotonic() - started < 7  # timeout_s + UNRESPONSIVE_GRACE_S, not 20 s
    assert (late.value.error_class, late.value.timed_out) == ("timeout", True)
    assert late.value.message == "the python system's process gave no answer within 2.5 s and was ended"
    assert calls.query("search", "q4", 1, "q4")[0]["chunk_id"] == "q4-c1"  # a new worker


def test_calls_in_flight_with_a_stuck_one_name_it(short_grace):
    calls = worker("gil", timeout_s=0.5, concurrency=2)
    calls.begin()
    errors: dict[str, QueryFailure] = {}

    def ask(query: str) -> None:
        try:
            calls.query("search", query, 1, query)
        except QueryFailure as failure:
            errors[query] = failure

    stuck = threading.Thread(target=ask, args=("q3",))
    stuck.start()
    time.sleep(1)  # q3 holds the interpreter: q1 sent now gets no answer either
    ask("q1")
    stuck.join(30)
    assert errors["q3"].error_class == "timeout"
    assert (errors["q1"].error_class, errors["q1"].message) == (
        "process_ended",
        "the python system's process ended: kebab-eval ended it, stuck with no answer for q3 within "
        "2.5 s (timeout_s 0.5 + 2), during query q1",
    )


def test_sigint_to_the_worker_is_ignored_quietly_and_closing_ends_it(capfd):
    calls = worker("sleep")
    process = calls._worker.proc
    box = {}
    thread = threading.Thread(target=lambda: box.update(hits=calls.query("search", "q3", 1, "q3")))
    thread.start()
    time.sleep(0.5)  # q3 sleeps 1.5 s in the worker
    os.kill(process.pid, signal.SIGINT)  # what a terminal's Ctrl-C sends the whole process group
    thread.join(10)
    assert box["hits"][0]["chunk_id"] == "q3-c1" and process.poll() is None
    calls._worker.close()
    assert process.returncode == 0
    assert "Traceback" not in capfd.readouterr().err


def test_a_factory_that_ends_the_process_is_a_config_error_naming_the_callable(tmp_path_factory, tmp_path):
    env = clean_cli_env(tmp_path_factory, "ender-factory")
    module = write(tmp_path / "dies.py", "import os\ndef build():\n    os._exit(7)\n")
    config = write(
        tmp_path / "run.yaml",
        yaml.safe_dump(
            {
                "golden": str(echo_golden(tmp_path / "g.yaml", "g", IDS)),
                "system": {"kind": "python", "callable": "dies:build", "path": [str(module.parent)]},
                "baseline": "none",
            }
        ),
    )
    proc = cli(env, "run", "--config", str(config))
    no_traceback(proc)
    assert proc.returncode == 2, proc.stderr
    assert "dies:build: the python system's process ended while building the system: exit code 7" in " ".join(
        proc.stderr.split()
    )


def test_cli_what_the_system_prints_is_masked_of_its_secret(tmp_path_factory, tmp_path):
    """The worker's stdout and stderr reach the user through kebab-eval's own stderr, masked: a
    system printing its credential does not get it past the masking by an inherited descriptor."""
    env = clean_cli_env(tmp_path_factory, "ender-print")
    secret = "tok-Zq81/xYv+secret"
    env["SEARCH_TOKEN"] = secret  # named like a credential: masked with no config line
    proc = cli(env, "run", "--config", str(run_yaml(tmp_path, "print")), "--run-id", "printed")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "printed by the system: ***" in proc.stderr  # it is passed on, masked
    assert secret not in proc.stdout + proc.stderr
