"""Why a run's matching may score zero: warnings that name the field and how many hits lack it.

A system whose hits cannot support what the golden set needs — hits without line ranges against
gold line spans, without heading paths against gold heading paths, without chunk ids against gold
chunk ids, or with document paths that match no gold path (e.g. basenames where the golden set has
relative paths) — scores 0 on the affected queries without anything being wrong with the
system's retrieval. So does a system whose chunks carry a heading path cut short — the parent's
instead of their own section's, as a splitter that drops sub-headings leaves them: told from a
parent section's own text (which rightly carries the parent's path) by how many different chunks
of a document carry that path (:func:`shortened_headings`, :func:`lost_pieces`).
:func:`matching_warnings` finds those cases from the hits and the supports alone (no system
call), so every run, and ``golden validate --config``, can say so.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from kebab_eval_pipeline.metrics.columns import (
    concat_strings,
    equi_join,
    int_column,
    lookup_codes,
    sorted_unique,
    starts_with_each,
    string_column,
    take_rows,
)
from kebab_eval_pipeline.metrics.matching import (
    CARRY_SHARE,
    HEADING_SEPARATOR,
    RESOLVED_CRITERIA,
    criteria_for,
    heading_set,
    hits_carry,
    match_hits,
    normalise_headings,
    normalise_paths,
    resolve_auto,
    support_flags,
)

__all__ = ["lost_pieces", "match_line", "matching_warnings", "shortened_headings", "summarize_criteria"]

#: Per hit field: the criteria that need it when a gold support sets it, and how it is named.
_FIELDS = {
    "lines": (("span", "fields"), "line range (line_start/line_end)", "line spans", "span"),
    "heading_path": (("anchor", "fields"), "heading path (heading_path)", "heading paths", "anchor"),
    "chunk_id": (("chunk", "fields"), "chunk id (chunk_id)", "chunk ids", "chunk"),
}
_FLAG = {"lines": "lines", "heading_path": "heading", "chunk_id": "chunk"}
#: A field most hits carry is still worth a warning when at least this share lack it (fewer — e.g.
#: the preamble chunk of each file, before its first heading — is ordinary and not reported).
PARTIAL_SHARE = 0.25


def summarize_criteria(criteria: pd.Series) -> tuple[str | None, dict[str, int]]:
    """``(resolved, by_query)`` from a per-query criterion column (``query_scores.match_criterion``):
    ``by_query`` counts queries per criterion (NA — queries without supports — not counted, most
    frequent first); ``resolved`` is the single criterion when all counted queries agree, ``mixed``
    when they do not, None when no query has one."""
    # value_counts, not a Counter over the values: one criterion per query, 100k of them at scale
    counts = criteria.dropna().astype(str).value_counts(sort=False)
    by_query = dict(sorted(((str(c), int(n)) for c, n in counts.items()), key=lambda kv: (-kv[1], kv[0])))
    if not by_query:
        return None, {}
    return (next(iter(by_query)) if len(by_query) == 1 else "mixed"), by_query


def match_line(info: dict[str, Any]) -> str | None:
    """One line saying which criterion matched the run: ``auto → anchor (60 queries)`` or, for a
    forced criterion, ``anchor (52 queries)`` — per criterion counts when they differ (None for
    runs stored before this was recorded); a relevance level other than the default 1 follows
    (``; relevant: grade ≥ 2``)."""
    by_query = info.get("match_by_query")
    if by_query is None:
        return None
    configured = info.get("match", "auto")
    counts = ", ".join(f"{c} ({_queries(n)})" for c, n in by_query.items())
    level = int(info.get("relevance_level") or 1)
    relevant = f"; relevant: grade ≥ {level}" if level != 1 else ""
    if configured != "auto":
        if set(by_query) == {configured}:  # a forced criterion applies to every query: name it once
            return f"{configured} ({_queries(by_query[configured])})" + relevant
        return f"{configured}" + (f" ({counts})" if counts else "") + relevant
    return (f"auto → {counts}" if counts else "auto (no query has gold supports)") + relevant


def _queries(n: int) -> str:
    return f"{n} quer{'y' if n == 1 else 'ies'}"


def matching_warnings(
    hits: pd.DataFrame,
    supports: pd.DataFrame,
    criterion: str,
    resolved: pd.Series | None = None,
    matches: pd.DataFrame | None = None,
    matched_any: bool | None = None,
) -> list[dict[str, Any]]:
    """What in the hits keeps them from matching the golden set, one dict per problem.

    Inputs:
        hits: the run's hits table (``HIT_COLUMNS``).
        supports: the golden supports table (``SUPPORT_COLUMNS``); only positive-grade supports
            (grade > 0) count as needing anything.
        criterion: the run's configured criterion (``auto`` or a forced one).
        resolved: under ``auto``, the per-query criteria (``query_id`` → criterion, as
            :func:`~kebab_eval_pipeline.metrics.matching.resolve_auto` returns); default: resolved here.
            Ignored for a forced criterion.
        matches: the run's matched pairs, for the last check; default: matched here when needed.
        matched_any: True when the caller already knows some hit matches a positive support (e.g.
            a query has a first relevant rank), which spares the last check its matching pass.

    Output: a list of dicts with ``field`` (the hit field at fault: ``lines``, ``heading_path``,
    ``chunk_id``, ``doc_path``, ``doc_id``, or ``matches`` for the catch-all), ``hits_lacking``
    (hits without the field, or whose value matches no gold value), ``hits_total``,
    ``supports_needing`` (positive supports that set the gold side of it) and ``message`` (one
    sentence naming the field, the counts and the consequence). Checks, in order:

    - a field gold supports set (line spans, heading paths, chunk ids) that fewer than half the
      hits carry (under ``auto``: which criterion the queries fell back to; under a forced
      criterion that needs it: that it cannot match these hits), or that at least a quarter of the
      hits lack while the criterion applied to those queries needs it (they can never match);
    - document paths: no hit's ``doc_path`` (nor ``doc_id``) equals any gold ``rel_path`` after
      normalisation — with the likely cause when hits carry basenames (``x.md`` for ``docs/x.md``)
      or prefixed paths (``/srv/docs/x.md``); likewise for supports named by ``doc_id`` only;
    - catch-all: the hits are non-empty, positive supports exist, and no hit matches any of them;
    - pieces that lost their heading: at least :data:`LOST_MIN` hits, and :data:`LOST_SHARE` of
      the hits inside gold documents, carry a heading path that is a proper prefix of a gold one
      (:func:`shortened_headings`) which other chunks of the same document carry too
      (:func:`lost_pieces`; field ``heading_path``, ``hits_lacking`` those hits, ``hits_total``
      the hits inside gold documents that carry a heading path). A parent section's own text,
      one chunk, is not counted.

    Empty when nothing is wrong, when there are no hits (an empty run is reported elsewhere) or
    no positive supports. Forced ``chunk`` skips the document checks (paths are not compared).
    """
    n_hits = len(hits)
    if n_hits == 0 or len(supports) == 0:
        return []
    flags = support_flags(supports)
    positive = flags["positive"].to_numpy()
    if not positive.any():
        return []
    qid = string_column(supports, "query_id")
    if criterion == "auto":
        if resolved is None:
            resolved = resolve_auto(hits, supports)
        applied = criteria_for(qid, resolved)
    else:
        applied = np.full(len(supports), criterion, dtype=object)
    qid_values = np.asarray(qid.to_numpy(zero_copy_only=False), dtype=object)
    out: list[dict[str, Any]] = []

    for field, (needing_criteria, what, gold_what, strong) in _FIELDS.items():
        sets = positive & flags[_FLAG[field]].to_numpy()
        if not sets.any():  # skip the column scan (heading lists are the costly one)
            continue
        have, total = hits_carry(hits, (field,))[field]
        lacking = total - have
        if lacking == 0:
            continue
        uses = sets & np.isin(applied, needing_criteria)
        n_sets = int(sets.sum())

        head = f"{lacking} of {total} hits carry no {what}"
        if have < CARRY_SHARE * total:
            if criterion == "auto":
                # Queries whose supports set the field and got a weaker criterion than the one using it.
                per_query = pd.Series(applied[sets]).groupby(qid_values[sets]).first()
                weaker = RESOLVED_CRITERIA[RESOLVED_CRITERIA.index(strong) + 1 :]
                by = Counter(per_query[per_query.isin(weaker)].tolist())
                if not by:
                    continue
                where = ", ".join(f"{c} ({n} quer{'y' if n == 1 else 'ies'})" for c, n in by.most_common())
                zero = "; under 'fields' the supports that set them cannot match" if "fields" in by else ""
                message = f"{head}, but {n_sets} gold supports set {gold_what}: "
                out.append(
                    _warning(
                        field, lacking, total, n_sets, message + f"match: auto fell back to {where}{zero}"
                    )
                )
            elif uses.any():
                message = f"{criterion} matching cannot match these hits: {head}, "
                message += f"and {int(uses.sum())} gold supports need {gold_what}"
                out.append(_warning(field, lacking, total, int(uses.sum()), message))
        elif uses.any() and lacking >= PARTIAL_SHARE * total:
            label = criterion if criterion != "auto" else "/".join(sorted(set(applied[uses])))
            message = f"{head}: under {label} matching those hits can never match the "
            message += f"{int(uses.sum())} gold supports that set {gold_what}"
            out.append(_warning(field, lacking, total, int(uses.sum()), message))

    document_criteria = ("doc", "anchor", "span", "fields")
    by_document = positive & np.isin(applied, document_criteria)
    if by_document.any():
        out += _path_warnings(hits, supports, by_document, hits_carry(hits, ("doc_path", "doc_id")))
    out += _same_document_warnings(supports, positive & (applied == "doc"), qid_values)
    if not out and not matched_any:
        out += _nothing_matched(hits, supports, criterion, resolved, matches, int(positive.sum()))
    out += _shortened_warnings(hits, supports)
    return out


def _same_document_warnings(
    supports: pd.DataFrame, under_doc: np.ndarray, qid: np.ndarray
) -> list[dict[str, Any]]:
    """Queries matched by document whose positive supports name one document more than once (two
    chunks of it, or a snippet beside the bare document). The loader refuses a support given twice;
    these differ under finer criteria, but under ``doc`` they are one document, and each is still a
    relevant item that needs a hit of its own — so one hit of the document recalls only part of
    them. Output: at most one warning, counting the repeated supports, naming the first query."""
    if not under_doc.any():
        return []
    doc = np.asarray(string_column(supports, "doc_id").to_numpy(zero_copy_only=False), dtype=object)
    path = normalise_paths(string_column(supports, "rel_path")).to_numpy(zero_copy_only=False)
    key = np.where(pd.isna(doc), np.asarray(path, dtype=object), doc)
    frame = pd.DataFrame({"q": qid[under_doc], "d": key[under_doc]}).dropna()
    repeated = frame.duplicated(["q", "d"], keep=False)
    if not repeated.any():
        return []
    queries = sorted(set(frame.loc[repeated, "q"]))
    n = int(repeated.sum())
    who = (
        f"{len(queries)} queries matched by document name"
        if len(queries) > 1
        else "1 query matched by document names"
    )
    message = (
        f"{who} one "
        f"document in several supports ({n} supports; first: {queries[0]}): under doc matching each is still "
        "a relevant item that needs a hit of its own, so one hit of that document recalls only part of them "
        "(map, recall, R-precision); give the hits chunk ids or line ranges, or keep one support per document"
    )
    return [_warning("doc_id", 0, 0, n, message)]


def shortened_headings(hits: pd.DataFrame, supports: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Hits whose heading path stops short of the gold section they lie in: ``(inside, shortened)``,
    two bool arrays aligned with ``hits``' rows.

    Inputs: the run's hits table (``query_id``, ``doc_path``/``doc_id``, ``heading_path``) and the
    golden supports table; only positive supports (grade > 0) that name a document and set a
    heading path count.

    - ``inside``: the hit carries a heading path and lies in a document such a support of its
      query names (``rel_path`` ↔ the hit's normalised ``doc_path`` or ``doc_id``, ``doc_id`` ↔
      ``doc_id``);
    - ``shortened``: inside, its heading path is a *proper* whole-heading prefix of such a
      support's heading path (``A`` or ``A > B`` for gold ``A > B > C``), and it lies under none
      of those supports' headings (a hit on a gold section or below it matches; it is not short).

    A splitter that drops sub-headings — a section cut into pieces where only the first keeps the
    section's own heading, the rest carrying the parent's path — leaves many such hits; a correct
    one leaves the parent sections' own text (the lines above their first sub-heading), which can
    be as many hits where several queries share a document: :func:`lost_pieces` tells them apart.
    Vectorised: a hash join on (query, document), headings compared only on the joined pairs.
    """
    n = len(hits)
    inside = np.zeros(n, dtype=bool)
    shortened = np.zeros(n, dtype=bool)
    if n == 0 or len(supports) == 0 or "heading_path" not in hits.columns:
        return inside, shortened
    flags = support_flags(supports)
    rows = np.flatnonzero(flags["positive"] & flags["heading"] & flags["document"])
    if len(rows) == 0:
        return inside, shortened
    carrying = np.flatnonzero(heading_set(hits))
    if len(carrying) == 0:
        return inside, shortened
    take_s = pa.array(rows)
    s_qid = string_column(supports, "query_id").take(take_s)
    s_path = normalise_paths(string_column(supports, "rel_path").take(take_s))
    s_doc = string_column(supports, "doc_id").take(take_s)
    h_qid = take_rows(string_column(hits, "query_id"), carrying)
    h_doc = take_rows(string_column(hits, "doc_id"), carrying)
    pairs = [
        equi_join(
            [h_qid, normalise_paths(take_rows(string_column(hits, "doc_path"), carrying))], [s_qid, s_path]
        ),
        equi_join([h_qid, normalise_paths(h_doc)], [s_qid, s_path]),
        equi_join([h_qid, h_doc], [s_qid, s_doc]),
    ]
    h = np.concatenate([p[0] for p in pairs])
    s = np.concatenate([p[1] for p in pairs])
    if len(h) == 0:
        return inside, shortened
    key = sorted_unique(h * np.int64(len(rows)) + s)  # a document named twice is one pair
    h, s = key // len(rows), key % len(rows)
    hit_rows = carrying[h]
    inside[hit_rows] = True
    hit_heads = concat_strings(
        normalise_headings(hits["heading_path"].to_numpy(dtype=object)[hit_rows]), HEADING_SEPARATOR
    )
    gold_heads = concat_strings(
        normalise_headings(supports["heading_path"].to_numpy(dtype=object)[rows[s]]), HEADING_SEPARATOR
    )
    under = starts_with_each(hit_heads, gold_heads)  # on or below the gold section
    short = starts_with_each(gold_heads, hit_heads) & ~under  # strictly above it
    under_any = np.zeros(n, dtype=bool)
    under_any[hit_rows[under]] = True
    shortened[hit_rows[short]] = True
    shortened &= ~under_any
    return inside, shortened


