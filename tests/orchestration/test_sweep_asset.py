"""A configuration sweep in Dagster, on a real instance: ``register_sweep`` adds the variants' run
ids as partitions, each partition is materialized by the evaluation job with no tags and no
overrides (what a backfill launches), and ``sweep_leaderboard`` ranks the stored variants."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest

from kebab_eval_pipeline.chain.settings import settings_from_dict
from kebab_eval_pipeline.definitions import JOB_NAME, build_definitions, run_settings
from kebab_eval_pipeline.orchestration.names import ChainNames
from kebab_eval_pipeline.orchestration.sweep import build_sweep_definitions
from kebab_eval_pipeline.store.runs import RunStore

CONFIG = """\
answers: false
baseline: none
sweep:
  name: sizes
  grid:
    system.chunk_size: [300, 800]
  metric: mrr
"""
SIZE_300 = "sweep-sizes-chunk_size-300-"
SIZE_800 = "sweep-sizes-chunk_size-800-"


def test_register_backfill_and_leaderboard(instance, tmp_path):
    cfg = tmp_path / "eval.yaml"
    cfg.write_text(CONFIG, encoding="utf-8")
    defs = build_definitions(cfg)
    keys = {key.path[-1] for key in defs.resolve_asset_graph().get_all_asset_keys()}
    assert {"sweep_leaderboard", "run_metrics", "run_ranking"} <= keys

    # (a) the registering job adds both run ids as partitions, once
    register = defs.resolve_job_def("register_sweep")
    assert register.execute_in_process(instance=instance).success
    run_ids = instance.get_dynamic_partitions("eval_runs")
    assert [r[: len(SIZE_300)] for r in run_ids] == [SIZE_300, SIZE_800]
    assert register.execute_in_process(instance=instance).success  # again: nothing added twice
    assert instance.get_dynamic_partitions("eval_runs") == run_ids

    # A backfill: one run of the evaluation job per partition, no tags, no resource overrides.
    job = defs.resolve_job_def(JOB_NAME)
    for run_id in run_ids:
        assert job.execute_in_process(partition_key=run_id, instance=instance).success, run_id
    store = RunStore(defs.resources["artifact_storage"].base)
    stored = {run_id: store.read("run_metrics", run_id)[1] for run_id in run_ids}
    for run_id, size in zip(run_ids, (300, 800), strict=True):
        versions = stored[run_id]["versions"]
        # The reference system itself says which chunk size it indexed with: the variant's.
        assert versions["chunker_version"] == f"md-heading-2:size={size}:overlap=0"
        assert versions["sweep.system.chunk_size"] == str(size)
        assert versions["sweep"] == f"sizes/{run_id.removeprefix('sweep-sizes-')}"
        assert stored[run_id]["sweep"]["settings"] == {"system.chunk_size": size}
    mrr = {run_id: store.stored_run(run_id).metrics.metrics["mrr"] for run_id in run_ids}

    # (b) the leaderboard over the stored variants
    result = defs.resolve_implicit_global_asset_job_def().execute_in_process(
        asset_selection=[dg.AssetKey("sweep_leaderboard")], instance=instance
    )
    assert result.success
    (event,) = result.get_asset_materialization_events()
    meta = event.step_materialization_data.materialization.metadata
    best = max(mrr, key=mrr.get)
    assert meta["best_run_id"].value == best
    assert meta["best_variant"].value == best.removeprefix("sweep-sizes-")
    # Both runs scored by anchor on all queries: the ranked mean is the stored (4-decimal) MRR.
    assert meta["best_value"].value == pytest.approx(mrr[best], abs=5e-5)
    assert meta["metric"].value == "mrr" and meta["variants_missing"].value == []
    table = meta["variants"].value
    assert [r.data["run_id"] for r in table.records] == sorted(mrr, key=mrr.get, reverse=True)
    sizes = {run_ids[0]: "300", run_ids[1]: "800"}
    assert [r.data["system.chunk_size"] for r in table.records] == [
        sizes[r] for r in sorted(mrr, key=mrr.get, reverse=True)
    ]
    report = meta["report"].value
    assert report.startswith("# Sweep `sizes`: leaderboard on `mrr`") and "## Pairwise tests" in report
    doc = json.loads(Path(meta["report_json"].value).read_text(encoding="utf-8"))
    assert doc["best"] == [best.removeprefix("sweep-sizes-")] and len(doc["pairs"]) == 1
    assert store.read("sweep_leaderboard", "sizes")[1]["best"] == doc["best"]

    # The settings every step used come from the partition key alone.
    assert run_settings(defs).system.chunk_size == 800  # the base config: the default size


def test_prefixed_chain_names_and_no_sweep():
    settings = settings_from_dict({"sweep": {"name": "s", "grid": {"k": [[1], [5]]}}})
    defs = build_sweep_definitions(settings, ChainNames("staging"))
    (leaderboard,) = defs.assets
    (register,) = defs.jobs
    assert leaderboard.key == dg.AssetKey(["staging", "sweep_leaderboard"])
    assert leaderboard.required_resource_keys >= {"staging__eval_settings", "staging__artifact_storage"}
    assert not {"eval_settings", "artifact_storage"} & leaderboard.required_resource_keys
    assert set(leaderboard.group_names_by_key.values()) == {"staging_evaluation"}
    assert register.name == "staging__register_sweep"
    assert [n.name for n in register.nodes] == ["staging__register_sweep_partitions"]
    empty = build_sweep_definitions(settings_from_dict({}))
    assert not list(empty.assets or []) and not list(empty.jobs or [])
