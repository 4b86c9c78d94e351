"""Numbers as the reports print them (Markdown, HTML, JUnit, the CLI), one definition for all:
a null — None, NaN (Python's or numpy's) or pandas' NA — prints as ``null`` (``–`` for a
p-value), a metric with 4 decimals, a delta and a confidence interval signed."""

from __future__ import annotations

import numbers
from typing import Any


def is_null(x: Any) -> bool:
    """None, NaN (a float or a numpy float) or pandas' NA, this known by its type's name (no pandas
    import here: the JUnit and summary writers run without it). Anything else is not: a string, an
    int, an array."""
    if x is None or type(x).__name__ == "NAType":
        return True
    return isinstance(x, numbers.Real) and bool(x != x)


def value_text(x: Any) -> str:
    """A value of a table as printed: ``null`` for a null, 4 decimals for a float, anything else
    (a count, a text) as it is."""
    return "null" if is_null(x) else f"{x:.4f}" if isinstance(x, float) else str(x)


def shown(x: Any) -> str:
    """4 decimals, as the reports print a metric; ``null`` for a null."""
    return "null" if is_null(x) else f"{float(x):.4f}"


def signed(x: Any) -> str:
    """Signed 4 decimals, as the reports print a delta; ``null`` for a null."""
    return "null" if is_null(x) else f"{float(x):+.4f}"


def p_text(x: Any) -> str:
    """4 significant digits, as the reports print a p-value; ``–`` for a null."""
    return "–" if is_null(x) else f"{float(x):.4g}"


def ci_text(low: Any, high: Any) -> str:
    """A confidence interval as the reports print it, ``[-0.0123, +0.0456]``; ``–`` when either
    bound is null."""
    return "–" if is_null(low) or is_null(high) else f"[{float(low):+.4f}, {float(high):+.4f}]"
