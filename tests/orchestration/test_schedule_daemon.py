"""The nightly schedule ticked by Dagster's own scheduler loop against the code location served by
a real code server: the partition the schedule registers through the instance exists when the
scheduler creates the run (a schedule cannot return dynamic_partitions_requests)."""

from __future__ import annotations

import logging
import os
from datetime import UTC, datetime

import dagster as dg
from dagster._core.scheduler.instigation import TickStatus
from dagster._core.test_utils import create_test_daemon_workspace_context, freeze_time, load_remote_repo
from dagster._core.workspace.load_target import ModuleTarget
from dagster._scheduler.scheduler import launch_scheduled_runs


def test_scheduler_daemon_registers_and_creates_the_nightly_run(tmp_path, monkeypatch):
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
            location_name="kebab-eval",
        )
        with create_test_daemon_workspace_context(target, instance) as workspace:
            schedule = load_remote_repo(workspace, "__repository__").get_schedule("nightly_eval_schedule")
            assert (schedule.cron_schedule, schedule.execution_timezone) == ("0 2 * * *", "UTC")
            with freeze_time(datetime(2025, 3, 1, 12, tzinfo=UTC)):
                instance.start_schedule(schedule)
            # the scheduler wakes after 02:00 the next day: one tick is due
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
