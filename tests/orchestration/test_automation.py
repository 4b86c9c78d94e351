"""Sensors evaluated against a real instance: partitions registered, runs requested, stopped by default."""

from __future__ import annotations

import re
import shutil
from datetime import UTC, datetime, timedelta

import dagster as dg

from kebab_eval_pipeline.definitions import build_definitions
from kebab_eval_pipeline.demo import DEMO_GOLDEN
from kebab_eval_pipeline.golden.load import golden_content_sha256
from kebab_eval_pipeline.run_ids import new_run_id, nightly_run_id, run_id_time


def sensor(defs: dg.Definitions, name: str) -> dg.SensorDefinition:
    return defs.resolve_sensor_def(name)


def test_sensors_are_stopped_by_default():
    defs = build_definitions()
    for name in ("nightly_eval_sensor", "golden_change_sensor"):
        assert sensor(defs, name).default_status == dg.DefaultSensorStatus.STOPPED


def test_nightly_sensor_registers_and_launches_once_a_day(instance, monkeypatch):
    monkeypatch.setenv("KEBAB_EVAL_NIGHTLY_HOUR_UTC", "0")
    defs = build_definitions()
    nightly = sensor(defs, "nightly_eval_sensor")
    # yesterday's nightly and other runs of today do not count as today's nightly
    yesterday = nightly_run_id(datetime.now(UTC) - timedelta(days=1))
    instance.add_dynamic_partitions("eval_runs", [yesterday, new_run_id(environ={"CI": "true"})])
    before = datetime.now(UTC).date()
    result = nightly(dg.build_sensor_context(instance=instance, definitions=defs))
    after = datetime.now(UTC).date()
    [request] = result.run_requests
    key = request.partition_key
    assert re.fullmatch(r"nightly-\d{8}-\d{6}", key) and run_id_time(key).date() in {before, after}
    assert request.tags == {"kebab-eval/trigger": "nightly"}
    assert result.dynamic_partitions_requests[0].partition_keys == [key]
    instance.add_dynamic_partitions("eval_runs", [key])
    again = nightly(dg.build_sensor_context(instance=instance, definitions=defs))
    assert isinstance(again, dg.SkipReason) and f"{key} already registered" in again.skip_message


def test_nightly_sensor_counts_a_nightly_of_the_old_form(instance, monkeypatch):
    """An instance upgraded in the day keeps one nightly: nightly-YYYY-MM-DD counts for its day."""
    monkeypatch.setenv("KEBAB_EVAL_NIGHTLY_HOUR_UTC", "0")
    defs = build_definitions()
    today = datetime.now(UTC)
    # today's and tomorrow's, so the evaluation below sees one even if midnight passes meanwhile
    old = [f"nightly-{day:%Y-%m-%d}" for day in (today, today + timedelta(days=1))]
    instance.add_dynamic_partitions("eval_runs", old)
    result = sensor(defs, "nightly_eval_sensor")(dg.build_sensor_context(instance=instance, definitions=defs))
    assert isinstance(result, dg.SkipReason) and "already registered today" in result.skip_message


def test_nightly_sensor_waits_for_its_hour(instance, monkeypatch):
    monkeypatch.setenv("KEBAB_EVAL_NIGHTLY_HOUR_UTC", "24")  # never reached
    defs = build_definitions()
    result = sensor(defs, "nightly_eval_sensor")(dg.build_sensor_context(instance=instance, definitions=defs))
    assert isinstance(result, dg.SkipReason) and "waiting" in result.skip_message


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
