"""Judge numbers: per-query score columns for ``query_scores`` and run-level judge metrics.

Per query (merged into ``query_scores``): ``judge_groundedness``, ``judge_correctness`` (the main
judge's 0–5 score; null when the query was not judged, the reply was unparseable or the call
failed) and ``judge_rule_agreement`` (1 when ``judge_groundedness ≥ 3`` agrees with the rule-based
``groundedness_rule``, 0 when not, null unless both exist) — averaged like every other metric.

Run level (:func:`judge_run_metrics`): unparseable and error rates, the spot check's
``judge_disagreement_rate`` over ``judge_spot_check_n`` queries, model calls and cache hits, tokens,
estimated cost and latency percentiles. Empty denominators give null, never 0.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from kebab_eval_pipeline.judge.prompts import CRITERIA
from kebab_eval_pipeline.metrics.catalogue import Measure, family_names, measures, register

_RUN = "a run-level statistic of the LLM judge"
_JUDGED = "queries the judge scored (not unparseable, no failed call)"
_PRIMARY = "the main judge's judgements (query × criterion)"
_SPEND = "every judgement, cached ones included"


def calibration_names(criterion: str) -> tuple[str, str, str]:
    """The run metrics a calibrated run adds per ``criterion`` (declared below): its corrected mean,
    κ on the 0–5 scale and κ on the verdict (``judge/calibration.py`` computes them)."""
    return (f"judge_{criterion}_corrected", f"judge_{criterion}_kappa", f"judge_{criterion}_verdict_kappa")


def flip_rate_name(criterion: str) -> str:
    """The self-consistency check's run metric of ``criterion`` (``judge/self_consistency.py``)."""
    return f"judge_{criterion}_flip_rate"


#: The relevance judge's κ against the golden set (``judge/relevance_calibration.py``).
RELEVANCE_KAPPA = "judge_relevance_kappa"


# The judge's metrics, declared here so the core never lists them (see metrics.catalogue).
for _entry in (
    Measure(
        "judge_groundedness",
        "judge",
        "the main judge's 0–5 groundedness score",
        _JUDGED,
        column="judge_groundedness",
        test="graded",
        headline=14,
    ),
    Measure(
        "judge_correctness",
        "judge",
        "the main judge's 0–5 correctness score",
        _JUDGED,
        column="judge_correctness",
        test="graded",
        headline=15,
    ),
    Measure(
        "judge_groundedness_rule_agreement",
        "judge",
        "1 when judge_groundedness ≥ 3 agrees with the rule-based groundedness_rule",
        "queries with both a judge groundedness score and a groundedness_rule",
        column="judge_rule_agreement",
        test="binary",
        headline=16,
    ),
    *(
        Measure(
            name,
            "judge_run",
            text,
            denominator,
            direction=direction,
            sliceable=False,
            untestable=_RUN,
            # how far to trust the judge's scores: shown with them
            headline=17 if name == "judge_disagreement_rate" else None,
        )
        for name, text, denominator, direction in (
            ("judge_unparseable_rate", "share of judge replies that did not parse", _PRIMARY, "lower"),
            ("judge_error_rate", "share of judge calls that failed", _PRIMARY, "lower"),
            (
                "judge_disagreement_rate",
                "share of spot-checked queries where the two judges differ by more than 1 point",
                "spot-checked queries both judges scored",
                "lower",
            ),
            ("judge_spot_check_n", "queries compared by the spot check", "—", "higher"),
            ("judge_model_calls", "judge model calls made by this run (cache misses)", "—", "higher"),
            ("judge_cache_hits", "judgements read from the judge cache", "—", "higher"),
            ("judge_prompt_tokens", "prompt tokens of every judgement", _SPEND, "lower"),
            ("judge_completion_tokens", "completion tokens of every judgement", _SPEND, "lower"),
            (
                "judge_cost_usd",
                "estimated judging cost, USD (null when a model has no price)",
                _SPEND,
                "lower",
            ),
            ("judge_latency_p50_ms", "judge call latency, p50 (ms)", "judgements with a latency", "lower"),
            ("judge_latency_p95_ms", "judge call latency, p95 (ms)", "judgements with a latency", "lower"),
        )
    ),
    *(
        entry
        for criterion in CRITERIA
        for corrected, kappa, verdict_kappa in [calibration_names(criterion)]
        for entry in (
            Measure(
                corrected,
                "judge_calibration",
                f"judge_{criterion} corrected by a person's labels: the prediction-powered (PPI++) estimate "
                "of the mean the labellers would give every judged item",
                "labelled items (the estimate uses every judged item)",
                sliceable=False,
                untestable="a run-level estimate from a labelled sample: its 95% interval is in the run's "
                "judge_calibration record",
            ),
            Measure(
                kappa,
                "judge_calibration",
                f"Cohen's κ of the judge's {criterion} score against a person's labels, 0–5 scale, "
                "quadratic weights",
                "labelled items",
                sliceable=False,
                untestable=_RUN,
            ),
            Measure(
                verdict_kappa,
                "judge_calibration",
                f"Cohen's κ of the judge's {criterion} verdict (pass at 3) against a person's",
                "labelled items",
                sliceable=False,
                untestable=_RUN,
            ),
        )
    ),
    *(
        Measure(
            flip_rate_name(criterion),
            "judge_calibration",
            f"share of items whose {criterion} verdict (pass at 3) flips when the judge sees the same "
            "evidence in another order (judge.self_consistency): the judge's own noise",
            "items with two passages or more that both judgements scored",
            direction="lower",
            sliceable=False,
            untestable=_RUN,
        )
        for criterion in CRITERIA
    ),
    Measure(
        RELEVANCE_KAPPA,
        "judge_calibration",
        "Cohen's κ of the judge's relevance verdict (relevant at 3) against the golden set's, on a "
        "sample of the hits it judged (judge.relevance_sample)",
        "sampled hits with both verdicts",
        sliceable=False,
        untestable=_RUN,
    ),
):
    register(_entry)
