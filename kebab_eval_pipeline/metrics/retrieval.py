"""Per-query retrieval metrics (SPEC §6 "Retrieval"), vectorised over the whole run.

Everything is computed from integer query codes with NumPy: the hits table is touched only to count
hits per query and, for document recall, to look up the documents the gold supports name.

Hits are credited through a *one-to-one assignment* of hits to gold supports
(:func:`assign_supports`): in rank order, each hit takes the best still-unassigned positive support
it matches. ``precision@k``, ``ndcg@k``, ``recall@k``, ``map``, ``rprec`` and ``bpref`` count
assigned hits only, which is exactly what trec_eval computes on qrels and a run written in the
assignment's docno space (:func:`assign_judgements`, what ``kebab-eval export --format trec``
writes) — see ``tests/metrics/test_trec_crosscheck.py``. A relevance level (trec_eval ``-l``)
decides which grades are relevant.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from kebab_eval_pipeline.metrics.columns import (
    arrow_to_pandas_string,
    concat_strings,
    equi_join,
    key_counts,
    lookup_codes,
    sorted_unique,
    string_column,
    take_rows,
)
from kebab_eval_pipeline.metrics.matching import MATCH_COLUMNS, normalise_paths
from kebab_eval_pipeline.metrics.settings import DEFAULT_KS

__all__ = [
    "ASSIGNMENT_COLUMNS",
    "DEFAULT_RELEVANCE_LEVEL",
    "RETRIEVAL_AT_K",
    "RETRIEVAL_FULL",
    "SCORING_VERSION",
    "applicable_queries",
    "assign_judgements",
    "assign_supports",
    "check_ks",
    "check_relevance_level",
    "query_codes",
    "retrieval_columns",
    "retrieval_scores",
]

#: The per-k retrieval metrics, in column order (``hit@1, hit@3, …, recall@1, …``).
RETRIEVAL_AT_K: tuple[str, ...] = (
    "hit",
    "recall",
    "doc_recall",
    "recall_any",
    "recall_all",
    "precision",
    "ndcg",
    "map",
    "judged",
)
#: The retrieval metrics without a cut-off after ``mrr``, in column order (each over every hit).
RETRIEVAL_FULL: tuple[str, ...] = ("map", "rprec", "bpref")
#: Default relevance level: a support is relevant at grade ≥ 1 (trec_eval's default ``-l 1``).
DEFAULT_RELEVANCE_LEVEL = 1
#: Version of the retrieval metric definitions stored with every ``query_scores`` artifact.
#: 2: precision/ndcg/recall through the one-to-one support assignment, document recall as
#: ``doc_recall@k``. Runs stored without it (version 1) have document recall under ``recall@k``.
SCORING_VERSION = 2
#: Columns (and pandas dtypes) of :func:`assign_supports`: a subset of the matched pairs, as they are.
ASSIGNMENT_COLUMNS: dict[str, str] = MATCH_COLUMNS

_NO_RANK = np.inf


def check_ks(ks: Sequence[int]) -> list[int]:
    """The cut-offs as a sorted list of distinct positive ints (ValueError otherwise)."""
    out = sorted({int(k) for k in ks})
    if not out or out[0] < 1 or any(int(k) != k for k in ks):
        raise ValueError(f"k values must be positive integers, got {list(ks)!r}")
    return out


def retrieval_columns(ks: Sequence[int]) -> list[str]:
    """Column names of :func:`retrieval_scores` for the given cut-offs."""
    ks = check_ks(ks)
    return ["query_id", "applicable", "n_hits", "first_relevant_rank", "mrr", *RETRIEVAL_FULL] + [
        f"{m}@{k}" for m in RETRIEVAL_AT_K for k in ks
    ]


def query_codes(queries: pd.DataFrame) -> pa.Array:
    """The queries' ids as an Arrow array (ValueError on duplicates); codes index into it."""
    qid = string_column(queries, "query_id")
    if qid.null_count or len(pc.unique(qid)) != len(qid):
        dup = queries["query_id"][queries["query_id"].duplicated()].unique().tolist()
        raise ValueError(f"queries table has duplicate or missing query ids: {dup[:10]!r}")
    return qid


def check_relevance_level(level: int) -> int:
    """The relevance level as an int ≥ 1 (ValueError otherwise)."""
    if isinstance(level, bool) or int(level) != level or int(level) < 1:
        raise ValueError(f"relevance_level must be an integer ≥ 1, got {level!r}")
    return int(level)


