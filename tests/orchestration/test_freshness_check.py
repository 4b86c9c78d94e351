"""The freshness check: the last passing run of the current system version, by stored runs whose
finish times are set by hand, and the check executed by Dagster on ``system_under_test``."""

from __future__ import annotations

import json
import socket
from datetime import UTC, datetime, timedelta

import dagster as dg
import pytest

from kebab_eval_pipeline.compare.freshness import freshness
from kebab_eval_pipeline.definitions import build_definitions, run_settings
from kebab_eval_pipeline.orchestration.automation import FRESHNESS_CHECK
from kebab_eval_pipeline.store.artifact_store import MANIFEST, ArtifactStore
from kebab_eval_pipeline.systems.factory import build_system
from kebab_eval_pipeline.systems.identity import identity_from_settings
from kebab_eval_pipeline.systems.version_changes import watched_versions
from tests.conftest import write

NOW = datetime(2025, 3, 10, 12, 0, tzinfo=UTC)
IDENTITY = {
    "kind": "http",
    "target": "http://search.local/search",
    "mode": None,
    "name": None,
    "label": "http x",
}
OTHER = {**IDENTITY, "target": "http://other.local/search"}
VERSIONS = {"chunker_version": "c2", "reported_build": "b7"}


def gate(name: str, passed: bool, blocking: bool = True, skipped: bool = False) -> dict:
    return {"name": name, "passed": passed, "blocking": blocking, "skipped": skipped}


def store_run(
    store: ArtifactStore,
    run_id: str,
    finished: datetime | None,
    *,
    identity: dict = IDENTITY,
    versions: dict | None = None,
    reported: dict | None = None,
    gates: list | None = None,
    comparison_gates: list | None = None,
    healthy: bool = True,
    role: dict | None = None,
) -> None:
    """A run's run_metrics (and, when ``finished``, its comparison_report written at that time)."""
    versions = {"chunker_version": "c2", "index_version": None} if versions is None else versions
    system = {"kind": identity["kind"], "identity": identity, **(reported or {"reported_build": "b7"})}
    info = {
        "created_at": (finished or NOW).isoformat(),
        "versions": versions,
        "system": system,
        "system_health": {"blocking": True, "healthy": healthy},
        "gates": gates or [gate("gate_mrr_min", True)],
        **({"role": role} if role else {}),
    }
    store.write("run_metrics", run_id, {}, info)
    if finished is not None:
        store.write("comparison_report", run_id, {}, {"gates": comparison_gates or []})
        path = store.root / "comparison_report" / run_id / MANIFEST
        manifest = json.loads(path.read_text())
        manifest["written_at"] = finished.isoformat()  # the finish time, set by hand
        path.write_text(json.dumps(manifest))


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> ArtifactStore:
    s = ArtifactStore(tmp_path_factory.mktemp("store"))
    hours = lambda h: NOW - timedelta(hours=h)  # noqa: E731
    store_run(s, "old-pass", hours(30))
    store_run(s, "pass-20h", hours(20))
    # newer, but not passing or not of the current version: none of these counts
    store_run(s, "blocking-gate-failed", hours(1), gates=[gate("gate_mrr_min", False)])
    store_run(s, "regression-failed", hours(1.5), comparison_gates=[gate("gate_mrr_max_drop", False)])
    store_run(s, "unhealthy", hours(2), healthy=False)
    store_run(s, "other-chunker", hours(0.5), versions={"chunker_version": "c1"})
    store_run(s, "other-build", hours(0.5), reported={"reported_build": "b6"})
    store_run(s, "other-system", hours(0.5), identity=OTHER)
    # of the current version and passing, but not a run of the system's own settings
    store_run(s, "a-variant", hours(0.2), role={"role": "sweep-variant", "source": "", "sweep": "sizes"})
    store_run(s, "an-experiment", hours(0.2), role={"role": "experiment", "source": "", "sweep": None})
    store_run(s, "unfinished", None)
    store_run(s, "finishes-later", NOW + timedelta(hours=1))
    return s


def test_last_passing_run_of_the_current_version(store):
    verdict = freshness(store, IDENTITY, VERSIONS, NOW, max_hours=26)
    assert verdict.passed and verdict.last_run_id == "pass-20h"
    assert verdict.age_hours == 20.0
    assert verdict.last_finished == NOW - timedelta(hours=20)
    # pass-20h, old-pass, and the three that finished and failed
    assert verdict.runs_of_version == 5
    assert verdict.description == (
        "last passing evaluation of the current version of http x: pass-20h, 20.00 h ago (within 26 h)"
    )


