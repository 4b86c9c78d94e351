"""Which stored run a new run is compared with (the pins that fix that choice per golden set are
kept in :mod:`kebab_eval_pipeline.store.pins`).

The ``baseline`` setting (SPEC §8) is one of:

- ``auto`` (default): the baseline pinned for the run's golden set name, else ``previous``;
- ``pinned``: only the pin;
- ``previous``: the most recent earlier run on the same golden set *content* (sha256) by the same
  system (its identity: :mod:`kebab_eval_pipeline.systems.identity`), of the same role family
  (:mod:`kebab_eval_pipeline.foundation.run_roles`: a sweep variant, an experiment and a regular run are never
  each other's automatic baseline), that passed (:mod:`kebab_eval_pipeline.compare.outcome`: its
  system under test healthy, no blocking gate failed); the note names the later runs it skipped
  and why;
- ``none``: no comparison;
- anything else: an explicit run id.

A mode name wins over a run id spelled the same way (a run called ``previous`` can be pinned, not
named). Resolution never raises for a missing baseline: "no baseline: …" is a note shown in the
report, not a failure. A pinned or explicit baseline is used whatever its outcome or role; the
note (and the comparison's warnings) say when it failed its blocking gates or is of another role
family.

The rules are pure functions over stored run infos (:func:`previous_run`, :func:`flag_baseline`);
:func:`resolve_baseline` reads them from the store.

Pins are kept by the run store (:mod:`kebab_eval_pipeline.store.pins`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kebab_eval_pipeline.compare.outcome import run_outcome
from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.foundation.run_roles import (
    EXPERIMENT,
    MANUAL,
    SWEEP_VARIANT,
    RunRole,
    family_words,
    role_of,
)
from kebab_eval_pipeline.store.artifact_store import ArtifactStore
from kebab_eval_pipeline.store.pins import read_pins, stored_golden
from kebab_eval_pipeline.systems.identity import derive_identity, same_system


def _short(sha: str | None) -> str:
    return f"{sha[:12]}…" if sha else "(unknown)"


# ---------------------------------------------------------------------------------------------
# Resolution


def created_time(value: str | None) -> datetime | None:
    """``created_at`` as an aware datetime (naive = UTC), so differently spelled ISO times order
    correctly; None when absent or unparseable (such a run cannot be placed before another)."""
    if not value:
        return None
    try:
        t = datetime.fromisoformat(value)
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=UTC)


#: How many skipped runs a note names (the rest are counted).
SKIPPED_SHOWN = 5


@dataclass(frozen=True)
class Skipped:
    """An earlier run ``previous`` passed over, and why (``failed gate_mrr_min``, ``is a variant
    of sweep 'chunks'``)."""

    run_id: str
    reason: str

    def as_dict(self) -> dict[str, str]:
        return {"run_id": self.run_id, "reason": self.reason}


@dataclass(frozen=True)
class BaselineChoice:
    """The resolved baseline: its run id (None: no baseline), the one-sentence ``note`` the report
    shows, the runs ``previous`` skipped (most recent first) and ``warnings`` about a pinned or
    explicit baseline that failed its blocking gates or is of another role family."""

    run_id: str | None
    note: str
    skipped: tuple[Skipped, ...] = ()
    warnings: tuple[str, ...] = ()


def _skipped_text(skipped: list[Skipped], which: str) -> str:
    """``skipped 2 later run(s): 'r2' failed gate_mrr_min; 'v1' is a variant of sweep 'x'``."""
    shown = "; ".join(f"{s.run_id!r} {s.reason}" for s in skipped[:SKIPPED_SHOWN])
    more = f"; and {len(skipped) - SKIPPED_SHOWN} more" if len(skipped) > SKIPPED_SHOWN else ""
    return f"skipped {len(skipped)} {which} run(s): {shown}{more}"


def previous_run(
    run_id: str,
    golden: Mapping[str, Any],
    created_at: str,
    system: Mapping[str, Any] | None,
    role: RunRole,
    runs: Iterable[Mapping[str, Any]],
    comparison_of: Callable[[str], Mapping[str, Any] | None],
) -> tuple[str | None, str, list[Skipped]]:
    """The ``previous`` rule over stored run infos (pure): ``runs`` are ``run_metrics`` manifests
    (``run_id``, ``written_at``, ``info``), ``comparison_of(run id)`` a run's ``comparison_report``
    info (None when none is stored; asked only of runs that could be chosen). Returns the chosen
    run id (or None), the reason it was chosen or why none was — without the "baseline …" /
    "no baseline:" prefix — and the runs skipped, most recent first.

    Chosen: the most recent run strictly earlier than ``created_at`` on the same golden sha256, of
    this run's role family (:mod:`kebab_eval_pipeline.foundation.run_roles`), that passed
    (:func:`~kebab_eval_pipeline.compare.outcome.run_outcome`: system healthy, no blocking gate
    failed; among runs created at the same instant, the greatest run id: deterministic, if
    arbitrary). A regular run or an experiment is compared with a run of the same system identity
    (:mod:`kebab_eval_pipeline.systems.identity`); a sweep variant with the variants of its sweep,
    whatever they vary (the sweep declares them one system's configurations; a comparison of two
    identities still says so).

    Skipped and named in the note (runs later than the chosen one; every one when none is chosen,
    those of another family then counted by family): runs of this system on this sha256 that failed,
    or are of another role family. Only counted:
    runs of other systems on the set (and runs stored with no identity to tell), runs of this
    system on the same golden *name* at another sha256 (the note says how to compare with one
    anyway), and — for a sweep variant — runs that are not variants of its sweep.
    """
    name, sha = golden.get("name"), golden.get("sha256")
    if not sha:
        return None, "this run's metrics record no golden set sha256 to match earlier runs on", []
    now = created_time(created_at)
    if now is None:
        return None, f"this run's created_at {created_at!r} cannot be ordered against earlier runs", []
    mine = derive_identity(system or {})
    sweep = role.sweep if role.role == SWEEP_VARIANT else None
    if mine is None and sweep is None:
        return None, "this run records no system identity to match earlier runs on", []
    candidates: list[tuple[datetime, str, Mapping[str, Any]]] = []
    # same system and sha, another role family: (when, skipped, their family)
    other_family: list[tuple[datetime, Skipped, str]] = []
    other_versions = other_systems = unidentified = not_of_sweep = 0
    for manifest in runs:
        info = manifest.get("info") or {}
        when = created_time(info.get("created_at") or manifest.get("written_at"))
        if manifest["run_id"] == run_id or when is None or when >= now:
            continue
        theirs = info.get("golden") or {}
        same_sha = theirs.get("sha256") == sha
        their_role = role_of(manifest["run_id"], info)
        if sweep is not None:
            if their_role.family != role.family:
                not_of_sweep += same_sha
                continue
        else:
            same = same_system(mine, derive_identity(info.get("system") or {}))
            if not same:
                if same_sha and same is None:
                    unidentified += 1
                elif same_sha:
                    other_systems += 1
                continue
            if their_role.family != role.family:
                if same_sha:
                    skip = Skipped(manifest["run_id"], f"is {their_role.described()}")
                    other_family.append((when, skip, their_role.family))
                continue
        if same_sha:
            candidates.append((when, manifest["run_id"], info))
        elif theirs.get("name") == name and run_outcome(info).passed:
            other_versions += 1
    # Most recent first; a run's comparison is read only when its metrics alone did not fail it.
    chosen: tuple[datetime, str] | None = None
    failed: list[tuple[datetime, Skipped]] = []
    judged_note = ""
    for when, candidate, info in sorted(candidates, key=lambda c: (c[0], c[1]), reverse=True):
        outcome = run_outcome(info)
        if outcome.passed:
            outcome = run_outcome(info, comparison_of(candidate))
        if outcome.passed:
            chosen, judged_note = (when, candidate), outcome.note
            break
        failed.append((when, Skipped(candidate, outcome.reason())))
    later = [(w, s) for w, s, _ in other_family if chosen is None or w > chosen[0]]
    skipped = [s for _, s in sorted([*failed, *later], key=lambda p: (p[0], p[1].run_id), reverse=True)]
    if sweep is not None:
        this = f"variant of sweep {sweep!r} on golden set {name!r} at sha256 {_short(sha)}"
    else:
        kind = "experiment" if role.role == EXPERIMENT else "run"
        this = f"{kind} of {mine['label']} on golden set {name!r} at sha256 {_short(sha)}"
    if chosen is not None:
        why = f"the most recent earlier {this}"
        if judged_note:  # its comparison never ran: say what it was judged on
            why += f"; {chosen[1]!r}: {judged_note}"
        if skipped:
            why += "; " + _skipped_text(skipped, "later")
        return chosen[1], why, skipped
    why = f"no earlier {this}"
    if failed:  # named: each could have been the baseline but for its outcome
        why += " that passed its blocking gates; " + _skipped_text([s for _, s in failed], "earlier")
    if other_family:  # counted by family: none of them could ever be this run's baseline
        families = Counter(f for _, _, f in other_family)
        why += (
            f"; {len(other_family)} earlier run(s) of other role families skipped ("
            + ", ".join(f"{n} {family_words(f)}" for f, n in families.items())
            + f": {family_words(role.family).replace('(s)', 's')} are compared with each other)"
        )
    if other_versions:
        used = "run used another version" if other_versions == 1 else "runs used other versions"
        why += (
            f" ({other_versions} earlier {used} of the set; "
            "pin one or pass its id to compare across versions)"
        )
    others = []
    if other_systems:
        others.append(f"{other_systems} earlier run(s) of other systems on this set skipped")
    if unidentified:
        others.append(
            f"{unidentified} earlier run(s) stored without a system identity skipped "
            "(made before identities were recorded)"
        )
    if others:
        why += "; " + ", ".join(others) + " (pin one or pass its id to compare two systems)"
    if not_of_sweep:
        why += (
            f"; {not_of_sweep} earlier run(s) on this set that are not variants of the sweep skipped "
            "(a variant is compared with the sweep's other variants)"
        )
    return None, why, skipped


def _previous(
    store: ArtifactStore,
    run_id: str,
    golden: Mapping[str, Any],
    created_at: str,
    system: Mapping[str, Any] | None,
    role: RunRole,
) -> tuple[str | None, str, list[Skipped]]:
    """:func:`previous_run` over ``store``'s runs (a comparison's manifest read only when asked)."""

    def comparison_of(candidate: str) -> Mapping[str, Any] | None:
        manifest = store.manifest("comparison_report", candidate)
        return None if manifest is None else manifest.get("info") or {}

    return previous_run(run_id, golden, created_at, system, role, store.runs("run_metrics"), comparison_of)


def flag_baseline(
    baseline: str,
    how: str,
    their_info: Mapping[str, Any],
    their_comparison: Mapping[str, Any] | None,
    role: RunRole,
) -> list[str]:
    """What a pinned or explicit baseline (``how``: ``pinned``, ``configured``) is that an automatic
    one never would be (pure, over its stored infos): failed its blocking gates, or of another role
    family than this run (``role``). Empty when neither."""
    flags = []
    outcome = run_outcome(their_info, their_comparison)
    if not outcome.passed:
        flags.append(f"{how} baseline {baseline!r} failed its blocking checks: {outcome.failures()}")
    theirs = role_of(baseline, their_info)
    if theirs.family != role.family:
        flags.append(f"{how} baseline {baseline!r} is {theirs.described()}; this run is {role.described()}")
    return flags


def _flags(store: ArtifactStore, baseline: str, how: str, role: RunRole) -> list[str]:
    metrics = store.manifest("run_metrics", baseline) or {}
    comparison = store.manifest("comparison_report", baseline)
    return flag_baseline(
        baseline,
        how,
        metrics.get("info") or {},
        None if comparison is None else comparison.get("info") or {},
        role,
    )


def _drift(theirs: Mapping[str, Any], golden: Mapping[str, Any]) -> str:
    """A clause for a baseline on another golden set version ("" when the sha256 matches)."""
    if theirs.get("sha256") == golden.get("sha256"):
        return ""
    where = f"golden set {theirs.get('name')!r} " if theirs.get("name") != golden.get("name") else ""
    return (
        f"; the golden set versions differ ({where}sha256 {_short(theirs.get('sha256'))} vs "
        f"{_short(golden.get('sha256'))}), so queries in only one run are listed as drift"
    )


def _pinned(
    store: ArtifactStore, run_id: str, golden: Mapping[str, Any], hint: bool
) -> tuple[str | None, str]:
    """The run pinned for this run's golden set name and why, or (None, why not); no prefix.
    ``hint`` adds the command that fixes a missing or dangling pin (for the ``pinned`` mode, where
    the pin is the only rule)."""
    name = golden.get("name")
    fix = " (kebab-eval baseline set ID)" if hint else ""
    pin = read_pins(store).get(name)
    if pin is None:
        return None, f"no pinned baseline for golden set {name!r}{fix}"
    pinned = pin["run_id"]
    if pinned == run_id:
        return None, f"the baseline pinned for golden set {name!r} is this run itself"
    theirs = stored_golden(store, pinned)
    if theirs is None:
        return (
            None,
            f"the baseline pinned for golden set {name!r}, run {pinned!r}, has no stored metrics{fix}",
        )
    return pinned, f"pinned for golden set {name!r} at {pin['pinned_at']}" + _drift(theirs, golden)


def resolve_baseline(
    store: ArtifactStore,
    run_id: str,
    baseline: str,
    golden: Mapping[str, Any],
    created_at: str,
    system: Mapping[str, Any] | None = None,
    role: RunRole | None = None,
) -> BaselineChoice:
    """Resolve the ``baseline`` setting for ``run_id`` to a stored run id, with a one-sentence note.

    Inputs: the run's id, the setting (``auto | previous | pinned | none | <run_id>``), the run's
    ``run_metrics`` ``info["golden"]`` (``name``, ``sha256``), ``info["created_at"]``,
    ``info["system"]`` (its identity; without one, ``previous`` finds nothing for a regular run) and
    its role (:func:`~kebab_eval_pipeline.foundation.run_roles.role_of`; None: a regular run).
    Returns the choice — note ``"baseline '<id>' (<rule>)"`` or ``"no baseline: <why>"`` — and never
    raises for a missing baseline. ``previous`` (and ``auto`` without a pin) only choose a passing
    run of the same system and role family, naming the later runs it skipped; a pinned or explicit
    baseline is used whatever system, golden sha256, outcome or role it has (the note and
    ``warnings`` then say it failed, or is of another family). Raises InputError only for a corrupt
    pin file.
    """
    role = role or RunRole(MANUAL, "not given")
    if baseline == "none":
        return BaselineChoice(None, "no baseline: comparison disabled by configuration (baseline: none)")
    if baseline == "previous":
        chosen, why, skipped = _previous(store, run_id, golden, created_at, system, role)
        note = f"no baseline: {why}" if chosen is None else f"baseline {chosen!r} ({why})"
        return BaselineChoice(chosen, note, tuple(skipped))
    if baseline in ("pinned", "auto"):
        # The pin is the deliberate choice, so it wins; "previous" is auto's fallback.
        pinned, pin_why = _pinned(store, run_id, golden, hint=baseline == "pinned")
        if pinned is not None:
            flags = _flags(store, pinned, "pinned", role)
            rule = pin_why if baseline == "pinned" else f"auto: {pin_why}"
            note = f"baseline {pinned!r} ({rule}" + "".join(f"; {f}" for f in flags) + ")"
            return BaselineChoice(pinned, note, warnings=tuple(flags))
        if baseline == "pinned":
            return BaselineChoice(None, f"no baseline: {pin_why}")
        previous, prev_why, skipped = _previous(store, run_id, golden, created_at, system, role)
        if previous is None:
            return BaselineChoice(None, f"no baseline: {pin_why}, and {prev_why}", tuple(skipped))
        return BaselineChoice(
            previous, f"baseline {previous!r} (auto: {pin_why}, so {prev_why})", tuple(skipped)
        )
    return _explicit(store, run_id, baseline, golden, role)


def _explicit(
    store: ArtifactStore, run_id: str, baseline: str, golden: Mapping[str, Any], role: RunRole
) -> BaselineChoice:
    """An explicit baseline run id: used whenever it has stored metrics, whatever its golden set,
    outcome or role (the note says when it failed or is of another role family)."""
    if baseline == run_id:
        return BaselineChoice(None, f"no baseline: the configured baseline {baseline!r} is this run itself")
    try:
        theirs = stored_golden(store, baseline)
    except InputError:  # not a valid run id: settings validation normally refuses it earlier
        return BaselineChoice(None, f"no baseline: configured baseline {baseline!r} is not a valid run id")
    if theirs is None:
        return BaselineChoice(
            None, f"no baseline: configured baseline run {baseline!r} has no stored metrics"
        )
    flags = _flags(store, baseline, "configured", role)
    note = f"baseline {baseline!r} (configured explicitly{_drift(theirs, golden)}" + "".join(
        f"; {f}" for f in flags
    )
    return BaselineChoice(baseline, note + ")", warnings=tuple(flags))