def applicable_queries(
    queries: pd.DataFrame,
    support_codes: np.ndarray,
    grades: np.ndarray,
    relevance_level: int = DEFAULT_RELEVANCE_LEVEL,
) -> np.ndarray:
    """Which queries the retrieval metrics score (bool, in ``queries`` order): answerable and with
    at least one relevant support (grade ≥ ``relevance_level``; default 1, i.e. grade > 0).
    ``support_codes`` are the supports' query codes (positions in ``queries``; -1 for an unknown
    query) and ``grades`` their grades. The TREC export writes qrels for exactly these queries."""
    answerable = queries["answerable"].astype("boolean").fillna(False).to_numpy(dtype=bool)
    relevant = (support_codes >= 0) & (grades >= check_relevance_level(relevance_level))
    return answerable & (np.bincount(support_codes[relevant], minlength=len(queries)) > 0)


def retrieval_scores(
    queries: pd.DataFrame,
    supports: pd.DataFrame,
    hits: pd.DataFrame,
    matches: pd.DataFrame,
    ks: Sequence[int] = DEFAULT_KS,
    mrr_cutoff: int = 10,
    relevance_level: int = DEFAULT_RELEVANCE_LEVEL,
    n_hits: np.ndarray | None = None,
) -> pd.DataFrame:
    """One row of retrieval metrics per query in ``queries`` (same order), hits or not.

    Inputs:
        queries: the golden queries table (``query_id``, ``answerable``, ``required_support_groups``).
        supports: the golden supports table (``query_id``, ``support_idx``, ``grade``, ``doc_id``,
            ``rel_path``).
        hits: the run's hits table (``query_id``, ``rank``; ``doc_id``/``doc_path`` for recall).
        matches: matched pairs from :func:`kebab_eval_pipeline.metrics.matching.match_hits`.
        ks: cut-offs; mrr_cutoff: MRR looks at ranks ``<= mrr_cutoff`` only.
        relevance_level: a support is *relevant* when its grade is ≥ this (trec_eval ``-l``;
            default 1). Every support graded below it (0 and negative grades included) is
            *judged non-relevant*.
        n_hits: the hits per query (aligned with ``queries``) when the caller counted them already
            (an engine that matched inside the Parquet reader); ``hits`` is then consulted only for
            document recall of supports naming a document. Default: counted from ``hits``.

    Relevance follows trec_eval: only relevant supports make a query applicable or count as
    found. A hit is *relevant* when it matches at least one relevant support. Hits are *credited*
    through the one-to-one assignment of :func:`assign_supports` (in rank order, each hit takes
    the highest-grade positive support it matches that no earlier hit took; a hit credits at most
    one support, a support is credited at most once); a credited hit is *relevant* when the
    support it took is. A hit no positive support is left for takes, the same way, a grade-≤0
    support it matches (:func:`assign_judgements`): the TREC export's docno space, in which a hit
    credited with a support graded below the level is judged non-relevant and any other uncredited
    hit (no match, or a repeat of a support an earlier hit took) is unjudged.

    Output columns (see :func:`retrieval_columns`):
        ``query_id``; ``applicable`` (bool): answerable and ≥1 relevant support;
        ``n_hits`` (int64): rows of the hits table for the query (0 for errors);
        ``first_relevant_rank`` (Int64): rank of the first relevant hit within ``mrr_cutoff``,
        null when there is none (computed for every query that has matches);
        and, as float64 that is NaN wherever the query is not applicable (a query with zero hits
        or an error scores 0 where applicable). "trec_eval X" below means:
        equal to trec_eval's X, run with ``-l relevance_level``, on the export's qrels and run
        (docnos from the assignment). R is the number of relevant supports.

        - ``mrr`` — ``1 / first_relevant_rank``, 0 when no relevant hit within the cutoff
          (trec_eval ``recip_rank`` on the run cut at ``mrr_cutoff``; the first relevant hit is
          always credited).
        - ``map`` — average precision over every hit: Σ over the credited relevant hits, in rank
          order, of (relevant hits so far ÷ rank), divided by R (trec_eval ``map``).
        - ``rprec`` — R-precision: credited relevant hits with rank ≤ R, ÷ R (trec_eval ``Rprec``).
        - ``bpref`` — Σ over the credited relevant hits of ``1 − min(n, R) / min(N, R)`` (1 when
          ``n`` = 0), ÷ R, where ``n`` counts the judged non-relevant hits ranked above the hit and
          N the query's judged non-relevant supports (trec_eval ``bpref``; unjudged hits skipped).
        - ``hit@k`` — 1 when a relevant hit has rank ≤ k (trec_eval ``success_k``).
        - ``recall@k`` — support recall: credited relevant hits with rank ≤ k divided by R
          (trec_eval ``recall_k``).
        - ``doc_recall@k`` — document recall: ``|expected docs found in top k| / |expected docs|``.
          The expected docs are the distinct document keys of the relevant supports: the
          support's ``doc_id`` if set (found by a top-k hit with that ``doc_id``), else its
          normalised ``rel_path`` (found by a top-k hit whose normalised ``doc_path`` or
          ``doc_id`` equals it), else — a support naming no document (chunk id, snippet, …) —
          the support itself (found when it is matched in the top k). Independent of the match
          criterion for document keys; no trec_eval counterpart.
        - ``recall_any@k`` — 1 when any relevant support is matched in the top k.
        - ``recall_all@k`` — 1 when every group of ``required_support_groups`` (JSON list of
          lists of support indexes) has at least one member matched in the top k. Without groups
          each relevant support is its own group ("all gold supports in top k"). Indexes naming
          missing or non-relevant supports are dropped; a group left empty is ignored, and when
          no group is left each support is its own group. Any match counts here (not only
          credited ones).
        - ``precision@k`` — credited relevant hits with rank ≤ k divided by k (fixed denominator;
          trec_eval ``P_k``). A hit that only matches supports earlier hits already took does
          not count: three chunks of one gold document are one relevant hit, not three.
        - ``ndcg@k`` — ``DCG@k / IDCG@k`` with ``DCG@k = Σ grade / log2(rank + 1)`` over the
          credited hits with rank ≤ k (the grade of the support each took, raw: the relevance
          level does not apply, as in trec_eval) and ``IDCG@k`` the positive support grades
          sorted descending over positions 1..k (trec_eval ``ndcg_cut_k``). Never exceeds 1.
        - ``map@k`` — ``map`` over the hits with rank ≤ k, still divided by R (trec_eval
          ``map_cut_k``: a query with more relevant supports than k cannot reach 1).
        - ``judged@k`` — share of the top-k hits that match any support of the query, whatever
          its grade (repeats of a support included: they are judged, only not credited again),
          ÷ min(k, hits returned); 0 without hits (ir_measures ``Judged@k``, which scores a query
          of the qrels that is absent from the run 0, like trec_eval ``-c``).
    """
    ks = check_ks(ks)
    if int(mrr_cutoff) < 1:
        raise ValueError(f"mrr_cutoff must be a positive integer, got {mrr_cutoff!r}")
    level = check_relevance_level(relevance_level)
    qid = query_codes(queries)
    nq = len(qid)
    # Every support of a known query, by query code.
    s_q = lookup_codes(string_column(supports, "query_id"), qid, runs=False)
    s_grade = supports["grade"].to_numpy(dtype=np.int64) if len(supports) else np.zeros(0, np.int64)
    applicable = applicable_queries(queries, s_q, s_grade, level)
    s_keep = np.flatnonzero(s_q >= 0)
    s_q, s_grade = s_q[s_keep], s_grade[s_keep]
    s_idx = supports["support_idx"].to_numpy(dtype=np.int64)[s_keep]
    relevant = s_grade >= level
    n_rel = np.bincount(s_q[relevant], minlength=nq)
    n_nonrel = np.bincount(s_q[~relevant], minlength=nq)  # judged non-relevant supports

    if n_hits is None:
        n_hits = key_counts(hits, "query_id", qid)
    else:
        n_hits = np.array(n_hits, dtype=np.int64)  # the frame keeps it (copy=False below)
        if n_hits.shape != (nq,):
            raise ValueError(f"n_hits must hold one count per query ({nq}), got shape {n_hits.shape}")

    # Every match of a support: (position in the s_* arrays, rank).
    m_sup, m_rank = _support_matches(s_q, s_idx, matches, qid)
    # First matched rank of every support (inf when never matched).
    s_first = np.full(len(s_q), _NO_RANK)
    np.minimum.at(s_first, m_sup, m_rank.astype(np.float64))

    frr = _group_min(s_q[relevant], s_first[relevant], nq)  # first relevant rank
    frr_cut = np.where(frr <= mrr_cutoff, frr, _NO_RANK)
    mrr = np.where(np.isfinite(frr_cut), 1.0 / np.where(np.isfinite(frr_cut), frr_cut, 1.0), 0.0)

    # The credited hits, sorted by query then rank: any grade (bpref's judged hits), then the
    # positive ones (nDCG's gains) and the relevant ones (every binary measure).
    j_q, j_rank, j_grade = _assigned(s_q, s_idx, s_grade, m_sup, m_rank)
    pos = j_grade > 0
    a_q, a_rank, a_grade = j_q[pos], j_rank[pos], j_grade[pos]
    rel = j_grade >= level
    r_q, r_rank = j_q[rel], j_rank[rel]
    # Precision at each relevant hit: its position among the query's relevant hits ÷ its rank.
    r_prec = (np.arange(len(r_q)) - _group_starts(r_q) + 1) / r_rank
    s_rel = np.flatnonzero(relevant)
    all_rank = _recall_all_rank(queries, s_q[s_rel], s_idx[s_rel], s_first[s_rel], nq)
    doc_q, doc_first = _expected_docs(
        supports.iloc[s_keep[s_rel]], s_q[s_rel], s_first[s_rel], hits, qid, top=ks[-1]
    )
    n_docs = np.bincount(doc_q, minlength=nq)
    s_pos = s_grade > 0
    ideal_q, ideal_pos, ideal_gain = _ideal_positions(s_q[s_pos], s_grade[s_pos])
    # Distinct (query, rank) of hits that match any support: judged hits.
    judged_q, judged_rank = _distinct_hits(s_q[m_sup], m_rank, ks[-1])

    with np.errstate(divide="ignore", invalid="ignore"):
        full = {
            "map": np.bincount(r_q, weights=r_prec, minlength=nq) / n_rel,
            "rprec": np.bincount(r_q[r_rank <= n_rel[r_q]], minlength=nq) / n_rel,
            "bpref": _bpref(j_q, rel, n_rel, n_nonrel, nq),
        }
    cols: dict[str, object] = {
        "query_id": arrow_to_pandas_string(qid),
        "applicable": applicable,
        "n_hits": n_hits,
        "first_relevant_rank": pd.arrays.IntegerArray(
            np.where(np.isfinite(frr_cut), frr_cut, 0).astype(np.int64), ~np.isfinite(frr_cut)
        ),
        "mrr": _only(applicable, mrr),
        **{name: _only(applicable, full[name]) for name in RETRIEVAL_FULL},
    }
    # Each per-k column is masked as it is computed and the frame takes the arrays as they are
    # (``copy=False``: no consolidation into one block): at 1M queries the unmasked columns, their
    # masked copies and the consolidated block were three copies of 300 MB at once.
    per_k: dict[str, dict[int, np.ndarray]] = {m: {} for m in RETRIEVAL_AT_K}
    with np.errstate(divide="ignore", invalid="ignore"):
        for k in ks:
            per_k["hit"][k] = _only(applicable, (frr <= k).astype(float))
            top = r_rank <= k
            found = np.bincount(r_q[top], minlength=nq)
            per_k["recall"][k] = _only(applicable, found / n_rel)
            per_k["doc_recall"][k] = _only(
                applicable, np.bincount(doc_q[doc_first <= k], minlength=nq) / n_docs
            )
            per_k["recall_any"][k] = _only(applicable, (frr <= k).astype(float))
            per_k["recall_all"][k] = _only(applicable, (all_rank <= k).astype(float))
            per_k["precision"][k] = _only(applicable, found / k)
            gained = a_rank <= k
            dcg = np.bincount(
                a_q[gained], weights=a_grade[gained] / np.log2(a_rank[gained] + 1.0), minlength=nq
            )
            inside = ideal_pos <= k
            idcg = np.bincount(
                ideal_q[inside], weights=ideal_gain[inside] / np.log2(ideal_pos[inside] + 1.0), minlength=nq
            )
            per_k["ndcg"][k] = _only(applicable, dcg / idcg)
            per_k["map"][k] = _only(
                applicable, np.bincount(r_q[top], weights=r_prec[top], minlength=nq) / n_rel
            )
            # ÷ the top-k hits returned (ranks are 1..n); no hit: 0, as ir_measures scores a query
            # of the qrels that is absent from the run.
            shown = np.minimum(n_hits, k)
            judged = np.bincount(judged_q[judged_rank <= k], minlength=nq)
            per_k["judged"][k] = _only(applicable, np.where(shown > 0, judged / np.maximum(shown, 1), 0.0))
    for metric in RETRIEVAL_AT_K:
        for k in ks:
            cols[f"{metric}@{k}"] = per_k[metric][k]
    return pd.DataFrame(cols, copy=False)


