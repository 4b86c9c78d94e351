"""How CI outputs name and number a gate result (a ``GateResult.as_dict()``), shared by the JUnit
XML and the Markdown summaries so both say the same thing.

- :func:`gate_title` — ``mrr min 0.6``, ``regression: mrr max_drop 0.02``: the metric, the bound
  and the value configured for it (``max_drop: 0.02`` is stored as the threshold −0.02).
- :func:`exact` — a number as its shortest round-tripping text (``repr``): what a reader parses
  back to the stored float. None or NaN: ``null``.
- :func:`shown` / :func:`signed` / :func:`p_text` — the report's own formats (4 decimals, signed 4
  decimals, 4 significant digits).
"""

from __future__ import annotations

import math
from typing import Any

#: Bounds stored negated (the threshold is −configured): shown as configured.
_NEGATED = ("max_drop", "non_inferior")


def _null(x: Any) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def exact(x: Any) -> str:
    """The stored number as its shortest exact text (``0.6985``, ``-0.02``, ``3``); ``null`` for
    None or NaN. ``float(exact(x)) == x`` for every finite float."""
    if _null(x):
        return "null"
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, int):
        return str(x)
    text = repr(float(x))
    return text[:-2] if text.endswith(".0") else text


def shown(x: Any) -> str:
    """4 decimals, as the reports print a metric; ``null`` for None or NaN."""
    return "null" if _null(x) else f"{float(x):.4f}"


def signed(x: Any) -> str:
    """Signed 4 decimals, as the reports print a delta; ``null`` for None or NaN."""
    return "null" if _null(x) else f"{float(x):+.4f}"


def p_text(x: Any) -> str:
    """4 significant digits, as the reports print a p-value; ``–`` for None or NaN."""
    return "–" if _null(x) else f"{float(x):.4g}"


def configured_bound(gate: dict[str, Any]) -> Any:
    """The bound as the user configured it: ``max_drop``/``non_inferior`` are stored negated."""
    threshold = gate.get("threshold")
    if gate["kind"] in _NEGATED and not _null(threshold):
        return -float(threshold) + 0.0  # + 0.0: never "-0"
    return threshold


def gate_title(gate: dict[str, Any]) -> str:
    """``mrr min 0.6`` for a gate on the run, ``regression: mrr max_drop 0.02`` for one on the
    comparison (``suite`` ``comparison``): unique per result, since check names are."""
    text = f"{gate['metric']} {gate['kind']} {exact(configured_bound(gate))}"
    return f"regression: {text}" if gate.get("suite") == "comparison" else text


def outcome(gate: dict[str, Any]) -> str:
    """pass | warn (a non-blocking gate missed) | FAIL (a blocking one did) | skipped — the words
    the CLI and the run summary use."""
    if gate["skipped"]:
        return "skipped"
    if gate["passed"]:
        return "pass"
    return "FAIL" if gate["blocking"] else "warn"
