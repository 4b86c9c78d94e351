"""Relevance judgments (qrels) in the three standard layouts, read into one list of judgments.

* ``trec`` — ``qid iter docno rel`` per line, whitespace-separated (trec_eval's qrels; what
  ``ir_datasets export DATASET qrels`` writes). ``iter`` is ignored, as trec_eval does.
* ``beir`` — BEIR's ``qrels/<split>.tsv``: a header line ``query-id<TAB>corpus-id<TAB>score``,
  then one judgment per line.
* ``ranx`` — ranx / ir_measures JSON: ``{qid: {docid: rel}}``.

Every judgment keeps its grade as given (0 = judged non-relevant, which stays a judgment;
negative grades too). Bad input is collected, never raised one at a time: each offender names
the file, the line, the field and why (a relevance that is not an integer or outside a 32-bit
int, a missing column, an id that cannot be a TREC id, a judgment given twice).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kebab_eval_pipeline.foundation.errors import Offender
from kebab_eval_pipeline.foundation.yaml_io import YamlPositions, id_problem
from kebab_eval_pipeline.golden.model import GRADE_BOUND

BEIR_HEADER = ("query-id", "corpus-id", "score")
_INTEGER = re.compile(r"[+-]?[0-9]+")


@dataclass(frozen=True)
class Judgment:
    """One qrels entry: ``qid`` judged ``docno`` at grade ``rel``; ``where`` is its position."""

    qid: str
    docno: str
    rel: int
    where: str  # "line 12" (or a JSON key path when the line is unknown)


def _grade(value: Any) -> tuple[int | None, str | None]:
    """(the relevance as an int, None) or (None, why it is not one)."""
    if isinstance(value, bool):
        return None, f"relevance must be an integer, got {value!r}"
    if isinstance(value, str):
        if not _INTEGER.fullmatch(value):
            return None, f"relevance must be an integer, got {value[:40]!r}"
        value = int(value)
    elif not isinstance(value, int):
        return None, f"relevance must be an integer, got {value!r}"[:120]
    if not -GRADE_BOUND <= value <= GRADE_BOUND:
        return None, f"relevance {value} is not between {-GRADE_BOUND} and {GRADE_BOUND}"[:120]
    return value, None


TREC_FIELDS = ("qid", "docno", "rel")
BEIR_FIELDS = BEIR_HEADER
RANX_FIELDS = ("qid", "docid", "rel")


def _judgment(
    file: str,
    where: str,
    qid: str,
    docno: str,
    rel: Any,
    seen: dict,
    out: list,
    offenders: list,
    names: tuple[str, str, str] = TREC_FIELDS,
) -> None:
    """Check one judgment and add it to ``out`` (or its problems to ``offenders``, each naming its
    field by the layout's own column ``names``)."""
    problems = []
    if (problem := id_problem(qid, query_id=True)) or not qid:
        problems.append((names[0], f"query id {problem or 'is empty'}"))
    if (problem := id_problem(docno)) or not docno.strip():
        problems.append((names[1], f"document id {problem or 'is empty'}"))
    grade, reason = _grade(rel)
    if reason:
        problems.append((names[2], reason))
    if not problems and (qid, docno) in seen:
        problems.append((names[1], f"judged twice for this query (first at {seen[(qid, docno)]})"))
    if problems:
        offenders += [
            Offender(file, reason, position=where, query_id=qid or None, field=name)
            for name, reason in problems
        ]
        return
    seen[(qid, docno)] = where
    out.append(Judgment(qid, docno, grade, where))


def read_trec_qrels(path: Path, text: str) -> tuple[list[Judgment], list[Offender]]:
    """``qid iter docno rel`` lines → judgments, plus every offender (blank lines are skipped)."""
    out: list[Judgment] = []
    offenders: list[Offender] = []
    seen: dict = {}
    for n, line in enumerate(text.split("\n"), start=1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 4:
            offenders.append(
                Offender(
                    str(path),
                    f"expected 4 columns (qid iter docno rel), got {len(parts)}",
                    position=f"line {n}",
                    query_id=parts[0],
                    field=("qid", "iter", "docno", "rel")[len(parts)] if len(parts) < 4 else None,
                )
            )
            continue
        qid, _, docno, rel = parts
        _judgment(str(path), f"line {n}", qid, docno, rel, seen, out, offenders)
    return out, offenders


def read_beir_qrels(path: Path, text: str) -> tuple[list[Judgment], list[Offender]]:
    """BEIR ``query-id<TAB>corpus-id<TAB>score`` TSV (header first) → judgments and offenders."""
    out: list[Judgment] = []
    offenders: list[Offender] = []
    seen: dict = {}
    lines = text.split("\n")
    header = lines[0].rstrip("\r").split("\t") if lines else []
    if tuple(h.strip() for h in header) != BEIR_HEADER:
        offenders.append(
            Offender(
                str(path),
                f"expected the header 'query-id<TAB>corpus-id<TAB>score', got {lines[0][:80]!r}",
                position="line 1",
            )
        )
        return out, offenders
    for n, line in enumerate(lines[1:], start=2):
        line = line.rstrip("\r")
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) != 3:
            offenders.append(
                Offender(
                    str(path),
                    f"expected 3 tab-separated columns (query-id corpus-id score), got {len(parts)}",
                    position=f"line {n}",
                    query_id=parts[0] or None,
                    field=BEIR_FIELDS[len(parts)] if len(parts) < 3 else None,
                )
            )
            continue
        qid, docno, score = (p.strip() for p in parts)
        _judgment(str(path), f"line {n}", qid, docno, score, seen, out, offenders, BEIR_FIELDS)
    return out, offenders


def read_ranx_qrels(path: Path, doc: Any, text: str) -> tuple[list[Judgment], list[Offender]]:
    """ranx / ir_measures ``{qid: {docid: rel}}`` (already parsed as ``doc``) → judgments, offenders."""
    out: list[Judgment] = []
    offenders: list[Offender] = []
    seen: dict = {}
    positions = YamlPositions(text)  # composed only if an offender needs a line

    def where(*keys: str) -> str:
        line = positions.line_of(list(keys))
        return f"line {line}" if line else "".join(f"[{k!r}]" for k in keys)

    if not isinstance(doc, dict):
        return out, [
            Offender(str(path), "expected an object {qid: {docid: relevance}}", position="top level")
        ]
    for qid, docs in doc.items():
        if not isinstance(docs, dict):
            offenders.append(
                Offender(
                    str(path),
                    f"expected an object {{docid: relevance}}, got {type(docs).__name__}",
                    position=where(qid),
                    query_id=qid,
                )
            )
            continue
        for docno, rel in docs.items():
            _judgment(str(path), where(qid, docno), qid, docno, rel, seen, out, offenders, RANX_FIELDS)
    return out, offenders


def looks_like_trec_qrels(first_line: str) -> bool:
    """A first line of four whitespace-separated fields ending in an integer."""
    parts = first_line.split()
    return len(parts) == 4 and _INTEGER.fullmatch(parts[3]) is not None


def looks_like_beir_qrels(first_line: str) -> bool:
    return tuple(h.strip() for h in first_line.rstrip("\r").split("\t")) == BEIR_HEADER
