"""The suspect-gold queue of a comparison: hits the golden set never judged that may explain a loss.

A comparison counts every hit the golden set never labelled as irrelevant, so a candidate that finds
*other* relevant chunks than the gold names looks worse than it is. For every ``loss`` and retrieval
``regression`` verdict (:mod:`.verdicts`), the queue lists the candidate run b's **unjudged** hits
ranked above its first relevant hit — all of b's hits within the MRR cutoff when b found nothing
relevant there. "Unjudged" is exactly what ``judged@k`` counts as not judged: the hit matches no
support of its query, whatever the grade, under the criterion b's scores in this comparison were
matched by (:func:`~kebab_eval_pipeline.metrics.matching.judged_hits`). A hit whose heading path is
a proper prefix of a gold heading in the same document is never queued
(:func:`~kebab_eval_pipeline.metrics.matching_diagnostics.shortened_headings`): whether it is a
parent section's own text or a piece of a sub-section that lost its heading, its parent path as a
support would make the gold too broad.

One row per (query, hit), worst first: regressions before losses, then by how far the first relevant
hit fell (``rank_drop``: b rank − a rank; for a regression, cutoff + 1 − a rank), then by query and
hit rank. A person reviews the queue (``kebab-eval golden suggest`` writes it as candidate
supports); the judge, when on, adds its relevance verdict per hit (:mod:`.suspect_judge`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from kebab_eval_pipeline.compare.systems import verdict_label
from kebab_eval_pipeline.foundation.markdown_text import md_cell, md_code
from kebab_eval_pipeline.metrics.columns import float_column, string_column
from kebab_eval_pipeline.metrics.matching import judged_hits, match_hits, resolve_auto
from kebab_eval_pipeline.metrics.matching_diagnostics import shortened_headings
from kebab_eval_pipeline.store.runs import StoredRun
from kebab_eval_pipeline.systems.base import HIT_COLUMNS

#: Hit columns copied into the queue (absent ones are null).
_HIT_FIELDS = ("chunk_id", "doc_id", "doc_path", "heading_path", "line_start", "line_end", "snippet")
#: The verdicts whose unjudged hits are queued, worst first.
SUSPECT_VERDICTS = ("regression", "loss")
#: Columns (pandas dtypes) of the queue; the judge columns are null when no judge ran.
SUSPECT_COLUMNS: dict[str, str] = {
    "query_id": "string",
    "question": "string",
    "verdict": "string",
    "a_rank": "Int64",
    "b_rank": "Int64",
    "rank_drop": "Int64",
    "hit_rank": "int64",
    **{f: HIT_COLUMNS[f] for f in _HIT_FIELDS},  # the hit's own fields, typed as every stored hit is
    "judge_relevant": "boolean",
    "judge_score": "Float64",
    "judge_reasoning": "string",
}


def empty_suspects() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series([], dtype=t) for c, t in SUSPECT_COLUMNS.items()})


def suspect_targets(verdicts: pd.DataFrame) -> pd.DataFrame:
    """The per-query verdicts whose hits are queued: ``loss`` and ``regression`` where the
    baseline found a relevant hit (an unanswerable query's refusal regression has no ranking to
    blame on the gold)."""
    keep = verdicts["verdict"].isin(SUSPECT_VERDICTS) & verdicts["a_rank"].notna()
    return verdicts.loc[keep.to_numpy(dtype=bool), ["query_id", "verdict", "a_rank", "b_rank"]]


def _match_setup(b: StoredRun, criterion: str | None) -> tuple[str, pd.Series | None]:
    """The criterion (and, under ``auto``, the per-query resolution) b's compared scores used:
    ``criterion`` when the comparison re-scored or compared under it, else b's own stored criterion
    with the resolution its ``query_scores`` recorded (resolved again from all of b's hits for runs
    stored before it was recorded)."""
    if criterion is not None:
        return criterion, None
    stored = b.scores.info.get("match") or "auto"
    if stored != "auto":
        return stored, None
    scores = b.scores.scores
    if "match_criterion" in scores.columns:
        known = scores["match_criterion"].notna().to_numpy(dtype=bool)
        resolved = pd.Series(
            scores["match_criterion"].array[known],
            index=pd.Index(scores["query_id"].array[known], dtype="string", name="query_id"),
            name="match_criterion",
        )
        return "auto", resolved
    return "auto", resolve_auto(b.retrieval.results.hits, b.golden.supports)


def _rows_of(frame: pd.DataFrame, ids: pa.Array) -> pd.DataFrame:
    """The rows of ``frame`` whose ``query_id`` is in ``ids`` (Arrow is_in: pandas' isin on
    Arrow-backed strings falls back to a per-row loop)."""
    mask = pc.is_in(string_column(frame, "query_id", empty_as_null=False), value_set=ids)
    return frame.loc[pc.fill_null(mask, False).to_numpy(zero_copy_only=False)]


def suspect_gold(verdicts: pd.DataFrame, b: StoredRun, criterion: str | None = None) -> pd.DataFrame:
    """The suspect-gold queue (:data:`SUSPECT_COLUMNS`, worst first; see the module docstring).

    Inputs: the comparison's per-query ``verdicts`` (``query_id``, ``verdict``, ``a_rank``,
    ``b_rank``), the candidate run ``b`` (its stored hits, golden set and scores are read — the
    hits only when some verdict is a loss or regression) and the comparison's matching
    ``criterion`` (None: b's own stored scores were compared). Empty when nothing is queued."""
    targets = suspect_targets(verdicts)
    if len(targets) == 0:
        return empty_suspects()
    cutoff = int(b.scores.info.get("mrr_cutoff") or b.metrics.info.get("mrr_cutoff") or 10)
    crit, resolved = _match_setup(b, criterion)
    ids = pa.array(targets["query_id"].astype(str).tolist(), type=pa.large_string())
    hits = _rows_of(b.hits_of(targets["query_id"].astype(str).tolist()), ids)
    hits = hits[hits["rank"].to_numpy(dtype=np.int64) <= cutoff].reset_index(drop=True)
    supports = _rows_of(b.golden.supports, ids).reset_index(drop=True)
    matches = match_hits(hits, supports, criterion=crit, resolved=resolved)
    # A hit whose heading path stops short of a gold heading in the same document is a mapping that
    # lost the chunk's own section, not a gap in the gold: suggesting its parent path as a support
    # would make the gold too broad (matching_warnings says so by count).
    _, shortened = shortened_headings(hits, supports)
    unjudged = hits.loc[~judged_hits(hits, matches) & ~shortened]
    fields = {f: unjudged[f] if f in unjudged.columns else None for f in _HIT_FIELDS}
    rows = pd.DataFrame(
        {"query_id": unjudged["query_id"].astype("string"), "hit_rank": unjudged["rank"], **fields}
    )
    rows = rows.merge(targets.astype({"query_id": "string"}), on="query_id", how="inner")
    b_rank = float_column(rows, "b_rank", np.inf)
    rows = rows[rows["hit_rank"].to_numpy(dtype=float) < b_rank]
    a_rank = rows["a_rank"].astype("Int64")
    drop = (rows["b_rank"].astype("Int64") - a_rank).fillna(cutoff + 1 - a_rank)
    question = b.golden.queries.set_index(b.golden.queries["query_id"].astype(str))["query"]
    rows = rows.assign(
        rank_drop=drop,
        question=rows["query_id"].astype(str).map(question),
        judge_relevant=pd.NA,
        judge_score=np.nan,
        judge_reasoning=pd.NA,
    )
    return worst_first(rows[list(SUSPECT_COLUMNS)].astype(SUSPECT_COLUMNS))


def worst_first(queue: pd.DataFrame) -> pd.DataFrame:
    """The queue ordered regressions, then losses; within each the largest ``rank_drop`` first;
    then by query id and hit rank (a query's hits stay together)."""
    if len(queue) == 0:
        return queue.reset_index(drop=True)
    verdict = (
        queue["verdict"].map({v: i for i, v in enumerate(SUSPECT_VERDICTS)}).fillna(len(SUSPECT_VERDICTS))
    )
    drop = queue["rank_drop"].astype("Float64").fillna(0).to_numpy(dtype=float)
    qid = pd.factorize(queue["query_id"].astype(str), sort=True)[0]
    order = np.lexsort(
        (queue["hit_rank"].to_numpy(dtype=np.int64), qid, -drop, verdict.to_numpy(dtype=float))
    )
    return queue.iloc[order].reset_index(drop=True)


def queue_summary(queue: pd.DataFrame) -> dict[str, int]:
    """Counts for the report header: queued hits, the queries they belong to, by verdict."""
    return {
        "hits": len(queue),
        "queries": int(queue["query_id"].nunique()),
        **{v: int((queue["verdict"] == v).sum()) for v in SUSPECT_VERDICTS},
        "judged_relevant": int(queue["judge_relevant"].astype("boolean").fillna(False).sum()),
    }


def _where(row) -> str:
    path = row.doc_path if isinstance(row.doc_path, str) and row.doc_path else row.doc_id
    where = str(path) if isinstance(path, str) and path else ""
    if not pd.isna(row.line_start):
        end = f"-{int(row.line_end)}" if not pd.isna(row.line_end) else ""
        where += f":{int(row.line_start)}{end}"
    return where


def _heading(value) -> str:
    return " > ".join(map(str, value)) if value is not None and len(value) else ""


def _judge_cell(row) -> str:
    if pd.isna(row.judge_relevant):
        return "–"
    word = "relevant" if row.judge_relevant else "not relevant"
    score = "" if pd.isna(row.judge_score) else f" ({row.judge_score:g}/5)"
    return word + score


def _short(text, limit: int = 120) -> str:
    if not isinstance(text, str):
        return ""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def suspect_markdown(queue: pd.DataFrame, run_b: str, info: dict | None = None, max_rows: int = 10) -> str:
    """The report's suspect-gold section (top ``max_rows`` rows and the count), '' when empty.
    Verdicts read as the comparison names them (``info``: two systems are not regressions)."""
    if queue is None or len(queue) == 0:
        return ""
    n_q = int(queue["query_id"].nunique())
    lines = [
        "",
        f"## Suspect gold ({len(queue)} unjudged hits in {n_q} queries)",
        "",
        f"Hits of {md_code(run_b)} ranked above its first relevant hit in a loss or regression that the "
        "golden set never judged: if they are relevant, the verdict reflects a gap in the gold, not a "
        f"worse ranking. `kebab-eval golden suggest {run_b}` writes them as candidate supports.",
        "",
        "| query | verdict | a rank | b rank | hit rank | chunk | where | heading | snippet | judge |",
        "|---|---|---:|---:|---:|---|---|---|---|---|",
    ]
    for row in queue.head(max_rows).itertuples(index=False):
        cells = [
            md_cell(row.query_id),
            md_cell(verdict_label(row.verdict, info or {})),
            "–" if pd.isna(row.a_rank) else str(int(row.a_rank)),
            "–" if pd.isna(row.b_rank) else str(int(row.b_rank)),
            str(int(row.hit_rank)),
            md_cell(row.chunk_id if isinstance(row.chunk_id, str) else ""),
            md_cell(_where(row)),
            md_cell(_heading(row.heading_path)),
            md_cell(_short(row.snippet)),
            md_cell(_judge_cell(row)),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    if len(queue) > max_rows:
        lines.append(
            f"| … | {len(queue) - max_rows} more in the suspect_gold table and the JSON report "
            "| | | | | | | | |"
        )
    return "\n".join(lines) + "\n"
