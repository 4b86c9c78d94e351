"""Automation of one evaluation chain: the nightly schedule, the golden-file and system-version
sensors, and the freshness check with the sensor that evaluates it. Every schedule and sensor
starts STOPPED; turn them on in the UI (Automation tab) or with ``dagster schedule start`` /
``dagster sensor start``.

The nightly schedule registers its run's partition itself (through the instance) before it asks
for the run: Dagster 1.13 lets only sensors return ``dynamic_partitions_requests`` (a schedule may
return only run requests and skip reasons; dagster-io/dagster#14921), but the schedule's context
has the instance, and the partition must exist before the scheduler resolves the run request. It
does so only on the scheduler's own tick: a preview ("Test schedule" in the UI, ``dagster schedule
preview``, a call of the function) changes nothing in the instance and says, as its skip reason,
what the tick will register and launch (:func:`scheduler_tick`).
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime

import dagster as dg

from kebab_eval_pipeline.chain.settings import RunSettings
from kebab_eval_pipeline.compare.freshness import Freshness, freshness
from kebab_eval_pipeline.contract import SystemInfo
from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.foundation.run_ids import (
    TRIGGER_TAG,
    golden_change_run_id,
    nightly_run_id,
    nightly_run_of_day,
    system_change_run_id,
)
from kebab_eval_pipeline.golden.load import golden_content_sha256
from kebab_eval_pipeline.orchestration.assets import (
    golden_file_observation,
    system_data_version,
    system_observation,
)
from kebab_eval_pipeline.orchestration.names import DEFAULT_NAMES, ChainNames
from kebab_eval_pipeline.systems.factory import live_info
from kebab_eval_pipeline.systems.identity import identity_from_settings
from kebab_eval_pipeline.systems.version_changes import (
    change_tags,
    changed_versions,
    unreachable_reason,
    watched_versions,
)

#: Run tag of a run the version sensor started on a new materialization of a watched asset.
WATCHED_ASSET_TAG = "kebab-eval/watched-asset"
FRESHNESS_CHECK = "fresh_passing_evaluation"
FRESHNESS_INTERVAL_S = 30 * 60
VERSION_INTERVAL_S = 5 * 60
WATCH_INTERVAL_S = 60


@dataclass(frozen=True)
class Automation:
    """What :func:`build_automation` gives a ``Definitions``."""

    schedules: list[dg.ScheduleDefinition]
    sensors: list[dg.SensorDefinition]
    asset_checks: list[dg.AssetChecksDefinition]


def _golden_sha256(settings: RunSettings) -> str:
    """The configured golden set's content hash (every file it is read from)."""
    paths, _, options = settings.golden_input()
    return golden_content_sha256(paths, options)


def _rekeyed(event: dg.AssetObservation, names: ChainNames) -> dg.AssetObservation:
    """``event`` for this chain's copy of its asset (``staging/system_under_test``)."""
    return dg.AssetObservation(
        asset_key=names.key(event.asset_key.path[-1]), tags=event.tags, metadata=event.metadata
    )


def _input_observations(settings: RunSettings, names: ChainNames, info=None) -> list[dg.AssetObservation]:
    """What a run will read (golden hash, system version), recorded before it starts so its
    provenance is exact; an input that cannot be read is left out (the run reports it). The
    system's version is ``info`` (the tick's own reading) or read live now: the run starts in a
    process of its own and builds the system afresh, so a version cached in this long-lived one
    would not be what it reads."""
    events = []
    with contextlib.suppress(InputError, OSError):
        events.append(_rekeyed(golden_file_observation(_golden_sha256(settings)), names))
    with contextlib.suppress(InputError):
        events.append(_rekeyed(system_observation(info or live_info(settings)), names))
    return events


def scheduler_tick(context: dg.ScheduleEvaluationContext, schedule_name: str, when: datetime) -> bool:
    """Whether this evaluation of schedule ``schedule_name`` is the scheduler's own tick at
    ``when``. The scheduler records a tick (status STARTED, at the tick's time) in the instance
    before it evaluates the schedule, so a tick can be resumed after a crash; a preview — "Test
    schedule" in the UI, ``dagster schedule preview``, a call of the function — records none. Only
    the scheduler's tick may change the instance."""
    instance = context.instance
    stamp = when.timestamp()
    for state in instance.all_instigator_state():
        if state.instigator_name != schedule_name:
            continue
        tick = instance.get_tick(state.instigator_origin_id, state.selector_id, stamp)
        if tick is not None and tick.status.value == "STARTED":
            return True
    return False