del _entry

#: query_scores column → aggregate metric name (means over the queries where defined).
JUDGE_QUERY_METRICS: tuple[tuple[str, str], ...] = tuple(
    (m.column or "", m.name) for m in measures() if m.family == "judge"
)
#: Run-level judge metrics, in report order (:func:`judge_run_metrics` returns them so).
JUDGE_RUN_METRICS: tuple[str, ...] = family_names("judge_run")
PASS_SCORE = 3.0  # judge_groundedness at or above this counts as grounded (meta-evaluation)
DISAGREEMENT_POINTS = 1.0  # SPEC §6: a spot-check disagreement is a score difference > 1


def judge_query_columns(query_ids: pd.Series, judgements: pd.DataFrame, groundedness_rule: pd.Series):
    """The per-query judge columns, aligned with ``query_ids`` (the ``query_scores`` order)."""
    ids = query_ids.astype(str).to_numpy()
    primary = judgements[judgements["role"] == "primary"]
    out = {}
    for criterion in CRITERIA:
        rows = primary[primary["criterion"] == criterion]
        by_query = pd.Series(rows["score"].to_numpy(dtype=float), index=rows["query_id"].astype(str))
        out[f"judge_{criterion}"] = by_query.reindex(ids).to_numpy(dtype=float)
    judged = out["judge_groundedness"]
    rule = pd.to_numeric(groundedness_rule, errors="coerce").to_numpy(dtype=float)
    both = ~np.isnan(judged) & ~np.isnan(rule)
    agree = np.full(len(ids), np.nan)
    agree[both] = ((judged[both] >= PASS_SCORE) == (rule[both] >= 1.0)).astype(float)
    out["judge_rule_agreement"] = agree
    return pd.DataFrame(out)


def disagreement(judgements: pd.DataFrame) -> tuple[int, int]:
    """(disagreeing queries, compared queries) of the spot check: a sampled query is compared when
    both judges scored at least one criterion, and disagrees when any such score moved by > 1."""
    scored = judgements[judgements["score"].notna()]
    if scored.empty:
        return 0, 0
    wide = scored.pivot_table(
        index=["query_id", "criterion"], columns="role", values="score", aggfunc="first"
    )
    if "spot_check" not in wide.columns or "primary" not in wide.columns:
        return 0, 0
    wide = wide.dropna(subset=["primary", "spot_check"])
    moved = (wide["primary"] - wide["spot_check"]).abs() > DISAGREEMENT_POINTS
    per_query = moved.groupby(level="query_id").any()
    return int(per_query.sum()), len(per_query)


