"""The package uses Dagster's public API only: no module under ``kebab_eval_pipeline/`` imports
``dagster._…`` (statically, or through ``importlib.import_module("dagster._…")`` / ``__import__``),
so any Dagster 1.x from 1.13 on can be installed beside it (pyproject: ``dagster>=1.13,<2``)."""

from __future__ import annotations

import ast
from pathlib import Path

import kebab_eval_pipeline

PACKAGE = Path(kebab_eval_pipeline.__file__).parent


def _private(module: str | None) -> bool:
    return module is not None and (module == "dagster._" or module.startswith("dagster._"))


def private_dagster_imports(source: str, name: str = "<source>") -> list[str]:
    """Every import of a private Dagster module in ``source``: ``name:line: module``."""
    found = []
    for node in ast.walk(ast.parse(source, filename=name)):
        modules: list[str | None] = []
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            modules = [node.module] if node.level == 0 else []
            if node.module == "dagster":  # from dagster import _core
                modules += [f"dagster.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if called in ("import_module", "__import__") and node.args:
                first = node.args[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    modules = [first.value]
        found += [f"{name}:{node.lineno}: {m}" for m in modules if _private(m)]
    return found


def test_no_module_of_the_package_imports_private_dagster() -> None:
    offenders = [
        hit
        for path in sorted(PACKAGE.rglob("*.py"))
        for hit in private_dagster_imports(path.read_text(encoding="utf-8"), str(path.relative_to(PACKAGE)))
    ]
    assert offenders == []


def test_the_scan_sees_every_form_of_private_import() -> None:
    source = "\n".join(
        [
            "import dagster._core.instance",
            "from dagster._utils.warnings import BetaWarning",
            "from dagster import _core",
            "import importlib",
            "importlib.import_module('dagster._core.executor.base')",
            "__import__('dagster._utils')",
            "import dagster as dg",  # public: not reported
            "from dagster import Executor",
            "importlib.import_module('dagster_celery')",
        ]
    )
    assert private_dagster_imports(source) == [
        "<source>:1: dagster._core.instance",
        "<source>:2: dagster._utils.warnings",
        "<source>:3: dagster._core",
        "<source>:5: dagster._core.executor.base",
        "<source>:6: dagster._utils",
    ]
