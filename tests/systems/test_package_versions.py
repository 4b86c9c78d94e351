"""Which installed distribution owns a system's module: a wheel that ships a stray top-level package
of the same name as the user's own must not be named after it (ppi-python installs ``tests``)."""

from __future__ import annotations

import sys
import types

import pytest

from kebab_eval_pipeline.systems import package_versions


def _install_dist(site, name, top, files):
    info = site / f"{name.replace('-', '_')}-1.2.3.dist-info"  # as installers normalise it
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.2.3\n")
    (info / "top_level.txt").write_text(f"{top}\n")
    (info / "RECORD").write_text("".join(f"{f},,\n" for f in files))
    for f in files:
        (site / f).parent.mkdir(parents=True, exist_ok=True)
        (site / f).write_text("")


@pytest.fixture
def site(tmp_path, monkeypatch):
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    for cached in (
        package_versions._top_level_owners,
        package_versions._files_of,
        package_versions._ships_files_under,
    ):
        cached.cache_clear()
    yield site
    for cached in (
        package_versions._top_level_owners,
        package_versions._files_of,
        package_versions._ships_files_under,
    ):
        cached.cache_clear()


def _object_from_module(monkeypatch, module_name, file):
    module = types.ModuleType(module_name)
    module.__file__ = str(file)
    monkeypatch.setitem(sys.modules, module_name, module)
    cls = type("System", (), {"__module__": module_name})
    return cls()


def test_a_stray_top_level_package_in_a_wheel_does_not_own_the_users_package(site, tmp_path, monkeypatch):
    _install_dist(site, "stray-wheel", "strayish_tests", ["strayish_tests/__init__.py"])
    own = tmp_path / "project" / "strayish_tests" / "systems.py"
    own.parent.mkdir(parents=True)
    own.write_text("")
    system = _object_from_module(monkeypatch, "strayish_tests.systems", own)
    assert package_versions.object_packages(system) == {}


def test_the_wheels_own_module_is_named_with_its_version(site, monkeypatch):
    _install_dist(site, "real-wheel", "realish_pkg", ["realish_pkg/__init__.py", "realish_pkg/core.py"])
    system = _object_from_module(monkeypatch, "realish_pkg.core", site / "realish_pkg" / "core.py")
    assert package_versions.object_packages(system) == {"real-wheel": "1.2.3"}


def test_an_editable_install_ships_no_files_under_its_name_and_still_owns_its_module(
    site, tmp_path, monkeypatch
):
    _install_dist(site, "editable-pkg", "editish_pkg", ["__editable__.editish_pkg.pth"])
    source = tmp_path / "checkout" / "editish_pkg" / "app.py"
    source.parent.mkdir(parents=True)
    source.write_text("")
    system = _object_from_module(monkeypatch, "editish_pkg.app", source)
    assert package_versions.object_packages(system) == {"editable-pkg": "1.2.3"}
