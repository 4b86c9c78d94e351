"""Build the configured system under test from run settings, and read its versions live.

Two uses, two lifetimes. A run builds its system once per process (:func:`build_system`): the CLI's
checks, the plan and every shard step share it. A version reading — the system-version sensor, the
nightly schedule's and the sensors' observations of ``system_under_test``, the freshness check — asks
the system as it is *now* (:func:`live_info`), however long the process (a code server) has lived.
How each kind is built, cached and read is its own module's declaration (:mod:`.kinds`):

* reference — the index is reloaded when its manifest (or, built from a corpus, any corpus file)
  changed: the stat fingerprint of :mod:`kebab_eval_pipeline.foundation.read_once` (inode and change time
  included, so an index replaced with its old timestamps still counts as changed);
* command / http — a new adapter per call, so ``version_argv`` is run and ``version_url`` fetched again;
* replay — a run's trace is parsed when its system is built (once per run and process); a version
  reading keeps its parse while the file is unchanged (:mod:`kebab_eval_pipeline.foundation.read_once`);
* python — built afresh in a process of its own (:mod:`.python_versions`): the module imported
  again, the factory called, ``versions()`` asked; the object a run in this process uses is left
  alone, and nothing the reading loads stays in this process.
"""

from __future__ import annotations

from typing import Protocol

from kebab_eval_pipeline.contract import SystemInfo
from kebab_eval_pipeline.foundation.errors import InputError, Offender
from kebab_eval_pipeline.foundation.net.secrets import SecretMask, active
from kebab_eval_pipeline.systems.protocol import SystemUnderTest
from kebab_eval_pipeline.systems.settings import SystemSettings, kind_of


class ConfiguredSystem(Protocol):
    """What building a system reads of a run's settings (``settings.RunSettings`` is one)."""

    @property
    def system(self) -> SystemSettings: ...


def live_info(settings: ConfiguredSystem) -> SystemInfo:
    """The system's info — its versions — read from it now (see the module docstring): what a run
    started at this moment would record. For a python system, a Python process is started each
    time (its cost: the interpreter, the system's imports and its factory); the object a run in
    this process uses is not touched.

    Raises InputError when the system cannot be built (a missing index, a factory that raises, a
    python reading past its time limit); a version endpoint, command or ``versions()`` that fails
    is ``details["version_error"]``."""
    kind = kind_of(settings.system.kind)
    if kind is not None and kind.live_info is not None:
        return _masked(settings, kind.live_info(settings.system))
    return system_info(settings)


def system_info(settings: ConfiguredSystem, system: SystemUnderTest | None = None) -> SystemInfo:
    """``build_system(settings).info()`` — ``system.info()`` of a system already built from
    ``settings`` — with the run's secrets masked (a version report that echoes a credential becomes
    an observation, a data version and metadata)."""
    return _masked(settings, (system if system is not None else build_system(settings)).info())


def _masked(settings: ConfiguredSystem, info: SystemInfo) -> SystemInfo:
    # RunSettings know their secrets; any configured system also gets what this process loaded
    make = getattr(settings, "secret_mask", None)
    mask = (make() if callable(make) else SecretMask()) | active()
    return mask.model(info)


def build_system(settings: ConfiguredSystem) -> SystemUnderTest:
    """The system under test for ``settings``, built by its kind's declaration. The reference
    system is cached per process while its inputs are unchanged; a python system is built (its
    factory called) once per process and configuration; the others are cheap to build (nothing is
    contacted until a run, except a configured version endpoint/command when :meth:`info` is first
    called). InputError when it cannot start, naming the field."""
    system = settings.system
    kind = kind_of(system.kind)
    if kind is None:
        raise InputError(
            "unknown system kind", [Offender("<config>", f"{system.kind!r}", field="system.kind")]
        )
    try:
        return kind.build(system)
    except ValueError as exc:  # command not found, header variable unset, callable missing, …
        field = getattr(exc, "field", "system")  # a FieldValueError names the field itself
        raise InputError(
            f"cannot start the {system.kind} system", [Offender("<config>", str(exc), field=field)]
        ) from None
