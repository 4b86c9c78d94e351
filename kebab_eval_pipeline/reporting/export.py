"""Exports of a stored run: one JSON document, or a TREC run file + qrels in one docno space."""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from kebab_eval_pipeline.compare.outcome import run_outcome
from kebab_eval_pipeline.foundation import atomic
from kebab_eval_pipeline.foundation.errors import InputError, Offender
from kebab_eval_pipeline.foundation.json_records import json_records, plain_value
from kebab_eval_pipeline.foundation.run_roles import role_of
from kebab_eval_pipeline.metrics.aggregate import QUERY_META_COLUMNS
from kebab_eval_pipeline.metrics.columns import (
    arrow_to_pandas_string,
    concat_strings,
    lookup_codes,
    string_column,
)
from kebab_eval_pipeline.metrics.flakiness import FLAKINESS_COLUMNS
from kebab_eval_pipeline.metrics.matching import match_hits, normalise_headings
from kebab_eval_pipeline.metrics.repeats import repeats_info
from kebab_eval_pipeline.metrics.retrieval import (
    DEFAULT_RELEVANCE_LEVEL,
    applicable_queries,
    assign_judgements,
    query_codes,
)
from kebab_eval_pipeline.store.runs import RunStore, StoredRun
from kebab_eval_pipeline.systems.base import HIT_COLUMNS, OUTCOME_ANSWER_COLUMNS

#: A hit as exported: every stored hit column but the query id (the hit sits under its query).
_HIT_FIELDS = tuple(c for c in HIT_COLUMNS if c != "query_id")


def export_json(store: RunStore, run_id: str) -> dict[str, Any]:
    """The whole run as one JSON-ready mapping (metrics null where denominators are empty).

    A repeated run (each query asked N > 1 times) has the same shape: its ``metrics`` and
    ``breakdowns`` are the run's headline and each query's ``scores`` its stored per-query means
    over the repeats (see :mod:`~kebab_eval_pipeline.reporting.export_repeats`), plus per query its
    ``flakiness`` columns and ``from_repeat`` (the repeat its hits, answer, latency and error come
    from: they cannot be a mean), and a top-level ``repeats`` object
    (:func:`repeats_document`)."""
    b = store.stored_run(run_id)
    info = b.metrics.info
    repeated = b.retrieval.repeat_count > 1
    flaky_columns = set(FLAKINESS_COLUMNS) if repeated else set()
    comparison = store.manifest("comparison_report", run_id)
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
    meta_cols = {*QUERY_META_COLUMNS, "match_criterion"}
    per_query = []
    for rec in json_records(b.scores.scores):
        qid = rec["query_id"]
        out = outcomes.get(qid, {})
        answer = None
        if out.get("answered"):
            answer = {("text" if f == "answer_text" else f): out.get(f) for f in OUTCOME_ANSWER_COLUMNS}
            answer["citations"] = cites_by_query.get(qid, [])
        entry = {
            "query_id": qid,
            "match_criterion": rec.get("match_criterion"),
            "scores": {k: v for k, v in rec.items() if k not in meta_cols and k not in flaky_columns},
            "hits": hits_by_query.get(qid, []),
            "answer": answer,
            "latency_ms": {"retrieval": out.get("retrieval_ms"), "answer": out.get("answer_ms")},
            "error": out.get("error"),
            "error_class": out.get("error_class"),
            "timed_out": out.get("timed_out"),
            "attempts": out.get("attempts"),
            "scope": out.get("scope"),
        }
        if repeated:  # the scores are means over the repeats; what cannot be a mean is one repeat's
            entry["flakiness"] = {c: rec.get(c) for c in FLAKINESS_COLUMNS}
            entry["from_repeat"] = FROM_REPEAT
        per_query.append(entry)
    document = {
        "run_id": run_id,
        "created_at": info.get("created_at"),
        "pipeline_version": info.get("pipeline_version"),
        "versions": info.get("versions", {}),
        "system": info.get("system", {}),
        # what the run is and whether it passed (its stored comparison's gates included)
        "role": role_of(run_id, info).as_dict(),
        "outcome": run_outcome(info, None if comparison is None else comparison.get("info") or {}).as_dict(),
        "golden": {k: info.get("golden", {}).get(k) for k in ("path", "sha256", "queries")},
        "match": {
            "configured": b.scores.info.get("match", info.get("match")),
            "resolved": b.scores.info.get("match_resolved"),
            "by_query": b.scores.info.get("match_by_query"),
            "warnings": b.scores.info.get("matching_warnings"),
        },
        # a support is relevant from this grade up (trec_eval -l); runs stored before it: 1
        "relevance_level": _relevance_level(b.scores.info),
        "metrics": {k: plain_value(v) for k, v in b.metrics.metrics.items()},
        # metrics null because the run could not carry their inputs: metric → reason
        "not_measured": dict(info.get("not_measured") or {}),
        "breakdowns": breakdowns,
        "gates": [{k: g[k] for k in ("name", "passed", "value", "threshold")} for g in info.get("gates", [])],
        "per_query": per_query,
    }
    if info.get("judge_calibration"):  # the judge against a person's labels: κ, corrected means
        document["judge_calibration"] = info["judge_calibration"]
    # the relevance judge against the golden set; the judge's verdict flips on reordered evidence
    for key in ("judge_relevance_calibration", "judge_self_consistency", "judge_reply_warnings"):
        if info.get(key):
            document[key] = info[key]
    if repeated:
        document["repeats"] = repeats_document(b)
    return document


