"""Nightly runs and golden-file change detection. Both start STOPPED; turn them on in the UI
(Automation tab) or with ``dagster sensor start``.

The nightly trigger is a sensor rather than a schedule because only sensors may
register a dynamic partition together with the run that needs it.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime

import dagster as dg

from kebab_eval_pipeline.golden.load import golden_content_sha256
from kebab_eval_pipeline.orchestration.assets import golden_file_observation, system_observation
from kebab_eval_pipeline.orchestration.partitions import eval_runs
from kebab_eval_pipeline.run_ids import TRIGGER_TAG, golden_change_run_id, nightly_run_id, nightly_run_of_day
from kebab_eval_pipeline.settings import RunSettings
from kebab_eval_pipeline.systems.factory import build_system

NIGHTLY_HOUR_ENV = "KEBAB_EVAL_NIGHTLY_HOUR_UTC"


def _golden_sha256(settings: RunSettings) -> str:
    """The configured golden set's content hash (every file it is read from)."""
    paths, _, options = settings.golden_input()
    return golden_content_sha256(paths, options)


def build_sensors(job: dg.UnresolvedAssetJobDefinition, settings: RunSettings) -> list[dg.SensorDefinition]:
    @dg.sensor(
        job=job,
        minimum_interval_seconds=600,
        default_status=dg.DefaultSensorStatus.STOPPED,
        description="Every night after the configured UTC hour (env KEBAB_EVAL_NIGHTLY_HOUR_UTC, default 2) "
        "registers run nightly-YYYYMMDD-HHMMSS and materializes the evaluation chain for it (once per UTC "
        "day).",
    )
    def nightly_eval_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
        now = datetime.now(UTC)
        hour = int(os.environ.get(NIGHTLY_HOUR_ENV, "2"))
        if now.hour < hour:
            return dg.SkipReason(f"waiting for {hour:02d}:00 UTC")
        done = nightly_run_of_day(context.instance.get_dynamic_partitions(eval_runs.name), now.date())
        if done is not None:
            return dg.SkipReason(f"{done} already registered today")
        key = nightly_run_id(now)
        return dg.SensorResult(
            run_requests=[dg.RunRequest(partition_key=key, run_key=key, tags={TRIGGER_TAG: "nightly"})],
            dynamic_partitions_requests=[eval_runs.build_add_request([key])],
            # what the run will read, recorded first so the run's provenance is exact
            asset_events=[
                golden_file_observation(_golden_sha256(settings)),
                system_observation(build_system(settings).info()),
            ],
        )

    @dg.sensor(
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
        observation = golden_file_observation(sha)
        if context.cursor == sha:
            return dg.SkipReason("golden file unchanged")
        if context.cursor is None:
            return dg.SensorResult(cursor=sha, asset_events=[observation])
        key = golden_change_run_id(datetime.now(UTC), sha)
        return dg.SensorResult(
            run_requests=[dg.RunRequest(partition_key=key, run_key=key, tags={TRIGGER_TAG: "golden-change"})],
            dynamic_partitions_requests=[eval_runs.build_add_request([key])],
            cursor=sha,
            asset_events=[observation],
        )

    return [nightly_eval_sensor, golden_change_sensor]
