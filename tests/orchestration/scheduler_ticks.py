"""The scheduler's side of a schedule tick, for tests that evaluate a schedule function directly."""

from __future__ import annotations

from datetime import datetime

import dagster as dg


def scheduler_started_tick(instance, schedule: dg.ScheduleDefinition, when: datetime) -> None:
    """What Dagster's scheduler records before it evaluates a tick (dagster/_scheduler/scheduler.py):
    the running schedule's state and a STARTED tick at the tick's time. The daemon test
    (test_schedule_daemon.py) runs the scheduler itself; these tests evaluate the function directly."""
    from dagster._core.remote_origin import (
        GrpcServerCodeLocationOrigin,
        RemoteInstigatorOrigin,
        RemoteRepositoryOrigin,
    )
    from dagster._core.scheduler.instigation import (
        InstigatorState,
        InstigatorStatus,
        InstigatorType,
        ScheduleInstigatorData,
        TickData,
        TickStatus,
    )

    location = GrpcServerCodeLocationOrigin(host="localhost", port=4266, location_name="kebab-eval")
    origin = RemoteInstigatorOrigin(RemoteRepositoryOrigin(location, "__repository__"), schedule.name)
    state = next(
        (s for s in instance.all_instigator_state() if s.instigator_name == schedule.name), None
    ) or instance.add_instigator_state(
        InstigatorState(
            origin,
            InstigatorType.SCHEDULE,
            InstigatorStatus.RUNNING,
            ScheduleInstigatorData(schedule.cron_schedule, when.timestamp() - 60),
        )
    )
    instance.create_tick(
        TickData(
            instigator_origin_id=state.instigator_origin_id,
            instigator_name=schedule.name,
            instigator_type=InstigatorType.SCHEDULE,
            status=TickStatus.STARTED,
            timestamp=when.timestamp(),
            selector_id=state.selector_id,
        )
    )
