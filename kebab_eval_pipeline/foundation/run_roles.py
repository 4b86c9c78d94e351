"""What a run is: its role — how it was started — and the role family an automatic baseline shares.

A run's role is decided once, when its ``run_metrics`` are made, and stored in their info
(``info["role"]``: ``{"role", "source", "sweep"}``):

- ``sweep-variant`` — a variant of a configuration sweep (its run id names the variant,
  ``sweep-<name>-<variant>``; a backfill cannot tag each partition, so the id decides, and no tag
  can make a variant anything else);
- else the explicit ``kebab-eval/role`` run tag (:data:`ROLE_TAG`: ``kebab-eval run --role``, the
  launchpad's tags, ``dagster job launch --tags``) — any role of :data:`SETTABLE_ROLES`;
- else the ``kebab-eval/trigger`` tag the package's own launchers set
  (:data:`~kebab_eval_pipeline.foundation.run_ids.TRIGGER_TAG`): ``nightly`` (the schedule), ``system-change``
  and ``golden-change`` (the sensors), ``ci`` (``kebab-eval run`` where ``CI`` is set, as GitHub
  Actions, GitLab, CircleCI, Travis, Buildkite and Drone set it), ``cli`` → ``manual``;
- else the launcher's default: ``team-check`` for the evaluation check a team attaches to its own
  asset, ``manual`` for a run launched from the Dagster UI or API without a tag.

The role is a property of how a run was started, not of its config (one config serves the nightly
schedule, CI and the sensors), so it is set per run, never in the run config.

**Role families** (:func:`RunRole.family`): an automatic baseline (``previous``, ``auto`` without
a pin) is a run of the same family —

- ``regular``: ci, nightly, system-change, golden-change, manual, team-check, and runs stored
  before roles were recorded whose role cannot be derived (``unknown``): they baseline each other;
- ``sweep <name>``: the variants of one sweep, compared with each other only;
- ``experiment``: runs marked ``--role experiment``, compared with earlier experiments only — an
  experiment is never the automatic baseline of a regular run, nor a regular run of an experiment.

Pure and light (no pandas): the CLI checks ``--role`` before it imports anything heavy.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kebab_eval_pipeline.foundation.errors import InputError, Offender
from kebab_eval_pipeline.foundation.run_ids import TRIGGER_TAG

#: Dagster run tag that sets a run's role explicitly.
ROLE_TAG = "kebab-eval/role"

CI = "ci"
NIGHTLY = "nightly"
SYSTEM_CHANGE = "system-change"
GOLDEN_CHANGE = "golden-change"
MANUAL = "manual"
TEAM_CHECK = "team-check"
EXPERIMENT = "experiment"
SWEEP_VARIANT = "sweep-variant"
#: A run stored before roles were recorded, whose role nothing it stored tells.
UNKNOWN = "unknown"

#: Roles whose runs baseline each other.
REGULAR_ROLES = (CI, NIGHTLY, SYSTEM_CHANGE, GOLDEN_CHANGE, MANUAL, TEAM_CHECK)
#: What ``--role`` and the ``kebab-eval/role`` tag accept (a sweep variant is told by its run id).
SETTABLE_ROLES = (*REGULAR_ROLES, EXPERIMENT)
#: Every role a stored run can have.
ROLES = (*SETTABLE_ROLES, SWEEP_VARIANT, UNKNOWN)
#: Family names (besides ``sweep <name>``).
REGULAR = "regular"

#: The ``kebab-eval/trigger`` values the package's launchers set → the role they mean.
TRIGGER_ROLES = {
    "ci": CI,
    "cli": MANUAL,
    "nightly": NIGHTLY,
    "system-change": SYSTEM_CHANGE,
    "golden-change": GOLDEN_CHANGE,
}

#: What a role means, for notes and help texts.
ROLE_DESCRIPTIONS = {
    CI: "kebab-eval run in CI (CI is set)",
    NIGHTLY: "the nightly schedule",
    SYSTEM_CHANGE: "the system-version sensor",
    GOLDEN_CHANGE: "the golden-change sensor",
    MANUAL: "by hand: kebab-eval run outside CI, or the Dagster UI",
    TEAM_CHECK: "the evaluation check on a team's asset",
    EXPERIMENT: "marked an experiment (--role experiment)",
    SWEEP_VARIANT: "a variant of a configuration sweep",
    UNKNOWN: "stored before roles were recorded",
}

# Ids the package generated before roles were recorded (run_ids.py): their origin says their role.
_LEGACY_IDS = (
    (re.compile(r"^nightly-(\d{8}-\d{6}|\d{8}T\d{6}|\d{4}-\d{2}-\d{2})$"), NIGHTLY),
    (re.compile(r"^ci-\d{8}-\d{6}(-[0-9a-f]{7})?$"), CI),
    (re.compile(r"^golden-(\d{8}-\d{6}|\d{8}T\d{6})-[0-9a-f]{8}$"), GOLDEN_CHANGE),
    (re.compile(r"^system-change-\d{8}-\d{6}-[0-9a-f]{8}$"), SYSTEM_CHANGE),
)


@dataclass(frozen=True)
class RunRole:
    """A run's ``role`` (one of :data:`ROLES`), how it was decided (``source``, for people) and,
    for a sweep variant, its sweep's name."""

    role: str
    source: str
    sweep: str | None = None

    @property
    def family(self) -> str:
        """``regular``, ``experiment`` or ``sweep <name>`` (see the module docstring)."""
        if self.role == SWEEP_VARIANT:
            return f"sweep {self.sweep}"
        return EXPERIMENT if self.role == EXPERIMENT else REGULAR

    @property
    def label(self) -> str:
        """``nightly``, ``sweep-variant (chunks)``: the role as tables show it."""
        return f"{self.role} ({self.sweep})" if self.role == SWEEP_VARIANT else self.role

    def described(self) -> str:
        """The role in a sentence's words: ``a variant of sweep 'chunks'``, ``an experiment``,
        ``a regular run (nightly)``."""
        if self.role == SWEEP_VARIANT:
            return f"a variant of sweep {self.sweep!r}"
        if self.role == EXPERIMENT:
            return "an experiment"
        return f"a regular run ({self.role})"

    def as_dict(self) -> dict[str, Any]:
        return {"role": self.role, "source": self.source, "sweep": self.sweep}