#: Warn about lost pieces (:func:`lost_pieces`) when there are at least this many of them, and at
#: least :data:`LOST_SHARE` of the hits inside gold documents (that carry a heading path). The floor
#: keeps a handful of queries from warning about one parent section's own text cut in two.
LOST_MIN = 5
#: Measured (benchmarks/bench_heading_diagnostic.py): correct splitters leave 0-0.7 % lost pieces —
#: the reference system over the demo and kebab's documents at chunk sizes 50-1,600 (lexical and
#: hybrid), the documented Haystack, LlamaIndex and LangChain recipes at two or three sizes each —
#: while 9.6-14.2 % of the demo's hits inside gold documents are shortened (its parents' own text).
#: A splitter that drops sub-headings leaves 12.5-64.6 % (LlamaIndex's split nodes read with the
#: heading from their text, at 512 and 128 tokens, with and without line spans) and 8.4-15.8 %
#: (Haystack's and LangChain's Markdown splitters told two heading levels; 4 % for LangChain's at
#: 2,000 characters, where most deeper sections fold whole into one chunk of their parent).
LOST_SHARE = 0.05


def lost_pieces(hits: pd.DataFrame, shortened: np.ndarray) -> np.ndarray:
    """Which shortened hits are pieces of a sub-section that lost its heading: a bool array
    aligned with ``hits``' rows, True only where ``shortened`` is.

    Inputs: the run's hits table — all of it, every query: the test counts chunks across the run
    — and ``shortened`` (:func:`shortened_headings`'s second array).

    A shortened hit is either a parent section's own text (the lines above its first sub-heading,
    which a correct splitter labels with the parent's path) or a piece of a sub-section whose
    heading the splitter dropped. The first is one chunk, or a few at small chunk sizes, however
    many queries retrieve it; the second comes in as many different chunks as that parent's
    sub-sections were cut into. So a shortened hit is a lost piece when **more than one different
    chunk of its document carries exactly its heading path** among the run's hits — unless its
    line span shows it is the parent's own text: it starts above the first line of a chunk of the
    same document whose path lies below its path.

    - Documents: the normalised ``doc_path``, else ``doc_id``.
    - Chunks are told apart by ``chunk_id``, else ``snippet``, else the line span; hits with none
      of them cannot be told apart and count as one chunk per document and path (never lost).
    - The line test needs the hit's ``line_start`` and, in the same document, a hit with a
      ``line_start`` carrying a path below its own; without them it does not apply.

    Vectorised: codes per (document, path) and per chunk, distinct pairs counted with one
    bincount; the line test joins the shortened hits' sections to the sections of their
    documents (distinct sections, not hits).
    """
    lost, _ = _lost_pieces(hits, shortened)
    return lost


