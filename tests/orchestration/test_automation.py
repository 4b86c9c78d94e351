"""The nightly schedule and the golden-change sensor evaluated against a real instance: partitions
registered, runs requested (and one run launched for real), stopped by default."""

from __future__ import annotations

import re
import shutil
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import dagster as dg
import pytest

from kebab_eval_pipeline.definitions import JOB_NAME, build_definitions
from kebab_eval_pipeline.foundation.demo import DEMO_GOLDEN
from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.foundation.run_ids import new_run_id, run_id_time
from kebab_eval_pipeline.golden.load import golden_content_sha256
from kebab_eval_pipeline.orchestration.automation import FRESHNESS_CHECK
from kebab_eval_pipeline.store.runs import RunStore
from tests.conftest import write
from tests.orchestration.scheduler_ticks import scheduler_started_tick

BERLIN = ZoneInfo("Europe/Berlin")


def sensor(defs: dg.Definitions, name: str) -> dg.SensorDefinition:
    return defs.resolve_sensor_def(name)


@pytest.fixture(scope="module")
def berlin_config(tmp_path_factory):
    return write(
        tmp_path_factory.mktemp("cfg") / "nightly.yaml",
        'nightly: {cron: "30 1 * * *", timezone: Europe/Berlin}\n',
    )


def tick(defs: dg.Definitions, instance, when: datetime, preview: bool = False) -> dg.RunRequest | str:
    """One evaluation of the nightly schedule as the scheduler makes it (its STARTED tick recorded
    first; ``preview``: as "Test schedule" makes it, with none): the run request with its
    partition resolved against the instance (so the partition must exist by then), or the skip."""
    schedule = defs.resolve_schedule_def("nightly_eval_schedule")
    if not preview:
        scheduler_started_tick(instance, schedule, when)
    context = dg.build_schedule_context(
        instance=instance, scheduled_execution_time=when, repository_def=defs.get_repository_def()
    )
    data = schedule.evaluate_tick(context)
    if data.skip_message:
        return data.skip_message
    [request] = data.run_requests
    return request


def test_schedules_and_sensors_are_stopped_by_default():
    defs = build_definitions()
    repo = defs.get_repository_def()
    assert [s.name for s in repo.schedule_defs] == ["nightly_eval_schedule"]
    assert sorted(s.name for s in repo.sensor_defs) == [
        "freshness_check_sensor",
        "golden_change_sensor",
        "system_version_sensor",
    ]
    assert repo.schedule_defs[0].default_status == dg.DefaultScheduleStatus.STOPPED
    for s in repo.sensor_defs:
        assert s.default_status == dg.DefaultSensorStatus.STOPPED, s.name
    # the freshness check is not part of an evaluation run (a run would judge itself mid-way)
    freshness = dg.AssetCheckKey(dg.AssetKey("system_under_test"), FRESHNESS_CHECK)
    assert freshness in defs.resolve_asset_graph().asset_check_keys
    assert freshness not in defs.resolve_job_def(JOB_NAME).asset_layer.asset_graph.asset_check_keys


def test_schedule_cron_and_timezone(berlin_config):
    default = build_definitions().resolve_schedule_def("nightly_eval_schedule")
    assert (default.cron_schedule, default.execution_timezone) == ("0 2 * * *", "UTC")
    berlin = build_definitions(berlin_config).resolve_schedule_def("nightly_eval_schedule")
    assert (berlin.cron_schedule, berlin.execution_timezone) == ("30 1 * * *", "Europe/Berlin")
    assert "`30 1 * * *` (Europe/Berlin)" in berlin.description


def test_invalid_cron_and_timezone_name_their_keys(tmp_path):
    bad = write(tmp_path / "bad.yaml", 'nightly: {cron: "0 25 * * *", timezone: Europe/Nowhere}\n')
    with pytest.raises(InputError) as exc:
        build_definitions(bad)
    assert [o.field for o in exc.value.offenders] == ["nightly.cron", "nightly.timezone"]
    assert "'0 25 * * *' is not a cron expression" in exc.value.render()
    assert "'Europe/Nowhere' is not a known time zone" in exc.value.render()


