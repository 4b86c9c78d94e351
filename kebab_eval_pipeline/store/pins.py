"""Baseline pins: the run each golden set is compared with when its runs say ``baseline: auto`` or
``pinned``, kept with the runs they name.

One JSON document, ``{storage base}/_baselines.json``, mapping a golden set name to ``{"run_id",
"golden_sha256", "pinned_at"}``, so pins follow the artifacts to object storage. Writes replace the
whole document (atomic rename locally, one PUT elsewhere). Locally each read-modify-write holds a
file lock, so concurrent ``baseline set`` commands for different golden sets all keep their pins;
object stores have no lock, and there concurrent writers race as last-writer-wins. Which run a
new run is compared with is decided in :mod:`kebab_eval_pipeline.compare.baseline`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from kebab_eval_pipeline.foundation import atomic
from kebab_eval_pipeline.foundation.errors import InputError, Offender
from kebab_eval_pipeline.foundation.limits import INPUT_ENV, max_bytes, read_limited
from kebab_eval_pipeline.foundation.location import is_local, local_path
from kebab_eval_pipeline.foundation.run_ids import check_run_id
from kebab_eval_pipeline.foundation.yaml_io import (
    duplicate_offenders,
    json_duplicates,
    may_have_duplicate_keys,
)
from kebab_eval_pipeline.store.artifact_store import ArtifactStore
from kebab_eval_pipeline.store.layout import PINS_FILE

PIN_FIELDS = ("run_id", "golden_sha256", "pinned_at")


def _pins_path(store: ArtifactStore):
    return store.root / PINS_FILE


def read_pins(store: ArtifactStore) -> dict[str, dict[str, str]]:
    """All pins: golden set name → ``{"run_id", "golden_sha256", "pinned_at"}``.

    A missing file means no pins. A file that is not that mapping raises InputError naming the
    file (fix it or delete it to drop every pin) — guessing at a damaged pin would silently
    change which run every comparison uses.
    """
    path = _pins_path(store)
    if not path.exists():
        return {}
    data = _read_bounded(path)
    try:
        text = data.decode("utf-8")
        doc = json.loads(text)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise InputError(
            "the pinned-baseline file is corrupt",
            [Offender(str(path), f"not JSON ({exc}); fix it, or delete it to drop every pin")],
        ) from None
    if may_have_duplicate_keys(text, doc):
        duplicates = json_duplicates(text)
        if duplicates:  # two pins for one golden set: which one counts is not ours to guess
            raise InputError(
                "the pinned-baseline file is corrupt (fix it, or delete it to drop every pin)",
                duplicate_offenders(str(path), duplicates),
            )
    problems = []
    if not isinstance(doc, dict):
        problems.append(Offender(str(path), f"top level is a {type(doc).__name__}, expected a mapping"))
    else:
        for name, pin in doc.items():
            if not isinstance(pin, dict) or not all(isinstance(pin.get(f), str) for f in PIN_FIELDS):
                problems.append(
                    Offender(str(path), f"expected {{{', '.join(PIN_FIELDS)}}} as strings", field=name)
                )
    if problems:
        raise InputError(
            "the pinned-baseline file is corrupt (fix it, or delete it to drop every pin)", problems
        )
    return {name: {f: pin[f] for f in PIN_FIELDS} for name, pin in doc.items()}


def _read_bounded(path) -> bytes:
    """The pin document's bytes, at most ``KEBAB_EVAL_MAX_INPUT_MB``; a local one through
    :func:`read_limited` (devices and FIFOs refused unopened), a remote one read to limit + 1 bytes."""
    if is_local(path):
        return read_limited(local_path(path), "pinned-baseline file")
    limit = max_bytes(INPUT_ENV)
    with path.open("rb") as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise InputError(
            "the pinned-baseline file is too large",
            [Offender(str(path), f"over the limit of {limit:,} bytes; raise it with {INPUT_ENV}=<MiB>")],
        )
    return data


def _write_pins(store: ArtifactStore, pins: Mapping[str, Mapping[str, str]]) -> None:
    """Replace the pin document atomically (see :mod:`kebab_eval_pipeline.foundation.atomic`), so a reader
    never sees half a file. Callers hold :func:`atomic.locked` on the document."""
    payload = json.dumps(pins, indent=2, sort_keys=True, ensure_ascii=False).encode("utf-8")
    atomic.write_bytes(_pins_path(store), payload)


def stored_golden(store: ArtifactStore, run_id: str) -> Mapping[str, Any] | None:
    """The ``golden`` block of a run's stored run_metrics info; None when the run has no metrics.
    Reads the manifest only (no Parquet)."""
    manifest = store.manifest("run_metrics", run_id)
    if manifest is None:
        return None
    return (manifest.get("info") or {}).get("golden") or {}


def pin_baseline(store: ArtifactStore, run_id: str) -> dict[str, str | None]:
    """Pin ``run_id`` as the baseline of its golden set (by name), replacing any earlier pin.

    The golden set's name and sha256 come from the run's stored run_metrics. Returns the pin plus
    ``golden`` (the name) and ``replaced`` (the previously pinned run id, or None).
    InputError: an invalid run id, a run without stored run_metrics, or one whose metrics record
    no golden set name.
    """
    check_run_id(run_id)
    golden = stored_golden(store, run_id)
    if golden is None:
        raise InputError(
            "cannot pin the baseline",
            [
                Offender(
                    f"run {run_id}",
                    f"no stored run_metrics under {store.base} (only a finished run can be a baseline; "
                    "`kebab-eval runs list` shows which runs have metrics)",
                )
            ],
        )
    name = golden.get("name")
    if not name:
        raise InputError(
            "cannot pin the baseline",
            [Offender(f"run {run_id}", "its run_metrics record no golden set name to pin it under")],
        )
    pin = {
        "run_id": run_id,
        "golden_sha256": str(golden.get("sha256") or ""),
        "pinned_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    with atomic.locked(_pins_path(store)):
        pins = read_pins(store)
        replaced = pins.get(name, {}).get("run_id")
        _write_pins(store, {**pins, name: pin})
    return {"golden": name, **pin, "replaced": replaced}


def unpin_baseline(store: ArtifactStore, golden_name: str | None) -> list[str]:
    """Remove the pin of ``golden_name``; returns the golden set names unpinned.

    ``None`` clears the only pin; with none pinned it returns ``[]``; with several it raises
    InputError listing them (say which). An unpinned ``golden_name`` raises InputError listing the
    pinned names, so a typo is not mistaken for success.
    """
    with atomic.locked(_pins_path(store)):
        return _unpin(store, golden_name)


def _unpin(store: ArtifactStore, golden_name: str | None) -> list[str]:
    pins = read_pins(store)
    pinned = ", ".join(repr(n) for n in sorted(pins)) or "none"
    if golden_name is None:
        if not pins:
            return []
        if len(pins) > 1:
            raise InputError(
                "several golden sets have a pinned baseline; say which to clear",
                [Offender("--golden", f"pinned: {pinned}")],
            )
        golden_name = next(iter(pins))
    elif golden_name not in pins:
        raise InputError(
            "no pinned baseline to clear",
            [Offender("--golden", f"{golden_name!r} has no pin (pinned: {pinned})")],
        )
    _write_pins(store, {n: p for n, p in pins.items() if n != golden_name})
    return [golden_name]
