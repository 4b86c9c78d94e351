"""A run's effective settings — the config file plus per-run overrides — without Dagster.

The Dagster resources (``EvalSettingsResource``, ``SystemUnderTestResource``) and the CLI's fail-fast
checks both come here, so ``kebab-eval run`` can refuse a bad config or golden file before it
imports Dagster or opens an instance, and still check exactly the settings the run will use.
"""

from __future__ import annotations

import os
from typing import Any

from kebab_eval_pipeline.chain.settings import RunSettings, load_settings, settings_from_dict
from kebab_eval_pipeline.sweep.grid import apply_variant, find_variant

#: The environment variable naming the config file the code location (and a CLI run without
#: ``--config``) loads.
CONFIG_ENV = "KEBAB_EVAL_CONFIG"
#: CLI override names of the system under test → keys of the config's ``system:`` block.
SYSTEM_OVERRIDES = {"system_kind": "kind", "mode": "mode", "chunk_size": "chunk_size"}
#: Overrides of top-level config keys.
SETTING_OVERRIDES = ("golden", "answers", "baseline", "k", "repeat")


def config_path(config_file: str | os.PathLike | None) -> str | None:
    """``config_file``, else ``$KEBAB_EVAL_CONFIG`` (set but empty counts as unset), else None
    (the defaults)."""
    return str(config_file) if config_file else os.environ.get(CONFIG_ENV) or None


def judge_overrides(
    judge: bool | None, model: str | None = None, prompt_version: str | None = None
) -> dict | None:
    """The ``judge:`` overrides (``{"judge": on, "model": …, "prompt_version": …}``, unset keys
    left out), or None when nothing about the judge is overridden (the file's block stands)."""
    if judge is None and model is None and prompt_version is None:
        return None
    return {
        "judge": judge,
        **{k: v for k, v in (("model", model), ("prompt_version", prompt_version)) if v is not None},
    }


def apply_overrides(
    base: RunSettings,
    overrides: dict[str, Any],
    kind: str | None = None,
    system_overrides: dict[str, Any] | None = None,
    judge: dict | None = None,
) -> RunSettings:
    """``base`` with top-level ``overrides`` (golden, answers, baseline, k), another system ``kind``
    (which starts from an empty ``system:`` block), ``system_overrides`` (mode, chunk_size) and the
    ``judge`` overrides of :func:`judge_overrides` applied. Returns ``base`` itself when nothing
    changes; raises InputError (source "run overrides") when the result is invalid."""
    system_overrides = system_overrides or {}
    if not overrides and not system_overrides and kind in (None, base.system.kind) and judge is None:
        return base
    # Only what the file set (and load_settings resolved): dumping every field would mark each
    # default as written, and a check of "set but without effect" (a per_query command's
    # max_restarts) would then refuse a file that never wrote it.
    doc = base.model_dump(exclude_unset=True)
    doc.update(overrides)
    if judge is not None:
        judge = dict(judge)
        on = judge.pop("judge")
        if on is False and not judge:
            doc["judge"] = None
        else:
            doc["judge"] = {**(doc.get("judge") or {}), **judge}
    if kind not in (None, base.system.kind):
        doc["system"] = {"kind": kind}
    doc["system"] = {"kind": base.system.kind, **doc.get("system", {}), **system_overrides}
    return settings_from_dict(doc, source="run overrides")


def settings_for_run(
    config_file: str | os.PathLike | None, overrides: dict[str, Any] | None = None
) -> RunSettings:
    """The settings ``build_definitions(config_file, overrides=overrides)`` gives its run, without
    building them: ``overrides`` are the CLI's (``golden``, ``answers``, ``baseline``, ``k``,
    ``repeat``, ``judge``, ``judge_model``, ``judge_prompt_version``, ``system_kind``, ``mode``,
    ``chunk_size``; None values are ignored). Raises InputError naming file and key."""
    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    system = {SYSTEM_OVERRIDES[k]: given[k] for k in SYSTEM_OVERRIDES if k in given}
    return apply_overrides(
        load_settings(config_path(config_file)),
        {k: given[k] for k in SETTING_OVERRIDES if k in given},
        kind=system.pop("kind", None),
        system_overrides=system,
        judge=judge_overrides(
            given.get("judge"), given.get("judge_model"), given.get("judge_prompt_version")
        ),
    )


def variant_settings(settings: RunSettings, run_id: str | None) -> RunSettings:
    """The settings of run ``run_id``: for a variant of ``settings.sweep``
    (``sweep-<name>-<variant>``, :mod:`kebab_eval_pipeline.sweep.grid`) the base settings with the
    variant's overrides applied (the ``sweep:`` block kept, so the run records which variant it
    is); for any other id (or None) ``settings`` itself. Every step of a run calls this with its
    partition key: a backfill cannot tag each partition, so the id says which variant it is.
    Raises InputError (source ``sweep variant <run id>``) if the variant's settings are invalid —
    which :func:`~kebab_eval_pipeline.chain.settings.sweep_problems` refuses when the config loads."""
    sweep = settings.sweep
    variant = None if sweep is None else find_variant(sweep.name, sweep.grid, run_id)
    if variant is None:
        return settings
    doc = settings.model_dump(exclude_unset=True)
    doc.pop("sweep", None)
    doc["system"] = {"kind": settings.system.kind, **doc.get("system", {})}
    varied = settings_from_dict(apply_variant(doc, variant.overrides), source=f"sweep variant {run_id}")
    return varied.model_copy(update={"sweep": sweep})
