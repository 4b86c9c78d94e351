"""Which syntax a golden file is written in — JSON lines, one JSON document or YAML — by its name
when the name says, else by its content.

Editors and pipelines name files as they like: a JSONL export saved as ``gold.txt``, a symlink
``current`` pointing at ``v3.jsonl``. A file is read by what it holds, not refused for its name:

* a name ending ``.jsonl`` / ``.json`` / ``.yaml`` / ``.yml`` says it (for a symlink without such a
  suffix, its target's name counts);
* any other name: the content decides (:func:`syntax_of`);
* a ``.json`` (or unnamed) file whose first line is a whole JSON object and whose next line opens
  another is JSON lines — no JSON document can be that, so a ``.json`` holding JSONL is read too.
  A ``.yaml`` file is always YAML.
"""

from __future__ import annotations

import json
from pathlib import Path

#: The names that say a golden file's syntax (also the files a golden folder is read for).
SYNTAXES = {".yaml": "yaml", ".yml": "yaml", ".json": "json", ".jsonl": "jsonl"}


def named_suffix(path: Path) -> str:
    """The suffix naming ``path``'s syntax: its own (lower-cased) when it is one of
    :data:`SYNTAXES`, else, for a symlink, its target's; else its own, whatever it is."""
    suffix = path.suffix.lower()
    if suffix not in SYNTAXES and path.is_symlink():
        try:
            target = path.resolve().suffix.lower()
        except (OSError, RuntimeError):  # a loop: the reader reports the file
            return suffix
        if target in SYNTAXES:
            return target
    return suffix


def first_line(text: str, start: int = 0) -> tuple[str, int]:
    """The first non-blank line of ``text`` from ``start``, and where the text after it starts
    (nothing else of the text is copied)."""
    while start < len(text):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        if text[start:end].strip():
            return text[start:end], end + 1
        start = end + 1
    return "", len(text)


def _json_object(line: str) -> dict | None:
    if not line.lstrip().startswith("{"):
        return None
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def syntax_of(path: Path, text: str) -> str:
    """``"jsonl"``, ``"json"``, ``"yaml"`` or ``"json-or-yaml"`` (JSON when it parses, else YAML):
    how to read the golden file ``path`` holding ``text``.

    The name decides (:func:`named_suffix`) unless a ``.json`` or unnamed file is JSON lines (a
    whole JSON object on the first line, the next line opening another); a name that says
    nothing: a lone JSON object line without ``queries`` is JSON lines too (one query), text
    starting with ``{`` or ``[`` is JSON or else YAML, anything else YAML."""
    suffix = named_suffix(path)
    if suffix in (".jsonl", ".yaml", ".yml"):
        return SYNTAXES[suffix]
    first, rest = first_line(text)
    second = first_line(text, rest)[0].lstrip()
    if first.lstrip().startswith("{") and (second.startswith("{") or (not second and suffix != ".json")):
        entry = _json_object(first)
        if entry is not None and (second or "queries" not in entry):
            return "jsonl"
    if suffix in SYNTAXES:
        return SYNTAXES[suffix]
    return "json-or-yaml" if first.lstrip()[:1] in ("{", "[") else "yaml"
