"""Per-query retrieval metrics (SPEC §6 "Retrieval"), vectorised over the whole run.

Everything is computed from integer query codes with NumPy: the hits table is touched only to count
hits per query and, for document recall, to look up the documents the gold supports name. The
standard measures agree with trec_eval (``pytrec_eval``) to 1e-9 — see ``tests/metrics``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from kebab_eval_pipeline.matching import (
    arrow_to_pandas_string,
    concat_strings,
    count_codes,
    equi_join,
    lookup_codes,
    normalise_paths,
    sorted_unique,
    string_column,
)

__all__ = ["DEFAULT_KS", "RETRIEVAL_AT_K", "check_ks", "query_codes", "retrieval_columns", "retrieval_scores"]

DEFAULT_KS: tuple[int, ...] = (1, 3, 5, 10)
#: The per-k retrieval metrics, in column order (``hit@1, hit@3, …, recall@1, …``).
RETRIEVAL_AT_K: tuple[str, ...] = ("hit", "recall", "recall_any", "recall_all", "precision", "ndcg")

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
    return ["query_id", "applicable", "n_hits", "first_relevant_rank", "mrr"] + [
        f"{m}@{k}" for m in RETRIEVAL_AT_K for k in ks
    ]


def query_codes(queries: pd.DataFrame) -> pa.Array:
    """The queries' ids as an Arrow array (ValueError on duplicates); codes index into it."""
    qid = string_column(queries, "query_id")
    if qid.null_count or len(pc.unique(qid)) != len(qid):
        dup = queries["query_id"][queries["query_id"].duplicated()].unique().tolist()
        raise ValueError(f"queries table has duplicate or missing query ids: {dup[:10]!r}")
    return qid


