"""Whether a comparison is a regression check (two runs of one system) or compares two systems.

A run compared with an earlier run of the *same* system (:mod:`kebab_eval_pipeline.systems.identity`)
is a regression check: a query a found and b missed is a ``regression``. Compared with a run of
*another* system (only ever chosen by name or by a pin), the same numbers say which system did
better, not what broke: every report then says "comparing two systems: <a> vs <b>" and shows the
verdicts in neutral words (:data:`CROSS_SYSTEM_LABELS`). The stored verdict values stay the same
(``win``/``loss``/``regression``/``draw``), so verdict gates and JSON readers keep one vocabulary;
the JSON report carries ``verdict_labels`` to show them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kebab_eval_pipeline.systems.identity import derive_identity, label, systems_differ

#: How verdicts read when the two runs are of different systems (b − a, b the candidate).
CROSS_SYSTEM_LABELS: dict[str, str] = {
    "win": "b better",
    "loss": "b ranked lower",
    "regression": "b missed",
    "draw": "draw",
}


def systems_info(info_a: Mapping[str, Any], info_b: Mapping[str, Any]) -> dict[str, Any]:
    """The comparison's ``info`` entries about the two runs' systems, from their run_metrics info:

    - ``system_identity_a`` / ``_b``: each identity (None for a run stored without one that
      cannot be derived);
    - ``cross_system``: True (two systems), False (one system) or None (cannot tell);
    - ``systems_note``: "comparing two systems: <a> vs <b>" or "one system: <b>" (None when
      unknown);
    - ``verdict_labels``: verdict → the word the reports show (identity for one system).
    """
    differ = systems_differ(info_a, info_b)
    la, lb = label(info_a), label(info_b)
    note = (
        None
        if differ is None
        else (f"comparing two systems: {la} vs {lb}" if differ else f"one system: {lb}")
    )
    return {
        "system_identity_a": derive_identity(info_a.get("system") or {}),
        "system_identity_b": derive_identity(info_b.get("system") or {}),
        "cross_system": differ,
        "systems_note": note,
        "verdict_labels": {**{v: v for v in CROSS_SYSTEM_LABELS}, **(CROSS_SYSTEM_LABELS if differ else {})},
    }


def unknown_system_warning(info: Mapping[str, Any], run_a: str, run_b: str) -> str | None:
    """The warning for a comparison whose runs cannot be told apart or together (None otherwise)."""
    if info.get("cross_system") is not None:
        return None
    missing = [
        r for r, key in ((run_a, "system_identity_a"), (run_b, "system_identity_b")) if not info.get(key)
    ]
    runs = " and ".join(f"run {r!r}" for r in missing) or "a run"
    return (
        f"{runs} stored no system identity (made before identities were recorded): whether both runs "
        "evaluated the same system is unknown"
    )


def verdict_label(verdict: str, info: Mapping[str, Any]) -> str:
    """``verdict`` as the reports show it (its neutral word in a comparison of two systems)."""
    return str((info.get("verdict_labels") or {}).get(verdict, verdict))


def with_systems_note(note: str, info: Mapping[str, Any]) -> str:
    """The baseline note, plus "; comparing two systems: …" when the runs are of two systems."""
    if info.get("cross_system") and info.get("systems_note") and info["systems_note"] not in note:
        return f"{note}; {info['systems_note']}"
    return note


def verdict_count_text(info: Mapping[str, Any]) -> str:
    """The non-zero verdict counts as one line ("b missed 13, draw 80"), in the report's words."""
    counts = info.get("verdict_counts") or {}
    return ", ".join(f"{verdict_label(k, info)} {v}" for k, v in counts.items() if v)