#: The repeat a repeated run's JSON export takes each query's hits, answer, latency and error from:
#: repeat 1, stored as the run's ordinary retrieval tables.
FROM_REPEAT = 1
#: The per-query fields of the JSON export that are :data:`FROM_REPEAT`'s, not means over repeats.
FROM_REPEAT_FIELDS = (
    "hits",
    "answer",
    "latency_ms",
    "error",
    "error_class",
    "timed_out",
    "attempts",
    "scope",
)


def repeats_document(run: StoredRun) -> dict[str, Any]:
    """The ``repeats`` object of a repeated run's JSON export: ``count``; ``per_query`` (how each
    query's fields were made: ``scores`` means over the repeats, ``from_repeat`` and the fields
    taken from that repeat); ``noise_floor`` per metric, of the stored per-repeat run values
    (:func:`~kebab_eval_pipeline.metrics.repeats.noise_floor`: ``std``, ``se``, ``spread``,
    ``min``, ``max``, ``mean``, ``repeats``); ``flaky_queries``, ``flips`` and ``deterministic``;
    and ``auto`` (why a ``repeat: auto`` run stopped, None for a fixed count)."""
    if run.scores.repeat_metrics is None:
        raise ValueError(f"run {run.run_id} has no per-repeat metrics: it was not repeated")
    count = run.retrieval.repeat_count
    info = repeats_info(run.scores.scores, run.scores.repeat_metrics, count)
    return {
        "count": count,
        "per_query": {
            "scores": "mean over the repeats where the metric applies (first_relevant_rank and "
            "refused: the most frequent value)",
            "from_repeat": FROM_REPEAT,
            "fields_from_repeat": list(FROM_REPEAT_FIELDS),
        },
        "noise_floor": info["noise_floor"],
        "flaky_queries": info["flaky_queries"],
        "flips": info["flips"],
        "deterministic": info["deterministic"],
        "auto": (run.metrics.info.get("repeats") or {}).get("auto"),
    }


#: Columns of the ``<run>.docnos.tsv`` file written beside a TREC export.
DOCNO_COLUMNS = ("qid", "rank", "docno", "chunk_id", "doc_path", "heading_path", "support_idx")


@dataclass(frozen=True)
class TrecExport:
    """A run in one TREC docno space, as tables (see :func:`trec_tables`)."""

    run: pd.DataFrame  # qid, rank, docno, score — one row per hit, queries in golden order, rank order
    qrels: pd.DataFrame  # qid, docno, grade — one row per gold support of each applicable query
    docnos: pd.DataFrame  # DOCNO_COLUMNS — what each run docno stands for

    def write(self, out: Path, tag: str) -> tuple[Path, Path, Path]:
        """Write ``out`` (``qid Q0 docno rank score tag``), ``out.qrels`` (``qid 0 docno grade``) and
        ``out.docnos.tsv``; returns the three paths."""
        bad_tag = re.search(r"\s", tag) or not tag
        if bad_tag:
            raise InputError(
                "cannot write a TREC run", [Offender(str(out), f"run tag {tag!r} is empty or has spaces")]
            )
        r = self.run
        run_lines = _join_lines(
            r["qid"], " Q0 ", r["docno"], " ", _text(r["rank"]), " ", _text(r["score"]), f" {tag}"
        )
        q = self.qrels
        qrels_lines = _join_lines(q["qid"], " 0 ", q["docno"], " ", _text(q["grade"]))
        atomic.write_bytes(out, run_lines)
        qrels_path = out.with_name(out.name + ".qrels")
        atomic.write_bytes(qrels_path, qrels_lines)
        docnos_path = out.with_name(out.name + ".docnos.tsv")
        legend = self.docnos.copy()
        for column in ("qid", "docno", "chunk_id", "doc_path", "heading_path"):
            legend[column] = tsv_escape(legend[column])
        # Escaped: no field holds a tab or line break, so the TSV needs (and has) no quoting.
        text = legend.to_csv(sep="\t", index=False, lineterminator="\n", quoting=csv.QUOTE_NONE)
        atomic.write_text(docnos_path, text)
        return out, qrels_path, docnos_path


