"""The http adapter: a search (and ask) service called with JSON POSTs (SPEC §4 "http").

* Body: ``search_request`` / ``ask_request`` templates. A string that is exactly ``"{k}"``
  becomes the number k; ``{query}``, ``{query_id}``, ``{k}``, ``{mode}`` inside other
  strings are substituted as text (one pass, so a query's own braces stay literal).
* Response: read by :mod:`.wire`, through the configured :class:`~.wire.ResponseMap`.
* Failures per query, by class: ``timeout`` (no full response within ``timeout_s`` for one
  attempt; not retried), ``connection`` (refused / reset / closed early), ``http_5xx`` and
  429 (``http_4xx``) — these three retried up to ``retries`` times with exponential backoff
  (``backoff_s`` doubling, capped by ``max_backoff_s``, which also caps a ``Retry-After``) —
  other ``http_4xx``, ``bad_json`` (nesting too deep to parse included), ``bad_response``,
  ``too_large`` (not retried: they would fail again).
* Bodies are streamed and decompressed here (gzip, deflate), at most ``max_response_mb`` of
  decompressed bytes each (:mod:`.http_body`); ``timeout_s`` covers headers and body.
* At most ``concurrency`` requests in flight (asyncio + httpx, one connection pool).
* Headers from environment variables (``headers_from_env``). Their values never reach
  system info, metadata, logs or error messages: any echo of them in a response is scrubbed
  (:mod:`kebab_eval_pipeline.foundation.net.secrets`).

Latency is wall time per query from the first attempt to the parsed response, retries and
backoff included; ``attempts`` records how many requests were sent.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from kebab_eval_pipeline.contract import SystemInfo
from kebab_eval_pipeline.foundation import cancellation
from kebab_eval_pipeline.foundation.errors import Interrupted
from kebab_eval_pipeline.foundation.net.retry import backoff_delay, body_tail
from kebab_eval_pipeline.foundation.net.secrets import (
    SecretMask,
    redact_url,
    resolve_headers,
    scrub_text,
)
from kebab_eval_pipeline.systems.capabilities import Capabilities
from kebab_eval_pipeline.systems.http_body import (
    ACCEPT_ENCODING,
    MIB,
    error_body,
    parse_body,
    read_body,
    read_body_sync,
)
from kebab_eval_pipeline.systems.kinds.http import HttpSystemSettings, secrets
from kebab_eval_pipeline.systems.outcome import (
    BAD_JSON,
    BAD_RESPONSE,
    CONNECTION,
    HTTP_4XX,
    HTTP_5XX,
    TIMEOUT,
    Progress,
    QueryFailure,
    QueryOutcome,
    QueryRequest,
)
from kebab_eval_pipeline.systems.per_query import exception_failure
from kebab_eval_pipeline.systems.protocol import OpaqueSystem
from kebab_eval_pipeline.systems.templates import PLACEHOLDER_RE
from kebab_eval_pipeline.systems.versions import apply_version_report
from kebab_eval_pipeline.systems.wire import parse_answer, parse_hit_block, parse_scope


def render_body(template: Any, values: dict[str, Any]) -> Any:
    """The request body: ``template`` with placeholders substituted (see the module docstring)."""
    if isinstance(template, str):
        whole = PLACEHOLDER_RE.fullmatch(template)
        if whole:
            return values[whole.group(1)]
        return PLACEHOLDER_RE.sub(lambda m: str(values[m.group(1)]), template)
    if isinstance(template, dict):
        return {key: render_body(value, values) for key, value in template.items()}
    if isinstance(template, list):
        return [render_body(item, values) for item in template]
    return template


class _Attempted(Exception):
    """A QueryFailure plus how many requests it took."""

    def __init__(self, failure: QueryFailure, attempts: int) -> None:
        super().__init__(str(failure))
        self.failure = failure
        self.attempts = attempts


class HttpSystem(OpaqueSystem):
    """Evaluates a service over HTTP (see the module docstring)."""

    def __init__(self, settings: HttpSystemSettings, env: Mapping[str, str] | None = None) -> None:
        self.settings = settings
        self._secret_headers = resolve_headers(settings.headers_from_env, env)
        # every form of the header values (and their tokens) and of the URLs' credentials
        self._secrets = SecretMask.of(secrets(settings, env))
        self.can_answer = settings.ask_url is not None
        self._cap = int(settings.max_response_mb * MIB)
        self._info: SystemInfo | None = None
        self._info_lock = threading.Lock()

    def scrub(self, text: str) -> str:
        """``text`` with URLs stripped of user info and query string (httpx names the URL in its
        messages) and every secret header value (and its tokens) and URL credential replaced by
        ``***``, in any echoed form (:class:`~kebab_eval_pipeline.foundation.net.secrets.SecretMask`)."""
        return scrub_text(text, self._secrets)

    @property
    def headers(self) -> dict[str, str]:
        return {**self.settings.headers, **self._secret_headers}

    @property
    def client_headers(self) -> httpx.Headers:
        """:attr:`headers` over our default ``Accept-Encoding`` (only codings read with a cap)."""
        headers = httpx.Headers({"Accept-Encoding": ACCEPT_ENCODING})
        headers.update(self.headers)
        return headers

    # -- info -----------------------------------------------------------------------------

    def capabilities(self) -> Capabilities:
        """What its runs can carry: the settings' declaration (``HttpSystemSettings.capabilities``)."""
        return self.settings.capabilities()

    def info(self) -> SystemInfo:
        """Kind, mode, redacted URLs and retry settings; with ``version_url``, what it reports
        (fetched once; a failure is recorded in ``details["version_error"]``, never raised)."""
        with self._info_lock:
            if self._info is None:
                s = self.settings
                details = {
                    "search_url": redact_url(s.search_url),
                    "timeout_s": f"{s.timeout_s:g}",
                    "retries": str(s.retries),
                    "concurrency": str(s.concurrency),
                }
                if s.ask_url:
                    details["ask_url"] = redact_url(s.ask_url)
                info = SystemInfo(kind="http", mode=s.mode, details=details)
                if s.version_url:
                    try:
                        with (
                            httpx.Client(timeout=s.timeout_s, headers=self.client_headers) as client,
                            client.stream("GET", s.version_url) as response,
                        ):
                            response.raise_for_status()
                            data = read_body_sync(response, self._cap)
                        info = self._scrub_info(apply_version_report(info, parse_body(data)))
                    except QueryFailure as failure:
                        info.details["version_error"] = self.scrub(str(failure))[:300]
                    except (httpx.HTTPError, ValueError) as exc:
                        info.details["version_error"] = self.scrub(f"{type(exc).__name__}: {exc}")[:300]
                self._info = info
            return self._info.model_copy(deep=True)

    def _scrub_info(self, info: SystemInfo) -> SystemInfo:
        # A version report is a response too: an echoed credential must not reach metadata.
        versions = {k: self.scrub(v) for k, v in info.versions().items() if v is not None}
        details = {k: self.scrub(v) for k, v in info.details.items()}
        return info.model_copy(update={**versions, "details": details})

    # -- running --------------------------------------------------------------------------

    def run_queries(
        self,
        requests: Sequence[QueryRequest],
        k: int,
        answers: bool,
        progress: Progress | None = None,
    ) -> list[QueryOutcome]:
        """One outcome per request, in request order; at most ``concurrency`` in flight."""
        coro = self._run_all(list(requests), k, answers, progress)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(coro)
        # Called from inside an event loop (a notebook, an async host): run in our own thread.
        with ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(asyncio.run, coro).result()

    async def _run_all(
        self, requests: list[QueryRequest], k: int, answers: bool, progress: Progress | None
    ) -> list[QueryOutcome]:
        s = self.settings
        results: list[QueryOutcome | None] = [None] * len(requests)
        pending = iter(range(len(requests)))
        done = 0
        # One client (one kept-alive connection) per worker rather than one shared pool: httpcore
        # re-checks every pooled connection whenever a request enters or leaves the pool, which
        # made a shared pool of 16 cost 2.5× the CPU per request (benchmarks/bench_adapters.py).
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
        timeout = httpx.Timeout(s.timeout_s)
        ssl_context = httpx.create_ssl_context()  # built once: ~40 ms each otherwise

        async def worker() -> None:
            nonlocal done
            async with httpx.AsyncClient(
                timeout=timeout, limits=limits, headers=self.client_headers, verify=ssl_context
            ) as client:
                for i in pending:  # shared iterator: each index is taken by exactly one worker
                    try:
                        results[i] = await self._one(client, requests[i], k, answers)
                    except Exception as exc:  # a bug must still leave a row
                        results[i] = QueryOutcome(query_id=requests[i].query_id).fail(exception_failure(exc))
                    done += 1
                    if progress:
                        progress(done, len(requests))

        loop = asyncio.get_running_loop()
        tasks = [asyncio.ensure_future(worker()) for _ in range(min(s.concurrency, len(requests)))]

        def cancel() -> None:  # Ctrl-C (cancellation.py), from the main thread: abort the requests
            loop.call_soon_threadsafe(lambda: [t.cancel() for t in tasks])

        with cancellation.on_cancel(cancel):
            try:
                await asyncio.gather(*tasks)
            except asyncio.CancelledError:
                if cancellation.requested():
                    raise Interrupted("the run was interrupted") from None
                raise
        return [r for r in results if r is not None]

    def _values(self, request: QueryRequest, k: int) -> dict[str, Any]:
        return {
            "query": request.query,
            "query_id": request.query_id,
            "k": k,
            "mode": self.settings.mode or "",
        }

    async def _one(
        self, client: httpx.AsyncClient, request: QueryRequest, k: int, answers: bool
    ) -> QueryOutcome:
        s = self.settings
        outcome = QueryOutcome(query_id=request.query_id)
        values = self._values(request, k)

        def read_hits(payload: Any) -> None:
            outcome.hits, outcome.warnings = parse_hit_block(payload, k, s.response)
            outcome.scope = parse_scope(payload, s.response)

        def read_answer(payload: Any) -> None:
            outcome.answer = parse_answer(payload, s.response)

        outcome.retrieval_ms = await self._call(
            client, outcome, s.search_url, render_body(s.search_request, values), read_hits
        )
        if answers and s.ask_url and outcome.error_class is None:
            outcome.answer_ms = await self._call(
                client, outcome, s.ask_url, render_body(s.ask_request, values), read_answer
            )
        if outcome.error:
            outcome.error = self.scrub(outcome.error)
        return outcome

    async def _call(
        self, client: httpx.AsyncClient, outcome: QueryOutcome, url: str, body: Any, read: Any
    ) -> float:
        """POST, hand the JSON to ``read``, record attempts / failure on ``outcome``; returns ms."""
        started = time.perf_counter()
        try:
            payload, attempts = await self._post(client, url, body)
            outcome.attempts += attempts
            read(payload)
        except _Attempted as exc:  # the request failed: say which one (search or ask, which host)
            outcome.attempts += exc.attempts
            failure = exc.failure
            where = f"POST {redact_url(url)}"
            outcome.fail(QueryFailure(failure.error_class, f"{where}: {failure.message}", failure.timed_out))
        except QueryFailure as failure:  # the reply's content (read): the request itself worked
            outcome.fail(failure)
        return (time.perf_counter() - started) * 1000.0

    def _delay(self, attempt: int, response: httpx.Response | None) -> float:
        return backoff_delay(attempt, self.settings.backoff_s, self.settings.max_backoff_s, response)

    async def _post(self, client: httpx.AsyncClient, url: str, body: Any) -> tuple[Any, int]:
        """POST ``body`` with bounded retries; returns (parsed JSON, attempts) or raises _Attempted."""
        s = self.settings
        attempt = 0
        while True:
            attempt += 1
            response = None
            retry: QueryFailure | None = None
            try:
                async with asyncio.timeout(s.timeout_s):  # the whole attempt: headers and body
                    async with client.stream("POST", url, json=body) as response:
                        status = response.status_code
                        if 200 <= status < 300:
                            data = await read_body(response, self._cap)
                        elif status >= 400:  # only its start is quoted in the message
                            data = await error_body(response)
                        else:
                            data = b""
            except (TimeoutError, httpx.TimeoutException):
                raise _Attempted(
                    QueryFailure(TIMEOUT, f"no response within {s.timeout_s:g} s", timed_out=True), attempt
                ) from None
            except QueryFailure as failure:  # too large, undecodable
                raise _Attempted(failure, attempt) from None
            except httpx.TransportError as exc:  # refused, reset, closed before a response
                response = None
                retry = QueryFailure(
                    CONNECTION, f"{type(exc).__name__}: {str(exc)[:200] or 'connection failed'}"
                )
            except Exception as exc:
                raise _Attempted(exception_failure(exc), attempt) from None
            if response is not None:
                status = response.status_code
                if status == 429 or status >= 500:
                    cls = HTTP_4XX if status == 429 else HTTP_5XX
                    retry = QueryFailure(cls, f"HTTP {status}: {body_tail(response, data)}")
                elif status >= 400:
                    raise _Attempted(
                        QueryFailure(HTTP_4XX, f"HTTP {status}: {body_tail(response, data)}"), attempt
                    )
                elif status >= 300:
                    where = response.headers.get("location", "?")
                    raise _Attempted(
                        QueryFailure(BAD_RESPONSE, f"HTTP {status} redirect to {where}"), attempt
                    )
                else:
                    try:
                        return parse_body(data), attempt
                    except QueryFailure as failure:
                        message = f"{failure.message}: {body_tail(response, data, 120)!r}"
                        raise _Attempted(QueryFailure(BAD_JSON, message), attempt) from None
            assert retry is not None
            if attempt > s.retries:
                if s.retries:
                    retry = QueryFailure(retry.error_class, f"{retry.message} (after {attempt} attempts)")
                raise _Attempted(retry, attempt)
            await asyncio.sleep(self._delay(attempt, response))
