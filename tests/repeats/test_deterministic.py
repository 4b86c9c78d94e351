"""Repeats of a deterministic system: no flips, a zero noise floor, the one-repeat headline; a run of
one repeat stores nothing new; bad repeat counts are refused (exit 2)."""

from __future__ import annotations

import pytest

from kebab_eval_pipeline.metrics.flakiness import FLAKINESS_COLUMNS
from kebab_eval_pipeline.store.runs import RunStore
from kebab_eval_pipeline.systems.repeats import REPEAT_TABLES
from tests.conftest import write
from tests.test_cli import cli, cli_env, no_traceback

#: Timing numbers differ between any two runs; everything else of a deterministic system may not.
TIMING = ("retrieval_ms_", "answer_ms_", "total_suite_ms")


def test_reference_system_repeated_three_times_equals_one_run(tmp_path):
    env = cli_env(tmp_path)
    config = write(tmp_path / "run.yaml", f"storage: {tmp_path / 'store'}\nbaseline: none\n")
    once = cli(env, "run", "--run-id", "once", "--config", str(config))
    thrice = cli(env, "run", "--run-id", "thrice", "--config", str(config), "--repeat", "3")
    for proc in (once, thrice):
        no_traceback(proc)
        assert proc.returncode == 0, proc.stderr
    assert "deterministic: 0 flips in 3 repeats" in thrice.stdout and "noise floor" in thrice.stdout
    assert "noise floor" not in once.stdout and "repeats" not in once.stdout

    store = RunStore(tmp_path / "store")
    a, b = store.stored_run("once"), store.stored_run("thrice")
    # One repeat: nothing of repeats anywhere (the artifacts of a run before repeats existed).
    assert not set(REPEAT_TABLES) & set(store.manifest("retrieval_results", "once")["tables"])
    assert "repeat_metrics" not in store.manifest("query_scores", "once")["tables"]
    assert (
        "repeat" not in a.retrieval.info and "repeat" not in a.scores.info and "repeats" not in a.metrics.info
    )
    assert not set(FLAKINESS_COLUMNS) & set(a.scores.scores.columns)

    # Three repeats: every query asked three times, none changed, the headline is the one run's.
    assert b.retrieval.repeat_count == 3 and len(b.retrieval.repeats.outcomes) == 2 * len(
        a.retrieval.results.outcomes
    )
    repeats = b.metrics.info["repeats"]
    assert repeats["deterministic"] and repeats["flaky_queries"] == 0 and repeats["flakiest"] == []
    assert (b.scores.scores["flips"] == 0).all() and (b.scores.scores["repeats"] == 3).all()
    for name, floor in repeats["noise_floor"].items():
        if not name.startswith(TIMING) and floor["min"] is not None:
            assert floor["std"] == 0.0 and floor["spread"] == 0.0, name
    same = [m for m in a.metrics.metrics if not m.startswith(TIMING)]
    assert {m: b.metrics.metrics[m] for m in same} == {m: a.metrics.metrics[m] for m in same}
    columns = [c for c in a.scores.scores.columns if not c.startswith(("retrieval_ms", "answer_ms"))]
    assert b.scores.scores[columns].equals(a.scores.scores[columns])


@pytest.mark.parametrize(
    ("args", "config", "expected"),
    [
        (["--repeat", "0"], "", "0 repeats: give an integer from 1 to 100"),
        (["--repeat", "101"], "", "101 repeats: give an integer from 1 to 100"),
        (["--repeat", "two"], "", "Invalid value for '--repeat'"),
        ([], "repeat: 2.5\n", "2.5 is not a number of repeats"),
        ([], "repeat: true\n", "True is not a number of repeats"),
    ],
)
def test_bad_repeat_counts_are_refused_with_exit_2(tmp_path, args, config, expected):
    env = cli_env(tmp_path)
    path = write(tmp_path / "run.yaml", config or "baseline: none\n")
    proc = cli(env, "run", "--run-id", "bad", "--config", str(path), *args)
    no_traceback(proc)
    assert proc.returncode == 2
    assert expected in proc.stdout + proc.stderr
    assert "repeat" in proc.stdout + proc.stderr
