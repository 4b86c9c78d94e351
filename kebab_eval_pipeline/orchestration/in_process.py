"""A partition's run of a job, executed in this process through Dagster's public ``execute_job``,
with no step output kept in memory.

``JobDefinition.execute_in_process`` captures each step's output value in a dict held by the result
(so tests can ask ``result.output_value()``): for this chain the whole run would stay resident
until it ends — the golden tables, every retrieval shard's hits, the merged results, the per-query
scores. ``dg.execute_job`` captures none: its result loads an output through the job's IO manager
when asked, and our steps hand each other their values through the run store anyway.

``execute_job`` takes a reconstructable job. :func:`execute_partition` registers the job this
process already built and hands Dagster a pointer to :func:`reconstruct`, which returns that very
job (no second build); in another process (Dagster re-launching the run from its record) the
pointer rebuilds it with the :class:`Builder` named in it. The job must run on the in-process
executor (checked): the caller holds the partition's lock in this process, and the run writes on
its behalf (the ``kebab-eval/lock-owner`` tag, :mod:`.run_lock`).
"""

from __future__ import annotations

import importlib
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import dagster as dg

from kebab_eval_pipeline.orchestration.run_lock import OWNER_TAG, PARTITION_TAG

#: Jobs registered by a running :func:`execute_partition` of this process, by token.
_LIVE: dict[str, dg.JobDefinition] = {}


@dataclass(frozen=True)
class Builder:
    """How definitions are built again in another process: ``module.function(**kwargs)`` returns
    the ``dg.Definitions`` (plain values only in ``kwargs``: they are stored in the run's record)."""

    module: str
    function: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    def definitions(self) -> dg.Definitions:
        return getattr(importlib.import_module(self.module), self.function)(**self.kwargs)


def reconstruct(token: str, job_name: str, module: str, function: str, kwargs: Mapping[str, Any]):
    """The job a reconstructable pointer of :func:`execute_partition` names: the registered one
    while its run is under way in this process, else rebuilt by its :class:`Builder`."""
    live = _LIVE.get(token)
    if live is not None:
        return live
    return Builder(module, function, dict(kwargs)).definitions().resolve_job_def(job_name)


def execute_partition(
    defs: dg.Definitions,
    job_name: str,
    builder: Builder,
    *,
    instance: dg.DagsterInstance,
    partition_key: str,
    owner: str,
    run_config: Mapping[str, Any] | None = None,
    tags: Mapping[str, str] | None = None,
    asset_selection: Sequence[dg.AssetKey] | None = None,
) -> dg.JobExecutionResult:
    """Run partition ``partition_key`` of ``defs``' job ``job_name`` (all its assets, or
    ``asset_selection``) in this process, writing on behalf of lock owner ``owner``; failures are
    in the result (``success``, its events), not raised. ``builder`` rebuilds ``defs`` elsewhere."""
    job = defs.resolve_job_def(job_name)
    if job.executor_def.name != "in_process":
        raise ValueError(f"job {job_name} runs on the {job.executor_def.name} executor, not in this process")
    token = uuid.uuid4().hex
    _LIVE[token] = job
    try:
        pointer = dg.build_reconstructable_job(
            __name__,
            reconstruct.__name__,
            reconstructable_kwargs={
                "token": token,
                "job_name": job_name,
                "module": builder.module,
                "function": builder.function,
                "kwargs": dict(builder.kwargs),
            },
        )
        return dg.execute_job(
            pointer,
            instance=instance,
            run_config=dict(run_config or {}),
            tags={**(tags or {}), PARTITION_TAG: partition_key, OWNER_TAG: owner},
            asset_selection=list(asset_selection) if asset_selection is not None else None,
            raise_on_error=False,
        )
    finally:
        del _LIVE[token]


def run_of(instance: dg.DagsterInstance, owner: str):
    """The Dagster run written on behalf of lock owner ``owner`` (None: not created yet)."""
    runs = instance.get_runs(filters=dg.RunsFilter(tags={OWNER_TAG: owner}), limit=1)
    return runs[0] if runs else None
