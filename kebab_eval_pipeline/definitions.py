"""The code location (``defs``): assets, gate checks, resources, job and sensors.

Gates become asset checks at load time, so they come from the config file named
by ``KEBAB_EVAL_CONFIG`` (or the defaults). ``kebab-eval run --config FILE``
builds the same definitions from FILE in-process.
"""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg

from kebab_eval_pipeline.chain.run_overrides import SYSTEM_OVERRIDES
from kebab_eval_pipeline.chain.settings import RunSettings
from kebab_eval_pipeline.foundation.errors import InputError, Offender
from kebab_eval_pipeline.foundation.location import default_storage_base
from kebab_eval_pipeline.orchestration.factory import JOB_NAME, build_chain_definitions, chain_definitions
from kebab_eval_pipeline.orchestration.names import DEFAULT_NAMES, ChainNames
from kebab_eval_pipeline.orchestration.resources import (
    CONFIG_ENV,
    EvalSettingsResource,
    SystemUnderTestResource,
    settings_fields,
)
from kebab_eval_pipeline.orchestration.run_lock import locking_executor

EXECUTOR_ENV = "KEBAB_EVAL_EXECUTOR"
MAX_CONCURRENT_ENV = "KEBAB_EVAL_MAX_CONCURRENT"
__all__ = ["JOB_NAME", "build_definitions", "defs", "run_settings"]
#: The values of KEBAB_EVAL_EXECUTOR.
EXECUTORS = ("in_process", "multiprocess", "celery", "k8s")


def build_definitions(
    config_file: str | Path | None = None,
    storage: str | None = None,
    overrides: dict | None = None,
    chain: str | None = None,
    in_process: bool = False,
) -> dg.Definitions:
    """Definitions for one configuration. ``overrides`` are CLI flags: EvalSettingsResource fields
    plus ``system_kind``, ``mode`` and ``chunk_size`` for the system under test. ``chain``: the
    definitions of ``evaluation_chain(chain, config=config_file)`` instead of the package's own
    location (``kebab-eval … --chain``), its folder under ``storage`` when given. ``in_process``:
    the job runs in the calling process whatever ``KEBAB_EVAL_EXECUTOR`` says (``kebab-eval run``;
    the variable is still checked)."""
    config = str(config_file) if config_file else None
    overrides = dict(overrides or {})
    chosen = {SYSTEM_OVERRIDES[key]: overrides.pop(key) for key in list(overrides) if key in SYSTEM_OVERRIDES}
    system = SystemUnderTestResource(**chosen)
    if chain is not None:
        return chain_definitions(chain, config, system=system, overrides=overrides, base=storage)
    resource = EvalSettingsResource(config_file=config, **settings_fields(overrides))
    base = default_storage_base(storage or resource.load(system).storage)
    # The run worker holds the partition's lock for the whole run (one writer per run id).
    chosen = executor_from_environment()
    executor = locking_executor(dg.in_process_executor if in_process else chosen, base)
    return build_chain_definitions(DEFAULT_NAMES, resource, system, storage=base, executor=executor)


def executor_from_environment() -> dg.ExecutorDefinition:
    """In-process by default: the chain is strictly sequential, so separate step processes only add
    start-up time. ``KEBAB_EVAL_EXECUTOR=multiprocess`` runs each step in its own process (isolation,
    memory returned after each stage), at most ``KEBAB_EVAL_MAX_CONCURRENT`` at once (default: the
    CPU count). ``celery`` submits each step to Celery workers through the broker named by
    ``KEBAB_EVAL_CELERY_BROKER`` (orchestration/celery_app.py; the ``celery`` extra). ``k8s`` runs
    each step as a Kubernetes job (dagster-k8s's ``k8s_job_executor``, the ``k8s`` extra; image and
    namespace from the K8sRunLauncher or the run config, see docs/site/recipes/kubernetes.md), at most
    ``KEBAB_EVAL_MAX_CONCURRENT`` pods per run when set. Any other value is an InputError naming
    the variable."""
    kind = os.environ.get(EXECUTOR_ENV) or "in_process"
    limit = os.environ.get(MAX_CONCURRENT_ENV)
    problems = []
    if kind not in EXECUTORS:
        problems.append(Offender(EXECUTOR_ENV, f"{kind!r}: expected one of {', '.join(EXECUTORS)}"))
    if limit is not None and not (limit.isdigit() and int(limit) >= 1):
        problems.append(Offender(MAX_CONCURRENT_ENV, f"{limit!r}: expected a whole number ≥ 1"))
    if problems:
        raise InputError("invalid executor settings", problems)
    if kind == "in_process":
        return dg.in_process_executor
    if kind == "celery":
        from kebab_eval_pipeline.orchestration.celery_app import celery_executor

        return celery_executor()
    if kind == "k8s":
        return _k8s_executor(int(limit) if limit else None)
    # Steps fork from a server that has already imported dagster, pandas and this package, so a step
    # process starts in a fraction of a second rather than re-importing everything (~3 s each).
    config: dict = {"start_method": {"forkserver": {"preload_modules": ["kebab_eval_pipeline.definitions"]}}}
    if limit:
        config["max_concurrent"] = int(limit)
    return dg.multiprocess_executor.configured(config)


def _k8s_executor(limit: int | None) -> dg.ExecutorDefinition:
    try:
        from dagster_k8s import k8s_job_executor
    except ImportError:
        raise InputError(
            "the Kubernetes executor is not installed",
            [Offender(EXECUTOR_ENV, 'k8s needs the k8s extra: pip install -e ".[k8s]"')],
        ) from None
    if not limit:
        # the image, namespace and environment come from the instance's K8sRunLauncher (or the run
        # config's execution block), as dagster-k8s documents
        return k8s_job_executor
    # the same run config schema, with the pod limit filled in when the run config leaves it out
    return k8s_job_executor.configured(
        lambda config: {"max_concurrent": limit, **config},
        name="k8s",
        config_schema=k8s_job_executor.config_schema.as_field().config_type,
    )


def run_settings(defs: dg.Definitions, names: ChainNames = DEFAULT_NAMES) -> RunSettings:
    """The effective run settings of ``defs`` (the settings and system-under-test resources of the
    chain ``names``: the package's own by default)."""
    return defs.resources[names.resource("eval_settings")].load(
        defs.resources[names.resource("system_under_test")]
    )


def defs_from_environment() -> dg.Definitions:
    return build_definitions(os.environ.get(CONFIG_ENV) or None)


@dg.definitions
def defs() -> dg.Definitions:
    """The code location ``dagster dev`` loads (lazily: built on first use, from ``KEBAB_EVAL_CONFIG``)."""
    return defs_from_environment()
