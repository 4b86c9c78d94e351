"""Per-query verdicts between a baseline run (a) and a candidate run (b) — vectorised.

For answerable queries with gold supports, by first relevant rank:
``win`` b found a relevant hit a missed, or ranked it higher; ``loss`` both
found, b ranked lower; ``regression`` a found, b missed; ``draw`` same rank or
both missed. Unanswerable queries, where both runs answered, compare refusals:
b refusing where a answered is a win, the reverse a regression.
Queries present in only one run are ``only_a`` / ``only_b`` (golden drift); a query in both
whose gold changed between the two golden sets is ``gold_changed``, not compared (set by
:func:`~.drift.set_aside_changed`).

Answer-level flips sit beside the verdict, for queries both runs answered: ``refusal_flip``
(``answered→refused`` / ``refused→answered``) and ``groundedness_flip`` (the rule-based
groundedness score going 1→0 ``grounded→ungrounded`` or 0→1 ``ungrounded→grounded``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from kebab_eval_pipeline.metrics.columns import float_column

VERDICTS = ("win", "loss", "regression", "draw", "not_scored", "only_a", "only_b", "gold_changed")

VERDICT_COLUMNS: dict[str, str] = {
    "query_id": "string",
    "verdict": "string",
    "a_rank": "Int64",
    "b_rank": "Int64",
    "note": "string",
    "refusal_flip": "string",
    "groundedness_flip": "string",
}
#: Columns each run's per-query frame must have (``grounded`` may be absent: no answers).
FRAME_COLUMNS = ("query_id", "applicable", "rank", "answerable", "refused", "grounded")
FLIPS = ("answered→refused", "refused→answered", "grounded→ungrounded", "ungrounded→grounded")


def per_query_verdicts(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """Compare two per-query frames with :data:`FRAME_COLUMNS`.

    ``rank`` is the first relevant rank (null when none within the cutoff); ``refused`` is null
    when the run produced no answer; ``grounded`` is the rule-based groundedness score (1/0, NaN
    when not applicable or no answer; a missing column counts as all-NaN). Returns
    :data:`VERDICT_COLUMNS`, ordered by query id; flips are null unless both runs answered.
    """
    a, b = _with_grounded(a), _with_grounded(b)
    cols = list(FRAME_COLUMNS)
    m = a[cols].merge(b[cols], on="query_id", how="outer", suffixes=("_a", "_b"), indicator=True)
    ra = float_column(m, "rank_a")
    rb = float_column(m, "rank_b")
    found_a, found_b = ~np.isnan(ra), ~np.isnan(rb)
    both = (m["_merge"] == "both").to_numpy()
    applicable = (
        both
        & m["applicable_a"].fillna(False).astype(bool).to_numpy()
        & m["applicable_b"].fillna(False).astype(bool).to_numpy()
    )
    unanswerable = both & ~m["answerable_b"].fillna(True).astype(bool).to_numpy()
    ref_a = m["refused_a"].astype("boolean")
    ref_b = m["refused_b"].astype("boolean")
    both_answered = (ref_a.notna() & ref_b.notna()).to_numpy()
    ref_a_np = ref_a.fillna(False).to_numpy(dtype=bool)
    ref_b_np = ref_b.fillna(False).to_numpy(dtype=bool)

    conditions = [
        (m["_merge"] == "left_only").to_numpy(),
        (m["_merge"] == "right_only").to_numpy(),
        applicable & found_b & ~found_a,
        applicable & found_a & ~found_b,
        applicable & found_a & found_b & (rb < ra),
        applicable & found_a & found_b & (rb > ra),
        applicable,
        unanswerable & both_answered & ref_b_np & ~ref_a_np,
        unanswerable & both_answered & ref_a_np & ~ref_b_np,
        unanswerable & both_answered,
    ]
    verdicts = ["only_a", "only_b", "win", "regression", "win", "loss", "draw", "win", "regression", "draw"]
    notes = [
        "query only in the baseline's golden set",
        "query only in this run's golden set",
        "b found a relevant hit a missed",
        "a found a relevant hit, b missed",
        "b ranks the first relevant hit higher",
        "b ranks the first relevant hit lower",
        "",  # filled below: same rank or both missed
        "unanswerable: b refuses, a answered",
        "unanswerable: a refused, b answers",
        "unanswerable: same refusal behaviour",
    ]
    verdict = np.select(conditions, verdicts, default="not_scored")
    note = np.select(conditions, notes, default="no gold supports or no answers to compare")
    draw_rank = applicable & (verdict == "draw")
    note = np.where(draw_rank & found_a, "same rank", np.where(draw_rank, "both missed", note))
    refusal_flip = np.select(
        [both_answered & ~ref_a_np & ref_b_np, both_answered & ref_a_np & ~ref_b_np],
        ["answered→refused", "refused→answered"],
        default=None,
    )
    ga = float_column(m, "grounded_a")
    gb = float_column(m, "grounded_b")
    grounded_pair = both_answered & ~np.isnan(ga) & ~np.isnan(gb)
    groundedness_flip = np.select(
        [grounded_pair & (ga > gb), grounded_pair & (ga < gb)],
        ["grounded→ungrounded", "ungrounded→grounded"],
        default=None,
    )
    out = pd.DataFrame(
        {
            "query_id": m["query_id"],
            "verdict": verdict,
            "a_rank": m["rank_a"],
            "b_rank": m["rank_b"],
            "note": note,
            "refusal_flip": refusal_flip,
            "groundedness_flip": groundedness_flip,
        }
    )
    return out.astype(VERDICT_COLUMNS).sort_values("query_id", kind="stable").reset_index(drop=True)


def _with_grounded(frame: pd.DataFrame) -> pd.DataFrame:
    if "grounded" in frame.columns:
        return frame
    return frame.assign(grounded=pd.Series(np.nan, index=frame.index, dtype="float64"))


def verdict_counts(verdicts: pd.DataFrame) -> dict[str, int]:
    """Queries per verdict, every verdict listed (0 when absent) — but ``gold_changed`` only when a
    query has it (a comparison across golden-set versions), so a comparison on one golden set
    counts what it always did."""
    counts = verdicts["verdict"].value_counts()
    return {v: int(counts.get(v, 0)) for v in VERDICTS if v != "gold_changed" or counts.get(v, 0)}


def flip_counts(verdicts: pd.DataFrame) -> dict[str, int]:
    """Queries per answer-level flip, every flip listed (0 when absent)."""
    counts = pd.concat([verdicts["refusal_flip"], verdicts["groundedness_flip"]]).value_counts()
    return {f: int(counts.get(f, 0)) for f in FLIPS}
