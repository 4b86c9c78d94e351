"""Gates that know their own resolution: a regression bound finer than the golden set can resolve.

A ``max_drop: 0.001`` gate on MRR over 92 queries passes or fails on noise: the paired delta of two
runs of one system moves by several hundredths from one run to the next. Before the gates decide,
each ``max_drop``, ``non_inferior`` and ``equivalent`` bound is held against the change the golden
set can resolve, estimated from the **baseline's variance** — the standard deviation σ of its
per-query scores, taken as the standard deviation of a paired difference (two configurations of
one system correlating at 0.5: ``Var(b − a) = 2σ²(1 − ρ) = σ²``; :mod:`..compare.sizing` says the
same), over the baseline's ``n`` queries:

- the **resolvable change** at 80% power (:func:`..compare.power.minimum_detectable_effect`): at the
  comparison's ``alpha`` two-sided for ``max_drop`` (the report's MDE), one-sided (``2·alpha``
  two-sided) for the margins;
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

__all__ = ["ResolutionFlag", "resolution_flags"]

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

    def as_dict(self) -> dict:
        return asdict(self)


def resolution_flags(
    regression_gates: Mapping,
    baseline_scores: pd.DataFrame,
    alpha: float,
    power: float = DEFAULT_POWER,
    baseline_repeats: Mapping | None = None,
) -> list[ResolutionFlag]:
    """A :class:`ResolutionFlag` for each ``max_drop``/``non_inferior``/``equivalent`` bound of
    ``regression_gates`` (metric → :class:`~.settings.RegressionGateSettings`) below the change the
    baseline's per-query scores (``baseline_scores``: its ``query_scores``) resolve — see the module
    doc. Metrics that are not per-query means, or with fewer than 2 scored queries or no spread in
    the baseline, are not flagged (nothing to estimate from). ``baseline_repeats``: the baseline's
    ``info["repeats"]`` when it was asked more than once."""
    from scipy.special import ndtri

    flags = []
    for metric, gate in regression_gates.items():
        column = catalogue.metric_column(metric)
        if column is None or column not in baseline_scores.columns:
            continue
        values = float_column(baseline_scores, column)
        values = values[~np.isnan(values)]
        n = int(values.size)
        sd = float(np.std(values, ddof=1)) if n >= 2 else 0.0
        if not sd > 0:
            continue
        for kind in _BOUNDS:
            threshold = getattr(gate, kind)
            if threshold is None:
                continue
            level = alpha if kind == "max_drop" else min(2 * alpha, 0.99)
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
                f"a change of ±{resolvable:.4f} is what the test finds 4 times in 5 (from the "
                f"baseline's variance, sd {sd:.4f}), so the gate decides on noise; {need}"
            )
            flags.append(
                ResolutionFlag(metric, kind, float(threshold), n, resolvable, queries, repeats, text)
            )
    return flags
