"""Versions are read live, under the real Dagster daemon.

``dagster-daemon run`` ticks the ``system_version_sensor`` of three chains (``location.py``) served
by a long-lived code server (``dagster api grpc``, as ``dagster dev`` and a deployment run it). After
each sensor's first tick has recorded the versions, the indexes are rebuilt in place — the python
system's index file, the reference index folder — and the team's watched asset is materialized.
The next ticks must read the rebuilt system: a run keyed by the *new* versions' digest, tagged with
the changed field, and an observation of ``system_under_test`` recording the new version.

Runs are queued and never launched (``max_concurrent_runs: 0``): what the sensor asked for is the
subject here; the chain itself is tested elsewhere.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.definitions.run_request import InstigatorType
from dagster._core.errors import DagsterUserCodeUnreachableError
from dagster._core.scheduler.instigation import TickStatus
from dagster._core.test_utils import load_remote_repo
from dagster._core.workspace.context import WorkspaceProcessContext
from dagster._core.workspace.load_target import GrpcServerTarget
from dagster._grpc.client import DagsterGrpcClient

from kebab_eval_pipeline.foundation.demo import DEMO_CORPUS
from kebab_eval_pipeline.foundation.run_ids import versions_digest
from kebab_eval_pipeline.reference.index import MANIFEST_FILE, ReferenceIndex
from tests.conftest import REPO, write
from tests.forked_cli import start_cli
from tests.orchestration.live_versions.indexed_system import index_version_of, write_index

HERE = Path(__file__).parent
#: each wait: generous for a loaded two-core machine, far below what a stuck daemon would take
STARTUP_S = 90
TICK_S = 60

DOCS_V1 = [
    {"id": "brine-c1", "path": "basics/brine.md", "text": "salt water for pickles"},
    {"id": "koji-c1", "path": "koji/koji.md", "text": "koji grows on steamed rice"},
]
DOCS_V2 = [*DOCS_V1, {"id": "miso-c1", "path": "koji/miso.md", "text": "miso ferments soy with koji"}]


def _versions(docs: list[dict]) -> dict[str, str]:
    """The versions the python system reports for an index of ``docs`` (computed here, not by it)."""
    index = {"chunker_version": "lines-1", "docs": docs}
    return {"chunker_version": "lines-1", "index_version": index_version_of(index)}


def _build_reference(corpus: Path, out: Path) -> str:
    ReferenceIndex.build(corpus).save(out)
    return json.loads((out / MANIFEST_FILE).read_text(encoding="utf-8"))["index_version"]


class Daemon:
    """A code server and ``dagster-daemon run`` in a temp DAGSTER_HOME; the instance they write to."""

    def __init__(self, tmp_path: Path, config_dir: Path) -> None:
        self.home = tmp_path / "dagster_home"
        self.home.mkdir()
        # queued, never launched: the sensor's run requests are what is tested
        write(
            self.home / "dagster.yaml",
            "run_coordinator:\n  module: dagster.core.run_coordinator\n  class: QueuedRunCoordinator\n"
            "  config: {max_concurrent_runs: 0}\ntelemetry: {enabled: false}\n",
        )
        self.socket = tmp_path / "code.sock"
        self.workspace = write(
            tmp_path / "workspace.yaml",
            f"load_from:\n  - grpc_server:\n      socket: {self.socket}\n      location_name: team\n",
        )
        self.env = {
            **os.environ,
            "DAGSTER_HOME": str(self.home),
            "KEBAB_EVAL_TEST_LIVE_DIR": str(config_dir),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        }
        for name in ("KEBAB_EVAL_CONFIG", "KEBAB_EVAL_STORAGE"):
            self.env.pop(name, None)
        self.logs = tmp_path / "logs"
        self.logs.mkdir()
        self.processes: dict[str, subprocess.Popen] = {}

    def _start(self, name: str, module: str, args: list[str]) -> None:
        """``python -m module *args`` (what the console script runs), forked ready-imported
        (:func:`tests.forked_cli.start_cli`: Dagster's import is most of each one's start)."""
        with (self.logs / f"{name}.log").open("wb") as log:
            self.processes[name] = start_cli(
                args, env=self.env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, module=module
            )

    def log_tail(self) -> str:
        return "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in sorted(self.logs.iterdir())
        )

    @contextmanager
    def running(self) -> Iterator[dg.DagsterInstance]:
        """Start the code server and the daemon together (their start-ups overlap) on an instance whose
        storage already exists (as a deployment's does), then turn every
        sensor of the location on in the instance, as ``dagster sensor start`` would."""
        module = "tests.orchestration.live_versions.location"
        server = ["api", "grpc", "--socket", str(self.socket), "-m", module, "-a", "defs", "-d", str(REPO)]
        # the storage is created here, once: two processes creating a fresh SQLite schedule store at
        # the same moment can each stamp an alembic head, and the next to open it refuses it
        dg.DagsterInstance.from_config(str(self.home)).dispose()
        try:
            self._start("code_server", "dagster", server)  # `dagster api grpc …`
            self._start("daemon", "dagster._daemon", ["run", "-w", str(self.workspace)])  # dagster-daemon
            with dg.DagsterInstance.from_config(str(self.home)) as instance:
                self._start_sensors(instance)
                yield instance
        finally:
            for process in self.processes.values():
                process.terminate()
            for process in self.processes.values():
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()

    def _start_sensors(self, instance: dg.DagsterInstance) -> None:
        client = DagsterGrpcClient(socket=str(self.socket))
        deadline = time.monotonic() + STARTUP_S
        while True:
            if self.processes["code_server"].poll() is not None:
                pytest.fail(f"the code server exited\n{self.log_tail()}")
            try:
                client.ping("up")
                break
            except DagsterUserCodeUnreachableError:
                if time.monotonic() > deadline:
                    pytest.fail(f"the code server did not come up in {STARTUP_S} s\n{self.log_tail()}")
                time.sleep(0.2)
        target = GrpcServerTarget(host="localhost", port=None, socket=str(self.socket), location_name="team")
        with WorkspaceProcessContext(instance, target) as workspace:
            for sensor in load_remote_repo(workspace, "__repository__").get_sensors():
                instance.start_sensor(sensor)


def ticks(instance: dg.DagsterInstance) -> dict[str, list]:
    """Every sensor's ticks, oldest first."""
    out = {}
    for state in instance.all_instigator_state(instigator_type=InstigatorType.SENSOR):
        found = instance.get_ticks(state.instigator_origin_id, state.selector_id)
        out[state.instigator_name] = sorted(found, key=lambda t: t.timestamp)
    return out


def wait_for(daemon: Daemon, instance, done: Callable[[dict[str, list]], bool], what: str, timeout: float):
    deadline = time.monotonic() + timeout
    while True:
        seen = ticks(instance)
        if done(seen):
            return seen
        if daemon.processes["daemon"].poll() is not None or time.monotonic() > deadline:
            shown = {
                name: [(t.status.value, t.skip_reason, t.error and t.error.message) for t in ts]
                for name, ts in seen.items()
            }
            pytest.fail(f"{what}: not seen in {timeout} s; ticks: {shown}\n{daemon.log_tail()}")
        time.sleep(0.25)


FINISHED = (TickStatus.SUCCESS, TickStatus.SKIPPED, TickStatus.FAILURE)
SENSORS = {name: f"{name}__system_version_sensor" for name in ("polled", "watched", "ref")}


def test_a_rebuilt_index_is_read_at_the_next_tick(tmp_path):
    index_file = tmp_path / "python_index.json"
    write_index(index_file, DOCS_V1)
    corpus = tmp_path / "corpus"
    shutil.copytree(DEMO_CORPUS / "basics", corpus / "basics")
    ref_index = tmp_path / "ref_index"
    ref_old = _build_reference(corpus, ref_index)
    configs = tmp_path / "configs"
    write(
        configs / "python.yaml",
        f"system:\n  kind: python\n  callable: 'indexed_system:IndexedSystem'\n"
        f"  args: {{index_file: '{index_file}'}}\n  path: ['{HERE}']\n  response: {{hits: hits}}\n",
    )
    write(configs / "reference.yaml", f"system: {{kind: reference, index: '{ref_index}'}}\n")
    daemon = Daemon(tmp_path, configs)

    with daemon.running() as instance:
        # the first tick of each sensor records the versions (no run)
        recorded = lambda seen: all(  # noqa: E731
            any(t.status in FINISHED and t.cursor for t in seen.get(s, [])) for s in SENSORS.values()
        )
        first = wait_for(daemon, instance, recorded, "each sensor's first tick", STARTUP_S)
        assert not instance.get_runs()
        for name, sensor in SENSORS.items():
            assert all(t.status is not TickStatus.FAILURE for t in first[sensor]), (name, first[sensor])

        write_index(index_file, DOCS_V2)  # rebuilt in place, same path: the config does not change
        (corpus / "basics" / "miso-notes.md").write_text("# Miso notes\n\nMiso keeps for a year.\n")
        # the reference index rebuilt in place, its manifest keeping its old timestamps (as an index
        # unpacked from an archive with normalised times would): still a new index
        manifest = os.stat(ref_index / MANIFEST_FILE)
        ref_new = _build_reference(corpus, ref_index)
        os.utime(ref_index / MANIFEST_FILE, ns=(manifest.st_atime_ns, manifest.st_mtime_ns))
        instance.report_runless_asset_event(dg.AssetMaterialization(dg.AssetKey(["team", "index"])))
        rebuilt = time.time()

        # every sensor has begun and finished a tick since; a tick that began earlier may have read the
        # rebuilt system and be the one that launched (a python reading takes a process start)
        after = lambda seen: all(  # noqa: E731
            any(t.timestamp > rebuilt and t.status in FINISHED for t in seen.get(s, []))
            for s in SENSORS.values()
        )
        seen = wait_for(daemon, instance, after, "a tick after the rebuild", TICK_S)

        launched = {}
        for name, sensor in SENSORS.items():
            done = [t for t in seen[sensor] if t.status in FINISHED]
            with_runs = [t for t in done if t.run_keys]
            assert len(with_runs) == 1, (
                f"{sensor}: expected one run, after the rebuild; ticks: "
                f"{[(t.status.value, t.skip_reason, t.run_keys) for t in done]}"
            )
            [key] = with_runs[0].run_keys
            # a run key is unique per sensor only: polled and watched read one config, so both
            # sensors launch the same key when they tick in the same second (each chain has its own
            # partitions and store, so those are two runs that do not meet)
            [run] = instance.get_runs(
                filters=dg.RunsFilter(tags={"dagster/run_key": key, "dagster/sensor_name": sensor})
            )
            launched[name] = run

    old, new = _versions(DOCS_V1), _versions(DOCS_V2)
    change = f"{old['index_version']}→{new['index_version']}"
    for name in ("polled", "watched"):
        run = launched[name]
        # the run key carries the digest of the versions read after the rebuild
        assert run.tags["dagster/run_key"] == run.tags["dagster/partition"]
        assert run.tags["dagster/partition"].endswith("-" + versions_digest(new)[:8]), (name, run.tags)
        assert run.tags["kebab-eval/changed"] == "index_version"
        assert run.tags["kebab-eval/changed.index_version"] == change
        assert run.tags["kebab-eval/trigger"] == "system-change"
    assert launched["watched"].tags["kebab-eval/watched-asset"] == "team/index"

    ref = launched["ref"]
    assert ref_new != ref_old
    assert ref.tags["kebab-eval/changed"] == "index_version"
    assert ref.tags["kebab-eval/changed.index_version"] == f"{ref_old}→{ref_new}"

    # the observation made with the run records the version that is live now
    with dg.DagsterInstance.from_config(str(daemon.home)) as instance:
        live_versions = {"polled": new["index_version"], "watched": new["index_version"], "ref": ref_new}
        for name, live in live_versions.items():
            records = instance.fetch_observations(dg.AssetKey([name, "system_under_test"]), limit=1).records
            observed = records[0].asset_observation
            assert observed.metadata["index_version"].value == live, name
            assert observed.tags["dagster/data_version"] == live, name
