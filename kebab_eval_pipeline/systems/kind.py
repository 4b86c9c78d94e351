"""What a system kind declares, and the registry of kinds (``system.kind`` of the run config).

A kind is one module of :mod:`kebab_eval_pipeline.systems.kinds` that defines its settings model
and registers one :class:`SystemKind`: how a system of that kind is built, what identifies it for
baselines, how it is labelled for people, and what its runs can carry. Everything that depends
on the kinds — the run config's ``system:`` union and its "must be one of" message,
``SYSTEM_KINDS``, ``build_system``, identities, labels, the paths a config resolves, the secrets a
run masks — is derived from the registry (:mod:`.settings`, :mod:`.factory`, :mod:`.identity`,
:mod:`.label`), so a kind forgotten in one of them cannot exist: a declaration missing a part is
refused when its module is imported.

The adapter that runs queries is bound late (:func:`adapter`, ``"package.module:Name"``, the way
entry points name objects): a config loads without importing httpx, pandas or a framework, and
the adapter module can import its settings model from the kind module without an import circle.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, get_args

from pydantic import Field

from kebab_eval_pipeline.foundation.config_model import StrictSettings
from kebab_eval_pipeline.systems.capabilities import Capabilities

if TYPE_CHECKING:
    from kebab_eval_pipeline.contract import SystemInfo
    from kebab_eval_pipeline.systems.protocol import SystemUnderTest

#: ``system.name``: when set, runs of the same kind and name are one system for baseline choice,
#: whatever their argv, URL, corpus or mode (kebab_eval_pipeline/systems/identity.py).
SystemName = Annotated[str, Field(min_length=1, max_length=200, pattern=r"\S")]

#: A path-valued setting made absolute against the config file's folder: ``fix(value, *loc)``
#: (``loc``: where it sits, e.g. ``"system", "corpus"``, for the error naming a bad path).
PathFixer = Callable[..., Any]

_NAME_RE = re.compile(r"[a-z][a-z0-9_]*")
_REFERENCE_RE = re.compile(r"kebab_eval_pipeline(\.[A-Za-z_]\w*)+:[A-Za-z_]\w*")


def _no_paths(settings: Any, fix: PathFixer) -> Any:
    return settings


def _no_secrets(settings: Any, env: Mapping[str, str] | None) -> list:
    return []


@dataclass(frozen=True)
class SystemKind:
    """One ``system.kind``, declared by its module in :mod:`.kinds` and registered with
    :func:`register`. Every part without a default must be given; a missing or malformed one
    raises TypeError/ValueError when the module is imported (a kind can never silently fall back
    to another kind's identity or a generic label).

    - ``name``: the ``kind:`` value; ``settings``: its pydantic model, whose ``kind`` field is
      ``Literal[name]``.
    - ``build(settings) -> SystemUnderTest``: the adapter; a ValueError (a FieldValueError names
      its field) becomes "cannot start the <kind> system", an InputError passes through.
    - ``identity(settings) -> str | None``: the *target* that, with ``settings.mode``, identifies the
      system for baseline choice (:mod:`.identity`); paths are the resolved ones.
    - ``label(details) -> str``: what a short label shows of a system description (a stored run's
      flattened ``info["system"]``, or ``SystemInfo`` details), "" when the details do not say.
    - ``capabilities(settings) -> Capabilities``: what its runs can carry before it is built.
    - ``stored_target(details) -> str | None``: the identity target of a run stored before
      identities were recorded, from its stored details; None when they cannot place it.
    - ``resolve_paths(settings, fix) -> settings``: path-valued settings made absolute with
      ``fix`` (relative to the config file); default: the kind has none.
    - ``secrets(settings, env) -> list``: the secrets it reads (``net.secrets`` findings), masked
      everywhere a run writes; default: none besides the run-level ones.
    - ``live_info(settings) -> SystemInfo`` (unmasked): its versions as they are *now*, when
      building it in this process is not the way to read them (a python system); default: built.
    - ``identity_mode``: the ``mode`` is part of the identity (False: a replayed trace, whose
      recorded mode is a property of the file, not of a system).
    - ``code_target``: the identity's label shows the target as code (``command `argv` ``).
    - ``probed``: ``golden validate --config`` asks it one query (a system whose index the
      validation cannot read whole; the reference index is read, a replay has nothing to ask).
    - ``version_source``: where its live versions come from, for messages: the setting that names
      it (``version_argv``, ``version_url``) or what the built system is asked (``versions()``).
    """

    name: str
    settings: type[StrictSettings]
    build: Callable[[Any], SystemUnderTest]
    identity: Callable[[Any], str | None]
    label: Callable[[Mapping[str, Any]], str]
    capabilities: Callable[[Any], Capabilities]
    stored_target: Callable[[Mapping[str, Any]], str | None] = lambda details: None
    resolve_paths: Callable[[Any, PathFixer], Any] = _no_paths
    secrets: Callable[[Any, Mapping[str, str] | None], list] = _no_secrets
    live_info: Callable[[Any], SystemInfo] | None = None
    identity_mode: bool = True
    code_target: bool = False
    probed: bool = False
    version_source: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME_RE.fullmatch(self.name):
            raise ValueError(f"system kind {self.name!r}: a name is lower-case letters, digits and _")
        where = f"system kind {self.name!r}"
        if not (isinstance(self.settings, type) and issubclass(self.settings, StrictSettings)):
            raise TypeError(f"{where}: settings must be a StrictSettings model, got {self.settings!r}")
        field = self.settings.model_fields.get("kind")
        if field is None or get_args(field.annotation) != (self.name,):
            raise TypeError(
                f"{where}: {self.settings.__name__} must have the field kind: Literal[{self.name!r}]"
            )
        for part in (
            "build",
            "identity",
            "label",
            "capabilities",
            "stored_target",
            "resolve_paths",
            "secrets",
        ):
            if not callable(getattr(self, part)):
                raise TypeError(f"{where}: {part} must be callable, got {getattr(self, part)!r}")
        if self.live_info is not None and not callable(self.live_info):
            raise TypeError(f"{where}: live_info must be callable or None")


#: Every registered kind by name, in registration order (the order of ``SYSTEM_KINDS`` and of the
#: "must be one of" message): :mod:`.kinds` imports the built-in kind modules in that order.
_REGISTRY: dict[str, SystemKind] = {}


def register(kind: SystemKind) -> SystemKind:
    """Add ``kind`` to the registry and return it (a kind module's ``KIND = register(SystemKind(…))``).
    A second registration of the same name is refused (two modules claiming one ``kind:`` value)."""
    if not isinstance(kind, SystemKind):
        raise TypeError(f"register() takes a SystemKind, got {kind!r}")
    if kind.name in _REGISTRY and _REGISTRY[kind.name] is not kind:
        raise ValueError(f"system kind {kind.name!r} is registered twice")
    _REGISTRY[kind.name] = kind
    return kind


def registered() -> dict[str, SystemKind]:
    """The registered kinds by name (a copy); import :mod:`.kinds` first to have the built-in ones."""
    return dict(_REGISTRY)


def adapter(reference: str) -> Callable[..., Any]:
    """The object ``"kebab_eval_pipeline.<module>:<Name>"`` names, imported now: how a kind's
    ``build`` reaches its adapter only when a system is built (see the module docstring)."""
    if not _REFERENCE_RE.fullmatch(reference):
        raise ValueError(f"{reference!r}: expected 'kebab_eval_pipeline.<module>:<name>'")
    module, _, name = reference.partition(":")
    return getattr(importlib.import_module(module), name)
