"""The other version readings of a chain, in one long-lived process (as a code server is): the
nightly schedule's observation of ``system_under_test``, the observation asset itself and the
freshness check read a python system's versions live — after its index was rebuilt in place, the
new version — while the object a run in this process built keeps its own."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import dagster as dg

from kebab_eval_pipeline.definitions import build_definitions, run_settings
from kebab_eval_pipeline.orchestration.automation import build_freshness
from kebab_eval_pipeline.store.artifact_store import ArtifactStore
from kebab_eval_pipeline.systems.factory import build_system
from tests.conftest import write
from tests.orchestration.live_versions.indexed_system import write_index
from tests.orchestration.scheduler_ticks import scheduler_started_tick

HERE = Path(__file__).parent
DOCS = [{"id": "brine-c1", "path": "brine.md", "text": "salt water for pickles"}]
MORE_DOCS = [*DOCS, {"id": "miso-c1", "path": "miso.md", "text": "miso ferments soy"}]


def latest_observed(instance) -> str:
    [record] = instance.fetch_observations(dg.AssetKey("system_under_test"), limit=1).records
    return record.asset_observation.metadata["index_version"].value


def test_schedule_observation_asset_and_freshness_read_the_rebuilt_index(instance, tmp_path):
    index_file = tmp_path / "index.json"
    old = write_index(index_file, DOCS)
    config = write(
        tmp_path / "python.yaml",
        f"system:\n  kind: python\n  callable: 'indexed_system:IndexedSystem'\n"
        f"  args: {{index_file: '{index_file}'}}\n  path: ['{HERE}']\n  response: {{hits: hits}}\n"
        f"storage: '{tmp_path / 'runs'}'\n",
    )
    defs = build_definitions(config)
    settings = run_settings(defs)
    schedule = defs.resolve_schedule_def("nightly_eval_schedule")
    evaluation = build_freshness(settings)[2]
    running = build_system(settings)  # a run in this process: its object is kept

    def nightly(day: int) -> None:
        when = datetime(2025, 3, day, 2, tzinfo=UTC)
        scheduler_started_tick(instance, schedule, when)  # the scheduler's tick: it registers and observes
        context = dg.build_schedule_context(
            instance=instance, scheduled_execution_time=when, repository_def=defs.get_repository_def()
        )
        assert schedule.evaluate_tick(context).run_requests

    nightly(1)
    assert latest_observed(instance) == old
    assert evaluation(ArtifactStore(tmp_path / "runs")).metadata["current_version"].value == old

    new = write_index(index_file, MORE_DOCS)  # rebuilt in place
    nightly(2)
    assert latest_observed(instance) == new
    assert evaluation(ArtifactStore(tmp_path / "runs")).metadata["current_version"].value == new
    # the observable source asset, observed in this same process
    observe = defs.resolve_implicit_global_asset_job_def().get_subset(
        asset_selection={dg.AssetKey("system_under_test")}
    )
    result = observe.execute_in_process(instance=instance)
    [observed] = [e.asset_observation_data.asset_observation for e in result.get_asset_observation_events()]
    assert observed.metadata["index_version"].value == new
    assert observed.tags["dagster/data_version"] == new
    assert running.info().index_version == old and build_system(settings) is running
