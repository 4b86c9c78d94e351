"""Which tests of a comparison form which family, and their adjusted p-values and marks.

A comparison runs one paired test per metric and per breakdown slice × metric. Two families:

- **gated** — the metrics the run's regression gates name (or, with no regression gate, the
  headline metrics): Holm, so the chance that *any* of them is flagged by chance stays ≤ α. A
  ``max_p`` gate reads this p.
- **table** — every test the report shows, metrics × slices: Benjamini–Hochberg, so among the
  flagged rows the expected share of false alarms stays ≤ α.

A metric row's ``p_adjusted`` is its Holm p when it is gated, else its BH p; a slice row's is its
BH p. The significance marks (``*`` < 0.05 …) read ``p_adjusted`` unless ``compare.significance``
is ``raw``. Raw p-values are always kept beside the adjusted ones.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from kebab_eval_pipeline.compare.deltas import (
    ADJUSTED_COLUMNS,
    SLICE_ADJUSTED_COLUMNS,
    significance_marks,
    significant_directions,
)
from kebab_eval_pipeline.compare.multiple_testing import bh, holm
from kebab_eval_pipeline.metrics import catalogue

__all__ = ["ADJUSTED_COLUMNS", "SLICE_ADJUSTED_COLUMNS", "with_adjusted_p"]


def with_adjusted_p(
    per_metric: pd.DataFrame,
    per_slice: pd.DataFrame,
    gated: Sequence[str] = (),
    significance: str = "adjusted",
    ks: Sequence[int] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """Adjust the comparison's p-values per family (module doc) and re-mark significance.

    Inputs: the per-metric table with ``p_value`` (:func:`~.deltas.with_paired_tests`), the
    per-slice table with ``p_value`` (:func:`~.slice_tests.with_slice_tests`, or without it: no
    slice tests), the gated metric names (regression gates; empty ⇒ the headline metrics for
    ``ks``), and ``significance`` — ``adjusted`` (marks read ``p_adjusted``) or ``raw``.

    Output: both tables with :data:`ADJUSTED_COLUMNS` / :data:`SLICE_ADJUSTED_COLUMNS` (NaN where
    a row has no test), ``significance`` re-marked and ``direction`` re-read from it, and the
    ``families`` description for the report: the Holm metrics and size, whether they are the
    default headline set, the BH size and how many of it are slice tests, and which p the marks
    read."""
    if significance not in ("adjusted", "raw"):
        raise ValueError(f"significance must be 'adjusted' or 'raw', got {significance!r}")
    pm = per_metric.copy()
    ps = per_slice.copy()
    p_metric = pm["p_value"].to_numpy(dtype=float, na_value=np.nan)
    has_slice_p = "p_value" in ps.columns
    p_slice = (
        ps["p_value"].to_numpy(dtype=float, na_value=np.nan) if has_slice_p else np.full(len(ps), np.nan)
    )

    names = pm["metric"].astype(str).tolist()
    default_family = not gated
    wanted = list(gated) if gated else catalogue.headline_names(ks)
    tested = {m for m, p in zip(names, p_metric, strict=True) if not np.isnan(p)}
    family = [m for m in dict.fromkeys(wanted) if m in tested]
    in_family = np.isin(np.asarray(names, dtype=object), family)
    p_holm = np.full(len(pm), np.nan)
    if in_family.any():
        p_holm[in_family] = holm(p_metric[in_family])
    p_bh_all = bh(np.concatenate([p_metric, p_slice]))
    p_bh_metric, p_bh_slice = p_bh_all[: len(pm)], p_bh_all[len(pm) :]

    pm["p_holm"] = p_holm
    pm["p_bh"] = p_bh_metric
    pm["p_adjusted"] = np.where(in_family, p_holm, p_bh_metric)
    adjusted_by = np.where(in_family, "holm", np.where(np.isnan(p_bh_metric), None, "bh"))
    pm["adjusted_by"] = pd.array(adjusted_by, dtype="string")
    marks_from = pm["p_adjusted"] if significance == "adjusted" else pm["p_value"]
    pm["significance"] = significance_marks(marks_from)
    if "leaning" in pm.columns:  # "better"/"worse" only where the mark says significant
        pm["direction"] = significant_directions(pm["leaning"], pm["significance"])
    ps["p_bh"] = p_bh_slice
    ps["significance"] = significance_marks(
        ps["p_bh"] if significance == "adjusted" else pd.Series(p_slice, index=ps.index)
    )
    n_metric_tests = int((~np.isnan(p_metric)).sum())
    n_slice_tests = int((~np.isnan(p_slice)).sum())
    info = {
        "significance": significance,
        "holm": {"metrics": family, "size": len(family), "default": default_family},
        "bh": {"size": n_metric_tests + n_slice_tests, "metrics": n_metric_tests, "slices": n_slice_tests},
    }
    return (
        pm.astype({**ADJUSTED_COLUMNS, "significance": "string"}),
        ps.astype(SLICE_ADJUSTED_COLUMNS),
        info,
    )
