"""What a team's Dagster instance holds after a day of work, for the platform UI tests.

Run as a subprocess with ``DAGSTER_HOME``, ``TEAM_INDEX_ROOT`` and ``KEBAB_EVAL_STORAGE`` set and
the team project (docs/examples/dagster-project) on ``PYTHONPATH``::

    python -m tests.ui.team_runs OUT.json

It materializes, through Dagster on that instance:

- ``search_index`` + ``deploy_index`` twice: a good index (the blocking ``index_quality`` check
  passes, the index is deployed) and one whose chunker drops the headings (the check fails, the
  deploy step is skipped);
- two runs of the ``staging`` chain (``r1``; ``r2`` with a 200-character chunker), then
  ``staging/regression_bisect`` over them (metric mrr);
- the ``chunking`` sweep: ``staging__register_sweep``, one run per variant, ``staging/sweep_leaderboard``;
- ``staging/golden_health`` on the demo golden set, then on a next version with a question asked twice;
- one tick of ``staging__freshness_check_sensor`` (the check's result on ``staging/system_under_test``);

and writes what happened (Dagster run ids, check outcomes, metrics) to OUT.json for the test to
assert the UI against.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import dagster as dg

SEARCH, DEPLOY = dg.AssetKey("search_index"), dg.AssetKey("deploy_index")


def _index_build(defs: dg.Definitions, instance: dg.DagsterInstance, drop_headings: bool) -> dict:
    job = defs.resolve_implicit_job_def_def_for_assets([SEARCH, DEPLOY])
    result = job.execute_in_process(
        instance=instance,
        asset_selection=[SEARCH, DEPLOY],
        run_config={"ops": {"search_index": {"config": {"drop_headings": drop_headings}}}},
        raise_on_error=False,
    )
    [check] = result.get_asset_check_evaluations()
    return {
        "dagster_run": result.run_id,
        "success": result.success,
        "passed": check.passed,
        "description": check.description,
        "metadata": {k: v.value for k, v in check.metadata.items() if not isinstance(v.value, dict | list)},
    }


def _chain_run(
    defs: dg.Definitions, instance: dg.DagsterInstance, run_id: str, chunk_size: int | None
) -> dict:
    instance.add_dynamic_partitions("staging__eval_runs", [run_id])
    config = (
        {"resources": {"staging__system_under_test": {"config": {"chunk_size": chunk_size}}}}
        if chunk_size
        else {}
    )
    result = defs.resolve_job_def("staging__evaluation_run").execute_in_process(
        instance=instance, partition_key=run_id, run_config=config
    )
    assert result.success, run_id
    [gate] = [e for e in result.get_asset_check_evaluations() if e.check_name == "gate_mrr_min"]
    return {"dagster_run": result.run_id, "mrr": gate.metadata["value"].value}


def _golden_v2(path: Path) -> Path:
    """The demo golden set's next version: one question asked twice (a near-duplicate)."""
    import yaml

    from kebab_eval_pipeline.foundation.demo import DEMO_GOLDEN

    doc = yaml.safe_load(DEMO_GOLDEN.read_text(encoding="utf-8"))
    first = dict(doc["queries"][0])
    first["id"] = f"{first['id']}-again"
    first["query"] = first["query"].replace("At what", "at what").rstrip("?") + " ?"
    doc["queries"].append(first)
    path.write_text(yaml.safe_dump(doc, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return path


def _materialize(defs: dg.Definitions, instance: dg.DagsterInstance, key: list[str], config: dict) -> str:
    result = dg.materialize(
        [defs.get_assets_def(dg.AssetKey(key))],
        instance=instance,
        resources=defs.resources,
        run_config=config,
    )
    assert result.success, key
    return result.run_id


def main(out: Path) -> None:
    from team_search.definitions import defs

    instance = dg.DagsterInstance.get()
    facts = {
        "good": _index_build(defs, instance, drop_headings=False),
        "bad": _index_build(defs, instance, drop_headings=True),
        "r1": _chain_run(defs, instance, "r1", None),
        "r2": _chain_run(defs, instance, "r2", 200),
    }
    facts["bisect_dagster_run"] = _materialize(
        defs,
        instance,
        ["staging", "regression_bisect"],
        {"ops": {"staging__regression_bisect": {"config": {"metric": "mrr"}}}},
    )
    # the sweep: register its partitions (the register_sweep job), run each (what a backfill of
    # them does), rank them
    assert defs.resolve_job_def("staging__register_sweep").execute_in_process(instance=instance).success
    variants = [k for k in instance.get_dynamic_partitions("staging__eval_runs") if k.startswith("sweep-")]
    for run_id in variants:
        result = defs.resolve_job_def("staging__evaluation_run").execute_in_process(
            instance=instance, partition_key=run_id
        )
        assert result.success, run_id
    facts["sweep_variants"] = variants
    facts["leaderboard_dagster_run"] = _materialize(defs, instance, ["staging", "sweep_leaderboard"], {})
    # golden_health on two versions of the golden set: the trend the Plots tab draws
    v2 = _golden_v2(out.parent / "golden-v2.yaml")
    facts["health_runs"] = [
        _materialize(defs, instance, ["staging", "golden_health"], {}),
        _materialize(
            defs,
            instance,
            ["staging", "golden_health"],
            {"resources": {"staging__eval_settings": {"config": {"golden": str(v2)}}}},
        ),
    ]
    # the freshness sensor's tick, as the daemon would run it: the check's result on system_under_test
    sensor = defs.get_sensor_def("staging__freshness_check_sensor")
    with dg.build_sensor_context(instance=instance, resources=defs.resources) as context:
        ticked = sensor.evaluate_tick(context)
    for event in ticked.asset_events:
        instance.report_runless_asset_event(event)
    facts["freshness"] = [e.passed for e in ticked.asset_events]
    out.write_text(json.dumps(facts, indent=2, default=str))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
