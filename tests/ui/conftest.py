"""Two real evaluation runs in a temporary DAGSTER_HOME and a real Dagster webserver over them.

The runs are what a CI job would leave behind: ``kebab-eval run`` as a subprocess, ids like the
ones users see, the second with another chunk size (so its chunker version, metrics and the
comparison with the first differ) and both under gates of which a blocking one passes and a
warning one fails. The webserver loads the code location with the same config (gates are
checks at load time) on a free 127.0.0.1 port. Built once per module: runs ~25 s, server ~10 s.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kebab_eval_pipeline.chain.artifacts import metrics_from_table
from kebab_eval_pipeline.store.runs import RunStore
from tests.browser import require_browser, shared_chromium
from tests.conftest import write
from tests.test_cli import cli, no_traceback
from tests.ui.dagster_ui import Webserver, dagster_webserver

FIRST_RUN = "ci-20261122-101500"
SECOND_RUN = "ci-20261122-111500"
CHUNKERS = {FIRST_RUN: "md-heading-2:size=800:overlap=0", SECOND_RUN: "md-heading-2:size=300:overlap=0"}
#: A blocking gate that passes and a warning that fails (the demo's hit@1 is ~0.55).
EVAL_CONFIG = """\
gates:
  mrr: {min: 0.3}
  hit@1: {min: 0.99, blocking: false}
"""
PASSING_BLOCKING, FAILING_WARNING = "gate_mrr_min", "gate_hit_at_1_min"


@dataclass
class EvalRuns:
    """The instance the runs left: DAGSTER_HOME, the config they used, the environment to start
    more processes with, and their stored artifacts."""

    home: Path
    config: Path
    env: dict[str, str]
    store: RunStore

    def metrics(self, run_id: str) -> tuple[dict[str, float | None], dict[str, Any]]:
        """(metric → value or None, info) of ``run_id``'s stored run_metrics."""
        tables, info = self.store.read("run_metrics", run_id)
        return metrics_from_table(tables["metrics"])[0], info

    def gate(self, run_id: str, check: str) -> dict[str, Any]:
        """The stored result of gate ``check`` (e.g. gate_mrr_min) in ``run_id``."""
        return next(g for g in self.metrics(run_id)[1]["gates"] if g["name"] == check)


@pytest.fixture(scope="module")
def eval_runs(tmp_path_factory: pytest.TempPathFactory) -> EvalRuns:
    """Two `kebab-eval run`s: FIRST_RUN with the default chunker, SECOND_RUN with --chunk-size 300
    (its baseline: FIRST_RUN, the previous run on the same golden set)."""
    require_browser()  # skip (or fail under KEBAB_EVAL_REQUIRE_BROWSER=1) before the slow part
    root = tmp_path_factory.mktemp("dagster-ui")
    home = root / "dagster_home"  # its dagster.yaml: the one `kebab-eval run` creates, as for a user
    config = write(root / "eval.yaml", EVAL_CONFIG)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KEBAB_EVAL_", "DAGSTER_"))}
    env["DAGSTER_HOME"] = str(home)
    if os.environ.get("KEBAB_EVAL_INDEX_CACHE"):  # the session's (tests/conftest.py): index reused
        env["KEBAB_EVAL_INDEX_CACHE"] = os.environ["KEBAB_EVAL_INDEX_CACHE"]
    for run_id, extra in ((FIRST_RUN, ()), (SECOND_RUN, ("--chunk-size", "300"))):
        proc = cli(env, "run", "--run-id", run_id, "--config", str(config), *extra)
        no_traceback(proc)
        assert proc.returncode == 0, (
            f"kebab-eval run {run_id}: exit {proc.returncode}\n{proc.stdout}{proc.stderr}"
        )
    runs = EvalRuns(home, config, env, RunStore(home / "kebab-eval" / "artifacts"))
    for run_id, chunker in CHUNKERS.items():
        stored = runs.metrics(run_id)[1]["versions"]["chunker_version"]
        assert stored == chunker, f"{run_id} ran with chunker {stored!r}, expected {chunker!r}"
    return runs


@pytest.fixture(scope="module")
def webserver(eval_runs: EvalRuns) -> Iterator[Webserver]:
    """`dagster-webserver` over the runs' instance, with the runs' config (so the same gates)."""
    env = {**eval_runs.env, "KEBAB_EVAL_CONFIG": str(eval_runs.config)}
    with dagster_webserver(eval_runs.home, env, eval_runs.home.parent / "webserver.log") as server:
        server.assert_no_errors_since(0)  # the code location loaded cleanly
        yield server


@pytest.fixture(scope="module", autouse=True)
def _one_chromium() -> Iterator[None]:
    """One headless Chromium for the module's page visits (each in a fresh browser context)."""
    with shared_chromium():
        yield
