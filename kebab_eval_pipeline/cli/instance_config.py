"""A user's ``dagster.yaml``, checked as bad input when Dagster cannot open the instance from it.

Dagster reads ``$DAGSTER_HOME/dagster.yaml`` when the CLI opens the instance; a file it cannot
parse, a key it does not know, a value of the wrong type or a configured class whose module cannot
be imported raised Dagster's own exception, which the CLI reported as an internal failure (exit 3)
with no line and no remedy. :func:`read_problems` reads the file first (YAML syntax, a mapping at
the top); :func:`config_error` and :func:`class_error` turn what Dagster then refuses into an
:class:`~kebab_eval_pipeline.foundation.errors.InputError` (exit 2) naming the file, the line, the key and
the remedy.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from kebab_eval_pipeline.foundation.errors import InputError, Offender

#: Where Dagster documents the file, and what else a user can do about it.
REMEDY = (
    "fix the file (its keys: https://docs.dagster.io/deployment/oss/dagster-yaml), "
    "or point DAGSTER_HOME at another folder"
)
SUMMARY = f"cannot open the Dagster instance: DAGSTER_HOME's dagster.yaml is invalid — {REMEDY}"


def _position(line: int | None, column: int | None = None) -> str | None:
    if line is None:
        return None
    return f"line {line}" + ("" if column is None else f", column {column}")


def read_problems(path: Path) -> list[Offender]:
    """What stops Dagster reading ``path`` at all: not UTF-8, not YAML (line and column of the
    problem), or YAML that is not a mapping of settings. [] when the file reads (or is absent: the
    CLI writes one)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except UnicodeDecodeError as exc:
        return [Offender(str(path), f"not valid UTF-8 (byte {exc.start})")]
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        context = getattr(exc, "context", None)
        reason = f"not YAML: {problem}" + (f" ({context})" if context else "")
        line, column = (mark.line + 1, mark.column + 1) if mark is not None else (None, None)
        return [Offender(str(path), reason, position=_position(line, column))]
    if doc is not None and not isinstance(doc, dict):
        return [Offender(str(path), f"expected a mapping of settings (key: value), got {type(doc).__name__}")]
    return []


def _line_of(text: str, keys: list[Any]) -> int | None:
    """The 1-based line of the key (or list item) at ``keys`` in the YAML ``text``, or of its
    deepest ancestor found; None when the text does not compose."""
    try:
        node = yaml.compose(text)
    except yaml.YAMLError:
        return None
    line = None
    for key in keys:
        if isinstance(node, yaml.MappingNode):
            match = next((pair for pair in node.value if pair[0].value == key), None)
            if match is None:
                break
            line, node = match[0].start_mark.line + 1, match[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
            line = node.start_mark.line + 1
        else:
            break
    return line


def _stack(error: Any) -> list[Any]:
    """The key path of a Dagster config evaluation error (field names, list indexes)."""
    path = []
    for entry in getattr(getattr(error, "stack", None), "entries", []):
        name = getattr(entry, "field_name", None)
        path.append(name if name is not None else getattr(entry, "list_index", None))
    return [p for p in path if p is not None]


def config_error(path: Path, exc: Exception) -> InputError:
    """Dagster's ``DagsterInvalidConfigError`` for ``path`` as an InputError: one offender per
    error, at the line of the key it is about (an unknown key's own line), without Dagster's
    listing of the whole schema."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        text = ""
    offenders = []
    for error in getattr(exc, "errors", None) or [exc]:
        keys = _stack(error)
        unknown = getattr(getattr(error, "error_data", None), "field_name", None)
        message = str(getattr(error, "message", error))
        reason = message.split(' Expected: "', 1)[0].split(" You must provide", 1)[0].strip()
        if unknown is not None and "unexpected config entry" in message:
            keys = [*keys, unknown]
            reason = f"unknown key {unknown!r}" + (
                f" under {':'.join(map(str, keys[:-1]))}" if keys[:-1] else ""
            )
        field = ".".join(map(str, keys)) or None
        offenders.append(Offender(str(path), reason, position=_position(_line_of(text, keys)), field=field))
    return InputError(SUMMARY, offenders)


def class_error(path: Path, exc: Exception) -> InputError:
    """A configured class Dagster could not load (its module not importable, its constructor
    refusing its config) as an InputError naming the key that configures it."""
    try:
        text = path.read_text(encoding="utf-8")
        doc = yaml.safe_load(text)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        text, doc = "", None
    message = " ".join(str(exc).replace("Failure condition: ", "").split())
    cause = exc.__cause__ or exc.__context__
    if isinstance(cause, ImportError):
        message += f" ({type(cause).__name__}: {cause})"
    keys: list[Any] = []
    for key, value in (doc or {}).items() if isinstance(doc, dict) else ():
        for sub, block in [
            ([key], value),
            *([([key, k], v) for k, v in value.items()] if isinstance(value, dict) else []),
        ]:
            module = block.get("module") if isinstance(block, dict) else None
            name = block.get("class") if isinstance(block, dict) else None
            # Dagster may rewrite the module it names (dagster.x → dagster._x): its last part and
            # the class name identify the block too
            last = str(module).rsplit(".", 1)[-1].lstrip("_")
            if isinstance(module, str) and module and (module in message or (f"{last}.{name}" in message)):
                keys = sub
                break
        if keys:
            break
    field = ".".join(map(str, keys)) or None
    return InputError(
        SUMMARY,
        [
            Offender(
                str(path),
                f"cannot load a configured class: {message}",
                position=_position(_line_of(text, keys)),
                field=field,
            )
        ],
    )


def is_class_failure(exc: BaseException) -> bool:
    """Whether Dagster failed to load a class ``dagster.yaml`` configures (``module`` / ``class``):
    its module could not be imported or the name is not in it."""
    chain, seen = exc, set()
    while chain is not None and id(chain) not in seen:
        seen.add(id(chain))
        if isinstance(chain, ImportError) or "load the configurable class" in str(chain):
            return True
        chain = chain.__cause__ or chain.__context__
    return False
