"""Version-aware matching for comparisons (SPEC §8): when the chunkers differ, compare both runs
under a chunk-independent criterion so their per-query results mean the same thing.

Chunk ids change with the chunker, so two runs with different ``chunker_version`` are compared
under the strongest chunk-independent criterion both support:

- ``anchor`` (document + heading-path prefix: neither chunk ids nor chunk boundaries matter) when
  both runs were scored by anchor, or when every positive gold support names a document and a
  heading path and both runs' hits carry heading paths — ``chunker_version_match:
  fallback_anchor``;
- ``span`` (document + the hit's lines cover ≥ 50 % of the gold span) when both runs were scored
  by span, or every positive gold support names a document and a line span and both runs' hits
  carry line ranges — ``fallback_span``;
- ``doc`` (document only) otherwise — ``fallback_doc``.

Runs that were both scored by the same chunk-independent criterion (anchor, span or doc) keep it:
their own reports already used it. "The hits carry X" is the rule of ``match: auto``: at least
half of the run's hits set X. A run already scored by the chosen criterion keeps its stored
scores (not re-scored), so the comparison's numbers for it equal its own report; only the other
run is re-scored.

Equal chunker versions keep each run's own stored scores (``exact``). ``strict`` refuses to
compare across chunkers instead (``--strict-chunker-version``).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from kebab_eval_pipeline.foundation.errors import InputError, Offender
from kebab_eval_pipeline.metrics.aggregate import ScoreSummary, round_scores, score_results, summarize_scores
from kebab_eval_pipeline.metrics.matching import CARRY_SHARE, hits_carry, support_flags
from kebab_eval_pipeline.metrics.measurable import lacks_of, null_unmeasured
from kebab_eval_pipeline.store.runs import StoredRun

#: Chunk-independent criteria, strongest first, with what each needs from gold and hits.
_FALLBACKS = (
    ("anchor", "heading", "heading_path", "heading path", "document + heading-path prefix"),
    ("span", "lines", "lines", "line range", "document + ≥ 50% line overlap with each gold span"),
)


@dataclass(frozen=True)
class MatchPlan:
    """How a comparison matches hits to gold: ``mode`` (``exact``, ``fallback_anchor``,
    ``fallback_span`` or ``fallback_doc``), the criterion both runs are compared under (None: each
    run's stored scores), why, and which runs must be re-scored under it (a run already scored by
    it keeps its stored scores)."""

    mode: str
    criterion: str | None
    note: str
    rescore_a: bool = False
    rescore_b: bool = False


def chunker_versions(a: StoredRun, b: StoredRun) -> tuple[str | None, str | None]:
    return (
        a.metrics.info.get("versions", {}).get("chunker_version"),
        b.metrics.info.get("versions", {}).get("chunker_version"),
    )


def scored_by(bundle: StoredRun) -> str | None:
    """The one criterion that matched every query of a stored run: the forced criterion, else what
    ``auto`` resolved to (``mixed`` when queries differ; None for runs stored before the
    resolution was recorded, whose ``auto`` was the all-fields rule)."""
    info = bundle.scores.info
    configured = info.get("match", "auto")
    if configured != "auto":
        return configured
    return info.get("match_resolved")


def one_criterion(bundle: StoredRun) -> str | None:
    """The single criterion that matched every query of a stored run — forced, or what ``auto``
    resolved to — or None when its queries were matched by different criteria or it was stored
    before the resolution was recorded. Two runs with the same one criterion were matched alike,
    however each chose it (``match: auto`` resolved to anchor is anchor)."""
    criterion = scored_by(bundle)
    return None if criterion in (None, "mixed") else criterion


def plan_matching(a: StoredRun, b: StoredRun, strict: bool = False) -> MatchPlan:
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
    sa, sb = scored_by(a), scored_by(b)
    meaning = {c: m for c, *_, m in _FALLBACKS} | {"doc": "document only"}
    if sa == sb and sa in meaning:  # both reports already used a chunk-independent criterion
        note = f"{differ}: matched by {meaning[sa]} (both runs were scored by {sa})"
        return _plan(f"fallback_{sa}", sa, note, sa, sb)
    gaps: list[str] = []
    for criterion, *_ in _FALLBACKS:
        gap = _gaps(a, b, criterion)
        if not gap:
            why = "the golden set and both runs' hits support it"
            note = f"{differ}: matched by {meaning[criterion]} ({why})"
            return _plan(f"fallback_{criterion}", criterion, note, sa, sb)
        gaps.append(f"not {criterion}: {gap}")
    note = f"{differ}: matched by document only, since " + "; ".join(gaps)
    return _plan("fallback_doc", "doc", note, sa, sb)


def _plan(mode: str, criterion: str, note: str, sa: str | None, sb: str | None) -> MatchPlan:
    rescore_a, rescore_b = sa != criterion, sb != criterion
    kept = [run for run, again in (("a", rescore_a), ("b", rescore_b)) if not again]
    if kept:
        which = "both runs keep" if len(kept) == 2 else f"run {kept[0]} keeps"
        note += f"; {which} {'their' if len(kept) == 2 else 'its'} stored {criterion} scores"
    if rescore_a or rescore_b:
        again = [run for run, flag in (("a", rescore_a), ("b", rescore_b)) if flag]
        note += f"; {' and '.join(f'run {r}' for r in again)} re-scored by {criterion}"
    return MatchPlan(mode, criterion, note, rescore_a, rescore_b)


def criterion_gaps(a: StoredRun, b: StoredRun, criterion: str) -> str:
    """Why ``criterion`` (``anchor`` or ``span``) cannot compare runs ``a`` and ``b`` — a gap in the
    gold supports or in either run's hits — or ``""`` when it can (the rule of :func:`plan_matching`)."""
    return _gaps(a, b, criterion)


