"""Versions are read live, for every kind of system: what ``live_info`` returns after the system
changed on disk or behind its endpoint is the new version, however long this process has lived and
whatever it built before. The daemon test (``tests/orchestration/live_versions``) shows the same
through the sensor; these show each kind on its own, and what a live reading leaves alone."""

from __future__ import annotations

import gc
import json
import os
import shutil
import sys
import time
import weakref
from pathlib import Path

import pytest

from kebab_eval_pipeline.chain.settings import load_settings
from kebab_eval_pipeline.foundation.demo import DEMO_CORPUS
from kebab_eval_pipeline.reference.index import MANIFEST_FILE, ReferenceIndex
from kebab_eval_pipeline.systems.factory import build_system, live_info
from kebab_eval_pipeline.systems.version_changes import watched_versions
from tests.conftest import write
from tests.orchestration.live_versions.indexed_system import index_version_of, write_index
from tests.orchestration.test_system_version_sensor import VersionServer

DOCS = [{"id": "brine-c1", "path": "brine.md", "text": "salt water for pickles"}]
MORE_DOCS = [*DOCS, {"id": "miso-c1", "path": "miso.md", "text": "miso ferments soy"}]
HERE = Path(__file__).resolve().parents[1] / "orchestration" / "live_versions"


def live(settings) -> dict[str, str]:
    return watched_versions(live_info(settings))


def python_config(tmp_path: Path, index_file: Path) -> Path:
    return write(
        tmp_path / "python.yaml",
        f"system:\n  kind: python\n  callable: 'indexed_system:IndexedSystem'\n"
        f"  args: {{index_file: '{index_file}'}}\n  path: ['{HERE}']\n  response: {{hits: hits}}\n",
    )


def test_python_system_is_built_afresh_and_the_runs_object_is_left_alone(tmp_path):
    index_file = tmp_path / "index.json"
    write_index(index_file, DOCS)
    settings = load_settings(python_config(tmp_path, index_file))
    old = index_version_of({"chunker_version": "lines-1", "docs": DOCS})
    new = index_version_of({"chunker_version": "lines-1", "docs": MORE_DOCS})

    running = build_system(settings)  # the object a run in this process evaluates
    assert running.info().index_version == old
    assert live(settings) == {"chunker_version": "lines-1", "index_version": old}

    write_index(index_file, MORE_DOCS)  # rebuilt in place; the system remembers what it loaded
    assert running.backend.versions()["index_version"] == old  # asking the kept object again: stale
    assert live(settings) == {"chunker_version": "lines-1", "index_version": new}
    # a run going on in this process keeps its object and the versions it started with
    assert build_system(settings) is running
    assert running.info().index_version == old
    assert running.backend.query("search", "miso soy", 5, "q") == {"hits": []}  # the index it loaded


def test_python_system_that_cannot_be_built_now_is_an_input_error(tmp_path):
    from kebab_eval_pipeline.foundation.errors import InputError

    index_file = tmp_path / "index.json"
    write_index(index_file, DOCS)
    settings = load_settings(python_config(tmp_path, index_file))
    build_system(settings)  # built once, kept
    index_file.write_text("{half written", encoding="utf-8")  # a rebuild caught midway
    with pytest.raises(InputError) as raised:
        live_info(settings)
    assert "the factory raised JSONDecodeError" in raised.value.render()


def test_reference_index_replaced_with_its_old_timestamps(tmp_path):
    corpus = tmp_path / "corpus"
    shutil.copytree(DEMO_CORPUS / "basics", corpus)
    index = tmp_path / "index"
    ReferenceIndex.build(corpus).save(index)
    settings = load_settings(write(tmp_path / "ref.yaml", f"system: {{kind: reference, index: '{index}'}}\n"))
    before = live(settings)
    first = weakref.ref(build_system(settings))

    manifest = os.stat(index / MANIFEST_FILE)
    (corpus / "notes.md").write_text("# Notes\n\nMiso keeps for a year.\n", encoding="utf-8")
    ReferenceIndex.build(corpus).save(index)
    # as an index unpacked from an archive with normalised times: same modification time
    os.utime(index / MANIFEST_FILE, ns=(manifest.st_atime_ns, manifest.st_mtime_ns))
    on_disk = json.loads((index / MANIFEST_FILE).read_text(encoding="utf-8"))["index_version"]
    assert on_disk != before["index_version"]
    assert live(settings)["index_version"] == on_disk
    assert build_system(settings).info().index_version == on_disk
    # the process keeps one index per configuration: the replaced one is let go
    gc.collect()
    assert first() is None