def family_words(family: str) -> str:
    """A family after a count: ``regular run(s)``, ``experiment(s)``, ``variant(s) of sweep 'chunks'``."""
    if family.startswith("sweep "):
        return f"variant(s) of sweep {family.removeprefix('sweep ')!r}"
    return "experiment(s)" if family == EXPERIMENT else "regular run(s)"


def check_role(value: str, where: str = "--role") -> str:
    """``value`` when it is a role a person may set; else InputError naming ``where`` and the roles."""
    if value not in SETTABLE_ROLES:
        hint = (
            " (a sweep variant is told by its run id: run it with kebab-eval sweep)"
            if value == SWEEP_VARIANT
            else ""
        )
        raise InputError(
            "unknown run role",
            [Offender(where, f"{value!r}: expected one of {', '.join(SETTABLE_ROLES)}{hint}")],
        )
    return value


def decide_role(tags: Mapping[str, str], sweep: str | None = None, default: str = MANUAL) -> RunRole:
    """The role of a run being made: a variant of sweep ``sweep`` (its run id named one), else the
    :data:`ROLE_TAG` tag, else the :data:`TRIGGER_TAG` tag's role, else ``default`` (the launcher's:
    ``manual``, ``team-check``). Raises InputError (naming the tag) for a role tag that is not one of
    :data:`SETTABLE_ROLES`: a typo must not quietly make a run a baseline of the wrong runs."""
    explicit = tags.get(ROLE_TAG)
    if explicit is not None:
        check_role(explicit, f"run tag {ROLE_TAG}")
    if sweep is not None:
        ignored = f"; its {ROLE_TAG} tag {explicit!r} does not apply to a variant" if explicit else ""
        return RunRole(SWEEP_VARIANT, f"its run id is a variant of sweep {sweep!r}{ignored}", sweep)
    if explicit is not None:
        return RunRole(explicit, f"run tag {ROLE_TAG}={explicit}")
    trigger = tags.get(TRIGGER_TAG)
    if trigger in TRIGGER_ROLES:
        return RunRole(TRIGGER_ROLES[trigger], f"run tag {TRIGGER_TAG}={trigger}")
    why = f"run tag {TRIGGER_TAG}={trigger}" if trigger else f"no {ROLE_TAG} or {TRIGGER_TAG} tag"
    return RunRole(default, f"{ROLE_DESCRIPTIONS.get(default, default)} ({why})")


def role_of(run_id: str, info: Mapping[str, Any]) -> RunRole:
    """The role of a stored run from its ``run_metrics`` info: the recorded one; for a run stored
    before roles were recorded, what it stored tells (its ``sweep`` entry: a variant; an id the
    package generated: ``nightly-…``, ``ci-…``, ``golden-…``, ``system-change-…``), else
    ``unknown`` (counted as a regular run)."""
    recorded = info.get("role")
    if isinstance(recorded, Mapping) and recorded.get("role") in ROLES:
        return RunRole(str(recorded["role"]), str(recorded.get("source") or ""), recorded.get("sweep"))
    sweep = info.get("sweep")
    if isinstance(sweep, Mapping) and sweep.get("name"):
        return RunRole(
            SWEEP_VARIANT, "its metrics record a sweep variant (stored before roles)", sweep["name"]
        )
    for pattern, role in _LEGACY_IDS:
        if pattern.fullmatch(run_id or ""):
            return RunRole(role, "derived from its run id (stored before roles were recorded)")
    return RunRole(UNKNOWN, "stored before roles were recorded: counted as a regular run")


def matches_role(role: RunRole, wanted: str) -> bool:
    """Whether ``role`` is selected by a ``--role`` filter value: a role name, ``regular`` (the
    family), or ``sweep <name>`` / ``sweep:<name>`` (one sweep's variants)."""
    if wanted == REGULAR:
        return role.family == REGULAR
    if wanted.startswith(("sweep ", "sweep:")):
        return role.family == f"sweep {wanted[6:]}"
    return role.role == wanted


def check_role_filter(values: list[str], where: str = "--role") -> list[str]:
    """The ``--role`` filter values when each is a role, ``regular`` or ``sweep:<name>``; else
    InputError naming every bad one."""
    bad = [
        Offender(where, f"{v!r}: expected a role ({', '.join(ROLES)}), {REGULAR}, or sweep:<name>")
        for v in values
        if v not in ROLES and v != REGULAR and not (v.startswith("sweep:") and len(v) > 6)
    ]
    if bad:
        raise InputError("unknown run role", bad)
    return values