def trec_tables(
    queries: pd.DataFrame,
    supports: pd.DataFrame,
    hits: pd.DataFrame,
    criterion: str,
    source: str = "run",
    relevance_level: int = DEFAULT_RELEVANCE_LEVEL,
) -> TrecExport:
    """A run's hits and golden supports in one TREC docno space, so trec_eval (``-l
    relevance_level``) re-scores the run's metrics exactly (``hit@k`` = ``success_k``, ``mrr`` =
    ``recip_rank`` with ``-M mrr_cutoff``, ``precision@k`` = ``P_k``, ``ndcg@k`` = ``ndcg_cut_k``,
    ``recall@k`` = ``recall_k``, ``map`` = ``map``, ``map@k`` = ``map_cut_k``, ``rprec`` =
    ``Rprec``, ``bpref`` = ``bpref``).

    Inputs: the golden ``queries`` and ``supports`` tables, the run's ``hits`` table, the match
    ``criterion`` and relevance level the run was scored with (``source`` names the run in error
    messages).

    The hits are matched to the supports under ``criterion`` (:func:`match_hits`) and assigned
    one-to-one (:func:`assign_judgements`), exactly as the metrics do. A hit assigned support
    ``i`` gets docno ``gold:<i>`` — a hit matching only supports of grade ≤ 0 too: judged
    non-relevant, which ``bpref`` counts; any other hit (no match, or only supports earlier hits
    took) gets ``hit:<rank>``, unique within the query and absent from the qrels: non-relevant,
    and unjudged for ``bpref``. Each hit is one run row, in rank order, with a score strictly
    decreasing in rank. Qrels list every support (grade < 0 written as 0) of each applicable query
    (answerable, ≥ 1 support with grade ≥ ``relevance_level``), once; other queries are left out,
    as the metrics leave them out. A query without hits is absent from the run (trec_eval counts
    it only with ``-c``).

    Raises :class:`InputError` when a query id is empty or contains whitespace (TREC files are
    split on whitespace) or when a query has two hits with the same rank.
    """
    qid = query_codes(queries)
    _check_ids(hits, queries, source)
    hits = hits.reset_index(drop=True)
    h_code = lookup_codes(string_column(hits, "query_id"), qid, runs=False)
    h_rank = hits["rank"].to_numpy(dtype=np.int64)
    order = np.lexsort((h_rank, np.where(h_code >= 0, h_code, len(qid))))  # golden order, then rank
    hits = hits.iloc[order].reset_index(drop=True)
    h_rank = h_rank[order]

    assigned = assign_judgements(match_hits(hits, supports, criterion=criterion))
    keyed = hits[["query_id", "rank"]].astype({"query_id": "string", "rank": "int64"})
    idx = keyed.merge(assigned[["query_id", "rank", "support_idx"]], on=["query_id", "rank"], how="left")
    support_idx = idx["support_idx"].astype("Int64")
    has = support_idx.notna().to_numpy()
    docno = pc.if_else(
        pa.array(has),
        concat_strings("gold:", pc.cast(pa.array(support_idx, type=pa.int64()), pa.large_string())),
        concat_strings("hit:", pc.cast(pa.array(h_rank), pa.large_string())),
    )
    top = int(h_rank.max()) if len(h_rank) else 0
    run = pd.DataFrame(
        {
            "qid": keyed["query_id"],
            "rank": h_rank,
            "docno": arrow_to_pandas_string(docno),
            "score": (top + 1 - h_rank).astype(np.int64),  # trec_eval sorts by score, not by rank
        }
    )

    s_code = lookup_codes(string_column(supports, "query_id"), qid, runs=False)
    grade = supports["grade"].to_numpy(dtype=np.int64) if len(supports) else np.zeros(0, np.int64)
    applicable = applicable_queries(queries, s_code, grade, relevance_level)
    keep = np.flatnonzero((s_code >= 0) & applicable[np.maximum(s_code, 0)])
    sup = supports.iloc[keep]
    s_order = np.lexsort((sup["support_idx"].to_numpy(dtype=np.int64), s_code[keep]))
    sup = sup.iloc[s_order]
    qrels = pd.DataFrame(
        {
            "qid": sup["query_id"].astype("string").to_numpy(),
            "docno": "gold:" + sup["support_idx"].astype("int64").astype(str).to_numpy(dtype=object),
            "grade": np.maximum(sup["grade"].to_numpy(dtype=np.int64), 0),
        }
    ).drop_duplicates(["qid", "docno"])

    heading = (
        normalise_headings(hits["heading_path"])
        if "heading_path" in hits
        else pa.nulls(len(hits), pa.large_string())
    )
    docnos = pd.DataFrame(
        {
            "qid": run["qid"],
            "rank": run["rank"],
            "docno": run["docno"],
            "chunk_id": hits.get("chunk_id", pd.NA),
            "doc_path": hits.get("doc_path", pd.NA),
            "heading_path": arrow_to_pandas_string(heading),
            "support_idx": support_idx.array,
        }
    )
    return TrecExport(run.reset_index(drop=True), qrels.reset_index(drop=True), docnos[list(DOCNO_COLUMNS)])