def test_schedule_registers_and_requests_once_a_day_of_its_timezone(instance, berlin_config):
    defs = build_definitions(berlin_config)
    # 01:30 in Berlin on 1 March 2025 is 00:30 UTC (CET, UTC+1)
    first = tick(defs, instance, datetime(2025, 3, 1, 1, 30, tzinfo=BERLIN))
    assert isinstance(first, dg.RunRequest)
    assert first.partition_key == first.run_key == "nightly-20250301-003000"
    assert first.tags["kebab-eval/trigger"] == "nightly"
    assert first.tags["dagster/schedule_name"] == "nightly_eval_schedule"
    assert instance.get_dynamic_partitions("eval_runs") == ["nightly-20250301-003000"]
    # what the run will read was observed before it was asked for
    [observed] = instance.fetch_observations(dg.AssetKey("system_under_test"), limit=1).records
    assert observed.asset_observation.tags["dagster/data_version"]
    [golden] = instance.fetch_observations(dg.AssetKey("golden_file"), limit=1).records
    assert golden.asset_observation.tags["dagster/data_version"] == golden_content_sha256(DEMO_GOLDEN)

    # the same tick evaluated again (a retried tick) asks for the same run: the run key dedups it
    again = tick(defs, instance, datetime(2025, 3, 1, 1, 30, tzinfo=BERLIN))
    assert isinstance(again, dg.RunRequest) and again.run_key == first.run_key
    # a later evaluation on the same Berlin day does nothing
    later = tick(defs, instance, datetime(2025, 3, 1, 23, 59, tzinfo=BERLIN))
    assert later == "nightly-20250301-003000 already registered today (Europe/Berlin)"
    # 00:30 on 2 March in Berlin is still 1 March in UTC, but another day of the schedule's zone
    next_day = tick(defs, instance, datetime(2025, 3, 2, 0, 30, tzinfo=BERLIN))
    assert isinstance(next_day, dg.RunRequest) and next_day.partition_key == "nightly-20250301-233000"
    assert instance.get_dynamic_partitions("eval_runs") == [
        "nightly-20250301-003000",
        "nightly-20250301-233000",
    ]


def test_a_preview_of_the_schedule_changes_nothing_and_says_what_the_tick_will_do(instance, berlin_config):
    defs = build_definitions(berlin_config)
    when = datetime(2025, 3, 1, 1, 30, tzinfo=BERLIN)
    preview = tick(defs, instance, when, preview=True)
    assert preview == (
        "preview, nothing changed: the tick at 2025-03-01T01:30:00+01:00 will register run "
        "nightly-20250301-003000 in eval_runs, record the golden hash and the system's versions, and "
        "launch the evaluation chain for it"
    )
    assert instance.get_dynamic_partitions("eval_runs") == []
    assert not instance.fetch_observations(dg.AssetKey("golden_file"), limit=1).records
    # so the day's tick registers its run
    request = tick(defs, instance, when)
    assert isinstance(request, dg.RunRequest) and request.partition_key == "nightly-20250301-003000"
    # once the tick has run, a preview of it shows the tick's request and adds nothing
    again = tick(defs, instance, when, preview=True)
    assert isinstance(again, dg.RunRequest) and again.run_key == request.run_key
    assert instance.get_dynamic_partitions("eval_runs") == ["nightly-20250301-003000"]


