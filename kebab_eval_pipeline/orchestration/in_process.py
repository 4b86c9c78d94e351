"""A job run in this process without Dagster keeping every step's output in memory.

``JobDefinition.execute_in_process`` captures each step's output value in a dict held by the
result (so tests can ask ``result.output_value()``). For this chain that means the whole run stays
resident until the run ends: the golden tables, every retrieval shard's hits, the merged results,
the per-query scores — at a million queries × 10 hits, most of an 11.5 GiB peak. Our steps write
their outputs through IO managers and downstream steps read them back, so nothing needs the
captured values: :func:`execute_in_process` runs the job exactly as Dagster's method does, with
output capture off.

It goes through Dagster's own (internal) in-process machinery, the same calls its method makes;
the package pins Dagster to one minor version, and ``tests/orchestration/test_in_process.py``
fails if the result starts capturing outputs again or the call's behaviour drifts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def execute_in_process(
    job_def,
    *,
    instance,
    partition_key: str | None = None,
    run_config: Mapping[str, Any] | None = None,
    raise_on_error: bool = True,
    asset_selection: Sequence | None = None,
    run_id: str | None = None,
    tags: Mapping[str, str] | None = None,
):
    """``job_def.execute_in_process(...)`` (same arguments, same ``ExecuteInProcessResult``:
    events, success, materializations, check evaluations) but with no step output kept in memory:
    ``result.output_value()`` is not available."""
    from dagster._core.definitions.job_base import InMemoryJob
    from dagster._core.definitions.partitions.context import partition_loading_context
    from dagster._core.execution.execute_in_process import (
        core_execute_in_process,
        merge_run_tags,
        type_check_and_normalize_args,
    )

    run_config, op_selection, asset_selection, resource_defs, partition_key, input_values = (
        type_check_and_normalize_args(
            run_config=run_config,
            partition_key=partition_key,
            op_selection=None,
            asset_selection=asset_selection,
            input_values=None,
            resources=None,
        )
    )
    ephemeral_job = job_def.as_ephemeral_job(
        resource_defs=resource_defs,
        input_values=input_values,
        op_selection=op_selection,
        asset_selection=asset_selection,
    )
    if partition_key and ephemeral_job.partitions_def:
        with partition_loading_context(dynamic_partitions_store=instance) as ctx:
            ephemeral_job.validate_partition_key(
                partition_key=partition_key,
                selected_asset_keys=set(asset_selection),
                context=ctx,
            )
    if not run_config and ephemeral_job.partitioned_config and partition_key:
        run_config = ephemeral_job.partitioned_config.get_run_config_for_partition_key(partition_key)
    return core_execute_in_process(
        job=InMemoryJob(job_def=ephemeral_job),
        run_config=run_config,
        instance=instance,
        output_capturing_enabled=False,
        raise_on_error=raise_on_error,
        run_tags=merge_run_tags(
            job_def=job_def,
            partition_key=partition_key,
            tags=tags,
            asset_selection=asset_selection,
            instance=instance,
            run_config=run_config,
        ),
        run_id=run_id,
        asset_selection=frozenset(asset_selection),
    )
