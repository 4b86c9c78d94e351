"""Where a metric changed over an ordered history of runs, and what changed with it (``kebab-eval bisect``).

Input: runs in time order (oldest first), each with its per-query scores (``query_scores``) and the
settings it recorded (:func:`recorded_settings`: versions, system configuration, golden hash,
scoring settings), and one metric that is a mean of a per-query column.

Method — consecutive paired tests, corrected for the family of steps:

- each step ``run i → run i+1`` is the paired test ``kebab-eval compare A B`` runs
  (:func:`~.significance.compare_query_scores`: the queries both runs scored, exact McNemar for the
  catalogue's 0/1 metrics, the sign-flip randomization test for graded ones, a paired bootstrap CI
  of the mean difference; same seed and resamples), so a step's p-value equals that comparison's;
- the N − 1 raw p-values form one family, adjusted by Holm (default: the chance of *any* false
  alarm over the history stays ≤ α) or Benjamini–Hochberg (the expected share of false alarms
  among the reported changes stays ≤ α; more power on a long history);
- a **change** is a step whose adjusted p is below α.

Why not a change-point method (CUSUM, PELT, binary segmentation) over the runs' means? The runs
are paired — the same queries, scored again — and a per-query paired test uses that pairing; a
change-point method on N means throws it away and needs a noise model of the means. A change of a
setting lands between two consecutive runs, which is what consecutive tests examine; a slow
drift (steps each too small to detect) is caught by the extra first-vs-last test reported beside
them (``info["overall"]``, raw p, not in the family).

For each change: the settings that differ between its two runs (:func:`setting_diffs`) and the
queries that flipped (their per-query value moved by more than ``tolerance``), worst first.

Outputs are typed tables (:data:`STEP_COLUMNS`, :data:`CHANGE_COLUMNS`, :data:`DIFF_COLUMNS`,
:data:`FLIP_COLUMNS`) and ``info``; the text, Markdown and JSON renderings are in
:mod:`kebab_eval_pipeline.reporting.bisect_report`. Which stored runs, in what order:
:mod:`.bisect_stored`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from kebab_eval_pipeline.compare.multiple_testing import adjust
from kebab_eval_pipeline.compare.significance import compare_query_scores
from kebab_eval_pipeline.contract import VERSION_KEYS
from kebab_eval_pipeline.metrics import catalogue
from kebab_eval_pipeline.metrics.columns import float_column

__all__ = [
    "ADJUSTMENTS",
    "CHANGE_COLUMNS",
    "DIFF_COLUMNS",
    "FLIP_COLUMNS",
    "STEP_COLUMNS",
    "Bisect",
    "HistoryRun",
    "PairScores",
    "bisect_history",
    "recorded_settings",
    "setting_diffs",
]

#: Corrections across the steps (``--adjust``).
ADJUSTMENTS = ("holm", "bh")

#: One row per consecutive pair (``step`` 1 is runs 1 → 2); delta = b − a over the paired queries.
STEP_COLUMNS: dict[str, str] = {
    "step": "Int64",
    "run_a": "string",
    "run_b": "string",
    "started_b": "string",  # when run b started (ISO, UTC), as the order used it
    "n_paired": "Int64",  # queries both runs scored (and define the metric for)
    "mean_a": "float64",
    "mean_b": "float64",
    "delta": "float64",
    "ci_low": "float64",
    "ci_high": "float64",
    "p_raw": "float64",
    "p_adjusted": "float64",  # over the steps (Holm or BH)
    "changed": "boolean",  # p_adjusted < alpha
    "direction": "string",  # better / worse / same (the metric's sense); null without pairs
    "test": "string",
    "matching": "string",  # exact, or fallback_<criterion> when the chunkers differ
    "changed_fields": "object",  # recorded settings that differ between a and b (list)
    "note": "string",
    "role_a": "string",  # what each run is (run_roles: nightly, sweep-variant (chunks), …)
    "outcome_a": "string",  # passed | failed (compare.outcome)
    "role_b": "string",
    "outcome_b": "string",
}
#: One row per change (a step with adjusted p < alpha), in history order.
CHANGE_COLUMNS: dict[str, str] = {
    "step": "Int64",
    "run_a": "string",
    "run_b": "string",
    "delta": "float64",
    "ci_low": "float64",
    "ci_high": "float64",
    "p_raw": "float64",
    "p_adjusted": "float64",
    "direction": "string",
    "changed_fields": "object",
    "n_flipped": "Int64",
    "n_worse": "Int64",
    "n_better": "Int64",
    "role_a": "string",
    "outcome_a": "string",
    "role_b": "string",
    "outcome_b": "string",
    # what makes a step's runs no clean before/after: a run that failed (the run before a change
    # for the worse is then no known-good run), runs of two role families; null when none
    "caution": "string",
}
#: Every recorded setting that differs between the two runs of a step (every step, not only changes).
DIFF_COLUMNS: dict[str, str] = {
    "step": "Int64",
    "run_a": "string",
    "run_b": "string",
    "field": "string",
    "value_a": "string",
    "value_b": "string",
}
#: The queries of each change whose value moved by more than the tolerance, worst first per change.
FLIP_COLUMNS: dict[str, str] = {
    "step": "Int64",
    "run_a": "string",
    "run_b": "string",
    "query_id": "string",
    "value_a": "float64",
    "value_b": "float64",
    "delta": "float64",
    "flip": "string",  # worse / better, in the metric's sense
}

#: Scoring settings of a run's identity that change what a metric means.
_SCORING_KEYS = ("k", "mrr_cutoff", "match", "relevance_level", "scoring_version", "answers")
#: System entries that are measurements or labels, not settings.
_SYSTEM_SKIPS = ("coverage", "identity", "capabilities")
# Stored per-query scores have 4 decimals: a difference at the 12th is rounding, not a flip.
_EPS = 1e-9


@dataclass(frozen=True)
class HistoryRun:
    """One run of the history: its id, its ``query_scores`` table (unique ``query_id``), the
    settings it recorded (:func:`recorded_settings`; field → text or None), when it started (ISO
    text, for the report), and what it is: its role (label), role family, outcome (``passed`` |
    ``failed``) and the checks that failed it — None when not known."""

    run_id: str
    scores: pd.DataFrame
    settings: Mapping[str, str | None] = field(default_factory=dict)
    started: str | None = None
    role: str | None = None
    family: str | None = None
    outcome: str | None = None
    failed: tuple[str, ...] = ()


def _caution(a: HistoryRun, b: HistoryRun, direction: str | None) -> str | None:
    """Why a step's two runs are no clean before/after (None when they are): a run that failed its
    blocking checks — the run before a change for the worse is then no known-good run — and runs of
    two role families (a sweep variant beside a regular run: a change of kind, not a regression)."""
    parts = []
    for side, run in (("before", a), ("after", b)):
        if run.outcome == "failed":
            what = ", ".join(run.failed) or "its blocking checks"
            known = ": it is not a known-good run" if side == "before" and direction == "worse" else ""
            parts.append(f"the run {side} this step, {run.run_id!r}, failed {what}{known}")
    if a.family is not None and b.family is not None and a.family != b.family:
        parts.append(f"{a.run_id!r} is {a.role} and {b.run_id!r} is {b.role}: runs of two role families")
    return "; ".join(parts) or None


@dataclass(frozen=True)
class PairScores:
    """The two tables one step compares when they are not the runs' own ``scores`` — runs whose
    chunkers differ are matched by one chunk-independent criterion, as ``compare A B`` does
    (``matching``: ``fallback_anchor``…, ``note``: why)."""

    scores_a: pd.DataFrame
    scores_b: pd.DataFrame
    matching: str = "exact"
    note: str = ""


@dataclass
class Bisect:
    """The result: ``steps``, ``changes``, ``diffs``, ``flips`` (typed tables, see the module's
    column dicts) and ``info`` (metric, order, alpha, correction, the first-vs-last test, notes)."""

    steps: pd.DataFrame
    changes: pd.DataFrame
    diffs: pd.DataFrame
    flips: pd.DataFrame
    info: dict[str, Any]

    def to_tables(self) -> tuple[dict[str, pd.DataFrame], dict[str, Any]]:
        """The tables and info as the run store writes them."""
        tables = {"steps": self.steps, "changes": self.changes, "diffs": self.diffs, "flips": self.flips}
        return tables, dict(self.info)


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, Mapping | list | tuple):
        return json.dumps(value, sort_keys=True, default=str)
    return str(value)


def recorded_settings(info: Mapping[str, Any]) -> dict[str, str | None]:
    """The settings a run recorded (its ``run_metrics`` info), flat, as text: each version
    (``chunker_version``, ``embedding_model``, …, the keys a comparison shows side by side),
    ``pipeline_version``, every ``system.<key>`` the system reported (kind, mode, chunk_size, …;
    not its coverage counts or display identity), ``golden.name`` and ``golden.sha256``, and the
    scoring settings (``k``, ``mrr_cutoff``, ``match``, ``relevance_level``, ``scoring_version``,
    ``answers``). A key the run did not record is left out (an older run), not None."""
    out: dict[str, str | None] = {}
    for key, value in (info.get("versions") or {}).items():
        out[str(key)] = _text(value)
    if "pipeline_version" in info:
        out["pipeline_version"] = _text(info["pipeline_version"])
    for key, value in (info.get("system") or {}).items():
        if key not in _SYSTEM_SKIPS:
            out[f"system.{key}"] = _text(value)
    golden = info.get("golden") or {}
    for key in ("name", "sha256"):
        if key in golden:
            out[f"golden.{key}"] = _text(golden[key])
    for key in _SCORING_KEYS:
        if key in info:
            out[key] = _text(info[key])
    return out


def _field_order(name: str) -> tuple[int, int, str]:
    # the versions first (in the comparison's order), then the pipeline, the system, the rest
    if name in VERSION_KEYS:
        return (0, VERSION_KEYS.index(name), name)
    group = 1 if name == "pipeline_version" else 2 if name.startswith("system.") else 3
    return (group, 0, name)


def setting_diffs(a: Mapping[str, str | None], b: Mapping[str, str | None]) -> list[tuple[str, Any, Any]]:
    """``(field, value_a, value_b)`` for every field whose value differs between two runs' recorded
    settings (a field one run lacks counts as None), versions first. Empty when they agree."""
    names = sorted(set(a) | set(b), key=_field_order)
    return [(n, a.get(n), b.get(n)) for n in names if a.get(n) != b.get(n)]


def bisect_history(
    runs: Sequence[HistoryRun],
    metric: str,
    *,
    alpha: float = 0.05,
    adjust_by: str = "holm",
    tolerance: float = 0.0,
    seed: int = 0,
    n_resamples: int = 10_000,
    pairs: Mapping[int, PairScores] | None = None,
    overall: PairScores | None = None,
) -> Bisect:
    """Find the steps of ``runs`` (oldest first, ≥ 2, distinct ids) where ``metric`` changed.

    ``metric``: a catalogue metric with a per-query column and a paired test (``mrr``, ``hit@5``,
    ``ndcg@10``…) that every run's table has. ``alpha`` in (0, 1); ``adjust_by``: ``holm`` or
    ``bh`` over the steps; ``tolerance`` ≥ 0: a query flipped when its value moved by more;
    ``seed``/``n_resamples``: the paired tests' (as a comparison's). ``pairs[i]`` replaces the tables
    step ``i`` (0-based: runs[i] → runs[i+1]) compares, ``overall`` those of the first-vs-last test
    (runs matched across chunkers); otherwise each run's own ``scores``.

    Edge cases: a step with no paired query has null statistics, is not in the family and is not a
    change; its note says so. Two runs: one step, the first-vs-last test is that step. Raises
    ValueError on fewer than two runs, repeated ids, an unknown or untestable metric, a missing
    column, alpha outside (0, 1), an unknown correction or a negative tolerance (the stored-run
    layer turns bad input into InputError before calling this)."""
    ids = [r.run_id for r in runs]
    if len(ids) < 2 or len(set(ids)) != len(ids):
        raise ValueError(f"bisect needs two or more distinct runs, got {ids}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    if adjust_by not in ADJUSTMENTS:
        raise ValueError(f"unknown correction {adjust_by!r}; expected one of {ADJUSTMENTS}")
    if not tolerance >= 0.0:
        raise ValueError(f"tolerance must be ≥ 0, got {tolerance!r}")
    column = catalogue.metric_column(metric)
    if column is None or catalogue.test_kind(metric) is None:
        raise ValueError(f"metric {metric!r} has no paired per-query test")
    missing = [r.run_id for r in runs if column not in r.scores.columns]
    if missing:
        raise ValueError(f"runs without a {column!r} column: {', '.join(missing)}")
    pairs = dict(pairs or {})
    lower = catalogue.lower_is_better(metric)

    def tables(i: int) -> PairScores:
        return pairs.get(i) or PairScores(runs[i].scores, runs[i + 1].scores)

    tests = []
    for i in range(len(runs) - 1):
        p = tables(i)
        row = compare_query_scores(p.scores_a, p.scores_b, [metric], seed=seed, n_resamples=n_resamples)
        tests.append(row.iloc[0].to_dict() | {"matching": p.matching, "plan_note": p.note})
    raw = np.array([np.nan if pd.isna(t["p_value"]) else float(t["p_value"]) for t in tests])
    adjusted = adjust(raw, adjust_by)
    diffs_by_step = [setting_diffs(runs[i].settings, runs[i + 1].settings) for i in range(len(runs) - 1)]
    steps = pd.DataFrame(
        {
            "step": range(1, len(runs)),
            "run_a": ids[:-1],
            "run_b": ids[1:],
            "started_b": [r.started for r in runs[1:]],
            "n_paired": [t["n"] for t in tests],
            "mean_a": [t["mean_a"] for t in tests],
            "mean_b": [t["mean_b"] for t in tests],
            "delta": [t["delta"] for t in tests],
            "ci_low": [t["ci_low"] for t in tests],
            "ci_high": [t["ci_high"] for t in tests],
            "p_raw": raw,
            "p_adjusted": adjusted,
            "changed": np.nan_to_num(adjusted, nan=1.0) < alpha,
            "direction": _directions([t["delta"] for t in tests], lower),
            "test": [t["test"] for t in tests],
            "matching": [t["matching"] for t in tests],
            "changed_fields": [[f for f, _, _ in d] for d in diffs_by_step],
            "note": ["; ".join(x for x in (t["plan_note"], t["note"]) if x) for t in tests],
            "role_a": [r.role for r in runs[:-1]],
            "outcome_a": [r.outcome for r in runs[:-1]],
            "role_b": [r.role for r in runs[1:]],
            "outcome_b": [r.outcome for r in runs[1:]],
        }
    )
    steps = _typed(steps, STEP_COLUMNS)
    diffs = _typed(
        pd.DataFrame(
            [
                {
                    "step": i + 1,
                    "run_a": ids[i],
                    "run_b": ids[i + 1],
                    "field": f,
                    "value_a": va,
                    "value_b": vb,
                }
                for i, d in enumerate(diffs_by_step)
                for f, va, vb in d
            ],
            columns=list(DIFF_COLUMNS),
        ),
        DIFF_COLUMNS,
    )
    changed_steps = steps.index[steps["changed"].fillna(False).to_numpy(dtype=bool)].tolist()
    flip_frames = [
        _flips(tables(i), column, tolerance, lower).assign(step=i + 1, run_a=ids[i], run_b=ids[i + 1])
        for i in changed_steps
    ]
    flips = _typed(
        pd.concat(flip_frames, ignore_index=True)[list(FLIP_COLUMNS)]
        if flip_frames
        else pd.DataFrame(columns=list(FLIP_COLUMNS)),
        FLIP_COLUMNS,
    )
    changes = steps.loc[changed_steps, [c for c in CHANGE_COLUMNS if c in steps.columns]].copy()
    counts = flips.groupby("step")["flip"].value_counts().unstack(fill_value=0) if len(flips) else None

    def count(step: int, what: str | None) -> int:
        if counts is None or step not in counts.index:
            return 0
        return int(counts.loc[step].sum() if what is None else counts.loc[step].get(what, 0))

    changes["n_flipped"] = [count(s, None) for s in changes["step"]]
    changes["n_worse"] = [count(s, "worse") for s in changes["step"]]
    changes["n_better"] = [count(s, "better") for s in changes["step"]]
    changes["caution"] = [
        _caution(runs[s - 1], runs[s], d) for s, d in zip(changes["step"], changes["direction"], strict=True)
    ]
    changes = _typed(changes.reset_index(drop=True)[list(CHANGE_COLUMNS)], CHANGE_COLUMNS)

    first_last = overall or (tables(0) if len(runs) == 2 else PairScores(runs[0].scores, runs[-1].scores))
    whole = compare_query_scores(
        first_last.scores_a, first_last.scores_b, [metric], seed=seed, n_resamples=n_resamples
    ).iloc[0]
    p_whole = None if pd.isna(whole["p_value"]) else float(whole["p_value"])
    overall_info = {
        "run_a": ids[0],
        "run_b": ids[-1],
        "n_paired": None if pd.isna(whole["n"]) else int(whole["n"]),
        "delta": None if pd.isna(whole["delta"]) else float(whole["delta"]),
        "ci_low": None if pd.isna(whole["ci_low"]) else float(whole["ci_low"]),
        "ci_high": None if pd.isna(whole["ci_high"]) else float(whole["ci_high"]),
        "p_value": p_whole,
        "significant": p_whole is not None and p_whole < alpha,
        "direction": _directions([whole["delta"]], lower)[0],
        "test": None if pd.isna(whole["test"]) else str(whole["test"]),
        "matching": first_last.matching,
    }
    untested = [int(s) for s, n in zip(steps["step"], steps["n_paired"], strict=True) if pd.isna(n) or n == 0]
    info: dict[str, Any] = {
        "metric": metric,
        "column": column,
        "test_kind": catalogue.test_kind(metric),
        "higher_is_better": not lower,
        "runs": ids,
        "started": [r.started for r in runs],
        "roles": [r.role for r in runs],
        "outcomes": [r.outcome for r in runs],
        "failed": [list(r.failed) for r in runs],
        "alpha": alpha,
        "adjust": adjust_by,
        "tolerance": tolerance,
        "seed": seed,
        "resamples": n_resamples,
        "n_steps": len(steps),
        "n_tested": int(np.count_nonzero(~np.isnan(raw))),
        "n_changes": len(changes),
        "overall": overall_info,
        # every step too small to be a change, yet first and last differ: a slow drift
        "drift": bool(overall_info["significant"] and len(changes) == 0),
        "untested_steps": untested,
    }
    return Bisect(steps, changes, diffs, flips, info)


def _directions(deltas: Sequence[Any], lower_is_better: bool) -> list[str | None]:
    d = np.array([np.nan if pd.isna(x) else float(x) for x in deltas], dtype=float)
    better = -d if lower_is_better else d
    out = np.select([np.isnan(d), better > _EPS, better < -_EPS], [None, "better", "worse"], default="same")
    return [None if x is None else str(x) for x in out]


def _flips(pair: PairScores, column: str, tolerance: float, lower_is_better: bool) -> pd.DataFrame:
    """The paired queries of one step whose ``column`` moved by more than ``tolerance``: worst first
    (the largest loss in the metric's sense), then the largest gains last, query id breaking ties."""
    a = pair.scores_a[["query_id", column]].astype({"query_id": "string"})
    b = pair.scores_b[["query_id", column]].astype({"query_id": "string"})
    both = a.merge(b, on="query_id", suffixes=("_a", "_b"))
    va = float_column(both, f"{column}_a")
    vb = float_column(both, f"{column}_b")
    d = vb - va
    moved = ~np.isnan(d) & (np.abs(d) > tolerance + _EPS)
    gain = (-d if lower_is_better else d)[moved]
    out = pd.DataFrame(
        {
            "query_id": both["query_id"].to_numpy()[moved],
            "value_a": va[moved],
            "value_b": vb[moved],
            "delta": d[moved],
            "flip": np.where(gain > 0, "better", "worse"),
            "_gain": gain,
        }
    )
    return out.sort_values(["_gain", "query_id"], kind="stable").drop(columns="_gain").reset_index(drop=True)


def _typed(frame: pd.DataFrame, columns: dict[str, str]) -> pd.DataFrame:
    out = frame.copy()
    for name, dtype in columns.items():
        if dtype == "object":
            out[name] = out[name].astype(object)
        elif dtype == "float64":
            out[name] = pd.to_numeric(out[name], errors="coerce").astype("float64")
        else:
            out[name] = out[name].astype(dtype)
    return out[list(columns)]