def _rate(numerator: int, denominator: int) -> float | None:
    return None if denominator == 0 else numerator / denominator


def judge_run_metrics(
    judgements: pd.DataFrame, info: dict[str, Any], round_to: int = 4
) -> tuple[dict[str, float | None], dict[str, int]]:
    """Run-level judge metrics (``JUDGE_RUN_METRICS`` order) and their denominators.

    Rates are over the main judge's judgements (query × criterion); tokens and cost sum over every
    judgement, cached ones included (they carry the tokens of the call that produced them), so the
    cost is what judging this run costs; ``judge_model_calls`` / ``judge_cache_hits`` say what was
    actually spent now. Cost is null when any judgement's model has no price. Latency percentiles
    (linear interpolation) are over judgements with a recorded latency.
    """
    primary = judgements[judgements["role"] == "primary"]
    n_primary = len(primary)
    disagree, compared = disagreement(judgements)
    prompt = judgements["prompt_tokens"].dropna()
    completion = judgements["completion_tokens"].dropna()
    has_tokens = judgements["prompt_tokens"].notna() & judgements["error"].isna()
    costs = judgements.loc[has_tokens, "cost_usd"]
    latency = judgements["latency_ms"].dropna().to_numpy(dtype=float)
    metrics: dict[str, float | None] = {
        "judge_unparseable_rate": _rate(int((primary["method"] == "unparseable").sum()), n_primary),
        "judge_error_rate": _rate(int(primary["error"].notna().sum()), n_primary),
        "judge_disagreement_rate": _rate(disagree, compared),
        "judge_spot_check_n": compared,
        "judge_model_calls": int(info.get("model_calls", 0)),
        "judge_cache_hits": int(info.get("cache_hits", 0)),
        "judge_prompt_tokens": int(prompt.sum()) if len(prompt) else None,
        "judge_completion_tokens": int(completion.sum()) if len(completion) else None,
        "judge_cost_usd": None if costs.empty or costs.isna().any() else float(costs.sum()),
        "judge_latency_p50_ms": float(np.percentile(latency, 50)) if len(latency) else None,
        "judge_latency_p95_ms": float(np.percentile(latency, 95)) if len(latency) else None,
    }
    metrics = {
        k: (round(v, round_to) if isinstance(v, float) and not k.endswith("_usd") else v)
        for k, v in metrics.items()
    }
    denominators = {
        "judge_unparseable_rate": n_primary,
        "judge_error_rate": n_primary,
        "judge_disagreement_rate": compared,
        "judge_spot_check_n": compared,
        "judge_prompt_tokens": len(prompt),
        "judge_completion_tokens": len(completion),
        "judge_cost_usd": len(costs),
        "judge_latency_p50_ms": len(latency),
        "judge_latency_p95_ms": len(latency),
        "judge_model_calls": int(info.get("model_calls", 0)),
        "judge_cache_hits": int(info.get("cache_hits", 0)),
    }
    return metrics, denominators


#: Below this share of its probability on the digits 0–5 at the score token, a judgement read from
#: log probabilities was not the judge answering with a score: its score rests on the little it
#: put there (a prompt the model does not follow, an endpoint that answers in prose).
LOW_DIGIT_MASS = 0.5


def reply_warnings(judgements: pd.DataFrame) -> list[str]:
    """What a run's judge replies say about the scores, for the log and the metadata: replies that
    did not parse, and judgements read from log probabilities whose digit mass is below
    :data:`LOW_DIGIT_MASS`. Empty when neither happened (and for no judgements)."""
    warnings = []
    unparseable = judgements["method"] == "unparseable"
    if unparseable.any():
        warnings.append(
            f"{int(unparseable.sum())} of {len(judgements)} judge replies did not parse (their scores "
            "are null); see the 'problem' column of judgements"
        )
    read = judgements[judgements["method"] == "logprobs"]
    mass = read["digit_mass"].to_numpy(dtype=float)
    low = mass < LOW_DIGIT_MASS
    if low.any():
        warnings.append(
            f"{int(low.sum())} of {len(read)} scores read from log probabilities put less than "
            f"{LOW_DIGIT_MASS:.0%} of the probability on the digits 0–5 (lowest {mass[low].min():.2f}): "
            "the judge was not answering with a score there, so those scores rest on little; see "
            "'digit_mass' in judgements"
        )
    return warnings