def _gaps(a: StoredRun, b: StoredRun, criterion: str) -> str:
    """Why ``criterion`` (anchor or span) cannot compare the two runs ('' when it can)."""
    _, flag, field, what, _ = next(f for f in _FALLBACKS if f[0] == criterion)
    key = ["query_id", "support_idx", "chunk_id", "doc_id", "rel_path", "line_start", "line_end", "grade"]
    frames = []
    for bundle in (a, b):
        sup = bundle.golden.supports
        flags = support_flags(sup)
        frames.append(
            pd.DataFrame({k: sup[k].astype(object) for k in key}).assign(
                heading=flags["heading"].to_numpy(), lines=flags["lines"].to_numpy()
            )
        )
    # The same golden set twice is one set of supports, not two.
    supports = pd.concat(frames, ignore_index=True).drop_duplicates()
    positive = supports[supports["grade"] > 0]
    if len(positive) == 0:
        return "no positive gold support"
    has_doc = positive["rel_path"].notna() | positive["doc_id"].notna()
    without = int((~(has_doc & positive[flag].astype(bool))).sum())
    if without:
        return f"{without} of {len(positive)} positive gold supports have no document + {what}"
    for bundle in (a, b):
        have, total = hits_carry(bundle.retrieval.results.hits, (field,))[field]
        if total and have < CARRY_SHARE * total:
            return f"{total - have} of {total} hits of run {bundle.run_id!r} carry no {what}"
    return ""


def rescore(bundle: StoredRun, criterion: str) -> tuple[pd.DataFrame, ScoreSummary]:
    """Run ``bundle``'s stored hits, answers and citations through scoring again under
    ``criterion`` (same k, MRR cutoff, relevance level and hit verification as the run), against
    its own golden set.

    Returns the rounded ``query_scores`` table and the summary from the unrounded scores
    (:func:`~kebab_eval_pipeline.metrics.aggregate.summarize_scores`)."""
    info = bundle.scores.info
    ks = info.get("k") or bundle.metrics.info.get("k")
    scores = score_results(
        bundle.golden.queries,
        bundle.golden.supports,
        bundle.retrieval.results,
        ks,
        int(info.get("mrr_cutoff", 10)),
        criterion,
        bundle.scores.verification,
        relevance_level=int(info.get("relevance_level") or 1),  # runs stored before it: level 1
    )
    # what the run could not carry stays null when re-scored (citations of replayed traces, …)
    retrieval = bundle.retrieval
    scores, _ = null_unmeasured(
        scores, lacks_of(retrieval.results.system, bool(retrieval.info.get("answers", True)))
    )
    return round_scores(scores), summarize_scores(scores, ks)
