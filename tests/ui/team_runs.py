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


def main(out: Path) -> None:
    from team_search.definitions import defs

    instance = dg.DagsterInstance.get()
    facts = {
        "good": _index_build(defs, instance, drop_headings=False),
        "bad": _index_build(defs, instance, drop_headings=True),
        "r1": _chain_run(defs, instance, "r1", None),
        "r2": _chain_run(defs, instance, "r2", 200),
    }
    bisect = dg.materialize(
        [defs.get_assets_def(dg.AssetKey(["staging", "regression_bisect"]))],
        instance=instance,
        resources=defs.resources,
        run_config={"ops": {"staging__regression_bisect": {"config": {"metric": "mrr"}}}},
    )
    assert bisect.success
    facts["bisect_dagster_run"] = bisect.run_id
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
