"""Non-inferiority and equivalence of a paired delta: "b is no worse than a by more than δ".

A team moving to a cheaper model or chunker does not claim "b is better"; it claims "b is not
worse by more than a margin it can live with". A non-significant difference does not show that
(a small golden set never shows anything); the one-sided confidence bound of the paired delta does:

- **non-inferior within δ** when the lower one-sided ``1 − α`` bound of the improvement (b − a,
  sign-flipped for lower-is-better metrics) exceeds −δ;
- **worse** when even its upper one-sided bound is below −δ (b is worse by more than δ);
- **inconclusive** otherwise — the data cannot tell.

Equivalence is the two one-sided tests (TOST): both bounds inside (−δ, δ) ⇒ **equivalent within
δ**; the whole interval outside ⇒ **not equivalent**; otherwise inconclusive.

The bounds are the score bounds of :mod:`.paired_score` (for 0/1 scores Tango's interval for the
difference of paired proportions, continuity-corrected; graded scores read as fractional gains and
losses): their error rate at the margin stays at or below α where few queries changed, which a
paired-t bound's does not (it declared 60 queries with one loss "non-inferior within 0.05"). The
bounds and the margin p-value come from one statistic, so ``p < α`` exactly when the verdict is
decisive; each is re-derivable from ``n`` and the three sums the comparison stores. Paired-t
bounds (:func:`t_bounds`) remain for scores outside [0, 1], which no catalogue metric has. Several
margin gates need no multiplicity adjustment: a release passes only when *every* one of them
passes, an intersection–union test, which is level α as is.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from kebab_eval_pipeline.compare.paired_score import score_margin_p
from kebab_eval_pipeline.foundation.number_text import is_null as _null
from kebab_eval_pipeline.metrics import catalogue

__all__ = ["MARGIN_KINDS", "MarginVerdict", "margin_rows", "margin_verdict", "t_bounds"]

#: Regression-gate bounds decided by a margin (the gates' ``non_inferior`` / ``equivalent``).
MARGIN_KINDS = ("non_inferior", "equivalent")


def t_bounds(delta, se, n, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """One-sided ``1 − alpha`` paired-t bounds of mean differences, element-wise.

    Inputs: arrays (or scalars) of the mean difference b − a, its standard error
    ``sd(b − a, ddof=1)/√n`` and the number of pairs ``n``; ``alpha`` in (0, 0.5). Output:
    ``(low, high)`` float arrays, ``delta ∓ t.ppf(1 − alpha, n − 1)·se`` (the quantile from
    ``scipy.special.stdtrit``, which ``scipy.stats.t.ppf`` calls); NaN where any input is NaN or
    ``n < 2`` (no spread to estimate). ``se = 0`` (every difference equal) gives
    ``low = high = delta``."""
    if not 0.0 < alpha < 0.5:
        raise ValueError(f"alpha must be in (0, 0.5), got {alpha!r}")
    delta, se, n = (np.atleast_1d(np.asarray(x, dtype=np.float64)) for x in (delta, se, n))
    ok = ~(np.isnan(delta) | np.isnan(se) | np.isnan(n)) & (n >= 2)
    low = np.full(delta.shape, np.nan)
    high = np.full(delta.shape, np.nan)
    if ok.any():
        # scipy.stats.t.ppf is this very function; scipy.special imports in ~0.1 s, scipy.stats in
        # 0.5–0.8 s (a run with a baseline pays it otherwise).
        from scipy.special import stdtrit

        q = stdtrit(n[ok] - 1.0, 1.0 - alpha)
        low[ok] = delta[ok] - q * se[ok]
        high[ok] = delta[ok] + q * se[ok]
    return low, high


@dataclass(frozen=True)
class MarginVerdict:
    """One margin decision. ``delta``/``bound_low``/``bound_high`` are of b − a as measured (not
    sign-flipped); ``verdict`` is ``non-inferior``/``equivalent``, ``inconclusive``, ``worse`` /
    ``not equivalent``, or ``None`` when there is no bound (``text`` says why); ``p_value`` is the
    one-sided score test of the margin's null (the larger of the two for equivalence; a t-test
    where the comparison had only a standard error)."""

    metric: str
    kind: str
    margin: float
    alpha: float
    delta: float | None
    bound_low: float | None
    bound_high: float | None
    p_value: float | None
    verdict: str | None
    passed: bool
    text: str

    def as_dict(self) -> dict:
        return asdict(self)


def margin_verdict(
    metric: str,
    kind: str,
    margin: float,
    alpha: float,
    delta: float | None,
    bound_low: float | None,
    bound_high: float | None,
    se: float | None = None,
    n: int | None = None,
    sums: tuple[float, float, float] | None = None,
) -> MarginVerdict:
    """Decide ``kind`` (``non_inferior`` or ``equivalent``) within ``margin`` from the one-sided
    ``1 − alpha`` bounds of the paired delta b − a (see the module doc). ``passed`` is True only
    for ``non-inferior`` / ``equivalent``. A null bound (no paired test) gives verdict ``None`` and
    ``passed`` False. ``n`` with ``sums`` (gain, loss and square sums of the differences) add the
    score test's p-value; ``n`` with ``se`` only, a t-test's."""
    if kind not in MARGIN_KINDS:
        raise ValueError(f"unknown margin kind {kind!r}; expected one of {MARGIN_KINDS}")
    if _null(delta) or _null(bound_low) or _null(bound_high):
        return MarginVerdict(
            metric, kind, margin, alpha, delta, None, None, None, None, False, "no confidence bound"
        )
    level = f"{1 - alpha:.0%}" if kind == "non_inferior" else f"{1 - 2 * alpha:.0%}"
    lower_better = catalogue.lower_is_better(metric)
    # Improvement g = b − a with the metric's sense (a fall of an error rate is an improvement).
    g_low, g_high = (-bound_high, -bound_low) if lower_better else (bound_low, bound_high)
    if kind == "non_inferior":
        if g_low > -margin:
            verdict, passed = "non-inferior", True
        elif g_high < -margin:
            verdict, passed = "worse", False
        else:
            verdict, passed = "inconclusive", False
        worse_side = "upper" if lower_better else "lower"
        bound = bound_high if lower_better else bound_low
        text = (
            f"{verdict}{' within ' + _g(margin) if passed else ''}: {worse_side} one-sided {level} bound of "
            f"b − a = {bound:+.4f} (delta {delta:+.4f}) vs margin {_g(margin)} "
            f"(non-inferior when {'below +' if lower_better else 'above −'}{_g(margin)})"
        )
    else:
        if bound_low > -margin and bound_high < margin:
            verdict, passed = "equivalent", True
        elif bound_low >= margin or bound_high <= -margin:
            verdict, passed = "not equivalent", False
        else:
            verdict, passed = "inconclusive", False
        text = (
            f"{verdict}{' within ±' + _g(margin) if passed else ''}: {level} interval of b − a "
            f"[{bound_low:+.4f}, {bound_high:+.4f}] (delta {delta:+.4f}) vs ±{_g(margin)}"
        )
    return MarginVerdict(
        metric,
        kind,
        margin,
        alpha,
        delta,
        bound_low,
        bound_high,
        _margin_p(kind, margin, delta, se, n, lower_better, sums),
        verdict,
        passed,
        text,
    )


def _margin_p(
    kind: str,
    margin: float,
    delta: float,
    se: float | None,
    n: int | None,
    lower_better: bool,
    sums: tuple[float, float, float] | None = None,
) -> float | None:
    """One-sided p of the margin's null: H0 g ≤ −δ (non-inferiority); for equivalence the larger p
    of H0 d ≤ −δ and H0 d ≥ δ (TOST). The score test from ``sums``, else a t-test from ``se``."""
    if sums is not None and n is not None and n >= 1 and not any(_null(v) for v in sums):
        low_p = float(score_margin_p(n, *sums, -margin, "low")[()])  # H0: d ≤ −δ
        high_p = float(score_margin_p(n, *sums, margin, "high")[()])  # H0: d ≥ δ
        if kind == "non_inferior":
            return high_p if lower_better else low_p
        return max(low_p, high_p)
    if _null(se) or n is None or n < 2 or se == 0:
        return None
    # Student's t cdf as scipy.stats.t computes it (t.cdf(x, df) is stdtr(df, x), t.sf(x, df) is
    # stdtr(df, −x)), without importing scipy.stats.
    from scipy.special import stdtr

    df = n - 1
    g = -delta if lower_better else delta
    if kind == "non_inferior":
        return float(stdtr(df, -(g + margin) / se))
    return float(max(stdtr(df, -(delta + margin) / se), stdtr(df, (delta - margin) / se)))


def _g(x: float) -> str:
    return f"{x:g}"


def margin_rows(per_metric, margins, alpha: float) -> list[MarginVerdict]:
    """One :class:`MarginVerdict` per ``(metric, kind, margin)`` in ``margins``, read from a
    comparison's per-metric table (``paired_delta``, ``bound_low``, ``bound_high``, ``n_paired``,
    ``gain_sum``/``loss_sum``/``square_sum``, ``paired_se``) — the same inputs the regression
    gates decide from. A metric missing from the table gets a verdict ``None`` ("no confidence bound")."""
    rows = per_metric.set_index("metric") if len(per_metric) else None
    out = []
    for metric, kind, margin in margins:
        row = rows.loc[metric] if rows is not None and metric in rows.index else None

        def num(column: str, row=row) -> float | None:
            if row is None or column not in row.index or row[column] is None or _null(row[column]):
                return None
            return float(row[column])

        n = num("n_paired")
        sums = (num("gain_sum"), num("loss_sum"), num("square_sum"))
        out.append(
            margin_verdict(
                metric,
                kind,
                float(margin),
                alpha,
                num("paired_delta"),
                num("bound_low"),
                num("bound_high"),
                se=num("paired_se"),
                n=None if n is None else int(n),
                sums=None if None in sums else sums,
            )
        )
    return out
