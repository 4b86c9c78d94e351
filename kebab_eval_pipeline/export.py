"""Exports of a stored run (SPEC §12): one JSON document, or a TREC run file + qrels."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from kebab_eval_pipeline import atomic
from kebab_eval_pipeline.compare.runs import load_bundle
from kebab_eval_pipeline.storage import ArtifactStore

_HIT_FIELDS = (
    "rank",
    "chunk_id",
    "doc_id",
    "doc_path",
    "heading_path",
    "line_start",
    "line_end",
    "snippet",
    "score",
    "score_kind",
    "lexical_score",
    "vector_score",
    "lexical_rank",
    "vector_rank",
    "index_version",
    "embedding_model",
    "chunker_version",
)
_ANSWER_FIELDS = (
    "answer_text",
    "refused",
    "grounded",
    "refusal_reason",
    "prompt_template_version",
    "model",
    "prompt_tokens",
    "completion_tokens",
)


def _plain(value: Any) -> Any:
    """Parquet/pandas scalars → JSON values; NaN/NA → None."""
    if value is None or value is pd.NA:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if hasattr(value, "tolist") and not isinstance(value, str):
        return [_plain(v) for v in value.tolist()] if getattr(value, "ndim", 0) else _plain(value.item())
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def json_records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """A table as JSON-ready records: NaN/NA → None, arrays → lists, NumPy scalars → Python."""
    return [{k: _plain(v) for k, v in row.items()} for row in frame.to_dict("records")]


def export_json(store: ArtifactStore, run_id: str) -> dict[str, Any]:
    """The whole run as one JSON-ready mapping (metrics null where denominators are empty)."""
    b = load_bundle(store, run_id)
    info = b.metrics.info
    breakdowns: dict[str, dict[str, dict[str, float | None]]] = {}
    for row in json_records(b.metrics.breakdowns):
        breakdowns.setdefault(str(row["dimension"]), {}).setdefault(str(row["value"]), {})[row["metric"]] = (
            row["score"]
        )
    r = b.retrieval.results
    verdicts: dict[tuple[str, int], str] = {}
    if b.scores.verification is not None:  # source_root configured: each hit's verification verdict
        v = b.scores.verification
        verdicts = dict(
            zip(zip(v["query_id"], v["rank"].astype(int), strict=True), v["verdict"], strict=True)
        )

    def hit_record(rec: dict[str, Any]) -> dict[str, Any]:
        out = {f: rec[f] for f in _HIT_FIELDS}
        if verdicts:
            out["verification"] = verdicts.get((rec["query_id"], int(rec["rank"])))
        return out

    hits_by_query = {
        qid: [hit_record(rec) for rec in json_records(group)]
        for qid, group in r.hits.sort_values(["query_id", "rank"]).groupby("query_id", sort=False)
    }
    cites_by_query = {
        qid: [{k: v for k, v in rec.items() if k not in ("query_id", "position")} for rec in json_records(g)]
        for qid, g in r.citations.sort_values(["query_id", "position"]).groupby("query_id", sort=False)
    }
    outcomes = {rec["query_id"]: rec for rec in json_records(r.outcomes)}
    meta_cols = {
        "query_id",
        "category",
        "difficulty",
        "lang",
        "tags",
        "group",
        "answerable",
        "pending",
        "match_criterion",
    }
    per_query = []
    for rec in json_records(b.scores.scores):
        qid = rec["query_id"]
        out = outcomes.get(qid, {})
        answer = None
        if out.get("answered"):
            answer = {("text" if f == "answer_text" else f): out.get(f) for f in _ANSWER_FIELDS}
            answer["citations"] = cites_by_query.get(qid, [])
        per_query.append(
            {
                "query_id": qid,
                "match_criterion": rec.get("match_criterion"),
                "scores": {k: v for k, v in rec.items() if k not in meta_cols},
                "hits": hits_by_query.get(qid, []),
                "answer": answer,
                "latency_ms": {"retrieval": out.get("retrieval_ms"), "answer": out.get("answer_ms")},
                "error": out.get("error"),
                "error_class": out.get("error_class"),
                "timed_out": out.get("timed_out"),
                "attempts": out.get("attempts"),
                "scope": out.get("scope"),
            }
        )
    return {
        "run_id": run_id,
        "created_at": info.get("created_at"),
        "pipeline_version": info.get("pipeline_version"),
        "versions": info.get("versions", {}),
        "system": info.get("system", {}),
        "golden": {k: info.get("golden", {}).get(k) for k in ("path", "sha256", "queries")},
        "match": {
            "configured": b.scores.info.get("match", info.get("match")),
            "resolved": b.scores.info.get("match_resolved"),
            "by_query": b.scores.info.get("match_by_query"),
            "warnings": b.scores.info.get("matching_warnings"),
        },
        "metrics": {k: _plain(v) for k, v in b.metrics.metrics.items()},
        "breakdowns": breakdowns,
        "gates": [{k: g[k] for k in ("name", "passed", "value", "threshold")} for g in info.get("gates", [])],
        "per_query": per_query,
    }


def export_trec(store: ArtifactStore, run_id: str, out: Path) -> tuple[Path, Path]:
    """Write ``out`` (TREC run: ``qid Q0 docid rank score tag``) and ``out.qrels`` beside it.

    Document ids are chunk ids (falling back to doc ids); qrels list gold chunk ids
    with their grade, so trec_eval re-scores chunk-level supports exactly.
    """
    b = load_bundle(store, run_id)
    hits = b.retrieval.results.hits.sort_values(["query_id", "rank"])
    docid = hits["chunk_id"].fillna(hits["doc_id"]).fillna(hits["doc_path"])
    # trec_eval orders by score, so write a strictly decreasing pseudo-score from the rank.
    score = (hits["rank"].max() + 1 - hits["rank"]).astype(float) if len(hits) else hits["rank"]
    lines = [
        f"{q} Q0 {d} {r} {s:.6f} {run_id}"
        for q, d, r, s in zip(hits["query_id"], docid, hits["rank"], score, strict=True)
    ]
    atomic.write_text(out, "\n".join(lines) + ("\n" if lines else ""))
    sup = b.golden.supports
    gold = sup["chunk_id"].fillna(sup["doc_id"]).fillna(sup["rel_path"])
    qrels = [
        f"{q} 0 {d} {g}"
        for q, d, g in zip(sup["query_id"], gold, sup["grade"], strict=True)
        if isinstance(d, str)
    ]
    qrels_path = out.with_name(out.name + ".qrels")
    atomic.write_text(qrels_path, "\n".join(qrels) + ("\n" if qrels else ""))
    return out, qrels_path