def _lost_pieces(hits: pd.DataFrame, shortened: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(lost, chunks)``: :func:`lost_pieces`, and per hit the number of different chunks of its
    document that carry its heading path (0 for hits without a heading path or a document)."""
    n = len(hits)
    lost = np.zeros(n, dtype=bool)
    chunks = np.zeros(n, dtype=np.int64)
    if n == 0 or not shortened.any():
        return lost, chunks
    rows = np.flatnonzero(heading_set(hits))
    doc = pc.coalesce(
        normalise_paths(take_rows(string_column(hits, "doc_path"), rows)),
        take_rows(string_column(hits, "doc_id"), rows),
    )
    # only the documents that hold a shortened hit matter: the rest are never compared
    in_question = _is_in(doc, pc.unique(doc.filter(pa.array(shortened[rows]))))
    rows, doc = rows[in_question], doc.filter(pa.array(in_question))
    # the trailing separator makes a prefix test whole-heading: "A > " is above "A > B > ", not "Ab > "
    head = concat_strings(
        normalise_headings(hits["heading_path"].to_numpy(dtype=object)[rows]), HEADING_SEPARATOR
    )
    section = concat_strings(doc, "\x1f", head)  # null without a document
    sections = pc.unique(section).drop_null()
    code = lookup_codes(section, sections, runs=False)
    has = code >= 0
    chunk = _chunk_identity(hits, rows)
    chunk_code = lookup_codes(chunk, pc.unique(chunk), runs=False)
    width = np.int64(chunk_code.max() + 1)
    pairs = sorted_unique(code[has].astype(np.int64) * width + chunk_code[has])
    per_section = np.bincount(pairs // width, minlength=len(sections))
    counted = np.where(has, per_section[np.maximum(code, 0)], 0)
    chunks[rows] = counted

    # The line test: the first line of a chunk below each shortened hit's path, in its document.
    start = int_column(hits, "line_start")[rows]
    lined = has & ~np.isnan(start)
    first_line = np.full(len(sections), np.inf)
    np.fmin.at(first_line, code[lined], start[lined])
    first_row = np.full(len(sections), -1, dtype=np.int64)
    first_row[code[has][::-1]] = np.flatnonzero(has)[::-1]  # one row per section (its first)
    suspects = shortened[rows] & (counted >= 2)
    targets = sorted_unique(code[suspects & lined])
    known = np.flatnonzero(np.isfinite(first_line))
    below_start = np.full(len(sections), np.inf)
    if len(targets) and len(known):
        t_rows, k_rows = pa.array(first_row[targets]), pa.array(first_row[known])
        i, j = equi_join([doc.take(t_rows)], [doc.take(k_rows)])
        below = starts_with_each(head.take(k_rows).take(pa.array(j)), head.take(t_rows).take(pa.array(i)))
        below &= known[j] != targets[i]
        np.fmin.at(below_start, targets[i[below]], first_line[known[j[below]]])
    first_below = below_start[np.maximum(code, 0)]
    # no line, or no chunk below the path seen in its document (inf): the line test does not apply
    above = lined & np.isfinite(first_below) & (start < first_below)
    lost[rows] = suspects & ~above
    return lost, chunks


def _chunk_identity(hits: pd.DataFrame, rows: np.ndarray) -> pa.Array:
    """What tells ``hits``' chunks (at ``rows``) apart: ``chunk_id``, else ``snippet``, else the
    line span; ``""`` when a hit has none of them."""
    lines = [
        pc.cast(pa.array(int_column(hits, c)[rows], from_pandas=True), pa.int64()).cast(pa.large_string())
        for c in ("line_start", "line_end")
    ]
    return pc.fill_null(
        pc.coalesce(
            concat_strings("id\x1f", take_rows(string_column(hits, "chunk_id"), rows)),
            concat_strings("text\x1f", take_rows(string_column(hits, "snippet"), rows)),
            concat_strings("lines\x1f", lines[0], "-", pc.coalesce(lines[1], lines[0])),
        ),
        "",
    )


def _shortened_warnings(hits: pd.DataFrame, supports: pd.DataFrame) -> list[dict[str, Any]]:
    inside, shortened = shortened_headings(hits, supports)
    lost, chunks = _lost_pieces(hits, shortened)
    n_lost, n_inside = int(lost.sum()), int(inside.sum())
    if n_lost < LOST_MIN or n_lost < LOST_SHARE * n_inside:
        return []
    # the example: the lost piece whose path the most chunks of its document carry
    i = int(np.flatnonzero(lost)[np.argmax(chunks[lost])])
    example = HEADING_SEPARATOR.join(map(str, hits["heading_path"].iloc[i]))
    document = hits["doc_path"].iloc[i] if "doc_path" in hits.columns else None
    if document is None or document is pd.NA:
        document = hits["doc_id"].iloc[i]
    message = (
        f"{n_lost} of {n_inside} hits inside gold documents carry a heading path that is a proper prefix "
        f"of a gold heading path and that other chunks of the same document carry too (e.g. {example!r} "
        f"in {document!r}, carried by {int(chunks[i])} different chunks of the run): the signature of a "
        "splitter that drops sub-headings — a section cut into pieces where only the first keeps its own "
        "heading and the rest carry their parent's (a parent section's own text, above its first "
        "sub-heading, is one chunk and is not counted). Those hits cannot match the section they come "
        "from under anchor matching, and golden suggest leaves them out; fix the system's response "
        "mapping (or its splitter) so every chunk carries its full section path"
    )
    return [_warning("heading_path", n_lost, n_inside, _supports_above(hits, supports, lost), message)]


def _supports_above(hits: pd.DataFrame, supports: pd.DataFrame, shortened: np.ndarray) -> int:
    """How many positive gold supports of the queries with a shortened hit set a heading path."""
    flags = support_flags(supports)
    queries = set(hits["query_id"].to_numpy(dtype=object)[shortened])
    named = np.isin(supports["query_id"].to_numpy(dtype=object), list(queries))
    return int((named & flags["positive"].to_numpy() & flags["heading"].to_numpy()).sum())


def _warning(field: str, lacking: int, total: int, needing: int, message: str) -> dict[str, Any]:
    return {
        "field": field,
        "hits_lacking": int(lacking),
        "hits_total": int(total),
        "supports_needing": int(needing),
        "message": message,
    }


def _path_warnings(
    hits: pd.DataFrame, supports: pd.DataFrame, rows: np.ndarray, carry: dict
) -> list[dict[str, Any]]:
    """Gold documents (rel_path, else doc_id) that no hit names."""
    out: list[dict[str, Any]] = []
    n = len(hits)
    take = pa.array(np.flatnonzero(rows))
    gold_paths = pc.unique(normalise_paths(string_column(supports, "rel_path").take(take)).drop_null())
    gold_ids = string_column(supports, "doc_id").take(take)
    path_rows = ~string_column(supports, "rel_path").take(take).is_null().to_numpy(zero_copy_only=False)
    gold_ids = pc.unique(gold_ids.filter(pa.array(~path_rows)).drop_null())
    hit_paths = normalise_paths(string_column(hits, "doc_path"))
    hit_ids = string_column(hits, "doc_id")
    if len(gold_paths):
        needing = int(path_rows.sum())
        named = _is_in(hit_paths, gold_paths) | _is_in(normalise_paths(hit_ids), gold_paths)
        if not named.any():
            out.append(
                {
                    "field": "doc_path",
                    "hits_lacking": n,
                    "hits_total": n,
                    "supports_needing": needing,
                    "message": _path_message(hit_paths, gold_paths, n, needing, carry["doc_path"][0]),
                }
            )
    if len(gold_ids):
        needing = int((~path_rows).sum())
        if not _is_in(hit_ids, gold_ids).any():
            have = carry["doc_id"][0]
            example = _first(hit_ids)
            detail = (
                f"no hit's doc_id equals any gold doc_id (e.g. hit {example!r}, gold {_first(gold_ids)!r})"
                if have
                else "no hit carries a doc_id"
            )
            out.append(
                {
                    "field": "doc_id",
                    "hits_lacking": n,
                    "hits_total": n,
                    "supports_needing": needing,
                    "message": f"{detail}: the {needing} gold supports named by doc_id alone cannot match "
                    f"any of the {n} hits",
                }
            )
    return out


def _path_message(hit_paths: pa.Array, gold_paths: pa.Array, n: int, needing: int, have: int) -> str:
    tail = f"the {needing} gold supports named by rel_path cannot match any of the {n} hits"
    if have == 0:
        return f"no hit carries a document path (doc_path): {tail}"
    # Haystack's default (store_full_path=False) keeps only the file name.
    hit_base = pc.replace_substring_regex(hit_paths, r"^.*/", "")
    gold_base = pc.replace_substring_regex(gold_paths, r"^.*/", "")
    same_base = _is_in(hit_base, gold_base)
    if same_base.any():
        i = int(np.flatnonzero(same_base)[0])
        hit_example = hit_paths[i].as_py()
        gold_example = gold_paths[int(pc.index(gold_base, hit_base[i]).as_py())].as_py()
        kind = "basenames" if "/" not in hit_example else "paths with another prefix"
        return (
            f"no hit's doc_path matches any gold rel_path: {int(same_base.sum())} of {n} hits carry {kind} "
            f"(e.g. {hit_example!r}) where the golden set has relative paths (e.g. {gold_example!r}); "
            f"{tail}"
        )
    return (
        f"no hit's doc_path matches any gold rel_path (e.g. hit {_first(hit_paths)!r}, "
        f"gold {_first(gold_paths)!r}): {tail}"
    )


def _nothing_matched(
    hits: pd.DataFrame,
    supports: pd.DataFrame,
    criterion: str,
    resolved: pd.Series | None,
    matches: pd.DataFrame | None,
    n_positive: int,
) -> list[dict[str, Any]]:
    if matches is None:
        matches = match_hits(hits, supports, criterion=criterion, resolved=resolved)
    if len(matches) and bool((matches["grade"] > 0).any()):
        return []
    label = "auto" if criterion == "auto" else criterion
    return [
        {
            "field": "matches",
            "hits_lacking": len(hits),
            "hits_total": len(hits),
            "supports_needing": n_positive,
            "message": f"none of the {len(hits)} hits matches any of the {n_positive} gold supports "
            f"under {label} matching: every retrieval score is 0",
        }
    ]


def _is_in(values: pa.Array, value_set: pa.Array) -> np.ndarray:
    if len(values) == 0:
        return np.zeros(0, dtype=bool)
    return pc.fill_null(pc.is_in(values, value_set=value_set), False).to_numpy(zero_copy_only=False)


def _first(values: pa.Array) -> str | None:
    values = values.drop_null()
    return values[0].as_py() if len(values) else None
