"""Per-query tables for people: worst queries first, with a plain-words ``issue`` column.

The Dagster UI shows the first rows of these tables on the ``retrieval_results`` and
``query_scores`` materializations, so the rows a person must look at come first; the full tables
stay in Parquet. Pure pandas, vectorised over queries: usable and testable without Dagster.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow.compute as pc

from kebab_eval_pipeline.compare.suspect_gold import SUSPECT_COLUMNS
from kebab_eval_pipeline.foundation.parquet_parts import ParquetParts
from kebab_eval_pipeline.metrics import catalogue

QUESTION_CHARS = 80  # enough to recognise a question in a table cell

#: Explanations of the columns that are not metric columns (those come from the metric catalogue);
#: shown in the UI table's schema (hover a column header) through :func:`column_description`.
COLUMN_DESCRIPTIONS = {
    "query_id": "golden query id",
    "issue": "what went wrong, worst first: error, missed, answered an unanswerable query, refused an "
    "answerable one, relevant hit found below rank 1; 'ok' otherwise",
    "question": f"the golden question (first {QUESTION_CHARS} characters)",
    "first_relevant_rank": "rank of the first relevant hit (1-based); empty when none was returned",
    "n_hits": "hits returned",
    "top_hit": "document of the rank-1 hit",
    "retrieval_ms": "search latency in milliseconds",
    "answer_ms": "answer latency in milliseconds",
    "attempts": "requests sent (retries included)",
    "error_class": "classified error of a failed query (timeout, http_5xx, bad_output, …)",
    "refused": "the system declined to answer",
    "answered": "the system returned an answer",
    "error": "the error message of a failed query",
    "verdict": "this run against the baseline: regression (baseline found it, this run missed), loss "
    "(found lower), win (found, or found higher), draw; only_a / only_b: in one run only; "
    "gold_changed: its gold changed between the runs' golden sets, not compared",
    "a_rank": "first relevant rank in the baseline run",
    "b_rank": "first relevant rank in this run",
    "note": "why the verdict",
    "refusal_flip": "answered→refused or refused→answered between the runs",
    "groundedness_flip": "grounded→ungrounded or ungrounded→grounded between the runs",
}

# Tiers, worst first. A query gets the worst tier that applies; its ``issue`` names every problem.
_ERROR, _MISSED, _UNDER_REFUSED, _OVER_REFUSED, _LOW_RANK, _OK, _NOT_SCORED = range(7)


def _question(golden_queries: pd.DataFrame | None, query_ids: pd.Series) -> pd.Series:
    if golden_queries is None or "query" not in golden_queries:
        return pd.Series(pd.NA, index=query_ids.index, dtype="string")
    text = golden_queries.set_index("query_id")["query"].astype("string")
    short = text.where(text.str.len() <= QUESTION_CHARS, text.str.slice(0, QUESTION_CHARS - 1) + "…")
    return query_ids.map(short).astype("string")


def _issues(labels: list[tuple[pd.Series, pd.Series | str]], index: pd.Index) -> pd.Series:
    """Join the labels whose mask holds, with '; ' — vectorised over rows."""
    out = pd.Series("", index=index, dtype="string")
    for mask, label in labels:
        mask = mask.fillna(False).astype(bool)
        text = label if isinstance(label, pd.Series) else pd.Series(label, index=index, dtype="string")
        joined = out.where(out == "", out + "; ") + text
        out = out.mask(mask, joined)
    return out.mask(out == "", "ok")


def worst_scores_first(
    query_scores: pd.DataFrame, metric_columns: list[str], golden_queries: pd.DataFrame | None = None
) -> pd.DataFrame:
    """``query_scores`` as a compact table, worst queries first.

    Input: the ``query_scores`` table (one row per golden query), the per-query metric columns to
    show (those not in the table are skipped) and optionally the golden ``queries`` table for the
    question text. Output columns: query_id, issue, question, category, lang, answerable,
    first_relevant_rank, the metric columns, refused, refusal_correct, error_class. Order: failed
    queries (system error), then missed (answerable, no relevant hit), answered-but-unanswerable,
    refused-but-answerable, found below rank 1, fine, and last the queries not scored (pending gold
    or not applicable). Within a tier: the deeper first relevant rank first — an answerable query
    without a relevant hit counts deeper than any rank, an unanswerable one without a rank shallower
    than rank 1 (so of two queries without a rank, the answerable one leads: not a tie) — then the
    weaker graded score (the last ``ndcg@`` of ``metric_columns``; none last), then the golden
    order. Empty in, empty out.
    """
    s = query_scores
    answerable = s["answerable"].astype("boolean").fillna(False)
    scored = s["applicable"].astype("boolean").fillna(False) & ~s["pending"].astype("boolean").fillna(False)
    rank = s["first_relevant_rank"].astype("Float64")
    error = s["error"].notna() if "error" in s else pd.Series(False, index=s.index)
    missed = scored & answerable & rank.isna()
    under = s["under_refusal"].eq(1) if "under_refusal" in s else pd.Series(False, index=s.index)
    over = s["over_refusal"].eq(1) if "over_refusal" in s else pd.Series(False, index=s.index)
    low = scored & (rank > 1).fillna(False)
    pending = s["pending"].astype("boolean").fillna(False)
    tier = np.select(
        # a pending unanswerable query is labelled 'pending gold': it sorts with the not-scored ones
        [error, missed, under, over, low, (scored | ~answerable) & ~pending],
        [_ERROR, _MISSED, _UNDER_REFUSED, _OVER_REFUSED, _LOW_RANK, _OK],
        default=_NOT_SCORED,
    )
    error_class = s["error_class"] if "error_class" in s else pd.Series(pd.NA, index=s.index)
    issue = _issues(
        [
            (error, "error: " + error_class.astype("string").fillna("unclassified")),
            (missed, "missed"),
            (under, "answered an unanswerable query"),
            (over, "refused an answerable query"),
            (low, "first relevant at rank " + rank.astype("Int64").astype("string")),
            (pending, "pending gold"),
            (~pending & ~scored & answerable, "not applicable"),
        ],
        s.index,
    )
    table = pd.DataFrame(
        {
            "query_id": s["query_id"],
            "issue": issue,
            "question": _question(golden_queries, s["query_id"]),
        }
    )
    for column in ("category", "lang", "answerable", "first_relevant_rank"):
        if column in s:
            table[column] = s[column]
    for column in metric_columns:
        if column in s and column not in table:
            table[column] = s[column]
    for column in ("refused", "refusal_correct", "error_class"):
        if column in s:
            table[column] = s[column]
    # Deeper first within a tier; then the weakest graded score; then golden order.
    # an answerable query that found nothing is deeper than any rank (errors: nothing found first)
    depth = -rank.fillna(0).mask(answerable & rank.isna(), np.inf).to_numpy(dtype=float)
    graded = [c for c in metric_columns if c.startswith("ndcg@") and c in s]
    weakest = s[graded[-1]].to_numpy(dtype=float, na_value=np.nan) if graded else np.zeros(len(s))
    order = np.lexsort((np.arange(len(s)), np.nan_to_num(weakest, nan=np.inf), depth, tier))
    return table.iloc[order].reset_index(drop=True)


def worst_results_first(
    outcomes: pd.DataFrame, hits: pd.DataFrame | ParquetParts, golden_queries: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Per-query ``retrieval_results`` as a compact table, worst first.

    Input: the ``outcomes`` table (one row per query), the ``hits`` table (for the rank-1
    document) and optionally the golden ``queries`` table. Output columns: query_id, issue,
    question, n_hits, top_hit, retrieval_ms, answer_ms, attempts, answered, refused, error_class,
    error. Order: failed queries (error), then timed out, then no hits, then the slowest searches
    (relevance is judged later, in ``query_scores``). Ties keep the golden order.
    """
    o = outcomes
    error = o["error"].notna()
    timed_out = o["timed_out"].astype("boolean").fillna(False)
    empty = o["n_hits"].fillna(0).eq(0) & ~error
    tier = np.select([error, timed_out, empty], [0, 1, 2], default=3)
    issue = _issues(
        [
            (error, "error: " + o["error_class"].astype("string").fillna("unclassified")),
            (timed_out & ~error, "timed out"),
            (empty, "no hits"),
        ],
        o.index,
    )
    if isinstance(hits, ParquetParts):  # a sharded run's hits, in their files: rank 1 rows read
        hits = hits.read(["query_id", "rank", "doc_path"], rows=lambda t: pc.equal(t["rank"], 1)).to_pandas()
    top = hits.loc[hits["rank"] == 1].drop_duplicates("query_id").set_index("query_id")["doc_path"]
    table = pd.DataFrame(
        {
            "query_id": o["query_id"],
            "issue": issue,
            "question": _question(golden_queries, o["query_id"]),
            "n_hits": o["n_hits"],
            "top_hit": o["query_id"].map(top).astype("string"),
        }
    )
    for column in ("retrieval_ms", "answer_ms", "attempts", "answered", "refused", "error_class", "error"):
        if column in o:
            table[column] = o[column]
    slowest = -o["retrieval_ms"].astype("Float64").fillna(0).to_numpy(dtype=float)
    order = np.lexsort((np.arange(len(o)), slowest, tier))
    return table.iloc[order].reset_index(drop=True)


