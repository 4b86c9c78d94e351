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
  decompressed bytes each; ``timeout_s`` covers headers and body (:func:`read_body`).
* At most ``concurrency`` requests in flight (asyncio + httpx, one connection pool).
* Headers from environment variables (``headers_from_env``). Their values never reach
  system info, metadata, logs or error messages: any echo of them in a response is scrubbed.

Latency is wall time per query from the first attempt to the parsed response, retries and
backoff included; ``attempts`` records how many requests were sent.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import random
import re
import threading
import time
import zlib
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from kebab_eval_pipeline.contract import SystemInfo
from kebab_eval_pipeline.errors import InputError, Offender
from kebab_eval_pipeline.http_checks import header_value_problem
from kebab_eval_pipeline.settings import PLACEHOLDER_RE, HttpSystemSettings
from kebab_eval_pipeline.systems.base import OpaqueSystem
from kebab_eval_pipeline.systems.outcome import (
    BAD_JSON,
    BAD_RESPONSE,
    CONNECTION,
    HTTP_4XX,
    HTTP_5XX,
    TIMEOUT,
    TOO_LARGE,
    Progress,
    QueryFailure,
    QueryOutcome,
    QueryRequest,
)
from kebab_eval_pipeline.systems.per_query import exception_failure
from kebab_eval_pipeline.systems.versions import apply_version_report
from kebab_eval_pipeline.systems.wire import parse_answer, parse_hits, parse_scope

BODY_TAIL_CHARS = 300
ERROR_BODY_BYTES = 1 << 16  # of an error response's body, read for its message
MIB = 1 << 20
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")
REDACTED = "***"
_AUTH_SCHEMES = frozenset({"bearer", "basic", "digest", "token", "apikey", "api-key", "negotiate"})
_URL_IN_TEXT = re.compile(r"https?://[^\s'\"<>]+")


