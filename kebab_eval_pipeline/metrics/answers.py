"""Per-query answer metrics (SPEC §6 "Answers"), vectorised over the whole run.

Vocabulary used by every definition below (all per query):

- *has an answer*: the outcome says ``answered`` (an answer was requested and produced) and has no
  ``error``. Queries without an answer — answers off, or an errored query (counted by
  ``error_rate`` instead) — score NaN in every answer metric.
- *refused*: has an answer whose ``refused`` flag is true (a null flag counts as not refused).
- *answered*: has an answer and did not refuse (WFGY's "shipped" answers).
- a citation *resolves to a retrieved hit* when a hit of the same query has its ``chunk_id``
  (citations with a chunk id), else has its normalised ``doc_path`` and — when the citation gives
  lines — a line range overlapping the cited one.
- a citation *is gold* when one of the hits it resolves to is relevant — it matches a support with
  a positive grade (the ``matches`` table, i.e. the run's match criterion) — or when the citation
  itself, read as a hit (its chunk id, path and lines), matches such a support under the same
  criterion: an answer may cite gold evidence its retrieval did not return.
- a citation *is real* when its ``chunk_id`` is one of ``known_chunk_ids``; when the system cannot
  list its chunks (``known_chunk_ids is None``) or the citation has no chunk id, when its chunk id
  or normalised ``doc_path`` occurs among the run's hits.
- text tests are case-insensitive substring tests on the answer text.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from kebab_eval_pipeline.metrics.columns import (
    arrow_to_pandas_string,
    contains_each,
    equi_join,
    int_column,
    key_codes,
    lookup_codes,
    string_column,
)
from kebab_eval_pipeline.metrics.matching import fill_range, match_hits, normalise_paths
from kebab_eval_pipeline.metrics.operations import align_outcomes
from kebab_eval_pipeline.metrics.retrieval import _explicit_groups, query_codes
from kebab_eval_pipeline.metrics.settings import MatchCriterion

__all__ = ["ANSWER_COLUMNS", "MIN_CLAIM_CHARS", "answer_scores"]

#: Columns of :func:`answer_scores` (pandas dtypes).
ANSWER_COLUMNS: dict[str, str] = {
    "query_id": "string",
    "refused": "boolean",
    "n_citations": "Int64",
    "refusal_correct": "float64",
    "under_refusal": "float64",
    "over_refusal": "float64",
    "citation_ok": "float64",
    "chr": "float64",
    "answer_precision": "float64",
    "attribution_hit": "float64",
    "groundedness_rule": "float64",
    "recency_ok": "float64",
}
MIN_CLAIM_CHARS = 5


def answer_scores(
    queries: pd.DataFrame,
    supports: pd.DataFrame,
    outcomes: pd.DataFrame,
    citations: pd.DataFrame,
    hits: pd.DataFrame,
    matches: pd.DataFrame,
    known_chunk_ids: frozenset[str] | None = None,
    criterion: MatchCriterion | str = "auto",
    strict_snippet: bool = False,
    resolved: pd.Series | None = None,
) -> pd.DataFrame:
    """One row of answer metrics per query in ``queries`` (same order); see the module docstring.

    Inputs: the golden tables (``queries`` with ``answerable``, ``must_contain``, ``forbidden``,
    ``gold_claim_substr``, ``recency_rule``, ``required_support_groups``; ``supports`` for the
    recency timeline — which hits are gold arrives through ``matches``), the run's ``outcomes``,
    ``citations`` and ``hits`` tables, the matched pairs of
    :func:`~kebab_eval_pipeline.metrics.matching.match_hits`, the system's chunk ids (None when unknown),
    and the run's match criterion / snippet strictness (for citations matched against supports;
    under ``auto``, ``resolved`` is the run's per-query criterion from
    :func:`~kebab_eval_pipeline.metrics.matching.resolve_auto`, so a citation is matched like the hits of
    its query rather than by what citations alone carry).

    Output columns (``ANSWER_COLUMNS``) — each metric is 1.0/0.0 inside its denominator, NaN
    outside it:

    - ``refused`` (boolean, NA without an answer); ``n_citations`` (Int64, NA without an answer).
    - ``refusal_correct`` — denominator: unanswerable queries with an answer; 1 when refused.
    - ``under_refusal`` — same denominator; 1 when answered (should have refused).
    - ``over_refusal`` — denominator: answerable queries with an answer; 1 when refused.
    - ``citation_ok`` (→ ``citation_coverage``) — denominator: answered queries; 1 when there is
      ≥ 1 citation and every citation is real.
    - ``chr`` (citation hit rate) — denominator: answered queries; 1 when there is ≥ 1 citation,
      every citation resolves to a retrieved hit, and at least one citation is gold.
    - ``answer_precision`` — denominator: answered queries; 1 when the query is answerable, the
      answer contains a gold claim (any ``gold_claim_substr`` of ≥ 5 characters after trimming;
      when the query lists no claim substrings, all ``must_contain``; when it lists neither, the
      text test passes) and the ``chr`` condition holds (WFGY: containment ∧ citation hit).
    - ``attribution_hit`` — denominator: answerable, answered queries; 1 when a citation is gold.
    - ``groundedness_rule`` — denominator: answered queries with any ``must_contain`` or
      ``forbidden``; 1 when the answer contains every ``must_contain`` and no ``forbidden`` string.
    - ``recency_ok`` (→ ``recency_correctness``) — denominator: queries with a ``recency_rule``, at
      least one gold support and an answer (a refusal scores 0). The evidence is read as a timeline,
      oldest first: each group of ``required_support_groups`` in order, else each positive-grade
      support in ``support_idx`` order; the last one is the newer evidence. A group is *cited* when a
      citation is gold for one of its supports. ``cite_newer``: the newest group is cited;
      ``cite_both``: every group is cited; ``acknowledge_both``: every group is cited and the answer
      contains every ``must_contain`` string (where curators put the wording that acknowledges the
      conflict).
    """
    qid = query_codes(queries)
    nq = len(qid)
    answerable = queries["answerable"].astype("boolean").fillna(False).to_numpy(dtype=bool)
    out = align_outcomes(queries, outcomes)
    has_answer = out["answered"].to_numpy(dtype=bool) & out["error"].isna().to_numpy()
    refused = has_answer & out["refused"].fillna(False).to_numpy(dtype=bool)
    shipped = has_answer & ~refused

    cit = _citation_facts(
        qid, citations, hits, matches, known_chunk_ids, supports, criterion, strict_snippet, resolved
    )
    n_cit = np.bincount(cit.q, minlength=nq)
    n_real = np.bincount(cit.q[cit.real], minlength=nq)
    n_in_hits = np.bincount(cit.q[cit.in_hits], minlength=nq)
    any_gold = np.bincount(cit.q[cit.gold], minlength=nq) > 0

    chr_ok = (n_cit > 0) & (n_in_hits == n_cit) & any_gold
    real_ok = (n_cit > 0) & (n_real == n_cit)

    text = pc.utf8_lower(string_column(out, "answer_text", empty_as_null=False))
    claim_ok = _claim_ok(queries, text, nq)
    must_all, must_n = _all_contained(queries, "must_contain", text, nq)
    forbidden_any, forbidden_n = _any_contained(queries, "forbidden", text, nq)

    unans = has_answer & ~answerable
    has_rule, newest_cited, all_cited = _recency_facts(queries, supports, qid, cit.cited)
    rule = string_column(queries, "recency_rule").to_numpy(zero_copy_only=False)
    recency_ok = np.where(rule == "cite_newer", newest_cited, all_cited)
    recency_ok &= (rule != "acknowledge_both") | must_all
    frame = pd.DataFrame(
        {
            "query_id": arrow_to_pandas_string(qid),
            "refused": pd.arrays.BooleanArray(refused, ~has_answer),
            "n_citations": pd.arrays.IntegerArray(n_cit.astype(np.int64), ~has_answer),
            "refusal_correct": _score(unans, refused),
            "under_refusal": _score(unans, ~refused),
            "over_refusal": _score(has_answer & answerable, refused),
            "citation_ok": _score(shipped, real_ok),
            "chr": _score(shipped, chr_ok),
            "answer_precision": _score(shipped, answerable & claim_ok & chr_ok),
            "attribution_hit": _score(shipped & answerable, any_gold),
            "groundedness_rule": _score(
                shipped & ((must_n > 0) | (forbidden_n > 0)), must_all & ~forbidden_any
            ),
            "recency_ok": _score(has_answer & has_rule, shipped & recency_ok),
        }
    )
    return frame.astype(ANSWER_COLUMNS)


# --------------------------------------------------------------------------------------------


def _recency_facts(
    queries: pd.DataFrame, supports: pd.DataFrame, qid: pa.Array, cited: tuple[np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per query: (has a recency rule and a timeline, newest group cited, every group cited)."""
    nq = len(qid)
    none = np.zeros(nq, dtype=bool)
    has_rule = ~_nulls(string_column(queries, "recency_rule"))
    if not has_rule.any():
        return none, none, none
    # Timeline groups as (query code, group id, member support_idx); group ids grow along each
    # query's timeline, so a query's newest group is its largest id.
    g_q, g_id, g_member = [], [], []
    explicit = _explicit_groups(queries)
    declared = np.zeros(nq, dtype=bool)
    if explicit is not None:
        eq, eg, em = explicit
        declared[eq] = True
        keep = has_rule[eq]
        g_q.append(eq[keep])
        g_id.append(eg[keep])
        g_member.append(em[keep])
    s_q = lookup_codes(string_column(supports, "query_id"), qid, runs=False)
    s_idx = supports["support_idx"].to_numpy(dtype=np.int64) if len(supports) else np.zeros(0, np.int64)
    grade = supports["grade"].to_numpy(dtype=np.int64) if len(supports) else np.zeros(0, np.int64)
    own = (s_q >= 0) & (grade > 0)
    own[own] = has_rule[s_q[own]] & ~declared[s_q[own]]
    offset = int(max((g.max() for g in g_id if len(g)), default=-1)) + 1
    order = np.lexsort((s_idx[own], s_q[own]))
    g_q.append(s_q[own][order])
    g_id.append(offset + np.arange(int(own.sum()), dtype=np.int64))
    g_member.append(s_idx[own][order])
    q, gid, member = (np.concatenate(parts) for parts in (g_q, g_id, g_member))
    if len(q) == 0:
        return none, none, none
    width = np.int64(max(int(member.max()), int(cited[1].max(initial=0))) + 1)
    is_cited = np.isin(q * width + member, cited[0] * width + cited[1])
    n_groups = int(gid.max()) + 1
    group_q = np.full(n_groups, -1, dtype=np.int64)
    group_q[gid] = q
    group_cited = np.zeros(n_groups, dtype=bool)
    group_cited[gid[is_cited]] = True
    used = group_q >= 0
    groups = np.bincount(group_q[used], minlength=nq)
    cited_groups = np.bincount(group_q[used & group_cited], minlength=nq)
    newest = np.full(nq, -1, dtype=np.int64)
    np.maximum.at(newest, group_q[used], np.flatnonzero(used))
    timeline = groups > 0
    newest_cited = timeline & group_cited[np.maximum(newest, 0)]
    return has_rule & timeline, newest_cited, timeline & (cited_groups == groups)


