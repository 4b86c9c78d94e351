"""The placeholders of a command's argv and a service's request templates, shared by the two
kinds' settings (:mod:`.kinds.command`, :mod:`.kinds.http`) and their adapters."""

from __future__ import annotations

import re

PLACEHOLDER_RE = re.compile(r"\{(query|query_id|k|mode)\}")  # the only substitutions, done in one pass

#: The default cap on one response of a command or http system (``system.max_response_mb``): far
#: above a real response (1,000 hits with 2 KB snippets and an answer are about 3 MB of JSON),
#: and low enough that ``concurrency`` of them at once cannot exhaust a machine.
DEFAULT_MAX_RESPONSE_MB = 64.0


def templates_need_mode(*templates: object) -> bool:
    """Whether any string inside ``templates`` (nested dicts and lists too) uses ``{mode}``."""

    def walk(value: object) -> bool:
        if isinstance(value, str):
            return "{mode}" in value
        if isinstance(value, dict):
            return any(walk(v) for v in value.values())
        if isinstance(value, list | tuple):
            return any(walk(v) for v in value)
        return False

    return any(walk(t) for t in templates)