def test_too_old_fails_with_its_age(store):
    verdict = freshness(store, IDENTITY, VERSIONS, NOW, max_hours=19.5)
    assert not verdict.passed and verdict.last_run_id == "pass-20h" and verdict.age_hours == 20.0
    assert verdict.description.endswith("20.00 h ago (older than 19.5 h)")
    # exactly max_hours old still passes
    assert freshness(store, IDENTITY, VERSIONS, NOW, max_hours=20).passed
    # a run that finished after `now` is not seen; later, it is the last passing run
    later = freshness(store, IDENTITY, VERSIONS, NOW + timedelta(hours=3, minutes=45), max_hours=26)
    assert (later.last_run_id, later.age_hours) == ("finishes-later", 2.75)


def test_a_non_blocking_or_skipped_gate_does_not_fail_a_run(tmp_path):
    store = ArtifactStore(tmp_path)
    store_run(
        store,
        "warned",
        NOW - timedelta(hours=3),
        gates=[gate("gate_chr_min", False, blocking=False), gate("gate_mrr_min", False, skipped=True)],
    )
    verdict = freshness(store, IDENTITY, VERSIONS, NOW, max_hours=4)
    assert (verdict.passed, verdict.last_run_id, verdict.age_hours) == (True, "warned", 3.0)


def test_a_new_version_has_no_passing_run(store):
    verdict = freshness(store, IDENTITY, {**VERSIONS, "chunker_version": "c3"}, NOW, max_hours=26)
    assert not verdict.passed
    assert (verdict.last_run_id, verdict.age_hours, verdict.runs_of_version) == (None, None, 0)
    assert verdict.description == "no passing evaluation of the current version of http x"
    # a version the system does not report now is not compared: only the build is
    verdict = freshness(store, IDENTITY, {"reported_build": "b6"}, NOW, max_hours=26)
    assert verdict.last_run_id == "other-build" and verdict.age_hours == 0.5


def test_check_on_system_under_test_executes_with_warn_severity(instance, tmp_path):
    base = tmp_path / "artifacts"
    config = write(tmp_path / "fresh.yaml", f"freshness: {{max_hours: 2}}\nstorage: '{base}'\n")
    defs = build_definitions(config)
    settings = run_settings(defs)
    store = ArtifactStore(base)
    now = datetime.now(UTC)
    info = build_system(settings).info()
    identity = identity_from_settings(settings.system)
    store_run(
        store, "ref-3h", now - timedelta(hours=3), identity=identity, versions=info.versions(), reported={}
    )
    key = dg.AssetCheckKey(dg.AssetKey("system_under_test"), FRESHNESS_CHECK)
    job = defs.resolve_implicit_global_asset_job_def().get_subset(
        asset_selection=set(), asset_check_selection={key}
    )

    def run_check() -> dg.AssetCheckEvaluation:
        result = job.execute_in_process(instance=instance)
        [evaluation] = result.get_asset_check_evaluations()
        return evaluation

    stale = run_check()
    assert (stale.passed, stale.severity) == (False, dg.AssetCheckSeverity.WARN)
    assert stale.metadata["last_passing_run"].value == "ref-3h"
    assert 3 <= stale.metadata["age_hours"].value < 3.01
    assert stale.metadata["max_hours"].value == 2.0
    assert stale.metadata["current_version"].value == info.index_version
    assert stale.metadata["current_versions"].value == watched_versions(info)

    store_run(
        store, "ref-1h", now - timedelta(hours=1), identity=identity, versions=info.versions(), reported={}
    )
    fresh = run_check()
    assert fresh.passed and fresh.metadata["last_passing_run"].value == "ref-1h"
    assert 1 <= fresh.metadata["age_hours"].value < 1.01
    # the UI's check history holds both evaluations
    record = instance.event_log_storage.get_latest_asset_check_execution_by_key([key])[key]
    assert record.event.asset_check_evaluation.passed


def test_a_system_that_cannot_report_its_version_fails_the_check(instance, tmp_path):
    """An http system whose version endpoint is down: no stored run can be said to be of its
    current version, so the check warns and says why (the sensor does not crash)."""
    with socket.socket() as probe:  # a loopback port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    config = write(
        tmp_path / "down.yaml",
        f"system: {{kind: http, search_url: '{url}/search', version_url: '{url}/version', timeout_s: 5}}\n"
        f"storage: '{tmp_path / 'artifacts'}'\n",
    )
    defs = build_definitions(config)
    context = dg.build_sensor_context(
        instance=instance,
        definitions=defs,
        resources={"artifact_storage": defs.resources["artifact_storage"]},
    )
    [evaluation] = defs.resolve_sensor_def("freshness_check_sensor").evaluate_tick(context).asset_events
    assert (evaluation.passed, evaluation.severity) == (False, dg.AssetCheckSeverity.WARN)
    assert evaluation.description.startswith(
        "cannot tell the current version: the system under test could not report its versions: ConnectError"
    )
