"""Adjusted p-values for a family of tests: Holm (family-wise error) and Benjamini–Hochberg (false
discovery rate).

A comparison runs one paired test per metric and per breakdown slice; at α = 0.05, thirty tests of
two identical systems flag something about four times in five. Adjusting each p-value for the family
it belongs to keeps the chance of any false alarm (Holm) or the expected share of false alarms among
the flagged (BH) at α, whatever the tests' dependence (Holm) or under positive dependence (BH, which
holds for metrics computed from the same rankings).

Both are step-wise over the sorted p-values, written as NumPy cumulative max/min, so a family of
any size costs one sort. NaN p-values (metrics with no test) stay NaN and are not counted in the
family size.
"""

from __future__ import annotations

import numpy as np

__all__ = ["ADJUSTMENTS", "adjust", "bh", "holm"]

#: Names accepted by :func:`adjust` (and the ``compare.adjust`` setting).
ADJUSTMENTS = ("holm", "bh", "none")


def holm(p_values) -> np.ndarray:
    """Holm's step-down adjusted p-values, in the input's order.

    Input: p-values (array-like, NaN = no test). Output: float array of the same shape; for the
    ``m`` non-NaN p-values sorted ascending, ``p̃(i) = max_{j ≤ i} min(1, (m − j + 1)·p(j))``.
    Rejecting where ``p̃ < α`` controls the family-wise error rate at α. Empty or all-NaN input
    returns the input (as float)."""
    return _step_wise(p_values, lambda p, m: np.maximum.accumulate((m - np.arange(m)) * p))


def bh(p_values) -> np.ndarray:
    """Benjamini–Hochberg step-up adjusted p-values (q-values), in the input's order.

    Input: p-values (array-like, NaN = no test). Output: float array of the same shape; for the
    ``m`` non-NaN p-values sorted ascending, ``p̃(i) = min_{j ≥ i} min(1, m/j · p(j))``. Rejecting
    where ``p̃ < α`` controls the false discovery rate at α (independent or positively dependent
    tests). Empty or all-NaN input returns the input (as float)."""
    return _step_wise(p_values, lambda p, m: np.minimum.accumulate((p * m / np.arange(1, m + 1))[::-1])[::-1])


def adjust(p_values, method: str) -> np.ndarray:
    """:func:`holm`, :func:`bh` or ``none`` (the p-values unchanged, as float) by name."""
    if method == "holm":
        return holm(p_values)
    if method == "bh":
        return bh(p_values)
    if method == "none":
        return _valid(p_values)[0].copy()
    raise ValueError(f"unknown p-value adjustment {method!r}; expected one of {ADJUSTMENTS}")


def _step_wise(p_values, adjust_sorted) -> np.ndarray:
    """Apply ``adjust_sorted(p ascending, m)`` to the non-NaN p-values, cap at 1, restore the order."""
    p, ok = _valid(p_values)
    out = np.full(p.shape, np.nan)
    values = p[ok]
    if values.size == 0:
        return out
    order = np.argsort(values, kind="stable")
    result = np.empty(values.size)
    result[order] = np.minimum(1.0, adjust_sorted(values[order], values.size))
    out[ok] = result
    return out


def _valid(p_values) -> tuple[np.ndarray, np.ndarray]:
    p = np.asarray(p_values, dtype=np.float64)
    if p.ndim != 1:
        raise ValueError(f"p-values must be 1-D, got shape {p.shape}")
    ok = ~np.isnan(p)
    if ((p[ok] < 0.0) | (p[ok] > 1.0)).any():
        raise ValueError("p-values must lie in [0, 1] (or be NaN for 'no test')")
    return p, ok
