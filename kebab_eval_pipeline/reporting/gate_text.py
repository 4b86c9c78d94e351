"""How CI outputs name and number a gate result (a ``GateResult.as_dict()``), shared by the JUnit
XML and the Markdown summaries so both say the same thing.

- :func:`gate_title` — ``mrr min 0.6``, ``regression: mrr max_drop 0.02``: the metric, the bound
  and the value configured for it; :func:`configured_bound` that value, the one threshold every
  output gives (``max_drop: 0.02`` is 0.02: the bound's name says which way).
- :func:`tally` / :func:`tally_text` — the checks an evaluation reports, counted once for every CI
  output and the CLI: each gate result and the system-health verdict (a JUnit testcase of its own).
- :func:`exact` — a number as its shortest round-tripping text (``repr``): what a reader parses
  back to the stored float. None or NaN: ``null``.
- the report's own formats (4 decimals, signed 4 decimals, 4 significant digits) are
  :mod:`kebab_eval_pipeline.foundation.number_text`'s.
"""

from __future__ import annotations

from typing import Any

from kebab_eval_pipeline.foundation.number_text import is_null as _null

#: Bounds stored negated by runs before the threshold was the configured value: shown as configured.
_NEGATED = ("max_drop", "non_inferior")
#: How a tally words each outcome, in the order it lists them.
TALLY_WORDS = {"pass": "passed", "FAIL": "failed", "error": "error", "warn": "warned", "skipped": "skipped"}


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


def configured_bound(gate: dict[str, Any]) -> Any:
    """The bound as the user configured it — ``max_drop: 0.01`` is 0.01 whether the result was
    stored with it (today) or with −0.01 (runs stored before): both are never negative."""
    threshold = gate.get("threshold")
    if gate["kind"] in _NEGATED and not _null(threshold):
        return abs(float(threshold)) + 0.0  # + 0.0: never "-0"
    return threshold


def gate_title(gate: dict[str, Any]) -> str:
    """``mrr min 0.6`` for a gate on the run, ``regression: mrr max_drop 0.02`` for one on the
    comparison (``suite`` ``comparison``): unique per result, since check names are."""
    text = f"{gate['metric']} {gate['kind']} {exact(configured_bound(gate))}"
    return f"regression: {text}" if gate.get("suite") == "comparison" else text


def health_outcome(health: dict[str, Any] | None) -> str | None:
    """The system-health verdict as a check: ``error`` when it fails the run (the system under test
    broke: JUnit's ``<error>``), ``warn`` when it is not healthy but configured not to block,
    ``pass`` otherwise; None without a verdict (``system_health: null``, a comparison)."""
    if not health:
        return None
    if health.get("healthy") is False:
        return "error" if health.get("blocking") else "warn"
    return "pass"


def health_title(health: dict[str, Any]) -> str:
    """``system_health max_error_rate 0.1``: the check and its bound, as a gate is titled."""
    return f"system_health max_error_rate {exact(health.get('max_error_rate'))}"


def tally(gates: list[dict[str, Any]], health: dict[str, Any] | None) -> dict[str, int]:
    """How many checks ended each way (:data:`TALLY_WORDS`' keys, in order): every gate result
    and the system-health verdict. JUnit's ``tests`` is their sum, ``failures`` FAIL, ``errors``
    error, ``skipped`` skipped; the Markdown and the CLI print :func:`tally_text` of the same."""
    counts = dict.fromkeys(TALLY_WORDS, 0)
    for gate in gates:
        counts[outcome(gate)] += 1
    state = health_outcome(health)
    if state is not None:
        counts[state] += 1
    return counts


def tally_text(gates: list[dict[str, Any]], health: dict[str, Any] | None) -> str:
    """``9 checks (8 gates + system health): 3 passed · 1 failed · 4 warned · 1 skipped`` — the
    same words wherever an evaluation's checks are counted."""
    counts = tally(gates, health)
    total = sum(counts.values())
    if not total:
        return "no checks configured"
    checks = [g["name"] for g in gates if g.get("check")]  # checks shown with the gates (judge_calibration)
    n = len(gates) - len(checks)
    what = f"{n} gate{'' if n == 1 else 's'}" + (" + system health" if health else "")
    what += "".join(f" + {name}" for name in checks)
    shown = " · ".join(f"{n} {TALLY_WORDS[k]}" for k, n in counts.items() if n)
    return f"{total} check{'' if total == 1 else 's'} ({what}): {shown}"


def outcome(gate: dict[str, Any]) -> str:
    """pass | warn (a non-blocking gate missed) | FAIL (a blocking one did) | skipped — the words
    the CLI and the run summary use."""
    if gate["skipped"]:
        return "skipped"
    if gate["passed"]:
        return "pass"
    return "FAIL" if gate["blocking"] else "warn"
