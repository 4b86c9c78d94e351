"""The system-version sensor against a real http system on 127.0.0.1 whose ``/version`` report
changes, the reference system with another chunk size, a system that is down, and a watched
asset of a team's own pipeline."""

from __future__ import annotations

import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import dagster as dg
import pytest

from kebab_eval_pipeline.definitions import JOB_NAME, build_definitions, run_settings
from kebab_eval_pipeline.orchestration.automation import WATCHED_ASSET_TAG, build_system_version_sensor
from kebab_eval_pipeline.orchestration.names import ChainNames
from tests.conftest import write

SENSOR = "system_version_sensor"


class VersionServer:
    """A loopback HTTP server whose ``GET /version`` answers :attr:`report` (JSON)."""

    def __init__(self) -> None:
        self.report: dict = {}
        self.hits = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner.hits += 1
                body = json.dumps(owner.report).encode()
                self.send_response(200 if self.path == "/version" else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def version_server():
    server = VersionServer()
    yield server
    server.stop()


def http_defs(tmp_path, url: str) -> dg.Definitions:
    config = write(
        tmp_path / "http.yaml",
        f"system: {{kind: http, search_url: '{url}/search', version_url: '{url}/version', retries: 0, "
        "timeout_s: 5}\n",
    )
    return build_definitions(config)


def evaluate(defs: dg.Definitions, instance, cursor: str | None = None):
    context = dg.build_sensor_context(instance=instance, definitions=defs, cursor=cursor)
    return defs.resolve_sensor_def(SENSOR)(context)


def test_http_version_change_launches_a_run_tagged_with_exactly_the_changed_fields(
    instance, tmp_path, version_server
):
    version_server.report = {"chunker_version": "c1", "embedding_model": "e5", "build": "b6", "coverage": {}}
    defs = http_defs(tmp_path, version_server.url)

    first = evaluate(defs, instance)
    recorded = {"chunker_version": "c1", "embedding_model": "e5", "reported_build": "b6"}
    assert json.loads(first.cursor) == recorded and not first.run_requests  # records, launches nothing
    [observation] = first.asset_events
    assert observation.asset_key == dg.AssetKey("system_under_test")
    assert observation.metadata["chunker_version"].value == "c1"

    same = evaluate(defs, instance, first.cursor)
    assert isinstance(same, dg.SkipReason)
    assert same.skip_message == "the system under test's versions are unchanged"

    version_server.report = {"chunker_version": "c2", "embedding_model": "e5", "build": "b7"}
    changed = evaluate(defs, instance, first.cursor)
    new = {"chunker_version": "c2", "embedding_model": "e5", "reported_build": "b7"}
    assert json.loads(changed.cursor) == new
    [request] = changed.run_requests
    digest = hashlib.sha256(json.dumps(new, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    assert re.fullmatch(rf"system-change-\d{{8}}-\d{{6}}-{digest[:8]}", request.partition_key)
    assert request.run_key == request.partition_key
    assert request.tags == {
        "kebab-eval/trigger": "system-change",
        "kebab-eval/changed": "chunker_version,reported_build",
        "kebab-eval/changed.chunker_version": "c1→c2",
        "kebab-eval/changed.reported_build": "b6→b7",
    }
    assert changed.dynamic_partitions_requests[0].partition_keys == [request.partition_key]
    observed = {e.asset_key.path[-1]: e for e in changed.asset_events}
    assert observed["system_under_test"].metadata["chunker_version"].value == "c2"
    assert set(observed) == {"system_under_test", "golden_file"}

    # a field that disappears, one that appears, and a value longer than a tag may hold
    version_server.report = {"chunker_version": "c2", "index_version": "i" * 80, "build": "b7"}
    grown = evaluate(defs, instance, changed.cursor)
    [request] = grown.run_requests
    assert request.tags["kebab-eval/changed"] == "embedding_model,index_version"
    assert request.tags["kebab-eval/changed.embedding_model"] == "e5→(none)"
    assert request.tags["kebab-eval/changed.index_version"] == "(none)→" + "i" * 30 + "…"
    assert all(len(v) <= 63 for v in request.tags.values())


def test_a_system_that_is_down_is_skipped_with_its_reason(instance, tmp_path):
    down = VersionServer()
    url = down.url
    down.stop()  # nothing listens on the port any more
    defs = http_defs(tmp_path, url)
    result = evaluate(defs, instance, json.dumps({"chunker_version": "c1"}))
    assert isinstance(result, dg.SkipReason)
    assert result.skip_message.startswith("the system under test could not report its versions: ")
    assert "ConnectError" in result.skip_message


def test_a_system_reporting_no_versions_is_skipped(instance, tmp_path, version_server):
    version_server.report = {"coverage": {"indexed_docs": 3}, "nested": {"a": 1}}  # nothing to watch
    result = evaluate(http_defs(tmp_path, version_server.url), instance)
    assert isinstance(result, dg.SkipReason)
    assert result.skip_message.startswith("the system under test reports no versions to watch")


def test_a_system_reporting_an_error_status_is_skipped(instance, tmp_path, version_server):
    defs = http_defs(tmp_path, version_server.url + "/missing")  # /missing/version answers 404
    result = evaluate(defs, instance)
    assert isinstance(result, dg.SkipReason) and "404" in result.skip_message


def test_reference_system_with_another_chunk_size(instance, tmp_path):
    before = build_definitions()
    first = evaluate(before, instance)
    recorded = json.loads(first.cursor)
    assert recorded["chunker_version"] == "md-heading-2:size=800:overlap=0"

    after = build_definitions(overrides={"chunk_size": 300})
    changed = evaluate(after, instance, first.cursor)
    [request] = changed.run_requests
    new_index = json.loads(changed.cursor)["index_version"]
    assert request.tags["kebab-eval/changed"] == "chunker_version,index_version"
    assert request.tags["kebab-eval/changed.chunker_version"] == (
        "md-heading-2:size=800:overlap=0→md-heading-2:size=300:overlap=0"
    )
    assert request.tags["kebab-eval/changed.index_version"] == f"{recorded['index_version']}→{new_index}"
    assert set(request.tags) == {
        "kebab-eval/trigger",
        "kebab-eval/changed",
        "kebab-eval/changed.chunker_version",
        "kebab-eval/changed.index_version",
    }


def test_a_missing_reference_corpus_is_skipped(instance, tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.md").write_text("# A\n\nsome text\n")
    defs = build_definitions(write(tmp_path / "c.yaml", f"system: {{kind: reference, corpus: '{corpus}'}}\n"))
    (corpus / "a.md").unlink()
    corpus.rmdir()
    result = evaluate(defs, instance)
    assert isinstance(result, dg.SkipReason)
    assert result.skip_message.startswith(
        "the system under test is not available: reference corpus not found"
    )


def test_watched_asset_materializations_trigger_runs(instance, tmp_path, version_server):
    version_server.report = {"chunker_version": "c1"}
    defs = http_defs(tmp_path, version_server.url)
    team_index = dg.AssetKey(["search_team", "index"])
    watch = build_system_version_sensor(
        dg.define_asset_job(JOB_NAME), run_settings(defs), ChainNames(), watch_asset=team_index
    )

    def tick(cursor=None):
        return watch(dg.build_sensor_context(instance=instance, cursor=cursor))

    instance.report_runless_asset_event(dg.AssetMaterialization(team_index))
    first = tick()
    assert not first.run_requests  # the first evaluation records the latest materialization
    asked = version_server.hits
    nothing_new = tick(first.cursor)
    assert nothing_new.skip_message == "no new materialization of search_team/index"
    assert version_server.hits == asked  # no new materialization: the system is not even asked

    version_server.report = {"chunker_version": "c2"}
    instance.report_runless_asset_event(dg.AssetMaterialization(team_index))
    rebuilt = tick(first.cursor)
    [request] = rebuilt.run_requests
    assert request.partition_key.startswith("system-change-")
    assert request.tags == {
        "kebab-eval/trigger": "system-change",
        WATCHED_ASSET_TAG: "search_team/index",
        "kebab-eval/changed": "chunker_version",
        "kebab-eval/changed.chunker_version": "c1→c2",
    }
    # a new materialization with the same versions still launches (the asset is the signal)
    instance.report_runless_asset_event(dg.AssetMaterialization(team_index))
    again = tick(rebuilt.cursor)
    [request] = again.run_requests
    assert request.tags == {"kebab-eval/trigger": "system-change", WATCHED_ASSET_TAG: "search_team/index"}


def test_prefixed_chain_names_its_sensor_and_partitions(tmp_path, version_server):
    version_server.report = {"chunker_version": "c1"}
    defs = http_defs(tmp_path, version_server.url)
    names = ChainNames("staging")
    sensor = build_system_version_sensor(dg.define_asset_job("staging__run"), run_settings(defs), names)
    assert sensor.name == "staging__system_version_sensor"
    with dg.instance_for_test() as instance:
        first = sensor(dg.build_sensor_context(instance=instance))
        version_server.report = {"chunker_version": "c2"}
        changed = sensor(dg.build_sensor_context(instance=instance, cursor=first.cursor))
    assert first.asset_events[0].asset_key == dg.AssetKey(["staging", "system_under_test"])
    assert changed.dynamic_partitions_requests[0].partitions_def_name == "staging__eval_runs"
