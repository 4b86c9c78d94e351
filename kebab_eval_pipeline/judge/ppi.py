"""A judged mean corrected by a person's labels: prediction-powered inference (PPI++) for a mean.

A judge scores every item; a person labels a sample of them. The judge's mean over all items is
biased by whatever the judge gets wrong, and its usual confidence interval is about the judge, not
the truth. Prediction-powered inference (Angelopoulos et al., *Science* 2023; PPI++, Angelopoulos,
Duchi & Zrnic 2023) uses the labelled sample to measure the judge's bias and removes it:

- ``θ̂ = λ·mean(f_unlabelled) + mean(y − λ·f_labelled)``: the judge's scores ``f`` on the ``N``
  items nobody labelled, corrected by the mean error on the ``n`` labelled ones;
- ``λ`` — power tuning: ``λ = 1`` is plain PPI, ``λ = 0`` the labels alone (the classical
  estimate); by default the variance-minimising ``λ = cov(y, f)/((1 + n/N)·var(f))`` (covariance
  over the labelled items with divisor ``n``, variance over all judged items with ``n + N − 1``),
  clipped to [0, 1];
- the ``1 − α`` interval ``θ̂ ± z(1 − α/2)·√(sd(λ·f_unlabelled)²/N + sd(y − λ·f_labelled)²/n)``
  (standard deviations with divisor N and n).

These are the formulas of the reference implementation, ``ppi_py`` (``ppi_mean_pointestimate``,
``ppi_mean_ci``), which ``tests/judge/test_ppi.py`` matches where it is installed; a worked example
by hand holds everywhere. The estimate is unbiased whatever the judge, and its interval covers the
truth at its nominal rate (simulated in the tests over 1,000 synthetic datasets with a biased
judge) while the judge's own interval does not.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

__all__ = ["PpiMean", "ppi_mean"]


@dataclass(frozen=True)
class PpiMean:
    """A corrected mean: ``estimate`` with its ``ci_low``/``ci_high`` at ``1 − alpha``, the
    power-tuning ``lam`` used, the ``n`` labelled and ``n_unlabelled`` other items, and for
    comparison the judge's own mean over every item (``judged_mean``) and the labels' mean
    (``labelled_mean``)."""

    estimate: float
    ci_low: float
    ci_high: float
    lam: float
    alpha: float
    n: int
    n_unlabelled: int
    judged_mean: float
    labelled_mean: float

    def as_dict(self) -> dict:
        return asdict(self)


def ppi_mean(
    labels, judged_labelled, judged_unlabelled, *, alpha: float = 0.05, lam: float | None = None
) -> PpiMean:
    """The PPI++ estimate of a mean and its interval (module doc).

    Inputs: ``labels`` — the person's values on the labelled items; ``judged_labelled`` — the
    judge's values on the same items, in the same order; ``judged_unlabelled`` — the judge's values
    on every other item; ``alpha`` in (0, 1); ``lam`` — fixed power tuning (None: the optimal one).
    Raises ``ValueError`` when fewer than 2 labelled or 1 unlabelled items are given, the labelled
    arrays differ in length, or a value is not finite."""
    from scipy.special import ndtri

    y = np.asarray(labels, dtype=np.float64)
    f = np.asarray(judged_labelled, dtype=np.float64)
    fu = np.asarray(judged_unlabelled, dtype=np.float64)
    if y.ndim != 1 or y.shape != f.shape:
        raise ValueError(f"labels and judged_labelled must be 1-D of one length, got {y.shape} and {f.shape}")
    if y.size < 2 or fu.size < 1:
        raise ValueError(f"need at least 2 labelled and 1 unlabelled item, got {y.size} and {fu.size}")
    if not (np.isfinite(y).all() and np.isfinite(f).all() and np.isfinite(fu).all()):
        raise ValueError("values must be finite")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    n, big_n = y.size, fu.size
    if lam is None:
        covariance = float(np.mean((y - y.mean()) * (f - f.mean())))
        variance = float(np.var(np.concatenate([f, fu]), ddof=1))
        lam = 0.0 if variance == 0 else float(np.clip(covariance / ((1 + n / big_n) * variance), 0.0, 1.0))
    estimate = float(lam * fu.mean() + (y - lam * f).mean())
    se = float(np.sqrt(np.var(lam * fu) / big_n + np.var(y - lam * f) / n))
    z = float(ndtri(1 - alpha / 2))
    return PpiMean(
        estimate=estimate,
        ci_low=estimate - z * se,
        ci_high=estimate + z * se,
        lam=float(lam),
        alpha=alpha,
        n=n,
        n_unlabelled=big_n,
        judged_mean=float(np.concatenate([f, fu]).mean()),
        labelled_mean=float(y.mean()),
    )
