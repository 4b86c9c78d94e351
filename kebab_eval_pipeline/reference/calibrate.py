"""Calibrating the answerer's refusal gate on a golden set that has unanswerable questions.

The gate (:class:`~.answer.ExtractiveAnswerer`) refuses when a coverage feature of the retrieved
passages falls below a threshold. Which feature and which threshold are empirical questions:
too low and the system answers what the corpus cannot support (under-refusal), too high and it
declines questions it could answer (over-refusal). This module measures the trade-off:

1. :func:`gate_observations` — retrieve once per golden query and record every gate feature
   (the gate's decision for any threshold follows from these numbers alone);
2. :func:`refusal_curve` — for each feature and each threshold on a grid, the over-refusal rate,
   under-refusal rate and refusal correctness that threshold would give;
3. :func:`choose_gate` — the feature and threshold with the lowest over-refusal among those whose
   refusal correctness reaches a target, or the best trade-off when none does, saying which.

Rates follow the answer metrics' definitions: over-refusal is the share of answerable queries
refused, under-refusal the share of unanswerable ones answered, refusal correctness the share of
unanswerable ones refused (= 1 − under-refusal). An empty denominator gives null (NaN).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from kebab_eval_pipeline.reference.answer import GATE_FEATURES
from kebab_eval_pipeline.reference.fusion import FusionSpec
from kebab_eval_pipeline.reference.index import ReferenceIndex

#: Thresholds swept: 0.00, 0.01, …, 1.00.
THRESHOLDS = np.round(np.linspace(0.0, 1.0, 101), 2)

CURVE_COLUMNS = (
    "feature",
    "threshold",
    "over_refusal_rate",
    "under_refusal_rate",
    "refusal_correctness",
    "answerable_refused",
    "unanswerable_answered",
    "n_answerable",
    "n_unanswerable",
)


def gate_observations(
    index: ReferenceIndex,
    queries: pd.DataFrame,
    mode: str = "lexical",
    k: int = 5,
    fusion: FusionSpec | None = None,
) -> pd.DataFrame:
    """Every gate feature of every query, from one retrieval each.

    Inputs: the index; ``queries`` with columns ``query_id``, ``query``, ``answerable`` (and
    ``lang`` when known); the retrieval ``mode`` (and ``fusion`` for hybrid) the system runs
    with; ``k`` hits retrieved (the gate reads at most the top three).

    Output: one row per query — ``query_id``, ``lang``, ``answerable`` and one float column per
    feature in :data:`~.answer.GATE_FEATURES`. NaN where the gate refuses whatever the threshold
    (no hits, or a query with no content words).
    """
    answerer = index.answerer()
    rows = []
    for query_id, text, answerable, lang in zip(
        queries["query_id"],
        queries["query"],
        queries["answerable"],
        queries["lang"] if "lang" in queries else [None] * len(queries),
        strict=True,
    ):
        hits = index.search(str(text), k=k, mode=mode, fusion=fusion)
        features = answerer.gate_features(str(text), index.evidence(hits)) or {}
        rows.append(
            {
                "query_id": str(query_id),
                "lang": lang,
                "answerable": bool(answerable),
                **{name: features.get(name, np.nan) for name in GATE_FEATURES},
            }
        )
    columns = ["query_id", "lang", "answerable", *GATE_FEATURES]
    return pd.DataFrame(rows, columns=columns).astype({name: "float64" for name in GATE_FEATURES})


def refusal_curve(observations: pd.DataFrame, thresholds: np.ndarray = THRESHOLDS) -> pd.DataFrame:
    """The refusal rates each feature and threshold would give (:data:`CURVE_COLUMNS`).

    A query is refused at threshold ``t`` when its feature is below ``t`` or NaN (the gate
    refuses it anyway). One row per (feature, threshold), features in :data:`GATE_FEATURES`
    order, thresholds ascending; rates over an empty denominator are NaN.
    """
    answerable = observations["answerable"].to_numpy(dtype=bool)
    n_answerable, n_unanswerable = int(answerable.sum()), int((~answerable).sum())
    frames = []
    for feature in GATE_FEATURES:
        values = observations[feature].to_numpy(dtype=np.float64)
        # refused[i, j]: query i refused at threshold j (NaN compares False, hence the isnan)
        refused = np.isnan(values)[:, None] | (values[:, None] < thresholds[None, :])
        answerable_refused = refused[answerable].sum(axis=0)
        unanswerable_answered = (~refused[~answerable]).sum(axis=0)
        over = answerable_refused / n_answerable if n_answerable else np.full(thresholds.size, np.nan)
        under = unanswerable_answered / n_unanswerable if n_unanswerable else np.full(thresholds.size, np.nan)
        frames.append(
            pd.DataFrame(
                {
                    "feature": feature,
                    "threshold": thresholds,
                    "over_refusal_rate": over,
                    "under_refusal_rate": under,
                    "refusal_correctness": 1.0 - under,
                    "answerable_refused": answerable_refused.astype(np.int64),
                    "unanswerable_answered": unanswerable_answered.astype(np.int64),
                    "n_answerable": n_answerable,
                    "n_unanswerable": n_unanswerable,
                }
            )
        )
    return pd.concat(frames, ignore_index=True)[list(CURVE_COLUMNS)]


@dataclass(frozen=True)
class GateChoice:
    """The chosen gate: its feature and threshold, the rates it gives, and whether it meets the targets."""

    feature: str
    threshold: float
    over_refusal_rate: float
    under_refusal_rate: float
    refusal_correctness: float
    meets_targets: bool
    reason: str

    def as_dict(self) -> dict:
        """Plain values (JSON-ready)."""
        return {
            "feature": self.feature,
            "threshold": self.threshold,
            "over_refusal_rate": _or_none(self.over_refusal_rate),
            "under_refusal_rate": _or_none(self.under_refusal_rate),
            "refusal_correctness": _or_none(self.refusal_correctness),
            "meets_targets": self.meets_targets,
            "reason": self.reason,
        }


def choose_gate(
    curve: pd.DataFrame, min_refusal_correctness: float = 0.9, max_over_refusal: float = 0.15
) -> GateChoice:
    """The gate to ship, read off :func:`refusal_curve`.

    Rule: among (feature, threshold) rows whose refusal correctness is ≥
    ``min_refusal_correctness``, the lowest over-refusal wins; ties go to the feature listed
    first in :data:`GATE_FEATURES` (the simplest), and within it to the middle of the run of
    thresholds that give the same rates — the point farthest from where either rate changes on
    this set. ``meets_targets`` says whether that over-refusal is also ≤ ``max_over_refusal``.
    When no row reaches the refusal-correctness target, the rows with the highest refusal
    correctness are used instead, the reason says so and ``meets_targets`` is False.

    Edge cases: a curve with no unanswerable queries (refusal correctness all NaN) or no
    answerable ones raises ``ValueError``: there is no trade-off to calibrate.
    """
    if curve.empty or curve["n_unanswerable"].iloc[0] == 0 or curve["n_answerable"].iloc[0] == 0:
        raise ValueError(
            "calibrating the refusal gate needs answerable and unanswerable queries "
            "(mark questions the corpus cannot answer with answerable: false)"
        )
    feasible = curve[curve["refusal_correctness"] >= min_refusal_correctness - 1e-12]
    if feasible.empty:
        best_rc = curve["refusal_correctness"].max()
        feasible = curve[curve["refusal_correctness"] >= best_rc - 1e-12]
        note = (
            f"no threshold reaches refusal correctness {min_refusal_correctness:g}; "
            f"the highest reached is {best_rc:.3f}"
        )
    else:
        note = ""
    lowest = feasible["over_refusal_rate"].min()
    best = feasible[feasible["over_refusal_rate"] <= lowest + 1e-12]
    feature = next(f for f in GATE_FEATURES if f in set(best["feature"]))
    rows = best[best["feature"] == feature].sort_values("threshold")
    # the widest run of consecutive thresholds (same rates), then its middle
    thresholds = rows["threshold"].to_numpy()
    breaks = np.flatnonzero(np.diff(np.round(thresholds * 100).astype(int)) != 1) + 1
    runs = np.split(np.arange(thresholds.size), breaks)
    widest = max(runs, key=len)
    row = rows.iloc[widest[len(widest) // 2]]
    meets = not note and float(row["over_refusal_rate"]) <= max_over_refusal + 1e-12
    if not note:
        note = f"lowest over-refusal with refusal correctness >= {min_refusal_correctness:g}" + (
            "" if meets else f"; over-refusal is above the {max_over_refusal:g} target"
        )
    return GateChoice(
        feature=feature,
        threshold=float(row["threshold"]),
        over_refusal_rate=float(row["over_refusal_rate"]),
        under_refusal_rate=float(row["under_refusal_rate"]),
        refusal_correctness=float(row["refusal_correctness"]),
        meets_targets=bool(meets),
        reason=note,
    )


def _or_none(value: float) -> float | None:
    return None if value != value else value  # NaN → null
