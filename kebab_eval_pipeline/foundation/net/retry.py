"""A failed HTTP request: how long to wait before the next attempt, and what of the reply to quote.

Shared by the http adapter and the judge's OpenAI-compatible client, which retry the same
failures (connection errors, timeouts, 429, 5xx) with the same backoff.
"""

from __future__ import annotations

import random

import httpx

BODY_TAIL_CHARS = 300


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after", "").strip()
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:  # an HTTP date: fall back to our own backoff
        return None


def backoff_delay(
    attempt: int, backoff_s: float, max_backoff_s: float, response: httpx.Response | None
) -> float:
    """Seconds to wait after failed ``attempt`` (1-based): ``backoff_s`` doubling per attempt, capped
    by ``max_backoff_s``, with equal jitter; a ``Retry-After`` of ``response`` (capped too) can
    lengthen it."""
    base = min(max_backoff_s, backoff_s * 2 ** (attempt - 1))
    delay = base / 2 + random.uniform(0, base / 2)  # "equal jitter": spread, never shorter than half
    after = _retry_after(response) if response is not None else None
    if after is not None:
        delay = max(delay, min(after, max_backoff_s))
    return delay


def body_tail(response: httpx.Response, data: bytes, limit: int = BODY_TAIL_CHARS) -> str:
    """The start of a reply's body ``data``, for an error message: decoded with ``response``'s
    charset (UTF-8 when absent or unknown, undecodable bytes replaced), whitespace collapsed, cut
    at ``limit`` characters with ``…``; ``<empty body>`` when nothing is left."""
    try:
        text = data.decode(response.encoding or "utf-8", "replace")
    except LookupError:  # an unknown charset
        text = data.decode("utf-8", "replace")
    flat = " ".join(text.split())
    return (flat[:limit] + "…") if len(flat) > limit else (flat or "<empty body>")
