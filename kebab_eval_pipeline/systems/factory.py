"""Build the configured system under test from run settings, and read its versions live.

Two uses, two lifetimes. A run builds its system once per process (:func:`build_system`): the CLI's
checks, the plan and every shard step share it. A version reading — the system-version sensor, the
nightly schedule's and the sensors' observations of ``system_under_test``, the freshness check — asks
the system as it is *now* (:func:`live_info`), however long the process (a code server) has lived:

* reference — the index is reloaded when its manifest (or, built from a corpus, any corpus file)
  changed: the stat fingerprint of :mod:`kebab_eval_pipeline.read_once` (inode and change time
  included, so an index replaced with its old timestamps still counts as changed);
* command / http — a new adapter per call, so ``version_argv`` is run and ``version_url`` fetched again;
* replay — the trace is parsed again once its file changed (:mod:`kebab_eval_pipeline.read_once`);
* python — built afresh in a process of its own (:mod:`.python_versions`): the module imported
  again, the factory called, ``versions()`` asked; the object a run in this process uses is left
  alone, and nothing the reading loads stays in this process.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Protocol

from kebab_eval_pipeline.contract import SystemInfo
from kebab_eval_pipeline.demo import DEMO_CORPUS
from kebab_eval_pipeline.errors import InputError, Offender
from kebab_eval_pipeline.net.secrets import SecretMask, active
from kebab_eval_pipeline.read_once import fingerprint
from kebab_eval_pipeline.systems.protocol import SystemUnderTest
from kebab_eval_pipeline.systems.settings import (
    CommandSystemSettings,
    HttpSystemSettings,
    PythonSystemSettings,
    ReferenceSystemSettings,
    ReplaySystemSettings,
    SystemSettings,
)


class ConfiguredSystem(Protocol):
    """What building a system reads of a run's settings (``settings.RunSettings`` is one)."""

    @property
    def system(self) -> SystemSettings: ...


def _corpus_fingerprint(corpus: Path, exclude: tuple[str, ...]) -> tuple:
    # Cheap change detector for the in-process cache (names and stat fingerprints — inode, size,
    # modification and change time — of what the ingest would read, and the symlinks it would skip);
    # the index's own corpus hash remains the authority for index_version. The change time catches a
    # file replaced with its old size and timestamps (an archive with normalised times). The ingest's
    # own walk, so a symlink out of the corpus is not even stat'ed.
    from kebab_eval_pipeline.reference.beir import scan_files

    scan = scan_files(corpus, exclude)
    files = tuple((rel, fingerprint(p)) for rel, p in scan.files)
    return files, tuple((s.path, s.reason) for s in scan.skipped_symlinks)


def _is_beir_corpus(path: Path) -> bool:
    from kebab_eval_pipeline.reference.beir import beir_corpus_file

    return beir_corpus_file(path) is not None


#: The reference system last loaded per configuration, with the inputs it was loaded from (at most
#: ``_LOADED_SIZE`` configurations): a rebuilt index replaces its configuration's entry, so a
#: long-lived process keeps one copy of each index, not one per rebuild.
_LOADED: dict[ReferenceSystemSettings, tuple[tuple, SystemUnderTest]] = {}
_LOADED_SIZE = 8
_LOADED_LOCK = threading.Lock()


def _cached_reference(settings: ReferenceSystemSettings, inputs: tuple) -> SystemUnderTest:
    """The reference system of ``settings``, loaded again when ``inputs`` — the stat fingerprint of a
    prebuilt index's manifest (written last by ``ref index``: a rebuilt index has a new one), or
    :func:`_corpus_fingerprint` — changed."""
    with _LOADED_LOCK:
        kept = _LOADED.get(settings)
        if kept is not None and kept[0] == inputs:
            return kept[1]
    system = _reference(settings)
    with _LOADED_LOCK:
        _LOADED.pop(settings, None)  # the configuration's older index goes now, not when evicted
        while len(_LOADED) >= _LOADED_SIZE:
            _LOADED.pop(next(iter(_LOADED)))  # the configuration loaded longest ago
        _LOADED[settings] = (inputs, system)
    return system


