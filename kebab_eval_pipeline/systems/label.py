"""A short, human label of the system a run evaluated, for titles (``kebab-eval run``'s table).

    {"kind": "reference", "mode": "lexical"}                          → reference, mode lexical
    {"kind": "command", "details": {"search_argv": "./mysys.py {query}"}} → command: ./mysys.py
    {"kind": "http", "mode": "hybrid", "details": {"search_url": "http://h:8080/search"}}
        → http: http://h:8080/search, mode hybrid
    {"kind": "replay", "details": {"trace": "/ci/run.jsonl"}}         → replay: run.jsonl
    {"kind": "python", "details": {"callable": "my_rag.eval:build"}}   → python: my_rag.eval:build

A system without a mode (a command or http system need not have one) shows none, never "None".
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

#: Executables that run a script named by their next argument (then that argument is shown too).
_INTERPRETERS = re.compile(r"(python|pypy|node|deno|bun|ruby|perl|php|bash|sh|zsh|uv|java)[\d.]*(\.exe)?")


def _command(argv_text: str) -> str:
    """The executable of a shell-joined argv (its base name when an absolute path), and the script
    after an interpreter: ``/usr/bin/python3 tools/sys.py {query}`` → ``python3 tools/sys.py``."""
    try:
        argv = shlex.split(argv_text)
    except ValueError:  # not shell-quoted after all: the first word is still the executable
        argv = argv_text.split()
    if not argv:
        return ""
    first = PurePath(argv[0]).name if PurePath(argv[0]).is_absolute() else argv[0]
    if _INTERPRETERS.fullmatch(PurePath(first).name) and len(argv) > 1 and not argv[1].startswith("-"):
        return f"{first} {argv[1]}"
    return first


def system_label(system: Mapping[str, Any]) -> str:
    """``kind[: what][, mode M]`` of a system description: a run's stored ``info["system"]``
    (kind, mode and the details side by side) or ``SystemInfo.model_dump()`` (details nested).
    *What* is the command's executable (``search_argv``, or ``argv`` of the jsonl protocol), the
    http search URL (stored with credentials redacted) or the replayed trace's file name; the mode
    only when there is one. Missing fields are left out, so any stored run (older ones too) gets a
    label."""
    kind = str(system.get("kind") or "system")
    details = {**system, **(system.get("details") or {})}  # stored runs hold the details flattened
    what = ""
    argv = details.get("search_argv") or details.get("argv")  # argv: the jsonl protocol's one process
    if kind == "command" and argv:
        what = _command(str(argv))
    elif kind == "http" and details.get("search_url"):
        what = str(details["search_url"])
    elif kind == "replay" and details.get("trace"):
        what = PurePath(str(details["trace"])).name
    elif kind == "python" and details.get("callable"):
        what = str(details["callable"])
    mode = system.get("mode")
    return kind + (f": {what}" if what else "") + (f", mode {mode}" if mode else "")
