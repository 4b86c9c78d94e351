"""The nightly schedule ticked by Dagster's own scheduler loop against the code location served by
a real code server, and tested as the UI's "Test schedule" tests it (the ``scheduleDryRun``
GraphQL mutation the dialog sends): the scheduler's tick registers the partition before the run
is created (a schedule cannot return dynamic_partitions_requests); a test of the schedule — of a
tick to come, before or after the schedule is started — changes nothing in the instance, says what
the tick will do, and so never makes that day's real tick skip."""

from __future__ import annotations

import logging
import os
from datetime import UTC, datetime

import dagster as dg
from dagster._core.scheduler.instigation import TickStatus
from dagster._core.test_utils import create_test_daemon_workspace_context, freeze_time, load_remote_repo
from dagster._core.workspace.load_target import ModuleTarget
from dagster._scheduler.scheduler import launch_scheduled_runs
from dagster_graphql.test.utils import execute_dagster_graphql

LOCATION = "kebab-eval"
DRY_RUN = """
mutation ($selector: ScheduleSelector!, $timestamp: Float) {
  scheduleDryRun(selectorData: $selector, timestamp: $timestamp) {
    __typename
    ... on DryRunInstigationTick {
      evaluationResult { skipReason runRequests { runKey tags { key value } } error { message } }
    }
  }
}
"""


def test_the_scheduler_registers_the_nightly_run_and_a_test_of_the_schedule_changes_nothing(
    tmp_path, monkeypatch
):
    home = tmp_path / "dagster_home"
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.delenv("KEBAB_EVAL_CONFIG", raising=False)
    monkeypatch.delenv("KEBAB_EVAL_STORAGE", raising=False)
    # the run is created and handed to a launcher that records it: the chain itself is tested elsewhere
    launcher = {"module": "dagster._core.test_utils", "class": "MockedRunLauncher"}
    with dg.instance_for_test(temp_dir=str(home), overrides={"run_launcher": launcher}) as instance:
        target = ModuleTarget(
            module_name="kebab_eval_pipeline.definitions",
            attribute="defs",
            working_directory=os.getcwd(),
            location_name=LOCATION,
        )
        with create_test_daemon_workspace_context(target, instance) as workspace:
            schedule = load_remote_repo(workspace, "__repository__").get_schedule("nightly_eval_schedule")
            assert (schedule.cron_schedule, schedule.execution_timezone) == ("0 2 * * *", "UTC")

            def test_schedule(when: datetime) -> dict:
                """What the UI's "Test schedule" dialog shows for the tick at ``when``."""
                selector = {
                    "repositoryLocationName": LOCATION,
                    "repositoryName": "__repository__",
                    "scheduleName": "nightly_eval_schedule",
                }
                result = execute_dagster_graphql(
                    workspace.create_request_context(),
                    DRY_RUN,
                    {"selector": selector, "timestamp": when.timestamp()},
                )
                assert result.errors is None, result.errors
                evaluation = result.data["scheduleDryRun"]["evaluationResult"]
                assert evaluation["error"] is None, evaluation["error"]
                return evaluation

            def untouched() -> None:
                assert instance.get_dynamic_partitions("eval_runs") == []
                assert instance.get_runs() == []
                for key in ("golden_file", "system_under_test"):
                    assert not instance.fetch_observations(dg.AssetKey(key), limit=1).records

            # tested before it is started, then once started: a preview of 2 March's tick
            tick_2 = datetime(2025, 3, 2, 2, 0, tzinfo=UTC)
            preview = test_schedule(tick_2)
            assert preview["runRequests"] == []
            assert preview["skipReason"] == (
                "preview, nothing changed: the tick at 2025-03-02T02:00:00+00:00 will register run "
                "nightly-20250302-020000 in eval_runs, record the golden hash and the system's versions, "
                "and launch the evaluation chain for it"
            )
            untouched()
            with freeze_time(datetime(2025, 3, 1, 12, tzinfo=UTC)):
                instance.start_schedule(schedule)
            assert test_schedule(tick_2)["skipReason"].startswith("preview, nothing changed")
            untouched()

            # the scheduler wakes after 02:00 the next day: one tick is due, and it runs
            end = datetime(2025, 3, 2, 2, 0, 30, tzinfo=UTC)
            with freeze_time(end):
                list(launch_scheduled_runs(workspace, logging.getLogger(__name__), end, {}))
            [tick] = instance.get_ticks(schedule.get_remote_origin_id(), schedule.selector_id)
            assert (tick.status, tick.error) == (TickStatus.SUCCESS, None)
            [run] = instance.get_runs()
            assert run.tags["dagster/partition"] == "nightly-20250302-020000"
            assert run.tags["kebab-eval/trigger"] == "nightly"
            assert run.tags["dagster/schedule_name"] == "nightly_eval_schedule"
            assert instance.get_dynamic_partitions("eval_runs") == ["nightly-20250302-020000"]
            [observed] = instance.fetch_observations(dg.AssetKey("system_under_test"), limit=1).records
            assert observed.asset_observation.tags["dagster/data_version"]

            # a test of that tick now shows the run it asked for, and adds nothing
            [request] = test_schedule(tick_2)["runRequests"]
            assert request["runKey"] == "nightly-20250302-020000"
            # a test of the next night's tick registers nothing…
            tick_3 = datetime(2025, 3, 3, 2, 0, tzinfo=UTC)
            assert test_schedule(tick_3)["skipReason"].startswith("preview, nothing changed")
            assert instance.get_dynamic_partitions("eval_runs") == ["nightly-20250302-020000"]
            assert len(instance.get_runs()) == 1
            # … so that night's real tick is not skipped
            end = datetime(2025, 3, 3, 2, 0, 30, tzinfo=UTC)
            with freeze_time(end):
                list(launch_scheduled_runs(workspace, logging.getLogger(__name__), end, {}))
            latest = instance.get_ticks(schedule.get_remote_origin_id(), schedule.selector_id)[0]
            assert (latest.status, latest.error) == (TickStatus.SUCCESS, None)
        assert instance.get_dynamic_partitions("eval_runs") == [
            "nightly-20250302-020000",
            "nightly-20250303-020000",
        ]
        assert [r.tags["dagster/partition"] for r in instance.get_runs()] == [
            "nightly-20250303-020000",
            "nightly-20250302-020000",
        ]
