"""The run driver: a partition's chain materialized in-process, its outcome read back.

:func:`execute` runs the job with the progress display and without Dagster's own stack traces for
what the CLI states itself; :func:`check_own_results` makes sure the stored numbers are this run's;
:func:`raise_run_failure` turns a failed run into the CLI's exit codes (bad input 2, a failed gate
or system 1, another run of the same id 4, anything else 3). Ctrl-C during the run
(:mod:`.interrupt`): the run's in-flight calls are cancelled, it stops within about
:data:`~.interrupt.GRACE_S`, and :func:`settle_interrupted` makes sure nothing of it passes for a
finished run (exit 130).
"""

from __future__ import annotations

import contextlib
import logging
import os
import uuid
from collections.abc import Callable
from contextlib import contextmanager
from typing import TYPE_CHECKING

from kebab_eval_pipeline.cli import interrupt
from kebab_eval_pipeline.cli.console import err
from kebab_eval_pipeline.foundation.errors import (
    GateFailure,
    Interrupted,
    RunInProgress,
    SystemHealthFailure,
)

if TYPE_CHECKING:  # the store pulls in pandas: the CLI imports it only in commands that read
    from kebab_eval_pipeline.store.runs import RunStore

#: How Dagster words a step's failure when a blocking asset check of it failed (its console line
#: is dropped: the CLI states the gate's verdict itself).
_CHECK_FAILED_WORDS = "blocking asset check"


def cli_builder(config, storage: str | None, overrides: dict, chain: str | None):
    """How ``kebab-eval run`` / ``rejudge`` build their definitions (:func:`build_definitions` on
    the in-process executor): also how Dagster would rebuild them from the run's record."""
    from kebab_eval_pipeline.orchestration.in_process import Builder

    return Builder(
        "kebab_eval_pipeline.definitions",
        "build_definitions",
        {
            "config_file": str(config) if config is not None else None,
            "storage": storage,
            "overrides": dict(overrides),
            "chain": chain,
            "in_process": True,
        },
    )


def _writer(store, asset: str, run_id: str) -> str | None:
    """The Dagster run that wrote the stored ``asset`` of ``run_id`` (None: not stored)."""
    return (store.manifest(asset, run_id) or {}).get("dagster_run_id")


def written_by(store, asset: str, run_id: str, dagster_run_id: str) -> bool:
    """Whether the stored ``asset`` of ``run_id`` was written by Dagster run ``dagster_run_id``."""
    return _writer(store, asset, run_id) == dagster_run_id


def check_own_results(store, run_id: str, result) -> None:
    """Every asset this run materialized must still be stored as this run wrote it; otherwise
    another run of the same run id replaced it, and its numbers are not this run's (RunInProgress)."""
    for event in result.get_asset_materialization_events():
        asset = event.asset_key.path[-1]
        writer = _writer(store, asset, run_id)
        if writer != result.run_id:
            raise RunInProgress(
                f"run {run_id}: the stored {asset} was written by Dagster run "
                f"{writer}, not by this one ({result.run_id}): another run of "
                "the same run id replaced it; its numbers are not shown as this run's"
            )


#: Dagster events the CLI states itself, in one line or paragraph (`raise_run_failure`): a failed
#: step (with its Python stack trace), the run's failure, and the steps skipped after it.
_STATED_EVENTS = frozenset({"STEP_FAILURE", "RUN_FAILURE", "PIPELINE_FAILURE"})


class StatedFailureRecords(logging.Filter):
    """Drops Dagster's console records of what the CLI reports itself: a failed blocking asset check
    (the gate or system-health verdict, exit 1), a failed step and the run failure (bad input:
    the same one-line-per-offender message as at load, exit 2; anything else one paragraph, exit 3)
    and the "Dependencies for step … Not executing" lines that follow. Dagster prints these with
    Python stack traces; ``KEBAB_EVAL_DEBUG=1`` keeps them. The instance's event log is untouched."""

    def filter(self, record: logging.LogRecord) -> bool:
        if os.environ.get("KEBAB_EVAL_DEBUG"):
            return True
        if _CHECK_FAILED_WORDS in record.getMessage():
            return False
        event = getattr(record, "dagster_event", None)
        if getattr(event, "event_type_value", None) in _STATED_EVENTS:
            return False
        return not (record.levelno >= logging.ERROR and "Dependencies for step" in record.getMessage())


@contextmanager
def quiet_stated_failures():
    """Loggers created meanwhile (Dagster's console logger is made per run, from the logging
    module's logger class) carry :class:`StatedFailureRecords`; the instance's event log is untouched."""
    previous = logging.getLoggerClass()

    class _Logger(previous):  # type: ignore[misc, valid-type]
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self.addFilter(StatedFailureRecords())

    logging.setLoggerClass(_Logger)
    try:
        yield
    finally:
        logging.setLoggerClass(previous)


