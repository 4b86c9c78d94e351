"""YAML/JSON reading that reports the parser's own line and column."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from kebab_eval_pipeline.errors import InputError, Offender


def read_text(path: Path, what: str) -> str:
    """Read a UTF-8 text file, turning every failure into an :class:`InputError` naming ``path``."""
    if not path.exists():
        raise InputError(f"{what} not found", [Offender(str(path), "no such file")])
    if path.is_dir():
        raise InputError(f"{what} is a folder, expected a file", [Offender(str(path), "is a directory")])
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        return _raise(what, path, f"line {line}", f"not valid UTF-8 (byte {exc.start})")


def _raise(what: str, path: Path, position: str | None, reason: str):
    raise InputError(f"{what} is malformed", [Offender(str(path), reason, position=position)])


def parse_yaml(text: str, path: Path, what: str) -> Any:
    """Parse YAML; a syntax error names the file and the parser's 1-based line and column."""
    try:
        # libyaml when present: ~10x faster on large golden sets, same errors and marks
        return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        position = f"line {mark.line + 1}, column {mark.column + 1}" if mark else None
        reason = " ".join(str(p) for p in (exc.context, exc.problem) if p) or "invalid YAML"
        return _raise(what, path, position, f"invalid YAML: {reason}")
    except yaml.YAMLError as exc:
        return _raise(what, path, None, f"invalid YAML: {exc}")


def parse_json(text: str, path: Path, what: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        return _raise(what, path, f"line {exc.lineno}, column {exc.colno}", f"invalid JSON: {exc.msg}")


def yaml_line_of(text: str, key_path: list[str | int]) -> int | None:
    """1-based line where ``key_path`` (mapping keys / sequence indexes) starts in a YAML document.

    Used to give validation errors a real position. None when not found. Composes the
    document each call: use :class:`YamlPositions` for many look-ups in one document.
    """
    return YamlPositions(text).line_of(key_path)


class YamlPositions:
    """Line look-ups in one YAML document, composing it once and only when first asked."""

    def __init__(self, text: str):
        self._text = text
        self._root: yaml.Node | None = None
        self._composed = False

    def line_of(self, key_path: list[str | int]) -> int | None:
        if not self._composed:
            self._composed = True
            try:
                self._root = yaml.compose(self._text)
            except yaml.YAMLError:
                self._root = None
        node = self._root
        if node is None:
            return None
        for key in key_path:
            if isinstance(node, yaml.MappingNode):
                found = next((v for k, v in node.value if getattr(k, "value", None) == str(key)), None)
                if found is None:
                    found = next((k for k, _ in node.value if getattr(k, "value", None) == str(key)), None)
                    return found.start_mark.line + 1 if found is not None else node.start_mark.line + 1
                node = found
            elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and 0 <= key < len(node.value):
                node = node.value[key]
            else:
                break
        return node.start_mark.line + 1
