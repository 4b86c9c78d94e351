"""One writer per run id: a second run of a partition that is still in progress is refused.

Every way a run starts passes through here: ``kebab-eval run`` / ``rejudge`` (which hold the lock
around their in-process run), the job's executor (``dagster asset materialize``, the UI, the
multi-process executor: it holds the lock in the run worker for the whole run) and the artifact IO
manager, which verifies before every write that this Dagster run owns the partition (and claims it
when nothing else holds it, e.g. a library call of ``job.execute_in_process``).

Local storage: the lock is ``fcntl.flock`` on ``{base}/_run_locks/{run_id}.lock`` — it dies with
the process, so a SIGKILLed run never blocks the partition. Beside it, ``{run_id}.json`` names the
owner (Dagster run id, pid, host, start time) for the refusal message; both are read and changed
only under a short mutex, so of two runs racing exactly one wins. An owner recorded by a process
that holds no lock (a step of an in-process run between two writes) stays the owner while that
process lives on this host and its Dagster run has not finished.

Object storage (``s3://`` …) has no locks: there the instance's run records decide — the
earliest-created unfinished run of the partition wins. Its limit: a run killed without its status
being updated (SIGKILL, a lost machine) blocks the partition until it is marked finished
(``dagster run delete ID``, or Dagster's run monitoring).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kebab_eval_pipeline.foundation import atomic
from kebab_eval_pipeline.foundation.errors import RunInProgress
from kebab_eval_pipeline.foundation.location import is_local
from kebab_eval_pipeline.store.layout import lock_folder

PARTITION_TAG = "dagster/partition"
#: Tag of a Dagster run that writes on behalf of another owner of the partition's lock: the CLI (it
#: takes the lock before its run exists, under an owner id of its own) or a team's asset check (its
#: own Dagster run holds the lock while the chain's run writes). Absent: the run is its own owner.
OWNER_TAG = "kebab-eval/lock-owner"


#: How long a refusal waits for the owner's Dagster run to exist, to name it.
NAMING_WAIT_S = 5.0


def owner_of(dagster_run) -> str:
    """The owner of the partition's lock that Dagster run ``dagster_run`` writes for: its
    :data:`OWNER_TAG`, else itself."""
    return dagster_run.tags.get(OWNER_TAG) or dagster_run.run_id


@dataclass
class _Held:
    owner: str  # the Dagster run id holding the lock through ``fd``
    fd: int
    depth: int  # nested holds of the same owner in this process


_held: dict[Path, _Held] = {}  # lock files this process holds, by path
_guard = threading.Lock()  # _held is shared by the threads of one process


def _paths(base: str, run_id: str) -> tuple[Path, Path]:
    folder = lock_folder(base)
    return folder / f"{run_id}.lock", folder / f"{run_id}.json"


def _process_start(pid: int) -> str | None:
    """The start time of ``pid`` (clock ticks since boot, from /proc), None when it is gone: with
    the pid it tells a live owner from an unrelated process that reused the pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    return None if fields[0] in ("Z", "X") else fields[19]