def build_nightly_schedule(
    job: dg.UnresolvedAssetJobDefinition, settings: RunSettings, names: ChainNames = DEFAULT_NAMES
) -> dg.ScheduleDefinition:
    """The nightly evaluation: ``settings.nightly.cron`` in ``settings.nightly.timezone``. At most
    one nightly run per day of that time zone; its id is ``nightly-YYYYMMDD-HHMMSS`` of the
    scheduled time (UTC), so a re-evaluated tick asks for the same run (the run key dedups it).

    The scheduler's tick registers the partition and records the inputs' versions, then asks for
    the run. A preview of a tick not yet made (:func:`scheduler_tick`) changes nothing: its skip
    reason says what the tick will do; a preview of a tick already made shows that tick's request."""
    nightly = settings.nightly
    zone = nightly.zone()
    schedule_name = names.name("nightly_eval_schedule")

    @dg.schedule(
        name=schedule_name,
        job=job,
        cron_schedule=nightly.cron,
        execution_timezone=nightly.timezone,
        default_status=dg.DefaultScheduleStatus.STOPPED,
        description=f"Nightly evaluation at `{nightly.cron}` ({nightly.timezone}): registers run "
        "nightly-YYYYMMDD-HHMMSS (the scheduled time in UTC), records the golden hash and the system's "
        "versions, and materializes the evaluation chain for it. At most one nightly run per day "
        f"({nightly.timezone}). Set with `nightly: {{cron, timezone}}` in the run config. Testing the "
        "schedule registers nothing: the preview says what its tick will register and launch.",
    )
    def nightly_eval_schedule(context: dg.ScheduleEvaluationContext) -> dg.RunRequest | dg.SkipReason:
        when = context.scheduled_execution_time or datetime.now(UTC)
        key = nightly_run_id(when)
        registered = context.instance.get_dynamic_partitions(names.partitions_name)
        done = nightly_run_of_day(registered, when.astimezone(zone).date(), zone)
        if done is not None and done != key:  # the same tick evaluated again asks for its run again
            return dg.SkipReason(f"{done} already registered today ({nightly.timezone})")
        if done is None:
            if not scheduler_tick(context, schedule_name, when):
                return dg.SkipReason(
                    f"preview, nothing changed: the tick at {when.isoformat()} will register run {key} "
                    f"in {names.partitions_name}, record the golden hash and the system's versions, and "
                    "launch the evaluation chain for it"
                )
            for event in _input_observations(settings, names):
                context.instance.report_runless_asset_event(event)
            # A schedule cannot return dynamic_partitions_requests (only sensors can): register here.
            context.instance.add_dynamic_partitions(names.partitions_name, [key])
        return dg.RunRequest(partition_key=key, run_key=key, tags={TRIGGER_TAG: "nightly"})

    return nightly_eval_schedule


def build_golden_change_sensor(
    job: dg.UnresolvedAssetJobDefinition, settings: RunSettings, names: ChainNames = DEFAULT_NAMES
) -> dg.SensorDefinition:
    @dg.sensor(
        name=names.name("golden_change_sensor"),
        job=job,
        minimum_interval_seconds=60,
        default_status=dg.DefaultSensorStatus.STOPPED,
        description="Launches a run when the golden file's content sha256 changes (first evaluation only "
        "records the current hash). Also records the new hash as an observation of golden_file.",
    )
    def golden_change_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
        path = settings.golden_path()
        if not path.exists():
            return dg.SkipReason(f"golden file {path} does not exist")
        sha = _golden_sha256(settings)
        observation = _rekeyed(golden_file_observation(sha), names)
        if context.cursor == sha:
            return dg.SkipReason("golden file unchanged")
        if context.cursor is None:
            return dg.SensorResult(cursor=sha, asset_events=[observation])
        key = golden_change_run_id(datetime.now(UTC), sha)
        return dg.SensorResult(
            run_requests=[dg.RunRequest(partition_key=key, run_key=key, tags={TRIGGER_TAG: "golden-change"})],
            dynamic_partitions_requests=[names.partitions.build_add_request([key])],
            cursor=sha,
            asset_events=[observation],
        )

    return golden_change_sensor


def _every(seconds: int) -> str:
    """``every 5 minutes``, ``every minute``, ``every 30 s``."""
    if seconds % 60:
        return f"every {seconds} s"
    return "every minute" if seconds == 60 else f"every {seconds // 60} minutes"


def _read_cursor(cursor: str | None) -> dict | None:
    if not cursor:
        return None
    try:
        value = json.loads(cursor)
    except ValueError:
        return None  # a cursor of another version: start over (record, launch nothing)
    return value if isinstance(value, dict) else None


