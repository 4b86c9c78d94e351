"""Provisional metrics corrected by people's relevance labels: prediction-powered inference over queries.

A comparison with ``compare.provisional_depth`` has the judge label the unjudged hits it pools
(:mod:`.provisional`). The judge can be wrong, so the metrics "with provisional labels" carry its
errors. Where people have labelled pooled hits for relevance (``kebab-eval judge label --criterion
relevance``, the labels file of ``judge.calibration.labels``), each headline retrieval metric is
also given as a **corrected estimate** of what it would be had people labelled every pooled hit,
with a 95% interval — for run a, run b and their difference.

The unit is the **query**, because a retrieval metric is a mean of per-query values that depend on
all of a query's hits at once:

- ``f`` — a query's value scored with the judge's provisional labels; known for every query;
- ``y`` — its value scored with the people's labels instead; known for a **labelled query**, one
  whose every pooled hit has a person's label (a reference label: the labellers' lower median,
  relevant at 3 of 5 as the judge's verdict);
- a query with no pooled hit has ``y = f`` exactly (nothing provisional touches it).

The corrected mean over the ``n`` queries where the metric is defined is the stratified
``(n₀·m₀ + n₁·θ̂)/n``: ``m₀`` the mean of the ``n₀`` queries without a pooled hit, ``θ̂`` the PPI++
mean (:func:`~kebab_eval_pipeline.judge.ppi.ppi_mean`) of ``y`` over the ``n₁`` pooled queries, from
the labelled ones' ``(y, f)`` and the others' ``f``. Its standard error combines the two strata's,
``√((n₀/n)²·s₀²/n₀ + (n₁/n)²·se(θ̂)²)``: like the comparison's paired tests, it treats the queries
as a sample of the queries a team could ask. For the difference the per-query ``f`` and ``y`` are
``b − a``. Valid when the labelled queries are a random sample of the pooled ones, as ``judge label
--criterion relevance`` draws them (seeded, stratified by slice): simulated in the tests, the 95%
interval covers the true difference in 93–97% of 1,000 synthetic comparisons with a biased judge.
With fewer than 2 labelled queries there is no estimate (said with the reason); when every pooled
query is labelled, the people's value is the number, with its interval over queries.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from kebab_eval_pipeline.judge.calibration import FEW_LABELS
from kebab_eval_pipeline.judge.ppi import ppi_mean
from kebab_eval_pipeline.judge.relevance import PASS_SCORE

#: The labels' criterion a pooled hit's person verdict is read from.
CRITERION = "relevance"


def person_verdicts(judged: pd.DataFrame, references: pd.DataFrame | None) -> pd.Series:
    """Per pooled hit of ``judged`` (with ``item_hash``: what the judge read): the people's verdict —
    relevant when the reference label is at least :data:`PASS_SCORE` — or NA without a label."""
    if references is None or references.empty or "item_hash" not in judged.columns:
        return pd.Series(pd.NA, index=judged.index, dtype="boolean")
    rows = references[references["criterion"].astype(str) == CRITERION]
    label = pd.Series(rows["label"].to_numpy(dtype=np.float64), index=rows["item_hash"].astype(str))
    values = judged["item_hash"].astype(str).map(label).astype("Float64")  # NA: nobody labelled it
    return pd.Series((values >= PASS_SCORE).to_numpy(), index=judged.index, dtype="boolean")


def labelled_queries(judged: pd.DataFrame, verdicts: pd.Series) -> set[str]:
    """The pooled queries whose every pooled hit has a person's verdict."""
    if judged.empty:
        return set()
    known = pd.Series(np.asarray(pd.notna(verdicts)), index=judged.index)
    every = known.groupby(judged["query_id"].astype(str)).all()
    return set(every.index[every.to_numpy(dtype=bool)])


def _values(scores: pd.DataFrame, metric: str) -> pd.Series:
    """``metric``'s per-query values where defined, indexed by query id."""
    values = pd.Series(
        scores[metric].to_numpy(dtype=np.float64, na_value=np.nan), index=scores["query_id"].astype(str)
    )
    return values[values.notna()]


