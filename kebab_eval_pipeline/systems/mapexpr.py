"""The response-mapping language: where one field of a hit, answer or citation comes from.

An expression is either a dotted path (``meta.file_path``, ``items.0.id``) — the whole language
before it grew — or an object with exactly one *source* key and optional *transforms*:

* ``{path: "a.b"}`` or ``{path: [a, "key.with.dots", 0]}`` — the value at that path (a list of
  steps takes each step verbatim, so keys containing dots are reachable);
* ``{const: bm25}`` — that value, whatever the response holds;
* ``{concat: [expr, ...]}`` — a list: list values are flattened (one level), other values are
  appended, parts that are missing, null or ``""`` are skipped (so it is never missing);
* ``{first: [expr, ...]}`` — the first part that is present and neither null nor ``""``.

Transforms, on ``path`` and ``first`` only, are applied in this order to a string value (a
missing or null value stays missing; any other non-string is an error naming the transform):

* ``regex: PATTERN`` — the first match (``re.search``) of the pattern: its first group if it has
  groups, else the whole match, stripped; no match reads as missing;
* ``split: SEP`` — the pieces between ``SEP``, stripped, empty ones dropped (a list);
* ``relative_to: ROOT`` (or a list of roots) — a path under a root made relative to the first
  such root (``/abs/corpus/guide/a.md`` → ``guide/a.md``); a path under no root is unchanged;
* ``basename: true`` — the part after the last ``/``.

:func:`compile_expr` checks an expression when the config is loaded and raises
:class:`MapConfigError` naming where inside it the problem is; the compiled :class:`Expr`'s
``evaluate`` returns :data:`MISSING` for an absent value and raises :class:`MapDataError` when
the response's data cannot be transformed as asked.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

#: What an expression reads when the response has no value there.
MISSING: Any = object()

SOURCES = ("path", "const", "concat", "first")
TRANSFORMS = ("regex", "split", "relative_to", "basename")


class MapConfigError(ValueError):
    """An expression in the config is malformed (raised at config load)."""


class MapDataError(ValueError):
    """A response's value cannot be transformed as the mapping asks (raised per query)."""


def dig_steps(value: Any, steps: Sequence[str | int]) -> Any:
    """The value at ``steps`` inside ``value``, or :data:`MISSING` when a step is absent.

    A string step is an object key; on a list it is an index when it is an integer literal
    (``"0"``, ``"-1"``). An int step is a list index (or, on an object, the key ``str(step)``).
    """
    current = value
    for step in steps:
        if isinstance(current, dict):
            key = str(step) if isinstance(step, int) else step
            if key not in current:
                return MISSING
            current = current[key]
        elif isinstance(current, list):
            if isinstance(step, int):
                index = step
            elif step.lstrip("-").isdigit():
                index = int(step)
            else:
                return MISSING
            if not -len(current) <= index < len(current):
                return MISSING
            current = current[index]
        else:
            return MISSING
    return current


def _absent(value: Any) -> bool:
    return value is MISSING or value is None or value == ""


@dataclass(frozen=True)
class Expr:
    """One compiled expression (see the module docstring); ``evaluate(obj)`` reads it from ``obj``."""

    source: str
    steps: tuple[str | int, ...] = ()
    const: Any = None
    parts: tuple[Expr, ...] = ()
    regex: re.Pattern | None = None
    split: str | None = None
    roots: tuple[str, ...] = ()
    basename: bool = False

    def evaluate(self, obj: Any) -> Any:
        if self.source == "path":
            value = dig_steps(obj, self.steps)
        elif self.source == "const":
            return self.const
        elif self.source == "concat":
            out: list = []
            for part in self.parts:
                value = part.evaluate(obj)
                if isinstance(value, list):
                    out.extend(v for v in value if not _absent(v))
                elif not _absent(value):
                    out.append(value)
            return out
        else:  # first
            value = next((v for v in (p.evaluate(obj) for p in self.parts) if not _absent(v)), MISSING)
        return self._transform(value)

    def _transform(self, value: Any) -> Any:
        if value is MISSING or value is None or not self._has_transforms:
            return value
        if not isinstance(value, str):
            raise MapDataError(f"{self._first_transform} expects a string, got {_kind(value)}")
        if self.regex is not None:
            match = self.regex.search(value)
            if match is None:
                return MISSING
            value = match.group(1) if self.regex.groups else match.group(0)
            if value is None:  # an optional group that did not take part
                return MISSING
            value = value.strip()
        if self.split is not None:
            pieces = [p.strip() for p in value.split(self.split)]
            return [p for p in pieces if p]
        if self.roots:
            value = _relative(value, self.roots)
        if self.basename:
            value = value.rstrip("/").rsplit("/", 1)[-1]
        return value

    @property
    def _has_transforms(self) -> bool:
        return self.regex is not None or self.split is not None or bool(self.roots) or self.basename

    @property
    def _first_transform(self) -> str:
        for name, on in (
            ("regex", self.regex is not None),
            ("split", self.split is not None),
            ("relative_to", bool(self.roots)),
        ):
            if on:
                return name
        return "basename"


