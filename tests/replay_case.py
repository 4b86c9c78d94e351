"""A tiny real run for CLI edge tests: three golden queries replayed from a trace, so a test
drives ``kebab-eval`` end to end (Dagster instance, storage, outputs) in a few seconds.

``write_case(folder, gates=…)`` writes ``gold.jsonl``, ``trace.jsonl`` and ``cfg.yaml``;
``cli(folder, *args, env=…)`` runs ``kebab-eval`` there (its own process, forked ready-imported:
:mod:`tests.forked_cli`) with a private ``DAGSTER_HOME``
(``folder/dagster_home`` unless the caller's ``env`` names one) and nothing else of the caller's
``KEBAB_EVAL_*`` / ``DAGSTER_*`` environment.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import yaml

from tests.forked_cli import run_cli

GOLD = [
    {"id": "Q1", "query": "how to install", "lang": "ko", "supports": [{"chunk_id": "c1"}]},
    {"id": "Q2", "query": "how to build", "supports": [{"chunk_id": "c2"}]},
    {"id": "Q3", "query": "how to run", "supports": [{"chunk_id": "c3"}]},
]
#: Q1 and Q2 find their gold chunk at rank 1; Q3 finds nothing relevant (MRR 2/3 overall, the
#: queries without a lang 0.5).
TRACE = [
    {"query_id": "Q1", "hits": [{"rank": 1, "chunk_id": "c1"}]},
    {"query_id": "Q2", "hits": [{"rank": 1, "chunk_id": "c2"}]},
    {"query_id": "Q3", "hits": [{"rank": 1, "chunk_id": "c9"}]},
]


def write_case(folder: Path, **config: Any) -> Path:
    """The three files of the case in ``folder``; ``config`` adds to (or replaces) the run
    config's keys. Returns the config's path."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, rows in (("gold.jsonl", GOLD), ("trace.jsonl", TRACE)):
        (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    doc = {
        "golden": "gold.jsonl",
        "system": {"kind": "replay", "path": "trace.jsonl"},
        "baseline": "none",
        **config,
    }
    path = folder / "cfg.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without any KEBAB_EVAL_* / DAGSTER_* setting, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KEBAB_EVAL_", "DAGSTER_"))}
    env.update(extra)
    return env


def cli(folder: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 300):
    """``kebab-eval ARGS`` run in ``folder``; a private DAGSTER_HOME unless ``env`` names one."""
    if env is None or "DAGSTER_HOME" not in env:
        home = folder / "dagster_home"
        home.mkdir(parents=True, exist_ok=True)
        env = {**(env if env is not None else clean_env()), "DAGSTER_HOME": str(home)}
    return run_cli(args, env=env, cwd=folder, timeout=timeout)
