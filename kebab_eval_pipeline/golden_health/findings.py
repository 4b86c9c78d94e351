"""The golden set's health as one typed table of findings plus a summary of counts.

One row per finding (:data:`FINDING_COLUMNS`); ``kind`` says what was found, and each kind belongs
to one check (:data:`CHECK_KINDS`, the asset checks of ``golden_health``):

- ``stale_supports`` — ``stale_support``: a support the current index does not hold (a chunk id,
  document, path or section), from :func:`~kebab_eval_pipeline.metrics.stale.stale_references`;
- ``near_duplicates`` — ``exact_duplicate`` (equal after normalisation), ``near_duplicate``
  (character n-gram Jaccard), ``semantic_duplicate`` (embedding cosine); a pair is reported once,
  under the first of these it meets;
- ``leakage`` — ``leakage``: a question quoting one corpus document verbatim;
- ``unsupported_answerable`` — an answerable (not pending) question with no support, or none graded
  at least the relevance level: every retrieval metric skips it, silently;
- ``small_slices`` — ``small_slice``: a breakdown slice with fewer queries than the minimum;
- ``suspect_gold_queue`` — ``suspect_gold``: a query of the latest stored comparison's suspect-gold
  queue (its unjudged hits ranked above the first relevant one), ``score`` its queued hits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from kebab_eval_pipeline.golden.columns import typed_frame
from kebab_eval_pipeline.golden_health.duplicates import (
    exact_duplicates,
    near_duplicates,
    semantic_duplicates,
)
from kebab_eval_pipeline.golden_health.leakage import leaked_questions
from kebab_eval_pipeline.golden_health.settings import GoldenHealthSettings
from kebab_eval_pipeline.golden_health.text import normalise
from kebab_eval_pipeline.metrics.aggregate import dimension_labels
from kebab_eval_pipeline.metrics.stale import missing_documents, stale_references

FINDING_COLUMNS: dict[str, str] = {
    "kind": "string",
    "query_id": "string",  # null for a slice
    "other_query_id": "string",  # the other question of a duplicate pair
    "document": "string",  # the quoted document (leakage), the support's reference (stale)
    "slice": "string",  # dimension=value (small slices)
    "detail": "string",
    "score": "Float64",  # Jaccard / cosine / quoted share / slice size / queued hits; null otherwise
}
#: The checks of the health report, and the finding kinds each counts (in report order).
CHECK_KINDS: dict[str, tuple[str, ...]] = {
    "unsupported_answerable": ("unsupported_answerable",),
    "stale_supports": ("stale_support",),
    "near_duplicates": ("exact_duplicate", "near_duplicate", "semantic_duplicate"),
    "leakage": ("leakage",),
    "small_slices": ("small_slice",),
    "suspect_gold_queue": ("suspect_gold",),
}
KIND_ORDER = [kind for kinds in CHECK_KINDS.values() for kind in kinds]


@dataclass
class HealthInputs:
    """What a health check reads. ``catalogue``: the index's chunks (``CATALOGUE_COLUMNS``), None
    when the system cannot list them; ``source_root``: where the system's documents live (the run
    config's), for gold documents checked on disk when there is no catalogue (neither: stale
    supports not checked); ``documents``: the corpus as
    ``document, text`` rows, None when unknown (leakage not checked); ``encode``: sentence
    embeddings of texts (unit rows), None when semantic duplicates are off; ``suspect_gold``: the
    latest stored comparison's queue (``query_id, verdict`` at least), None when none is stored,
    with ``suspect_source`` naming that comparison. ``notes``: why something was not checked, by
    check name (or ``semantic_duplicates``)."""

    queries: pd.DataFrame
    supports: pd.DataFrame
    relevance_level: int = 1
    min_slice_queries: int = 10
    catalogue: pd.DataFrame | None = None
    source_root: str | None = None
    documents: pd.DataFrame | None = None
    encode: Callable[[list[str]], np.ndarray] | None = None
    suspect_gold: pd.DataFrame | None = None
    suspect_source: str = ""
    notes: dict[str, str] = field(default_factory=dict)


@dataclass
class HealthReport:
    """The findings (:data:`FINDING_COLUMNS`, ordered by kind then query), their counts per check
    (``summary``: ``None`` for a check that could not run), and why something was not checked
    (``notes``, by check name)."""

    findings: pd.DataFrame
    summary: dict[str, Any]
    notes: dict[str, str]
    settings: GoldenHealthSettings

    def of_check(self, check: str) -> pd.DataFrame:
        return self.findings[self.findings["kind"].isin(CHECK_KINDS[check])].reset_index(drop=True)

    def passed(self, check: str) -> bool | None:
        """Whether ``check`` passes: no unsupported answerable query at all; for the warning checks,
        a count within ``max_findings``. None when the check could not run."""
        count = self.summary[check]
        if count is None:
            return None
        if check == "unsupported_answerable":
            return count == 0
        return count <= getattr(self.settings.max_findings, check)

    @property
    def blocking_failure(self) -> bool:
        """An answerable query without support, with ``unsupported_answerable: fail``."""
        return (
            self.settings.unsupported_answerable == "fail" and self.passed("unsupported_answerable") is False
        )


def _frame(kind: str, **columns) -> pd.DataFrame:
    n = max((len(v) for v in columns.values() if not np.isscalar(v) and v is not None), default=0)
    rows = {c: columns.get(c, [None] * n) for c in FINDING_COLUMNS if c != "kind"}
    return typed_frame({"kind": [kind] * n, **{c: list(v) for c, v in rows.items()}}, FINDING_COLUMNS)


def unsupported_answerable(
    queries: pd.DataFrame, supports: pd.DataFrame, relevance_level: int
) -> pd.DataFrame:
    """Answerable, non-pending queries no retrieval metric can score: no support, or no support
    graded at least ``relevance_level`` (every judgement says "not relevant")."""
    relevant = supports.loc[supports["grade"] >= relevance_level, "query_id"]
    graded = supports.groupby("query_id").size()
    # Pending queries are exempt, as from the stale check: the corpus does not hold their answer yet.
    answerable = queries[
        queries["answerable"].astype(bool)
        & ~queries["pending"].astype(bool)
        & ~queries["query_id"].isin(relevant)
    ]
    n = graded.reindex(answerable["query_id"]).fillna(0).astype(int).to_numpy()
    detail = np.where(
        n == 0,
        "answerable, but no supports: every retrieval metric skips it",
        pd.Series(n).astype(str).to_numpy(dtype=object)
        + f" supports, none graded ≥ {relevance_level} (the relevance level): "
        "every retrieval metric skips it",
    )
    return _frame("unsupported_answerable", query_id=answerable["query_id"].tolist(), detail=detail.tolist())


def stale_support_findings(
    queries: pd.DataFrame,
    supports: pd.DataFrame,
    catalogue: pd.DataFrame | None,
    source_root: str | None = None,
) -> pd.DataFrame:
    """One finding per support reference the index does not hold (:func:`stale_references`) —
    or, without a catalogue, per gold document missing under ``source_root``
    (:func:`missing_documents`)."""
    if catalogue is not None:
        stale = stale_references(queries, supports, catalogue)
    elif source_root is not None:
        stale = missing_documents(queries, supports, source_root)
    else:
        raise ValueError("stale supports need the index's catalogue or the source root")
    detail = (
        "supports["
        + stale["support_idx"].astype(str)
        + "]."
        + stale["field"]
        + ": "
        + stale["reason"]
        + np.where(stale["severity"] == "warning", " (warning)", "")
    )
    return _frame(
        "stale_support",
        query_id=stale["query_id"].tolist(),
        document=stale["value"].tolist(),
        detail=detail.tolist(),
    )


def duplicate_findings(
    queries: pd.DataFrame, settings: GoldenHealthSettings, encode: Callable[[list[str]], np.ndarray] | None
) -> pd.DataFrame:
    """Exact, near and (with ``encode``) semantic duplicate pairs, each pair once."""
    normalised = normalise(queries["query"].reset_index(drop=True))
    groups = queries["group"].astype(object).where(queries["group"].notna(), None).to_numpy(dtype=object)
    ids = queries["query_id"].to_numpy(dtype=object)
    exact = exact_duplicates(normalised, groups)
    near = near_duplicates(normalised, groups, settings.shingle_chars, settings.near_duplicate_jaccard)
    parts = [
        (
            "exact_duplicate",
            exact,
            lambda s: "the same question after normalisation",
        ),
        (
            "near_duplicate",
            near,
            lambda s: (
                f"character {settings.shingle_chars}-gram Jaccard {s:.4f} "
                f"≥ {settings.near_duplicate_jaccard:g}"
            ),
        ),
    ]
    if encode is not None:
        # Only the languages the model reads: rows of that subset, mapped back to the whole set's.
        lang = queries["lang"].fillna("").str.lower().str.split(r"[-_]", n=1, regex=True).str[0]
        subset = np.flatnonzero(lang.isin([x.lower() for x in settings.semantic_languages]).to_numpy())
        semantic = semantic_duplicates(
            queries["query"].iloc[subset].astype(str).tolist(),
            groups[subset],
            encode,
            settings.semantic_cosine,
        )
        semantic["i"], semantic["j"] = subset[semantic["i"].to_numpy()], subset[semantic["j"].to_numpy()]
        parts.append(
            (
                "semantic_duplicate",
                semantic,
                lambda s: f"embedding cosine {s:.4f} ≥ {settings.semantic_cosine:g}",
            )
        )
    seen = pd.DataFrame({"i": pd.Series([], dtype="int64"), "j": pd.Series([], dtype="int64")})
    frames = []
    for kind, pairs, describe in parts:
        # a pair already reported under a stronger kind is left out (an anti-join on i, j)
        marked = pairs.merge(seen, on=["i", "j"], how="left", indicator=True)
        pairs = marked[marked["_merge"] == "left_only"].drop(columns="_merge")
        seen = pd.concat([seen, pairs[["i", "j"]]], ignore_index=True)
        frames.append(
            _frame(
                kind,
                query_id=ids[pairs["i"].to_numpy()].tolist(),
                other_query_id=ids[pairs["j"].to_numpy()].tolist(),
                detail=[describe(s) for s in pairs["score"].tolist()],
                score=np.round(pairs["score"].to_numpy(), 4).tolist(),
            )
        )
    return pd.concat(frames, ignore_index=True)


def leakage_findings(
    queries: pd.DataFrame, documents: pd.DataFrame, settings: GoldenHealthSettings
) -> pd.DataFrame:
    """Questions quoting a corpus document (:func:`leaked_questions`)."""
    leaks = leaked_questions(queries["query"], documents, settings.leakage_ngram, settings.leakage_share)
    ids = queries["query_id"].to_numpy(dtype=object)
    detail = [
        f"{share:.0%} of its word {settings.leakage_ngram}-grams are in the document; "
        f"quotes {words} words: “{span}”"
        for share, words, span in zip(leaks["share"], leaks["span_words"], leaks["span"], strict=True)
    ]
    return _frame(
        "leakage",
        query_id=ids[leaks["row"].to_numpy()].tolist(),
        document=leaks["document"].tolist(),
        detail=detail,
        score=leaks["share"].tolist(),
    )


def small_slice_findings(queries: pd.DataFrame, dimensions: list[str], minimum: int) -> pd.DataFrame:
    """Breakdown slices (as the run breakdowns cut them: a query is in the slice of each of its
    tags; an empty value is ``(none)``) with fewer than ``minimum`` queries."""
    parts = []
    for dim in dimensions:
        _, labels = dimension_labels(queries, dim, len(queries))
        counts = pd.Series(labels, dtype=object).value_counts().sort_index()
        small = counts[counts < minimum]
        parts.append(pd.DataFrame({"slice": [f"{dim}={v}" for v in small.index], "n": small.to_numpy()}))
    small = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame({"slice": [], "n": []})
    detail = [f"{n} quer{'y' if n == 1 else 'ies'} (< {minimum}): too few to conclude on" for n in small["n"]]
    return _frame("small_slice", slice=small["slice"].tolist(), detail=detail, score=small["n"].tolist())


def suspect_gold_findings(queue: pd.DataFrame, source: str) -> pd.DataFrame:
    """One finding per query of the suspect-gold queue: its queued hits and verdict."""
    per_query = (
        queue.groupby("query_id", sort=False)
        .agg(hits=("query_id", "size"), verdict=("verdict", "first"))
        .reset_index()
    )
    detail = [
        f"{h} unjudged hit{'s' if h != 1 else ''} ranked above the first relevant one ({v}; {source})"
        for h, v in zip(per_query["hits"], per_query["verdict"], strict=True)
    ]
    return _frame(
        "suspect_gold",
        query_id=per_query["query_id"].astype(str).tolist(),
        detail=detail,
        score=per_query["hits"].tolist(),
    )


def golden_health(inputs: HealthInputs, settings: GoldenHealthSettings) -> HealthReport:
    """Every finding on the golden set ``inputs`` describes, with its summary.

    ``summary``: ``queries`` and, per check of :data:`CHECK_KINDS`, the number of findings (for
    ``suspect_gold_queue`` the queued hits; for ``near_duplicates`` the pairs, also split as
    ``exact_duplicates`` / ``semantic_duplicates``); ``None`` for a check whose input is missing
    (no catalogue, no corpus, no stored comparison), with a note saying why."""
    q, s = inputs.queries.reset_index(drop=True), inputs.supports
    notes = dict(inputs.notes)
    frames = [
        unsupported_answerable(q, s, inputs.relevance_level),
        duplicate_findings(q, settings, inputs.encode),
        small_slice_findings(q, list(settings.slice_dimensions), inputs.min_slice_queries),
    ]
    summary: dict[str, Any] = {"queries": len(q)}
    stale_checked = inputs.catalogue is not None or inputs.source_root is not None
    if stale_checked:
        frames.append(stale_support_findings(q, s, inputs.catalogue, inputs.source_root))
    if inputs.documents is not None:
        frames.append(leakage_findings(q, inputs.documents, settings))
    if inputs.suspect_gold is not None:
        frames.append(suspect_gold_findings(inputs.suspect_gold, inputs.suspect_source))
    findings = pd.concat(frames, ignore_index=True).astype(FINDING_COLUMNS)
    rank = findings["kind"].map({k: i for i, k in enumerate(KIND_ORDER)})
    findings = findings.assign(_rank=rank).sort_values(
        ["_rank", "query_id", "other_query_id", "slice"], kind="stable", na_position="last"
    )
    findings = findings.drop(columns="_rank").reset_index(drop=True)
    counts = findings["kind"].value_counts()
    for check, kinds in CHECK_KINDS.items():
        summary[check] = int(sum(counts.get(k, 0) for k in kinds))
    summary["exact_duplicates"] = int(counts.get("exact_duplicate", 0))
    summary["semantic_duplicates"] = (
        None if inputs.encode is None else int(counts.get("semantic_duplicate", 0))
    )
    if not stale_checked:
        summary["stale_supports"] = None
    if inputs.documents is None:
        summary["leakage"] = None
    if inputs.suspect_gold is None:
        summary["suspect_gold_queue"] = None
    else:
        summary["suspect_gold_queue"] = len(inputs.suspect_gold)
    summary["min_slice_queries"] = inputs.min_slice_queries
    return HealthReport(findings, summary, notes, settings)
