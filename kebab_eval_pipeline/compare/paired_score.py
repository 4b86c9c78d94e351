"""Score bounds for the mean paired difference of per-query scores in [0, 1] (non-inferiority, TOST).

A margin decision ("b is no worse than a by more than δ") needs a one-sided bound of the mean
difference ``Δ = mean(b − a)`` that is right where it matters: few queries changed, and all of them
one way (a candidate that only loses). A t bound fails there — its standard error comes from the
few differences seen, and with none seen it is 0 — so 60 queries, one of them lost, passed a margin
of 0.05 that the data cannot support (exact size of the t rule at the margin: 0.19 at n = 60,
δ = 0.05; 0.74 at n = 30, δ = 0.01).

The bound here is the **score bound of the difference of paired proportions** (Tango 1998), with a
continuity correction of ½, read with each difference's positive part as a fractional gain and its
negative part as a fractional loss:

- ``x = Σ max(dᵢ, 0)``, ``y = Σ max(−dᵢ, 0)`` (for 0/1 scores: the counts of the two kinds of
  discordant pairs), ``n`` pairs;
- under ``H0: Δ = Δ0`` the loss rate takes its restricted maximum-likelihood value ``p̃`` (Tango's
  closed form) and ``Var(Σdᵢ) = n·(κ·(2p̃ + Δ0) − Δ0²)``, where ``2p̃ + Δ0`` is the rate of changed
  queries and ``κ = (Σdᵢ² + 2)/(x + y + 2)`` the mean squared size of a change: 1 for 0/1 scores
  (Tango's interval exactly); below 1 for graded scores, shrunk towards 1 by two full-size pseudo
  differences so that a handful of small changes cannot claim a small variance;
- ``T_low(Δ0) = (x − y − nΔ0 − ½)/√Var`` and ``T_high(Δ0) = (x − y − nΔ0 + ½)/√Var``; the lower
  one-sided ``1 − α`` bound is the ``Δ0`` where ``T_low = z(1 − α)``, the upper where
  ``T_high = −z(1 − α)`` (found by bisection: ``T`` falls as ``Δ0`` rises).

Why this one (``benchmarks/bench_margin_size.py`` prints the table): on 0/1 scores the exact size
at the margin (every trinomial outcome enumerated, the worst gain rate over a fine grid) is
0.041–0.048 for n = 30…200 and margins 0.01–0.05, where Tango without the correction reaches
0.060 and the t bound 0.09–0.74; on graded scores (MRR-like differences, Monte Carlo) it is
0.022–0.042 where the t bound is 0.09–0.55. No difference seen (``x = y = 0``) gives a bound
that only a large enough n lifts past −δ: 30 identical queries are not "non-inferior within 0.01".

Scores must lie in [0, 1] (differences in [−1, 1]): every testable metric of the catalogue does.
"""

from __future__ import annotations

import numpy as np

__all__ = ["difference_sums", "score_bounds", "score_margin_p", "score_statistic"]

#: Continuity correction on the summed difference (a sum of 0/1 differences moves in steps of 1).
CONTINUITY = 0.5
#: Full-size pseudo differences that shrink the mean squared change towards 1.
PSEUDO_CHANGES = 2.0
_BISECTION_STEPS = 60


def difference_sums(d: np.ndarray) -> tuple[float, float, float]:
    """``(gain, loss, square)`` of paired differences ``d = b − a`` (NaN-free): ``Σ max(d, 0)``,
    ``Σ max(−d, 0)`` and ``Σ d²`` — all the score bounds need besides ``n``. Raises ``ValueError``
    when a difference lies outside [−1, 1] (scores outside [0, 1])."""
    d = np.asarray(d, dtype=np.float64)
    if d.size and float(np.abs(d).max()) > 1.0 + 1e-12:
        raise ValueError("score bounds need per-query scores in [0, 1] (differences in [−1, 1])")
    return float(np.clip(d, 0, None).sum()), float(np.clip(-d, 0, None).sum()), float((d * d).sum())


