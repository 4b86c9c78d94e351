"""Whether the current version of the system under test has a recent passing evaluation.

A stored run *passed* when it finished (its ``comparison_report`` is stored), its system under
test did not fail (the ``system_health`` verdict) and no blocking gate failed — neither an
absolute gate (``run_metrics``) nor a regression or verdict gate (``comparison_report``); a
skipped gate does not fail a run. It is *of the current version* when it evaluated the same
system (its identity, as the automatic baseline matches runs: :mod:`..systems.identity`) and
recorded the same value for every version the system reports now
(:func:`..systems.version_changes.watched_versions`; a version the system does not report now is
not compared) and it is a regular run (:mod:`kebab_eval_pipeline.foundation.run_roles`: a sweep variant or an
experiment ran other settings than the system's own). Its age is counted from when its
``comparison_report`` was written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kebab_eval_pipeline.compare.baseline import created_time
from kebab_eval_pipeline.compare.outcome import run_outcome
from kebab_eval_pipeline.foundation.run_roles import REGULAR, role_of
from kebab_eval_pipeline.store.artifact_store import ArtifactStore
from kebab_eval_pipeline.systems.identity import derive_identity, same_system
from kebab_eval_pipeline.systems.version_changes import stored_versions


@dataclass(frozen=True)
class Freshness:
    """The freshness verdict: ``passed`` when the last passing run of the current version is at
    most ``max_hours`` old. ``last_run_id``/``last_finished``/``age_hours`` are None when no run
    of the current version ever passed; ``runs_of_version`` counts that version's finished runs."""

    passed: bool
    max_hours: float
    current_versions: dict[str, str]
    system_label: str
    last_run_id: str | None
    last_finished: datetime | None
    age_hours: float | None
    runs_of_version: int

    @property
    def description(self) -> str:
        if self.last_run_id is None:
            tried = f" ({self.runs_of_version} finished run(s) of it failed)" if self.runs_of_version else ""
            return f"no passing evaluation of the current version of {self.system_label}{tried}"
        verdict = "within" if self.passed else "older than"
        return (
            f"last passing evaluation of the current version of {self.system_label}: "
            f"{self.last_run_id}, {self.age_hours:.2f} h ago ({verdict} {self.max_hours:g} h)"
        )


def run_passed(metrics_info: Mapping[str, Any], comparison_info: Mapping[str, Any]) -> bool:
    """Whether a finished run passed: system under test healthy, no blocking gate failed
    (:func:`~kebab_eval_pipeline.compare.outcome.run_outcome`, the rule baselines follow too)."""
    return run_outcome(metrics_info, comparison_info).passed


def freshness(
    store: ArtifactStore,
    identity: Mapping[str, Any],
    versions: Mapping[str, str],
    now: datetime,
    max_hours: float,
) -> Freshness:
    """The freshness verdict of the system ``identity`` at ``versions`` (what it reports now),
    over the runs stored in ``store``, at time ``now`` (aware; naive = UTC).

    Runs finished after ``now`` are ignored. Among several passing runs the most recently
    finished counts. ``age_hours`` is exact (``(now - finished) / 1 h``, not rounded).
    """
    now = now if now.tzinfo else now.replace(tzinfo=UTC)
    current = dict(versions)
    best: tuple[datetime, str] | None = None
    finished = 0
    for manifest in store.runs("run_metrics"):
        info = manifest.get("info") or {}
        if not same_system(identity, derive_identity(info.get("system") or {})):
            continue
        if role_of(manifest["run_id"], info).family != REGULAR:
            continue  # a sweep variant or an experiment evaluated other settings than the system's own
        theirs = stored_versions(info)
        if any(theirs.get(field) != value for field, value in current.items()):
            continue
        comparison = store.manifest("comparison_report", manifest["run_id"])
        done = created_time(comparison.get("written_at")) if comparison else None
        if done is None or done > now:
            continue
        finished += 1
        if run_passed(info, comparison.get("info") or {}) and (best is None or done > best[0]):
            best = (done, manifest["run_id"])
    label = str(identity.get("label") or identity.get("kind") or "the system")
    if best is None:
        return Freshness(False, max_hours, current, label, None, None, None, finished)
    age = (now - best[0]).total_seconds() / 3600
    return Freshness(age <= max_hours, max_hours, current, label, best[1], best[0], age, finished)
