"""Operational metrics (SPEC §6 "Operational"): errors, timeouts, empty results, versions, latency.

Per query (:func:`operation_columns`, part of the ``query_scores`` table) and per run
(:func:`operation_metrics`). Percentiles are NumPy's default *linear* interpolation between order
statistics (``np.percentile(x, q)``; DuckDB ``quantile_cont``): p50 of ``[1, 2, 3, 4]`` is 2.5.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from kebab_eval_pipeline.metrics.columns import count_codes, lookup_codes, string_column
from kebab_eval_pipeline.metrics.retrieval import query_codes
from kebab_eval_pipeline.systems.base import OUTCOME_COLUMNS
from kebab_eval_pipeline.systems.versions import HIT_VERSION_FIELDS

__all__ = [
    "LATENCY_COLUMNS",
    "MISSING_OUTCOME_ERROR",
    "OPERATION_COLUMNS",
    "VERSION_COLUMNS",
    "align_outcomes",
    "grouped_percentiles",
    "operation_columns",
    "operation_metrics",
]

#: Per-query operational columns of ``query_scores`` (pandas dtypes).
OPERATION_COLUMNS: dict[str, str] = {
    "error": "string",
    "error_class": "string",
    "timed_out": "bool",
    "attempts": "Int64",
    "empty_result": "bool",
    "empty_response": "float64",
    "mixed_version_hits": "int64",
    "retrieval_ms": "float64",
    "answer_ms": "float64",
    "system_prompt_tokens": "float64",
    "system_completion_tokens": "float64",
    "system_cost_usd": "float64",
}
LATENCY_COLUMNS: tuple[str, ...] = ("retrieval_ms", "answer_ms")
#: What the system under test spent per query (NaN: not reported), and the outcome column each is read from.
SPEND_COLUMNS: dict[str, str] = {
    "system_prompt_tokens": "prompt_tokens",
    "system_completion_tokens": "completion_tokens",
    "system_cost_usd": "cost_usd",
}
#: The hit columns holding a version (a hit whose value differs from the run's is a mixed version).
VERSION_COLUMNS: tuple[str, ...] = HIT_VERSION_FIELDS
MISSING_OUTCOME_ERROR = "missing_outcome: the run recorded no outcome row for this query"
MISSING_OUTCOME_CLASS = "missing_outcome"
_NULLABLE = {"float64": "Float64", "bool": "boolean", "int64": "Int64"}
PERCENTILES: tuple[tuple[str, float], ...] = (("p50", 50.0), ("p95", 95.0))


def align_outcomes(queries: pd.DataFrame, outcomes: pd.DataFrame) -> pd.DataFrame:
    """The outcomes table re-ordered to ``queries`` (one row per query, ``OUTCOME_COLUMNS``).

    A query without an outcome row gets ``error = MISSING_OUTCOME_ERROR``, ``answered = False``,
    ``timed_out = False``, ``n_hits = 0`` and nulls elsewhere — it is never silently dropped.
    Outcome rows of unknown queries are ignored; duplicate outcome rows raise ValueError.
    """
    qid = query_codes(queries)
    o_qid = string_column(outcomes, "query_id")
    if o_qid.null_count or len(pc.unique(o_qid)) != len(o_qid):
        raise ValueError("outcomes table has duplicate or missing query ids")
    pos = lookup_codes(qid, o_qid, runs=False)
    present = pos >= 0
    taken = outcomes.iloc[np.where(present, pos, 0)] if len(outcomes) else None
    cols: dict[str, object] = {}
    for name, dtype in OUTCOME_COLUMNS.items():
        if name == "query_id":
            cols[name] = queries["query_id"].astype("string").array
            continue
        nullable = _NULLABLE.get(dtype, dtype)
        if taken is None or name not in outcomes.columns:
            series = pd.Series(pd.NA, index=range(len(queries)), dtype=nullable)
        else:
            series = taken[name].reset_index(drop=True).astype(nullable).mask(~present)
        if name == "error":
            series = series.mask(~present, MISSING_OUTCOME_ERROR)
        elif name == "error_class":
            # Runs stored before error classes existed: an error without a class is "exception".
            if taken is not None and name not in outcomes.columns and "error" in outcomes.columns:
                had_error = taken["error"].reset_index(drop=True).notna().to_numpy()
                series = series.mask(had_error, "exception")
            series = series.mask(~present, MISSING_OUTCOME_CLASS)
        elif name in ("timed_out", "answered"):
            series = series.fillna(False)
        elif name == "n_hits":
            series = series.fillna(0)
        if dtype == "float64":
            cols[name] = series.to_numpy(dtype=np.float64, na_value=np.nan)
        else:
            cols[name] = series.astype(dtype).array
    return pd.DataFrame(cols)


def operation_columns(
    queries: pd.DataFrame,
    outcomes: pd.DataFrame,
    hits: pd.DataFrame | None = None,
    n_hits: np.ndarray | None = None,
) -> pd.DataFrame:
    """Per-query operational columns, in ``queries`` order: ``query_id`` + ``OPERATION_COLUMNS``.

    - ``error``: the outcome's ``"error_class: message"`` (null when the query succeeded).
    - ``error_class``: ``timeout``, ``http_5xx``, … (see :mod:`~.systems.outcome`); null on success.
    - ``timed_out``: the outcome's flag.
    - ``attempts``: requests sent for the query, retries included (null when not recorded).
    - ``empty_result``: the query has zero hits — counted from ``hits`` (or ``n_hits`` when given,
      else the outcome's ``n_hits``); errors count as empty.
    - ``empty_response``: of queries with an answer (``answered`` and no error), 1.0 when the answer
      text is blank and the answer is not a refusal, else 0.0; NaN without an answer.
    - ``mixed_version_hits``: how many of the query's hits report an ``index_version``,
      ``embedding_model`` or ``chunker_version`` different from the run's most common value of
      that field (unreported values never disagree).
    - ``retrieval_ms``, ``answer_ms``: latencies as recorded (NaN when absent).
    - ``system_prompt_tokens``, ``system_completion_tokens``: the answer's token counts as the system
      reported them; ``system_cost_usd``: its cost, reported or priced (systems/costs.py). NaN when
      not reported (no answer, a failed query, a system that does not count).
    """
    qid = query_codes(queries)
    nq = len(qid)
    out = align_outcomes(queries, outcomes)
    if n_hits is None and hits is not None:
        n_hits = count_codes(string_column(hits, "query_id"), qid)
    if n_hits is None:
        n_hits = out["n_hits"].to_numpy(dtype=np.int64)
    has_answer = out["answered"].to_numpy(dtype=bool) & out["error"].isna().to_numpy()
    refused = out["refused"].fillna(False).to_numpy(dtype=bool)
    text = string_column(out, "answer_text", empty_as_null=False)
    blank = pc.fill_null(pc.equal(pc.utf8_trim_whitespace(text), ""), True).to_numpy(zero_copy_only=False)
    mixed = np.zeros(nq, dtype=np.int64)
    if hits is not None and len(hits):
        flags = _mixed_version_flags(hits)
        if flags.any():
            mixed_rows = pa.array(np.flatnonzero(flags))
            mixed = count_codes(string_column(hits, "query_id").take(mixed_rows), qid)
    frame = pd.DataFrame(
        {
            "query_id": out["query_id"],
            "error": out["error"],
            "error_class": out["error_class"],
            "timed_out": out["timed_out"].to_numpy(dtype=bool),
            "attempts": out["attempts"],
            "empty_result": np.asarray(n_hits) == 0,
            "empty_response": np.where(has_answer, (blank & ~refused).astype(float), np.nan),
            "mixed_version_hits": mixed,
            "retrieval_ms": out["retrieval_ms"].to_numpy(dtype=np.float64, na_value=np.nan),
            "answer_ms": out["answer_ms"].to_numpy(dtype=np.float64, na_value=np.nan),
            **{
                column: out[source].to_numpy(dtype=np.float64, na_value=np.nan)
                for column, source in SPEND_COLUMNS.items()
            },
        }
    )
    return frame.astype({"query_id": "string", **OPERATION_COLUMNS})


def operation_metrics(query_scores: pd.DataFrame) -> dict[str, float | None]:
    """Run-level operational metrics from per-query columns (unrounded; None for empty denominators).

    - ``error_rate``, ``timeout_rate``, ``empty_result_rate``: share of **all** queries.
    - ``empty_response_rate``: share of queries with an answer (see :func:`operation_columns`).
    - ``mixed_version_rate``: mixed-version hits / all hits.
    - ``retrieval_ms_p50|p95|max``, ``answer_ms_p50|p95|max``: over queries with a recorded latency.
    - ``total_suite_ms``: sum of every recorded retrieval and answer latency (the serial suite time;
      wall-clock time is lower when queries ran concurrently).
    - ``system_prompt_tokens``, ``system_completion_tokens``: sums over the queries that report them
      (None when none does); ``system_cost_usd``: the sum of the queries' costs, None when no query
      has one or when a query with token counts has none (a partial sum is not the run's cost).
    """
    codes = np.zeros(len(query_scores), dtype=np.int64)
    scores, _ = grouped_operation_metrics(query_scores, codes, 1)
    return {name: (None if np.isnan(v[0]) else float(v[0])) for name, v in scores.items()}


def grouped_operation_metrics(
    query_scores: pd.DataFrame, codes: np.ndarray, n_groups: int, rows: np.ndarray | None = None
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Operational metrics per group: ``rows`` (default all) of ``query_scores`` belong to ``codes``.

    Returns ``(scores, denominators)``, each ``{metric: array over groups}``; NaN score where the
    denominator is 0.
    """
    if rows is None:
        rows = np.arange(len(query_scores))
    scores: dict[str, np.ndarray] = {}
    counts: dict[str, np.ndarray] = {}

    def share(name: str, flag: np.ndarray, valid: np.ndarray | None = None) -> None:
        ok = np.ones(len(flag), bool) if valid is None else valid
        n = np.bincount(codes[ok], minlength=n_groups)
        s = np.bincount(codes[ok], weights=flag[ok].astype(float), minlength=n_groups)
        with np.errstate(invalid="ignore", divide="ignore"):
            scores[name] = np.where(n > 0, s / np.maximum(n, 1), np.nan)
        counts[name] = n

    qs = query_scores
    if "error" in qs.columns:
        share("error_rate", qs["error"].notna().to_numpy()[rows])
    if "timed_out" in qs.columns:
        share("timeout_rate", qs["timed_out"].astype("boolean").fillna(False).to_numpy(dtype=bool)[rows])
    if "empty_result" in qs.columns:
        share(
            "empty_result_rate", qs["empty_result"].astype("boolean").fillna(False).to_numpy(dtype=bool)[rows]
        )
    if "empty_response" in qs.columns:
        v = qs["empty_response"].to_numpy(dtype=np.float64)[rows]
        share("empty_response_rate", np.nan_to_num(v), ~np.isnan(v))
    if "mixed_version_hits" in qs.columns and "n_hits" in qs.columns:
        mixed = np.bincount(
            codes, weights=qs["mixed_version_hits"].to_numpy(dtype=float)[rows], minlength=n_groups
        )
        total = np.bincount(codes, weights=qs["n_hits"].to_numpy(dtype=float)[rows], minlength=n_groups)
        with np.errstate(invalid="ignore", divide="ignore"):
            scores["mixed_version_rate"] = np.where(total > 0, mixed / np.maximum(total, 1), np.nan)
        counts["mixed_version_rate"] = total.astype(np.int64)
    suite = np.zeros(n_groups)
    suite_n = np.zeros(n_groups, dtype=np.int64)
    for column in LATENCY_COLUMNS:
        if column not in qs.columns:
            continue
        values = qs[column].to_numpy(dtype=np.float64, na_value=np.nan)[rows]
        valid = ~np.isnan(values)
        stats = grouped_percentiles(codes[valid], values[valid], n_groups)
        n = np.bincount(codes[valid], minlength=n_groups)
        for label, arr in stats.items():
            scores[f"{column}_{label}"] = arr
            counts[f"{column}_{label}"] = n
        suite += np.bincount(codes[valid], weights=values[valid], minlength=n_groups)
        suite_n += n
    if any(c in qs.columns for c in LATENCY_COLUMNS):
        scores["total_suite_ms"] = np.where(suite_n > 0, suite, np.nan)
        counts["total_suite_ms"] = suite_n
    if all(c in qs.columns for c in SPEND_COLUMNS):
        _spend(qs, codes, n_groups, rows, scores, counts)
    return scores, counts


def _spend(
    qs: pd.DataFrame,
    codes: np.ndarray,
    n_groups: int,
    rows: np.ndarray,
    scores: dict[str, np.ndarray],
    counts: dict[str, np.ndarray],
) -> None:
    """Token and cost sums per group (see :func:`operation_metrics`)."""
    values = {c: qs[c].to_numpy(dtype=np.float64)[rows] for c in SPEND_COLUMNS}
    for column, v in values.items():
        valid = ~np.isnan(v)
        n = np.bincount(codes[valid], minlength=n_groups)
        total = np.bincount(codes[valid], weights=v[valid], minlength=n_groups)
        scores[column] = np.where(n > 0, total, np.nan)
        counts[column] = n
    counted = ~np.isnan(values["system_prompt_tokens"]) | ~np.isnan(values["system_completion_tokens"])
    unpriced = np.bincount(codes, weights=counted & np.isnan(values["system_cost_usd"]), minlength=n_groups)
    scores["system_cost_usd"] = np.where(unpriced > 0, np.nan, scores["system_cost_usd"])


def grouped_percentiles(codes: np.ndarray, values: np.ndarray, n_groups: int) -> dict[str, np.ndarray]:
    """p50, p95 (linear interpolation, as ``np.percentile``) and max of ``values`` per group code.

    NaN for groups without values. Vectorised: one sort, then order statistics by offset.
    """
    out = {label: np.full(n_groups, np.nan) for label, _ in PERCENTILES}
    out["max"] = np.full(n_groups, np.nan)
    if len(values) == 0:
        return out
    order = np.lexsort((values, codes))
    c, v = codes[order], values[order]
    n = np.bincount(c, minlength=n_groups)
    start = np.concatenate(([0], np.cumsum(n)[:-1]))
    has = n > 0
    for label, q in PERCENTILES:
        h = (n[has] - 1) * (q / 100.0)
        lo = np.floor(h).astype(np.int64)
        hi = np.minimum(lo + 1, n[has] - 1)
        a, b = v[start[has] + lo], v[start[has] + hi]
        out[label][has] = a + (h - lo) * (b - a)
    out["max"][has] = v[start[has] + n[has] - 1]
    return out


def _mixed_version_flags(hits: pd.DataFrame) -> np.ndarray:
    """Per hit: does any reported version field differ from the run's most common value?"""
    flags = np.zeros(len(hits), dtype=bool)
    for column in VERSION_COLUMNS:
        if column not in hits.columns:
            continue
        values = string_column(hits, column)
        if values.null_count == len(values):
            continue
        bounds = pc.min_max(values)
        if bounds["min"].as_py() == bounds["max"].as_py():
            continue  # one distinct reported value: nothing disagrees
        counts = pc.value_counts(values.drop_null())
        top = counts.field("values")[int(np.argmax(counts.field("counts").to_numpy()))]
        differs = pc.fill_null(pc.not_equal(values, pa.scalar(top.as_py(), pa.large_string())), False)
        flags |= differs.to_numpy(zero_copy_only=False)
    return flags
