"""Which system under test a run evaluated: the identity an automatic baseline must share.

A regression check compares two *versions* of one system. The identity says which system; every
thing that may change between versions of it stays out of the identity (chunk size and overlap,
index, chunker, embedding and prompt versions, timeouts, concurrency, corpus *content*, what a
version command or endpoint reports).

What identifies a system is its kind's declaration (``SystemKind.identity``, in the kind's module
of :mod:`.kinds`): the *target* — the corpus or index a reference system reads, the argv a command
runs, an http service's redacted search URL, a replayed trace's path, a python callable and its
args — and, but for replay, the ``mode``. Any ``system.name`` set in the config replaces all of
that: runs of the same kind and name are one system, whatever their argv, URL, corpus or mode.

The identity is a small JSON-ready mapping ``{"kind", "target", "mode", "name", "label"}``:
``label`` is for people ("command `python search.py {query}`"), the rest is compared.
Runs stored before identities were recorded get one derived from their stored system details
when those name the system (command, http, replay); an old reference run cannot be placed (its
corpus folder was not stored) and has none.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kebab_eval_pipeline.systems.settings import kind_of

#: The keys two identities are compared on (``label`` is only for display).
COMPARED = ("kind", "target", "mode", "name")


def make_identity(kind: str, target: str | None, mode: str | None, name: str | None = None) -> dict:
    """The identity mapping (see the module docstring); ``name``, when set, stands for the
    whole system (target and mode are then dropped, so they cannot make two runs differ)."""
    if name:
        return {"kind": kind, "target": None, "mode": None, "name": name, "label": f"{kind} {name!r}"}
    declared = kind_of(kind)
    shown = f"`{target}`" if declared is not None and declared.code_target else target or "?"
    label = f"{kind} {shown}" + (f" ({mode})" if mode else "")
    return {"kind": kind, "target": target, "mode": mode, "name": None, "label": label}


def identity_from_settings(system: Any) -> dict:
    """The identity of a configured system (a ``settings.SystemSettings``; paths are the
    resolved ones ``load_settings`` returns)."""
    kind = kind_of(system.kind)
    if kind is None:  # not a registered kind (a test's own settings): its kind alone
        return make_identity(system.kind, None, getattr(system, "mode", None), getattr(system, "name", None))
    mode = getattr(system, "mode", None) if kind.identity_mode else None
    return make_identity(kind.name, kind.identity(system), mode, getattr(system, "name", None))


def derive_identity(system: Mapping[str, Any]) -> dict | None:
    """The identity of a stored run from its run_metrics ``info["system"]``: the recorded one,
    else one derived from the details older runs stored (command argv, redacted http URL, replay
    trace path — what :func:`identity_from_settings` would have made of them), else None (an
    old reference run: its corpus folder was never stored)."""
    recorded = system.get("identity")
    if isinstance(recorded, Mapping) and recorded.get("kind"):
        return dict(recorded)
    kind, mode = system.get("kind"), system.get("mode")
    declared = kind_of(str(kind)) if kind else None
    target = declared.stored_target(system) if declared is not None else None
    if declared is not None and not declared.identity_mode:
        mode = None
    if not kind or not target:
        return None
    return make_identity(str(kind), str(target), None if mode is None else str(mode))


def same_system(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool | None:
    """True when two identities name one system, False when they differ, None when either is
    unknown (an unknown identity of another *kind* is still a different system: see
    :func:`systems_differ`)."""
    if a is None or b is None:
        return None
    return all(a.get(k) == b.get(k) for k in COMPARED)


def systems_differ(info_a: Mapping[str, Any], info_b: Mapping[str, Any]) -> bool | None:
    """Whether two runs (their run_metrics ``info``) evaluated different systems: True/False, or
    None when it cannot be told (a run without an identity, of the same kind as the other)."""
    sa, sb = info_a.get("system") or {}, info_b.get("system") or {}
    same = same_system(derive_identity(sa), derive_identity(sb))
    if same is not None:
        return not same
    if sa.get("kind") and sb.get("kind") and sa.get("kind") != sb.get("kind"):
        return True
    return None


def label(info: Mapping[str, Any]) -> str:
    """A run's system for people: its identity's label (the whole target: two systems must be
    told apart), else the short title label of ``systems.label`` (kind, what, mode)."""
    from kebab_eval_pipeline.systems.label import system_label

    system = info.get("system") or {}
    identity = derive_identity(system)
    if identity is not None:
        return str(identity["label"])
    return system_label(system)