def retrieval_scores(
    queries: pd.DataFrame,
    supports: pd.DataFrame,
    hits: pd.DataFrame,
    matches: pd.DataFrame,
    ks: Sequence[int] = DEFAULT_KS,
    mrr_cutoff: int = 10,
) -> pd.DataFrame:
    """One row of retrieval metrics per query in ``queries`` (same order), hits or not.

    Inputs:
        queries: the golden queries table (``query_id``, ``answerable``, ``required_support_groups``).
        supports: the golden supports table (``query_id``, ``support_idx``, ``grade``, ``doc_id``,
            ``rel_path``).
        hits: the run's hits table (``query_id``, ``rank``; ``doc_id``/``doc_path`` for recall).
        matches: matched pairs from :func:`kebab_eval_pipeline.matching.match_hits`.
        ks: cut-offs; mrr_cutoff: MRR looks at ranks ``<= mrr_cutoff`` only.

    Relevance follows trec_eval: a support with ``grade <= 0`` is judged non-relevant and is
    ignored everywhere below (it neither makes a query applicable nor counts as found). A hit is
    *relevant* when it matches at least one support with a positive grade.

    Output columns (see :func:`retrieval_columns`):
        ``query_id``; ``applicable`` (bool): answerable and ≥1 support with positive grade;
        ``n_hits`` (int64): rows of the hits table for the query (0 for errors);
        ``first_relevant_rank`` (Int64): rank of the first relevant hit within ``mrr_cutoff``,
        null when there is none (computed for every query that has matches);
        and, as float64 that is NaN wherever the query is not applicable (a query with zero hits
        or an error scores 0 where applicable):

        - ``mrr`` — ``1 / first_relevant_rank``, 0 when no relevant hit within the cutoff
          (trec_eval ``recip_rank`` on the run cut at ``mrr_cutoff``).
        - ``hit@k`` — 1 when a relevant hit has rank ≤ k (trec_eval ``success_k``).
        - ``recall@k`` — document recall: ``|expected docs found in top k| / |expected docs|``.
          The expected docs are the distinct document keys of the positive supports: the
          support's ``doc_id`` if set (found by a top-k hit with that ``doc_id``), else its
          normalised ``rel_path`` (found by a top-k hit whose normalised ``doc_path`` or
          ``doc_id`` equals it), else — a support naming no document (chunk id, snippet, …) —
          the support itself (found when it is matched in the top k). Independent of the match
          criterion for document keys. With one document per support it is trec_eval
          ``recall_k``.
        - ``recall_any@k`` — 1 when any support is matched in the top k.
        - ``recall_all@k`` — 1 when every group of ``required_support_groups`` (JSON list of
          lists of support indexes) has at least one member matched in the top k. Without groups
          each support is its own group ("all gold supports in top k"). Indexes naming missing
          or grade-0 supports are dropped; a group left empty is ignored, and when no group is
          left each support is its own group.
        - ``precision@k`` — relevant hits with rank ≤ k divided by k (fixed denominator;
          trec_eval ``P_k``).
        - ``ndcg@k`` — ``DCG@k / IDCG@k`` with ``DCG@k = Σ_{rank ≤ k} gain(rank) / log2(rank + 1)``.
          A support's grade is credited once, at the first rank where it is matched; the gain of
          a rank is the largest grade credited there (so a document support matched by three
          chunks counts once and nDCG never exceeds 1). ``IDCG@k`` sums the positive support
          grades sorted descending over positions 1..k. With one hit per support this is
          trec_eval ``ndcg_cut_k``.
    """
    ks = check_ks(ks)
    if int(mrr_cutoff) < 1:
        raise ValueError(f"mrr_cutoff must be a positive integer, got {mrr_cutoff!r}")
    qid = query_codes(queries)
    nq = len(qid)
    answerable = queries["answerable"].astype("boolean").fillna(False).to_numpy(dtype=bool)

    # Positive-grade supports, by query code.
    s_q = lookup_codes(string_column(supports, "query_id"), qid, runs=False)
    s_grade = supports["grade"].to_numpy(dtype=np.int64) if len(supports) else np.zeros(0, np.int64)
    s_keep = np.flatnonzero((s_q >= 0) & (s_grade > 0))
    sup = supports.iloc[s_keep]
    s_q, s_grade = s_q[s_keep], s_grade[s_keep]
    s_idx = sup["support_idx"].to_numpy(dtype=np.int64)
    n_sup = np.bincount(s_q, minlength=nq)
    applicable = answerable & (n_sup > 0)

    n_hits = count_codes(string_column(hits, "query_id"), qid)

    # Every match of a positive support: (position in the s_* arrays, rank).
    m_sup, m_rank = _positive_matches(s_q, s_idx, matches, qid)
    # First matched rank of every positive support (inf when never matched).
    s_first = np.full(len(s_q), _NO_RANK)
    np.minimum.at(s_first, m_sup, m_rank.astype(np.float64))

    frr = _group_min(s_q, s_first, nq)  # first relevant rank
    frr_cut = np.where(frr <= mrr_cutoff, frr, _NO_RANK)
    mrr = np.where(np.isfinite(frr_cut), 1.0 / np.where(np.isfinite(frr_cut), frr_cut, 1.0), 0.0)

    rel_q, rel_rank = _relevant_ranks(s_q[m_sup], m_rank)
    all_rank = _recall_all_rank(queries, s_q, s_idx, s_first, nq)
    doc_q, doc_first = _expected_docs(sup, s_q, s_first, hits, qid)
    n_docs = np.bincount(doc_q, minlength=nq)
    credited_q, credited_rank, credited_gain = _credited_gains(s_q, s_first, s_grade)
    ideal_q, ideal_pos, ideal_gain = _ideal_positions(s_q, s_grade)

    cols: dict[str, object] = {
        "query_id": arrow_to_pandas_string(qid),
        "applicable": applicable,
        "n_hits": n_hits,
        "first_relevant_rank": pd.arrays.IntegerArray(
            np.where(np.isfinite(frr_cut), frr_cut, 0).astype(np.int64), ~np.isfinite(frr_cut)
        ),
        "mrr": _only(applicable, mrr),
    }
    per_k: dict[str, dict[int, np.ndarray]] = {m: {} for m in RETRIEVAL_AT_K}
    with np.errstate(divide="ignore", invalid="ignore"):
        for k in ks:
            per_k["hit"][k] = (frr <= k).astype(float)
            per_k["recall"][k] = np.bincount(doc_q[doc_first <= k], minlength=nq) / n_docs
            per_k["recall_any"][k] = (frr <= k).astype(float)
            per_k["recall_all"][k] = (all_rank <= k).astype(float)
            per_k["precision"][k] = np.bincount(rel_q[rel_rank <= k], minlength=nq) / k
            top = credited_rank <= k
            dcg = np.bincount(
                credited_q[top], weights=credited_gain[top] / np.log2(credited_rank[top] + 1.0), minlength=nq
            )
            inside = ideal_pos <= k
            idcg = np.bincount(
                ideal_q[inside], weights=ideal_gain[inside] / np.log2(ideal_pos[inside] + 1.0), minlength=nq
            )
            per_k["ndcg"][k] = dcg / idcg
    for metric in RETRIEVAL_AT_K:
        for k in ks:
            cols[f"{metric}@{k}"] = _only(applicable, per_k[metric][k])
    return pd.DataFrame(cols)


