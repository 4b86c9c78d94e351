"""Shared fixtures: a real temporary Dagster instance and artifact storage per test."""

from __future__ import annotations

import subprocess
from pathlib import Path

import dagster as dg
import pytest
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

REPO = Path(__file__).resolve().parents[1]
SHARED_CORPUS = REPO.parent / "shared" / "corpora" / "kebab-docs"


@pytest.fixture
def instance(tmp_path, monkeypatch):
    """A real SQLite-backed Dagster instance in a temp DAGSTER_HOME (what `dagster dev` would use)."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.delenv("KEBAB_EVAL_STORAGE", raising=False)
    monkeypatch.delenv("KEBAB_EVAL_CONFIG", raising=False)
    with dg.instance_for_test(temp_dir=str(home)) as inst:
        yield inst


def vectors_or_skip() -> None:
    """Skip a vector test when the extra is missing — unless CI demands it (then fail loudly)."""
    import os

    from kebab_eval_pipeline.reference.vectors import vectors_available

    if vectors_available():
        return
    if os.environ.get("KEBAB_EVAL_REQUIRE_VECTORS") == "1":
        pytest.fail(
            "KEBAB_EVAL_REQUIRE_VECTORS=1 but the vectors extra is not installed "
            '(pip install -e ".[vectors]")'
        )
    pytest.skip('vectors extra not installed (pip install -e ".[vectors]")')


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


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(scope="session", autouse=True)
def _shared_index_cache(tmp_path_factory):
    """One reference-index cache for the whole session: the cache is keyed by corpus content and
    settings, so sharing it is safe, and a vector index of the demo corpus is embedded only once."""
    import os

    previous = os.environ.get("KEBAB_EVAL_INDEX_CACHE")
    os.environ["KEBAB_EVAL_INDEX_CACHE"] = str(tmp_path_factory.mktemp("index-cache"))
    yield
    if previous is None:
        os.environ.pop("KEBAB_EVAL_INDEX_CACHE", None)
    else:
        os.environ["KEBAB_EVAL_INDEX_CACHE"] = previous


def pytest_collection_modifyitems(config, items):
    """Under the ``thorough`` profile, scale each property test's own ``max_examples`` (an explicit
    ``@settings`` wins over a profile, so the profile alone could not raise them)."""
    import os

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
