"""Cancellation (Ctrl-C) at each place that answers it, in-process: what the CLI test
(``test_cli_interrupt.py``) sees end to end — no query handed out, nothing more published, an
interrupted run marked and judged failed — one piece at a time."""

from __future__ import annotations

import threading
import time

import pandas as pd
import pytest

from kebab_eval_pipeline.compare.outcome import interrupted_info, run_outcome
from kebab_eval_pipeline.foundation import cancellation
from kebab_eval_pipeline.foundation.errors import Interrupted
from kebab_eval_pipeline.store.artifact_store import ArtifactStore
from kebab_eval_pipeline.systems.outcome import QueryRequest
from kebab_eval_pipeline.systems.per_query import PerQueryAdapter, SearchReply


@pytest.fixture(autouse=True)
def fresh():
    cancellation.reset()
    yield
    cancellation.reset()


def test_hooks_run_once_each_and_a_failing_hook_stops_none_of_the_others():
    calls = []

    def broken():
        calls.append("broken")
        raise RuntimeError("a hook's own failure")

    with cancellation.on_cancel(broken), cancellation.on_cancel(lambda: calls.append("second")):
        cancellation.request()
        cancellation.request()  # already requested: nothing runs again
    assert calls == ["broken", "second"]
    with pytest.raises(Interrupted, match="the run was interrupted"):
        cancellation.check()
    # registered after the request: run at once
    with cancellation.on_cancel(lambda: calls.append("late")):
        pass
    assert calls[-1] == "late"


class _Slow(PerQueryAdapter):
    """A per-query system whose every call takes 0.2 s, counting the calls made."""

    def __init__(self, concurrency: int) -> None:
        self.concurrency = concurrency
        self.called: list[str] = []

    def search_one(self, request: QueryRequest, k: int) -> SearchReply:
        self.called.append(request.query_id)
        time.sleep(0.2)
        return SearchReply([], [], 1)


@pytest.mark.parametrize("concurrency", [1, 4])
def test_no_query_is_handed_out_after_the_request(concurrency):
    system = _Slow(concurrency)
    requests = [QueryRequest(f"q{i}", "text") for i in range(40)]
    threading.Timer(0.3, cancellation.request).start()
    started = time.monotonic()
    with pytest.raises(Interrupted):
        system.run_queries(requests, k=5, answers=False)
    # 40 queries take 8 s / concurrency; the ones in flight at 0.3 s finish, no other starts
    assert time.monotonic() - started < 1.0
    assert len(system.called) <= 2 * concurrency, system.called


def test_nothing_is_published_after_the_request_and_the_previous_attempt_stays(tmp_path):
    store = ArtifactStore(tmp_path)
    table = {"t": pd.DataFrame({"x": [1]})}
    store.write("run_metrics", "r1", table, {"n": 1}, dagster_run_id="first")
    cancellation.request()
    with pytest.raises(Interrupted, match="publishing run_metrics of run r1"):
        store.write("run_metrics", "r1", table, {"n": 2}, dagster_run_id="second")
    assert store.manifest("run_metrics", "r1")["dagster_run_id"] == "first"
    assert store.read("run_metrics", "r1")[1] == {"n": 1}


def test_a_run_is_marked_only_by_the_dagster_run_that_published_it(tmp_path):
    store = ArtifactStore(tmp_path)
    info = {"system_health": {}, "gates": []}
    store.write("run_metrics", "r1", {"t": pd.DataFrame({"x": [1]})}, info, dagster_run_id="mine")
    note = {"by": "Ctrl-C", "missing": ["comparison_report"]}
    assert not store.mark("run_metrics", "r1", "another", lambda i: interrupted_info(i, note))
    assert run_outcome(store.manifest("run_metrics", "r1")["info"]).passed
    assert store.mark("run_metrics", "r1", "mine", lambda i: interrupted_info(i, note))
    marked = store.manifest("run_metrics", "r1")["info"]
    outcome = run_outcome(marked)
    assert (outcome.outcome, outcome.failed, outcome.label()) == (
        "failed",
        ("interrupted",),
        "failed (interrupted)",
    )
    assert outcome.failures() == "interrupted (Ctrl-C: stopped before it finished)"
    assert marked["outcome"]["outcome"] == "failed" and marked["interrupted"] == note
    assert store.read("run_metrics", "r1")[0]["t"]["x"].tolist() == [1]  # the tables untouched