def export_trec(store: RunStore, run_id: str, out: Path) -> tuple[Path, Path, Path]:
    """Write a stored run as a TREC run file ``out``, its qrels ``out.qrels`` and the docno legend
    ``out.docnos.tsv`` (see :func:`trec_tables`), matched under the run's own stored criterion and
    relevance level (give trec_eval the same ``-l``). Returns the three paths."""
    b = store.stored_run(run_id)
    criterion = b.scores.info.get("match") or "auto"
    export = trec_tables(
        b.golden.queries,
        b.golden.supports,
        b.retrieval.results.hits,
        criterion,
        source=f"run {run_id}",
        relevance_level=_relevance_level(b.scores.info),
    )
    return export.write(out, run_id)


def _relevance_level(info: dict[str, Any]) -> int:
    """The relevance level a run was scored with (runs stored before it was recorded: 1)."""
    return int(info.get("relevance_level") or DEFAULT_RELEVANCE_LEVEL)


def _check_ids(hits: pd.DataFrame, queries: pd.DataFrame, source: str) -> None:
    """TREC files are whitespace-separated: every query id must be one non-empty token, and a
    query's ranks must be distinct (each rank is one docno)."""
    ids = pc.unique(
        pa.chunked_array(
            [
                string_column(queries, "query_id", empty_as_null=False),
                string_column(hits, "query_id", empty_as_null=False),
            ]
        )
    )
    # Any whitespace (TREC readers split on Unicode whitespace too) or control character
    bad = pc.or_kleene(
        pc.equal(pc.utf8_length(ids), 0), pc.match_substring_regex(ids, r"[\s\p{Z}\p{Cc}\x{85}]")
    )
    offenders = [
        Offender(
            source,
            "a TREC query id must be one token: non-empty, without whitespace or control characters",
            query_id=q,
        )
        for q in ids.filter(pc.fill_null(bad, True)).to_pylist()[:10]
    ]
    dup = hits.loc[hits.duplicated(["query_id", "rank"]), ["query_id", "rank"]]
    for q, r in dup.drop_duplicates().head(10).itertuples(index=False):
        offenders.append(Offender(source, f"two hits share rank {int(r)}", query_id=str(q), field="rank"))
    if offenders:
        raise InputError("cannot export the run in TREC format", offenders)


_TSV_SPECIAL = re.compile(r"[\\\x00-\x1f\x7f-\x9f\u2028\u2029]")
_TSV_NAMED = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _tsv_escape_one(value: str) -> str:
    return _TSV_SPECIAL.sub(
        lambda m: (
            _TSV_NAMED.get(m.group())
            or (f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}")
        ),
        value,
    )


def tsv_escape(values: pd.Series) -> pd.Series:
    """Text for one TSV field: backslash → ``\\\\``, tab → ``\\t``, LF → ``\\n``, CR → ``\\r``, any other
    control character or U+2028/U+2029 → ``\\xHH`` / ``\\uHHHH``; missing values stay missing.
    Ids come from the system under test and may hold anything: escaped, each row stays one line of
    the same number of fields (read back with ``codecs.decode(field, "unicode_escape")`` for ASCII)."""
    text = values.astype("string")
    needs = text.str.contains(_TSV_SPECIAL.pattern, regex=True).fillna(False).to_numpy(dtype=bool)
    if needs.any():
        text = text.copy()
        text[needs] = [_tsv_escape_one(v) for v in text[needs]]
    return text


def _text(values: pd.Series) -> pa.Array:
    return pc.cast(pa.array(values.to_numpy(dtype=np.int64)), pa.large_string())


def _join_lines(*parts: pd.Series | pa.Array | str) -> bytes:
    """Elementwise concatenation of the parts into newline-terminated lines, as one UTF-8 buffer
    (straight from Arrow's string data: no per-line Python)."""
    arrays = [
        p
        if isinstance(p, str | pa.Array)
        else string_column(pd.DataFrame({"c": p}), "c", empty_as_null=False)
        for p in parts
    ]
    lines = concat_strings(*arrays, "\n")
    lines = lines.combine_chunks() if isinstance(lines, pa.ChunkedArray) else lines
    if len(lines) == 0:
        return b""
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int64)[lines.offset : lines.offset + len(lines) + 1]
    return lines.buffers()[2].to_pybytes()[int(offsets[0]) : int(offsets[-1])]
