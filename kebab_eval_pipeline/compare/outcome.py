"""Whether a stored run passed: its system under test was healthy and no blocking gate failed.

A run's outcome is known in two parts, where the chain makes them:

- ``run_metrics`` knows the system-health verdict (``info["system_health"]``) and the absolute
  gates (``info["gates"]``); it records that part as ``info["outcome"]`` (:func:`metrics_outcome`);
- ``comparison_report`` knows the regression and verdict gates (its ``info["gates"]``) and records
  the whole outcome as its ``info["outcome"]``.

:func:`run_outcome` judges a run from both stored infos — always from the stored verdicts and gate
results, never from a recorded ``outcome`` entry, so runs stored before outcomes were recorded are
judged by the same rule. A run *failed* when its system under test failed a blocking
``system_health`` check or a blocking gate did not pass, or when it was interrupted (Ctrl-C)
after its ``run_metrics`` were stored (``info["interrupted"]``, set by the CLI: its comparison
never ran); a skipped gate (no baseline, a null metric configured ``skip_if_null``) fails
nothing. A run whose comparison never ran (a blocking check stopped the chain, the comparison
crashed) is judged on its metrics alone, and says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from kebab_eval_pipeline.metrics.health import CHECK_NAME, failed_run

PASSED = "passed"
FAILED = "failed"
OUTCOMES = (PASSED, FAILED)
#: What failed in a run interrupted after storing its metrics (``info["interrupted"]``).
INTERRUPTED = "interrupted"
#: Shown for a run judged without its comparison.
NOT_COMPARED = "its comparison never ran: judged on its system health and absolute gates only"


def blocking_failures(gates: Sequence[Mapping[str, Any]] | None) -> list[str]:
    """The names of the blocking gates that did not pass (a skipped gate never fails), in order."""
    return [
        str(g.get("name"))
        for g in gates or []
        if g.get("blocking") and not g.get("passed") and not g.get("skipped")
    ]


@dataclass(frozen=True)
class RunOutcome:
    """A run's outcome: ``outcome`` (passed | failed), what failed (``failed``: ``system_health``
    and gate check names, in chain order), whether the comparison's gates were known (``compared``)
    and a ``note`` (why it was judged on less)."""

    outcome: str
    failed: tuple[str, ...] = ()
    compared: bool = True
    note: str = ""

    @property
    def passed(self) -> bool:
        return self.outcome == PASSED

    def failures(self) -> str:
        """What failed, in words: ``gate_mrr_min, gate_mrr_max_drop``, ``system_health (its system
        under test failed)``; "" for a run that passed."""
        said = {
            CHECK_NAME: "(its system under test failed)",
            INTERRUPTED: "(Ctrl-C: stopped before it finished)",
            "judge_calibration": "(its judge disagrees with the labels)",
        }
        return ", ".join(f"{name} {said[name]}" if name in said else name for name in self.failed)

    def reason(self) -> str:
        """Why it failed, as a clause after a run id: ``failed gate_mrr_min``; "" when it passed."""
        return f"failed {self.failures()}" if self.failed else ""

    def label(self) -> str:
        """``passed``, ``failed (gate_mrr_min)``: the outcome as tables show it."""
        return self.outcome if self.passed else f"{FAILED} ({', '.join(self.failed)})"

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "failed": list(self.failed)}


def metrics_outcome(info: Mapping[str, Any]) -> dict[str, Any]:
    """What ``run_metrics`` records of the outcome (its ``info["outcome"]``): ``outcome`` as far as
    its system health and absolute gates tell, ``system_healthy`` (None when not recorded),
    ``failed`` and ``covers`` (what it was judged on: the regression gates come with the comparison)."""
    judged = run_outcome(info, None)
    health = info.get("system_health")
    return {
        "outcome": judged.outcome,
        "system_healthy": None if health is None else not failed_run(health),
        "failed": list(judged.failed),
        "covers": "system health and absolute gates (the regression gates: comparison_report)",
    }


def run_outcome(
    metrics_info: Mapping[str, Any], comparison_info: Mapping[str, Any] | None = None
) -> RunOutcome:
    """The outcome of a stored run from its ``run_metrics`` info and its ``comparison_report`` info
    (None when no comparison is stored: judged on the metrics alone, ``compared`` False, with
    :data:`NOT_COMPARED` as its note)."""
    failed = [INTERRUPTED] if metrics_info.get(INTERRUPTED) else []
    failed += [CHECK_NAME] if failed_run(metrics_info.get("system_health") or {}) else []
    failed += blocking_failures(metrics_info.get("gates"))
    calibration = metrics_info.get("judge_calibration") or {}
    if calibration.get("blocking") and (calibration.get("check") or {}).get("status") == "failed":
        failed += ["judge_calibration"]
    if comparison_info is not None:
        failed += blocking_failures(comparison_info.get("gates"))
    return RunOutcome(
        FAILED if failed else PASSED,
        tuple(failed),
        compared=comparison_info is not None,
        note="" if comparison_info is not None else NOT_COMPARED,
    )


def interrupted_info(info: Mapping[str, Any], note: Mapping[str, Any]) -> dict[str, Any]:
    """What a ``run_metrics`` info gains when its run was interrupted after storing it: the
    ``interrupted`` note and the recorded ``outcome`` judged again with it (failed)."""
    marked = {**info, INTERRUPTED: dict(note)}
    return {INTERRUPTED: dict(note), "outcome": metrics_outcome(marked)}
