"""One golden query's request and outcome, and the error classes adapters report (SPEC §4).

Every adapter turns a batch of :class:`QueryRequest` into exactly one
:class:`QueryOutcome` per request. A failure is an outcome with ``error_class``
and ``error`` set — never an exception out of the adapter, never a missing row.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from kebab_eval_pipeline.contract import Answer
from kebab_eval_pipeline.foundation.limits import MIB
from kebab_eval_pipeline.systems.hits import HitBlock

#: Error classes, so a run's failures can be counted by cause (``error_class`` column).
TIMEOUT: Final = "timeout"  # no complete response within timeout_s (timed_out is True)
HTTP_5XX: Final = "http_5xx"  # server error (after the bounded retries)
HTTP_4XX: Final = "http_4xx"  # the request was refused (429 after the bounded retries, too)
CONNECTION: Final = "connection"  # refused, reset or closed before a response (after retries)
BAD_JSON: Final = "bad_json"  # the output is not JSON (or nested too deeply to read)
TOO_LARGE: Final = "too_large"  # the response passed system.max_response_mb (decompressed size counted)
BAD_RESPONSE: Final = "bad_response"  # JSON, but not hits / an answer (names the field)
EXIT_CODE: Final = "exit_code"  # the command exited non-zero (message has the stderr tail)
SYSTEM_ERROR: Final = "system_error"  # the system replied that this query failed (command jsonl "error")
MISSING_IN_TRACE: Final = "missing_in_trace"  # replay: the trace has no record of this query
RECORDED_ERROR: Final = "recorded_error"  # replay: the trace records that this query failed
MISSING_OUTCOME: Final = "missing_outcome"  # the adapter returned no outcome (a bug; still a row)
EXCEPTION: Final = "exception"  # an in-process system raised
PROCESS_ENDED: Final = "process_ended"  # a python system's worker process ended (exit, signal, OOM)

ERROR_CLASSES: Final = (
    TIMEOUT,
    HTTP_5XX,
    HTTP_4XX,
    CONNECTION,
    BAD_JSON,
    TOO_LARGE,
    BAD_RESPONSE,
    EXIT_CODE,
    SYSTEM_ERROR,
    MISSING_IN_TRACE,
    RECORDED_ERROR,
    MISSING_OUTCOME,
    EXCEPTION,
    PROCESS_ENDED,
)
#: Classes that fail ``system_health`` whatever the error rate: the system itself is gone, so the
#: rows after it (and the run's other results) are not what the system would have given.
FATAL_CLASSES: Final = (PROCESS_ENDED,)

#: ``progress(done, total)``, called as queries complete (from any worker thread).
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class QueryRequest:
    """One golden query to send: its id (for placeholders and traces) and text."""

    query_id: str
    query: str


class QueryFailure(Exception):
    """Raised inside an adapter to fail one query with a known error class.

    ``message`` must not contain secrets: adapters build it from status codes,
    parser errors and output tails, and scrub configured secret values.
    """

    def __init__(self, error_class: str, message: str, timed_out: bool = False) -> None:
        super().__init__(f"{error_class}: {message}")
        self.error_class = error_class
        self.message = message
        self.timed_out = timed_out


def too_large(cap: int, what: str) -> QueryFailure:
    """The ``too_large`` failure: ``what`` passed ``cap`` bytes."""
    return QueryFailure(TOO_LARGE, f"{what} passed the {cap / MIB:g} MiB cap (system.max_response_mb)")


@dataclass
class QueryOutcome:
    """What the system did with one query.

    ``hits`` is a :class:`~.hits.HitBlock` (the hits as columns; it reads as a list of
    :class:`~kebab_eval_pipeline.contract.Hit`). ``retrieval_ms`` / ``answer_ms`` are None
    when not measured (e.g. a replayed trace without latencies). ``attempts`` counts requests
    sent (retries included; 0 when nothing was sent). ``answer`` is None when no answer was
    requested or the query failed first.
    """

    query_id: str
    hits: HitBlock = field(default_factory=HitBlock)  # columns; reads as a list of Hit (hits.py)
    answer: Answer | None = None
    retrieval_ms: float | None = None
    answer_ms: float | None = None
    error_class: str | None = None
    error: str | None = None  # human-readable message, without the class
    timed_out: bool = False
    attempts: int = 0
    warnings: list[str] = field(default_factory=list)  # e.g. ranks renumbered, hits beyond k dropped
    scope: list[str] | None = None  # folders searched, when the system scopes its search (scope_miss_rate)

    def fail(self, failure: QueryFailure) -> QueryOutcome:
        """Record ``failure`` on this outcome (hits found before an ask failure are kept)."""
        self.error_class = failure.error_class
        self.error = failure.message
        self.timed_out = self.timed_out or failure.timed_out
        return self
