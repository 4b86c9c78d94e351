"""Which of a comparison's pooled unjudged hits a person labels for relevance: a sample of queries.

The comparison's provisional labels (:mod:`.provisional`) are corrected by people's labels over
queries (:mod:`.provisional_corrected`): a query counts once every one of its pooled hits is
labelled, and the correction is valid when the labelled queries are a random sample of the pooled
ones. This draws that sample, for ``kebab-eval judge label --criterion relevance``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from kebab_eval_pipeline.compare.provisional import pooled_unjudged
from kebab_eval_pipeline.judge.label_sample import labelling_order
from kebab_eval_pipeline.judge.labels import item_hash
from kebab_eval_pipeline.judge.relevance import PASS_SCORE, relevance_inputs

#: The columns of :func:`people_sample`'s table: one row per pooled hit to label.
SAMPLE_COLUMNS = ("query_id", "item_hash", "judge_input", "stratum", "position")


def people_sample(
    runs: Sequence,
    depth: int,
    criterion: str | None,
    context_chars: int,
    seed: int = 0,
    limit: int | None = None,
) -> pd.DataFrame:
    """The pooled unjudged hits of ``runs`` (one run, or the two a comparison pools in its order:
    baseline, candidate; at rank ≤ ``depth`` under ``criterion``: :func:`~.provisional.pooled_unjudged`)
    a person labels for relevance, query by query (:data:`SAMPLE_COLUMNS`): the first ``limit``
    queries of a seeded labelling order stratified by slice × whether the last run (the candidate)
    found a relevant hit at rank ≤ ``depth`` (``found``/``missed``;
    :func:`~kebab_eval_pipeline.judge.label_sample.labelling_order`), each with every pooled hit of
    it — a labelled query is one with all of them labelled. ``judge_input`` is the relevance
    question exactly as the judge reads it (the passage cut to ``context_chars``), so a label's
    ``item_hash`` is the judge's."""
    pool = pooled_unjudged(runs, depth, criterion)
    if pool.empty:
        return pd.DataFrame({c: pd.Series([], dtype="object") for c in SAMPLE_COLUMNS})
    last = runs[-1]
    queries = last.golden.queries
    category = dict(zip(queries["query_id"].astype(str), queries["category"].astype(str), strict=True))
    scores = last.scores.scores
    found_rank = pd.Series(
        scores["first_relevant_rank"].to_numpy(dtype=np.float64, na_value=np.nan),
        index=scores["query_id"].astype(str),
    )
    ids = pd.Series(pool["query_id"].astype(str).unique())
    units = pd.DataFrame(
        {
            "item_hash": ids,  # the unit drawn is the query
            "slice": ids.map(category).fillna(""),
            "band": np.where(ids.map(found_rank).fillna(np.inf).to_numpy() <= depth, "found", "missed"),
        }
    )
    order = labelling_order(units, PASS_SCORE, seed, limit=limit)
    chosen = order.rename(columns={"item_hash": "query_id"})[["query_id", "stratum", "position"]]
    hits = pool.assign(query_id=pool["query_id"].astype(str)).merge(chosen, on="query_id")
    hits = hits.sort_values("position", kind="stable").reset_index(drop=True)
    inputs = [item.to_json() for item in relevance_inputs(hits, context_chars)]
    hits["judge_input"] = inputs
    hits["item_hash"] = [item_hash(text) for text in inputs]
    return hits[list(SAMPLE_COLUMNS)]
