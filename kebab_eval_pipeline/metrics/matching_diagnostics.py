"""Why a run's matching may score zero: warnings that name the field and how many hits lack it.

A system whose hits cannot support what the golden set needs — hits without line ranges against
gold line spans, without heading paths against gold heading paths, without chunk ids against gold
chunk ids, or with document paths that match no gold path (e.g. basenames where the golden set has
relative paths) — scores 0 on the affected queries without anything being wrong with the
system's retrieval. :func:`matching_warnings` finds those cases from the hits and the supports
alone (no system call), so every run, and ``golden validate --config``, can say so.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from kebab_eval_pipeline.metrics.columns import string_column
from kebab_eval_pipeline.metrics.matching import (
    CARRY_SHARE,
    RESOLVED_CRITERIA,
    criteria_for,
    hits_carry,
    match_hits,
    normalise_paths,
    resolve_auto,
    support_flags,
)

__all__ = ["match_line", "matching_warnings", "summarize_criteria"]

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
    - catch-all: the hits are non-empty, positive supports exist, and no hit matches any of them.

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
    if not out and not matched_any:
        out += _nothing_matched(hits, supports, criterion, resolved, matches, int(positive.sum()))
    return out


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