def execute(
    defs, builder, job_name: str, instance, run_id: str, tags: dict, owner: str, asset_selection=None
) -> interrupt.Ran:
    """Run ``defs``' job ``job_name`` for partition ``run_id`` in this process (Dagster's public
    ``execute_job``: no step output kept in memory; :mod:`~kebab_eval_pipeline.orchestration.in_process`),
    writing on behalf of ``owner`` (the holder of the partition's lock), with its progress on stderr
    (stage name, queries done; progress_display.py: live on a terminal, periodic lines otherwise);
    Dagster's DEBUG event stream stays in the instance (and the UI), the terminal gets the progress
    and warnings only.

    The job runs in a thread of its own while this thread waits for it or for Ctrl-C
    (:func:`.interrupt.run_in_thread`: the returned ``Ran`` holds its result, or says it was
    interrupted); the progress display is this thread's, so it is closed (a terminal's cursor
    given back) before anything is said about an interrupted run."""
    from kebab_eval_pipeline.cli.progress_display import progress_display
    from kebab_eval_pipeline.orchestration.in_process import execute_partition

    with progress_display(err), quiet_stated_failures():
        return interrupt.run_in_thread(
            lambda: execute_partition(
                defs,
                job_name,
                builder,
                instance=instance,
                partition_key=run_id,
                owner=owner,
                run_config={"loggers": {"console": {"config": {"log_level": "WARNING"}}}},
                tags=tags,
                asset_selection=asset_selection,
            )
        )


def failed_check_steps(result) -> set[str]:
    """The steps a failed blocking ERROR asset check stopped: Dagster fails the step that evaluated
    it (after its outputs are stored)."""
    import dagster as dg

    return {
        event.step_key
        for event in result.all_events
        if event.event_type == dg.DagsterEventType.ASSET_CHECK_EVALUATION
        and not event.asset_check_evaluation_data.passed
        and event.asset_check_evaluation_data.blocking
        and event.asset_check_evaluation_data.severity == dg.AssetCheckSeverity.ERROR
    }


def raise_run_failure(result, run_id: str, storage: str | None = None) -> None:
    """Turn a failed run into InputError (bad input; also a path that could not be written — a full
    disk, a read-only filesystem — named with the remedy, ``storage`` being the run's artifact
    base), SystemHealthFailure (the system under test failed), GateFailure (a blocking gate or
    check, named with its reason), RunInProgress (another process runs this partition) or, for
    anything else, RuntimeError (exit 3) naming the step and its error. Read from the run's typed
    events: the failed checks' evaluations, our errors' failure metadata
    (:func:`~kebab_eval_pipeline.orchestration.failures.raised_error`)."""
    from kebab_eval_pipeline.cli.write_failures import cannot_write, is_write_failure, step_write_failure
    from kebab_eval_pipeline.metrics.health import CHECK_NAME
    from kebab_eval_pipeline.orchestration.failures import raised_error

    failed_checks = {
        e.check_name: e
        for e in result.get_asset_check_evaluations()
        if not e.passed and e.blocking and e.severity.value == "ERROR"
    }
    stopped_by_checks = failed_check_steps(result)
    for event in result.all_events:
        if not event.is_step_failure:
            continue
        if event.step_key in stopped_by_checks:
            health = failed_checks.pop(CHECK_NAME, None)
            if health is not None:
                also = f" (and {len(failed_checks)} blocking gate(s) failed)" if failed_checks else ""
                raise SystemHealthFailure(f"run {run_id}: {health.description}{also}")
            # a check before run_metrics (matching_coverage: fail) stops the chain: no gate table
            named = "; ".join(f"{name}: {e.description}" for name, e in failed_checks.items())
            raise GateFailure(
                f"run {run_id}: blocking check(s) failed: {named or 'see the gate table above'}"
            )
        # Bad input found inside a step: the same message as at load (exit 2), not the step's
        # frames; another run owning the partition (exit 4).
        ours = raised_error(event.step_failure_data)
        if ours is not None:
            raise ours
        error = event.step_failure_data.error
        chain = []
        while error is not None:
            chain.append(error)
            error = error.cause
        failure = step_write_failure((e.cls_name, e.message) for e in chain)
        if failure is not None and is_write_failure(failure, storage):  # a full disk: the user's (exit 2)
            raise cannot_write(failure, storage, run_id, event.step_key)
        raise RuntimeError(f"run {run_id} failed in step {event.step_key}: {chain[-1].message.strip()}")
    raise RuntimeError(f"run {run_id} failed")


