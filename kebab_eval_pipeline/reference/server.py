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
Dagster webserver already depends on, so the server adds no dependency; reading request bodies,
the exposure check, binding and serving are :mod:`kebab_eval_pipeline.foundation.net.serve`'s.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from kebab_eval_pipeline.foundation.net.serve import read_body
from kebab_eval_pipeline.reference.index import ALL_MODES, ReferenceIndex
from kebab_eval_pipeline.reference.stdio import MAX_K, ask_reply, search_reply, version_report


class QueryBody(BaseModel):
    """Body of ``/search`` and ``/ask``; ``mode`` defaults to the server's mode."""

    model_config = ConfigDict(extra="ignore")

    query: str
    k: int = Field(default=10, ge=1, le=MAX_K)
    mode: str | None = None


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def create_app(index: ReferenceIndex, mode: str = "lexical", ask_k: int = 5) -> Starlette:
    """A Starlette app serving ``index``; ``mode`` is the default retrieval mode,
    ``ask_k`` the default number of evidence hits for ``/ask``.

    ``mode`` is checked now (vector/hybrid need vectors and the model), so a
    misconfigured server fails at start-up rather than on every request.
    """
    index.check_mode(mode)

    async def parse(request: Request, default_k: int) -> QueryBody | JSONResponse:
        parsed = await read_body(request, QueryBody, {"k": default_k})
        if isinstance(parsed, tuple):
            return _error(*parsed)
        if parsed.mode is not None and parsed.mode not in ALL_MODES:
            return _error(422, f"mode: expected one of {', '.join(ALL_MODES)}, got {parsed.mode!r}")
        return parsed

    def run_search(req: QueryBody) -> list:
        return index.search(req.query, k=req.k, mode=req.mode or mode)

    async def search(request: Request) -> JSONResponse:
        req = await parse(request, 10)
        if isinstance(req, JSONResponse):
            return req
        try:
            hits = await run_in_threadpool(run_search, req)
        except ValueError as exc:  # e.g. vector mode on a lexical-only index
            return _error(400, str(exc))
        return JSONResponse(search_reply(req.query, req.mode or mode, hits))

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
        return JSONResponse(ask_reply(req.query, req.mode or mode, answer, hits))

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