def _owner_record(run_id: str, owner: str) -> dict[str, Any]:
    pid = os.getpid()
    return {
        "run_id": run_id,
        "dagster_run_id": owner,
        "pid": pid,
        "process_start": _process_start(pid),
        "host": socket.gethostname(),
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def _read_record(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _finished(instance, owner: str) -> bool | None:
    """Whether owner ``owner`` is done: its Dagster run, or every run written on its behalf
    (:data:`OWNER_TAG`), is finished (None: no such run in the instance)."""
    import dagster as dg

    if instance is None:
        return None
    run = instance.get_run_by_id(owner)
    if run is not None:
        return run.is_finished
    runs = instance.get_runs(filters=dg.RunsFilter(tags={OWNER_TAG: owner}))
    return all(r.is_finished for r in runs) if runs else None


def _alive(record: dict[str, Any], instance) -> bool:
    """Whether the owner of an unlocked record is still running: its process lives (same host, same
    pid and start time) and its Dagster run has not finished."""
    if record.get("host") != socket.gethostname():
        return False  # another machine: only its lock tells, and the lock is free
    start = _process_start(int(record.get("pid", 0)))
    if start is None or start != record.get("process_start"):
        return False
    return _finished(instance, record.get("dagster_run_id", "")) is not True


def _dagster_run_named(owner: str, instance) -> str:
    """The Dagster run an owner stands for: itself, or the run written on its behalf (the CLI's
    owner id before its run exists: "a run starting")."""
    import dagster as dg

    if instance is None or instance.get_run_by_id(owner) is not None:
        return f"Dagster run {owner}"
    # an owner that took the lock a moment ago creates its run within a second or so: wait for it
    deadline = time.monotonic() + NAMING_WAIT_S
    while True:
        runs = instance.get_runs(filters=dg.RunsFilter(tags={OWNER_TAG: owner}), limit=1)
        if runs:
            return f"Dagster run {runs[0].run_id}"
        if time.monotonic() >= deadline:
            return f"a run starting (lock owner {owner})"
        time.sleep(0.1)


def _refusal(run_id: str, record: dict[str, Any] | None, instance=None) -> RunInProgress:
    if record is None:
        who = "another process"
    else:
        who = (
            f"{_dagster_run_named(str(record.get('dagster_run_id')), instance)} (pid {record.get('pid')} "
            f"on {record.get('host')}, started {record.get('started_at')})"
        )
    return RunInProgress(
        f"run {run_id} is already in progress: {who}; wait for it to finish or use another run id"
    )


def _try_flock(lock: Path) -> int | None:
    """An fd holding an exclusive flock on ``lock``, or None when another open file holds it."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)  # not inherited by child processes (PEP 446)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    return fd


class _Refused(Exception):
    """Raised under the locks, turned into RunInProgress once they are let go (naming the owner's
    Dagster run may wait for it to be created)."""

    def __init__(self, record: dict[str, Any] | None):
        self.record = record


def _claim_local(base: str, run_id: str, owner: str, instance, hold: bool) -> None:
    """Make ``owner`` the owner of ``run_id`` or raise RunInProgress; with ``hold`` keep the lock
    (until :func:`_release`), else hold it only while deciding."""
    try:
        _claim_local_locked(base, run_id, owner, instance, hold)
    except _Refused as refused:
        raise _refusal(run_id, refused.record, instance) from None


def _claim_local_locked(base: str, run_id: str, owner: str, instance, hold: bool) -> None:
    lock, record_path = _paths(base, run_id)
    with _guard, atomic.locked(record_path):
        held = _held.get(lock)
        record = _read_record(record_path)
        if held is not None:  # this process holds the lock
            if held.owner == owner:
                held.depth += int(hold)
                return
            if _finished(instance, held.owner) is not True:
                raise _Refused(record)
            # a run of this process that finished without releasing: stale
            os.close(held.fd)
            del _held[lock]
        fd = _try_flock(lock)
        if fd is None:  # a live process holds it: its run worker (ours, multi-process) or another run
            if record is not None and record.get("dagster_run_id") == owner:
                return
            raise _Refused(record)
        try:
            mine = record is not None and record.get("dagster_run_id") == owner
            if not mine:
                if record is not None and _alive(record, instance):
                    raise _Refused(record)
                atomic.write_text(record_path, json.dumps(_owner_record(run_id, owner), indent=2) + "\n")
        except BaseException:
            os.close(fd)
            raise
        if hold:
            _held[lock] = _Held(owner, fd, 1)
        else:
            os.close(fd)


def _release(base: str, run_id: str, owner: str) -> None:
    """End one hold of ``owner``; the last one releases the lock and removes the owner record (the
    owner is done with the partition: a later run of this process is not refused by it)."""
    lock, record_path = _paths(base, run_id)
    with _guard, atomic.locked(record_path):
        held = _held.get(lock)
        if held is None or held.owner != owner:
            return
        held.depth -= 1
        if held.depth <= 0:
            record = _read_record(record_path)
            if record is not None and record.get("dagster_run_id") == owner:
                record_path.unlink(missing_ok=True)
            os.close(held.fd)  # closing the last fd of the open file releases the flock
            del _held[lock]


def _claim_remote(run_id: str, owner: str, instance) -> None:
    """Object storage: the earliest-created unfinished run of the partition wins (``owner`` not yet
    created in the instance, as for the CLI before it starts: any unfinished run refuses)."""
    import dagster as dg

    if instance is None:
        return
    records = instance.get_run_records(filters=dg.RunsFilter(tags={PARTITION_TAG: run_id}))
    unfinished = sorted(
        (r for r in records if not r.dagster_run.is_finished), key=lambda r: r.create_timestamp
    )
    if not unfinished or owner_of(unfinished[0].dagster_run) == owner:
        return
    first = unfinished[0]
    raise _refusal(
        run_id,
        {
            "dagster_run_id": first.dagster_run.run_id,
            "pid": "?",
            "host": "another machine or process",
            "started_at": first.create_timestamp.isoformat(timespec="seconds"),
        },
    )


def verify(base: str, run_id: str, owner: str, instance) -> None:
    """Check that Dagster run ``owner`` may write partition ``run_id`` (claiming it when it is free
    or its recorded owner is gone); RunInProgress when another live run owns it."""
    if is_local(base):
        _claim_local(base, run_id, owner, instance, hold=False)
    else:
        _claim_remote(run_id, owner, instance)


@contextlib.contextmanager
def holding(base: str, run_id: str, owner: str, instance) -> Iterator[None]:
    """Own partition ``run_id`` as Dagster run ``owner`` for the block (RunInProgress when another
    live run owns it). Re-entrant within a process for the same owner."""
    if not is_local(base):
        _claim_remote(run_id, owner, instance)
        yield
        return
    _claim_local(base, run_id, owner, instance, hold=True)
    try:
        yield
    finally:
        _release(base, run_id, owner)


def locking_executor(inner, base: str):
    """``inner`` (an ExecutorDefinition) whose executor holds the partition's lock in the run
    worker process for the whole run — the path of ``dagster asset materialize``, the UI and the
    multi-process executor, whose step processes then only verify."""
    import dagster as dg

    class _LockingExecutor(dg.Executor):
        def __init__(self, wrapped: dg.Executor):
            self._wrapped = wrapped

        def __getattr__(self, name):
            # what an executor's own loop reads back from the executor (dagster-celery's loop
            # builds its Celery app from ``executor.app_args()``)
            return getattr(self._wrapped, name)

        @property
        def retries(self):
            return self._wrapped.retries

        @property
        def step_dependency_config(self):
            return self._wrapped.step_dependency_config

        def execute(self, plan_context, execution_plan):
            partition = plan_context.dagster_run.tags.get(PARTITION_TAG)
            if partition is None:  # not a run of one partition (an observation): nothing to guard
                yield from self._wrapped.execute(plan_context, execution_plan)
                return
            with holding(base, partition, owner_of(plan_context.dagster_run), plan_context.instance):
                yield from self._wrapped.execute(plan_context, execution_plan)

    return dg.ExecutorDefinition(
        name=inner.name,
        config_schema=inner.config_schema,
        requirements=inner.get_requirements,
        executor_creation_fn=lambda init_context: _LockingExecutor(inner.executor_creation_fn(init_context)),
        description=inner.description,
    )