def settle_interrupted(store, instance, run_id: str, dagster_run_id: str | None, ran: interrupt.Ran) -> str:
    """After Ctrl-C: make sure nothing of Dagster run ``dagster_run_id`` (None: not created yet)
    passes for a finished run of ``run_id``, and say what was stored (the message of the exit-130
    line).

    - ``run_metrics`` not stored by this run (the usual case: the interrupt came before them): the
      run is in no history, comparison or baseline choice; its earlier assets are named.
    - ``run_metrics`` stored, the Dagster run not finished successfully (the interrupt came during
      the comparison or the reports): its ``run_metrics`` info is marked ``interrupted``, so
      history shows it failed (interrupted) and no automatic baseline chooses it.
    - the Dagster run finished successfully (the interrupt came while the results were printed):
      stored complete, as it is.

    A run still going after the grace period is reported canceled to the instance (its record
    would otherwise stay "started"); nothing it could still publish is published (the artifact
    store publishes nothing once cancellation is requested)."""
    from kebab_eval_pipeline.chain.artifacts import CHAIN_ASSETS

    if dagster_run_id is None:
        return f"run {run_id} stopped; nothing of it was stored as a finished run"
    if not ran.finished:
        with contextlib.suppress(Exception):  # best effort: the process is about to end
            record = instance.get_run_by_id(dagster_run_id)
            if record is not None and not record.is_finished:
                instance.report_run_canceled(record, message="interrupted (Ctrl-C) in kebab-eval run")
    written = [a for a in CHAIN_ASSETS if written_by(store, a, run_id, dagster_run_id)]
    if "run_metrics" not in written:
        kept = (
            f" (written so far: {', '.join(written)}; without run_metrics a run is in no history,"
            " comparison or baseline)"
            if written
            else ""
        )
        return f"run {run_id} stopped; nothing of it was stored as a finished run{kept}"
    if not ran.before_end or (ran.error is None and getattr(ran.value, "success", False)):
        # the run ended before Ctrl-C was seen, or ended whole after it: as it is stored
        return f"run {run_id} had finished: it is stored complete (its summary was not shown)"
    note = {"by": "Ctrl-C", "missing": [a for a in CHAIN_ASSETS if a not in written]}
    # compare/outcome.py judges a run so marked failed: never an automatic baseline
    from kebab_eval_pipeline.compare.outcome import interrupted_info

    try:
        store.mark("run_metrics", run_id, dagster_run_id, lambda info: interrupted_info(info, note))
    except Exception as exc:  # said, not raised: the line is the last word of an interrupted run
        return (
            f"run {run_id} stopped after its metrics were stored, which could not be marked "
            f"interrupted ({type(exc).__name__}: {exc}): `kebab-eval history` shows it as finished"
        )
    return (
        f"run {run_id} stopped after its metrics were stored: stored marked interrupted "
        f"(without {', '.join(note['missing']) or 'its checks'}); history shows it failed "
        "(interrupted), and no automatic baseline chooses it"
    )


def drive(
    defs,
    instance,
    run_id: str,
    *,
    builder,
    tags: dict,
    show: Callable[[RunStore], None],
    asset_selection=None,
    prepare: Callable[[], None] | None = None,
    names=None,
) -> None:
    """Materialize partition ``run_id`` of ``defs``' job in this process (all of it, or
    ``asset_selection``; ``builder`` builds ``defs`` again, :func:`cli_builder`) holding the
    partition's lock — one writer per run id: RunInProgress (exit 4) while another run of it is in
    progress — from ``prepare`` (registering the partition) until ``show`` has printed the stored
    numbers, so they are this run's. Then a failed run raises its exit code's error
    (:func:`raise_run_failure`). ``names``: the chain whose job and storage ``defs`` holds (a
    ``ChainNames``; default: the package's own location's)."""
    from kebab_eval_pipeline.definitions import JOB_NAME
    from kebab_eval_pipeline.orchestration import run_lock
    from kebab_eval_pipeline.orchestration.in_process import run_of
    from kebab_eval_pipeline.orchestration.names import DEFAULT_NAMES
    from kebab_eval_pipeline.store.runs import RunStore

    names = names or DEFAULT_NAMES
    base = defs.resources[names.resource("artifact_storage")].base
    store = RunStore(base)
    # The lock is taken before the Dagster run exists: under an owner id of this command's, which
    # the run carries (run_lock.OWNER_TAG) so its steps write on the lock's behalf.
    owner = str(uuid.uuid4())
    interrupt.set_note(f"run {run_id} had not started: nothing of it was stored")
    with run_lock.holding(base, run_id, owner, instance):
        if prepare is not None:
            prepare()
        ran = execute(
            defs,
            builder,
            names.name(JOB_NAME),
            instance,
            run_id,
            tags=tags,
            owner=owner,
            asset_selection=asset_selection,
        )
        if ran.interrupted:  # (Ctrl-C again changes nothing now: the run is settled first)
            started = run_of(instance, owner)
            dagster_run_id = started.run_id if started is not None else None
            raise Interrupted(settle_interrupted(store, instance, run_id, dagster_run_id, ran))
        if ran.error is not None:
            raise ran.error
        result = ran.value
        # the run is over: a Ctrl-C while its results are shown stops the printing only
        interrupt.set_note(f"run {run_id} had finished: it is stored complete")
        check_own_results(store, run_id, result)
        if not written_by(store, "run_metrics", run_id, result.run_id):
            raise_run_failure(result, run_id, str(base))
        show(store)
    if not result.success:
        raise_run_failure(result, run_id, str(base))
