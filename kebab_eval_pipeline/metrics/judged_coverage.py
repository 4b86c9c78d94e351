"""How much of a run's ranking the golden set judged, and the warning when too little of it was.

``judged@k`` (the metric catalogue's judgement coverage) is the share of a query's top-k hits that
match any gold support, averaged over the applicable queries. A hit the golden set never judged is
counted as irrelevant by every other retrieval metric, so when much of a ranking is unjudged, wins
and losses may reflect gaps in the gold rather than in the system. The warning is computed at the
*smallest* k the run has (judged@1 by default: the share of queries whose top hit is judged),
against a threshold (``compare.min_judged`` of the run config). Not at the largest: a golden set
with one to three supports per query can never judge most of a top-10, so judged@10 is low on
every run of it and a warning there would say nothing; an unjudged hit at the top is what decides
a verdict and the reciprocal rank.
"""

from __future__ import annotations

import math
import re

DEFAULT_MIN_JUDGED = 0.5
_JUDGED_AT = re.compile(r"^judged@(\d+)$")


def judged_coverage(metrics: dict[str, float | None], threshold: float = DEFAULT_MIN_JUDGED) -> dict | None:
    """``{"k", "judged", "unjudged", "threshold", "low"}`` at the smallest ``judged@k`` in
    ``metrics`` (``unjudged`` = 1 − judged); None when the run has no judged@k or it is null
    (no applicable query: nothing to warn about)."""
    ks = [int(m.group(1)) for name in metrics if (m := _JUDGED_AT.match(name))]
    if not ks:
        return None
    k = min(ks)
    value = metrics.get(f"judged@{k}")
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    value = float(value)
    return {
        "k": k,
        "judged": value,
        "unjudged": 1.0 - value,
        "threshold": float(threshold),
        "low": value < threshold,
    }


def judged_warning(run: str, coverage: dict | None, comparing: bool = True) -> str | None:
    """The warning line when ``coverage`` (:func:`judged_coverage`) is below its threshold, else
    None. ``run`` names the ranking ("run b", "run 'x'"); ``comparing``: the line is for a
    comparison (wins and losses) rather than a run's own report."""
    if coverage is None or not coverage["low"]:
        return None
    k = coverage["k"]
    share = f"{round(coverage['unjudged'] * 100):.0f}%"
    top = "the top hits" if k == 1 else f"the top-{k} hits"
    head = (
        f"{share} of {top} of {run} were never judged by the golden set "
        f"(judged@{k} {coverage['judged']:.4f} < {coverage['threshold']:g}, mean over queries)"
    )
    if comparing:
        return head + ": wins and losses may reflect gaps in the gold, see the suspect-gold queue"
    return (
        head + ": the metrics count them as irrelevant, so they may reflect gaps in the gold; "
        "a comparison's suspect-gold queue lists the unjudged hits that cost a query its rank"
    )
