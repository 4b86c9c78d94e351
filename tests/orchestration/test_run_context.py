"""A run's context — its settings, its system, its golden set read back — is made once per process
and run (kebab_eval_pipeline.orchestration.run_context), never handed to another run; the chain's
assets are declared once (kebab_eval_pipeline.chain.artifacts.STAGES)."""

from __future__ import annotations

import json
import os
import sys

import pytest

from kebab_eval_pipeline.chain import pipeline
from kebab_eval_pipeline.orchestration import run_context
from kebab_eval_pipeline.orchestration.resources import EvalSettingsResource
from kebab_eval_pipeline.store.artifact_store import ArtifactStore
from tests.test_memory import _inputs  # a golden set and a trace written long ago


@pytest.fixture
def counted(tmp_path, monkeypatch):
    """A CLI run's setup (a temp DAGSTER_HOME, a replay config) and counters of what a run used to
    repeat: the steps' settings parses, system builds, stale-golden checks, reads of golden_set and
    retrieval_results from the store (each the real call, counted)."""
    golden, trace = _inputs(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n", encoding="utf-8")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.delenv("KEBAB_EVAL_CONFIG", raising=False)
    counts = {"parse": 0, "build": 0, "stale": 0, "golden_set": 0, "retrieval_results": 0}

    load, check, read = EvalSettingsResource.load, pipeline.check_golden_against_system, ArtifactStore.read

    def counted_load(self, *a, **k):
        # the steps' parses (building the definitions parses the file too, before the run)
        if sys._getframe(1).f_code.co_filename.endswith(os.path.join("orchestration", "assets.py")):
            counts["parse"] += 1
        return load(self, *a, **k)

    from kebab_eval_pipeline.systems import factory

    build = factory.build_system

    def counted_build(*a, **k):
        counts["build"] += 1
        return build(*a, **k)

    def counted_check(*a, **k):
        counts["stale"] += 1
        return check(*a, **k)

    def counted_read(self, asset, *a, **k):
        if asset in counts:
            counts[asset] += 1
        return read(self, asset, *a, **k)

    monkeypatch.setattr(EvalSettingsResource, "load", counted_load)
    monkeypatch.setattr(pipeline, "check_golden_against_system", counted_check)
    monkeypatch.setattr(factory, "build_system", counted_build)
    monkeypatch.setattr(pipeline, "build_system", counted_build)
    monkeypatch.setattr(ArtifactStore, "read", counted_read)
    config = tmp_path / "run.yaml"

    def write_config(k: list[int]) -> None:
        doc = {
            "golden": str(golden),
            "system": {"kind": "replay", "path": str(trace), "format": "wfgy"},
            "match": "chunk",
            "baseline": "none",
            "k": k,
            "storage": str(home / "runs"),
        }
        config.write_text(json.dumps(doc), encoding="utf-8")

    return counts, config, write_config, home


def _run(config, run_id: str) -> None:
    from kebab_eval_pipeline.cli.run import run

    run(
        run_id=run_id,
        config=config,
        golden=None,
        system=None,
        mode=None,
        answers=None,
        baseline=None,
        chunk_size=None,
        judge=None,
    )


def test_a_cli_run_parses_its_settings_checks_its_golden_set_and_reads_it_back_once(counted) -> None:
    counts, config, write_config, home = counted
    write_config([1, 3])
    _run(config, "r1")
    # every step of the in-process run shares one parse (there were nine: one per step); the CLI
    # built the system and checked the golden set against it, its input observation, golden_set
    # plan and shard steps used that system and check (five builds and two checks before); golden_set
    # was read back from the store once for its readers, retrieval_results once per column set
    # (scoring and run_metrics read different ones; the judge is off and reads none) and once for
    # the scored hits
    assert counts == {"parse": 1, "build": 1, "stale": 1, "golden_set": 1, "retrieval_results": 3}
    from kebab_eval_pipeline.store.runs import RunStore

    metrics = RunStore(home / "runs").read("run_metrics", "r1")[0]["metrics"]
    assert metrics.loc[metrics["metric"] == "hit@1", "value"].item() == 0.5
    # nothing of the run is kept once it has ended: hand-over, context, artifacts read back
    assert "r1" not in run_context._HANDED
    assert not [k for k in run_context._CONTEXTS if k[1] == "r1"]
    assert not [k for k in run_context._READS if k[1] == "r1"]


def test_a_config_edited_between_two_runs_of_one_process_is_read_again(counted) -> None:
    counts, config, write_config, home = counted
    write_config([1, 3])
    _run(config, "r1")
    write_config([1, 5])  # the same path, other content: the next run must not get r1's settings
    _run(config, "r2")
    from kebab_eval_pipeline.store.runs import RunStore

    store = RunStore(home / "runs")
    assert store.read("run_metrics", "r1")[1]["k"] == [1, 3]
    assert store.read("run_metrics", "r2")[1]["k"] == [1, 5]
    assert counts["parse"] == 2 and counts["stale"] == 2


def test_the_context_key_names_the_run_and_the_config_content(tmp_path) -> None:
    config = tmp_path / "a.yaml"
    config.write_text("k: [1]\n", encoding="utf-8")
    first = run_context.context_key("dagster-run-1", "r1", str(config), ("x",))
    assert run_context.context_key("dagster-run-1", "r1", str(config), ("x",)) == first
    assert run_context.context_key("dagster-run-2", "r1", str(config), ("x",)) != first  # another run
    assert run_context.context_key("dagster-run-1", "r1", str(config), ("y",)) != first  # an override
    config.write_text("k: [1, 3]\n", encoding="utf-8")
    assert run_context.context_key("dagster-run-1", "r1", str(config), ("x",)) != first  # an edit


def test_a_context_that_cannot_be_made_is_not_kept() -> None:
    calls = []

    def bad():
        calls.append(1)
        raise ValueError("bad config")

    for _ in range(2):
        with pytest.raises(ValueError, match="bad config"):
            run_context.cached_context(("never-kept",), bad)
    assert len(calls) == 2  # the error is said again by the next step that asks


def test_the_stage_table_is_what_the_store_the_io_manager_and_the_checks_read() -> None:
    from kebab_eval_pipeline.chain.artifacts import ARTIFACT_TYPES, STAGES
    from kebab_eval_pipeline.chain.settings import RunSettings
    from kebab_eval_pipeline.orchestration.assets import DEFAULT_CHAIN
    from kebab_eval_pipeline.orchestration.checks import CHECKS, gate_checks
    from kebab_eval_pipeline.orchestration.io import READ_ONCE
    from kebab_eval_pipeline.store.runs import RUN_ASSETS

    assert RUN_ASSETS == ("golden_set", "retrieval_results", "query_scores", "run_metrics")
    assert READ_ONCE == ("golden_set", "retrieval_results")
    assert list(ARTIFACT_TYPES) == [s.asset for s in STAGES]
    assert [a.key.path[-1] for a in DEFAULT_CHAIN.eval_assets] == [s.asset for s in STAGES]
    assert {s.asset: s.tag for s in STAGES} == {
        a.key.path[-1]: a.tags_by_key[a.key]["stage"] for a in DEFAULT_CHAIN.eval_assets
    }
    declared = {name: s.asset for s in STAGES for name in s.checks}
    assert set(declared) == set(CHECKS)
    settings = RunSettings(gates={"mrr": {"min": 0.5}}, regression_gates={"mrr": {"max_drop": 0.05}})
    on = {key.name: key.asset_key.path[-1] for check in gate_checks(settings) for key in check.check_keys}
    assert on["gate_mrr_min"] == "run_metrics" and on["gate_mrr_max_drop"] == "comparison_report"
    assert on["system_health"] == "run_metrics" and on["judge_spot_check"] == "judge"
    assert on["matching_coverage"] == "query_scores"
