"""The comparison's two tables of numbers — per metric and per breakdown slice — with their paired
tests and adjusted p-values, from both runs' per-query scores, metrics and breakdowns.

One pure function, so the comparison, the null simulations of the tests and the benchmarks all run
exactly the same sequence: deltas → paired tests (and one-sided bounds) → per-slice tests → Holm/BH
→ minimum detectable effects.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from kebab_eval_pipeline.compare.deltas import (
    metric_table,
    slice_deltas,
    with_paired_tests,
    without_slice_tests,
)
from kebab_eval_pipeline.compare.families import with_adjusted_p
from kebab_eval_pipeline.compare.power import with_detectable_effects
from kebab_eval_pipeline.compare.settings import CompareSettings
from kebab_eval_pipeline.compare.slice_tests import with_slice_tests

__all__ = ["comparison_tables"]


def comparison_tables(
    scores_a: pd.DataFrame,
    scores_b: pd.DataFrame,
    metrics_a: Mapping[str, float | None],
    metrics_b: Mapping[str, float | None],
    breakdowns_a: pd.DataFrame | None,
    breakdowns_b: pd.DataFrame | None,
    options: CompareSettings | None = None,
    gated: Sequence[str] = (),
) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """``(per_metric, per_slice, families)`` of a comparison of b against a.

    Inputs: both runs' ``query_scores`` (unique ``query_id``), aggregate metrics and breakdowns
    (``None`` = none), the comparison settings (seed, resamples, alpha, min_queries, slice tests,
    which p the marks read) and the gated metric names (the Holm family; empty ⇒ the headline
    metrics). Output: the per-metric table (:mod:`.deltas` columns: deltas, paired test, bounds,
    adjusted p, marks; :mod:`.power`'s minimum detectable effect), the per-slice table (deltas,
    slice tests, BH p, marks) and the families' description (:func:`.families.with_adjusted_p`)."""
    options = options or CompareSettings()
    per_metric = with_paired_tests(
        metric_table(dict(metrics_a), dict(metrics_b)),
        scores_a,
        scores_b,
        seed=options.seed,
        n_resamples=options.resamples,
        min_queries=options.min_queries,
        alpha=options.alpha,
    )
    per_slice = slice_deltas(breakdowns_a, breakdowns_b)
    if options.slice_tests:
        per_slice = with_slice_tests(
            per_slice,
            scores_a,
            scores_b,
            seed=options.seed,
            n_resamples=options.resamples,
            min_queries=options.slice_min_queries,
        )
    else:
        per_slice = without_slice_tests(per_slice)
    per_metric, per_slice, families = with_adjusted_p(per_metric, per_slice, gated, options.significance)
    return with_detectable_effects(per_metric, families, options.alpha), per_slice, families