#: Comparison verdicts in the order a reviewer reads them: what got worse first.
VERDICT_ORDER = ("regression", "loss", "only_a", "only_b", "gold_changed", "not_scored", "win", "draw")


def verdicts_worst_first(per_query: pd.DataFrame) -> pd.DataFrame:
    """A comparison's per-query verdicts ordered regression, loss, only_a, only_b, gold_changed,
    not_scored, win, draw (unknown verdicts last); within a verdict the baseline's better ranks first (the
    biggest falls lead), then the original order."""
    verdict = per_query["verdict"].map({v: i for i, v in enumerate(VERDICT_ORDER)})
    verdict = verdict.fillna(len(VERDICT_ORDER)).to_numpy(dtype=float)
    a_rank = per_query["a_rank"].astype("Float64").fillna(np.inf).to_numpy(dtype=float)
    order = np.lexsort((np.arange(len(per_query)), a_rank, verdict))
    return per_query.iloc[order].reset_index(drop=True)


JUDGEMENT_COLUMNS_SHOWN = (
    "query_id",
    "criterion",
    "role",
    "score",
    "method",
    "expected_score",
    "unsupported_claims",
    "reasoning",
    "problem",
    "error",
    "cached",
)
COLUMN_DESCRIPTIONS.update(
    {
        "criterion": "groundedness (claims supported by the retrieved passages) or correctness (answers "
        "the question)",
        "role": "primary: the run's judge; spot_check: the second judgement of the fixed-seed sample",
        "score": "the judge's 0–5 score; empty when the reply was unparseable or the call failed",
        "method": "json (the reply's JSON score), logprobs (probability-weighted digits 0–5: a score-only "
        "reply's, or where the JSON was incomplete), digit (a score-only reply without log "
        "probabilities), unparseable, or error",
        "expected_score": "probability-weighted score over the digit tokens 0–5 at the score position",
        "unsupported_claims": "claims the judge found unsupported",
        "reasoning": "the judge's one-sentence reason",
        "problem": "why the reply's JSON was not used",
        "cached": "the reply came from the judge cache (no model call)",
    }
)