def resolve_headers(refs: Mapping[str, str], env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Header values from environment variables: ``{"Authorization": "API_KEY"}`` or
    ``{"Authorization": "Bearer ${API_KEY}"}``.

    Raises ValueError naming the header and the variable (never a value) when one is unset
    or empty, and InputError (field ``system.headers_from_env.<header>``) when a value holds
    CR/LF, NUL, another control character or non-ASCII text.
    """
    env = os.environ if env is None else env
    headers, missing = {}, []
    for header, ref in refs.items():
        names = _env_names(ref)
        absent = [n for n in names if not env.get(n)]
        if absent:
            missing += [f"{header} needs ${n}" for n in absent]
            continue
        headers[header] = (
            _ENV_REF.sub(lambda m: env[m.group(1) or m.group(2)], ref) if "$" in ref else env[ref]
        )
    if missing:
        raise ValueError("environment variable(s) not set: " + "; ".join(missing))
    # A CR/LF in a variable would inject a header (or fail every query as `connection`): refused
    # before the first query, naming the header and the variable, never the value.
    bad = [
        Offender(
            "<environment>",
            f"{problem} (from {', '.join('$' + n for n in _env_names(refs[name]))})",
            field=f"system.headers_from_env.{name}",
        )
        for name, value in headers.items()
        if (problem := header_value_problem(value)) is not None
    ]
    if bad:
        raise InputError("a header value from the environment cannot be sent", bad)
    return headers


def _env_names(ref: str) -> list[str]:
    """The variables a ``headers_from_env`` entry reads: ``"API_KEY"`` or ``"Bearer ${API_KEY}"``."""
    return [a or b for a, b in _ENV_REF.findall(ref)] if "$" in ref else [ref]


def redact_url(url: str) -> str:
    """``url`` without user info and query string (either may carry a credential)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


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


def scrub_text(text: str, secrets: Sequence[str]) -> str:
    """``text`` with URLs stripped of user info and query string (httpx names the URL in its
    messages) and every one of ``secrets`` (longest first) replaced by ``***``."""
    text = _URL_IN_TEXT.sub(lambda m: redact_url(m.group(0)), text)
    for secret in secrets:
        text = text.replace(secret, REDACTED)
    return text


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
        self._secrets = sorted(
            {v for v in self._secret_headers.values() if v} | self._secret_parts(), key=len, reverse=True
        )
        self.can_answer = settings.ask_url is not None
        self._cap = int(settings.max_response_mb * MIB)
        self._info: SystemInfo | None = None
        self._info_lock = threading.Lock()

    def _secret_parts(self) -> set[str]:
        # "Bearer abc…": the token alone may be echoed back too (but not the scheme word, which
        # would mangle every message that mentions it).
        parts = set()
        for value in self._secret_headers.values():
            parts |= {p for p in value.split() if len(p) >= 6 and p.lower() not in _AUTH_SCHEMES}
        return parts

    def scrub(self, text: str) -> str:
        """``text`` with URLs stripped of user info and query string (httpx names the URL in its
        messages) and every secret header value (and its tokens) replaced by ``***``."""
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

        await asyncio.gather(*(worker() for _ in range(min(s.concurrency, len(requests)))))
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
            outcome.hits, outcome.warnings = parse_hits(payload, k, s.response)
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
                            data = await _error_body(response)
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
                    retry = QueryFailure(cls, f"HTTP {status}: {_body_tail(response, data)}")
                elif status >= 400:
                    raise _Attempted(
                        QueryFailure(HTTP_4XX, f"HTTP {status}: {_body_tail(response, data)}"), attempt
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
                        message = f"{failure.message}: {_body_tail(response, data, 120)!r}"
                        raise _Attempted(QueryFailure(BAD_JSON, message), attempt) from None
            assert retry is not None
            if attempt > s.retries:
                if s.retries:
                    retry = QueryFailure(retry.error_class, f"{retry.message} (after {attempt} attempts)")
                raise _Attempted(retry, attempt)
            await asyncio.sleep(self._delay(attempt, response))


def _body_tail(response: httpx.Response, data: bytes, limit: int = BODY_TAIL_CHARS) -> str:
    try:
        text = data.decode(response.encoding or "utf-8", "replace")
    except LookupError:  # an unknown charset
        text = data.decode("utf-8", "replace")
    flat = " ".join(text.split())
    return (flat[:limit] + "…") if len(flat) > limit else (flat or "<empty body>")


def parse_body(data: bytes) -> Any:
    """JSON from a response body (UTF-8/16/32 detected); QueryFailure(``bad_json``) when it is not
    JSON or is nested too deeply for Python's parser (e.g. ``[[[[…`` 100,000 deep)."""
    try:
        return json.loads(data)
    except RecursionError:
        raise QueryFailure(BAD_JSON, "JSON nested too deeply to read") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, an integer past the digit limit
        raise QueryFailure(BAD_JSON, str(exc)[:120]) from None


# -- bodies, read with a cap -----------------------------------------------------------------------
# httpx would decompress a whole network chunk at once (a 64 KiB chunk of a gzip bomb is 64 MiB),
# so bodies are read raw and decompressed here, in pieces of at most _PIECE bytes.

_PIECE = 1 << 16
#: What we ask for; a server that answers in another encoding fails the query (bad_response).
ACCEPT_ENCODING = "gzip, deflate"


class _Inflate:
    """One zlib stream (``gzip``: multi-member; ``deflate``: zlib-wrapped, or raw as some servers
    send it) decompressed in bounded pieces."""

    def __init__(self, encoding: str) -> None:
        self.encoding = encoding
        self.wbits = 16 + zlib.MAX_WBITS if encoding in ("gzip", "x-gzip") else zlib.MAX_WBITS
        self.d = zlib.decompressobj(self.wbits)
        self.started = False

    def feed(self, data: bytes) -> Iterator[bytes]:
        while data:
            try:
                out = self.d.decompress(data, _PIECE)
            except zlib.error as exc:
                if self.encoding == "deflate" and not self.started and self.wbits > 0:
                    self.wbits, self.d = -zlib.MAX_WBITS, zlib.decompressobj(-zlib.MAX_WBITS)
                    continue
                raise QueryFailure(BAD_RESPONSE, f"content-encoding {self.encoding}: {exc}") from None
            self.started = True
            if out:
                yield out
            if self.d.eof:
                data = self.d.unused_data
                if data and self.wbits > 16:  # another gzip member follows
                    self.d = zlib.decompressobj(self.wbits)
                else:
                    return  # trailing bytes after a deflate stream are ignored, as httpx does
            else:
                data = self.d.unconsumed_tail

    def flush(self) -> Iterator[bytes]:
        if tail := self.d.flush():  # at most one match's worth once the input is consumed
            yield tail


def _decoders(header: str) -> list[_Inflate]:
    """Decoders for a Content-Encoding header, in the order to apply them (last coding first)."""
    codings = [c.strip().lower() for c in header.split(",") if c.strip()]
    decoders = []
    for coding in reversed(codings):
        if coding == "identity":
            continue
        if coding not in ("gzip", "x-gzip", "deflate"):
            raise QueryFailure(
                BAD_RESPONSE, f"content-encoding {coding!r} is not supported (asked for {ACCEPT_ENCODING})"
            )
        decoders.append(_Inflate(coding))
    return decoders


def _decode(decoders: list[_Inflate], data: bytes, final: bool = False) -> Iterator[bytes]:
    """``data`` through every decoder, lazily: a consumer that stops stops the decompression."""
    if not decoders:
        if data:
            yield data
        return
    first, rest = decoders[0], decoders[1:]
    pieces: Iterator[bytes] = first.feed(data)
    if final:
        pieces = itertools.chain(pieces, first.flush())
    for piece in pieces:
        yield from _decode(rest, piece)
    if final and rest:
        yield from _decode(rest, b"", final=True)


async def read_body(response: httpx.Response, cap: int, truncate: bool = False) -> bytes:
    """The body of a streamed ``response``, decompressed, at most ``cap`` bytes.

    Past ``cap`` — a declared Content-Length, the bytes received, or the decompressed size —
    raises QueryFailure(``too_large``), or with ``truncate`` returns the first ``cap`` bytes.
    The event loop gets control between pieces, so a timeout around this holds.
    """
    if not truncate:
        declared = response.headers.get("content-length", "")
        encoded = response.headers.get("content-encoding", "identity").strip().lower() != "identity"
        if declared.isdigit() and int(declared) > cap and not encoded:
            raise _too_large(cap, f"the body ({int(declared) / MIB:.1f} MiB declared)")
    decoders = _decoders(response.headers.get("content-encoding", ""))
    body = bytearray()
    chunks = response.aiter_raw()
    final = False
    while not final:
        try:
            chunk = await anext(chunks)
        except StopAsyncIteration:
            chunk, final = b"", True
        for n, piece in enumerate(_decode(decoders, chunk, final), start=1):
            body += piece
            if len(body) > cap:
                if truncate:
                    return bytes(body[:cap])
                raise _too_large(cap, "the body")
            if n % 16 == 0:  # a bomb's chunk is many pieces: let timers and other queries run
                await asyncio.sleep(0)
    return bytes(body)


async def _error_body(response: httpx.Response) -> bytes:
    try:
        return await read_body(response, ERROR_BODY_BYTES, truncate=True)
    except QueryFailure as failure:  # an unreadable error body must not hide the status
        return f"<unreadable body: {failure.message}>".encode()


def read_body_sync(response: httpx.Response, cap: int) -> bytes:
    """:func:`read_body` for a streamed response of a synchronous client."""
    decoders = _decoders(response.headers.get("content-encoding", ""))
    body = bytearray()
    for chunk, final in itertools.chain(((c, False) for c in response.iter_raw()), [(b"", True)]):
        for piece in _decode(decoders, chunk, final):
            body += piece
            if len(body) > cap:
                raise _too_large(cap, "the body")
    return bytes(body)


def _too_large(cap: int, what: str) -> QueryFailure:
    return QueryFailure(TOO_LARGE, f"{what} passed the {cap / MIB:g} MiB cap (system.max_response_mb)")