def assign_supports(matches: pd.DataFrame) -> pd.DataFrame:
    """The one-to-one assignment of hits to positive gold supports that the metrics credit.

    Input: matched pairs from :func:`kebab_eval_pipeline.metrics.matching.match_hits` (``query_id``,
    ``rank``, ``support_idx``, ``grade``; pairs with ``grade <= 0`` are ignored).

    Per query, hits are walked in rank order; each hit is assigned the positive-grade support it
    matches that no earlier hit was assigned, choosing the highest grade (ties: the lowest
    ``support_idx``). A hit gets at most one support and a support at most one hit; a hit whose
    supports were all taken earlier gets none (it is a duplicate, judged non-relevant by
    ``precision@k``/``ndcg@k``/``recall@k``). The first relevant hit of a query is always assigned.

    Output: :data:`ASSIGNMENT_COLUMNS` — one row per assigned hit, sorted by ``query_id`` then
    ``rank``. See :func:`assign_judgements` for the assignment the TREC export writes.
    """
    grade = matches["grade"].to_numpy(dtype=np.int64) if len(matches) else np.zeros(0, np.int64)
    return _assign_rows(matches, np.flatnonzero(grade > 0))


def assign_judgements(matches: pd.DataFrame) -> pd.DataFrame:
    """:func:`assign_supports` extended to every support, whatever its grade: the TREC export's
    docno space.

    Walking the hits in rank order, each hit takes the best still-free support it matches — highest
    grade first, so a positive support whenever one is left (those rows are exactly
    :func:`assign_supports`' output) and otherwise a grade-≤0 one. So a hit that matches only
    supports judged non-relevant is credited with one of them (a judged non-relevant document for
    trec_eval's ``bpref``), once per support like a relevant one; a hit left without a support
    matches none or only repeats supports earlier hits took (unjudged).

    Output: :data:`ASSIGNMENT_COLUMNS`, sorted by ``query_id`` then ``rank``. The TREC export
    writes these pairs as ``gold:<support_idx>`` docnos, so trec_eval on it reproduces the metrics
    of :func:`retrieval_scores` at any relevance level.
    """
    return _assign_rows(matches, np.arange(len(matches)))


