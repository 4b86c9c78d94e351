"""Which stored run a new run is compared with (the pins that fix that choice per golden set are
kept in :mod:`kebab_eval_pipeline.store.pins`).

The ``baseline`` setting (SPEC §8) is one of:

- ``auto`` (default): the baseline pinned for the run's golden set name, else ``previous``;
- ``pinned``: only the pin;
- ``previous``: the most recent earlier run on the same golden set *content* (sha256) by the same
  system (its identity: :mod:`kebab_eval_pipeline.systems.identity`);
- ``none``: no comparison;
- anything else: an explicit run id.

A mode name wins over a run id spelled the same way (a run called ``previous`` can be pinned, not
named). Resolution never raises for a missing baseline: "no baseline: …" is a note shown in the
report, not a failure.

Pins are kept by the run store (:mod:`kebab_eval_pipeline.store.pins`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from kebab_eval_pipeline.errors import InputError
from kebab_eval_pipeline.metrics.health import failed_run
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


def _previous(
    store: ArtifactStore,
    run_id: str,
    golden: Mapping[str, Any],
    created_at: str,
    system: Mapping[str, Any] | None,
) -> tuple[str | None, str]:
    """The most recent run strictly earlier than ``created_at`` on the same golden sha256 *and*
    the same system identity (:mod:`kebab_eval_pipeline.systems.identity`; among runs created at
    the same instant, the greatest run id: deterministic, if arbitrary), with the reason it was
    chosen or why none was — without the "baseline …" / "no baseline:" prefix.

    Never chosen, only counted in the note: runs of other systems on the set (and runs stored
    with no identity to tell), runs of this system on the same golden *name* at another sha256
    (the note says how to compare with one anyway), and runs whose system under test failed
    (their ``system_health`` check failed: their zeros would make any run look like a win).
    """
    name, sha = golden.get("name"), golden.get("sha256")
    if not sha:
        return None, "this run's metrics record no golden set sha256 to match earlier runs on"
    now = created_time(created_at)
    if now is None:
        return None, f"this run's created_at {created_at!r} cannot be ordered against earlier runs"
    mine = derive_identity(system or {})
    if mine is None:
        return None, "this run records no system identity to match earlier runs on"
    matching: list[tuple[datetime, str]] = []
    other_versions = other_systems = unidentified = 0
    failed: list[datetime] = []  # same-sha runs of this system whose system under test failed
    for manifest in store.runs("run_metrics"):
        info = manifest.get("info") or {}
        when = created_time(info.get("created_at") or manifest.get("written_at"))
        if manifest["run_id"] == run_id or when is None or when >= now:
            continue
        theirs = info.get("golden") or {}
        same_sha = theirs.get("sha256") == sha
        same = same_system(mine, derive_identity(info.get("system") or {}))
        if not same:
            if same_sha and same is None:
                unidentified += 1
            elif same_sha:
                other_systems += 1
            continue
        if failed_run(info.get("system_health") or {}):
            if same_sha:
                failed.append(when)
            continue
        if same_sha:
            matching.append((when, manifest["run_id"]))
        elif theirs.get("name") == name:
            other_versions += 1
    this = f"{mine['label']} on golden set {name!r} at sha256 {_short(sha)}"
    if matching:
        chosen = max(matching)
        later = sum(t > chosen[0] for t in failed)
        skipped = f"; skipped {later} later run(s) whose system under test failed" if later else ""
        return chosen[1], f"the most recent earlier run of {this}{skipped}"
    why = f"no earlier run of {this}"
    if failed:
        why += f" whose system under test worked ({len(failed)} failed)"
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
    return None, why


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


def choose_baseline(
    store: ArtifactStore,
    run_id: str,
    baseline: str,
    golden: Mapping[str, Any],
    created_at: str,
    system: Mapping[str, Any] | None = None,
) -> tuple[str | None, str]:
    """Resolve the ``baseline`` setting for ``run_id`` to a stored run id, with a one-sentence note.

    Inputs: the run's id, the setting (``auto | previous | pinned | none | <run_id>``), the run's
    ``run_metrics`` ``info["golden"]`` (``name``, ``sha256``), ``info["created_at"]`` and
    ``info["system"]`` (its identity; without one, ``previous`` finds nothing).
    Returns ``(run id, "baseline '<id>' (<rule>)")`` or ``(None, "no baseline: <why>")`` — never
    raises for a missing baseline. ``previous`` (and ``auto`` without a pin) only choose a run of
    the same system; a pinned or explicit baseline is used whatever system or golden sha256 it
    has (the comparison then says so). Raises InputError only for a corrupt pin file.
    """
    if baseline == "none":
        return None, "no baseline: comparison disabled by configuration (baseline: none)"
    if baseline in ("previous", "pinned"):
        if baseline == "previous":
            chosen, why = _previous(store, run_id, golden, created_at, system)
        else:
            chosen, why = _pinned(store, run_id, golden, hint=True)
        return chosen, f"no baseline: {why}" if chosen is None else f"baseline {chosen!r} ({why})"
    if baseline == "auto":
        # The pin is the deliberate choice, so it wins; "previous" is the fallback.
        pinned, pin_why = _pinned(store, run_id, golden, hint=False)
        if pinned is not None:
            return pinned, f"baseline {pinned!r} (auto: {pin_why})"
        previous, prev_why = _previous(store, run_id, golden, created_at, system)
        if previous is None:
            return None, f"no baseline: {pin_why}, and {prev_why}"
        return previous, f"baseline {previous!r} (auto: {pin_why}, so {prev_why})"
    return _explicit(store, run_id, baseline, golden)


def _explicit(
    store: ArtifactStore, run_id: str, baseline: str, golden: Mapping[str, Any]
) -> tuple[str | None, str]:
    """An explicit baseline run id: used whenever it has stored metrics, whatever its golden set."""
    if baseline == run_id:
        return None, f"no baseline: the configured baseline {baseline!r} is this run itself"
    try:
        theirs = stored_golden(store, baseline)
    except InputError:  # not a valid run id: settings validation normally refuses it earlier
        return None, f"no baseline: configured baseline {baseline!r} is not a valid run id"
    if theirs is None:
        return None, f"no baseline: configured baseline run {baseline!r} has no stored metrics"
    return baseline, f"baseline {baseline!r} (configured explicitly{_drift(theirs, golden)})"
