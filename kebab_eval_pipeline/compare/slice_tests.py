"""Paired tests of b − a within each breakdown slice (``mrr`` over ``lang = ko``, ``hit@5`` over
``tag = critical``, …), so the per-slice deltas of a comparison carry p-values like the run-level ones.

Slice membership is read from the candidate b's query labels over the queries both runs scored (the
labels the per-query table shows); the test is :func:`~.significance.paired_test` on the slice's
pairs, without the bootstrap CI (a slice row reports p only). The slice tests join the run-level ones
in the family :mod:`.families` adjusts with Benjamini–Hochberg — so which are run is fixed in
advance, never chosen by the data: the summary quality metrics (:data:`SLICE_TEST_METRICS`, those the
report's per-category table shows) over slices of at least ``min_queries`` paired queries. Testing
every metric of every slice (thousands of tests on a demo with many tags, most of them the same
question asked twice, e.g. ``hit@5`` and ``recall_any@5``) would only drown real changes in the
correction.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from kebab_eval_pipeline.compare.deltas import SLICE_TEST_COLUMNS
from kebab_eval_pipeline.compare.significance import binary_test, paired_test
from kebab_eval_pipeline.metrics import catalogue
from kebab_eval_pipeline.metrics.aggregate import BREAKDOWN_DIMENSIONS, dimension_labels
from kebab_eval_pipeline.metrics.columns import float_column

__all__ = ["SLICE_TEST_METRICS", "with_slice_tests"]

#: Metrics tested per slice: the catalogue's summary list, quality families only.
SLICE_TEST_METRICS: tuple[str, ...] = tuple(catalogue.summary_names(families=catalogue.QUALITY_FAMILIES))


def with_slice_tests(
    per_slice: pd.DataFrame,
    scores_a: pd.DataFrame,
    scores_b: pd.DataFrame,
    *,
    seed: int = 0,
    n_resamples: int = 10_000,
    min_queries: int = 10,
    metrics: tuple[str, ...] = SLICE_TEST_METRICS,
) -> pd.DataFrame:
    """``per_slice`` (:data:`~.deltas.SLICE_COLUMNS`) plus :data:`SLICE_TEST_COLUMNS`.

    Inputs: the per-slice deltas and both runs' ``query_scores`` (unique ``query_id``). For each
    row whose metric is in ``metrics`` and is a mean of per-query scores (the catalogue's
    ``metric_column``) whose column both runs have, the paired test of that column over the slice's
    queries scored by both runs — exact McNemar for the catalogue's binary metrics, sign-flip
    randomization otherwise — with ``seed`` and ``n_resamples`` as the run-level tests, when at
    least ``min_queries`` pairs are complete. Such a row always gets ``n_paired``; other rows
    (other metrics, counts, rates over hits, latencies) keep every added column null, and a slice
    below ``min_queries`` keeps a null ``p_value``. ``paired_delta`` is rounded to 4 decimals,
    ``p_value`` is not."""
    out = per_slice.copy()
    n = len(out)
    n_paired = np.zeros(n, dtype=np.int64)
    has_n = np.zeros(n, dtype=bool)
    delta = np.full(n, np.nan)
    p = np.full(n, np.nan)
    if n:
        ids_a = pd.Index(scores_a["query_id"].astype(str).to_numpy(dtype=object))
        ids_b = pd.Index(scores_b["query_id"].astype(str).to_numpy(dtype=object))
        common = ids_a.intersection(ids_b).sort_values()
        pos_a, pos_b = ids_a.get_indexer(common), ids_b.get_indexer(common)
        members = _members(scores_b.iloc[pos_b].reset_index(drop=True))
        columns: dict[str, tuple[np.ndarray, np.ndarray] | None] = {}
        wanted = set(metrics)
        # Object arrays, not the Arrow-backed columns: iterating those costs ~1 µs a cell.
        labels = (out[c].to_numpy(dtype=object) for c in ("dimension", "value", "metric"))
        for i, (dim, value, metric) in enumerate(zip(*labels, strict=True)):
            column = catalogue.metric_column(metric) if metric in wanted else None
            if column is None:
                continue
            if column not in columns:
                present = column in scores_a.columns and column in scores_b.columns
                columns[column] = (
                    (float_column(scores_a, column)[pos_a], float_column(scores_b, column)[pos_b])
                    if present
                    else None
                )
            pair = columns[column]
            if pair is None:
                continue
            rows = members.get((str(dim), str(value)), _NO_ROWS)
            complete = int((~(np.isnan(pair[0][rows]) | np.isnan(pair[1][rows]))).sum())
            has_n[i] = True
            n_paired[i] = complete
            if complete < max(1, min_queries):
                continue
            x_a, x_b = pair[0][rows], pair[1][rows]
            result = paired_test(
                x_a,
                x_b,
                binary=binary_test(metric, x_a, x_b),
                seed=seed,
                n_resamples=n_resamples,
                ci=False,
            )
            if result.p_value is not None:
                p[i] = result.p_value
                delta[i] = round(result.delta, 4)
    out["n_paired"] = pd.array(np.where(has_n, n_paired, 0), dtype="Int64")
    out.loc[~has_n, "n_paired"] = pd.NA
    out["paired_delta"] = delta
    out["p_value"] = p
    return out.astype(SLICE_TEST_COLUMNS)


_NO_ROWS = np.zeros(0, dtype=np.int64)


def _members(joined_b: pd.DataFrame) -> dict[tuple[str, str], np.ndarray]:
    """(dimension, value) → positions in ``joined_b`` of the slice's queries."""
    out: dict[tuple[str, str], np.ndarray] = {}
    for dim in BREAKDOWN_DIMENSIONS:
        rows, labels = dimension_labels(joined_b, dim, len(joined_b))
        if len(rows) == 0:
            continue
        codes, uniq = pd.factorize(labels, sort=True)
        order = np.argsort(codes, kind="stable")
        bounds = np.searchsorted(codes[order], np.arange(len(uniq) + 1))
        for j, value in enumerate(uniq):
            out[(dim, str(value))] = rows[order[bounds[j] : bounds[j + 1]]]
    return out
