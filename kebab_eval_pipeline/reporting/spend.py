"""One line on what a run spent: the system under test's answers and the LLM judge, side by side.

Read from the run's metrics (``system_cost_usd``, ``system_prompt_tokens``, … and ``judge_cost_usd``,
``judge_prompt_tokens``, …); None when neither reported anything. A cost that is unknown (tokens
without a price) is said to be unknown, never shown as $0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

#: (label, metric prefix, what the denominator counts)
_SPENDERS = (("system under test", "system", "answers"), ("judge", "judge", "judgements"))


def usd(value: float | None) -> str:
    """``$0.001234``: six decimals below a dollar (a query's answer can cost a few millionths), two
    above; ``unknown`` for None/NaN."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "unknown"
    return f"${value:,.2f}" if value >= 1 else f"${value:.6f}"


def _count(value: float | None) -> str:
    return "?" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{int(value):,}"


def spend_parts(metrics: Mapping[str, object], denominators: Mapping[str, int]) -> list[str]:
    """``["system under test $0.001234 (1,200 prompt + 300 completion tokens, 70 answers)", "judge …"]``
    for each spender whose tokens or cost the run recorded (an empty list when none did)."""
    parts = []
    for label, prefix, unit in _SPENDERS:
        cost = metrics.get(f"{prefix}_cost_usd")
        prompt = metrics.get(f"{prefix}_prompt_tokens")
        completion = metrics.get(f"{prefix}_completion_tokens")
        if cost is None and prompt is None and completion is None:
            continue
        n = max(denominators.get(f"{prefix}_prompt_tokens", 0), denominators.get(f"{prefix}_cost_usd", 0))
        tokens = (
            f"{_count(prompt)} prompt + {_count(completion)} completion tokens, "
            if prompt is not None or completion is not None
            else ""
        )
        why = "" if cost is not None else "; no price for some model (see system_costs / judge.prices)"
        parts.append(f"{label} {usd(cost)} ({tokens}{n:,} {unit}{why})")
    return parts


def spend_line(metrics: Mapping[str, object], denominators: Mapping[str, int]) -> str | None:
    """``spend: system under test $… (…) · judge $… (…)``, or None when nothing was recorded."""
    parts = spend_parts(metrics, denominators)
    return "spend: " + " · ".join(parts) if parts else None
