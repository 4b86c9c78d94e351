"""Finding a ``kind: python`` system: ``system.callable`` imported, built, and its methods checked.

The contract (docs/site/recipes/python.md):

* ``callable: "package.module:attribute"`` names, in that module,
  - a **factory** — a class; or, with ``args``, a function taking them; or, without ``args``, a
    function callable with no arguments — called once per process with ``args`` as keyword
    arguments; it returns the system (or a search function);
  - or the **system** itself — an object with a ``search`` method — or a **search function**
    (a function that needs arguments, given no ``args``).
* The system has ``search(query, k)`` and optionally ``ask(query, k)`` (a search function is
  ``search`` alone), called with the query text and the number of hits wanted as the first two
  positional arguments, plus the keywords ``mode`` (only when ``system.mode`` is set; then the
  method must take it) and ``query_id`` (only when the method takes it, by name or ``**kwargs``).
* Optionally ``versions()``: a dict (or a line of text) of versions, read like a version command's.
* Optionally ``catalogue()``: every chunk the index holds, returned as ``search`` returns hits (and
  read with the same ``response`` mapping), for the stale-golden checks.

Everything that can be checked before a query runs is checked here, and a problem raises
:class:`~kebab_eval_pipeline.foundation.errors.FieldValueError` naming ``system.callable`` (or
``system.args``, ``system.mode``), the callable and the reason.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kebab_eval_pipeline.foundation.errors import FieldValueError


@dataclass(frozen=True)
class Method:
    """A system's ``search`` or ``ask``, and the optional keywords it takes."""

    fn: Callable[..., Any]
    takes_mode: bool
    takes_query_id: bool

    def keywords(self, mode: str | None, query_id: str) -> dict[str, str]:
        """The keyword arguments of one call."""
        out = {"mode": mode} if mode is not None else {}
        if self.takes_query_id:
            out["query_id"] = query_id
        return out


@dataclass(frozen=True)
class LoadedSystem:
    """What ``system.callable`` gave: the system object (a search function is its own system) and
    its methods."""

    target: Any
    search: Method
    ask: Method | None
    versions: Callable[[], Any] | None
    catalogue: Callable[[], Any] | None = None


def _problem(field: str, spec: str, reason: str) -> FieldValueError:
    return FieldValueError(field, f"{spec}: {reason}")


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300]}" if text else type(exc).__name__


def _import(spec: str, path: tuple[str, ...]) -> Any:
    """The attribute ``spec`` names, its module imported with ``path`` in front of ``sys.path``."""
    module_name, _, attribute = spec.partition(":")
    for folder in reversed(path):
        if folder not in sys.path:
            sys.path.insert(0, folder)
    try:
        obj = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if (
            exc.name is not None
            and module_name.startswith(exc.name)
            and module_name[len(exc.name) :][:1] in ("", ".")
        ):
            where = f"system.path {list(path)}" if path else "system.path is empty"
            raise _problem(
                "system.callable",
                spec,
                f"module {exc.name!r} not found ({where}; add the folder that holds it to system.path, "
                "relative to the config file)",
            ) from None
        raise _problem(
            "system.callable", spec, f"importing {module_name!r} failed: {_describe(exc)}"
        ) from None
    except Exception as exc:  # its own code failed: a syntax error, a missing dependency, …
        raise _problem(
            "system.callable", spec, f"importing {module_name!r} failed: {_describe(exc)}"
        ) from None
    walked = module_name
    for step in attribute.split("."):
        if not hasattr(obj, step):
            raise _problem("system.callable", spec, f"{walked!r} has no attribute {step!r}")
        obj = getattr(obj, step)
        walked = f"{walked}:{step}" if ":" not in walked else f"{walked}.{step}"
    return obj


def _bindable(fn: Callable[..., Any], *args: Any) -> bool | None:
    """Whether ``fn`` accepts ``args`` positionally; None when its signature cannot be read."""
    try:
        inspect.signature(fn).bind(*args)
    except TypeError:
        return False
    except ValueError:  # no signature (some builtins and C extensions)
        return None
    return True


def _takes(fn: Callable[..., Any], name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(
        p.kind is p.VAR_KEYWORD or (p.name == name and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
        for p in params
    )


def _is_factory(obj: Any, args: dict[str, Any]) -> bool:
    if inspect.isclass(obj):
        return True
    if callable(getattr(obj, "search", None)) or not callable(obj):
        return False
    # given args, it takes them; else a function callable without arguments builds the system
    return bool(args) or _bindable(obj) is True


def _method(spec: str, owner: str, name: str, fn: Callable[..., Any], mode: str | None) -> Method:
    if _bindable(fn, "query", 10) is False:
        raise _problem(
            "system.callable",
            spec,
            f"{owner}{name}{_signature(fn)} cannot be called as {name}(query, k): it must take the "
            "query text and the number of hits as its first two arguments",
        )
    takes_mode = _takes(fn, "mode")
    if mode is not None and not takes_mode:
        raise _problem(
            "system.mode",
            spec,
            f"system.mode is set but {owner}{name}{_signature(fn)} takes no 'mode' argument",
        )
    return Method(fn, takes_mode, _takes(fn, "query_id"))


def _signature(fn: Callable[..., Any]) -> str:
    try:
        return str(inspect.signature(fn))
    except (TypeError, ValueError):
        return "(…)"


def load_system(spec: str, args: dict[str, Any], path: tuple[str, ...], mode: str | None) -> LoadedSystem:
    """Import ``spec`` (``module:attribute``), call it with ``args`` when it is a factory, and check
    the result's ``search`` / ``ask`` / ``versions`` (see the module docstring). Raises
    FieldValueError naming the field and the problem."""
    found = _import(spec, path)
    if _is_factory(found, args):
        try:
            inspect.signature(found).bind(**args)
        except TypeError as exc:
            raise _problem(
                "system.args", spec, f"the factory{_signature(found)} cannot take them: {exc}"
            ) from None
        except ValueError:  # no signature to check: the call will tell
            pass
        try:
            system = found(**args)
        except Exception as exc:  # the user's factory: any failure is a config-time error
            raise _problem("system.callable", spec, f"the factory raised {_describe(exc)}") from None
        made = f"the factory returned {type(system).__name__}, which"
    elif args:
        raise _problem(
            "system.args",
            spec,
            f"system.args is set but the {type(found).__name__} it names is not a factory (a class "
            "or a function) to pass them to",
        )
    else:
        system, made = found, f"the {type(found).__name__} it names"
    search = getattr(system, "search", None)
    owner = f"{type(system).__name__}."
    if not callable(search):
        if not callable(system) or inspect.isclass(system):
            raise _problem(
                "system.callable",
                spec,
                f"{made} has no search(query, k) method and is not a search function",
            )
        search, owner = system, ""  # a search function
        name = getattr(system, "__name__", "search")
        return LoadedSystem(system, _method(spec, owner, name, search, mode), None, None)
    ask = getattr(system, "ask", None)
    versions = getattr(system, "versions", None)
    catalogue = getattr(system, "catalogue", None)
    if callable(catalogue) and _bindable(catalogue) is False:
        raise _problem(
            "system.callable",
            spec,
            f"{owner}catalogue{_signature(catalogue)} cannot be called without arguments: it returns "
            "every chunk the index holds",
        )
    return LoadedSystem(
        system,
        _method(spec, owner, "search", search, mode),
        _method(spec, owner, "ask", ask, mode) if callable(ask) else None,
        versions if callable(versions) else None,
        catalogue if callable(catalogue) else None,
    )
