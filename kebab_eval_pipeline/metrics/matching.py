"""Support ↔ hit relevance (SPEC §5), vectorised over whole runs.

A *hit* (one row of the run's hits table, ``HIT_COLUMNS``) matches a gold *support* (one row of
the golden set's supports table, ``SUPPORT_COLUMNS``) of the same query when every field the
support sets agrees with the hit, under a *criterion* that decides which support fields count.

The kernels never loop over rows in Python. Matching is a hash join on ``(query_id, identifier)``
— the most selective identifier a support sets (chunk id, then doc id, then path; a support
setting none of them joins on the query alone) — done by Arrow's multi-threaded join, followed by
vectorised checks of the remaining conditions on the candidate pairs only. String work uses Arrow
compute kernels and NumPy's ``StringDType`` ufuncs. 10M hits × 300k supports match in well under
a second (``benchmarks/bench_metrics.py``).

The column helpers it shares with the metric kernels (``string_column``, ``lookup_codes``,
``equi_join``, …) are in :mod:`kebab_eval_pipeline.metrics.columns`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from kebab_eval_pipeline.metrics.columns import (
    arrow_to_pandas_string,
    as_large_string,
    concat_strings,
    contains_each,
    contiguous,
    equi_join,
    int_column,
    key_codes,
    key_space,
    key_values,
    lookup_codes,
    null_mask,
    sorted_unique,
    starts_with_each,
    string_column,
    take_rows,
)
from kebab_eval_pipeline.metrics.settings import MATCH_CRITERIA, MatchCriterion

__all__ = [
    "COMPARED_HIT_COLUMNS",
    "MATCH_COLUMNS",
    "compared_hit_columns",
    "fill_range",
    "judged_hits",
    "match_hits",
    "normalise_headings",
    "normalise_paths",
    "normalise_text",
    "relevance",
    "resolve_auto",
]

#: What ``auto`` resolves to, strongest first (``fields``: nothing better was usable).
RESOLVED_CRITERIA: tuple[str, ...] = ("chunk", "span", "anchor", "doc", "fields")
#: A hit field "is carried" by a run when at least this share of its hits set it.
CARRY_SHARE = 0.5

#: Columns (and pandas dtypes) of the matched-pairs table returned by :func:`match_hits`.
MATCH_COLUMNS: dict[str, str] = {
    "query_id": "string",
    "rank": "int64",
    "support_idx": "int64",
    "grade": "int64",
}

HEADING_SEPARATOR = " > "

# Join kinds, in order of preference (most selective first).
_JOIN_CHUNK, _JOIN_DOC, _JOIN_PATH, _JOIN_PATH_OR_DOC_ID, _JOIN_QUERY, _JOIN_NONE = range(6)


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------


def match_hits(
    hits: pd.DataFrame,
    supports: pd.DataFrame,
    criterion: MatchCriterion | str = "auto",
    strict_snippet: bool = False,
    resolved: pd.Series | None = None,
) -> pd.DataFrame:
    """Every (hit, support) pair of the same query where the hit matches the support.

    Inputs:
        hits: the run's hits table (``HIT_COLUMNS``; one row per ``query_id`` × ``rank``). Only
            ``query_id`` and ``rank`` are required; a missing optional column counts as all-null.
        supports: the golden supports table (``SUPPORT_COLUMNS``; one row per support).
        criterion: which support fields decide a match (empty strings and empty heading lists count
            as unset; on the hit side an unset field never agrees with a set support field):

            - ``auto``: per query, the strongest named criterion the query's supports and the run's
              hits can support (:func:`resolve_auto`; override with ``resolved``).
            - ``fields``: every field the support sets must agree — ``chunk_id`` equal, ``doc_id``
              equal, ``rel_path`` equal to the hit's ``doc_path`` (both normalised by
              :func:`normalise_paths`), the hit's normalised ``heading_path`` starts with the gold
              path (whole headings), the hit's ``[line_start, line_end]`` overlaps the gold range
              by at least one line, and ``snippet`` is contained in the hit's snippet.
            - ``chunk``: ``chunk_id`` equal; other fields ignored.
            - ``doc``: ``doc_id`` equal when the support sets one; otherwise its normalised
              ``rel_path`` equals the hit's normalised ``doc_path`` or ``doc_id``.
            - ``anchor``: document (``rel_path`` ↔ ``doc_path``, else ``doc_id`` ↔ ``doc_id``)
              plus the heading prefix when the support sets a heading path.
            - ``span``: document as for ``anchor``, plus — when the support sets lines — the
              overlap covers at least 50 % of the gold span (``2 * overlap >= gold length``).

            ``symbol``/``symbol_kind`` are never compared (hits carry no symbol). A support with
            no usable field for the criterion (e.g. chunk-only under ``span``) never matches. A
            gold range with only one end set is the single line it names; likewise for hits.
        strict_snippet: compare snippets verbatim (case-sensitive). Default: both sides are
            lower-cased and whitespace runs collapsed to one space before the containment test.
        resolved: only under ``auto``: the criterion of each query (a Series ``query_id`` →
            one of :data:`RESOLVED_CRITERIA`, as :func:`resolve_auto` returns). Default: resolved
            from ``hits`` and ``supports``. Scoring passes the run's resolution when it matches
            citations (read as hits), so citations and hits of a query share one criterion. A
            query missing from it is matched by ``fields``.

    Output:
        A DataFrame with ``MATCH_COLUMNS`` — ``query_id``, ``rank``, ``support_idx``, ``grade``
        (the support's grade, which may be ≤ 0: such pairs are listed but are not *relevant*) —
        one row per matching pair, sorted by ``query_id``, ``rank``, ``support_idx``. Empty (with
        those columns) when nothing matches or either input is empty.
    """
    if criterion not in MATCH_CRITERIA:
        raise ValueError(
            f"unknown match criterion {criterion!r}; expected one of {', '.join(MATCH_CRITERIA)}"
        )
    if len(hits) == 0 or len(supports) == 0:
        return _empty_matches()

    if criterion == "auto" and resolved is None:
        per_support = _resolve(hits, supports)[2]  # what criteria_for(resolve_auto(…)) gives
    elif criterion == "auto":
        per_support = criteria_for(string_column(supports, "query_id"), resolved)
    else:
        per_support = np.full(len(supports), criterion, dtype=object)
    plan = _SupportPlan(supports, per_support)
    if not plan.usable.any():
        return _empty_matches()
    view = _HitView(hits, plan)

    pair_h: list[np.ndarray] = []
    pair_s: list[np.ndarray] = []
    for kind in (_JOIN_CHUNK, _JOIN_DOC, _JOIN_PATH, _JOIN_PATH_OR_DOC_ID, _JOIN_QUERY):
        rows = np.flatnonzero(plan.join == kind)
        if len(rows) == 0:
            continue
        for h, s in _candidates(kind, view, plan, rows):
            pair_h.append(h)
            pair_s.append(s)
    if not pair_h:
        return _empty_matches()
    h = np.concatenate(pair_h)
    s = np.concatenate(pair_s)
    if plan.use_path_or_doc_id.any() and len(h):
        # rel_path may equal both the hit's doc_path and its doc_id: one pair, not two.
        key = sorted_unique(h * np.int64(len(supports)) + s)
        h, s = key // len(supports), key % len(supports)

    keep = _check_conditions(view, plan, h, s, strict_snippet)
    h, s = h[keep], s[keep]
    query_id = key_values(hits, "query_id", h)
    rank, support_idx = view.rank[h], plan.support_idx[s]
    # Arrow's stable multi-key sort: several times faster than pandas' on a string key.
    order = pc.sort_indices(
        pa.table({"q": query_id, "r": rank, "s": support_idx}),
        sort_keys=[("q", "ascending"), ("r", "ascending"), ("s", "ascending")],
    )
    idx = order.to_numpy()
    out = pd.DataFrame(
        {
            "query_id": arrow_to_pandas_string(query_id.take(order)),
            "rank": rank[idx],
            "support_idx": support_idx[idx],
            "grade": plan.grade[s[idx]],
        }
    )
    # The columns are built with their declared dtypes; astype would only copy them (~1.5 ms).
    if any(out[c].dtype != t for c, t in MATCH_COLUMNS.items()):
        out = out.astype(MATCH_COLUMNS)
    return out


def hits_carry(hits: pd.DataFrame, fields: Sequence[str] = ("chunk_id", "lines", "heading_path")) -> dict:
    """How many hits set each field: ``{field: (hits setting it, hits)}``.

    Fields: ``chunk_id``, ``doc_id``, ``doc_path`` (set = non-null, non-empty), ``lines``
    (``line_start`` or ``line_end`` set), ``heading_path`` (a non-empty list). An absent column
    counts as unset everywhere. Vectorised (Arrow null counts and list lengths).
    """
    n = len(hits)
    out: dict[str, tuple[int, int]] = {}
    for field in fields:
        if n == 0:
            out[field] = (0, 0)
        elif field == "lines":
            have = ~(np.isnan(int_column(hits, "line_start")) & np.isnan(int_column(hits, "line_end")))
            out[field] = (int(have.sum()), n)
        elif field == "heading_path":
            out[field] = (int(heading_set(hits).sum()), n)
        else:
            col = string_column(hits, field)
            out[field] = (n - col.null_count, n)
    return out


#: Each hit column a support is compared on, with the support fields whose value makes it compared
#: (under some criterion, by document recall or by the matching diagnostics): ``rel_path`` names a
#: document that a hit's ``doc_path`` or ``doc_id`` may name.
COMPARED_HIT_COLUMNS: dict[str, tuple[str, ...]] = {
    # a support's heading path also brings in what tells a run's chunks apart inside a gold
    # document (chunk id, snippet, lines, document): the split-nodes diagnostic reads them
    "chunk_id": ("chunk_id", "heading_path"),
    "doc_id": ("doc_id", "rel_path", "heading_path"),
    "doc_path": ("rel_path", "heading_path"),
    "heading_path": ("heading_path",),
    "line_start": ("line_start", "line_end", "heading_path"),
    "line_end": ("line_start", "line_end", "heading_path"),
    "snippet": ("snippet", "heading_path"),
}


def compared_hit_columns(supports: pd.DataFrame) -> set[str]:
    """The hit columns of :data:`COMPARED_HIT_COLUMNS` that some support of ``supports`` can be
    compared on: those named by a support field that at least one support sets (a non-empty
    string, a line number, a non-empty heading list; any grade — a grade-≤0 support is matched
    too). Matching (every criterion), ``retrieval_scores``' document recall and the matching
    diagnostics never consult another of those columns, and treat an absent column as all null:
    a reader may leave it unread (a chunk-only golden set never reads the hits' ``doc_id``, 10M
    strings at 100k queries × 100 hits). Empty when ``supports`` is empty."""
    if len(supports) == 0:
        return set()
    set_fields = set()
    for field in ("chunk_id", "doc_id", "rel_path", "snippet"):
        if not null_mask(contiguous(string_column(supports, field))).all():
            set_fields.add(field)
    for field in ("line_start", "line_end"):
        if not np.isnan(int_column(supports, field)).all():
            set_fields.add(field)
    if heading_set(supports).any():
        set_fields.add("heading_path")
    return {hit for hit, fields in COMPARED_HIT_COLUMNS.items() if set_fields.intersection(fields)}


def heading_set(frame: pd.DataFrame) -> np.ndarray:
    """Per row: does ``heading_path`` hold at least one heading (bool; False when absent)."""
    if "heading_path" not in frame.columns or len(frame) == 0:
        return np.zeros(len(frame), dtype=bool)
    lists = pa.array(
        frame["heading_path"].to_numpy(dtype=object), type=pa.list_(pa.large_string()), from_pandas=True
    )
    return pc.fill_null(pc.greater(pc.list_value_length(lists), 0), False).to_numpy(zero_copy_only=False)


def support_flags(supports: pd.DataFrame) -> pd.DataFrame:
    """Per support: which fields it sets — ``chunk`` (chunk_id), ``document`` (rel_path or
    doc_id), ``lines`` (line_start or line_end), ``heading`` (a non-empty heading path), and
    ``positive`` (grade > 0). Empty strings count as unset. Aligned with ``supports``' rows."""
    return pd.DataFrame(
        {
            "chunk": ~null_mask(contiguous(string_column(supports, "chunk_id"))),
            "document": ~(
                null_mask(contiguous(string_column(supports, "rel_path")))
                & null_mask(contiguous(string_column(supports, "doc_id")))
            ),
            "lines": ~(
                np.isnan(int_column(supports, "line_start")) & np.isnan(int_column(supports, "line_end"))
            ),
            "heading": heading_set(supports),
            "positive": supports["grade"].to_numpy(dtype=np.int64) > 0
            if "grade" in supports.columns
            else np.ones(len(supports), dtype=bool),
        }
    )


def resolve_auto(hits: pd.DataFrame, supports: pd.DataFrame) -> pd.Series:
    """What ``auto`` means for each query: the strongest criterion that both the query's supports
    and the run's hits can support, in the order chunk > span > anchor > doc.

    Inputs: the run's hits table and the golden supports table (as for :func:`match_hits`).

    Per query, over its positive supports (grade > 0; all its supports when none is positive):

    - ``chunk`` — every support sets ``chunk_id``, and the hits carry chunk ids;
    - ``span`` — every support names a document (``rel_path`` or ``doc_id``) and a line range,
      and the hits carry line ranges;
    - ``anchor`` — every support names a document, at least one sets a heading path, and the hits
      carry heading paths;
    - ``doc`` — every support names a document;
    - ``fields`` — otherwise (e.g. snippet- or heading-only supports): every field a support
      sets must agree.

    "The hits carry X" is decided once per run, not per query: at least half
    (:data:`CARRY_SHARE`) of *all* the run's hits set X (see :func:`hits_carry`) — a query whose
    own hits happen to lack a field is then still judged like the others, and an empty run
    carries nothing.

    Output: a string Series indexed by ``query_id`` (name ``match_criterion``), one entry per
    query that has at least one support, in first-appearance order. Empty when there are no
    supports.
    """
    uniques, out, _ = _resolve(hits, supports)
    if len(uniques) == 0:
        return pd.Series([], dtype="string", name="match_criterion", index=pd.Index([], dtype="string"))
    return pd.Series(
        pd.array(out, dtype="string"),
        index=pd.Index(arrow_to_pandas_string(uniques), dtype="string", name="query_id"),
        name="match_criterion",
    )


def _resolve(hits: pd.DataFrame, supports: pd.DataFrame) -> tuple[pa.Array, np.ndarray, np.ndarray]:
    """:func:`resolve_auto` as arrays: ``(query ids, their criteria, each support's criterion)`` —
    the distinct non-null query ids of ``supports`` in first-appearance order (``large_string``),
    the criterion of each (object array) and the criterion of each support row (object array;
    ``fields`` for a support without a query id, as :func:`criteria_for` gives it). Queries are
    factorised by Arrow on the string buffers, never as Python strings."""
    qid = contiguous(string_column(supports, "query_id"))
    ok = ~null_mask(qid)
    per_support = np.full(len(supports), "fields", dtype=object)
    if len(supports) == 0 or not ok.any():
        return pa.array([], pa.large_string()), np.zeros(0, dtype=object), per_support
    flags = support_flags(supports)[ok].reset_index(drop=True)
    present = qid if ok.all() else qid.filter(pa.array(ok))
    uniques = as_large_string(pc.unique(present))  # first-appearance order, as pd.factorize
    codes = lookup_codes(present, uniques, runs=False)
    n_q = len(uniques)
    positive = flags["positive"].to_numpy()
    has_positive = np.bincount(codes, weights=positive, minlength=n_q) > 0
    # The supports that decide a query: its positive ones, or all when it has none.
    counted = positive | ~has_positive[codes]
    n_counted = np.bincount(codes, weights=counted, minlength=n_q)

    def every(flag: str) -> np.ndarray:
        return np.bincount(codes, weights=counted & flags[flag].to_numpy(), minlength=n_q) == n_counted

    def some(flag: str) -> np.ndarray:
        return np.bincount(codes, weights=counted & flags[flag].to_numpy(), minlength=n_q) > 0

    document = every("document")
    chunk = every("chunk")
    span = document & every("lines")
    anchor = document & some("heading")

    def carried(field: str, wanted: np.ndarray) -> bool:
        if not wanted.any():  # skip the column scan (heading lists are the costly one)
            return False
        have, total = hits_carry(hits, (field,))[field]
        return total > 0 and have >= CARRY_SHARE * total

    chunk &= carried("chunk_id", chunk)
    span &= carried("lines", span & ~chunk)
    anchor &= carried("heading_path", anchor & ~chunk & ~span)
    out = np.select([chunk, span, anchor, document], ["chunk", "span", "anchor", "doc"], "fields").astype(
        object
    )
    per_support[ok] = out[codes]
    return uniques, out, per_support


def criteria_for(query_ids: pa.Array | pa.ChunkedArray, resolved: pd.Series) -> np.ndarray:
    """The criterion of each query id under ``resolved`` (object array; ``fields`` where absent)."""
    # the index's Arrow buffers when it is Arrow-backed (resolve_auto's is): no Python strings
    index = as_large_string(pa.array(resolved.index.array, from_pandas=True))
    codes = lookup_codes(query_ids, index, runs=False)
    values = resolved.to_numpy(dtype=object)
    out = np.full(len(query_ids), "fields", dtype=object)
    out[codes >= 0] = values[codes[codes >= 0]]
    return out


def relevance(hits: pd.DataFrame, matches: pd.DataFrame) -> pd.DataFrame:
    """The hits table with two columns added: ``gain`` and ``relevant``.

    Inputs: the hits table (needs ``query_id``, ``rank``) and the pairs from :func:`match_hits`.

    Output: a copy of ``hits`` (same row order) plus ``gain`` (int64: the maximum grade among the
    supports the hit matches, 0 when it matches none; negative grades count as 0) and ``relevant``
    (bool: ``gain > 0`` — a hit matched only by grade-0 supports is judged non-relevant, as in
    trec_eval).
    """
    out = hits.copy()
    gain = np.zeros(len(hits), dtype=np.int64)
    if len(hits) and len(matches):
        m_qid = string_column(matches, "query_id")
        uq = pc.unique(m_qid.drop_null())
        h_q = lookup_codes(string_column(hits, "query_id"), uq)
        m_q = lookup_codes(m_qid, uq, runs=False)
        h_rank = hits["rank"].to_numpy(dtype=np.int64)
        m_rank = matches["rank"].to_numpy(dtype=np.int64)
        ok = m_q >= 0
        top = np.int64(max(int(h_rank.max(initial=0)), int(m_rank.max(initial=0))) + 1)
        ukey, inv = np.unique(m_q[ok] * top + m_rank[ok], return_inverse=True)
        if len(ukey):
            best = np.zeros(len(ukey), dtype=np.int64)
            np.maximum.at(best, inv, np.maximum(matches["grade"].to_numpy(dtype=np.int64)[ok], 0))
            h_key = np.where(h_q >= 0, h_q * top + h_rank, -1)
            pos = np.minimum(np.searchsorted(ukey, h_key), len(ukey) - 1)
            gain = np.where(ukey[pos] == h_key, best[pos], 0).astype(np.int64)
    out["gain"] = gain
    out["relevant"] = gain > 0
    return out


def judged_hits(hits: pd.DataFrame, matches: pd.DataFrame) -> np.ndarray:
    """Per row of ``hits`` (needs ``query_id``, ``rank``): does the hit match any support of its
    query, whatever the support's grade — what ``judged@k`` counts as judged (bool array, aligned
    with ``hits``). ``matches``: the pairs :func:`match_hits` returned for these hits (or for a
    superset of them). A hit matching nothing is *unjudged*: the golden set says nothing about it."""
    if len(hits) == 0 or len(matches) == 0:
        return np.zeros(len(hits), dtype=bool)
    m_qid = string_column(matches, "query_id")
    uq = pc.unique(m_qid.drop_null())
    h_q = lookup_codes(string_column(hits, "query_id"), uq, runs=False)
    m_q = lookup_codes(m_qid, uq, runs=False)
    h_rank = hits["rank"].to_numpy(dtype=np.int64)
    m_rank = matches["rank"].to_numpy(dtype=np.int64)
    top = np.int64(max(int(h_rank.max(initial=0)), int(m_rank.max(initial=0))) + 1)
    judged = np.unique(m_q[m_q >= 0] * top + m_rank[m_q >= 0])
    return (h_q >= 0) & np.isin(h_q * top + h_rank, judged)


# --------------------------------------------------------------------------------------------
# Normalisation helpers (public: the metric kernels and readers use the same rules)
# --------------------------------------------------------------------------------------------


def normalise_paths(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Normalise document paths: backslashes become ``/``, leading ``./`` segments are removed.

    Nulls stay null. Arrow in, Arrow (``large_string``) out; cheap when nothing needs changing.
    """
    arr = as_large_string(values)
    if len(arr) == 0:
        return arr
    if pc.any(pc.match_substring(arr, "\\")).as_py():
        arr = pc.replace_substring(arr, "\\", "/")
    if pc.any(pc.starts_with(arr, "./")).as_py():
        arr = pc.replace_substring_regex(arr, r"^(?:\./)+", "")
    return arr


def normalise_text(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Lower-case, collapse every whitespace run to one space, trim. Nulls stay null."""
    arr = as_large_string(values)
    if len(arr) == 0:
        return arr
    arr = pc.utf8_lower(arr)
    arr = pc.replace_substring_regex(arr, r"\s+", " ")
    return pc.utf8_trim_whitespace(arr)


def normalise_headings(values: Sequence | pd.Series | np.ndarray) -> pa.Array:
    """Heading paths (list-like per row) → one string per row: headings trimmed, internal whitespace
    collapsed, joined by ``" > "``. ``None`` stays null; an empty list becomes ``""``."""
    if isinstance(values, pd.Series):
        values = values.to_numpy(dtype=object)
    lists = pa.array(values, type=pa.list_(pa.large_string()), from_pandas=True)
    if len(lists) == 0:
        return pa.array([], type=pa.large_string())
    flat = lists.values  # fresh array: offsets start at 0 and cover exactly the child values
    flat = pc.utf8_trim_whitespace(pc.replace_substring_regex(flat, r"\s+", " "))
    rebuilt = pa.ListArray.from_arrays(lists.offsets, flat, mask=lists.is_null())
    return pc.binary_join(rebuilt, pa.scalar(HEADING_SEPARATOR, pa.large_string()))


# --------------------------------------------------------------------------------------------
# Internals
# --------------------------------------------------------------------------------------------


def _empty_matches() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series([], dtype=t) for c, t in MATCH_COLUMNS.items()})