def _assign_rows(matches: pd.DataFrame, rows: np.ndarray) -> pd.DataFrame:
    """The one-to-one assignment over the pairs ``rows`` of ``matches`` (see :func:`assign_supports`)."""
    if len(rows) == 0:
        return pd.DataFrame({c: pd.Series([], dtype=t) for c, t in ASSIGNMENT_COLUMNS.items()})
    qids = string_column(matches, "query_id").take(pa.array(rows))
    q = lookup_codes(qids, pc.unique(qids), runs=False).astype(np.int64)
    known = q >= 0  # a pair without a query id belongs to no query
    rows, q, qids = rows[known], q[known], qids.filter(pa.array(known))
    if len(rows) == 0:
        return _assign_rows(matches, rows)
    grade = matches["grade"].to_numpy(dtype=np.int64)[rows]
    idx = matches["support_idx"].to_numpy(dtype=np.int64)[rows]
    rank = matches["rank"].to_numpy(dtype=np.int64)[rows]
    low = idx.min()
    sup = q * np.int64(idx.max() - low + 1) + (idx - low)  # a support id unique across queries
    keep = _assignment(q, rank, sup, grade, idx)
    out = pd.DataFrame(
        {
            "query_id": arrow_to_pandas_string(qids.filter(pa.array(keep))),
            "rank": rank[keep],
            "support_idx": idx[keep],
            "grade": grade[keep],
        }
    ).astype(ASSIGNMENT_COLUMNS)
    return out.sort_values(["query_id", "rank"], kind="stable").reset_index(drop=True)


