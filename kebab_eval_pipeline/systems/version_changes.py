"""Which versions of the system under test are watched, what changed between two readings, and
the Dagster run tags that name the change.

The watched versions of a :class:`~kebab_eval_pipeline.contract.SystemInfo` are its version
fields that are known (``chunker_version``, ``embedding_model``, ``index_version``, …) and what
the system reports about itself beyond them (a version endpoint's or command's other keys,
``details["reported_<key>"]``). A stored run's ``run_metrics`` info holds the same two parts
(``versions`` and ``system``), so a run can be matched with the current version.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from kebab_eval_pipeline.contract import SystemInfo

REPORTED_PREFIX = "reported_"
#: Run tags naming a change: the list of changed fields, and one tag per field ("old→new").
CHANGED_TAG = "kebab-eval/changed"
CHANGED_FIELD_TAG = "kebab-eval/changed.{field}"
#: Dagster's limit for a tag key's part and a (strict) tag value: 63 characters.
TAG_LIMIT = 63
_TAG_KEY_CHARS = re.compile(r"[^A-Za-z0-9_.-]+")
ABSENT = "(none)"


def watched_versions(info: SystemInfo) -> dict[str, str]:
    """The known version fields of ``info`` and its ``reported_*`` details, sorted by name."""
    found = {k: v for k, v in info.versions().items() if v is not None}
    found.update({k: v for k, v in info.details.items() if k.startswith(REPORTED_PREFIX)})
    return dict(sorted(found.items()))


def stored_versions(run_info: Mapping[str, Any]) -> dict[str, str]:
    """:func:`watched_versions` of a stored run, from its ``run_metrics`` ``info`` (``versions``
    and the ``reported_*`` keys of ``system``); empty for a run that recorded neither."""
    found = {k: str(v) for k, v in (run_info.get("versions") or {}).items() if v is not None}
    system = run_info.get("system") or {}
    found.update({k: str(v) for k, v in system.items() if k.startswith(REPORTED_PREFIX)})
    return dict(sorted(found.items()))


def unreachable_reason(info: SystemInfo) -> str | None:
    """Why ``info`` holds no trustworthy versions (its version endpoint or command failed), or None."""
    error = info.details.get("version_error")
    return f"the system under test could not report its versions: {error}" if error else None


def changed_versions(
    old: Mapping[str, str], new: Mapping[str, str]
) -> dict[str, tuple[str | None, str | None]]:
    """``{field: (old, new)}`` for every field whose value differs (a field only on one side
    counts, with None on the other), sorted by field; empty when nothing changed."""
    fields = sorted(set(old) | set(new))
    return {f: (old.get(f), new.get(f)) for f in fields if old.get(f) != new.get(f)}


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def change_tags(changes: Mapping[str, tuple[str | None, str | None]]) -> dict[str, str]:
    """Run tags naming ``changes``: ``kebab-eval/changed`` = the changed fields, comma separated,
    and ``kebab-eval/changed.<field>`` = ``old→new`` per field (``(none)`` for a missing side).

    Every value is at most 63 characters (each side of an arrow at most 31, cut with ``…``); a
    field name is made tag-safe (characters other than letters, digits, ``_.-`` become ``_``) and
    cut to fit the key's 63. Empty ``changes`` give no tags.
    """
    if not changes:
        return {}
    side = (TAG_LIMIT - 1) // 2
    tags = {CHANGED_TAG: _clip(",".join(changes), TAG_LIMIT)}
    room = TAG_LIMIT - len(CHANGED_FIELD_TAG.format(field="").split("/", 1)[1])
    for field, (old, new) in changes.items():
        key = CHANGED_FIELD_TAG.format(field=_TAG_KEY_CHARS.sub("_", field)[:room])
        tags[key] = f"{_clip(old or ABSENT, side)}→{_clip(new or ABSENT, side)}"
    return tags
