"""The ``query_scores`` table and its aggregation into run metrics and breakdowns (SPEC §6).

``build_query_scores`` runs matching and every per-query kernel; ``aggregate_metrics`` averages
each metric over the queries where it is defined (its *denominator*, see ``metric_denominators``);
``breakdowns`` does the same per category, difficulty, language, tag and answerability in one
vectorised pass. A metric whose denominator is empty is ``None`` — never 0, never 1.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from kebab_eval_pipeline.metrics import catalogue
from kebab_eval_pipeline.metrics.answers import answer_scores
from kebab_eval_pipeline.metrics.columns import float_column, lookup_codes, string_column
from kebab_eval_pipeline.metrics.matching import (
    COMPARED_HIT_COLUMNS,
    compared_hit_columns,
    criteria_for,
    match_hits,
    resolve_auto,
)
from kebab_eval_pipeline.metrics.operations import grouped_operation_metrics, operation_columns
from kebab_eval_pipeline.metrics.retrieval import (
    DEFAULT_RELEVANCE_LEVEL,
    check_ks,
    query_codes,
    retrieval_scores,
)
from kebab_eval_pipeline.metrics.scope import scope_misses
from kebab_eval_pipeline.metrics.settings import DEFAULT_KS, MatchCriterion
from kebab_eval_pipeline.systems.base import HIT_COLUMNS
from kebab_eval_pipeline.systems.runner import RetrievalResults

__all__ = [
    "ANSWER_METRICS",
    "BREAKDOWN_COLUMNS",
    "BREAKDOWN_DIMENSIONS",
    "CITATION_HIT_COLUMNS",
    "OPERATIONAL_METRICS",
    "QUERY_META_COLUMNS",
    "RANKING_SCORE_COLUMNS",
    "SCORING_HIT_COLUMNS",
    "SCORING_HIT_KEYS",
    "STORED_DECIMALS",
    "ScoreSummary",
    "aggregate_metrics",
    "breakdowns",
    "build_query_scores",
    "consulted_hit_columns",
    "dimension_labels",
    "metric_denominators",
    "metric_names",
    "round_scores",
    "summarize_scores",
]

#: Golden metadata carried into ``query_scores`` (first columns, in this order).
QUERY_META_COLUMNS: tuple[str, ...] = (
    "query_id",
    "category",
    "difficulty",
    "lang",
    "tags",
    "group",
    "answerable",
    "pending",
)
#: Per-query answer column → aggregate metric name (the catalogue's refusal and answer families).
ANSWER_METRICS: tuple[tuple[str, str], ...] = tuple(
    (m.column or "", m.name) for m in catalogue.measures() if m.family in ("refusal", "answer")
)
#: Operational aggregates (operations.grouped_operation_metrics), in report order.
OPERATIONAL_METRICS: tuple[str, ...] = catalogue.family_names("operations")
BREAKDOWN_DIMENSIONS: tuple[str, ...] = ("category", "difficulty", "lang", "tag", "answerable")
BREAKDOWN_COLUMNS: dict[str, str] = {
    "dimension": "string",
    "value": "string",
    "metric": "string",
    "score": "float64",
    "n": "int64",
}
NO_VALUE = "(none)"
#: The system's own ranking scores among the hit columns: scoring never consults them.
RANKING_SCORE_COLUMNS: tuple[str, ...] = (
    "score",
    "score_kind",
    "lexical_score",
    "vector_score",
    "lexical_rank",
    "vector_rank",
)
#: The hit columns scoring may consult (matching under every criterion, the metric kernels, answer
#: checks, operational columns, hit verification): the query_scores step reads only these of the
#: stored hits.
SCORING_HIT_COLUMNS: tuple[str, ...] = tuple(c for c in HIT_COLUMNS if c not in RANKING_SCORE_COLUMNS)
#: The hit columns scoring reads as ``Categorical`` keys from their Parquet dictionary pages (see
#: ``store.artifact_store.read_frame``): 100 hits of a query share its id, so the 10M ids of 100k
#: queries × 100 hits are 100k strings and int32 codes; the kernels join and count by the codes.
SCORING_HIT_KEYS: tuple[str, ...] = ("query_id",)
#: The hit columns the answer checks consult to find a citation among its query's hits (by chunk
#: id, or by path and line range) and to tell a real cited chunk from an invented one.
CITATION_HIT_COLUMNS: tuple[str, ...] = ("chunk_id", "doc_path", "line_start", "line_end")
#: Decimals of every stored score (SPEC §6); aggregates are computed before rounding.
STORED_DECIMALS = 4
#: Money is kept exact: a query's answer can cost $0.00004, which four decimals would make 0.
UNROUNDED_SUFFIX = "_usd"
_HIT_AT = re.compile(r"^hit@(\d+)$")


def consulted_hit_columns(
    supports: pd.DataFrame, citations: bool, columns: Sequence[str] = SCORING_HIT_COLUMNS
) -> list[str]:
    """Of the hit ``columns`` (in their order), those scoring can consult against ``supports``.

    A hit column that is only ever compared with a support field (:data:`COMPARED_HIT_COLUMNS`:
    chunk id, document, heading path, lines, snippet) is consulted only when some support sets
    that field (:func:`~kebab_eval_pipeline.metrics.matching.compared_hit_columns`), or — for
    :data:`CITATION_HIT_COLUMNS` — when ``citations`` are to be checked against the hits. Every
    other column (``query_id``, ``rank``, the version columns) is kept. Scoring treats an absent
    column as all null, so reading only these gives the same scores: a chunk-level golden set
    never reads the hits' ``doc_id``. No supports: none of the compared columns is consulted,
    except for citations. Verification against a source root reads every column (the caller's
    business: it is not scoring's comparison with the gold)."""
    needed = compared_hit_columns(supports)
    if citations:
        needed |= set(CITATION_HIT_COLUMNS)
    return [c for c in columns if c not in COMPARED_HIT_COLUMNS or c in needed]


def score_results(
    queries: pd.DataFrame,
    supports: pd.DataFrame,
    results: RetrievalResults,
    ks: Sequence[int],
    mrr_cutoff: int,
    criterion: MatchCriterion | str,
    verification: pd.DataFrame | None,
    relevance_level: int = 1,
) -> pd.DataFrame:
    """The unrounded ``query_scores`` of a run's retrieval ``results`` against its golden set
    (``queries``/``supports`` tables) under ``criterion``, a support relevant from grade
    ``relevance_level`` up — what a run stores rounded, and what a comparison re-scores with
    another criterion. Citations resolve against the chunk ids the system reported holding
    (``known_chunks``; none reported: not checked)."""
    known = frozenset(results.known_chunks["chunk_id"].dropna()) if len(results.known_chunks) else None
    return build_query_scores(
        queries,
        supports,
        results.hits,
        results.outcomes,
        results.citations,
        ks=ks,
        mrr_cutoff=mrr_cutoff,
        criterion=criterion,
        known_chunk_ids=known,
        verification=verification,
        relevance_level=relevance_level,
    )


def build_query_scores(
    queries: pd.DataFrame,
    supports: pd.DataFrame,
    hits: pd.DataFrame,
    outcomes: pd.DataFrame,
    citations: pd.DataFrame,
    ks: Sequence[int] = DEFAULT_KS,
    mrr_cutoff: int = 10,
    criterion: MatchCriterion | str = "auto",
    known_chunk_ids: frozenset[str] | None = None,
    strict_snippet: bool = False,
    verification: pd.DataFrame | None = None,
    relevance_level: int = DEFAULT_RELEVANCE_LEVEL,
) -> pd.DataFrame:
    """The ``query_scores`` table: one row per golden query (in ``queries`` order).

    Columns: ``QUERY_META_COLUMNS`` (query_id, category, difficulty, lang, tags, group, answerable,
    pending), then the retrieval columns of
    :func:`~kebab_eval_pipeline.metrics.retrieval.retrieval_scores` (applicable, n_hits,
    first_relevant_rank, mrr, map, rprec, bpref, hit@k, recall@k, doc_recall@k, recall_any@k,
    recall_all@k, precision@k, ndcg@k, map@k, judged@k; ``relevance_level``: the grade from which a
    support is relevant, trec_eval's ``-l``),
    ``scope_miss`` (:func:`~kebab_eval_pipeline.metrics.scope.scope_misses`),
    the answer columns of :func:`~kebab_eval_pipeline.metrics.answers.answer_scores` (refused,
    n_citations, refusal_correct, under_refusal, over_refusal, citation_ok, chr, answer_precision,
    attribution_hit, groundedness_rule, recency_ok) and the operational columns of
    :func:`~kebab_eval_pipeline.metrics.operations.operation_columns` (error, timed_out,
    empty_result, empty_response, mixed_version_hits, retrieval_ms, answer_ms), then
    ``verified_hits`` / ``hallucinated_hits`` (Int64 counts from ``verification``, the table of
    :func:`~kebab_eval_pipeline.metrics.verification.verify_hits`; NA when no source root was
    configured), and last ``match_criterion`` (string: the criterion that matched the query's hits
    — what ``auto`` resolved to for it (:func:`~kebab_eval_pipeline.metrics.matching.resolve_auto`), else
    the forced criterion; NA for a query without supports, which has nothing to match; not a
    metric). Values are unrounded; NaN/NA wherever a metric does not apply to the query.
    """
    ks = check_ks(ks)
    # Resolved once: the hits and the citations (read as hits) of a query share one criterion.
    resolved = resolve_auto(hits, supports) if criterion == "auto" else None
    matches = match_hits(
        hits, supports, criterion=criterion, strict_snippet=strict_snippet, resolved=resolved
    )
    retrieval = retrieval_scores(
        queries, supports, hits, matches, ks=ks, mrr_cutoff=mrr_cutoff, relevance_level=relevance_level
    )
    retrieval["scope_miss"] = scope_misses(
        queries, supports, outcomes, retrieval["applicable"].to_numpy(dtype=bool)
    )
    answers = answer_scores(
        queries,
        supports,
        outcomes,
        citations,
        hits,
        matches,
        known_chunk_ids,
        criterion,
        strict_snippet,
        resolved=resolved,
    )
    operations = operation_columns(queries, outcomes, hits=hits, n_hits=retrieval["n_hits"].to_numpy())
    meta = pd.DataFrame(
        {
            c: queries[c].to_numpy(dtype=object) if c == "tags" else queries[c].array
            for c in QUERY_META_COLUMNS
        }
    )
    parts = [meta, retrieval.drop(columns="query_id"), answers.drop(columns="query_id")]
    parts.append(operations.drop(columns="query_id"))
    parts.append(_verification_counts(queries, verification))
    parts.append(_criteria(queries, supports, criterion, resolved))
    return pd.concat([p.reset_index(drop=True) for p in parts], axis=1)


def _criteria(
    queries: pd.DataFrame, supports: pd.DataFrame, criterion: str, resolved: pd.Series | None
) -> pd.DataFrame:
    """Per query: the criterion its hits were matched by (NA without supports)."""
    qid = query_codes(queries)
    with_supports = np.zeros(len(queries), dtype=bool)
    codes = lookup_codes(string_column(supports, "query_id"), qid, runs=False)
    with_supports[codes[codes >= 0]] = True
    values = criteria_for(qid, resolved) if resolved is not None else np.full(len(queries), criterion, object)
    values = np.where(with_supports, values, None)
    return pd.DataFrame({"match_criterion": pd.array(values, dtype="string")})


def _verification_counts(queries: pd.DataFrame, verification: pd.DataFrame | None) -> pd.DataFrame:
    """Per query: hits verified against the source tree, and how many of them were hallucinated."""
    n = len(queries)
    if verification is None:
        na = pd.array([pd.NA] * n, dtype="Int64")
        return pd.DataFrame({"verified_hits": na, "hallucinated_hits": na.copy()})
    q = lookup_codes(string_column(verification, "query_id"), query_codes(queries), runs=False)
    flag = verification["hallucinated"].astype("boolean")
    verified = flag.notna().to_numpy() & (q >= 0)
    hallucinated = verified & flag.fillna(False).to_numpy(dtype=bool)
    return pd.DataFrame(
        {
            "verified_hits": pd.array(np.bincount(q[verified], minlength=n), dtype="Int64"),
            "hallucinated_hits": pd.array(np.bincount(q[hallucinated], minlength=n), dtype="Int64"),
        }
    )


@dataclass(frozen=True)
class ScoreSummary:
    """Run-level numbers computed from the *unrounded* per-query scores: the aggregate metrics
    (None for empty denominators), their denominators and the breakdown table."""

    metrics: dict[str, float | None]
    denominators: dict[str, int]
    breakdowns: pd.DataFrame


def summarize_scores(
    query_scores: pd.DataFrame, ks: Sequence[int] | None = None, round_to: int | None = STORED_DECIMALS
) -> ScoreSummary:
    """:func:`aggregate_metrics`, :func:`metric_denominators` and :func:`breakdowns` in one call.

    Call it on the exact scores, before :func:`round_scores`: the mean of rounded per-query values
    can differ from the rounded mean in the last decimal (trec_eval also averages exact values).
    """
    ks = _ks(query_scores, ks)
    # The run-level pass serves both the metrics and their denominators (one pass, not two).
    scores, counts = _overall(query_scores, ks)
    return ScoreSummary(
        metrics=_overall_metrics(scores, counts, ks, round_to),
        denominators=_overall_denominators(counts, ks),
        breakdowns=breakdowns(query_scores, ks, round_to=round_to),
    )


def round_scores(query_scores: pd.DataFrame, decimals: int = STORED_DECIMALS) -> pd.DataFrame:
    """A copy of ``query_scores`` with every float column rounded to ``decimals`` (NaN stays NaN;
    US-dollar columns stay exact);
    integer, boolean and text columns are unchanged (shared with ``query_scores``: copy-on-write,
    so neither frame sees the other's later changes; a deep copy of a million queries' scores
    added most of a gigabyte to the scoring step's peak)."""
    out = query_scores.copy(deep=False)
    for column in out.columns:
        if pd.api.types.is_float_dtype(out[column].dtype) and not column.endswith(UNROUNDED_SUFFIX):
            out[column] = out[column].round(decimals)
    return out


def metric_names(ks: Sequence[int]) -> list[str]:
    """Every aggregate metric name, in the order :func:`aggregate_metrics` returns them: the
    metric catalogue's (judge metrics only appear in a judged run's output; indexing and judge-run
    metrics are run-level, added from the system's coverage report and the judge's judgements)."""
    return catalogue.metric_names(check_ks(ks))


def aggregate_metrics(
    query_scores: pd.DataFrame, ks: Sequence[int] | None = None, round_to: int | None = 4
) -> dict[str, float | None]:
    """Run-level metrics: each the mean of its per-query column over the queries where it is defined.

    Inputs: the ``query_scores`` table; ``ks`` (default: inferred from its ``hit@k`` columns);
    ``round_to`` decimals (``None`` keeps full precision, e.g. to compare with trec_eval).

    Output (keys in :func:`metric_names` order; a metric is ``None`` when its denominator is empty —
    never 0 or 1 by default):

    - ``n_queries``, ``n_applicable`` (ints).
    - retrieval: ``mrr``, ``hit@k``, ``recall@k``, ``doc_recall@k``, ``recall_any@k``,
      ``recall_all@k``, ``precision@k``, ``ndcg@k``, ``map``, ``map@k``, ``rprec``, ``bpref``,
      ``judged@k`` — over applicable queries.
    - ``scope_miss_rate`` — over applicable queries whose system reported the folders it searched.
    - ``group_consistency@k`` — over intent groups (non-null ``group``) with at least one member
      whose ``hit@k`` is defined: share of groups where every such member has ``hit@k = 1``.
    - answers: ``refusal_correctness``, ``under_refusal_rate``, ``over_refusal_rate``,
      ``citation_coverage``, ``chr``, ``answer_precision``, ``attribution_hit_rate``,
      ``groundedness_rule``, ``recency_correctness`` — over their per-query denominators (see
      ``answers.answer_scores``).
    - judge (only when ``query_scores`` has the judge columns): ``judge_groundedness``,
      ``judge_correctness``, ``judge_groundedness_rule_agreement`` — over judged queries.
    - ``hallucination_rate`` — hallucinated hits / hits verified against the source root.
    - operations (see ``operations.operation_metrics``): ``error_rate``, ``timeout_rate``,
      ``empty_result_rate`` (all queries), ``empty_response_rate``, ``mixed_version_rate``,
      ``retrieval_ms_p50|p95|max``, ``answer_ms_p50|p95|max``, ``total_suite_ms``.
    """
    ks = _ks(query_scores, ks)
    return _overall_metrics(*_overall(query_scores, ks), ks, round_to)


def _overall(
    query_scores: pd.DataFrame, ks: list[int]
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Every metric over the whole run: :func:`_grouped` with one group."""
    codes = np.zeros(len(query_scores), dtype=np.int64)
    return _grouped(query_scores, codes, np.arange(len(query_scores)), 1, ks)


def _overall_metrics(
    scores: dict[str, np.ndarray], counts: dict[str, np.ndarray], ks: list[int], round_to: int | None
) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for name in metric_names(ks):
        if name not in scores:
            continue
        if name in ("n_queries", "n_applicable"):
            out[name] = int(counts[name][0])
            continue
        value = scores[name][0]
        exact = round_to is None or name.endswith(UNROUNDED_SUFFIX)
        out[name] = None if np.isnan(value) else float(value if exact else np.round(value, round_to))
    return out


def metric_denominators(query_scores: pd.DataFrame, ks: Sequence[int] | None = None) -> dict[str, int]:
    """How many items stand behind each metric of :func:`aggregate_metrics` (0 ⇒ the metric is None).

    Queries for per-query means and rates, intent groups for ``group_consistency@k``, hits for
    ``mixed_version_rate``, recorded latencies for the latency metrics.
    """
    ks = _ks(query_scores, ks)
    return _overall_denominators(_overall(query_scores, ks)[1], ks)


def _overall_denominators(counts: dict[str, np.ndarray], ks: list[int]) -> dict[str, int]:
    return {name: int(counts[name][0]) for name in metric_names(ks) if name in counts}


def breakdowns(
    query_scores: pd.DataFrame, ks: Sequence[int] | None = None, round_to: int | None = 4
) -> pd.DataFrame:
    """Every aggregate metric per slice, as a long table ``dimension, value, metric, score, n``.

    Dimensions (``BREAKDOWN_DIMENSIONS``): ``category``, ``difficulty``, ``lang``, ``tag`` (a query
    counts in the slice of each of its tags) and ``answerable`` (values ``true``/``false``). A null
    or empty value is reported as ``(none)``; queries without tags are not in any ``tag`` slice.
    ``score`` is the metric over the slice's queries (NaN when ``n``, its denominator, is 0; rounded
    to ``round_to`` decimals). ``n_queries``/``n_applicable`` are not repeated as metrics. Rows are
    ordered by dimension, value, then metric order.
    """
    ks = _ks(query_scores, ks)
    n = len(query_scores)
    rows_parts: list[np.ndarray] = []
    code_parts: list[np.ndarray] = []
    dims: list[str] = []
    values: list[str] = []
    for dim in BREAKDOWN_DIMENSIONS:
        rows, labels = dimension_labels(query_scores, dim, n)
        if len(rows) == 0:
            continue
        inv, uniq = pd.factorize(labels, sort=True)
        rows_parts.append(rows)
        code_parts.append(inv.astype(np.int64) + len(values))
        dims.extend([dim] * len(uniq))
        values.extend(uniq.tolist())
    names = [m for m in metric_names(ks) if catalogue.is_sliceable(m)]  # not the counts
    if not values:
        return pd.DataFrame({c: pd.Series([], dtype=t) for c, t in BREAKDOWN_COLUMNS.items()})
    rows = np.concatenate(rows_parts)
    codes = np.concatenate(code_parts)
    scores, counts = _grouped(query_scores, codes, rows, len(values), ks)
    names = [m for m in names if m in scores]
    n_slices = len(values)
    score = np.concatenate([scores[m] for m in names]) if names else np.zeros(0)
    if round_to is not None:
        score = np.round(score, round_to)
    frame = pd.DataFrame(
        {
            "dimension": np.tile(np.asarray(dims, dtype=object), len(names)),
            "value": np.tile(np.asarray(values, dtype=object), len(names)),
            "metric": np.repeat(np.asarray(names, dtype=object), n_slices),
            "score": score,
            "n": np.concatenate([counts[m] for m in names]).astype(np.int64)
            if names
            else np.zeros(0, np.int64),
        }
    )
    order = np.lexsort(
        (
            np.repeat(np.arange(len(names)), n_slices),
            np.tile(np.arange(n_slices), len(names)),
        )
    )
    return frame.iloc[order].reset_index(drop=True).astype(BREAKDOWN_COLUMNS)


# --------------------------------------------------------------------------------------------


def _ks(query_scores: pd.DataFrame, ks: Sequence[int] | None) -> list[int]:
    if ks is None:
        found = [int(m.group(1)) for c in query_scores.columns if (m := _HIT_AT.fullmatch(str(c)))]
        return check_ks(found) if found else list(DEFAULT_KS)
    return check_ks(ks)


def dimension_labels(qs: pd.DataFrame, dim: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(row, label) membership pairs of one breakdown dimension of ``qs`` (``n = len(qs)``): a row
    per query and slice it belongs to (several for ``tag``), labels as in :func:`breakdowns`
    (``(none)`` for a null or empty value). Used by the breakdowns and the per-slice paired tests."""
    if dim == "tag":
        if "tags" not in qs.columns:
            return np.zeros(0, np.int64), np.zeros(0, object)
        lists = pa.array(
            qs["tags"].to_numpy(dtype=object), type=pa.list_(pa.large_string()), from_pandas=True
        )
        rows = pc.list_parent_indices(lists).to_numpy().astype(np.int64)
        labels = pc.list_flatten(lists)
    elif dim == "answerable":
        if "answerable" not in qs.columns:
            return np.zeros(0, np.int64), np.zeros(0, object)
        flag = qs["answerable"].astype("boolean")
        labels = pa.array(
            np.where(flag.fillna(False).to_numpy(dtype=bool), "true", "false"), pa.large_string()
        )
        labels = pc.if_else(pa.array(flag.isna().to_numpy()), pa.scalar(None, pa.large_string()), labels)
        rows = np.arange(n, dtype=np.int64)
    else:
        if dim not in qs.columns:
            return np.zeros(0, np.int64), np.zeros(0, object)
        labels = pa.array(qs[dim].astype("string"), type=pa.large_string(), from_pandas=True)
        rows = np.arange(n, dtype=np.int64)
    labels = pc.fill_null(
        pc.if_else(pc.equal(labels, ""), pa.scalar(None, pa.large_string()), labels), NO_VALUE
    )
    return rows, labels.to_numpy(zero_copy_only=False).astype(object)


def _grouped(
    qs: pd.DataFrame, codes: np.ndarray, rows: np.ndarray, n_groups: int, ks: list[int]
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Every metric per group: row ``rows[i]`` of ``qs`` belongs to group ``codes[i]``."""
    scores: dict[str, np.ndarray] = {}
    counts: dict[str, np.ndarray] = {}

    def mean(name: str, values: np.ndarray) -> None:
        v = values[rows]
        ok = ~np.isnan(v)
        n = np.bincount(codes[ok], minlength=n_groups)
        s = np.bincount(codes[ok], weights=v[ok], minlength=n_groups)
        with np.errstate(invalid="ignore", divide="ignore"):
            scores[name] = np.where(n > 0, s / np.maximum(n, 1), np.nan)
        counts[name] = n

    counts["n_queries"] = np.bincount(codes, minlength=n_groups)
    scores["n_queries"] = counts["n_queries"].astype(float)
    if "applicable" in qs.columns:
        applicable = qs["applicable"].astype("boolean").fillna(False).to_numpy(dtype=bool)[rows]
        counts["n_applicable"] = np.bincount(codes[applicable], minlength=n_groups)
        scores["n_applicable"] = counts["n_applicable"].astype(float)
    # Every catalogue metric that is the mean of a per-query column (retrieval, scope, answers, judge).
    for entry in catalogue.measures():
        for k in ks if entry.at_k else [None]:
            column = entry.column_for(k)
            if column is not None and column in qs.columns:
                mean(entry.metric(k), float_column(qs, column))
    if "group" in qs.columns:
        group = pa.array(qs["group"].astype("string"), type=pa.large_string(), from_pandas=True)
        group_code = pc.fill_null(pc.dictionary_encode(group).indices, -1).to_numpy().astype(np.int64)[rows]
        for k in ks:
            if f"hit@{k}" in qs.columns:
                scores[f"group_consistency@{k}"], counts[f"group_consistency@{k}"] = _group_consistency(
                    codes, group_code, float_column(qs, f"hit@{k}")[rows], n_groups
                )
    if "verified_hits" in qs.columns and "hallucinated_hits" in qs.columns:
        # A rate over hits, not queries: Σ hallucinated / Σ verified (null without a source root).
        verified = float_column(qs, "verified_hits", 0.0)[rows]
        bad = float_column(qs, "hallucinated_hits", 0.0)[rows]
        total = np.bincount(codes, weights=verified, minlength=n_groups)
        with np.errstate(invalid="ignore", divide="ignore"):
            scores["hallucination_rate"] = np.where(
                total > 0, np.bincount(codes, weights=bad, minlength=n_groups) / np.maximum(total, 1), np.nan
            )
        counts["hallucination_rate"] = total.astype(np.int64)
    op_scores, op_counts = grouped_operation_metrics(qs, codes, n_groups, rows)
    scores.update(op_scores)
    counts.update(op_counts)
    return scores, counts


def _group_consistency(
    codes: np.ndarray, group_code: np.ndarray, hit: np.ndarray, n_groups: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per slice: share of intent groups whose every member (with a defined hit@k) hits."""
    ok = (group_code >= 0) & ~np.isnan(hit)
    if not ok.any():
        return np.full(n_groups, np.nan), np.zeros(n_groups, dtype=np.int64)
    width = np.int64(group_code.max() + 1)
    key, inv = np.unique(codes[ok] * width + group_code[ok], return_inverse=True)
    worst = np.ones(len(key))
    np.minimum.at(worst, inv, hit[ok])
    slice_of = key // width
    n = np.bincount(slice_of, minlength=n_groups)
    s = np.bincount(slice_of, weights=(worst >= 1.0).astype(float), minlength=n_groups)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, s / np.maximum(n, 1), np.nan), n
