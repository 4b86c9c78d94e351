"""A comparison of repeated runs uses the repeats (a run asked each query N > 1 times).

- **Per metric** (:func:`with_noise`): ``noise_floor`` — the standard error of the delta from the
  runs' repeats, ``√(se_a² + se_b²)`` where a run's ``se`` is the standard deviation of its
  per-repeat run values over √(repeats): the headline is a mean over the repeats, and the spread
  of single repeats (what this floor was before) overstates its noise √N-fold (0 for a run asked
  once: it shows no spread) — and ``within_noise``: ``|delta| ≤ noise_floor`` while the paired test
  finds no significant difference. A delta no larger than the noise of the means is not a
  regression; a difference the paired test finds significant is never relabelled as noise.
- **Per query** (:func:`draws_within_repeats`): a win, loss or regression whose two outcomes lie
  within the queries' own repeat ranges is a draw, with a note. A run's range for a query is
  ``[rank_best, rank_worst]`` over its repeats, reaching "miss" when some repeat missed (a run asked
  once: its one rank); two ranges that overlap are a draw. For unanswerable queries the same holds
  for refusals: a run whose refusal flipped across repeats covers both behaviours.
- The paired test runs on the stored per-query values, which for a repeated run are the means over
  repeats: fractions, so binary metrics go to the randomization test (:func:`.significance.binary_test`).
- **Flakiest queries** of both runs: :func:`repeats_markdown`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from kebab_eval_pipeline.foundation.markdown_text import md_cell, md_code
from kebab_eval_pipeline.metrics.columns import float_column

#: A miss as the upper end of a rank range: after every rank.
_MISS = np.inf
#: Verdicts that say one run did better: the ones a repeat range can turn into a draw.
_DECISIVE = ("win", "loss", "regression")


def is_repeated(scores: pd.DataFrame) -> bool:
    """Whether a run's ``query_scores`` come from more than one repeat (flakiness columns)."""
    return "repeats" in scores.columns


def with_noise(
    per_metric: pd.DataFrame, repeats_a: dict | None, repeats_b: dict | None, alpha: float = 0.05
) -> pd.DataFrame:
    """``per_metric`` (the comparison's metric table: ``metric``, ``delta``, and the paired test's
    ``p_adjusted``/``p_value`` when present) plus ``noise_floor`` (float: the standard error of the
    delta from the two runs' repeats, see the module doc; NaN when no run reports one for the
    metric) and ``within_noise`` (boolean: ``|delta| ≤ noise_floor`` and no significant paired
    test at ``alpha`` — adjusted p where the table has it, else raw; NA without a delta or a noise
    floor). Unchanged when neither run was repeated."""
    if not repeats_a and not repeats_b:
        return per_metric

    def standard_error(repeats: dict | None, metric: str) -> float:
        if not repeats:
            return 0.0  # asked once: no spread seen (the other run's floor decides)
        floor = (repeats.get("noise_floor") or {}).get(metric) or {}
        std, count = floor.get("std"), floor.get("repeats") or repeats.get("count")
        if std is None or not count:
            return np.nan
        return float(std) / np.sqrt(float(count))

    names = per_metric["metric"].astype(str)
    floor = np.array(
        [np.hypot(standard_error(repeats_a, m), standard_error(repeats_b, m)) for m in names], dtype=float
    )
    if not (repeats_a and repeats_b):  # one side asked once: its 0 must not stand for "no floor"
        other = repeats_a or repeats_b
        known = np.array([m in (other.get("noise_floor") or {}) for m in names])
        floor = np.where(known, floor, np.nan)
    delta = float_column(per_metric, "delta")
    p = float_column(per_metric, "p_adjusted") if "p_adjusted" in per_metric.columns else None
    if p is not None and "p_value" in per_metric.columns:
        p = np.where(np.isnan(p), float_column(per_metric, "p_value"), p)
    significant = np.zeros(len(delta), dtype=bool) if p is None else (p < alpha)
    inside = pd.array((np.abs(delta) <= floor + 1e-12) & ~significant, dtype="boolean")
    inside[np.isnan(delta) | np.isnan(floor)] = pd.NA
    out = per_metric.copy()
    out["noise_floor"] = floor
    out["within_noise"] = inside
    return out


def _rank_range(scores: pd.DataFrame) -> pd.DataFrame:
    """Per query: the lowest and highest first relevant rank over the run's repeats (inf: a miss),
    and the refusal behaviours seen (0: answered only, 1: refused only, 2: both, NA: no answers)."""
    if is_repeated(scores):
        best = float_column(scores, "rank_best", _MISS)
        worst = float_column(scores, "rank_worst", _MISS)
        missed = scores["miss_repeats"].fillna(0).to_numpy(dtype=np.int64) > 0
        worst = np.where(missed, _MISS, worst)
        flipped = scores["refusal_flips"].fillna(0).to_numpy(dtype=np.int64) > 0
    else:
        best = worst = float_column(scores, "first_relevant_rank", _MISS)
        flipped = np.zeros(len(scores), dtype=bool)
    refused = scores["refused"].astype("boolean") if "refused" in scores.columns else None
    seen = np.full(len(scores), -1)
    if refused is not None:
        seen = np.where(refused.isna().to_numpy(), -1, refused.fillna(False).to_numpy(dtype=np.int64))
    seen = np.where(flipped, 2, seen)
    return pd.DataFrame(
        {"query_id": scores["query_id"].astype(str).to_numpy(), "lo": best, "hi": worst, "ref": seen}
    )


