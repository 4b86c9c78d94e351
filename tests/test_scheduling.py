"""The test scheduling in tests/conftest.py names modules by path: a renamed or moved module would
silently fall out of it (the judge model loaded on two workers, a slow module started last)."""

from __future__ import annotations

from tests.conftest import REPO, SHARED_WORKER, SLOWEST_FIRST


def test_every_module_the_scheduling_names_exists():
    named = set(SHARED_WORKER) | {unit for unit in SLOWEST_FIRST if unit not in SHARED_WORKER.values()}
    missing = sorted(path for path in named if not (REPO / path).is_file())
    assert not missing, f"tests/conftest.py names modules that do not exist: {missing}"


def test_every_shared_worker_group_is_scheduled_first():
    assert set(SHARED_WORKER.values()) <= set(SLOWEST_FIRST)
