"""The judge input of every answered query of a run: question, answer, citations, top passages."""

from __future__ import annotations

import pandas as pd

from kebab_eval_pipeline.judge.prompts import JudgeInput


def judged_query_ids(outcomes: pd.DataFrame) -> pd.Series:
    """Query ids the judge scores: answered, not refused, no error, non-empty answer text."""
    answered = outcomes["answered"].astype("boolean").fillna(False)
    refused = outcomes["refused"].astype("boolean").fillna(False)
    ok = outcomes["error"].isna()
    text = outcomes["answer_text"].astype("string").fillna("").str.strip() != ""
    return outcomes.loc[(answered & ~refused & ok & text).to_numpy(dtype=bool), "query_id"].astype(str)


def _citation_label(row) -> str:
    where = row.doc_path if isinstance(row.doc_path, str) and row.doc_path else row.chunk_id or "?"
    if pd.notna(row.line_start):
        end = f"-{int(row.line_end)}" if pd.notna(row.line_end) else ""
        where = f"{where}:{int(row.line_start)}{end}"
    marker = row.marker if isinstance(row.marker, str) and row.marker else ""
    return f"{marker} {where}".strip()


def judge_inputs(
    queries: pd.DataFrame,
    outcomes: pd.DataFrame,
    hits: pd.DataFrame,
    citations: pd.DataFrame,
    context_k: int,
    context_chars: int,
) -> dict[str, JudgeInput]:
    """``{query_id: JudgeInput}`` for every judged query (see :func:`judged_query_ids`), in golden
    order. Context: the query's top ``context_k`` hits by rank, each snippet cut to ``context_chars``
    characters, labelled by rank; citations as "marker path:lines"."""
    ids = judged_query_ids(outcomes)
    if ids.empty:
        return {}
    wanted = set(ids)
    question = queries.set_index(queries["query_id"].astype(str))["query"]
    answer = outcomes.set_index(outcomes["query_id"].astype(str))["answer_text"]
    top = hits[hits["query_id"].astype(str).isin(wanted) & (hits["rank"] <= context_k)].sort_values(
        ["query_id", "rank"], kind="stable"
    )
    passages: dict[str, list[dict[str, str]]] = {}
    for row in top.itertuples(index=False):
        heading = row.heading_path
        heading = " > ".join(map(str, heading)) if heading is not None and len(heading) else ""
        passages.setdefault(str(row.query_id), []).append(
            {
                "ref": str(int(row.rank)),
                "doc_path": str(row.doc_path or row.doc_id or row.chunk_id or ""),
                "heading": heading,
                "text": str(row.snippet or "")[:context_chars],
            }
        )
    cites: dict[str, list[str]] = {}
    for row in citations[citations["query_id"].astype(str).isin(wanted)].itertuples(index=False):
        cites.setdefault(str(row.query_id), []).append(_citation_label(row))
    return {
        qid: JudgeInput(
            question=str(question.get(qid, "")),
            answer=str(answer[qid]),
            citations=tuple(cites.get(qid, ())),
            context=tuple(passages.get(qid, ())),
        )
        for qid in ids
    }
