"""The reference system as an HTTP service (``kebab-eval ref serve``), for the http adapter.

Endpoints (JSON in, JSON out):

* ``POST /search`` ``{"query": str, "k"?: int, "mode"?: str}`` →
  ``{"schema": "search_hit.v1", "query", "mode", "hits": [Hit...]}``
* ``POST /ask`` ``{"query": str, "k"?: int, "mode"?: str}`` →
  ``{"query", "mode", "answer": Answer, "hits": [Hit...]}``
* ``GET /version`` → the versions that make runs comparable (index, chunker,
  parser, embedding, prompt template) and the served mode.
* ``GET /health`` → ``{"status": "ok"}``.

Bad requests get 400 (422 for a body of the wrong shape) with ``{"error": ...}``;
never a stack trace. Built on Starlette and served by Uvicorn, which the
Dagster webserver already depends on, so the server adds no dependency.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Any, TypeVar

import uvicorn
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from kebab_eval_pipeline.reference.index import ALL_MODES, ReferenceIndex
from kebab_eval_pipeline.reference.stdio import MAX_K, version_report

BodyT = TypeVar("BodyT", bound=BaseModel)


class QueryRequest(BaseModel):
    """Body of ``/search`` and ``/ask``; ``mode`` defaults to the server's mode."""

    model_config = ConfigDict(extra="ignore")

    query: str
    k: int = Field(default=10, ge=1, le=MAX_K)
    mode: str | None = None


async def read_body(
    request: Request, model: type[BodyT], defaults: dict[str, Any] | None = None
) -> BodyT | tuple[int, str]:
    """``request``'s JSON object body (``defaults`` filling absent keys) validated as ``model``;
    else (status, message): 400 when it is not JSON, 422 when it has the wrong shape."""
    try:
        body: Any = await request.json()
    except ValueError:
        return 400, "request body is not valid JSON"
    if not isinstance(body, dict):
        return 422, "request body must be a JSON object"
    try:
        return model.model_validate({**(defaults or {}), **body})
    except ValidationError as exc:
        return 422, "; ".join(f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in exc.errors())


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def create_app(index: ReferenceIndex, mode: str = "lexical", ask_k: int = 5) -> Starlette:
    """A Starlette app serving ``index``; ``mode`` is the default retrieval mode,
    ``ask_k`` the default number of evidence hits for ``/ask``.

    ``mode`` is checked now (vector/hybrid need vectors and the model), so a
    misconfigured server fails at start-up rather than on every request.
    """
    if mode not in ALL_MODES:
        raise ValueError(f"unknown retrieval mode {mode!r}; expected one of {', '.join(ALL_MODES)}")
    if mode != "lexical":
        index.require_vectors(mode)

    async def parse(request: Request, default_k: int) -> QueryRequest | JSONResponse:
        parsed = await read_body(request, QueryRequest, {"k": default_k})
        if isinstance(parsed, tuple):
            return _error(*parsed)
        if parsed.mode is not None and parsed.mode not in ALL_MODES:
            return _error(422, f"mode: expected one of {', '.join(ALL_MODES)}, got {parsed.mode!r}")
        return parsed

    def run_search(req: QueryRequest) -> list:
        return index.search(req.query, k=req.k, mode=req.mode or mode)

    async def search(request: Request) -> JSONResponse:
        req = await parse(request, 10)
        if isinstance(req, JSONResponse):
            return req
        try:
            hits = await run_in_threadpool(run_search, req)
        except ValueError as exc:  # e.g. vector mode on a lexical-only index
            return _error(400, str(exc))
        return JSONResponse(
            {
                "schema": "search_hit.v1",
                "query": req.query,
                "mode": req.mode or mode,
                "hits": [h.model_dump() for h in hits],
            }
        )

    async def ask(request: Request) -> JSONResponse:
        req = await parse(request, ask_k)
        if isinstance(req, JSONResponse):
            return req

        def run() -> tuple:
            hits = run_search(req)
            return hits, index.ask(req.query, hits)

        try:
            hits, answer = await run_in_threadpool(run)
        except ValueError as exc:
            return _error(400, str(exc))
        return JSONResponse(
            {
                "query": req.query,
                "mode": req.mode or mode,
                "answer": answer.model_dump(),
                "hits": [h.model_dump() for h in hits],
            }
        )

    async def version(request: Request) -> JSONResponse:
        return JSONResponse(version_report(index, mode))

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    return Starlette(
        routes=[
            Route("/search", search, methods=["POST"]),
            Route("/ask", ask, methods=["POST"]),
            Route("/version", version, methods=["GET"]),
            Route("/health", health, methods=["GET"]),
        ]
    )


ALLOW_UNAUTHENTICATED = "--allow-unauthenticated"


def is_loopback(host: str) -> bool:
    """True when ``host`` names only this machine: ``localhost``, 127.0.0.0/8, ``::1`` (also in
    brackets, or as ``::ffff:127.x.x.x``). Anything else — ``0.0.0.0``, ``::``, ``""`` (every
    interface), a LAN address, any other host name (it could resolve anywhere) — is not."""
    name = host.strip().removeprefix("[").removesuffix("]")
    if name.lower().rstrip(".") == "localhost":
        return True
    try:
        addr = ipaddress.ip_address(name)
    except ValueError:
        return False
    mapped = getattr(addr, "ipv4_mapped", None)
    return addr.is_loopback or (mapped is not None and mapped.is_loopback)


class UnsafeBind(ValueError):
    """Refused: serving without authentication on an address other machines can reach."""


def exposure_warning(
    host: str, *, what: str, authenticated: bool, allow_unauthenticated: bool, key_hint: str = ""
) -> str | None:
    """Decide whether ``what`` may be served on ``host``, before anything is bound.

    Inputs: the bind address, a description of the service (``"the reference index"``), whether
    requests must carry a key, whether the caller passed :data:`ALLOW_UNAUTHENTICATED`, and how to
    require a key (``"--api-key-env"``), if the command can.

    Output: None when the bind is safe (loopback, or a key is required); the warning text to print
    on stderr when a reachable unauthenticated bind was forced.

    Raises: :class:`UnsafeBind` with the reason and the ways out when the bind is reachable from
    other machines, unauthenticated and not forced.
    """
    if authenticated or is_loopback(host):
        return None
    if not allow_unauthenticated:
        ways = "bind a loopback address (--host 127.0.0.1, ::1 or localhost)"
        ways += f", require a key with {key_hint}" if key_hint else ""
        raise UnsafeBind(
            f"refusing to serve {what} on {host or 'every interface'!r} without authentication: anyone "
            f"who can reach that address could use it; {ways}, or pass {ALLOW_UNAUTHENTICATED} to accept "
            "the risk"
        )
    return (
        f"WARNING: serving {what} on {host or 'every interface'!r} WITHOUT AUTHENTICATION "
        f"({ALLOW_UNAUTHENTICATED}): anyone who can reach this address can use it"
    )


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port``; port 0 picks a free one (read it from ``getsockname``)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted connections inherit it: without it, Uvicorn's two-part responses (headers, body)
    # meet the client's delayed ACK and every request takes ~40 ms more on loopback.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((host, port))
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def serve(app: Starlette, sock: socket.socket) -> None:
    """Serve ``app`` on an already-bound socket until interrupted (SIGINT/SIGTERM)."""
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    uvicorn.Server(config).run(sockets=[sock])
