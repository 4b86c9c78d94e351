"""Which system under test a run evaluated: the identity an automatic baseline must share.

A regression check compares two *versions* of one system. The identity says which system; every
thing that may change between versions of it stays out of the identity (chunk size and overlap,
index, chunker, embedding and prompt versions, timeouts, concurrency, corpus *content*, what a
version command or endpoint reports).

The identity of a run, by system kind:

- ``reference``: the corpus it indexes (``demo`` for the bundled demo corpus, else the corpus
  folder's absolute path; ``index <path>`` for a prebuilt index) and the retrieval ``mode``;
- ``command``: the argv the pipeline runs (``search_argv``, or ``argv`` for protocol jsonl) as
  configured — relative program paths already resolved against the config file — and ``mode``;
- ``http``: the search URL without user info and query string (either may carry a credential),
  and ``mode``. Header values never enter it;
- ``replay``: the trace file's absolute path (re-recording the same file is a new version);
- ``python``: the callable (``package.module:attribute``) with its ``args`` (as sorted JSON: a
  factory's arguments are what argv flags are to a command), and ``mode``; the folders put on
  ``sys.path`` are left out (where the code is found, like a command's ``cwd``);
- any ``system.name`` set in the config replaces all of that: runs of the same kind and name are
  one system, whatever their argv, URL, corpus or mode.

The identity is a small JSON-ready mapping ``{"kind", "target", "mode", "name", "label"}``:
``label`` is for people ("command `python search.py {query}`"), the rest is compared.
Runs stored before identities were recorded get one derived from their stored system details
when those name the system (command, http, replay); an old reference run cannot be placed (its
corpus folder was not stored) and has none.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: The keys two identities are compared on (``label`` is only for display).
COMPARED = ("kind", "target", "mode", "name")


def make_identity(kind: str, target: str | None, mode: str | None, name: str | None = None) -> dict:
    """The identity mapping (see the module docstring); ``name``, when set, stands for the
    whole system (target and mode are then dropped, so they cannot make two runs differ)."""
    if name:
        return {"kind": kind, "target": None, "mode": None, "name": name, "label": f"{kind} {name!r}"}
    shown = {"command": f"`{target}`", "python": f"`{target}`"}.get(kind, target or "?")
    label = f"{kind} {shown}" + (f" ({mode})" if mode else "")
    return {"kind": kind, "target": target, "mode": mode, "name": None, "label": label}


def python_target(spec: str, args_json: str | None) -> str:
    """A python system's target: its callable, and its args (sorted JSON) when it has any."""
    return spec if not args_json or args_json == "{}" else f"{spec} {args_json}"


def identity_from_settings(system: Any) -> dict:
    """The identity of a configured system (a ``settings.SystemSettings``; paths are the
    resolved ones ``load_settings`` returns)."""
    from kebab_eval_pipeline.demo import DEMO_CORPUS

    kind, mode, name = system.kind, getattr(system, "mode", None), getattr(system, "name", None)
    if kind == "reference":
        if system.index:
            target = f"index {Path(system.index).resolve()}"
        elif system.corpus is None or Path(system.corpus).resolve() == DEMO_CORPUS.resolve():
            target = "demo corpus"
        else:
            target = f"corpus {Path(system.corpus).resolve()}"
    elif kind == "command":
        target = shlex.join(system.argv if system.protocol == "jsonl" else system.search_argv)
    elif kind == "http":
        from kebab_eval_pipeline.net.secrets import redact_url

        target = redact_url(system.search_url)
    elif kind == "replay":
        target, mode = str(Path(system.path).resolve()), None
    elif kind == "python":
        target = python_target(system.callable, json.dumps(system.args, sort_keys=True, default=str))
    else:  # a kind added later: its kind alone, until it says what identifies it
        target = None
    return make_identity(kind, target, mode, name)


def derive_identity(system: Mapping[str, Any]) -> dict | None:
    """The identity of a stored run from its run_metrics ``info["system"]``: the recorded one,
    else one derived from the details older runs stored (command argv, redacted http URL, replay
    trace path — what :func:`identity_from_settings` would have made of them), else None (an
    old reference run: its corpus folder was never stored)."""
    recorded = system.get("identity")
    if isinstance(recorded, Mapping) and recorded.get("kind"):
        return dict(recorded)
    kind, mode = system.get("kind"), system.get("mode")
    target = None
    if kind == "command":
        target = system.get("argv") if system.get("protocol") == "jsonl" else system.get("search_argv")
    elif kind == "http":
        target = system.get("search_url")
    elif kind == "replay":
        target, mode = system.get("trace"), None
    elif kind == "python" and system.get("callable"):
        target = python_target(str(system["callable"]), system.get("args"))
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