def fill_range(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A range with one end unset is the single line the other end names."""
    return np.where(np.isnan(start), end, start), np.where(np.isnan(end), start, end)


class _SupportPlan:
    """Per-support arrays: normalised fields, which conditions apply, and the join to use.

    ``criteria`` holds each support's criterion (one of :data:`RESOLVED_CRITERIA`): under ``auto``
    the supports of different queries may be matched by different criteria."""

    def __init__(self, supports: pd.DataFrame, criteria: np.ndarray) -> None:
        self.n = len(supports)
        self.query_id = string_column(supports, "query_id")
        # Queries are joined by integer code (position in the supports' distinct query ids): a
        # hash join on an int is cheaper than on a string, and the hits' codes come without a
        # string per hit when their query_id is a Categorical (read from dictionary pages).
        self.query_space = pc.unique(self.query_id).drop_null()
        self.key_type = np.int32 if len(self.query_space) < 2**31 else np.int64
        self.query_key = _key_array(lookup_codes(self.query_id, self.query_space, runs=False), self.key_type)
        self.support_idx = supports["support_idx"].to_numpy(dtype=np.int64)
        self.grade = supports["grade"].to_numpy(dtype=np.int64)
        self.chunk_id = string_column(supports, "chunk_id")
        self.doc_id = string_column(supports, "doc_id")
        self.rel_path = normalise_paths(string_column(supports, "rel_path"))
        self.line_start, self.line_end = fill_range(
            int_column(supports, "line_start"), int_column(supports, "line_end")
        )
        headings = (
            normalise_headings(supports["heading_path"])
            if "heading_path" in supports.columns
            else pa.nulls(self.n, pa.large_string())
        )
        headings = pc.if_else(pc.equal(headings, ""), pa.scalar(None, pa.large_string()), headings)
        # Whole-heading prefix: "A > B > " is a prefix of "A > B > C > " but not of "A > Bc > ".
        self.heading_prefix = concat_strings(headings, HEADING_SEPARATOR)
        self.snippet = string_column(supports, "snippet")
        snippet_norm = normalise_text(self.snippet)

        has_chunk = ~null_mask(self.chunk_id)
        has_doc = ~null_mask(self.doc_id)
        has_path = ~null_mask(self.rel_path)
        has_heading = ~null_mask(headings)
        has_lines = ~np.isnan(self.line_start)
        has_snippet = pc.fill_null(pc.not_equal(snippet_norm, ""), False).to_numpy(zero_copy_only=False)

        criteria = np.asarray(criteria, dtype=object)
        fields, chunk, doc = criteria == "fields", criteria == "chunk", criteria == "doc"
        anchor, span = criteria == "anchor", criteria == "span"
        named_doc = anchor | span  # the document is named by rel_path, else doc_id

        self.use_chunk = (fields | chunk) & has_chunk
        self.use_doc = (fields & has_doc) | (doc & has_doc) | (named_doc & ~has_path & has_doc)
        self.use_path = (fields | named_doc) & has_path
        self.use_path_or_doc_id = doc & ~has_doc & has_path
        self.use_heading = (fields | anchor) & has_heading
        self.use_lines = fields & has_lines
        self.use_span = span & has_lines
        self.use_snippet = fields & has_snippet
        self.usable = (
            (fields & (has_chunk | has_doc | has_path | has_heading | has_lines | has_snippet))
            | (chunk & has_chunk)
            | ((doc | named_doc) & (has_doc | has_path))
        )
        # anchor/span add the heading/lines only to a support that names a document
        self.use_heading = self.use_heading & (fields | self.usable)
        self.use_span = self.use_span & self.usable
        self.usable = self.usable & ~null_mask(self.query_id)

        join = np.full(self.n, _JOIN_NONE, dtype=np.int8)
        join[self.usable] = _JOIN_QUERY
        join[self.use_path_or_doc_id & self.usable] = _JOIN_PATH_OR_DOC_ID
        join[self.use_path & self.usable] = _JOIN_PATH
        join[self.use_doc & self.usable] = _JOIN_DOC
        join[self.use_chunk & self.usable] = _JOIN_CHUNK
        self.join = join


class _HitView:
    """Lazily derived arrays of the hits table (each computed at most once)."""

    def __init__(self, hits: pd.DataFrame, plan: _SupportPlan) -> None:
        self.hits = hits
        self.n = len(hits)
        space = key_space(hits, "query_id")
        if space is None:
            # Each hit's query as its code in the supports' query ids (null: a query without supports).
            self.query_key = _key_array(
                key_codes(hits, "query_id", plan.query_space, plan.key_type), plan.key_type
            )
            self.support_query_key = plan.query_key
        else:
            # A Categorical query_id keeps its own codes as the hits' keys and the supports' query
            # ids are looked up among its categories (null: no hit has that query): no key is built
            # per hit (10M of them at 100k queries × 100 hits).
            codes, categories = space
            self.query_key = _key_array(codes, codes.dtype)
            self.support_query_key = _key_array(
                lookup_codes(plan.query_id, categories, runs=False), codes.dtype
            )
        self.rank = hits["rank"].to_numpy(dtype=np.int64)
        self._cache: dict[str, object] = {}

    def column(self, name: str) -> pa.Array | pa.ChunkedArray:
        if name not in self._cache:
            self._cache[name] = string_column(self.hits, name)
        return self._cache[name]  # type: ignore[return-value]

    def normalised_path(self, column: str = "doc_path") -> pa.Array | pa.ChunkedArray:
        key = f"normalised:{column}"
        if key not in self._cache:
            self._cache[key] = normalise_paths(self.column(column))
        return self._cache[key]  # type: ignore[return-value]

    def lines(self) -> tuple[np.ndarray, np.ndarray]:
        if "lines" not in self._cache:
            self._cache["lines"] = fill_range(
                int_column(self.hits, "line_start"), int_column(self.hits, "line_end")
            )
        return self._cache["lines"]  # type: ignore[return-value]

    def take(self, column: str, rows: np.ndarray) -> pa.Array:
        values = self.normalised_path() if column == "normalised:doc_path" else self.column(column)
        return take_rows(values, rows)

    def headings(self, rows: np.ndarray) -> pa.Array:
        if "heading_path" not in self.hits.columns:
            return pa.nulls(len(rows), pa.large_string())
        values = self.hits["heading_path"].to_numpy(dtype=object)[rows]
        return concat_strings(normalise_headings(values), HEADING_SEPARATOR)


def _candidates(kind: int, view: _HitView, plan: _SupportPlan, rows: np.ndarray):
    """Yield (hit positions, support positions) pairs joined on query + the kind's identifier."""
    take = pa.array(rows)
    s_qid = view.support_query_key.take(take)

    def join(hit_values: pa.Array | pa.ChunkedArray, gold: pa.Array) -> tuple[np.ndarray, np.ndarray]:
        h, j = equi_join([view.query_key, hit_values], [s_qid, gold.take(take)])
        return h, rows[j]

    if kind == _JOIN_CHUNK:
        yield join(view.column("chunk_id"), plan.chunk_id)
    elif kind == _JOIN_DOC:
        yield join(view.column("doc_id"), plan.doc_id)
    elif kind == _JOIN_PATH:
        yield join(view.normalised_path(), plan.rel_path)
    elif kind == _JOIN_PATH_OR_DOC_ID:
        yield join(view.normalised_path(), plan.rel_path)
        yield join(view.normalised_path("doc_id"), plan.rel_path)
    else:  # the query alone: every hit of the support's query is a candidate
        h, j = equi_join([view.query_key], [s_qid])
        yield h, rows[j]


def _key_array(codes: np.ndarray, dtype) -> pa.Array:
    """Integer join keys as an Arrow array, null where the code is -1 (a null never joins)."""
    codes = codes.astype(dtype, copy=False)
    missing = codes < 0
    return pa.array(codes, mask=missing if missing.any() else None)


def _check_conditions(
    view: _HitView, plan: _SupportPlan, h: np.ndarray, s: np.ndarray, strict_snippet: bool
) -> np.ndarray:
    """For candidate pairs, AND together every condition the support uses but the join did not test."""
    keep = np.ones(len(h), dtype=bool)
    if len(h) == 0:
        return keep
    join = plan.join[s]

    def subset(need: np.ndarray) -> np.ndarray:
        return np.flatnonzero(need & keep)

    def equal(idx: np.ndarray, hit_values: pa.Array, gold: pa.Array) -> np.ndarray:
        eq = pc.equal(hit_values, gold.take(pa.array(s[idx])))
        return pc.fill_null(eq, False).to_numpy(zero_copy_only=False)

    for use, joined_on, column, gold in (
        (plan.use_chunk, _JOIN_CHUNK, "chunk_id", plan.chunk_id),
        (plan.use_doc, _JOIN_DOC, "doc_id", plan.doc_id),
        (plan.use_path, _JOIN_PATH, "normalised:doc_path", plan.rel_path),
    ):  # each id the support sets, unless the pairs were joined on it
        idx = subset(use[s] & (join != joined_on))
        if len(idx):
            keep[idx] &= equal(idx, view.take(column, h[idx]), gold)

    idx = subset(plan.use_heading[s])
    if len(idx):
        keep[idx] &= starts_with_each(view.headings(h[idx]), plan.heading_prefix.take(pa.array(s[idx])))

    idx = subset(plan.use_lines[s] | plan.use_span[s])
    if len(idx):
        hs, he = view.lines()
        hs, he = hs[h[idx]], he[h[idx]]
        gs, ge = plan.line_start[s[idx]], plan.line_end[s[idx]]
        overlap = np.minimum(he, ge) - np.maximum(hs, gs) + 1  # NaN when the hit has no lines
        ok = overlap >= 1
        span = plan.use_span[s[idx]]
        ok[span] &= 2 * overlap[span] >= (ge[span] - gs[span] + 1)
        keep[idx] &= ok

    idx = subset(plan.use_snippet[s])
    if len(idx):
        hay = view.take("snippet", h[idx])
        needle = plan.snippet.take(pa.array(s[idx]))
        if not strict_snippet:
            hay, needle = normalise_text(hay), normalise_text(needle)
        keep[idx] &= contains_each(hay, needle)
    return keep
