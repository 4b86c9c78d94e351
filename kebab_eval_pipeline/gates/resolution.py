"""Gates that know their own resolution: a regression bound finer than the golden set can resolve.

A ``max_drop: 0.001`` gate on MRR over 92 queries passes or fails on noise: the paired delta of two
runs of one system moves by several hundredths from one run to the next. Before the gates decide,
each ``max_drop``, ``non_inferior`` and ``equivalent`` bound is held against the change the golden
set can resolve, from the standard deviation of a paired per-query difference over ``n`` queries
(:func:`variance_estimates`), the best estimate at hand:

- **paired**: the differences themselves — of the comparison being made (``scores_b`` given), or
  before a run, of the baseline's own stored comparison with its baseline;
- **the baseline's variance** otherwise: the standard deviation σ of its per-query scores, taken as
  that of a paired difference (two configurations of one system correlating at 0.5:
  ``Var(b − a) = 2σ²(1 − ρ) = σ²``; :mod:`..compare.sizing` says the same) — pessimistic when the
  runs correlate more, as runs of one system usually do;

and then:

- the **resolvable change** at 80% power (:func:`..compare.power.minimum_detectable_effect`): for
  ``max_drop`` two-sided at ``alpha`` over the number of gated metrics (the Holm family: the level
  of the report's MDE column for a gated metric), for the margins one-sided at ``alpha`` (``2·alpha``
  two-sided; several margins need no correction);
- a bound below it is flagged, naming the queries the bound would need
  (:func:`..compare.power.queries_needed`) and — for a baseline asked more than once, whose
  headline is a mean over repeats — the repeats that would bring the noise of that mean under the
  bound: ``⌈2·((z(1 − α/2) + z(power))·s_r/δ)²⌉`` for per-repeat standard deviation ``s_r``;
- ``max_drop: 0`` (the default bound: "any drop fails") is flagged as unresolvable by any number
  of queries: between two runs of a system that is not deterministic, some metric drops.

A flag is a warning (the report's warnings, and the gate's reason); with
``compare.strict_resolution: true`` it is an error naming each bound (exit 2 from the CLI).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from kebab_eval_pipeline.compare.power import DEFAULT_POWER, minimum_detectable_effect, queries_needed
from kebab_eval_pipeline.metrics import catalogue
from kebab_eval_pipeline.metrics.columns import float_column

__all__ = ["ResolutionFlag", "resolution_flags", "variance_estimates"]

#: Bounds whose threshold is a change of the metric, in the order a gate checks them.
_BOUNDS = ("max_drop", "non_inferior", "equivalent")


@dataclass(frozen=True)
class ResolutionFlag:
    """One bound below what the golden set resolves. ``queries`` is None when no number of
    queries suffices (a bound of 0); ``repeats`` only for a repeated baseline."""

    metric: str
    kind: str
    threshold: float
    n: int
    resolvable: float
    queries: int | None
    repeats: int | None
    text: str
    source: str = ""  # where the standard deviation came from

    def as_dict(self) -> dict:
        return asdict(self)


#: Where a standard deviation came from, as the flags say it.
PAIRED = "the paired differences of this comparison"
STORED_PAIRED = "the paired differences of the baseline's own last comparison"
BASELINE = "the baseline's per-query variance, two runs correlating at 0.5 assumed"


def variance_estimates(
    metrics, baseline_scores: pd.DataFrame, scores_b: pd.DataFrame | None = None, stored_per_metric=None
) -> dict[str, tuple[float, int, str]]:
    """metric → ``(sd, n, source)``: the standard deviation of a paired per-query difference over
    ``n`` queries, and where it came from (module doc): the differences of ``scores_b`` against the
    baseline's ``query_scores`` over the queries both scored; else the baseline's stored
    comparison's per-metric table (``paired_se``·√``n_paired``); else the baseline's own
    per-query standard deviation. A metric with nothing to estimate from is left out."""
    out: dict[str, tuple[float, int, str]] = {}
    stored = None
    if stored_per_metric is not None and "paired_se" in stored_per_metric.columns:
        stored = stored_per_metric.set_index("metric")
    for metric in metrics:
        column = catalogue.metric_column(metric)
        if column is None or column not in baseline_scores.columns:
            continue
        base = pd.Series(float_column(baseline_scores, column), index=baseline_scores["query_id"].astype(str))
        if scores_b is not None and column in scores_b.columns:
            cand = pd.Series(float_column(scores_b, column), index=scores_b["query_id"].astype(str))
            d = (cand - base.reindex(cand.index)).dropna().to_numpy()
            estimate = (float(np.std(d, ddof=1)) if d.size >= 2 else 0.0, int(d.size), PAIRED)
        elif stored is not None and metric in stored.index and not pd.isna(stored.loc[metric, "paired_se"]):
            n = int(stored.loc[metric, "n_paired"])
            estimate = (float(stored.loc[metric, "paired_se"]) * math.sqrt(n), n, STORED_PAIRED)
        else:
            values = base.dropna().to_numpy()
            estimate = (
                float(np.std(values, ddof=1)) if values.size >= 2 else 0.0,
                int(values.size),
                BASELINE,
            )
        if estimate[0] > 0 and estimate[1] >= 2:
            out[metric] = estimate
    return out


def resolution_flags(
    regression_gates: Mapping,
    estimates: Mapping[str, tuple[float, int, str]],
    alpha: float,
    power: float = DEFAULT_POWER,
    baseline_repeats: Mapping | None = None,
) -> list[ResolutionFlag]:
    """A :class:`ResolutionFlag` for each ``max_drop``/``non_inferior``/``equivalent`` bound of
    ``regression_gates`` (metric → :class:`~.settings.RegressionGateSettings`) below the change
    resolvable with ``estimates`` (:func:`variance_estimates`) — see the module doc. A metric
    without an estimate is not flagged (nothing to estimate from). ``baseline_repeats``: the
    baseline's ``info["repeats"]`` when it was asked more than once."""
    from scipy.special import ndtri

    flags = []
    family = max(1, len(regression_gates))
    for metric, gate in regression_gates.items():
        if metric not in estimates:
            continue
        sd, n, source = estimates[metric]
        for kind in _BOUNDS:
            threshold = getattr(gate, kind)
            if threshold is None:
                continue
            level = alpha / family if kind == "max_drop" else min(2 * alpha, 0.99)
            resolvable = float(minimum_detectable_effect(sd, n, level, power))
            if threshold >= resolvable:
                continue
            queries = queries_needed(sd, threshold, level, power) if threshold > 0 else None
            repeats = None
            floor = ((baseline_repeats or {}).get("noise_floor") or {}).get(metric) or {}
            if threshold > 0 and floor.get("std"):
                z = float(ndtri(1 - level / 2) + ndtri(power))
                repeats = math.ceil(2 * (z * float(floor["std"]) / threshold) ** 2)
            need = (
                "no number of queries resolves a bound of 0 (any drop fails, and noise drops)"
                if queries is None
                else f"it would need about {queries:,} queries"
                + (f" (or {repeats:,} repeats of a system this noisy)" if repeats else "")
            )
            text = (
                f"gates.regression.{metric}.{kind} {threshold:g} is finer than {n} queries resolve: "
                f"a change of ±{resolvable:.4f} is what the test finds 4 times in 5 (sd {sd:.4f}, from "
                f"{source}), so the gate decides on noise; {need}"
            )
            flags.append(
                ResolutionFlag(metric, kind, float(threshold), n, resolvable, queries, repeats, text, source)
            )
    return flags
