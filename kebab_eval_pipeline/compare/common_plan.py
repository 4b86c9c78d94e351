"""One matching criterion for N runs (a ranking), from the pairwise plans of :mod:`.fallback`.

Chunk ids mean nothing across chunkers, so N runs whose chunker versions differ are all scored
under one chunk-independent criterion. Every pair of runs with different chunkers is planned as
``kebab-eval compare A B`` plans it (:func:`~.fallback.plan_matching`); when every such pair
chose the same criterion, that one is used — each run belongs to at least one such pair, so the
golden sets and hits of all N support it, and each pair's numbers equal its own comparison's.
When the pairs disagree (one pair could use ``anchor``, another only ``span``), the weakest
criterion any pair chose is used if every pair supports it, else ``doc`` (document only), which
every run supports. A run already scored by the chosen criterion keeps its stored scores; the
others are re-scored from their stored hits.

Equal chunker versions everywhere: each run keeps its own stored scores (``exact``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations

from kebab_eval_pipeline.compare.fallback import chunker_versions, criterion_gaps, plan_matching, scored_by
from kebab_eval_pipeline.foundation.errors import InputError, Offender
from kebab_eval_pipeline.store.runs import StoredRun

#: Chunk-independent criteria, strongest first.
_STRENGTH = ("anchor", "span", "doc")


@dataclass(frozen=True)
class CommonPlan:
    """How N runs are matched: ``mode`` (``exact`` or ``fallback_<criterion>``), the criterion
    (None: each run's stored scores), why (``note``), and the run ids re-scored under it."""

    mode: str
    criterion: str | None
    note: str
    rescored: tuple[str, ...] = ()


def plan_common_matching(runs: Sequence[StoredRun], strict: bool = False) -> CommonPlan:
    """The one matching plan for ``runs`` (see the module docstring).

    Raises :class:`InputError` naming every run and its chunker version when the versions differ
    and ``strict`` is set."""
    versions = {r.run_id: r.metrics.info.get("versions", {}).get("chunker_version") for r in runs}
    if len(set(versions.values())) <= 1:
        return CommonPlan("exact", None, "")
    if strict:
        raise InputError(
            "chunker versions differ and --strict-chunker-version was given",
            [
                Offender(f"run {run_id}", f"chunker_version {version!r}")
                for run_id, version in versions.items()
            ],
        )
    plans = {
        (a.run_id, b.run_id): plan_matching(a, b)
        for a, b in combinations(runs, 2)
        if len(set(chunker_versions(a, b))) > 1
    }
    chosen = {p.criterion for p in plans.values()}
    differ = "chunker versions differ (" + ", ".join(f"{r}: {v!r}" for r, v in versions.items()) + ")"
    if len(chosen) == 1:
        criterion = chosen.pop()
        note = f"{differ}: every pair of runs with different chunkers is matched by {criterion}"
    else:
        weakest = max(chosen, key=_STRENGTH.index)
        criterion = weakest if _every_pair_supports(runs, plans, weakest) else "doc"
        picks = "; ".join(f"{a}/{b}: {p.criterion}" for (a, b), p in plans.items())
        note = (
            f"{differ}: the pairs of runs would be matched by different criteria ({picks}); "
            f"all runs are matched by {criterion}, which every pair supports"
        )
    rescored = tuple(r.run_id for r in runs if scored_by(r) != criterion)
    if rescored:
        note += f"; re-scored by {criterion}: " + ", ".join(rescored)
    return CommonPlan(f"fallback_{criterion}", criterion, note, rescored)


def _every_pair_supports(runs: Sequence[StoredRun], plans: dict, criterion: str) -> bool:
    """True when every planned pair could be matched by ``criterion``: a pair whose own plan chose
    a stronger criterion is asked again with ``criterion`` as the strongest allowed."""
    if criterion == "doc":
        return True
    by_id = {r.run_id: r for r in runs}
    for (a, b), plan in plans.items():
        if plan.criterion == criterion:
            continue
        # A pair that chose a stronger criterion because both runs were scored by it says nothing
        # about the weaker one: check what the weaker criterion needs (gold + hits) directly.
        if not supports(by_id[a], by_id[b], criterion):
            return False
    return True


def supports(a: StoredRun, b: StoredRun, criterion: str) -> bool:
    """True when the golden sets and hits of ``a`` and ``b`` support ``criterion`` (anchor or span),
    by the rule of :func:`~.fallback.plan_matching`."""
    return not criterion_gaps(a, b, criterion)
