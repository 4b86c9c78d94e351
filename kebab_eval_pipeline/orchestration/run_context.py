"""A run's context — its settings and its built system — made once per process and shared by its steps.

Every step of the chain needs the run's effective settings (the ``eval_settings`` resource with its
``system_under_test`` overrides and, for a sweep variant's run id, the variant's), and the retrieval
steps need the system under test built from them. Worked out per step, one in-process run parsed
the config file a dozen times and built the system at every step that asked. :func:`run_context`
makes both once per process and Dagster run, whatever executor runs the steps: an in-process run
shares one context between its steps, each step process of a multi-process or Celery run makes its
own once.

Why the key holds what it holds: a long-lived process (a code server, the daemon's sensors) runs
many runs, and must never hand one of them another's settings. An entry is keyed by the Dagster run
id (a new run never sees an older run's context), the partition (its run id), the resources'
configuration (a launchpad override) and the config file's path and content digest (an edited file
is parsed again even within one run: a retried step reads what the file says now). At most
:data:`KEPT` contexts are kept; the oldest is dropped first.

The built system is let go once the run's retrieval is collected (:meth:`RunContext.release_system`):
a replayed trace or an in-memory index is only memory after its last shard.

The CLI checks a run's inputs against its system before any Dagster run exists (a stale golden set
is exit 2, not a failed run). It hands what those checks found, and the system they built, to the
run's steps in this process (:func:`hand_over_checks`): the stale-golden check runs once per run,
not twice, and the run's context starts from that system (:func:`handed_system`). The CLI's
parse of the golden set is the golden_set step's (:func:`handed_golden`): the set is parsed once
per run. The hand-over is taken once (:func:`taken_checks`), only by a run of the same partition with equal
settings (but for their storage) and golden hash; when the CLI's run ends, what was kept for it
is dropped (:func:`end_run`).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kebab_eval_pipeline.chain.settings import RunSettings

#: How many runs' contexts a process keeps (a code server running runs side by side, a sweep).
KEPT = 4

_LOCK = threading.Lock()
_CONTEXTS: OrderedDict[tuple, RunContext] = OrderedDict()


@dataclass(frozen=True)
class InputChecks:
    """What the checks before a run found: the stale-golden warnings (the gates were checked
    against the system, too), the system they built (the run's steps in this process use it) and
    the golden set they parsed (the run's golden_set step stores that parse: :func:`handed_golden`)."""

    run_id: str
    settings: RunSettings
    golden_sha256: str
    stale_warnings: list[str]
    system: Any = field(default=None, repr=False)
    golden: Any = field(default=None, repr=False)  # golden.load.LoadedGolden


_HANDED: dict[str, InputChecks] = {}


@dataclass
class RunContext:
    """One run's settings, and the system under test built from them on first use."""

    settings: RunSettings
    run_id: str | None
    _system: Any = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def system(self):
        """The system under test, built once for this run in this process (``build_system``)."""
        with self._lock:
            if self._system is None:
                from kebab_eval_pipeline.systems.factory import build_system

                self._system = build_system(self.settings)
            return self._system

    def release_system(self) -> None:
        """Let go of the built system (its retrieval is over); a later :meth:`system` builds again."""
        with self._lock:
            self._system = None


def _digest(path: str | None) -> str | None:
    if not path:
        return None
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None  # the settings loader reports the missing file, naming it


def context_key(
    dagster_run_id: str, run_id: str | None, config_path: str | None, resource_config: tuple
) -> tuple:
    """The cache key of a run's context (see the module docstring)."""
    return (dagster_run_id, run_id, config_path, _digest(config_path), resource_config)


def cached_context(key: tuple, make) -> RunContext:
    """The context kept under ``key``, else ``make()``'s (kept, the oldest dropped past :data:`KEPT`).
    ``make`` raising keeps nothing: a bad config reports its error on every step that asks."""
    with _LOCK:
        kept = _CONTEXTS.get(key)
        if kept is not None:
            _CONTEXTS.move_to_end(key)
            return kept
    made = make()
    with _LOCK:
        kept = _CONTEXTS.setdefault(key, made)
        while len(_CONTEXTS) > KEPT:
            _CONTEXTS.popitem(last=False)
        return kept


def clear() -> None:
    """Forget every kept context and hand-over (a test, a process that wants its memory back)."""
    with _LOCK:
        _CONTEXTS.clear()
        _HANDED.clear()
        _READS.clear()


def hand_over_checks(checks: InputChecks) -> None:
    """What the CLI's checks found for run ``checks.run_id``, for that run's plan step in this process."""
    with _LOCK:
        _HANDED[checks.run_id] = checks


def end_run(run_id: str) -> None:
    """Forget everything kept for run id ``run_id`` in this process — an unused hand-over (the run
    never reached its plan step), its contexts (a run that failed before its retrieval was collected
    still held its system), what :func:`read_once` kept: the CLI's run of it has ended."""
    with _LOCK:
        _HANDED.pop(run_id, None)
        for key in [k for k in _CONTEXTS if k[1] == run_id]:
            del _CONTEXTS[key]
        for key in [k for k in _READS if k[1] == run_id]:
            del _READS[key]


def _handed(run_id: str | None, settings: RunSettings) -> InputChecks | None:
    checks = _HANDED.get(run_id) if run_id is not None else None
    # the CLI's --storage replaces the settings' storage, the steps' is their storage resource's
    if checks is None or checks.settings.model_copy(update={"storage": settings.storage}) != settings:
        return None
    return checks


def handed_system(run_id: str | None, settings: RunSettings) -> Any:
    """The system the CLI's checks built for run ``run_id`` with these settings (None: none was)."""
    with _LOCK:
        checks = _handed(run_id, settings)
        return None if checks is None else checks.system


def handed_golden(run_id: str | None, settings: RunSettings) -> Any:
    """The golden set the CLI's checks parsed for run ``run_id`` with these settings, handed once
    (the golden_set step stores it; the hand-over keeps the rest): None when none was. The run
    stores what its checks read, and records its content hash; a file edited since is seen as
    stale by the golden_set step's observation, as an edit during any step would be."""
    import dataclasses

    with _LOCK:
        checks = _handed(run_id, settings)
        if checks is None or checks.golden is None:
            return None
        _HANDED[checks.run_id] = dataclasses.replace(checks, golden=None)
        return checks.golden


def taken_checks(run_id: str | None, settings: RunSettings, golden_sha256: str) -> InputChecks | None:
    """The hand-over of ``run_id`` when it was made for these settings and this golden content
    (taken: a second plan of the run checks again), else None."""
    with _LOCK:
        checks = _handed(run_id, settings)
        if checks is None or checks.golden_sha256 != golden_sha256:
            return None
        return _HANDED.pop(checks.run_id)


#: An artifact the run's steps read back from the store, kept for the run's later readers in this
#: process: (Dagster run id, run id, where and what was read) → the artifact. A Dagster run writes
#: each asset once, before any reader: what is kept cannot go stale within the run, and another run
#: (a re-execution too) has another id.
_READS: OrderedDict[tuple, Any] = OrderedDict()


def read_once(dagster_run_id: str, run_id: str, key: tuple, read) -> Any:
    """``read()``'s artifact, read once per Dagster run and ``key`` (the store, the asset key, the
    columns read) of run id ``run_id`` in this process. The artifacts of at most :data:`KEPT` Dagster
    runs are kept: one that failed before :func:`forget_reads` let go of its own is dropped as later
    runs read, or when the CLI's run ends (:func:`end_run`). Callers treat what they get as
    read-only, as they treat an input Dagster loaded for them."""
    full = (dagster_run_id, run_id, *key)
    with _LOCK:
        if full in _READS:
            _READS.move_to_end(full)
            return _READS[full]
    value = read()
    with _LOCK:
        _READS[full] = value
        runs = list(dict.fromkeys(k[0] for k in _READS))
        for old in runs[:-KEPT]:
            for k in [k for k in _READS if k[0] == old]:
                del _READS[k]
    return value


def forget_reads(dagster_run_id: str) -> None:
    """Let go of what :func:`read_once` kept for ``dagster_run_id`` (its last reader has run)."""
    with _LOCK:
        for k in [k for k in _READS if k[0] == dagster_run_id]:
            del _READS[k]
