"""The code location of the daemon test (``test_daemon.py``): a team's project with three evaluation
chains of the package, whose ``system_version_sensor`` ticks as often as the daemon's sensor loop
runs (every 5 s), served by a long-lived code server as ``dagster dev`` and a deployment serve it.

* ``polled`` — a ``kind: python`` system over an index file (``indexed_system.py``), its versions
  polled;
* ``watched`` — the same system, the sensor following the team's asset ``team/index``;
* ``ref`` — a reference index, polled.

The config files are in the folder ``$KEBAB_EVAL_TEST_LIVE_DIR`` (``python.yaml``,
``reference.yaml``). Only the three version sensors are kept, so ``dagster sensor start
--start-all`` starts exactly them.
"""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg

from kebab_eval_pipeline.orchestration.automation import build_system_version_sensor
from kebab_eval_pipeline.orchestration.factory import JOB_NAME, evaluation_chain
from kebab_eval_pipeline.orchestration.names import ChainNames

FOLDER = Path(os.environ["KEBAB_EVAL_TEST_LIVE_DIR"])
WATCHED = dg.AssetKey(["team", "index"])
#: chain name → its config file, the asset its version sensor watches (None: it polls)
CHAINS = {
    "polled": ("python.yaml", None),
    "watched": ("python.yaml", WATCHED),
    "ref": ("reference.yaml", None),
}
#: the sensor daemon evaluates due sensors every 5 s; a 1 s interval makes every loop a tick
INTERVAL_S = 1


def _fast_sensor(chain: dg.Definitions, names: ChainNames, watch: dg.AssetKey | None) -> dg.SensorDefinition:
    job = next(j for j in chain.jobs if j.name == names.name(JOB_NAME))
    settings = chain.resources[names.resource("eval_settings")].load(
        chain.resources[names.resource("system_under_test")]
    )
    return build_system_version_sensor(job, settings, names, watch, minimum_interval_seconds=INTERVAL_S)


def _build() -> dg.Definitions:
    chains = {
        name: evaluation_chain(name, FOLDER / file, watch_asset=watch)
        for name, (file, watch) in CHAINS.items()
    }
    merged = dg.Definitions.merge(*chains.values())
    return dg.Definitions(
        assets=merged.assets,
        asset_checks=merged.asset_checks,
        jobs=merged.jobs,
        sensors=[_fast_sensor(chains[name], ChainNames(name), watch) for name, (_, watch) in CHAINS.items()],
        resources=merged.resources,
    )


defs = _build()
