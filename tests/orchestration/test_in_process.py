"""The CLI's in-process execution keeps no step output in memory, and otherwise runs a job as
Dagster's own ``execute_in_process`` does (partitions, tags, selection, failures, events)."""

from __future__ import annotations

import gc
import weakref

import dagster as dg
import pytest

from kebab_eval_pipeline.orchestration.in_process import execute_in_process

runs = dg.DynamicPartitionsDefinition(name="runs")


class Payload:
    """A step output big enough to matter, and weak-referenceable (to see when it is freed)."""

    def __init__(self, n: int) -> None:
        self.values = list(range(n))


class _Store(dg.IOManager):
    """Writes nothing anywhere: the value is dropped after handle_output (as our store does once
    the Parquet is written), and load_input makes a new one, as reading a file back would."""

    def handle_output(self, context, obj) -> None:
        if obj is not None:
            ALIVE.append(weakref.ref(obj))

    def load_input(self, context):
        return Payload(3)


ALIVE: list[weakref.ref] = []
SEEN: dict[str, object] = {}


@dg.asset(partitions_def=runs, io_manager_key="store")
def upstream(context) -> Payload:
    return Payload(100_000)


@dg.asset(partitions_def=runs, io_manager_key="store")
def downstream(context, upstream: Payload) -> Payload:
    gc.collect()
    SEEN["upstream_alive"] = [ref() is not None for ref in ALIVE]
    SEEN["partition"] = context.partition_key
    SEEN["tag"] = context.run.tags.get("who")
    return Payload(len(upstream.values))


@dg.asset(partitions_def=runs, io_manager_key="store")
def broken(context, downstream: Payload) -> Payload:
    raise RuntimeError("boom")


def _job():
    store = dg.IOManagerDefinition.hardcoded_io_manager(_Store())
    defs = dg.Definitions(assets=[upstream, downstream, broken], resources={"store": store})
    return defs.resolve_implicit_global_asset_job_def()


@pytest.fixture
def instance():
    with dg.instance_for_test() as inst:
        inst.add_dynamic_partitions("runs", ["r1"])
        ALIVE.clear()
        SEEN.clear()
        yield inst


def test_step_outputs_are_freed_once_stored(instance) -> None:
    """Dagster's method keeps upstream's 100k-element output alive while downstream runs; ours lets
    it go as soon as the IO manager has stored it."""
    job = _job()
    selection = [dg.AssetKey("upstream"), dg.AssetKey("downstream")]
    theirs = job.execute_in_process(instance=instance, partition_key="r1", asset_selection=selection)
    assert theirs.success and SEEN["upstream_alive"] == [True]  # captured: what we avoid
    ALIVE.clear()
    SEEN.clear()
    ours = execute_in_process(
        job, instance=instance, partition_key="r1", asset_selection=selection, tags={"who": "cli"}
    )
    assert ours.success
    assert SEEN == {"upstream_alive": [False], "partition": "r1", "tag": "cli"}
    materialized = sorted(e.asset_key.path[-1] for e in ours.get_asset_materialization_events())
    assert materialized == ["downstream", "upstream"]
    assert ours.dagster_run.tags["dagster/partition"] == "r1"
    # nothing captured: the values are where the IO manager put them
    with pytest.raises(dg.DagsterInvariantViolationError, match="No outputs found"):
        ours.output_for_node("upstream")


def test_failures_and_run_ids_as_dagster_reports_them(instance) -> None:
    job = _job()
    result = execute_in_process(job, instance=instance, partition_key="r1", raise_on_error=False, run_id=None)
    assert not result.success
    failed = [e.step_key for e in result.all_events if e.is_step_failure]
    assert failed == ["broken"]
    assert instance.get_run_by_id(result.run_id).is_failure
    with pytest.raises(RuntimeError, match="boom"):
        execute_in_process(job, instance=instance, partition_key="r1", raise_on_error=True)
    with pytest.raises(dg.DagsterUnknownPartitionError):
        execute_in_process(job, instance=instance, partition_key="nope")