def _relative(path: str, roots: tuple[str, ...]) -> str:
    """``path`` relative to the first root it lies under ("\\" read as "/"), else unchanged."""
    normal = posixpath.normpath(path.replace("\\", "/"))
    for root in roots:
        if normal == root:
            return "."
        if normal.startswith(root.rstrip("/") + "/"):
            return normal[len(root.rstrip("/")) + 1 :]
    return path


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _where(loc: str, key: str) -> str:
    return f"{loc}.{key}" if loc else key


def compile_expr(spec: Any, loc: str = "") -> Expr:
    """Check a mapping expression and compile it. Raises :class:`MapConfigError` whose message
    starts with the position inside ``spec`` (``concat.1.split: ...``) when ``loc`` is empty at
    the top, else with ``loc``."""

    def fail(where: str, reason: str) -> MapConfigError:
        return MapConfigError(f"{where}: {reason}" if where else reason)

    if isinstance(spec, str):
        return Expr("path", steps=_path_steps(spec, loc, fail))
    if not isinstance(spec, dict):
        raise fail(
            loc,
            f"expected a dotted path or an object with one of {', '.join(SOURCES)}, got {_kind(spec)}",
        )
    unknown = [k for k in spec if k not in SOURCES and k not in TRANSFORMS]
    if unknown:
        raise fail(
            loc,
            f"unknown key {', '.join(map(repr, map(str, unknown)))}; expected one of "
            f"{', '.join(SOURCES)} and optionally {', '.join(TRANSFORMS)}",
        )
    sources = [k for k in SOURCES if k in spec]
    if len(sources) != 1:
        found = f"got {' and '.join(sources)}" if sources else "got none"
        raise fail(loc, f"expected exactly one of {', '.join(SOURCES)}; {found}")
    source = sources[0]
    transforms = [k for k in TRANSFORMS if k in spec]
    if transforms and source in ("const", "concat"):
        hint = " (put them on its parts)" if source == "concat" else ""
        raise fail(loc, f"{source} takes no transforms, got {', '.join(transforms)}{hint}")
    value = spec[source]
    fields: dict[str, Any] = {}
    if source == "path":
        if isinstance(value, str):
            fields["steps"] = _path_steps(value, _where(loc, "path"), fail)
        elif isinstance(value, list) and value and all(_is_step(s) for s in value):
            fields["steps"] = tuple(value)
        else:
            raise fail(_where(loc, "path"), "expected a dotted path or a non-empty list of keys and indices")
    elif source == "const":
        if not _is_json(value):
            raise fail(_where(loc, "const"), f"expected a JSON value, got {_kind(value)}")
        fields["const"] = value
    else:
        if not isinstance(value, list) or not value:
            raise fail(_where(loc, source), "expected a non-empty list of expressions")
        fields["parts"] = tuple(compile_expr(p, _where(loc, f"{source}.{i}")) for i, p in enumerate(value))
    if "regex" in spec:
        pattern = spec["regex"]
        if not isinstance(pattern, str):
            raise fail(_where(loc, "regex"), f"expected a pattern string, got {_kind(pattern)}")
        try:
            fields["regex"] = re.compile(pattern)
        except re.error as exc:
            raise fail(_where(loc, "regex"), f"not a valid regular expression: {exc}") from None
    if "split" in spec:
        sep = spec["split"]
        if not isinstance(sep, str) or not sep:
            raise fail(_where(loc, "split"), "expected a non-empty separator string")
        if "relative_to" in spec or spec.get("basename"):
            raise fail(loc, "split gives a list: relative_to and basename cannot follow it")
        fields["split"] = sep
    if "relative_to" in spec:
        roots = spec["relative_to"]
        roots = [roots] if isinstance(roots, str) else roots
        if not isinstance(roots, list) or not roots or not all(isinstance(r, str) and r for r in roots):
            raise fail(_where(loc, "relative_to"), "expected a folder path or a non-empty list of them")
        fields["roots"] = tuple(posixpath.normpath(r.replace("\\", "/")) for r in roots)
    if "basename" in spec:
        if not isinstance(spec["basename"], bool):
            raise fail(_where(loc, "basename"), f"expected true or false, got {spec['basename']!r}")
        fields["basename"] = spec["basename"]
    return Expr(source, **fields)


def _path_steps(path: str, loc: str, fail) -> tuple[str, ...]:
    steps = tuple(path.split("."))
    if not path or any(s == "" for s in steps):
        hint = "for keys with dots use {path: [a, b]}"
        raise fail(loc, f"{path!r} is not a dotted path (empty step); {hint}")
    return steps


def _is_step(step: Any) -> bool:
    return (isinstance(step, str) and step != "") or (isinstance(step, int) and not isinstance(step, bool))


def _is_json(value: Any) -> bool:
    if value is None or isinstance(value, str | bool | int | float):
        return True
    if isinstance(value, list):
        return all(_is_json(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_json(v) for k, v in value.items())
    return False
