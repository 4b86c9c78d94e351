"""Which stored runs a bisect reads, in what order, and how each step's two runs are matched.

- **Order**: each stored run (one with ``run_metrics``) by when it started — the UTC time in a
  generated run id, else the ``created_at`` its metrics recorded
  (:func:`~kebab_eval_pipeline.foundation.run_ids.run_started`) — with the run id breaking ties; runs with
  no time at all come last, by id.
- **Window**: ``since`` / ``until`` (inclusive), each a stored run id (from / up to that run in
  this order) or a date or time (ISO 8601: ``2026-11-27``, ``2026-11-27T09:30``; naive = UTC; a bare
  ``until`` date includes that whole day).
- **Golden set**: ``golden`` — a golden set's name (every version of it) or the start (≥ 6 hex
  digits) of its content hash (sha256, one version). None: the golden content of the latest run in
  the window; runs on other golden sets are left out and the notes say which.
- **Matching**: each step is matched as ``kebab-eval compare A B`` matches (:func:`~.fallback.plan_matching`:
  the runs' own scores when their chunkers agree, one chunk-independent criterion when not).

Everything a user can get wrong — the metric, alpha, the correction, the tolerance, the window,
the golden set, fewer than two runs — is an :class:`InputError` naming each offender.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import Any

import pandas as pd

from kebab_eval_pipeline.compare.bisect import (
    ADJUSTMENTS,
    Bisect,
    HistoryRun,
    PairScores,
    bisect_history,
    recorded_settings,
)
from kebab_eval_pipeline.compare.fallback import plan_matching, rescore
from kebab_eval_pipeline.compare.outcome import OUTCOMES, run_outcome
from kebab_eval_pipeline.compare.runs import current_scores
from kebab_eval_pipeline.compare.settings import CompareSettings
from kebab_eval_pipeline.foundation.errors import InputError, Offender
from kebab_eval_pipeline.foundation.run_ids import run_started
from kebab_eval_pipeline.foundation.run_roles import check_role_filter, family_words, matches_role, role_of
from kebab_eval_pipeline.metrics import catalogue
from kebab_eval_pipeline.store.runs import RunStore, StoredRun

__all__ = ["ORDER_NOTE", "bisect_stored", "known_metrics", "ordered_runs"]

ORDER_NOTE = (
    "runs ordered by start time (the time in a generated run id, else the run's recorded created_at), "
    "run id breaking ties"
)
_HASH = re.compile(r"^[0-9a-fA-F]{6,64}$")


def ordered_runs(store: RunStore) -> list[dict[str, Any]]:
    """Every run with stored metrics, oldest first (see the module docstring): dicts with
    ``run_id``, ``started`` (aware datetime or None), ``info`` (its run_metrics info), ``role``
    (:func:`~kebab_eval_pipeline.foundation.run_roles.role_of`) and ``outcome``
    (:func:`~kebab_eval_pipeline.compare.outcome.run_outcome`, with its stored comparison)."""
    rows = []
    for manifest in store.runs("run_metrics"):
        info = manifest.get("info") or {}
        comparison = store.manifest("comparison_report", manifest["run_id"])
        rows.append(
            {
                "run_id": manifest["run_id"],
                "started": run_started(manifest["run_id"], info.get("created_at")),
                "info": info,
                "role": role_of(manifest["run_id"], info),
                "outcome": run_outcome(info, None if comparison is None else comparison.get("info") or {}),
            }
        )
    far = datetime.max.replace(tzinfo=UTC)
    return sorted(rows, key=lambda r: (r["started"] is None, r["started"] or far, r["run_id"]))


def known_metrics(ks: Sequence[int], columns: Sequence[str] | None = None) -> list[str]:
    """The metrics a bisect can follow: catalogue metrics with a paired per-query test, over
    cut-offs ``ks``; only those whose column is in ``columns`` when given (the columns a run
    scored)."""
    have = None if columns is None else set(map(str, columns))
    return [
        m
        for m in catalogue.metric_names(ks)
        if catalogue.test_kind(m) is not None and (have is None or catalogue.metric_column(m) in have)
    ]


def _bound(value: str, option: str, ids: list[str], end: bool) -> tuple[str, Any] | Offender:
    """A window bound: ``("run", position)`` for a stored run id, ``("time", datetime)`` for a date."""
    if value in ids:
        return "run", ids.index(value)
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        return Offender(
            option,
            f"{value!r} is neither a stored run id nor a date or time (YYYY-MM-DD or ISO 8601, e.g. "
            "2026-11-27 or 2026-11-27T09:30)",
        )
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    if end and len(value.strip()) == 10:  # a bare date: the whole day
        moment += timedelta(days=1) - timedelta(microseconds=1)
    return "time", moment


def _inside(rows: list[dict], index: int, bound: tuple[str, Any] | None, end: bool) -> bool:
    if bound is None:
        return True
    kind, value = bound
    if kind == "run":
        return index <= value if end else index >= value
    started = rows[index]["started"]
    return started is not None and (started <= value if end else started >= value)


def _golden_label(info: dict) -> str:
    g = info.get("golden") or {}
    return f"{g.get('name')} (sha256 {str(g.get('sha256'))[:12]})"


def _kept(window: list[dict], roles: Sequence[str], outcome: str | None) -> tuple[list[dict], list[str]]:
    """The runs of ``window`` the ``--role`` / ``--outcome`` filters keep, and a note saying what
    they left out (none without filters)."""
    if not roles and outcome is None:
        return window, []
    kept = [
        r
        for r in window
        if (not roles or any(matches_role(r["role"], want) for want in roles))
        and (outcome is None or r["outcome"].outcome == outcome)
    ]
    what = ", ".join([*(f"role {r}" for r in roles), *([f"outcome {outcome}"] if outcome else [])])
    return kept, [f"kept {len(kept)} of {len(window)} run(s) in the window: {what}"]


def _kind_notes(chosen: list[dict]) -> list[str]:
    """What the bisected runs are, when it matters: several role families (a change between a sweep
    variant and a regular run is a change of kind), and runs that failed their blocking checks."""
    notes = []
    families = pd.Series([r["role"].family for r in chosen]).value_counts(sort=False)
    if len(families) > 1:
        notes.append(
            "runs of several role families: "
            + ", ".join(f"{n} {family_words(f)}" for f, n in families.items())
            + " (a step between two families is a change of kind, not a regression; --role regular "
            "follows the regular runs only)"
        )
    failed = [r["run_id"] for r in chosen if not r["outcome"].passed]
    if failed:
        notes.append(
            f"{len(failed)} run(s) failed their blocking checks: {', '.join(failed)} (a failed run "
            "before a change is no known-good run; --outcome passed leaves them out)"
        )
    return notes


def _select(
    rows: list[dict],
    since: str | None,
    until: str | None,
    golden: str | None,
    roles: Sequence[str] = (),
    outcome: str | None = None,
) -> tuple[list[dict], list[str]]:
    """The runs in the window, kept by the role and outcome filters, on the chosen golden set, and
    the notes saying what was chosen."""
    ids = [r["run_id"] for r in rows]
    offenders: list[Offender] = []
    bounds = {}
    for option, value, end in (("--since", since, False), ("--until", until, True)):
        if value is not None:
            bound = _bound(value, option, ids, end)
            if isinstance(bound, Offender):
                offenders.append(bound)
            else:
                bounds[option] = bound
    if offenders:
        raise InputError("bad bisect window", offenders)
    window = [
        r
        for i, r in enumerate(rows)
        if _inside(rows, i, bounds.get("--since"), False) and _inside(rows, i, bounds.get("--until"), True)
    ]
    window, notes = _kept(window, roles, outcome)
    notes = [ORDER_NOTE, *notes]
    if not window:
        return [], notes
    shas = {r["run_id"]: (r["info"].get("golden") or {}).get("sha256") for r in window}
    if golden is None:
        latest = window[-1]
        chosen = [r for r in window if shas[r["run_id"]] == shas[latest["run_id"]]]
        left = [r for r in window if shas[r["run_id"]] != shas[latest["run_id"]]]
        if left:
            others = pd.Series([_golden_label(r["info"]) for r in left]).value_counts(sort=False)
            notes.append(
                f"golden set: {_golden_label(latest['info'])}, that of the latest run {latest['run_id']!r} "
                f"(no --golden given); left out: "
                + ", ".join(f"{n} run(s) on {label}" for label, n in others.items())
            )
        else:
            notes.append(f"golden set: {_golden_label(latest['info'])}")
        return chosen, notes
    by_name = [r for r in window if (r["info"].get("golden") or {}).get("name") == golden]
    by_hash = (
        [r for r in window if str(shas[r["run_id"]] or "").startswith(golden.lower())]
        if _HASH.match(golden)
        else []
    )
    chosen = by_name or by_hash
    if not chosen:
        stored = pd.Series([_golden_label(r["info"]) for r in window]).value_counts(sort=False)
        raise InputError(
            "no stored run on that golden set",
            [
                Offender(
                    "--golden",
                    f"{golden!r} is neither the name nor the start of the sha256 (≥ 6 hex digits) of the "
                    "golden set of a run in the window; stored: "
                    + ", ".join(f"{label}: {n} run(s)" for label, n in stored.items()),
                )
            ],
        )
    versions = {shas[r["run_id"]] for r in chosen}
    how = "name" if by_name else "content hash"
    notes.append(
        f"golden set {golden!r} (by {how}): {len(chosen)} run(s)"
        + (
            f" on {len(versions)} versions of it: the steps where its content changed name golden.sha256"
            if len(versions) > 1
            else ""
        )
    )
    return chosen, notes


def bisect_stored(
    store: RunStore,
    metric: str,
    *,
    since: str | None = None,
    until: str | None = None,
    golden: str | None = None,
    alpha: float = 0.05,
    adjust_by: str = "holm",
    tolerance: float = 0.0,
    options: CompareSettings | None = None,
    roles: Sequence[str] = (),
    outcome: str | None = None,
) -> Bisect:
    """:func:`~.bisect.bisect_history` over the stored runs chosen by the window, the role and
    outcome filters (``roles``: :func:`~kebab_eval_pipeline.foundation.run_roles.matches_role` values, any of
    them; ``outcome``: passed | failed) and golden set (module docstring), with ``options``' seed,
    resamples and chunker strictness (a comparison's). Each run carries its role and outcome into
    the steps; a change whose runs failed or are of two role families says so (``caution``).

    ``info`` gains ``order`` (how the runs were ordered), ``notes`` (the golden set chosen, runs
    left out, the role families and failed runs among those bisected), ``window``, ``golden`` and
    ``filters``. Raises :class:`InputError` naming every offender: a bad
    alpha, correction, tolerance, window bound or golden set, fewer than two runs, an unknown
    metric or one without a paired per-query test (listing the metrics these runs can follow), a
    metric some run did not score, a run not stored whole."""
    options = options or CompareSettings()
    offenders = []
    if not 0.0 < alpha < 1.0:
        offenders.append(Offender("--alpha", f"{alpha!r}: must be above 0 and below 1"))
    if adjust_by not in ADJUSTMENTS:
        offenders.append(Offender("--adjust", f"{adjust_by!r}: expected one of {', '.join(ADJUSTMENTS)}"))
    if not tolerance >= 0.0:
        offenders.append(Offender("--tolerance", f"{tolerance!r}: must be 0 or more"))
    try:
        check_role_filter(list(roles), "--role")
    except InputError as exc:
        offenders += exc.offenders
    if outcome is not None and outcome not in OUTCOMES:
        offenders.append(Offender("--outcome", f"{outcome!r}: expected one of {', '.join(OUTCOMES)}"))
    if offenders:
        raise InputError("bad bisect options", offenders)
    chosen, notes = _select(ordered_runs(store), since, until, golden, roles, outcome)
    if len(chosen) < 2:
        where = ", ".join(
            f"{o} {v!r}"
            for o, v in (
                ("--since", since),
                ("--until", until),
                ("--golden", golden),
                ("--role", ", ".join(roles)),
                ("--outcome", outcome),
            )
            if v
        )
        raise InputError(
            "fewer than 2 runs to bisect",
            [
                Offender(
                    "runs",
                    f"{len(chosen)} stored run(s) with metrics"
                    + (f" match {where}" if where else " on one golden set")
                    + (f": {chosen[0]['run_id']}" if chosen else "")
                    + "; a bisect compares consecutive runs",
                )
            ],
        )
    notes += _kind_notes(chosen)
    runs = [store.stored_run(r["run_id"]) for r in chosen]
    _check_metric(metric, runs)
    pairs, cache = {}, {}
    for i, (a, b) in enumerate(pairwise(runs)):
        pair = _pair(a, b, options.strict_chunker_version, cache)
        if pair is not None:
            pairs[i] = pair
    overall = _pair(runs[0], runs[-1], options.strict_chunker_version, cache) if len(runs) > 2 else None
    history = [
        HistoryRun(
            r["run_id"],
            _own(run, cache),
            recorded_settings(r["info"]),
            None if r["started"] is None else r["started"].astimezone(UTC).isoformat(),
            role=r["role"].label,
            family=r["role"].family,
            outcome=r["outcome"].outcome,
            failed=r["outcome"].failed,
        )
        for r, run in zip(chosen, runs, strict=True)
    ]
    result = bisect_history(
        history,
        metric,
        alpha=alpha,
        adjust_by=adjust_by,
        tolerance=tolerance,
        seed=options.seed,
        n_resamples=options.resamples,
        pairs=pairs,
        overall=overall,
    )
    result.info.update(
        {
            "order": ORDER_NOTE,
            "notes": notes,
            "window": {"since": since, "until": until},
            "golden": golden,
            "filters": {"roles": list(roles), "outcome": outcome},
        }
    )
    return result


def _check_metric(metric: str, runs: list[StoredRun]) -> None:
    latest = runs[-1]
    ks = latest.scores.info.get("k") or latest.metrics.info.get("k") or [1, 3, 5, 10]
    known = known_metrics(ks, _scored(latest.scores.scores))
    listing = "known: " + ", ".join(known)
    column = catalogue.metric_column(metric)
    if catalogue.measure(metric) is None:
        raise InputError("unknown metric", [Offender("METRIC", f"{metric!r} is not a metric; {listing}")])
    if column is None or catalogue.test_kind(metric) is None:
        raise InputError(
            "metric without per-query scores",
            [
                Offender(
                    "METRIC",
                    f"{metric!r} has no paired per-query test "
                    f"({catalogue.untestable_reason(metric)}); {listing}",
                )
            ],
        )
    missing = [r.run_id for r in runs if column not in _scored(r.scores.scores)]
    if missing:
        raise InputError(
            "metric not scored by every run",
            [
                Offender(
                    "METRIC",
                    f"{metric!r}: no {column!r} value in run(s) {', '.join(missing)}; {listing}",
                )
            ],
        )


def _scored(scores: pd.DataFrame) -> list[str]:
    """The columns of a ``query_scores`` table with at least one value (an answer metric's column
    is there, all null, in a run without answers: nothing to follow)."""
    return [str(c) for c in scores.columns if scores[c].notna().any()]


def _own(run: StoredRun, cache: dict) -> pd.DataFrame:
    """A run's scores as stored (re-scored only when stored under older metric definitions)."""
    key = (run.run_id, None)
    if key not in cache:
        cache[key] = current_scores(run)[0]
    return cache[key]


def _pair(a: StoredRun, b: StoredRun, strict: bool, cache: dict) -> PairScores | None:
    """The two tables ``compare a b`` would test (None: each run's own scores)."""
    plan = plan_matching(a, b, strict)
    if plan.criterion is None:
        return None

    def scores(run: StoredRun, again: bool) -> pd.DataFrame:
        if not again:
            return _own(run, cache)
        key = (run.run_id, plan.criterion)
        if key not in cache:
            cache[key] = rescore(run, plan.criterion)[0]
        return cache[key]

    return PairScores(
        scores(a, plan.rescore_a), scores(b, plan.rescore_b), plan.mode, f"{plan.mode}: {plan.note}"
    )
