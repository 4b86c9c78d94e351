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

from collections.abc import Mapping
from typing import Any

from kebab_eval_pipeline.systems.settings import kind_of


def system_label(system: Mapping[str, Any]) -> str:
    """``kind[: what][, mode M]`` of a system description: a run's stored ``info["system"]``
    (kind, mode and the details side by side) or ``SystemInfo.model_dump()`` (details nested).
    *What* is the kind's declared label (``SystemKind.label``): the command's executable
    (``search_argv``, or ``argv`` of the jsonl protocol), the http search URL (stored with
    credentials redacted), the replayed trace's file name, the python callable; the mode only when
    there is one. Missing fields are left out, so any stored run (older ones too) gets a
    label."""
    kind = str(system.get("kind") or "system")
    details = {**system, **(system.get("details") or {})}  # stored runs hold the details flattened
    declared = kind_of(kind)
    what = declared.label(details) if declared is not None else ""
    mode = system.get("mode")
    return kind + (f": {what}" if what else "") + (f", mode {mode}" if mode else "")