def build_system_version_sensor(
    job: dg.UnresolvedAssetJobDefinition,
    settings: RunSettings,
    names: ChainNames = DEFAULT_NAMES,
    watch_asset: dg.AssetKey | None = None,
    minimum_interval_seconds: int | None = None,
) -> dg.SensorDefinition:
    """A run whenever the system under test changes.

    Without ``watch_asset``: every 5 minutes asks the system for its versions, read live
    (:func:`~kebab_eval_pipeline.systems.factory.live_info`: the reference index's versions as on
    disk now, a ``version_url``/``version_argv`` report, a python system built afresh and asked);
    the cursor is their JSON. The first evaluation only records; a change launches
    ``system-change-…`` tagged with the changed fields
    (:func:`~kebab_eval_pipeline.systems.version_changes.change_tags`).

    With ``watch_asset`` (a team's own asset, e.g. the index its pipeline builds): a new
    materialization of that asset launches the run instead (cursor: ``{"storage_id", "versions"}``),
    tagged with the asset and whatever versions changed meanwhile; checked every minute, the
    versions read only when there is a new materialization (or on the first evaluation).

    Either way the run key carries the digest of the versions read in that tick, the run is preceded
    by an observation of ``system_under_test`` recording the same reading, and a system that cannot
    be built or cannot report its versions gives a SkipReason saying why.
    ``minimum_interval_seconds`` overrides the interval (300 s polling, 60 s watching).
    """

    def current() -> tuple[SystemInfo, dict[str, str]] | dg.SkipReason:
        try:
            info = live_info(settings)  # never a system object this long-lived process kept
        except InputError as exc:
            return dg.SkipReason(f"the system under test is not available: {exc.render()}")
        reason = unreachable_reason(info)
        if reason is not None:
            return dg.SkipReason(reason)
        return info, watched_versions(info)

    def launch(info, versions: dict[str, str], tags: dict[str, str], cursor: str) -> dg.SensorResult:
        key = system_change_run_id(datetime.now(UTC), versions)
        return dg.SensorResult(
            run_requests=[
                dg.RunRequest(partition_key=key, run_key=key, tags={TRIGGER_TAG: "system-change", **tags})
            ],
            dynamic_partitions_requests=[names.partitions.build_add_request([key])],
            cursor=cursor,
            asset_events=_input_observations(settings, names, info),
        )

    if minimum_interval_seconds is None:
        minimum_interval_seconds = VERSION_INTERVAL_S if watch_asset is None else WATCH_INTERVAL_S
    every = _every(minimum_interval_seconds)
    if watch_asset is None:
        description = (
            f"Reads the system under test's versions {every}, live (the reference index as on disk, what "
            "system.version_url / version_argv reports, a python system imported and built afresh in a "
            "process of its own) and launches run system-change-… when they change, tagged "
            "kebab-eval/changed (the changed fields) and kebab-eval/changed.<field> (old→new). The first "
            "evaluation only records; an unreachable system is skipped."
        )
    else:
        description = (
            f"Launches run system-change-… on each new materialization of {watch_asset.to_user_string()} "
            f"(checked {every}; tagged kebab-eval/watched-asset, and kebab-eval/changed… for versions, "
            "read live, that changed since). The first evaluation only records."
        )

    @dg.sensor(
        name=names.name("system_version_sensor"),
        job=job,
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=dg.DefaultSensorStatus.STOPPED,
        description=description,
    )
    def system_version_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
        previous = _read_cursor(context.cursor)
        if watch_asset is None:
            state = current()
            if isinstance(state, dg.SkipReason):
                return state
            info, versions = state
            if not versions:
                return dg.SkipReason(
                    "the system under test reports no versions to watch (set system.version_url or "
                    "system.version_argv, give a python system a versions() method, or give the sensor "
                    "an asset to watch)"
                )
            cursor = json.dumps(versions, sort_keys=True)
            if previous is None:
                return dg.SensorResult(
                    cursor=cursor, asset_events=[_rekeyed(system_observation(info), names)]
                )
            changes = changed_versions(previous, versions)
            if not changes:
                return dg.SkipReason("the system under test's versions are unchanged")
            return launch(info, versions, change_tags(changes), cursor)
        records = context.instance.fetch_materializations(watch_asset, limit=1).records
        latest = records[0].storage_id if records else None
        if previous is not None and (latest is None or latest == previous.get("storage_id")):
            # nothing to launch: the system is not built (a python system's factory is not called)
            return dg.SkipReason(f"no new materialization of {watch_asset.to_user_string()}")
        state = current()
        if isinstance(state, dg.SkipReason):
            return state
        info, versions = state
        cursor = json.dumps({"storage_id": latest, "versions": versions}, sort_keys=True)
        if previous is None:
            return dg.SensorResult(cursor=cursor)
        changes = changed_versions(previous.get("versions") or {}, versions)
        tags = {WATCHED_ASSET_TAG: watch_asset.to_user_string()[:63], **change_tags(changes)}
        return launch(info, versions, tags, cursor)

    return system_version_sensor