def _arrays(*values):
    return np.broadcast_arrays(*(np.asarray(v, dtype=np.float64) for v in values))


def score_statistic(n, gain, loss, square, delta0, side: str, continuity: float = CONTINUITY) -> np.ndarray:
    """``T_low`` (``side="low"``) or ``T_high`` (``side="high"``) at ``delta0``, element-wise (see
    the module doc). ``+inf``/``−inf`` where the null variance is 0 and the corrected numerator is
    positive/negative; NaN where any input is NaN or ``n < 1``. ``continuity=0`` gives Tango's
    uncorrected statistic (the published worked examples)."""
    n, x, y, s2, d0 = _arrays(n, gain, loss, square, delta0)
    with np.errstate(divide="ignore", invalid="ignore"):
        a = 2.0 * n
        b = -x - y + (2.0 * n - x + y) * d0
        c = -y * d0 * (1.0 - d0)
        loss_rate = (np.sqrt(np.maximum(b * b - 4.0 * a * c, 0.0)) - b) / (2.0 * a)
        kappa = (s2 + PSEUDO_CHANGES) / (x + y + PSEUDO_CHANGES)
        var = n * np.maximum(kappa * (2.0 * loss_rate + d0) - d0 * d0, 0.0)
        shift = -continuity if side == "low" else continuity
        num = x - y - n * d0 + shift
        t = np.where(var > 0, num / np.sqrt(var), np.sign(num) * np.inf)
    return np.where(np.isnan(n + x + y + s2 + d0) | (n < 1), np.nan, t)


def score_bounds(
    n, gain, loss, square, alpha: float, continuity: float = CONTINUITY
) -> tuple[np.ndarray, np.ndarray]:
    """One-sided ``1 − alpha`` score bounds ``(low, high)`` of the mean paired difference,
    element-wise over arrays of ``n`` and :func:`difference_sums`; each in [−1, 1]. NaN where an
    input is NaN or ``n < 1``. The two-sided ``1 − 2·alpha`` interval is ``[low, high]``."""
    if not 0.0 < alpha < 0.5:
        raise ValueError(f"alpha must be in (0, 0.5), got {alpha!r}")
    from scipy.special import ndtri

    z = float(ndtri(1.0 - alpha))
    n, x, y, s2 = (np.atleast_1d(v) for v in _arrays(n, gain, loss, square))
    ok = ~np.isnan(n + x + y + s2) & (n >= 1)
    low = np.full(n.shape, np.nan)
    high = np.full(n.shape, np.nan)
    if ok.any():
        args = (n[ok], x[ok], y[ok], s2[ok])
        low[ok] = _root(args, "low", z, continuity)
        high[ok] = _root(args, "high", -z, continuity)
    return low, high


def _root(args, side: str, target: float, continuity: float) -> np.ndarray:
    """The ``Δ0`` in [−1, 1] where ``score_statistic(…, side)`` falls through ``target``."""
    lo = np.full(args[0].shape, -1.0)
    hi = np.full(args[0].shape, 1.0)
    for _ in range(_BISECTION_STEPS):
        mid = 0.5 * (lo + hi)
        above = score_statistic(*args, mid, side, continuity) > target
        lo = np.where(above, mid, lo)
        hi = np.where(above, hi, mid)
    return 0.5 * (lo + hi)


def score_margin_p(n, gain, loss, square, delta0, side: str) -> np.ndarray:
    """One-sided p of the score test at ``delta0``: ``side="low"`` tests ``H0: Δ ≤ delta0`` (p =
    Φ(−T_low)), ``side="high"`` tests ``H0: Δ ≥ delta0`` (p = Φ(T_high)). Consistent with
    :func:`score_bounds`: ``p < alpha`` exactly when the bound lies beyond ``delta0``."""
    from scipy.special import ndtr

    t = score_statistic(n, gain, loss, square, delta0, side)
    return ndtr(-t) if side == "low" else ndtr(t)