def test_reference_corpus_file_replaced_with_its_old_size_and_timestamps(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    page = write(corpus / "page.md", "# Page\n\nsalt water for pickles\n")
    settings = load_settings(
        write(tmp_path / "ref.yaml", f"system: {{kind: reference, corpus: '{corpus}'}}\n")
    )
    before = live(settings)["index_version"]
    stamp = os.stat(page)
    page.write_text("# Page\n\nmint water for pickles\n", encoding="utf-8")
    assert os.stat(page).st_size == stamp.st_size
    os.utime(page, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    assert live(settings)["index_version"] != before


def test_command_version_argv_is_run_again(tmp_path):
    version_file = write(tmp_path / "version.json", json.dumps({"index_version": "i1", "build": "b1"}))
    printer = "import sys; print(open(sys.argv[1]).read())"
    config = {
        "system": {
            "kind": "command",
            "search_argv": [sys.executable, "-c", "print('{}')", "{query}"],
            "version_argv": [sys.executable, "-c", printer, str(version_file)],
        }
    }
    settings = load_settings(write(tmp_path / "command.yaml", json.dumps(config)))
    assert live(settings) == {"index_version": "i1", "reported_build": "b1"}
    version_file.write_text(json.dumps({"index_version": "i2", "build": "b1"}), encoding="utf-8")
    assert live(settings) == {"index_version": "i2", "reported_build": "b1"}


def test_http_version_url_is_fetched_again(tmp_path):
    server = VersionServer()
    try:
        server.report = {"embedding_model": "e5", "index_version": "i1"}
        urls = f"search_url: '{server.url}/search', version_url: '{server.url}/version'"
        config = f"system: {{kind: http, {urls}}}\n"
        settings = load_settings(write(tmp_path / "http.yaml", config))
        assert live(settings) == {"embedding_model": "e5", "index_version": "i1"}
        server.report = {"embedding_model": "e5", "index_version": "i2"}
        assert live(settings) == {"embedding_model": "e5", "index_version": "i2"}
        assert server.hits == 2
    finally:
        server.stop()


def test_replay_trace_rewritten_in_place(tmp_path):
    trace = tmp_path / "export.json"

    def export(index_version: str) -> None:
        doc = {
            "run_id": "r1",
            "versions": {"index_version": index_version, "chunker_version": "c1"},
            "system": {"mode": "lexical"},
            "per_query": [{"query_id": "q1", "hits": []}],
        }
        trace.write_text(json.dumps(doc), encoding="utf-8")

    export("i1")
    settings = load_settings(write(tmp_path / "replay.yaml", f"system: {{kind: replay, path: '{trace}'}}\n"))
    assert live(settings)["index_version"] == "i1"
    export("i2")
    assert live(settings)["index_version"] == "i2"


# -- the python reading's own process --------------------------------------------------------------


def module_system(tmp_path: Path, source: str, args: str = "{}") -> object:
    """Settings of a python system whose module (``live_mod_<test>``) holds ``source``."""
    name = f"live_mod_{tmp_path.name.replace('-', '_')}"
    write(tmp_path / "code" / f"{name}.py", source)
    config = (
        f"system: {{kind: python, callable: '{name}:build', args: {args}, path: ['{tmp_path / 'code'}'], "
        "timeout_s: 5}\n"
    )
    return load_settings(write(tmp_path / "module.yaml", config)), name


VERSIONED = """
import datetime, os, sys
REGISTRY = []  # module-level state, as a framework's global document registry

class System:
    def __init__(self, **args):
        REGISTRY.append(bytearray(1 << 20))
        print("building the system", flush=True)  # on stdout: must not reach the result
        os.write(1, b"a C library writing on fd 1\\n")
        self.args = args

    def search(self, query, k):
        return []

    def versions(self):
        kinds = {k: type(v).__name__ for k, v in sorted(self.args.items())}
        return {"index_version": "%s", "arg_types": str(kinds), "pid": os.getpid()}

def build(**args):
    return System(**args)
"""


def test_edited_code_is_seen_and_nothing_stays_in_this_process(tmp_path):
    settings, name = module_system(tmp_path, VERSIONED % "v1", "{since: 2024-05-01, n: 3}")
    first = live(settings)
    assert first["index_version"] == "v1"
    # args reach the factory as YAML gave them (a date stays a date), as in a run
    assert first["reported_arg_types"] == "{'n': 'int', 'since': 'date'}"
    assert int(first["reported_pid"]) != os.getpid()
    write(tmp_path / "code" / f"{name}.py", VERSIONED % "v2")  # the code edited, not re-imported here
    second = live(settings)
    assert second["index_version"] == "v2"
    assert second["reported_pid"] != first["reported_pid"]  # a process per reading
    assert name not in sys.modules  # its module, and what it registered, never lived here


def running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for a parent that does not reap it does not run)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def test_a_reading_past_its_time_limit_is_killed_and_reported(tmp_path, monkeypatch):
    from kebab_eval_pipeline.foundation.errors import InputError
    from kebab_eval_pipeline.systems import python_versions

    monkeypatch.setattr(python_versions, "READ_LIMIT_S", 3.0)
    pid_file = tmp_path / "pid"
    source = (
        "import os, time\n"
        f"def build():\n    open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n    time.sleep(60)\n"
    )
    settings, _ = module_system(tmp_path, source)
    with pytest.raises(InputError) as raised:
        live_info(settings)
    message = raised.value.render()
    assert "system.callable" in message and "no result within 3 s; process killed" in message
    pid, deadline = int(pid_file.read_text()), time.monotonic() + 10
    while running(pid) and time.monotonic() < deadline:  # SIGKILL sent; the kernel ends it shortly
        time.sleep(0.05)
    assert not running(pid)  # killed, not left sleeping out its minute


def test_a_reading_process_that_dies_is_reported_with_its_exit(tmp_path):
    from kebab_eval_pipeline.foundation.errors import InputError

    source = "import os, sys\ndef build():\n    sys.stderr.write('index is locked\\n')\n    os._exit(3)\n"
    settings, _ = module_system(tmp_path, source)
    with pytest.raises(InputError) as raised:
        live_info(settings)
    message = raised.value.render()
    assert "no result (exit code 3); stderr: index is locked" in message
