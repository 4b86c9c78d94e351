"""The CLI's run of a partition (``execute_partition``: Dagster's public ``execute_job`` in this
process) keeps no step output in memory, and reports the run as Dagster does: events, success,
materializations, check evaluations, failures, the partition and tags."""

from __future__ import annotations

import gc
import weakref

import dagster as dg
import pytest

from kebab_eval_pipeline.orchestration.in_process import Builder, execute_partition, reconstruct, run_of
from kebab_eval_pipeline.orchestration.run_lock import OWNER_TAG

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


@dg.asset_check(asset=downstream, blocking=True)
def downstream_is_long(downstream: Payload) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(passed=len(downstream.values) > 1, metadata={"n": len(downstream.values)})


@dg.asset(partitions_def=runs, io_manager_key="store")
def broken(context, downstream: Payload) -> Payload:
    raise RuntimeError("boom")


JOB = "toy"


def toy_definitions() -> dg.Definitions:
    """The module-level builder: how Dagster would rebuild the job in another process."""
    store = dg.IOManagerDefinition.hardcoded_io_manager(_Store())
    return dg.Definitions(
        assets=[upstream, downstream, broken],
        asset_checks=[downstream_is_long],
        jobs=[dg.define_asset_job(JOB)],
        resources={"store": store},
        executor=dg.in_process_executor,
    )


BUILDER = Builder(__name__, toy_definitions.__name__)


@pytest.fixture
def instance():
    with dg.instance_for_test() as inst:
        inst.add_dynamic_partitions("runs", ["r1"])
        ALIVE.clear()
        SEEN.clear()
        yield inst


def _run(instance, selection=None, owner="cli-owner", **kwargs):
    return execute_partition(
        toy_definitions(),
        JOB,
        BUILDER,
        instance=instance,
        partition_key="r1",
        owner=owner,
        asset_selection=selection,
        **kwargs,
    )


def test_step_outputs_are_freed_once_stored(instance) -> None:
    """Dagster's execute_in_process keeps upstream's 100k-element output alive while downstream
    runs; the CLI's execution lets it go as soon as the IO manager has stored it."""
    selection = [dg.AssetKey("upstream"), dg.AssetKey("downstream")]
    theirs = (
        toy_definitions()
        .resolve_job_def(JOB)
        .execute_in_process(instance=instance, partition_key="r1", asset_selection=selection)
    )
    assert theirs.success and SEEN["upstream_alive"] == [True]  # captured: what we avoid
    ALIVE.clear()
    SEEN.clear()

    ours = _run(instance, selection, tags={"who": "cli"})
    assert ours.success
    assert SEEN == {"upstream_alive": [False], "partition": "r1", "tag": "cli"}
    materialized = sorted(e.asset_key.path[-1] for e in ours.get_asset_materialization_events())
    assert materialized == ["downstream", "upstream"]
    [evaluation] = ours.get_asset_check_evaluations()
    assert (evaluation.check_name, evaluation.passed, evaluation.metadata["n"].value) == (
        "downstream_is_long",
        True,
        3,
    )
    assert ours.dagster_run.tags["dagster/partition"] == "r1"
    assert ours.dagster_run.tags[OWNER_TAG] == "cli-owner"
    assert instance.get_run_by_id(ours.run_id).is_success
    assert run_of(instance, "cli-owner").run_id == ours.run_id
    # the same events as Dagster's own execution, step for step
    kinds = [e.event_type_value for e in ours.all_events if e.step_key]
    assert kinds == [e.event_type_value for e in theirs.all_events if e.step_key]
    # nothing captured: a value is where the IO manager put it (here: made anew on load)
    gc.collect()
    assert [ref() is not None for ref in ALIVE] == [False, False]
    with ours:
        assert ours.output_for_node("upstream").values == [0, 1, 2]


def test_failures_as_dagster_reports_them(instance) -> None:
    result = _run(instance)
    assert not result.success
    failed = [e.step_key for e in result.all_events if e.is_step_failure]
    assert failed == ["broken"]
    [failure] = [e.step_failure_data.error for e in result.all_events if e.is_step_failure]
    assert "boom" in (failure.cause or failure).message
    assert instance.get_run_by_id(result.run_id).is_failure


def test_only_a_job_on_the_in_process_executor_is_run_here(instance) -> None:
    defs = dg.Definitions(
        assets=[upstream],
        jobs=[dg.define_asset_job(JOB)],
        resources={"store": dg.IOManagerDefinition.hardcoded_io_manager(_Store())},
        executor=dg.multiprocess_executor,
    )
    with pytest.raises(ValueError, match="multiprocess executor, not in this process"):
        execute_partition(defs, JOB, BUILDER, instance=instance, partition_key="r1", owner="o")


def test_the_runs_pointer_rebuilds_the_job_in_another_process() -> None:
    """What the run's record names (module, function, arguments) builds the same job again."""
    job = reconstruct("no-such-token", JOB, BUILDER.module, BUILDER.function, {})
    assert job.name == JOB
    assert {k.path[-1] for k in job.asset_layer.executable_asset_keys} == {"upstream", "downstream", "broken"}