def _span(lo: float, hi: float) -> str:
    def one(x: float) -> str:
        return "miss" if np.isinf(x) else str(int(x))

    return one(lo) if lo == hi else f"{one(lo)}–{one(hi)}"


def draws_within_repeats(
    verdicts: pd.DataFrame, scores_a: pd.DataFrame, scores_b: pd.DataFrame
) -> pd.DataFrame:
    """``verdicts`` with each win, loss or regression whose outcomes lie within the two runs'
    repeat ranges turned into a draw (note: ``within repeat noise: a ranks 1–4, b 2``).
    Unchanged unless at least one run was repeated."""
    if not (is_repeated(scores_a) or is_repeated(scores_b)):
        return verdicts
    ra, rb = _rank_range(scores_a), _rank_range(scores_b)
    m = (
        verdicts[["query_id"]]
        .astype({"query_id": str})
        .merge(ra, on="query_id", how="left")
        .merge(rb, on="query_id", how="left", suffixes=("_a", "_b"))
    )
    decisive = verdicts["verdict"].isin(_DECISIVE).to_numpy()
    both = m["lo_a"].notna().to_numpy() & m["lo_b"].notna().to_numpy()
    lo_a, hi_a, lo_b, hi_b = (m[c].to_numpy(dtype=float) for c in ("lo_a", "hi_a", "lo_b", "hi_b"))
    # A rank verdict on queries with gold; a refusal verdict (unanswerable) on refusal behaviour.
    by_rank = ~verdicts["note"].astype(str).str.startswith("unanswerable").to_numpy(dtype=bool)
    rank_overlap = (lo_a <= hi_b) & (lo_b <= hi_a)
    ref_a, ref_b = m["ref_a"].to_numpy(), m["ref_b"].to_numpy()
    refusal_overlap = (ref_a >= 0) & (ref_b >= 0) & ((ref_a == 2) | (ref_b == 2) | (ref_a == ref_b))
    noisy = decisive & both & np.where(by_rank, rank_overlap, refusal_overlap)
    if not noisy.any():
        return verdicts
    out = verdicts.copy()
    notes = []
    for i in np.flatnonzero(noisy):  # only the queries turned into draws: a note each
        if by_rank[i]:
            notes.append(
                f"within repeat noise ({out['verdict'].iat[i]} by modal rank): a ranks "
                f"{_span(lo_a[i], hi_a[i])}, b {_span(lo_b[i], hi_b[i])} across repeats"
            )
        else:
            notes.append(
                f"within repeat noise ({out['verdict'].iat[i]} by modal refusal): "
                "refusal flipped across repeats"
            )
    out.loc[noisy, "verdict"] = "draw"
    out.loc[noisy, "note"] = notes
    return out


def repeats_info(repeats_a: dict | None, repeats_b: dict | None) -> dict:
    """What the comparison records about the runs' repeats: each run's repeat count and its
    flakiest queries (empty for a run asked once)."""
    return {
        "repeats_a": (repeats_a or {}).get("count", 1),
        "repeats_b": (repeats_b or {}).get("count", 1),
        "flakiest_a": (repeats_a or {}).get("flakiest", []),
        "flakiest_b": (repeats_b or {}).get("flakiest", []),
    }


def repeats_markdown(info: dict, per_metric: pd.DataFrame, verdicts: pd.DataFrame) -> str:
    """The comparison report's section on repeats (empty when neither run was repeated): repeat
    counts, the metrics whose delta is within the noise floor, draws within repeat noise and the
    flakiest queries of each run."""
    if info.get("repeats_a", 1) == 1 and info.get("repeats_b", 1) == 1:
        return ""
    lines = [
        "",
        "## Repeats",
        "",
        f"a asked each query {info['repeats_a']} time(s), b {info['repeats_b']}: per-query values are means "
        "over repeats (binary metrics then take the randomization test).",
    ]
    if "within_noise" in per_metric.columns:
        inside = per_metric[per_metric["within_noise"].fillna(False).astype(bool)]
        if len(inside):
            lines += [
                "",
                "Deltas within the noise floor — the standard error of the delta from the repeats — "
                "and not significant (not a regression):",
                "",
            ]
            lines += ["| metric | delta | noise floor |", "|---|---:|---:|"]
            lines += [
                f"| {md_cell(r.metric)} | {r.delta:+.4f} | {r.noise_floor:.4f} |" for r in inside.itertuples()
            ]
    noisy = verdicts[verdicts["note"].astype(str).str.startswith("within repeat noise")]
    if len(noisy):
        lines += ["", f"{len(noisy)} query verdict(s) are draws within repeat noise."]
    for side in ("a", "b"):
        top = info.get(f"flakiest_{side}") or []
        if top:
            lines += [
                "",
                f"Flakiest queries of {side}:",
                "",
                "| query | flips | rank flips | ranks | answer flips |",
            ]
            lines += ["|---|---:|---:|---|---:|"]
            for q in top:
                span = "" if q.get("rank_best") is None else f"{q['rank_best']}–{q['rank_worst']}"
                lines.append(
                    f"| {md_code(q['query_id'])} | {q['flips']} | {q.get('rank_flips') or 0} | {span} | "
                    f"{q.get('answer_flips') or 0} |"
                )
    return "\n".join(lines) + "\n"
