"""Version-aware matching for comparisons (SPEC §8): when the chunkers differ, re-score both runs
under a chunk-independent criterion so their per-query results mean the same thing.

Chunk ids change with the chunker, and so does everything a hit's boundaries decide: which
heading path the hit reports, which snippets it contains. Two runs with different
``chunker_version`` are therefore compared under

- ``span`` (document + the hit's lines cover ≥ 50 % of the gold span) when every positive gold
  support of both golden sets names a document and a line span and every hit of both runs carries
  lines — ``chunker_version_match: fallback_span``;
- ``doc`` (document only) otherwise — ``fallback_doc``, with the reason in the note.

Equal chunker versions keep each run's own stored scores (``exact``). ``strict`` refuses to
compare across chunkers instead (``--strict-chunker-version``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from kebab_eval_pipeline.errors import InputError, Offender
from kebab_eval_pipeline.metrics.aggregate import ScoreSummary, round_scores, summarize_scores
from kebab_eval_pipeline.pipeline import exact_query_scores

if TYPE_CHECKING:
    from kebab_eval_pipeline.compare.runs import RunBundle

MATCH_MODES = ("exact", "fallback_span", "fallback_doc")


@dataclass(frozen=True)
class MatchPlan:
    """How a comparison matches hits to gold: ``mode`` (one of :data:`MATCH_MODES`), the criterion
    both runs are re-scored with (None: each run's stored scores) and why."""

    mode: str
    criterion: str | None
    note: str


def chunker_versions(a: RunBundle, b: RunBundle) -> tuple[str | None, str | None]:
    return (
        a.metrics.info.get("versions", {}).get("chunker_version"),
        b.metrics.info.get("versions", {}).get("chunker_version"),
    )


def plan_matching(a: RunBundle, b: RunBundle, strict: bool = False) -> MatchPlan:
    """Choose the comparison's matching (see the module docstring).

    Raises :class:`InputError` when the chunker versions differ and ``strict`` is set."""
    va, vb = chunker_versions(a, b)
    if va == vb:
        return MatchPlan("exact", None, "")
    if strict:
        raise InputError(
            "chunker versions differ and --strict-chunker-version was given",
            [
                Offender(
                    f"runs {a.run_id} / {b.run_id}",
                    f"chunker_version {va!r} vs {vb!r}: chunk ids and chunk boundaries are not comparable",
                )
            ],
        )
    differ = f"chunker_version differs ({va!r} vs {vb!r})"
    missing = _span_gaps(a, b)
    if not missing:
        return MatchPlan(
            "fallback_span",
            "span",
            f"{differ}: both runs re-scored by document + ≥ 50% line overlap with each gold span",
        )
    return MatchPlan(
        "fallback_doc",
        "doc",
        f"{differ}: both runs re-scored by document only, since {missing}",
    )


def _span_gaps(a: RunBundle, b: RunBundle) -> str:
    """Why span matching is not possible ('' when it is)."""
    key = ["query_id", "support_idx", "chunk_id", "doc_id", "rel_path", "line_start", "line_end", "grade"]
    # The same golden set twice is one set of supports, not two.
    supports = pd.concat(
        [a.golden.supports[key], b.golden.supports[key]], ignore_index=True
    ).drop_duplicates()
    positive = supports[supports["grade"] > 0]
    if len(positive) == 0:
        return "no gold support names a line span"
    has_doc = positive["rel_path"].notna() | positive["doc_id"].notna()
    has_lines = positive["line_start"].notna() | positive["line_end"].notna()
    without = int((~(has_doc & has_lines)).sum())
    if without:
        return f"{without} of {len(positive)} positive gold supports have no document + line span"
    for bundle in (a, b):
        hits = bundle.retrieval.results.hits
        if len(hits) == 0:
            continue
        lines = hits["line_start"].notna() | hits["line_end"].notna() if "line_start" in hits else None
        if lines is None or not bool(np.all(lines.to_numpy(dtype=bool))):
            n = len(hits) if lines is None else int((~lines).sum())
            return f"{n} hit(s) of run {bundle.run_id!r} carry no line range"
    return ""


def rescore(bundle: RunBundle, criterion: str) -> tuple[pd.DataFrame, ScoreSummary]:
    """Run ``bundle``'s stored hits, answers and citations through scoring again under
    ``criterion`` (same k, MRR cutoff and hit verification as the run), against its own golden set.

    Returns the rounded ``query_scores`` table and the summary from the unrounded scores
    (:func:`~kebab_eval_pipeline.metrics.aggregate.summarize_scores`)."""
    info = bundle.scores.info
    ks = info.get("k") or bundle.metrics.info.get("k")
    scores = exact_query_scores(
        bundle.golden,
        bundle.retrieval,
        ks,
        int(info.get("mrr_cutoff", 10)),
        criterion,
        bundle.scores.verification,
    )
    return round_scores(scores), summarize_scores(scores, ks)