def corrected_mean(
    judge_values: pd.Series, people_values: pd.Series, pooled: set[str], labelled: set[str], alpha: float
) -> dict:
    """The corrected mean (module doc) of a per-query metric: ``judge_values`` (indexed by query id,
    the queries where it is defined), ``people_values`` (the same with the people's labels; only
    the ``labelled`` queries' are read), ``pooled`` — the queries with a pooled hit. Returns
    ``estimate``, ``ci_low``, ``ci_high`` (null with ``note`` when fewer than 2 pooled queries are
    labelled, or no query measures the metric), ``labelled``, ``pooled`` (of the defined queries),
    ``queries`` and ``lam`` (the PPI++ power tuning; null when no PPI was needed)."""
    from scipy.special import ndtri

    z = float(ndtri(1 - alpha / 2))
    in_pool = judge_values.index.astype(str).isin(list(pooled))
    exact = judge_values[~in_pool].to_numpy(dtype=np.float64)
    pooled_values = judge_values[in_pool]
    ids = pooled_values.index
    is_labelled = ids.isin(list(labelled)) & ids.isin(people_values.index)
    lab_ids, unl_ids = ids[is_labelled], ids[~is_labelled]
    n, n_pooled = len(judge_values), len(pooled_values)
    out = {"queries": n, "pooled": n_pooled, "labelled": len(lab_ids), "lam": None, "note": ""}
    if n == 0:
        return {**out, "estimate": None, "ci_low": None, "ci_high": None, "note": "no query measures it"}
    if not len(unl_ids):  # every pooled query labelled (or none pooled): the people's value, over queries
        values = np.concatenate([exact, people_values.reindex(lab_ids).to_numpy(dtype=np.float64)])
        mean = float(values.mean())
        half = z * float(np.std(values, ddof=1)) / np.sqrt(n) if n > 1 else 0.0
        note = "every pooled query labelled"
        return {**out, "estimate": mean, "ci_low": mean - half, "ci_high": mean + half, "note": note}
    if len(lab_ids) < 2:
        return {
            **out,
            "estimate": None,
            "ci_low": None,
            "ci_high": None,
            "note": f"{len(lab_ids)} of {n_pooled} pooled queries labelled: at least 2 are needed",
        }
    ppi = ppi_mean(
        people_values.reindex(lab_ids).to_numpy(),
        pooled_values.reindex(lab_ids).to_numpy(),
        pooled_values.reindex(unl_ids).to_numpy(),
        alpha=alpha,
    )
    # two strata of queries: without a pooled hit (y = f, their mean's own sampling error) and
    # with one (PPI++), weighted by their shares
    n_exact = len(exact)
    se_exact = float(np.std(exact, ddof=1)) / np.sqrt(n_exact) if n_exact > 1 else 0.0
    se_pooled = (ppi.ci_high - ppi.estimate) / z
    estimate = (float(exact.sum()) + n_pooled * ppi.estimate) / n
    half = z * float(np.hypot(n_exact / n * se_exact, n_pooled / n * se_pooled))
    return {
        **out,
        "estimate": estimate,
        "ci_low": estimate - half,
        "ci_high": estimate + half,
        "lam": ppi.lam,
        "note": few_labels_note(len(lab_ids)),
    }


def few_labels_note(labelled: int) -> str:
    """What a corrected figure from ``labelled`` queries says of itself: below :data:`FEW_LABELS`
    its interval may be too narrow (benchmarks/bench_ppi_coverage.py); "" from there up."""
    if labelled >= FEW_LABELS:
        return ""
    return f"only {labelled} labelled queries: the interval may be too narrow below {FEW_LABELS}"


def _difference(b: pd.Series, a: pd.Series) -> pd.Series:
    common = b.index.intersection(a.index)
    return b.reindex(common) - a.reindex(common)


def corrected_metrics(
    metrics: Sequence[str],
    judge_scores: tuple[pd.DataFrame, pd.DataFrame],
    people_scores: tuple[pd.DataFrame, pd.DataFrame],
    pooled: set[str],
    labelled: set[str],
    alpha: float = 0.05,
) -> dict[str, dict]:
    """Per metric of ``metrics`` that is a per-query column of both runs' scores: the corrected
    mean of run a, run b and the difference b − a (:func:`corrected_mean`), from the per-query scores
    with the judge's provisional labels (``judge_scores``, a then b) and with the people's
    (``people_scores``)."""
    out: dict[str, dict] = {}
    for metric in metrics:
        if not all(metric in frame.columns for frame in (*judge_scores, *people_scores)):
            continue
        f_a, f_b = (_values(frame, metric) for frame in judge_scores)
        y_a, y_b = (_values(frame, metric) for frame in people_scores)
        out[metric] = {
            "a": corrected_mean(f_a, y_a, pooled, labelled, alpha),
            "b": corrected_mean(f_b, y_b, pooled, labelled, alpha),
            "delta": corrected_mean(_difference(f_b, f_a), _difference(y_b, y_a), pooled, labelled, alpha),
        }
    return out
