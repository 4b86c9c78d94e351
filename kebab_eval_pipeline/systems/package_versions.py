"""The installed packages an in-process system is made of, with their versions.

A system's framework (haystack-ai, llama-index-core, langchain-core …) is part of what a run
measured: an upgrade can move every score. :func:`object_packages` names the distributions whose
files define the object's class and the classes of its attributes (items of list, tuple and dict
attributes included), walking down through the user's own objects (a wrapper holding an app
holding a Haystack retriever names haystack-ai) up to a few levels, read with
:mod:`importlib.metadata`. Modules of the standard library and modules no installed distribution
owns (the user's own code, not installed) are left out.
"""

from __future__ import annotations

import inspect
import sys
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

_MAX_ATTRIBUTES = 200  # an object with thousands of attributes is data, not a system's parts
_MAX_DEPTH = 4  # levels of the user's own objects walked through
_MAX_VISITS = 2_000


def _module_of(value: Any) -> str | None:
    kind = isinstance(value, type) or inspect.isroutine(value)
    module = getattr(value, "__module__", None) if kind else type(value).__module__
    return module if isinstance(module, str) else None


def _parts(value: Any) -> list[Any]:
    """An object's attribute values, and the items of those that are lists, tuples or dicts."""
    attrs = getattr(value, "__dict__", None)
    if not isinstance(attrs, dict) or isinstance(value, type):
        return []
    out = []
    for part in list(attrs.values())[:_MAX_ATTRIBUTES]:
        out.append(part)
        if isinstance(part, list | tuple):
            out += part[:_MAX_ATTRIBUTES]
        elif isinstance(part, dict):
            out += list(part.values())[:_MAX_ATTRIBUTES]
    return out


def _packages_in(obj: Any) -> set[str]:
    """Distributions owning ``obj``'s class and its parts' classes. The walk goes down through the
    user's own objects (no distribution owns them: a wrapper holding an app holding a retriever)
    and stops at an installed package's object (its insides are the package's business)."""
    found: set[str] = set()
    seen: set[int] = set()
    level = [obj]
    for _ in range(_MAX_DEPTH):
        below = []
        for value in level:
            if id(value) in seen or len(seen) >= _MAX_VISITS:
                continue
            seen.add(id(value))
            module = _module_of(value)
            owner = _owner(module) if module else None
            if owner:
                found.add(owner)
            elif module is None or module.partition(".")[0] not in sys.stdlib_module_names:
                below += _parts(value)
        level = below
    return found


@lru_cache(maxsize=1)
def _top_level_owners() -> dict[str, tuple[str, ...]]:
    return {top: tuple(dict.fromkeys(names)) for top, names in metadata.packages_distributions().items()}


@lru_cache(maxsize=256)
def _files_of(distribution: str) -> frozenset[Path]:
    dist = metadata.distribution(distribution)
    return frozenset(Path(dist.locate_file(f)).resolve() for f in dist.files or () if f.suffix == ".py")


def _owner(module_name: str) -> str | None:
    """The distribution owning ``module_name``'s file (several share a namespace such as
    ``llama_index``: the one whose files hold it), else the only one of its top-level name.

    A distribution that ships files under the top-level name but not the module's own file does
    not own it: some wheels install a stray top-level ``tests`` package, and the user's own
    ``tests`` package must not be named after them. An editable install ships no files under
    the name, so its one distribution still owns the module."""
    top = module_name.partition(".")[0]
    if top in sys.stdlib_module_names or top == "builtins":
        return None
    owners = _top_level_owners().get(top, ())
    if not owners:
        return None
    file = getattr(sys.modules.get(module_name), "__file__", None)
    if not file:
        return owners[0] if len(owners) == 1 else None
    path = Path(file).resolve()
    for name in owners:
        try:
            if path in _files_of(name):
                return name
        except metadata.PackageNotFoundError:
            continue
    if len(owners) == 1 and not _ships_files_under(owners[0], top):
        return owners[0]
    return None


@lru_cache(maxsize=256)
def _ships_files_under(distribution: str, top: str) -> bool:
    try:
        files = metadata.distribution(distribution).files or ()
    except metadata.PackageNotFoundError:
        return False
    return any(f.parts[:1] == (top,) or str(f) == f"{top}.py" for f in files)


def object_packages(*objects: Any) -> dict[str, str]:
    """``{distribution: version}`` of the installed packages ``objects`` come from (see the module
    docstring), sorted by name; empty when none is installed (plain code of the user's own)."""
    names = {name for obj in objects for name in _packages_in(obj)}
    versions = {}
    for name in sorted(names, key=str.lower):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions
