"""Ranked runs in the standard IR layouts, read as replay rankings in trec_eval's order.

* ``trec`` — ``qid Q0 docno rank score tag`` per line (trec_eval's run format).
* ``ranx`` — ranx / ir_measures JSON run: ``{qid: {docid: score}}``.

trec_eval never reads the rank column: it orders each query's documents by score, highest
first, and breaks ties by docno in *descending* byte order (``form_res_rels.c``,
``comp_sim_docno``: ``strcmp(p2->docno, p1->docno)``); pytrec_eval does the same. A replayed
ranking is ordered that way too, so our metrics and trec_eval's agree on the same files, and a
warning counts the queries whose file ranks say otherwise. Bad input — a missing column, a
score that is not a finite number, a rank that is not an integer, a document listed twice for
one query (trec_eval refuses it too) — is collected and raised at once, every offender named.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from kebab_eval_pipeline.foundation.errors import Offender
from kebab_eval_pipeline.foundation.yaml_io import YamlPositions, id_problem

RUN_FORMATS = ("trec", "ranx")
# A decimal number as trec_eval's atof reads one (no "inf"/"nan", no Python-only "1_000").
_NUMBER = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
_INTEGER = re.compile(r"[+-]?[0-9]+")

#: The columns of a run as read: one row per (query, document), in file order.
RUN_COLUMNS = {"qid": "object", "docno": "object", "score": "float64", "rank": "float64", "where": "object"}


@dataclass
class Ranking:
    """One query's documents in trec_eval's order (score descending, ties by docno descending)."""

    docnos: list[str]
    scores: list[float]
    where: str  # the position of the query's first line


def looks_like_trec_run(first_line: str) -> bool:
    parts = first_line.split()
    return (
        len(parts) == 6
        and _INTEGER.fullmatch(parts[3]) is not None
        and _NUMBER.fullmatch(parts[4]) is not None
    )


def looks_like_ranx_run(doc: Any) -> bool:
    """A parsed JSON document shaped as a ranx run: an object of query objects, at least one of
    them scoring a document (``{"": {}}`` — a broken export, say — is not a run)."""
    return (
        isinstance(doc, dict)
        and bool(doc)
        and all(isinstance(v, dict) for v in doc.values())
        and any(
            isinstance(s, int | float) and not isinstance(s, bool) for v in doc.values() for s in v.values()
        )
    )


def _row_problems(qid: str, docno: str) -> list[tuple[str, str]]:
    problems = []
    if problem := id_problem(qid, query_id=True):
        problems.append(("qid", f"query id {problem}"))
    if problem := id_problem(docno):
        problems.append(("docno", f"document id {problem}"))
    return problems


# Anything but printable ASCII, tab and newline (a control character, a CR, non-ASCII text whose
# whitespace str.split would see) sends the file to the line-by-line reader.
_ODD_TEXT = re.compile(r"[^\x20-\x7e\t\n]")


def _fast_trec_run(text: str) -> pd.DataFrame | None:
    """The run table read column by column (pandas' C parser, vectorised checks), or None when
    any line needs a closer look (a bad or odd field, a short or long line, a duplicate): the
    line-by-line reader then names every offender. Positions are not kept here: none is needed."""
    import csv
    import io

    if _ODD_TEXT.search(text):
        return None
    try:
        raw = pd.read_csv(
            io.StringIO(text),
            sep=r"\s+",
            header=None,
            names=["qid", "q0", "docno", "rank", "score", "tag"],
            dtype=str,
            na_filter=False,
            quoting=csv.QUOTE_NONE,
            engine="c",
        )
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError):
        return None
    if raw.empty:
        return None
    if raw["tag"].str.len().eq(0).any():  # a short line (a long one failed to parse)
        return None
    ok = raw["rank"].str.fullmatch(_INTEGER.pattern) & raw["score"].str.fullmatch(_NUMBER.pattern)
    if not ok.all():
        return None
    scores = raw["score"].astype("float64").to_numpy()
    if not np.isfinite(scores).all():  # 1e999 overflows to inf
        return None
    frame = pd.DataFrame(
        {
            "qid": raw["qid"].astype(object),
            "docno": raw["docno"].astype(object),
            "score": scores,
            "rank": raw["rank"].astype("float64"),
            "where": "",
        }
    ).astype(RUN_COLUMNS)
    if frame.duplicated(["qid", "docno"]).any():
        return None
    return frame


def read_trec_run(path: Path, text: str, fast: bool = True) -> tuple[pd.DataFrame, list[Offender]]:
    """``qid Q0 docno rank score tag`` lines → the run table (:data:`RUN_COLUMNS`) and every offender.

    A clean file is read column by column; a file with any problem (or ``fast=False``) line by
    line, so every offender is named with its line."""
    table = _fast_trec_run(text) if fast else None
    if table is not None:
        return table, []
    rows: list[tuple[str, str, float, float, str]] = []
    offenders: list[Offender] = []
    for n, line in enumerate(text.split("\n"), start=1):
        parts = line.split()
        if not parts:
            continue
        where = f"line {n}"
        if len(parts) != 6:
            offenders.append(
                Offender(
                    str(path),
                    f"expected 6 columns (qid Q0 docno rank score tag), got {len(parts)}",
                    position=where,
                    query_id=parts[0],
                )
            )
            continue
        qid, _, docno, rank, score, _ = parts
        problems = _row_problems(qid, docno)
        if not _INTEGER.fullmatch(rank):
            problems.append(("rank", f"rank must be an integer, got {rank[:40]!r}"))
        value = float(score) if _NUMBER.fullmatch(score) else math.nan
        if not math.isfinite(value):
            problems.append(("score", f"score must be a finite number, got {score[:40]!r}"))
        if problems:
            offenders += [Offender(str(path), r, position=where, query_id=qid, field=f) for f, r in problems]
            continue
        rows.append((qid, docno, value, float(rank), where))
    return _frame(rows), offenders


def read_ranx_run(path: Path, doc: Any, text: str) -> tuple[pd.DataFrame, list[Offender]]:
    """ranx ``{qid: {docid: score}}`` (parsed as ``doc``) → the run table and every offender."""
    rows: list[tuple[str, str, float, float, str]] = []
    offenders: list[Offender] = []
    positions = YamlPositions(text)  # composed only when an offender needs a line

    def where(*keys: str) -> str:
        line = positions.line_of(list(keys))
        return f"line {line}" if line else "".join(f"[{k!r}]" for k in keys)

    if not isinstance(doc, dict):
        return _frame(rows), [
            Offender(str(path), "expected an object {qid: {docid: score}}", position="top level")
        ]
    for qid, docs in doc.items():
        if not isinstance(docs, dict):
            offenders.append(
                Offender(str(path), "expected an object {docid: score}", position=where(qid), query_id=qid)
            )
            continue
        for docno, score in docs.items():
            problems = _row_problems(qid, docno)
            number = isinstance(score, int | float) and not isinstance(score, bool)
            try:
                value = float(score) if number else math.nan
            except OverflowError:  # an integer past the float range
                value = math.inf
            if not math.isfinite(value):
                problems.append(("score", f"score must be a finite number, got {str(score)[:40]!r}"))
            if problems:
                offenders += [
                    Offender(str(path), r, position=where(qid, docno), query_id=qid, field=f)
                    for f, r in problems
                ]
                continue
            # no rank column; positions are looked up only for offenders (a JSON key is never twice)
            rows.append((qid, docno, value, math.nan, ""))
    return _frame(rows), offenders


def _frame(rows: list[tuple]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=list(RUN_COLUMNS))
    return frame.astype(RUN_COLUMNS)


def duplicate_offenders(path: Path, run: pd.DataFrame) -> list[Offender]:
    """A document listed twice for one query (trec_eval stops on it: 'duplicate docs')."""
    twice = run.duplicated(["qid", "docno"], keep="first")
    if not twice.any():
        return []
    first = run.drop_duplicates(["qid", "docno"]).set_index(["qid", "docno"])["where"]
    out = []
    for qid, docno, where in run.loc[twice, ["qid", "docno", "where"]].itertuples(index=False):
        seen = first.get((qid, docno), "")
        out.append(
            Offender(
                str(path),
                f"document {docno!r} listed twice for this query" + (f" (first at {seen})" if seen else ""),
                position=where or None,
                query_id=qid,
                field="docno",
            )
        )
    return out


def rankings(run: pd.DataFrame) -> tuple[dict[str, Ranking], list[str]]:
    """Each query's ranking in trec_eval's order, and the queries whose file ranks disagree with it.

    Queries keep the order of their first line. Docnos tie-break in descending code-point order,
    which is UTF-8 byte order, as ``strcmp`` compares."""
    if run.empty:
        return {}, []
    first_seen = pd.Index(pd.unique(run["qid"].to_numpy()))
    ordered = run.assign(_q=first_seen.get_indexer(run["qid"])).sort_values(
        ["_q", "score", "docno"], ascending=[True, False, False], kind="stable"
    )
    qids = ordered["qid"].to_numpy()
    starts = np.flatnonzero(np.r_[True, qids[1:] != qids[:-1]])
    ends = np.r_[starts[1:], len(qids)]
    docnos = ordered["docno"].tolist()
    scores = ordered["score"].tolist()
    wheres = run.drop_duplicates("qid").set_index("qid")["where"]
    out = {
        qids[s]: Ranking(docnos[s:e], scores[s:e], wheres.get(qids[s], ""))
        for s, e in zip(starts, ends, strict=True)
    }
    # File ranks that do not increase along trec_eval's order (a TREC run only; ranx has none).
    ranks = ordered["rank"].to_numpy()
    same = np.r_[False, qids[1:] == qids[:-1]]
    disorder = same & ~(np.r_[np.inf, np.diff(ranks)] > 0) & ~np.isnan(ranks)
    disagree = list(pd.unique(qids[disorder]))
    return out, disagree
