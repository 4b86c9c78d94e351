"""How often a judge agrees with a person: Cohen's κ with a bootstrap interval, as statisticians report it.

Two raters — a reference (a person's label, or a golden set's support) and the judge — label the
same items. From their confusion matrix (rows: the reference's label, columns: the judge's):

- **observed agreement** ``p_o = Σ w_ij p_ij`` and **chance agreement** ``p_e = Σ w_ij r_i c_j``
  (``r``, ``c`` the two raters' label shares), with agreement weights ``w``: the identity for
  nominal labels (``weights="none"``), ``1 − |i − j|/(k − 1)`` (``"linear"``) or
  ``1 − ((i − j)/(k − 1))²`` (``"quadratic"``) for graded ones, labels in their given order;
- **Cohen's κ** ``= (p_o − p_e)/(1 − p_e)``: 1 for perfect agreement, 0 for what chance alone
  gives. Undefined (null, with the reason) when ``p_e = 1``: both raters gave every item one and
  the same label, so agreement says nothing about the judge;
- a **bootstrap percentile interval** of κ: items resampled with replacement, which for a
  confusion matrix is a multinomial draw of its cells (the same distribution, O(k²) per resample);
  resamples where κ is undefined are left out and counted;
- the **base rate**: the reference's share of each label — a κ means little without it (a judge
  that says "relevant" to everything agrees 90% of the time where 90% are relevant, with κ 0).

The numbers equal ``statsmodels.stats.inter_rater.cohens_kappa`` and scikit-learn's
``cohen_kappa_score`` (``tests/judge/test_agreement.py`` compares all three on random data).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

__all__ = ["WEIGHTS", "Agreement", "agreement", "agreement_weights", "confusion_matrix", "kappa_from_table"]

#: Agreement weightings: nominal labels, or graded ones (linear / quadratic in the label distance).
WEIGHTS = ("none", "linear", "quadratic")


def confusion_matrix(reference: Sequence, judged: Sequence, labels: Sequence) -> np.ndarray:
    """Counts of (reference label, judged label) pairs, rows and columns in ``labels`` order.
    Raises ``ValueError`` on different lengths or a value outside ``labels``."""
    ref, jud = np.asarray(reference, dtype=object), np.asarray(judged, dtype=object)
    if ref.shape != jud.shape or ref.ndim != 1:
        raise ValueError(f"reference and judged must be 1-D of one length, got {ref.shape} and {jud.shape}")
    index = {label: i for i, label in enumerate(labels)}
    unknown = sorted({str(v) for v in (*ref, *jud) if v not in index})
    if unknown:
        raise ValueError(f"labels outside {list(labels)!r}: {', '.join(unknown)}")
    k = len(labels)
    cells = np.fromiter((index[r] * k + index[j] for r, j in zip(ref, jud, strict=True)), dtype=np.int64)
    return np.bincount(cells, minlength=k * k).reshape(k, k)


def agreement_weights(k: int, weights: str = "none") -> np.ndarray:
    """The ``k × k`` agreement weight matrix of ``weights`` (one of :data:`WEIGHTS`)."""
    if weights not in WEIGHTS:
        raise ValueError(f"weights must be one of {WEIGHTS}, got {weights!r}")
    if weights == "none" or k < 2:
        return np.eye(k)
    distance = np.abs(np.subtract.outer(np.arange(k), np.arange(k))) / (k - 1)
    return 1.0 - (distance if weights == "linear" else distance**2)


def kappa_from_table(table, weights: str = "none") -> np.ndarray:
    """Cohen's κ of one confusion matrix (``k × k``) or of many (``… × k × k``, e.g. bootstrap
    draws), element-wise; NaN where there is no item or chance agreement is 1."""
    t = np.asarray(table, dtype=np.float64)
    k = t.shape[-1]
    w = agreement_weights(k, weights)
    n = t.sum(axis=(-2, -1))
    with np.errstate(divide="ignore", invalid="ignore"):
        p = t / n[..., None, None]
        observed = (p * w).sum(axis=(-2, -1))
        rows, cols = p.sum(axis=-1), p.sum(axis=-2)
        expected = np.einsum("...i,ij,...j->...", rows, w, cols)
        kappa = (observed - expected) / (1.0 - expected)
    return np.where((n > 0) & (expected < 1.0 - 1e-12), kappa, np.nan)


@dataclass(frozen=True)
class Agreement:
    """One judge against one reference: ``n`` items, ``kappa`` with its bootstrap interval
    (``ci_low``/``ci_high``; None when κ is undefined), ``observed`` agreement (weighted),
    ``base_rate`` (the reference's share of each label), ``confusion`` (rows: reference, columns:
    judge, in ``labels`` order) and ``note`` (why κ is null; resamples left out)."""

    n: int
    labels: list
    weights: str
    kappa: float | None
    ci_low: float | None
    ci_high: float | None
    observed: float | None
    base_rate: dict = field(default_factory=dict)
    confusion: list = field(default_factory=list)
    note: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


def agreement(
    reference: Sequence,
    judged: Sequence,
    labels: Sequence | None = None,
    *,
    weights: str = "none",
    n_resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Agreement:
    """The :class:`Agreement` of ``judged`` with ``reference`` (same items, same order).

    ``labels``: every possible label in order (graded weights read the order; default: the sorted
    labels seen). The interval is the bootstrap percentile interval at ``confidence`` over
    ``n_resamples`` multinomial redraws of the confusion matrix, seeded by ``seed`` (the same
    inputs give the same interval). No item, or every item given one and the same label by both,
    gives κ None with the reason in ``note``."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    labels = list(labels) if labels is not None else sorted({*reference, *judged}, key=str)
    table = confusion_matrix(reference, judged, labels)
    n = int(table.sum())
    base = {str(lab): (float(table[i].sum() / n) if n else None) for i, lab in enumerate(labels)}
    kappa = float(kappa_from_table(table, weights))
    if n == 0 or np.isnan(kappa):
        why = "no item" if n == 0 else "every item has one and the same label from both: κ is undefined"
        observed = None if n == 0 else float((table / n * agreement_weights(len(labels), weights)).sum())
        return Agreement(n, labels, weights, None, None, None, observed, base, table.tolist(), why)
    observed = float((table / n * agreement_weights(len(labels), weights)).sum())
    rng = np.random.default_rng(seed)
    draws = rng.multinomial(n, table.ravel() / n, size=n_resamples).reshape(n_resamples, *table.shape)
    kappas = kappa_from_table(draws, weights)
    defined = kappas[~np.isnan(kappas)]
    tail = (1.0 - confidence) / 2.0
    low, high = (float(x) for x in np.quantile(defined, [tail, 1.0 - tail]))
    left_out = n_resamples - defined.size
    note = f"bootstrap percentile interval over {n_resamples} resamples (seed {seed})" + (
        f"; {left_out} resample(s) with κ undefined left out" if left_out else ""
    )
    return Agreement(n, labels, weights, kappa, low, high, observed, base, table.tolist(), note)
