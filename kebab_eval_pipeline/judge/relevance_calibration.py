"""The relevance judge measured against the golden set, for free: its supports are relevance labels.

A golden set says, for the hits it matches, whether they are relevant: a hit matched to a support
of grade ≥ the run's relevance level is relevant, a hit matched only to supports below it (grade 0:
"judged not relevant") is not. With ``judge.relevance_sample: N`` a judged run also asks its judge
the relevance question (``judge_relevance``'s prompt) about ``N`` of those hits, drawn from the
top 10 of every answered or searched query by the seeded stratified design of
:mod:`.label_sample` (slice × the golden verdict, so relevant and not-relevant hits come in their
shares), and reports the judge's agreement with the golden verdict: Cohen's κ with its bootstrap
interval, the confusion matrix, the base rate, per slice (:mod:`.agreement`).

No person labels anything: the labels are the golden set's. They only cover hits the golden set
judged, so the figure says how the judge does on judged hits — the ones a golden set's curators
thought worth judging — which is what its verdicts on the unjudged ones are trusted for.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from kebab_eval_pipeline.golden.columns import typed_frame
from kebab_eval_pipeline.judge.agreement import agreement
from kebab_eval_pipeline.judge.label_sample import labelling_order
from kebab_eval_pipeline.judge.labels import item_hash
from kebab_eval_pipeline.judge.relevance import PASS_SCORE, relevance_inputs

#: The hits a relevance sample is drawn from: this many of each query's best.
MAX_RANK = 10
#: One row per sampled hit (the items the judge is asked about, with the golden verdict).
RELEVANCE_ITEM_COLUMNS: dict[str, str] = {
    "query_id": "string",
    "rank": "int64",
    "item_hash": "string",
    "judge_input": "string",
    "gold_grade": "int64",
    "gold_relevant": "bool",
    "slice": "string",
}


def empty_relevance_items() -> pd.DataFrame:
    return typed_frame([], RELEVANCE_ITEM_COLUMNS)


def relevance_items(
    queries: pd.DataFrame,
    hits: pd.DataFrame,
    supports: pd.DataFrame,
    *,
    match: str,
    relevance_level: int,
    n: int,
    seed: int,
    context_chars: int,
) -> pd.DataFrame:
    """The ``n`` hits to ask the judge about (:data:`RELEVANCE_ITEM_COLUMNS`, in labelling order):
    of the hits at rank ≤ :data:`MAX_RANK` matched to a golden support under ``match``, each with
    its golden grade (the best matched support's) and verdict (grade ≥ ``relevance_level``),
    the relevance question as the judge will read it (``judge.relevance.relevance_inputs``: its
    passage cut to ``context_chars``) and the query's slice (category). Empty when ``n`` is 0 or
    nothing matches. The sample is drawn first (over query id and rank); only the ``n`` drawn
    get their question built and hashed."""
    from kebab_eval_pipeline.metrics.matching import match_hits

    if n <= 0 or hits.empty or supports.empty:
        return empty_relevance_items()
    top = hits[hits["rank"] <= MAX_RANK]
    matches = match_hits(top, supports, match)
    if matches.empty:
        return empty_relevance_items()
    best = matches.groupby(["query_id", "rank"], sort=False, observed=True)["grade"].max().reset_index()
    ids = queries["query_id"].astype(str)
    matched = best.merge(top, on=["query_id", "rank"], how="left")
    matched["query_id"] = matched["query_id"].astype(str)
    relevant = matched["grade"].to_numpy(dtype=np.int64) >= relevance_level
    candidates = matched.assign(
        item_hash=matched["query_id"] + "\x1f" + matched["rank"].astype(str),  # the draw's key
        slice=matched["query_id"]
        .map(dict(zip(ids, queries["category"].astype(str), strict=True)))
        .fillna(""),
        # the design's bands are the golden verdict here (no judge score exists yet)
        judge_score=np.where(relevant, PASS_SCORE, 0.0),
        gold_grade=matched["grade"].to_numpy(dtype=np.int64),
        gold_relevant=relevant,
    )
    drawn = labelling_order(candidates, PASS_SCORE, seed, limit=n)
    drawn["question"] = drawn["query_id"].map(dict(zip(ids, queries["query"].astype(str), strict=True)))
    drawn["judge_input"] = [i.to_json() for i in relevance_inputs(drawn, context_chars)]
    drawn["item_hash"] = [item_hash(j) for j in drawn["judge_input"]]
    return drawn[list(RELEVANCE_ITEM_COLUMNS)].astype(RELEVANCE_ITEM_COLUMNS).reset_index(drop=True)


def relevance_agreement(judgements: pd.DataFrame, items: pd.DataFrame, seed: int = 0) -> dict | None:
    """The judge's relevance verdicts (``judgements`` rows of criterion ``relevance``, role
    ``calibration``) against the golden verdicts of ``items``: a dict with ``n`` (hits with a
    verdict from both), ``asked`` (hits sampled), ``kappa`` and its interval, ``confusion`` (rows:
    golden, columns: judge; not relevant then relevant), ``base_rate``, ``sensitivity`` and
    ``specificity`` (the share of golden-relevant hits the judge calls relevant, of golden
    not-relevant ones it calls not relevant; null without such hits: a golden set with no grade-0
    supports leaves κ undefined and only the sensitivity to say) and ``slices`` (κ per slice).
    None when no hit was sampled. A hit whose judgement failed or did not parse is left
    out (``no_verdict`` counts them)."""
    if items.empty:
        return None
    rows = judgements[(judgements["criterion"] == "relevance") & (judgements["role"] == "calibration")]
    scored = rows.assign(item_hash=[item_hash(str(j)) for j in rows["judge_input"]])[["item_hash", "score"]]
    joined = items.drop_duplicates("item_hash").merge(
        scored.drop_duplicates("item_hash"), on="item_hash", how="left"
    )
    has = joined["score"].notna().to_numpy()
    both = joined[has]
    labels = ["not relevant", "relevant"]
    gold = np.where(both["gold_relevant"].to_numpy(dtype=bool), "relevant", "not relevant")
    said = np.where(both["score"].to_numpy(dtype=float) >= PASS_SCORE, "relevant", "not relevant")
    whole = agreement(gold, said, labels, seed=seed)
    slices = []
    slice_of = both["slice"].astype(str).to_numpy()
    for name in sorted(set(slice_of)):
        inside = slice_of == name
        one = agreement(gold[inside], said[inside], labels, seed=seed)
        slices.append(
            {"slice": name, "n": one.n, "kappa": one.kappa, "ci_low": one.ci_low, "ci_high": one.ci_high}
        )
    table = np.asarray(whole.confusion, dtype=float).reshape(2, 2)
    per_class = table.sum(axis=1)
    return {
        **whole.as_dict(),
        # one class at a time: what a golden set without negatives can still say of the judge
        "sensitivity": None if per_class[1] == 0 else float(table[1, 1] / per_class[1]),
        "specificity": None if per_class[0] == 0 else float(table[0, 0] / per_class[0]),
        "asked": len(items),
        "no_verdict": int((~has).sum()),
        "pass_score": PASS_SCORE,
        "slices": slices,
    }
