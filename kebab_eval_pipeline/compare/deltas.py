"""Metric deltas between two runs: per metric (with the paired test) and per breakdown slice.

``delta`` is always b − a of the stored (4-decimal) aggregates, the numbers the reports show;
``paired_delta`` is the unrounded mean difference over the queries both runs scored, the number
the test and its CI are about. ``leaning`` reads the delta with the metric's sense (a rise of an
error rate is ``worse``); ``significance`` marks the paired p-value: ``*`` < 0.05, ``**`` < 0.01,
``***`` < 0.001; ``direction`` is the leaning only where the row is marked significant (``same``
for no change, null otherwise): a report says "better" or "worse" only where the test does.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from kebab_eval_pipeline.compare.margins import t_bounds
from kebab_eval_pipeline.compare.paired_score import score_bounds
from kebab_eval_pipeline.compare.power import RESOLUTION_COLUMNS
from kebab_eval_pipeline.compare.significance import compare_query_scores
from kebab_eval_pipeline.metrics import catalogue

#: Columns of the per-metric table before the paired test.
DELTA_COLUMNS: dict[str, str] = {
    "metric": "string",
    "a": "float64",
    "b": "float64",
    "delta": "float64",
    "rel_change": "float64",
}
#: Paired-test columns added to the per-metric table (null where a metric has no per-query test).
PAIRED_COLUMNS: dict[str, str] = {
    "n_paired": "Int64",
    "paired_delta": "float64",
    "p_value": "float64",
    "ci_low": "float64",
    "ci_high": "float64",
    "paired_se": "float64",
    "gain_sum": "float64",
    "loss_sum": "float64",
    "square_sum": "float64",
    "bound_low": "float64",
    "bound_high": "float64",
    "test": "string",
    "test_note": "string",
}
#: Adjusted p-values (:mod:`.families`): Holm over the gated metrics, BH over metrics × slices.
ADJUSTED_COLUMNS: dict[str, str] = {
    "p_holm": "float64",
    "p_bh": "float64",
    "p_adjusted": "float64",
    "adjusted_by": "string",
}
#: Reading aids added last.
MARK_COLUMNS: dict[str, str] = {"significance": "string", "direction": "string", "leaning": "string"}
#: p-value thresholds of the significance marks, strictest first.
SIGNIFICANCE_MARKS: tuple[tuple[float, str], ...] = ((0.001, "***"), (0.01, "**"), (0.05, "*"))

SLICE_COLUMNS: dict[str, str] = {
    "dimension": "string",
    "value": "string",
    "metric": "string",
    "a": "float64",
    "b": "float64",
    "delta": "float64",
    "n_a": "Int64",
    "n_b": "Int64",
}
#: Per-slice paired test (:mod:`.slice_tests`) and its BH-adjusted p and mark (:mod:`.families`).
SLICE_TEST_COLUMNS: dict[str, str] = {"n_paired": "Int64", "paired_delta": "float64", "p_value": "float64"}
SLICE_ADJUSTED_COLUMNS: dict[str, str] = {"p_bh": "float64", "significance": "string"}


def metric_table(a: dict[str, float | None], b: dict[str, float | None]) -> pd.DataFrame:
    """:data:`DELTA_COLUMNS` for every metric of either run (b's order first). ``delta`` and
    ``rel_change`` (delta / |a|) are null when either side is null; ``rel_change`` also when a = 0."""
    names = [n for n in b if n in a] + [n for n in b if n not in a] + [n for n in a if n not in b]
    va = np.array([np.nan if a.get(n) is None else a[n] for n in names], dtype=float)
    vb = np.array([np.nan if b.get(n) is None else b[n] for n in names], dtype=float)
    delta = np.round(vb - va, 4)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(va != 0, np.round((vb - va) / np.abs(va), 4), np.nan)
    return pd.DataFrame({"metric": names, "a": va, "b": vb, "delta": delta, "rel_change": rel}).astype(
        DELTA_COLUMNS
    )


def with_paired_tests(
    per_metric: pd.DataFrame,
    scores_a: pd.DataFrame,
    scores_b: pd.DataFrame,
    seed: int = 0,
    n_resamples: int = 10_000,
    min_queries: int | None = None,
    alpha: float = 0.05,
) -> pd.DataFrame:
    """``per_metric`` plus :data:`PAIRED_COLUMNS` and :data:`MARK_COLUMNS`.

    For each metric that is a mean of per-query scores, the paired test over the queries both runs
    scored (see :mod:`.significance`). ``bound_low``/``bound_high`` are the one-sided ``1 − alpha``
    score bounds of the mean difference (:func:`.paired_score.score_bounds`, from ``n`` and the
    sums ``gain_sum``/``loss_sum``/``square_sum``: what non-inferiority and equivalence are decided
    by); paired-t bounds (:func:`.margins.t_bounds`) only where a score lies outside [0, 1].
    Rounded to 4 decimals (p-values, the standard error, the sums and the bounds unrounded). When
    ``min_queries`` is given, a test over fewer (but some) pairs says so at the start of its
    ``test_note``. The marks here read raw p; :func:`.families.with_adjusted_p` replaces them."""
    tests = compare_query_scores(
        scores_a, scores_b, per_metric["metric"].tolist(), seed=seed, n_resamples=n_resamples
    ).set_index("metric")
    if len(tests):
        column = {
            c: tests[c].to_numpy(dtype=float, na_value=np.nan)
            for c in ("delta", "se", "gain_sum", "loss_sum", "square_sum")
        }
        n = tests["n"].to_numpy(dtype=float, na_value=np.nan)
        score_low, score_high = score_bounds(
            n, column["gain_sum"], column["loss_sum"], column["square_sum"], alpha
        )
        t_low, t_high = t_bounds(column["delta"], column["se"], n, alpha)
        # A score outside [0, 1] has no sums: the t bound is all that is left.
        scored = ~np.isnan(column["gain_sum"])
        tests["bound_low"] = np.where(scored, score_low, t_low)
        tests["bound_high"] = np.where(scored, score_high, t_high)
    out = per_metric.copy()
    source = {
        "n_paired": "n",
        "paired_delta": "delta",
        "p_value": "p_value",
        "ci_low": "ci_low",
        "ci_high": "ci_high",
        "paired_se": "se",
        "gain_sum": "gain_sum",
        "loss_sum": "loss_sum",
        "square_sum": "square_sum",
        "bound_low": "bound_low",
        "bound_high": "bound_high",
        "test": "test",
        "test_note": "note",
    }
    for column, dtype in PAIRED_COLUMNS.items():
        values = out["metric"].map(tests[source[column]]) if len(tests) else pd.Series(pd.NA, index=out.index)
        if dtype == "float64":
            values = pd.to_numeric(values, errors="coerce").astype("float64")
            # p-values keep full precision: rounding would print a tiny exact p as 0; the bounds and
            # their standard error too, so a margin decision is exactly re-derivable.
            exact = column in (
                "p_value",
                "paired_se",
                "gain_sum",
                "loss_sum",
                "square_sum",
                "bound_low",
                "bound_high",
            )
            values = values if exact else values.round(4)
        out[column] = values.astype(dtype)
    if min_queries is not None:
        few = (out["n_paired"].fillna(0) > 0) & (out["n_paired"].fillna(0) < min_queries)
        prefix = (
            "only " + out["n_paired"].astype("string") + f" paired queries (< min_queries {min_queries}): "
        )
        out.loc[few, "test_note"] = (prefix + out["test_note"].fillna(""))[few]
    out["significance"] = significance_marks(out["p_value"])
    out["leaning"] = directions(out["metric"], out["delta"])
    out["direction"] = significant_directions(out["leaning"], out["significance"])
    return out.astype({**PAIRED_COLUMNS, **MARK_COLUMNS})


def without_tests(per_metric: pd.DataFrame) -> pd.DataFrame:
    """``per_metric`` with :data:`PAIRED_COLUMNS`, :data:`ADJUSTED_COLUMNS`, :data:`MARK_COLUMNS`
    and the minimum detectable effect (:data:`.power.RESOLUTION_COLUMNS`) all null (no baseline:
    the table keeps one shape whatever the comparison)."""
    return _null_columns(
        per_metric, {**PAIRED_COLUMNS, **ADJUSTED_COLUMNS, **MARK_COLUMNS, **RESOLUTION_COLUMNS}
    )


def without_slice_tests(per_slice: pd.DataFrame) -> pd.DataFrame:
    """``per_slice`` with :data:`SLICE_TEST_COLUMNS` and :data:`SLICE_ADJUSTED_COLUMNS` all null
    (no baseline, or ``compare.slice_tests`` off)."""
    return _null_columns(per_slice, {**SLICE_TEST_COLUMNS, **SLICE_ADJUSTED_COLUMNS})


def _null_columns(frame: pd.DataFrame, columns: dict[str, str]) -> pd.DataFrame:
    out = frame.copy()
    for column, dtype in columns.items():
        out[column] = pd.Series(pd.NA if dtype != "float64" else np.nan, index=out.index).astype(dtype)
    return out


def significance_marks(p_values: pd.Series) -> pd.Series:
    """``***`` / ``**`` / ``*`` by :data:`SIGNIFICANCE_MARKS`; ``""`` for larger or null p."""
    p = p_values.to_numpy(dtype=float, na_value=np.nan)
    conditions = [p < threshold for threshold, _ in SIGNIFICANCE_MARKS]
    marks = np.select(conditions, [mark for _, mark in SIGNIFICANCE_MARKS], default="")
    return pd.Series(marks, index=p_values.index, dtype="string")


def directions(metrics: pd.Series, deltas: pd.Series) -> pd.Series:
    """``better`` / ``worse`` / ``same`` for each (metric, b − a); null when the delta is null or
    the metric is a size (the catalogue's direction ``none``)."""
    d = deltas.to_numpy(dtype=float, na_value=np.nan)
    sizes = metrics.map(lambda m: catalogue.direction(m) == "none").to_numpy(dtype=bool)
    d = np.where(sizes, np.nan, d)
    sign = np.where(metrics.map(catalogue.lower_is_better).to_numpy(dtype=bool), -1.0, 1.0)
    better = sign * d
    out = np.select([np.isnan(d), better > 0, better < 0], [None, "better", "worse"], default="same")
    return pd.Series(out, index=metrics.index, dtype="string")


def significant_directions(leaning: pd.Series, significance: pd.Series) -> pd.Series:
    """``direction``: the ``leaning`` (better/worse) where ``significance`` marks the row, ``same``
    where the delta is 0, null otherwise (not significant, or no test)."""
    marked = significance.fillna("").astype(str).to_numpy() != ""
    lean = leaning.astype("string")
    out = lean.where(pd.Series(marked, index=lean.index) | (lean == "same").fillna(False), pd.NA)
    return out.astype("string")


def slice_deltas(breakdowns_a: pd.DataFrame | None, breakdowns_b: pd.DataFrame | None) -> pd.DataFrame:
    """Per breakdown slice and metric: a, b, delta (b − a, null when either is null) and each
    run's denominator — :data:`SLICE_COLUMNS`, for the slice metrics either run has a value for."""
    keys = ["dimension", "value", "metric"]
    columns = [*keys, "score", "n"]
    empty = pd.DataFrame(columns=columns)
    ba = breakdowns_a if breakdowns_a is not None and len(breakdowns_a) else empty
    bb = breakdowns_b if breakdowns_b is not None and len(breakdowns_b) else empty
    m = ba[columns].merge(bb[columns], on=keys, how="outer", suffixes=("_a", "_b"))
    a = pd.to_numeric(m["score_a"], errors="coerce").astype("float64")
    b = pd.to_numeric(m["score_b"], errors="coerce").astype("float64")
    out = pd.DataFrame(
        {
            "dimension": m["dimension"],
            "value": m["value"],
            "metric": m["metric"],
            "a": a,
            "b": b,
            "delta": (b - a).round(4),
            "n_a": pd.to_numeric(m["n_a"], errors="coerce"),
            "n_b": pd.to_numeric(m["n_b"], errors="coerce"),
        }
    ).astype(SLICE_COLUMNS)
    # A slice metric null in both runs (e.g. answer metrics of a slice without answers) says nothing.
    out = out[out["a"].notna() | out["b"].notna()]
    return out.sort_values(keys, kind="stable").reset_index(drop=True)
