"""Error rates of margin decisions at the margin: the shared engine of ``test_paired_score.py``
(small scale) and ``benchmarks/bench_margin_size.py`` (full scale); and the exact McNemar power
by brute force (:func:`exact_mcnemar_power`), the yardstick of the 0/1 minimum detectable effect.

A non-inferiority decision "b is no worse than a by more than δ" has size ≤ α when, with the true
mean difference exactly −δ, it is declared at most α of the time. Two bounds are compared:

- ``t``: the paired-t lower bound ``mean − t(1 − α; n − 1)·sd/√n`` (the rule before the score
  bounds);
- ``score``: :func:`kebab_eval_pipeline.compare.paired_score.score_bounds`, as the comparison uses it.

For 0/1 scores the size is **exact**: every outcome (x gains, y losses) of the trinomial is
enumerated with its probability, for a grid of gain rates (the nuisance parameter); no Monte Carlo
error. For graded scores (MRR-like differences) it is simulated.
"""

from __future__ import annotations

import numpy as np
from scipy import stats
from scipy.special import gammaln, stdtrit

from kebab_eval_pipeline.compare.paired_score import score_bounds

#: Sizes of a change of reciprocal rank (rank 1↔miss, 1↔2, 1↔3, 2↔3, 3↔4): MRR-like differences.
RR_CHANGES = np.array([1.0, 0.5, 1 / 3, 1 / 6, 1 / 12])
#: Gain rates at the margin (the loss rate is gain + δ); the worst over them is the size.
GAIN_RATES = np.concatenate([np.linspace(0.0, 0.05, 11), np.linspace(0.06, 0.44, 20)])


def t_rejects(n, gain, loss, square, delta: float, alpha: float) -> np.ndarray:
    """The paired-t rule: lower bound of the mean difference above −δ."""
    n = np.asarray(n, dtype=float)
    mean = (np.asarray(gain) - np.asarray(loss)) / n
    sd2 = np.maximum((np.asarray(square) - n * mean * mean) / (n - 1), 0.0)
    return mean - stdtrit(n - 1, 1 - alpha) * np.sqrt(sd2 / n) > -delta


def score_rejects(n, gain, loss, square, delta: float, alpha: float) -> np.ndarray:
    """The score rule of the comparison: its lower bound above −δ."""
    low, _ = score_bounds(np.broadcast_to(n, np.shape(gain)), gain, loss, square, alpha)
    return low > -delta


RULES = {"t": t_rejects, "score": score_rejects}


def binary_outcomes(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Every (gains, losses) of n pairs of 0/1 scores."""
    x, y = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
    keep = x + y <= n
    return x[keep].astype(float), y[keep].astype(float)


def binary_size(rule: str, n: int, delta: float, alpha: float = 0.05, gains=GAIN_RATES) -> float:
    """Exact size at the margin: the largest, over gain rates ``g``, probability that the rule
    declares "non-inferior within δ" when gains have rate g and losses g + δ (true Δ = −δ)."""
    x, y = binary_outcomes(n)
    rejects = RULES[rule](n, x, y, x + y, delta, alpha)
    worst = 0.0
    for g in gains:
        loss = g + delta
        if g + loss >= 1:
            continue
        with np.errstate(divide="ignore", invalid="ignore"):
            log_p = (
                gammaln(n + 1)
                - gammaln(x + 1)
                - gammaln(y + 1)
                - gammaln(n - x - y + 1)
                + np.where(x > 0, x * np.log(g) if g > 0 else -np.inf, 0.0)
                + y * np.log(loss)
                + (n - x - y) * np.log1p(-g - loss)
            )
        worst = max(worst, float(np.exp(log_p)[rejects].sum()))
    return worst


def graded_size(
    rule: str, n: int, delta: float, alpha: float = 0.05, repeats: int = 20_000, seed: int = 0, gains=None
) -> tuple[float, float]:
    """Simulated size at the margin for MRR-like differences: a query's reciprocal rank rises by
    one of :data:`RR_CHANGES` (uniformly) with probability g, falls by one with probability
    g + δ/mean(changes), so the true mean difference is −δ. Returns (worst rate over ``gains``,
    its Monte Carlo standard error)."""
    rng = np.random.default_rng(seed)
    k = RR_CHANGES.size
    values = np.concatenate([RR_CHANGES, -RR_CHANGES, [0.0]])
    worst = (0.0, 0.0)
    for g in (0.0, 0.02, 0.05, 0.1, 0.2, 0.3) if gains is None else gains:
        loss = g + delta / RR_CHANGES.mean()
        if g + loss > 1:
            continue
        counts = rng.multinomial(
            n, np.concatenate([np.full(k, g / k), np.full(k, loss / k), [1 - g - loss]]), repeats
        )
        gain_sum, loss_sum = counts[:, :k] @ RR_CHANGES, counts[:, k : 2 * k] @ RR_CHANGES
        rate = float(RULES[rule](n, gain_sum, loss_sum, counts @ values**2, delta, alpha).mean())
        if rate > worst[0]:
            worst = (rate, float(np.sqrt(rate * (1 - rate) / repeats)))
    return worst


def exact_mcnemar_power(n: int, changed: float, delta: float, alpha: float) -> float:
    """Power of the exact McNemar test by brute force, independent of the package's: every
    (gains, losses) outcome of n pairs with its trinomial probability, each tested with
    ``scipy.stats.binomtest`` (the discordant share raised to |Δ| when Δ needs more)."""
    share = max(changed, abs(delta))
    gain, loss = (share + delta) / 2, (share - delta) / 2
    total = 0.0
    for x in range(n + 1):
        for y in range(n + 1 - x):
            if x + y and stats.binomtest(x, x + y).pvalue < alpha:
                total += stats.multinomial.pmf([x, y, n - x - y], n, [gain, loss, 1 - share])
    return total