def freshness_of(settings: RunSettings, info: SystemInfo, store, now: datetime | None = None) -> Freshness:
    """The freshness verdict of the configured system at the versions ``info`` reports, over
    ``store``'s runs, at ``now`` (default: the current time)."""
    return freshness(
        store,
        identity_from_settings(settings.system),
        watched_versions(info),
        now or datetime.now(UTC),
        settings.freshness.max_hours,
    )


def _check_metadata(verdict: Freshness, info) -> dict[str, dg.MetadataValue]:
    metadata = {
        "max_hours": dg.MetadataValue.float(float(verdict.max_hours)),
        "current_version": dg.MetadataValue.text(system_data_version(info)),
        "current_versions": dg.MetadataValue.json(verdict.current_versions),
        "system": dg.MetadataValue.text(verdict.system_label),
        "finished_runs_of_version": dg.MetadataValue.int(verdict.runs_of_version),
    }
    if verdict.last_run_id is not None:
        metadata["last_passing_run"] = dg.MetadataValue.text(verdict.last_run_id)
        metadata["age_hours"] = dg.MetadataValue.float(round(verdict.age_hours, 4))
        metadata["last_passing_finished_at"] = dg.MetadataValue.text(verdict.last_finished.isoformat())
    return metadata


def build_freshness(settings: RunSettings, names: ChainNames = DEFAULT_NAMES):
    """The freshness check on ``system_under_test`` and the sensor that evaluates it every 30 min.

    The check passes when a run of the system's *current* version finished with every blocking
    gate passing within ``freshness.max_hours`` (:mod:`kebab_eval_pipeline.compare.freshness`);
    else it fails with WARN severity. It sits on ``system_under_test`` (the version it judges),
    which keeps it out of the evaluation job: a run does not evaluate its own freshness."""
    storage_key = names.resource("artifact_storage")
    asset_key = names.key("system_under_test")
    hours = settings.freshness.max_hours
    description = (
        f"Passes when a run of the system's current version finished with every blocking gate "
        f"passing within the last {hours:g} h (freshness.max_hours); warns otherwise. Evaluated "
        "every 30 minutes by freshness_check_sensor, or on demand."
    )

    def evaluation(store, now: datetime | None = None) -> dg.AssetCheckEvaluation:
        try:
            info = live_info(settings)
            problem = unreachable_reason(info)
        except InputError as exc:
            info, problem = None, f"the system under test is not available: {exc.render()}"
        if problem is not None:  # without the current version, no run can be said to be of it
            return dg.AssetCheckEvaluation(
                asset_key=asset_key,
                check_name=FRESHNESS_CHECK,
                passed=False,
                severity=dg.AssetCheckSeverity.WARN,
                description=f"cannot tell the current version: {problem}",
            )
        verdict = freshness_of(settings, info, store, now)
        return dg.AssetCheckEvaluation(
            asset_key=asset_key,
            check_name=FRESHNESS_CHECK,
            passed=verdict.passed,
            severity=dg.AssetCheckSeverity.WARN,
            metadata=_check_metadata(verdict, info),
            description=verdict.description,
        )

    @dg.asset_check(
        asset=asset_key,
        name=FRESHNESS_CHECK,
        blocking=False,
        required_resource_keys={storage_key},
        description=description,
    )
    def fresh_passing_evaluation(context) -> dg.AssetCheckResult:
        result = evaluation(getattr(context.resources, storage_key).store())
        return dg.AssetCheckResult(
            passed=result.passed,
            severity=result.severity,
            metadata=result.metadata,
            description=result.description,
        )

    @dg.sensor(
        name=names.name("freshness_check_sensor"),
        minimum_interval_seconds=FRESHNESS_INTERVAL_S,
        default_status=dg.DefaultSensorStatus.STOPPED,
        required_resource_keys={storage_key},
        description=f"Every 30 minutes evaluates the {FRESHNESS_CHECK} check of system_under_test "
        f"(a passing run of the current system version within {hours:g} h) and records the result on "
        "the asset's Checks tab; launches no run.",
    )
    def freshness_check_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        return dg.SensorResult(asset_events=[evaluation(getattr(context.resources, storage_key).store())])

    return fresh_passing_evaluation, freshness_check_sensor, evaluation


def build_automation(
    job: dg.UnresolvedAssetJobDefinition,
    settings: RunSettings,
    names: ChainNames = DEFAULT_NAMES,
    watch_asset: dg.AssetKey | None = None,
) -> Automation:
    """The chain's schedule, sensors and freshness check (see the module docstring)."""
    check, freshness_sensor, _ = build_freshness(settings, names)
    return Automation(
        schedules=[build_nightly_schedule(job, settings, names)],
        sensors=[
            build_golden_change_sensor(job, settings, names),
            build_system_version_sensor(job, settings, names, watch_asset),
            freshness_sensor,
        ],
        asset_checks=[check],
    )