# --------------------------------------------------------------------------------------------
# Kernels (NumPy over query codes; no per-query Python)
# --------------------------------------------------------------------------------------------


def _only(mask: np.ndarray, values: np.ndarray) -> np.ndarray:
    return np.where(mask, values, np.nan).astype(np.float64)


def _group_min(codes: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    out = np.full(n, _NO_RANK)
    if len(codes):
        np.minimum.at(out, codes, values)
    return out


def _support_keys(q: np.ndarray, idx: np.ndarray, width: int) -> np.ndarray:
    return q.astype(np.int64) * np.int64(width) + idx


def _positive_matches(
    s_q: np.ndarray, s_idx: np.ndarray, matches: pd.DataFrame, qid: pa.Array
) -> tuple[np.ndarray, np.ndarray]:
    """Every match of a positive support: (its position in ``s_q``/``s_idx``, the rank; int64).

    Matches of grade-0 supports or of unknown queries/supports drop out.
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


def _relevant_ranks(q: np.ndarray, rank: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct (query code, rank) of relevant hits, from the (query, rank) of positive matches."""
    if len(q) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.float64)
    top = np.int64(rank.max() + 1)
    key = sorted_unique(q * top + rank)
    return key // top, (key % top).astype(np.float64)


def _credited_gains(
    s_q: np.ndarray, s_first: np.ndarray, s_grade: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(query, rank, gain): each matched support credits its grade at its first rank; per rank the max."""
    hit = np.isfinite(s_first)
    if not hit.any():
        return np.zeros(0, np.int64), np.zeros(0, np.float64), np.zeros(0, np.float64)
    q, rank, grade = s_q[hit], s_first[hit].astype(np.int64), s_grade[hit].astype(np.float64)
    top = np.int64(rank.max() + 1)
    key, inv = np.unique(q * top + rank, return_inverse=True)
    gain = np.zeros(len(key))
    np.maximum.at(gain, inv, grade)
    return key // top, (key % top).astype(np.float64), gain


def _ideal_positions(s_q: np.ndarray, s_grade: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(query, 1-based position, grade) of the ideal ranking: each query's grades sorted descending."""
    order = np.lexsort((-s_grade, s_q))
    q, grade = s_q[order], s_grade[order].astype(np.float64)
    starts = np.flatnonzero(np.r_[True, q[1:] != q[:-1]]) if len(q) else np.zeros(0, np.int64)
    group_start = np.repeat(starts, np.diff(np.r_[starts, len(q)]))
    pos = (np.arange(len(q)) - group_start + 1).astype(np.float64)
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
    sup: pd.DataFrame, s_q: np.ndarray, s_first: np.ndarray, hits: pd.DataFrame, qid: pa.Array
) -> tuple[np.ndarray, np.ndarray]:
    """(query code, first rank found) of every distinct expected document of every query."""
    doc_id = string_column(sup, "doc_id")
    rel_path = normalise_paths(string_column(sup, "rel_path"))
    by_id = ~_is_null(doc_id)
    by_path = ~by_id & ~_is_null(rel_path)
    by_support = ~by_id & ~by_path

    out_q: list[np.ndarray] = [s_q[by_support]]
    out_first: list[np.ndarray] = [s_first[by_support]]
    h_rank: np.ndarray | None = None  # the hits' ranks, read only when a document is looked up
    h_qid = string_column(hits, "query_id")
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
            hit_values = string_column(hits, column)
            if mask is by_path:
                hit_values = normalise_paths(hit_values)
            i, j = equi_join([h_qid, hit_values], [qid.take(pa.array(d_q)), d_vals])
            if len(i):
                if h_rank is None:
                    h_rank = hits["rank"].to_numpy(dtype=np.float64)
                np.minimum.at(first, j, h_rank[i])
        out_q.append(d_q)
        out_first.append(first)
    return np.concatenate(out_q).astype(np.int64), np.concatenate(out_first)


def _is_null(values: pa.Array) -> np.ndarray:
    return values.is_null().to_numpy(zero_copy_only=False)
