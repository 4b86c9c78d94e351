"""The Dagster layer: partitions, assets, gate checks, resources, IO manager, automation, the run
lock. Nothing is imported eagerly: ``registered_runs`` is read by the CLI's reading commands, which
never import Dagster. What a team's own Dagster project uses is named here and imported on first
use: :func:`evaluation_chain` (a whole chain under a name), :func:`evaluation_check` (a blocking
check on the team's own asset) and :class:`EvaluationChainComponent` (the chain as a Dagster
Component, configured by a ``defs.yaml``). This module is the package's ``dagster_dg_cli.registry_modules``
entry point: ``dg list components`` finds the component type among the names :func:`__dir__` lists."""

from __future__ import annotations

from typing import Any

_PUBLIC = {
    "EvaluationChainComponent": "kebab_eval_pipeline.orchestration.component",
    "evaluation_chain": "kebab_eval_pipeline.orchestration.factory",
    "evaluation_check": "kebab_eval_pipeline.orchestration.team_check",
}
__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    if name in _PUBLIC:
        import importlib

        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_PUBLIC])