# --------------------------------------------------------------------------------------------
# Kernels (NumPy over query codes; no per-query Python)
# --------------------------------------------------------------------------------------------


def _only(mask: np.ndarray, values: np.ndarray) -> np.ndarray:
    return np.where(mask, values, np.nan).astype(np.float64, copy=False)


def _group_min(codes: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    out = np.full(n, _NO_RANK)
    if len(codes):
        np.minimum.at(out, codes, values)
    return out


def _support_keys(q: np.ndarray, idx: np.ndarray, width: int) -> np.ndarray:
    return q.astype(np.int64) * np.int64(width) + idx


def _support_matches(
    s_q: np.ndarray, s_idx: np.ndarray, matches: pd.DataFrame, qid: pa.Array
) -> tuple[np.ndarray, np.ndarray]:
    """Every match of a support: (its position in ``s_q``/``s_idx``, the rank; int64).

    Matches of unknown queries/supports drop out.
    """
    none = np.zeros(0, np.int64)
    if len(s_q) == 0 or len(matches) == 0:
        return none, none
    m_q = lookup_codes(string_column(matches, "query_id"), qid, runs=False)
    m_idx = matches["support_idx"].to_numpy(dtype=np.int64)
    m_rank = matches["rank"].to_numpy(dtype=np.int64)
    width = int(max(s_idx.max(initial=0), m_idx.max(initial=0))) + 1
    s_key = _support_keys(s_q, s_idx, width)
    order = np.argsort(s_key, kind="stable")
    sorted_keys = s_key[order]
    ok = np.flatnonzero(m_q >= 0)
    m_key = _support_keys(m_q[ok], m_idx[ok], width)
    pos = np.minimum(np.searchsorted(sorted_keys, m_key), len(sorted_keys) - 1)
    found = sorted_keys[pos] == m_key
    return order[pos[found]], m_rank[ok[found]]


def _assigned(
    s_q: np.ndarray, s_idx: np.ndarray, s_grade: np.ndarray, m_sup: np.ndarray, m_rank: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(query code, rank as float, grade as float) of every hit the assignment credits, sorted by
    query then rank. Positive supports come first on every hit's list (best grade first), so the
    positive part is :func:`assign_supports`' assignment and a hit takes a grade-≤0 support only
    when no positive one is left for it (:func:`assign_judgements`)."""
    keep = _assigned_pairs(s_q[m_sup], m_rank, m_sup, s_grade[m_sup], s_idx[m_sup])
    sup, rank = m_sup[keep], m_rank[keep]
    return s_q[sup], rank.astype(np.float64), s_grade[sup].astype(np.float64)


def _group_starts(codes: np.ndarray) -> np.ndarray:
    """For codes sorted in groups: the index where each element's group starts."""
    if len(codes) == 0:
        return np.zeros(0, np.int64)
    starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
    return np.repeat(starts, np.diff(np.r_[starts, len(codes)]))


def _bpref(q: np.ndarray, rel: np.ndarray, n_rel: np.ndarray, n_nonrel: np.ndarray, nq: int) -> np.ndarray:
    """trec_eval's bpref per query (NaN where ``n_rel`` is 0) from the judged hits — credited hits
    sorted by query then rank, ``rel`` True for a relevant one, False for a judged non-relevant
    one — and each query's relevant (R) and judged non-relevant (N) support counts."""
    nonrel = (~rel).astype(np.int64)
    before = np.cumsum(nonrel) - nonrel  # judged non-relevant hits before each, over the whole run
    above = (before - before[_group_starts(q)])[rel]  # … within its own query
    r_q = q[rel]
    big_r = n_rel[r_q]
    # ``above`` > 0 implies N ≥ 1 (and R ≥ 1: this hit is relevant), so no division by zero.
    worst = np.maximum(np.minimum(n_nonrel[r_q], big_r), 1)
    term = np.where(above > 0, 1.0 - np.minimum(above, big_r) / worst, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.bincount(r_q, weights=term, minlength=nq) / n_rel


def _distinct_hits(q: np.ndarray, rank: np.ndarray, top: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct (query code, rank) pairs among ``q``/``rank`` with rank ≤ ``top`` (int64)."""
    inside = rank <= top
    width = np.int64(top) + 1
    key = np.sort(q[inside].astype(np.int64) * width + rank[inside])
    key = key[np.r_[True, key[1:] != key[:-1]]] if len(key) else key
    return key // width, key % width


def _assignment(
    q: np.ndarray, rank: np.ndarray, sup: np.ndarray, grade: np.ndarray, idx: np.ndarray
) -> np.ndarray:
    """Which (hit, support) pairs the one-to-one assignment keeps (bool mask, input order); see
    :func:`_assigned_pairs`."""
    keep = np.zeros(len(q), dtype=bool)
    keep[_assigned_pairs(q, rank, sup, grade, idx)] = True
    return keep


def _assigned_pairs(
    q: np.ndarray, rank: np.ndarray, sup: np.ndarray, grade: np.ndarray, idx: np.ndarray
) -> np.ndarray:
    """The positions of the (hit, support) pairs the one-to-one assignment keeps, in query code
    then rank order.

    Inputs, one entry per candidate pair (all int64): the query code, the hit's rank, a support id
    unique across queries, the support's grade and its ``support_idx`` (the tie-break).

    The assignment is serial dictatorship in rank order: the rank-1 hit takes its best support
    (highest grade, then lowest ``support_idx``), the rank-2 hit the best of what is left, and so
    on. It is computed as hit-proposing deferred acceptance, in rounds over all queries at once:
    every free hit proposes to the next support on its preference list, each support keeps the
    lowest-rank hit among its current holder and its proposers, the rest move one step down
    their lists. With one priority order shared by every support (rank) the stable matching is
    unique and equals the serial one. Each round is a few vectorised passes; the number of rounds
    is bounded by the longest chain of displacements (usually a handful).
    """
    n = len(q)
    if n == 0:
        return np.zeros(0, np.int64)
    order = np.lexsort((idx, -grade, rank, q))  # each hit's preference list, hits in rank order
    p_q, p_rank, p_sup = q[order], rank[order], sup[order]
    start = np.flatnonzero(np.r_[True, (p_q[1:] != p_q[:-1]) | (p_rank[1:] != p_rank[:-1])])
    end = np.r_[start[1:], n]
    hit_rank = p_rank[start]
    _, sup_code = np.unique(p_sup, return_inverse=True)
    holder = np.full(int(sup_code.max()) + 1, -1, dtype=np.int64)  # hit holding each support
    nxt = start.copy()  # each hit's current proposal (pair position)
    free = np.ones(len(start), dtype=bool)
    won = np.zeros(len(start), dtype=bool)
    while True:
        active = np.flatnonzero(free & (nxt < end))
        if len(active) == 0:
            break
        target = sup_code[nxt[active]]
        by = np.lexsort((hit_rank[active], target))  # per support, its best proposer first
        best = np.r_[True, target[by][1:] != target[by][:-1]]
        cand, cand_sup = active[by][best], target[by][best]
        cur = holder[cand_sup]
        win = (cur < 0) | (hit_rank[cand] < hit_rank[np.maximum(cur, 0)])
        winners, displaced = cand[win], cur[win & (cur >= 0)]
        holder[cand_sup[win]] = winners
        won[:] = False
        won[winners] = True
        losers = active[~won[active]]
        free[winners] = False
        nxt[losers] += 1
        free[displaced] = True
        nxt[displaced] += 1
    held = np.flatnonzero(~free)  # hits are numbered in (query, rank) order
    return order[nxt[held]]


def _ideal_positions(s_q: np.ndarray, s_grade: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(query, 1-based position, grade) of the ideal ranking: each query's grades sorted descending."""
    order = np.lexsort((-s_grade, s_q))
    q, grade = s_q[order], s_grade[order].astype(np.float64)
    pos = (np.arange(len(q)) - _group_starts(q) + 1).astype(np.float64)
    return q, pos, grade


def _recall_all_rank(
    queries: pd.DataFrame, s_q: np.ndarray, s_idx: np.ndarray, s_first: np.ndarray, nq: int
) -> np.ndarray:
    """Per query, the smallest k at which every support group is satisfied (inf if never)."""
    # Default: each positive support is its own group.
    g_q, g_id, g_first = s_q, np.arange(len(s_q), dtype=np.int64), s_first
    explicit = _explicit_groups(queries)
    if explicit is not None:
        e_q, e_group, e_member = explicit
        width = int(max(s_idx.max(initial=0), e_member.max(initial=0))) + 1
        s_key = _support_keys(s_q, s_idx, width)
        order = np.argsort(s_key, kind="stable")
        e_key = _support_keys(e_q, e_member, width)
        pos = np.minimum(np.searchsorted(s_key[order], e_key), max(len(order) - 1, 0))
        valid = (s_key[order][pos] == e_key) if len(order) else np.zeros(len(e_key), bool)
        e_q, e_group, e_first = e_q[valid], e_group[valid], s_first[order[pos[valid]]]
        has_groups = np.zeros(nq, dtype=bool)
        has_groups[e_q] = True
        keep_default = ~has_groups[s_q]
        offset = np.int64(len(s_q))
        g_q = np.concatenate([s_q[keep_default], e_q])
        g_id = np.concatenate([g_id[keep_default], e_group + offset])
        g_first = np.concatenate([s_first[keep_default], e_first])
    if len(g_id) == 0:
        return np.full(nq, _NO_RANK)
    ugroup, inv = np.unique(g_id, return_inverse=True)
    group_rank = np.full(len(ugroup), _NO_RANK)
    np.minimum.at(group_rank, inv, g_first)  # a group is satisfied by its best member
    group_q = np.zeros(len(ugroup), dtype=np.int64)
    group_q[inv] = g_q
    out = np.full(nq, -np.inf)
    np.maximum.at(out, group_q, group_rank)  # … and the query by its worst group
    out[np.bincount(group_q, minlength=nq) == 0] = _NO_RANK
    return out


def _explicit_groups(queries: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(query code, global group id, member support_idx) parsed from ``required_support_groups``.

    Parsed with Arrow's JSON reader (no per-query Python); None when no query declares groups.
    """
    if "required_support_groups" not in queries.columns or len(queries) == 0:
        return None
    raw = pc.fill_null(string_column(queries, "required_support_groups"), "[]")
    declared = np.flatnonzero(
        pc.invert(pc.match_substring_regex(raw, r"^\s*\[\s*\]\s*$")).to_numpy(zero_copy_only=False)
    )
    if len(declared) == 0:
        return None
    # One JSON object per line, concatenated straight from the Arrow string buffer.
    lines = concat_strings('{"g":', raw.take(pa.array(declared)), "}\n")
    lines = lines.combine_chunks() if isinstance(lines, pa.ChunkedArray) else lines
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int64)[lines.offset : lines.offset + len(lines) + 1]
    payload = lines.buffers()[2].slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
    schema = pa.schema([("g", pa.list_(pa.list_(pa.int64())))])
    table = pa_json.read_json(
        pa.BufferReader(payload), parse_options=pa_json.ParseOptions(explicit_schema=schema)
    )
    groups = table.column("g").combine_chunks()
    group_row = pc.list_parent_indices(groups).to_numpy()
    inner = pc.list_flatten(groups)
    member_group = pc.list_parent_indices(inner).to_numpy()
    members = pc.list_flatten(inner).to_numpy(zero_copy_only=False)
    if len(members) == 0:
        return None
    return declared[group_row[member_group]].astype(np.int64), member_group.astype(np.int64), members


def _expected_docs(
    sup: pd.DataFrame, s_q: np.ndarray, s_first: np.ndarray, hits: pd.DataFrame, qid: pa.Array, top: int
) -> tuple[np.ndarray, np.ndarray]:
    """(query code, first rank found) of every distinct expected document of every query; a
    document first found below rank ``top`` (the largest cut-off) counts as not found (inf): no
    ``doc_recall@k`` can tell the difference."""
    doc_id = string_column(sup, "doc_id")
    rel_path = normalise_paths(string_column(sup, "rel_path"))
    by_id = ~_is_null(doc_id)
    by_path = ~by_id & ~_is_null(rel_path)
    by_support = ~by_id & ~by_path

    out_q: list[np.ndarray] = [s_q[by_support]]
    out_first: list[np.ndarray] = [s_first[by_support]]
    top_hits: dict[str, object] = {}  # read only when a document is looked up

    def ranked_within_top(column: str | None = None):
        # Only hits ranked within the largest cut-off can find a document for doc_recall@k: at
        # 100 hits a query they are a tenth of the rows, so the joins below probe a tenth as much.
        if not top_hits:
            rank = hits["rank"].to_numpy(dtype=np.float64)
            rows = np.flatnonzero(rank <= top)
            top_hits["rows"], top_hits["rank"] = (None if len(rows) == len(rank) else rows), rank[rows]
        rows = top_hits["rows"]
        if column is None:
            return top_hits["rank"]
        values = string_column(hits, column)
        return values if rows is None else take_rows(values, rows)

    for mask, values, hit_columns in (
        (by_id, doc_id, ("doc_id",)),
        (by_path, rel_path, ("doc_path", "doc_id")),
    ):
        rows = np.flatnonzero(mask)
        if len(rows) == 0:
            continue
        vals = values.take(pa.array(rows))
        vset = pc.unique(vals)
        code = lookup_codes(vals, vset, runs=False)
        doc_key = sorted_unique(s_q[rows] * np.int64(len(vset)) + code)
        d_q = doc_key // len(vset)
        d_vals = vset.take(pa.array(doc_key % len(vset)))
        first = np.full(len(doc_key), _NO_RANK)
        for column in hit_columns:
            if column not in hits.columns:
                continue
            hit_values = ranked_within_top(column)
            if mask is by_path:
                hit_values = normalise_paths(hit_values)
            if "query_id" not in top_hits:
                top_hits["query_id"] = ranked_within_top("query_id")
            i, j = equi_join([top_hits["query_id"], hit_values], [qid.take(pa.array(d_q)), d_vals])
            if len(i):
                np.minimum.at(first, j, ranked_within_top()[i])
        out_q.append(d_q)
        out_first.append(first)
    return np.concatenate(out_q).astype(np.int64), np.concatenate(out_first)


def _is_null(values: pa.Array) -> np.ndarray:
    return values.is_null().to_numpy(zero_copy_only=False)
