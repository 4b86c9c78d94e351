"""What a paired comparison can resolve: the minimum detectable effect and the queries it needs.

A "not significant" row does not say "no difference"; it says no difference as large as the test
could see was seen. How large that is follows from the per-query differences the comparison
already has — their standard deviation ``sd`` over ``n`` paired queries:

- **minimum detectable effect** (:func:`minimum_detectable_effect`): the smallest true mean change
  ``Δ`` that the two-sided paired test at level ``α`` detects with probability ``power`` (80% by
  default): ``Δ = d·sd`` where ``d`` solves the paired t power equation
  ``P(|T| > t(1 − α/2; n − 1)) = power``, ``T`` noncentral t with ``n − 1`` degrees of freedom and
  noncentrality ``d·√n`` — the equation ``statsmodels.stats.power.TTestPower`` solves (the tests
  compare the two). ``α`` is the level the comparison's correction demands of a lone significant
  change: ``α/m`` for a family of ``m`` tests (Holm's first step; Benjamini–Hochberg's smallest
  threshold), so the figure is conservative for a change that comes with others.
- **queries needed** (:func:`queries_needed`): the smallest ``n`` whose minimum detectable effect
  is at most ``Δ``, for the same ``sd``.

The tests actually run are the sign-flip randomization test (graded scores), whose large-sample
power is the t power — ``tests/compare/test_power.py`` simulates it at the computed effect (30–100
queries): it finds the effect 79–83% of the time — and exact McNemar (0/1 scores), conservative
on few discordant pairs (70–77% at the t effect). For exact McNemar rows the effect is therefore
computed from the test's **exact power** (:func:`mcnemar_power`, every discordant count
enumerated, the observed share ψ of changed queries held — or raised to |Δ| when a change needs
more changed queries than were seen), so it is the change exact McNemar finds 80% of the time.

No variance, no effect: with no query changed between the runs (``sd = 0``) or fewer than 2
pairs, a graded metric's effect is null — its variance is unknown; a 0/1 metric's exact effect
holds even then (a change needs that many queries to flip one way).
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "DEFAULT_POWER",
    "RESOLUTION_COLUMNS",
    "family_alpha",
    "mcnemar_detectable_effect",
    "mcnemar_power",
    "mcnemar_queries_needed",
    "minimum_detectable_effect",
    "queries_needed",
    "t_power",
    "with_detectable_effects",
]

#: The power every minimum detectable effect is stated at.
DEFAULT_POWER = 0.8
_STEPS = 80


def t_power(effect_size, n, alpha: float) -> np.ndarray:
    """Power of the two-sided one-sample (paired) t test at standardised ``effect_size`` (mean
    difference / sd of the differences) with ``n`` pairs at level ``alpha``, element-wise — as
    ``statsmodels.stats.power.TTestPower().power(effect_size, n, alpha)``. NaN where ``n < 2``."""
    from scipy.special import nctdtr, stdtrit

    d, n = np.broadcast_arrays(np.asarray(effect_size, dtype=float), np.asarray(n, dtype=float))
    with np.errstate(invalid="ignore"):
        df = n - 1.0
        crit = stdtrit(df, 1.0 - alpha / 2.0)
        nc = d * np.sqrt(n)
        # Far in a tail the noncentral t cdf can come back NaN: there it is 0 (or 1) to double
        # precision, on the side the noncentrality puts it.
        upper = nctdtr(df, nc, crit)
        upper = np.where(np.isnan(upper), np.where(nc > crit, 0.0, 1.0), upper)
        lower = nctdtr(df, nc, -crit)
        lower = np.where(np.isnan(lower), np.where(nc > -crit, 0.0, 1.0), lower)
        power = 1.0 - upper + lower
    return np.where(n >= 2, power, np.nan)


def minimum_detectable_effect(sd, n, alpha, power: float = DEFAULT_POWER) -> np.ndarray:
    """The smallest |mean change| detected with probability ``power`` by the two-sided paired test
    at level ``alpha`` (scalar or per element), for differences with standard deviation ``sd``
    over ``n`` pairs; element-wise over arrays. NaN where ``sd`` is NaN or 0, or ``n < 2``."""
    if not 0.0 < power < 1.0:
        raise ValueError(f"power must be in (0, 1), got {power!r}")
    sd, n, alpha = np.broadcast_arrays(
        np.asarray(sd, dtype=float), np.asarray(n, dtype=float), np.asarray(alpha, dtype=float)
    )
    ok = (n >= 2) & (sd > 0) & np.isfinite(sd) & (alpha > 0) & (alpha < 1)
    out = np.full(sd.shape, np.nan)
    if ok.any():
        lo = np.zeros(int(ok.sum()))
        hi = np.full(lo.shape, 1.0)
        nn, aa = n[ok], alpha[ok]
        while True:  # widen until the upper end reaches the power (a tiny n needs a large effect)
            short = t_power(hi, nn, aa) < power
            if not short.any() or hi.max() > 1e6:
                break
            hi = np.where(short, hi * 4.0, hi)
        for _ in range(_STEPS):
            mid = 0.5 * (lo + hi)
            enough = t_power(mid, nn, aa) >= power
            hi = np.where(enough, mid, hi)
            lo = np.where(enough, lo, mid)
        out[ok] = hi * sd[ok]
    return out if out.ndim else out[()]


#: Above this many pairs the exact McNemar power is the t power to within a point: the t one is used.
_EXACT_MAX_PAIRS = 20_000


def mcnemar_power(n: int, discordance: float, delta: float, alpha: float) -> float:
    """Exact power of the two-sided exact McNemar test (:func:`.significance.sign_test_p` < ``alpha``)
    on ``n`` pairs whose true share of discordant pairs is ``ψ = max(discordance, |delta|)`` and
    whose true mean difference (gains − losses) is ``delta``: the discordant count D ~ Binomial(n, ψ),
    the gains among them ~ Binomial(D, (ψ + Δ)/(2ψ)), and the test rejects when the gains are at
    most ``c(D)`` or at least ``D − c(D)``, ``c(D)`` the largest count with ``2·P(X ≤ c) < alpha``
    for X ~ Binomial(D, ½). 0 when ψ is 0."""
    # scipy.special only: scipy.stats costs a run with a baseline 0.5–0.8 s of imports.
    from scipy.special import bdtr, bdtrc, bdtrik, gammaln, xlog1py, xlogy

    psi = min(max(float(discordance), abs(float(delta))), 1.0)
    if psi <= 0 or n < 1:
        return 0.0
    n = int(n)
    d = np.arange(n + 1)  # integer counts: scipy's binomial functions deprecate a float n
    weight = np.exp(
        gammaln(n + 1) - gammaln(d + 1) - gammaln(n - d + 1) + xlogy(d, psi) + xlog1py(n - d, -psi)
    )
    cut = _mcnemar_cut(d, alpha, bdtr, bdtrik)
    gain = (psi + delta) / (2 * psi)
    low = np.where(cut >= 0, bdtr(np.maximum(cut, 0), d, gain), 0.0)
    high = bdtrc(d - cut - 1, d, gain)  # P(gains ≥ D − c); 0 when c = −1 (D − c − 1 = D)
    return float(np.sum(weight * (low + high)))


def _mcnemar_cut(d: np.ndarray, alpha: float, bdtr, bdtrik) -> np.ndarray:
    """Per discordant count D, the largest gain count c with 2·P(X ≤ c) < alpha for X ~
    Binomial(D, ½) (−1 when none): the continuous inverse, then settled on the integer."""
    with np.errstate(invalid="ignore"):
        guess = np.floor(np.nan_to_num(bdtrik(alpha / 2, d.astype(float), 0.5), nan=-1.0))
    cut = np.clip(guess, -1, d).astype(np.int64)

    def below(c):  # 2·P(X ≤ c) < alpha, with P(X ≤ −1) = 0
        return np.where(c >= 0, 2 * bdtr(np.maximum(c, 0), d, 0.5) < alpha, True)

    for _ in range(3):
        cut = np.where(below(cut), cut, cut - 1)
    for _ in range(3):
        cut = np.where((cut + 1 < d / 2) & below(cut + 1), cut + 1, cut)
    return np.where(d == 0, -1, cut)


def mcnemar_detectable_effect(
    n: int, discordance: float, alpha: float, power: float = DEFAULT_POWER
) -> float:
    """The smallest |Δ| exact McNemar detects with probability ``power`` (:func:`mcnemar_power`)
    on ``n`` pairs with the observed share ``discordance`` of changed queries; NaN when no change
    up to 1 reaches it, or ``n < 2``. Above 20,000 pairs, the t effect at sd √ψ."""
    if n < 2:
        return float("nan")
    if n > _EXACT_MAX_PAIRS:
        return float(minimum_detectable_effect(np.sqrt(discordance), n, alpha, power))
    if mcnemar_power(n, discordance, 1.0, alpha) < power:
        return float("nan")
    lo, hi = 0.0, 1.0
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        if mcnemar_power(n, discordance, mid, alpha) >= power:
            hi = mid
        else:
            lo = mid
    return hi


def mcnemar_queries_needed(
    discordance: float, effect: float, alpha: float, power: float = DEFAULT_POWER
) -> int | None:
    """The fewest pairs on which exact McNemar detects a change of ``effect`` with ``power``, for
    the share ``discordance`` of changed queries (:func:`mcnemar_power`); None when ``effect`` is
    not positive. Beyond 20,000 pairs, the t answer at sd √ψ."""
    if not effect > 0:
        return None
    if mcnemar_power(_EXACT_MAX_PAIRS, discordance, effect, alpha) < power:
        return queries_needed(np.sqrt(max(discordance, effect)), effect, alpha, power)
    lo, hi = 1, _EXACT_MAX_PAIRS
    # An exact test's power rises with n in a saw-tooth, not pair by pair: bisection finds where it
    # crosses the target at its own resolution (a neighbouring n may sit just above or below).
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if mcnemar_power(mid, discordance, effect, alpha) >= power:
            hi = mid
        else:
            lo = mid
    return hi


def queries_needed(sd: float, effect: float, alpha: float, power: float = DEFAULT_POWER) -> int | None:
    """The fewest paired queries whose :func:`minimum_detectable_effect` is at most ``effect`` for
    differences of standard deviation ``sd``; None when ``sd`` or ``effect`` is not positive."""
    if not (sd > 0 and effect > 0):
        return None
    # z approximation to start, then the exact t answer by bisection on n.
    from scipy.special import ndtri

    z = float(ndtri(1 - alpha / 2) + ndtri(power))
    lo, hi = 2, max(4, int(np.ceil((z * sd / effect) ** 2 * 1.5)) + 4)
    while float(minimum_detectable_effect(sd, hi, alpha, power)) > effect:
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if float(minimum_detectable_effect(sd, mid, alpha, power)) <= effect:
            hi = mid
        else:
            lo = mid
    return hi if float(minimum_detectable_effect(sd, lo, alpha, power)) > effect else lo


def family_alpha(alpha: float, adjusted_by, holm_size: int, bh_size: int) -> np.ndarray:
    """Per row, the level a lone significant change must reach under the comparison's correction:
    ``alpha/holm_size`` for Holm rows, ``alpha/bh_size`` for Benjamini–Hochberg rows, ``alpha``
    where the row has no adjustment (``adjusted_by`` null: raw significance)."""
    import pandas as pd

    by = np.asarray([None if pd.isna(b) else str(b) for b in adjusted_by], dtype=object)
    out = np.full(by.shape, float(alpha))
    out[by == "holm"] = alpha / max(holm_size, 1)
    out[by == "bh"] = alpha / max(bh_size, 1)
    return out


#: Columns :func:`with_detectable_effects` adds to a comparison's per-metric table.
RESOLUTION_COLUMNS: dict[str, str] = {"mde": "float64", "mde_alpha": "float64"}


def with_detectable_effects(per_metric, families: dict, alpha: float, power: float = DEFAULT_POWER):
    """The comparison's per-metric table plus :data:`RESOLUTION_COLUMNS`: ``mde``, the minimum
    detectable effect of each tested metric (``sd`` = ``paired_se·√n_paired``, at ``mde_alpha``:
    :func:`family_alpha` of the row's adjustment and the ``families`` sizes; for an exact McNemar
    row, :func:`mcnemar_detectable_effect` with the share of changed queries), NaN where the metric
    has no paired test, fewer than 2 pairs or no query changed (``sd = 0``), or where the effect
    would exceed 1 (too few queries to detect any change of a [0, 1] metric)."""
    out = per_metric.copy()
    n = out["n_paired"].to_numpy(dtype=float, na_value=np.nan)
    se = out["paired_se"].to_numpy(dtype=float, na_value=np.nan)
    by = out["adjusted_by"] if "adjusted_by" in out.columns else [None] * len(out)
    level = family_alpha(
        alpha,
        by,
        int(families.get("holm", {}).get("size") or 0),
        int(families.get("bh", {}).get("size") or 0),
    )
    level = np.where(np.isnan(se), np.nan, level)
    out["mde"] = minimum_detectable_effect(se * np.sqrt(n), n, np.nan_to_num(level, nan=alpha), power)
    # Exact McNemar rows: the change that test finds with the power stated, from its exact power.
    if "test" in out.columns and "gain_sum" in out.columns:
        exact = (
            (out["test"] == "mcnemar_exact").fillna(False).to_numpy(dtype=bool) & ~np.isnan(level) & (n >= 2)
        )
        changed = (out["gain_sum"] + out["loss_sum"]).to_numpy(dtype=float, na_value=np.nan)
        # No query changed: the exact test still says which one-way change it would have found.
        for i in np.flatnonzero(exact & (changed >= 0)):
            out.iloc[i, out.columns.get_loc("mde")] = mcnemar_detectable_effect(
                int(n[i]), changed[i] / n[i], float(level[i]), power
            )
    # A null level (no test), or an "effect" beyond a [0, 1] metric's range: nothing detectable.
    out["mde"] = np.where(np.isnan(level) | (out["mde"] > 1), np.nan, out["mde"])
    out["mde_alpha"] = level
    return out.astype(RESOLUTION_COLUMNS)
