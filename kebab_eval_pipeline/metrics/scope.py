"""Scope misses (SPEC §6 ``scope_miss_rate``): did a scoped search look in the wrong folders?

Some systems first pick folders and then search only inside them (kebab's folder mode). When that
selection excludes every piece of gold evidence, no ranking can recover: the query is a *scope
miss*. Systems report the folders they searched as the outcome's ``scope`` (a list of folder
paths); a system that reports no scope is not scored.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from kebab_eval_pipeline.metrics.columns import (
    concat_strings,
    equi_join,
    lookup_codes,
    starts_with_each,
    string_column,
)
from kebab_eval_pipeline.metrics.matching import normalise_paths
from kebab_eval_pipeline.metrics.operations import align_outcomes
from kebab_eval_pipeline.metrics.retrieval import query_codes

__all__ = ["scope_misses"]


def scope_misses(
    queries: pd.DataFrame, supports: pd.DataFrame, outcomes: pd.DataFrame, applicable: np.ndarray
) -> np.ndarray:
    """Per query (``queries`` order): 1.0 for a scope miss, 0.0 when the scope held gold evidence,
    NaN where the metric does not apply.

    Inputs: the golden ``queries`` and ``supports`` tables, the run's ``outcomes`` (its ``scope``
    column: a list of folders per query, null when the system reports none — runs stored before
    scopes existed have no column, which means null everywhere) and the retrieval ``applicable``
    flags (answerable queries with supports).

    A support's location is its ``rel_path``, else its ``doc_id`` (paths normalised as for
    matching); only supports with a positive grade count. A location lies in a folder when it
    equals the folder or starts with ``folder + "/"``; the folder ``""`` or ``"."`` is the whole
    tree. Denominator: applicable queries whose outcome reports a scope and that have at least one
    located positive support. An empty scope (``[]``: nothing was searched) misses.
    """
    nq = len(queries)
    out = np.full(nq, np.nan)
    if nq == 0:
        return out
    qid = query_codes(queries)
    scope = pa.array(
        align_outcomes(queries, outcomes)["scope"].to_numpy(dtype=object),
        type=pa.list_(pa.large_string()),
        from_pandas=True,
    )
    reported = ~scope.is_null().to_numpy(zero_copy_only=False)
    if not (reported & applicable).any():
        return out

    # Located positive supports: (query code, normalised location).
    s_q = lookup_codes(string_column(supports, "query_id"), qid, runs=False)
    location = pc.coalesce(
        normalise_paths(string_column(supports, "rel_path")),
        normalise_paths(string_column(supports, "doc_id")),
    )
    grade = supports["grade"].to_numpy(dtype=np.int64) if len(supports) else np.zeros(0, np.int64)
    keep = (s_q >= 0) & (grade > 0) & ~location.is_null().to_numpy(zero_copy_only=False)
    s_q = s_q[keep]
    location = location.filter(pa.array(keep))
    located = np.bincount(s_q, minlength=nq) > 0
    scored = reported & applicable & located
    out[scored] = 1.0
    if not scored.any():
        return out

    # Folders of the scored queries: (query code, folder with a trailing "/", or "" for the root).
    rows = np.flatnonzero(scored)
    lists = scope.take(pa.array(rows))
    f_q = rows[pc.list_parent_indices(lists).to_numpy()]
    folders = normalise_paths(pc.list_flatten(lists))
    folders = pc.replace_substring_regex(folders, r"^\.$|/+$", "")
    prefix = pc.if_else(
        pc.equal(folders, ""),
        pa.scalar("", pa.large_string()),
        concat_strings(folders, "/"),
    )
    # Every (support, folder) pair of the same query; a support is in scope when any folder holds it.
    i, j = equi_join([pa.array(s_q)], [pa.array(f_q)])
    if len(i):
        loc = location.take(pa.array(i))
        inside = starts_with_each(concat_strings(loc, "/"), prefix.take(pa.array(j)))
        hit_queries = np.unique(s_q[i[inside]])
        out[hit_queries] = 0.0
    return out