#: The suspect-gold queue's columns shown in the UI table: all of them, in stored order.
SUSPECT_SHOWN = tuple(SUSPECT_COLUMNS)
COLUMN_DESCRIPTIONS.update(
    {
        "rank_drop": "how far the first relevant hit fell: b rank − a rank (a regression: MRR cutoff + 1 − a "
        "rank)",
        "hit_rank": "rank of this unjudged hit in run b (above b's first relevant hit)",
        "chunk_id": "the hit's chunk id",
        "doc_id": "the hit's document id",
        "doc_path": "the hit's document path",
        "heading_path": "the hit's heading path",
        "line_start": "first line of the hit",
        "line_end": "last line of the hit",
        "snippet": "the hit's text as the system returned it",
        "judge_relevant": "the judge's relevance verdict on this hit (score ≥ 3 of 5); empty without a judge",
        "judge_score": "the judge's 0–5 relevance score of this hit for the question",
        "judge_reasoning": "the judge's one-sentence reason for its relevance score",
    }
)


def column_description(column: str) -> str | None:
    """What a per-query table's column means: :data:`COLUMN_DESCRIPTIONS`, else the description of
    the catalogue metric whose per-query column it is (``hit@5``, ``refusal_correct``); None when
    neither knows it."""
    return COLUMN_DESCRIPTIONS.get(column) or catalogue.column_description(column)


def judgements_worst_first(judgements: pd.DataFrame) -> pd.DataFrame:
    """The judge's judgements for people: failed calls first, then unparseable replies, then the
    lowest scores; primary before spot-check within a score, ties in the stored order. Returns the
    ``JUDGEMENT_COLUMNS_SHOWN`` columns. Empty in, empty out."""
    j = judgements.reset_index(drop=True)
    tier = np.where(j["error"].notna(), 0, np.where(j["score"].isna(), 1, 2))
    order = np.lexsort(
        (
            np.arange(len(j)),
            (j["role"] != "primary").to_numpy(dtype=int),
            j["score"].fillna(0.0).to_numpy(dtype=float),
            tier,
        )
    )
    return j.iloc[order][list(JUDGEMENT_COLUMNS_SHOWN)].reset_index(drop=True)