def _score(denominator: np.ndarray, numerator: np.ndarray) -> np.ndarray:
    return np.where(denominator, numerator.astype(np.float64), np.nan)


class _CitationFacts:
    """Per citation (rows of known queries only): query code and the three boolean facts; plus
    ``cited`` — (query code, support_idx) of every gold support some citation resolves to."""

    def __init__(
        self,
        q: np.ndarray,
        real: np.ndarray,
        in_hits: np.ndarray,
        gold: np.ndarray,
        cited: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> None:
        self.q, self.real, self.in_hits, self.gold = q, real, in_hits, gold
        self.cited = cited if cited is not None else (np.zeros(0, np.int64), np.zeros(0, np.int64))


def _citation_facts(
    qid: pa.Array,
    citations: pd.DataFrame,
    hits: pd.DataFrame,
    matches: pd.DataFrame,
    known_chunk_ids: frozenset[str] | None,
    supports: pd.DataFrame,
    criterion: MatchCriterion | str,
    strict_snippet: bool,
    resolved: pd.Series | None = None,
) -> _CitationFacts:
    c_q = lookup_codes(string_column(citations, "query_id"), qid, runs=False)
    keep = np.flatnonzero(c_q >= 0)
    cit = citations.iloc[keep]
    c_q = c_q[keep]
    n = len(c_q)
    empty = np.zeros(n, dtype=bool)
    if n == 0:
        return _CitationFacts(c_q, empty, empty, empty)
    c_chunk = string_column(cit, "chunk_id")
    c_path = normalise_paths(string_column(cit, "doc_path"))
    by_chunk = ~_nulls(c_chunk)
    by_path = ~by_chunk & ~_nulls(c_path)

    # Citation → retrieved hits of the same query, joined on query codes: the hits' query ids
    # (a Categorical read from the file's dictionary; 10M rows at 1M queries × 10 hits) are never
    # decoded into a string per row — that and the join over them cost the scoring step 600 MiB of
    # its peak at 1M queries. A hit of a query not in ``qid`` (code -1) meets no citation: those
    # were dropped above.
    h_q = key_codes(hits, "query_id", qid, dtype=np.int32 if len(qid) < 2**31 else np.int64)
    c_q_key = c_q.astype(h_q.dtype)
    hit_paths = string_column(hits, "doc_path")
    chunk_rows, path_rows = np.flatnonzero(by_chunk), np.flatnonzero(by_path)
    i1, j1 = equi_join(
        [h_q, string_column(hits, "chunk_id")],
        [c_q_key[chunk_rows], c_chunk.take(pa.array(chunk_rows))],
    )
    j1 = chunk_rows[j1]
    i2, j2 = np.zeros(0, np.int64), np.zeros(0, np.int64)
    if len(path_rows):
        i2, j2 = equi_join(
            [h_q, normalise_paths(hit_paths)],
            [c_q_key[path_rows], c_path.take(pa.array(path_rows))],
        )
        j2 = path_rows[j2]
    path_seen = np.bincount(j2, minlength=n) > 0  # the cited document is among the query's hits
    if len(i2):
        hs, he = fill_range(int_column(hits, "line_start"), int_column(hits, "line_end"))
        cs, ce = fill_range(int_column(cit, "line_start"), int_column(cit, "line_end"))
        has_lines = ~np.isnan(cs[j2])
        overlap = np.minimum(he[i2], ce[j2]) - np.maximum(hs[i2], cs[j2]) + 1 >= 1
        ok = ~has_lines | overlap
        i2, j2 = i2[ok], j2[ok]
    i = np.concatenate([i1, i2])
    j = np.concatenate([j1, j2])
    in_hits = np.bincount(j, minlength=n) > 0
    pair, support_idx = _gold_pairs(h_q, hits, i, matches, qid)
    direct, direct_support = _direct_gold(cit, supports, criterion, strict_snippet, resolved)
    cited_rows = np.concatenate([j[pair], direct])
    gold = np.bincount(cited_rows, minlength=n) > 0
    cited = (c_q[cited_rows], np.concatenate([support_idx, direct_support]))

    # Is the cited chunk real? A citation resolved among its own query's hits certainly is; only
    # the others are looked up in the whole run (or in the system's chunk list).
    real = np.zeros(n, dtype=bool)
    if known_chunk_ids is not None:
        known = pa.array(list(known_chunk_ids), type=pa.large_string())
        real[by_chunk] = pc.is_in(c_chunk.filter(pa.array(by_chunk)), value_set=known).to_numpy(
            zero_copy_only=False
        )
    else:
        real = by_chunk & (np.bincount(j1, minlength=n) > 0)
        todo = by_chunk & ~real
        if todo.any():
            real |= todo & _among_run_values(c_chunk, string_column(hits, "chunk_id"), todo, normalise=False)
    # Path citations (and, when chunk ids are unknown, chunk citations not found so far).
    todo = ~_nulls(c_path) & (~by_chunk if known_chunk_ids is not None else ~real)
    real |= todo & path_seen
    todo &= ~path_seen
    if todo.any():
        real |= todo & _among_run_values(c_path, hit_paths, todo, normalise=True)
    return _CitationFacts(c_q, real, in_hits, gold, cited)


def _direct_gold(
    cit: pd.DataFrame,
    supports: pd.DataFrame,
    criterion: MatchCriterion | str,
    strict_snippet: bool,
    resolved: pd.Series | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Citations (rows of ``cit``) that match a positive-grade support by themselves, read as hits
    (chunk id, path, lines), with the support_idx matched: see the module docstring."""
    none = np.zeros(0, np.int64)
    if len(cit) == 0 or len(supports) == 0:
        return none, none
    # "rank" is the citation's row in ``cit``, so matches map straight back to it.
    as_hits = pd.DataFrame(
        {
            "query_id": cit["query_id"].astype("string").array,
            "rank": np.arange(len(cit), dtype=np.int64),
            **{c: cit[c].array for c in ("chunk_id", "doc_path", "line_start", "line_end")},
        }
    )
    direct = match_hits(
        as_hits, supports, criterion=criterion, strict_snippet=strict_snippet, resolved=resolved
    )
    direct = direct[direct["grade"] > 0]
    return direct["rank"].to_numpy(dtype=np.int64), direct["support_idx"].to_numpy(dtype=np.int64)


def _gold_pairs(
    h_q: np.ndarray, hits: pd.DataFrame, rows: np.ndarray, matches: pd.DataFrame, qid: pa.Array
) -> tuple[np.ndarray, np.ndarray]:
    """For hit rows ``rows`` (whose query codes in ``qid`` are ``h_q[rows]``, all known): every
    (position in ``rows``, support_idx) where the hit matches a support with a positive grade."""
    positive = matches[matches["grade"] > 0] if len(matches) else matches
    if len(rows) == 0 or len(positive) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    i, m = equi_join(
        [h_q[rows], hits["rank"].to_numpy(dtype=np.int64)[rows]],
        [key_codes(positive, "query_id", qid, dtype=h_q.dtype), positive["rank"].to_numpy(dtype=np.int64)],
    )
    return i, positive["support_idx"].to_numpy(dtype=np.int64)[m]


def _among_run_values(
    values: pa.Array, run_values: pa.Array | pa.ChunkedArray, rows: np.ndarray, *, normalise: bool
) -> np.ndarray:
    """Per value (only where ``rows``): does it occur anywhere in ``run_values`` (a hits column)?"""
    out = np.zeros(len(values), dtype=bool)
    wanted = pc.unique(values.filter(pa.array(rows)).drop_null())
    if len(wanted) == 0 or len(run_values) == 0:
        return out
    if normalise:
        present = normalise_paths(pc.unique(run_values.drop_null()))
    else:
        present = pc.unique(run_values.filter(pc.fill_null(pc.is_in(run_values, value_set=wanted), False)))
    out[rows] = pc.fill_null(pc.is_in(values.filter(pa.array(rows)), value_set=present), False).to_numpy(
        zero_copy_only=False
    )
    return out


def _nulls(values: pa.Array) -> np.ndarray:
    return values.is_null().to_numpy(zero_copy_only=False)


def _list_items(queries: pd.DataFrame, column: str) -> tuple[np.ndarray, pa.Array]:
    """(query row, lower-cased item) for every string in a list column (None/NaN rows are empty)."""
    if column not in queries.columns or len(queries) == 0:
        return np.zeros(0, np.int64), pa.array([], type=pa.large_string())
    lists = pa.array(
        queries[column].to_numpy(dtype=object), type=pa.list_(pa.large_string()), from_pandas=True
    )
    rows = pc.list_parent_indices(lists).to_numpy().astype(np.int64)
    items = pc.list_flatten(lists)
    keep = ~_nulls(items)
    return rows[keep], pc.utf8_lower(items.filter(pa.array(keep)))


def _contained(rows: np.ndarray, items: pa.Array, text: pa.Array) -> np.ndarray:
    if len(rows) == 0:
        return np.zeros(0, dtype=bool)
    return contains_each(text.take(pa.array(rows)), items)


def _all_contained(
    queries: pd.DataFrame, column: str, text: pa.Array, nq: int
) -> tuple[np.ndarray, np.ndarray]:
    rows, items = _list_items(queries, column)
    hit = _contained(rows, items, text)
    n = np.bincount(rows, minlength=nq)
    return np.bincount(rows[hit], minlength=nq) == n, n


def _any_contained(
    queries: pd.DataFrame, column: str, text: pa.Array, nq: int
) -> tuple[np.ndarray, np.ndarray]:
    rows, items = _list_items(queries, column)
    hit = _contained(rows, items, text)
    return np.bincount(rows[hit], minlength=nq) > 0, np.bincount(rows, minlength=nq)


def _claim_ok(queries: pd.DataFrame, text: pa.Array, nq: int) -> np.ndarray:
    """Any gold claim substring (≥ 5 chars, trimmed) contained; else all must_contain; else True."""
    rows, items = _list_items(queries, "gold_claim_substr")
    listed = np.bincount(rows, minlength=nq) > 0
    trimmed = pc.utf8_trim_whitespace(items)
    long_enough = pc.utf8_length(trimmed).to_numpy(zero_copy_only=False) >= MIN_CLAIM_CHARS
    rows = rows[long_enough]
    hit = _contained(rows, trimmed.filter(pa.array(long_enough, type=pa.bool_())), text)
    claims = np.bincount(rows[hit], minlength=nq) > 0
    must_all, _ = _all_contained(queries, "must_contain", text, nq)
    return np.where(listed, claims, must_all)