def _reference(settings: ReferenceSystemSettings) -> SystemUnderTest:
    from kebab_eval_pipeline.reference.cache import cached_index
    from kebab_eval_pipeline.reference.index import VECTOR_MODES, ReferenceIndex
    from kebab_eval_pipeline.systems.reference_adapter import ReferenceSystem

    if settings.index:
        index = ReferenceIndex.load(Path(settings.index))
        if "tokenizer" in settings.model_fields_set and settings.tokenizer != index.tokenizer_name:
            raise ValueError(
                f"system.tokenizer is {settings.tokenizer!r} but the index {settings.index} was built with "
                f"{index.tokenizer_name!r}; rebuild it with `kebab-eval ref index --tokenizer "
                f"{settings.tokenizer}` or drop system.tokenizer"
            )
        _check_index_model(index, settings)
    else:
        # Built once per corpus content and settings, then loaded from the on-disk cache.
        corpus = Path(settings.corpus) if settings.corpus else DEMO_CORPUS
        index, _ = cached_index(
            corpus,
            chunk_size=settings.chunk_size,
            chunk_overlap=settings.chunk_overlap,
            with_vectors=settings.mode in VECTOR_MODES,
            exclude=tuple(settings.exclude),
            tokenizer=settings.tokenizer,
            embedding_model=settings.embedding_model,
        )
    kwargs = {} if settings.refusal_threshold is None else {"gate_threshold": settings.refusal_threshold}
    return ReferenceSystem(
        index,
        mode=settings.mode,
        fusion=settings.fusion.spec(),
        gate_feature=settings.refusal_feature,
        **kwargs,
    )


def _check_index_model(index, settings: ReferenceSystemSettings) -> None:
    """A prebuilt index keeps its embedding model; an explicit, different ``embedding_model`` is an
    error rather than silently ignored (the run would report the other model)."""
    from kebab_eval_pipeline.reference.vectors import short_name

    if "embedding_model" not in settings.model_fields_set or index.vectors is None:
        return
    built = short_name(index.vectors.embedding_model)
    if built != settings.embedding_model:
        raise InputError(
            "reference index built with another embedding model",
            [
                Offender(
                    str(settings.index),
                    f"the index holds {built} embeddings but system.embedding_model is "
                    f"{settings.embedding_model}; rebuild it with `kebab-eval ref index --with-vectors "
                    f"--embedding-model {settings.embedding_model}` or drop system.embedding_model",
                    field="system.embedding_model",
                )
            ],
        )


def live_info(settings: ConfiguredSystem) -> SystemInfo:
    """The system's info — its versions — read from it now (see the module docstring): what a run
    started at this moment would record. For a python system, a Python process is started each
    time (its cost: the interpreter, the system's imports and its factory); the object a run in
    this process uses is not touched.

    Raises InputError when the system cannot be built (a missing index, a factory that raises, a
    python reading past its time limit); a version endpoint, command or ``versions()`` that fails
    is ``details["version_error"]``."""
    system = settings.system
    if isinstance(system, PythonSystemSettings):
        from kebab_eval_pipeline.systems.python_versions import live_python_info

        return _masked(settings, live_python_info(system))
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
    """The system under test for ``settings``. The reference system is cached per process while
    its inputs are unchanged; a python system is built (its factory called) once per process and
    configuration; the others are cheap to build (nothing is contacted until a run, except a
    configured version endpoint/command when :meth:`info` is first called)."""
    system = settings.system
    if system.kind == "reference":
        if system.index:
            source = Path(system.index)
            if not source.is_dir():
                raise InputError(
                    "reference index not found",
                    [Offender(str(source), "no such index folder", field="system.index")],
                )
        else:
            corpus = Path(system.corpus) if system.corpus else DEMO_CORPUS
            if not corpus.is_dir() and not _is_beir_corpus(corpus):
                raise InputError(
                    "reference corpus not found",
                    [Offender(str(corpus), "no such folder (or BEIR corpus.jsonl)", field="system.corpus")],
                )
        try:
            if system.index:
                return _cached_reference(system, (str(source), fingerprint(source / "manifest.json")))
            return _cached_reference(system, _corpus_fingerprint(corpus, tuple(system.exclude)))
        except (ValueError, OSError) as exc:  # not an index, unsupported mode, unreadable corpus
            raise InputError(
                "cannot start the reference system",
                [Offender(system.index or system.corpus or str(DEMO_CORPUS), str(exc), field="system")],
            ) from None
    try:
        if isinstance(system, CommandSystemSettings):
            if system.protocol == "jsonl":
                from kebab_eval_pipeline.systems.command_jsonl import JsonlCommandSystem

                return JsonlCommandSystem(system)
            from kebab_eval_pipeline.systems.command import CommandSystem

            return CommandSystem(system)
        if isinstance(system, HttpSystemSettings):
            from kebab_eval_pipeline.systems.http import HttpSystem

            return HttpSystem(system)
        if isinstance(system, ReplaySystemSettings):
            from kebab_eval_pipeline.systems.replay import ReplaySystem

            return ReplaySystem(system)  # InputError for an unreadable trace, naming every bad line
        if isinstance(system, PythonSystemSettings):
            from kebab_eval_pipeline.systems.python_adapter import python_system

            return python_system(system)  # built once per process; the factory is the user's code
    except ValueError as exc:  # command not found, header variable unset, callable missing, …
        field = getattr(exc, "field", "system")  # a FieldValueError names the field itself
        raise InputError(
            f"cannot start the {system.kind} system", [Offender("<config>", str(exc), field=field)]
        ) from None
    raise InputError("unknown system kind", [Offender("<config>", f"{system.kind!r}", field="system.kind")])
