"""Run a batch of queries through per-query ``search`` / ``ask`` calls, with bounded parallelism.

The shared driver of the in-process reference system and the command adapter: each
query is searched (and, when answers are on and the search succeeded, asked) in one
worker; failures become that query's outcome, latencies are measured the same way for
every adapter, and the result holds exactly one outcome per request, in request order.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

from kebab_eval_pipeline.contract import Answer, Hit
from kebab_eval_pipeline.foundation import cancellation
from kebab_eval_pipeline.foundation.errors import Interrupted
from kebab_eval_pipeline.systems.hits import HitBlock, as_block
from kebab_eval_pipeline.systems.outcome import EXCEPTION, Progress, QueryFailure, QueryOutcome, QueryRequest


def exception_failure(exc: BaseException) -> QueryFailure:
    """An unexpected exception as a failure of class ``exception`` ("Type: first line")."""
    text = str(exc).strip()
    first = text.splitlines()[0][:500] if text else ""
    return QueryFailure(EXCEPTION, f"{type(exc).__name__}: {first}" if first else type(exc).__name__)


class SearchReply(NamedTuple):
    """What one search call produced (see :class:`~.outcome.QueryOutcome` for the fields)."""

    hits: HitBlock | list[Hit]  # a block from parsed responses; Hit models from in-process systems
    warnings: list[str]
    attempts: int
    scope: list[str] | None = None


class PerQueryAdapter:
    """Base for adapters that answer one query per call.

    Subclasses implement :meth:`search_one` (and :meth:`ask_one` when they can answer)
    and raise :class:`QueryFailure` for classified errors; any other exception becomes
    class ``exception``. ``concurrency`` bounds how many queries run at once.
    """

    concurrency: int = 1
    can_answer: bool = True

    def search_one(self, request: QueryRequest, k: int) -> SearchReply:
        """Hits for one query, warnings, the number of attempts made and the scope searched."""
        raise NotImplementedError

    def ask_one(self, request: QueryRequest, k: int, hits: Sequence[Hit]) -> tuple[Answer, int]:
        """The answer for one query (given its hits), and the number of attempts made."""
        raise NotImplementedError

    def run_one(self, request: QueryRequest, k: int, answers: bool) -> QueryOutcome:
        """Search (and ask) one query; raises only Interrupted (Ctrl-C: the run is over)."""
        outcome = QueryOutcome(query_id=request.query_id)

        def search() -> int:
            reply = self.search_one(request, k)
            outcome.hits, outcome.warnings, outcome.scope = as_block(reply.hits), reply.warnings, reply.scope
            return reply.attempts

        def ask() -> int:
            outcome.answer, attempts = self.ask_one(request, k, outcome.hits)
            return attempts

        outcome.retrieval_ms = timed_call(outcome, search)
        if answers and self.can_answer and outcome.error_class is None:
            outcome.answer_ms = timed_call(outcome, ask)
        return outcome

    def run_queries(
        self,
        requests: Sequence[QueryRequest],
        k: int,
        answers: bool,
        progress: Progress | None = None,
    ) -> list[QueryOutcome]:
        """One outcome per request, in request order; at most ``concurrency`` at a time.
        Interrupted (Ctrl-C, :mod:`kebab_eval_pipeline.foundation.cancellation`): no further query is started
        and the queries not started are dropped; the calls in flight are the adapter's to end."""
        total = len(requests)
        if self.concurrency <= 1 or total <= 1:
            outcomes = []
            for n, request in enumerate(requests, start=1):
                cancellation.check()
                outcomes.append(self.run_one(request, k, answers))
                if progress:
                    progress(n, total)
            return outcomes
        done = 0
        lock = threading.Lock()

        def work(request: QueryRequest) -> QueryOutcome:
            nonlocal done
            cancellation.check()
            outcome = self.run_one(request, k, answers)
            if progress:
                with lock:
                    done += 1
                    progress(done, total)
            return outcome

        pool = ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="kebab-eval-query")
        try:
            return list(pool.map(work, requests))
        finally:  # interrupted: the queries not started are dropped, not started one by one
            stop = cancellation.requested()
            pool.shutdown(wait=not stop, cancel_futures=stop)


def timed_call(outcome: QueryOutcome, call: Callable[[], int]) -> float:
    """Run ``call`` (which returns its attempts), recording attempts and any failure on
    ``outcome``; returns the elapsed milliseconds."""
    started = time.perf_counter()
    try:
        outcome.attempts += call()
    except QueryFailure as failure:
        outcome.attempts += 1
        outcome.fail(failure)
    except Interrupted:  # Ctrl-C: not this query's failure; the run is over
        raise
    except Exception as exc:  # the system under test may fail in any way: record, don't crash
        outcome.attempts += 1
        outcome.fail(exception_failure(exc))
    return (time.perf_counter() - started) * 1000.0