def test_other_runs_and_old_nightly_ids(instance):
    defs = build_definitions()
    when = datetime(2025, 3, 1, 2, 0, tzinfo=UTC)
    # a CI run and yesterday's nightly do not count as today's nightly
    ci_run = new_run_id(datetime(2025, 3, 1, 1, 0, tzinfo=UTC), environ={"CI": "true"})
    instance.add_dynamic_partitions("eval_runs", ["nightly-20250228-020000", ci_run])
    request = tick(defs, instance, when)
    assert isinstance(request, dg.RunRequest) and request.partition_key == "nightly-20250301-020000"
    # an instance upgraded in the day keeps one nightly: nightly-YYYY-MM-DD counts for its day
    instance.add_dynamic_partitions("eval_runs", ["nightly-2025-03-02"])
    skipped = tick(defs, instance, datetime(2025, 3, 2, 2, 0, tzinfo=UTC))
    assert skipped == "nightly-2025-03-02 already registered today (UTC)"


def test_scheduled_run_launches_and_makes_the_system_fresh(instance):
    """The scheduled request launched for real: the chain materializes its partition, and the
    freshness check then finds that run as the last passing one of the current version."""
    defs = build_definitions()
    when = datetime.now(UTC).replace(microsecond=0)
    request = tick(defs, instance, when)
    key = request.partition_key
    assert run_id_time(key) == when
    result = defs.resolve_job_def(JOB_NAME).execute_in_process(
        partition_key=key, instance=instance, tags=request.tags
    )
    assert result.success
    materialized = {e.asset_key.path[-1] for e in result.get_asset_materialization_events()}
    assert {"run_metrics", "comparison_report"} <= materialized
    assert instance.get_run_by_id(result.run_id).tags["kebab-eval/trigger"] == "nightly"

    store = RunStore(defs.resources["artifact_storage"].base)
    finished = datetime.fromisoformat(store.manifest("comparison_report", key)["written_at"])
    storage = {"artifact_storage": defs.resources["artifact_storage"]}
    context = dg.build_sensor_context(instance=instance, definitions=defs, resources=storage)
    # evaluate_tick, as the daemon does (resources reach the sensor through its context)
    evaluated = sensor(defs, "freshness_check_sensor").evaluate_tick(context)
    [check] = evaluated.asset_events
    assert isinstance(check, dg.AssetCheckEvaluation)
    assert (check.asset_key, check.check_name, check.passed) == (
        dg.AssetKey("system_under_test"),
        FRESHNESS_CHECK,
        True,
    )
    assert check.severity == dg.AssetCheckSeverity.WARN
    assert check.metadata["last_passing_run"].value == key
    age = check.metadata["age_hours"].value
    assert 0 <= age <= (datetime.now(UTC) - finished).total_seconds() / 3600 + 1e-4
    assert check.metadata["max_hours"].value == 26.0


def test_golden_change_sensor_launches_on_content_change(instance, tmp_path):
    golden = tmp_path / "golden.yaml"
    shutil.copy(DEMO_GOLDEN, golden)
    defs = build_definitions(overrides={"golden": str(golden)})
    watch = sensor(defs, "golden_change_sensor")

    first = watch(dg.build_sensor_context(instance=instance, definitions=defs))
    assert (
        first.cursor == golden_content_sha256(golden) and not first.run_requests
    )  # records, launches nothing

    same = watch(dg.build_sensor_context(instance=instance, definitions=defs, cursor=first.cursor))
    assert isinstance(same, dg.SkipReason)

    golden.write_text(golden.read_text() + "\n# a curator's edit\n")
    changed = watch(dg.build_sensor_context(instance=instance, definitions=defs, cursor=first.cursor))
    new_sha = golden_content_sha256(golden)
    assert changed.cursor == new_sha != first.cursor
    [request] = changed.run_requests
    assert re.fullmatch(rf"golden-\d{{8}}-\d{{6}}-{new_sha[:8]}", request.partition_key)
    assert run_id_time(request.partition_key) is not None
    assert request.tags == {"kebab-eval/trigger": "golden-change"}
    assert changed.dynamic_partitions_requests[0].partition_keys == [request.partition_key]
    assert changed.asset_events[0].tags["dagster/data_version"] == new_sha
