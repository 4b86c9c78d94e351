"""An OpenAI-compatible chat-completions server over a judge backend (``kebab-eval judge serve``):
users without Ollama get a local judge endpoint, and the ``openai_compatible`` backend is tested
against a real HTTP server and a real model.

Endpoints:

* ``GET /v1/models`` → the one served model, with its ``digest`` (what the client pins).
* ``POST /v1/chat/completions`` → a ``chat.completion``; greedy only (``temperature`` absent or
  0), no streaming, ``logprobs``/``top_logprobs`` as OpenAI defines them; ``system_fingerprint``
  is the model digest. One completion at a time: the model is not re-entrant and a CPU gains
  nothing from running two.
* ``GET /health`` → ``{"status": "ok"}``.

Errors are OpenAI-shaped, ``{"error": {"message", "type", "code"}}``, with 400 (unsupported
value, not JSON), 404 (unknown model or route), 422 (a body of the wrong shape) or 500 (the
model failed) — never a stack trace. Served by Uvicorn through
:mod:`kebab_eval_pipeline.foundation.net.serve`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.foundation.net.serve import read_body
from kebab_eval_pipeline.judge.completion import (
    TOP_LOGPROBS,
    Completion,
    Decoding,
    JudgeBackend,
    JudgeCallError,
)

DEFAULT_MAX_TOKENS = 256
GREEDY_ONLY = "only greedy decoding (temperature 0) is served"


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    role: Literal["system", "user", "assistant"]
    content: str


class ChatRequest(BaseModel):
    """The chat-completions body this server understands; other OpenAI keys are ignored
    (``top_p`` is meaningless under greedy decoding)."""

    model_config = ConfigDict(extra="ignore")

    messages: Annotated[list[ChatMessage], Field(min_length=1)]
    model: str | None = None
    temperature: float | None = None
    stream: bool = False
    n: int = 1
    max_tokens: Annotated[int, Field(ge=1, le=4096)] = DEFAULT_MAX_TOKENS
    seed: int = 0
    logprobs: bool = False
    top_logprobs: Annotated[int, Field(ge=0, le=TOP_LOGPROBS)] | None = None


def error(status: int, message: str, code: str, kind: str = "invalid_request_error") -> JSONResponse:
    """An OpenAI-shaped error response."""
    return JSONResponse({"error": {"message": message, "type": kind, "code": code}}, status_code=status)


def _unsupported(req: ChatRequest, served: str) -> JSONResponse | None:
    if req.model is not None and req.model != served:
        return error(
            404, f"The model {req.model!r} does not exist; this server serves {served!r}", "model_not_found"
        )
    if req.temperature not in (None, 0):
        return error(400, f"{GREEDY_ONLY}; got temperature {req.temperature:g}", "unsupported_value")
    if req.stream:
        return error(400, "streaming is not supported: send stream false", "unsupported_value")
    if req.n != 1:
        return error(400, f"only n = 1 is served; got {req.n}", "unsupported_value")
    if req.top_logprobs is not None and not req.logprobs:
        return error(400, "top_logprobs needs logprobs true", "invalid_value")
    return None


def chat_completion(
    completion: Completion, served: str, digest: str, logprobs: bool, key: str
) -> dict[str, Any]:
    """The ``chat.completion`` body of ``completion``; ``key`` seeds its id."""
    prompt, generated = completion.prompt_tokens, completion.completion_tokens
    wire_logprobs = (
        {"content": [t.to_wire() for t in completion.tokens]}
        if logprobs and completion.tokens is not None
        else None
    )
    return {
        "id": "chatcmpl-" + hashlib.sha256(key.encode()).hexdigest()[:24],
        "object": "chat.completion",
        "created": int(time.time()),
        "model": completion.model or served,
        "system_fingerprint": digest,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": completion.text},
                "logprobs": wire_logprobs,
                "finish_reason": completion.finish_reason,
            }
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": generated,
            "total_tokens": prompt + generated if prompt is not None and generated is not None else None,
        },
    }


def create_app(backend: JudgeBackend, api_key: str | None = None) -> Starlette:
    """A Starlette app serving ``backend`` (see the module docstring). With ``api_key``, every
    ``/v1`` request must carry ``Authorization: Bearer <api_key>`` (else 401, as OpenAI answers)."""
    lock = threading.Lock()  # one completion at a time, in whichever worker thread
    expected = f"Bearer {api_key}".encode() if api_key else None

    def unauthorized(request: Request) -> JSONResponse | None:
        if expected is None:
            return None
        given = request.headers.get("authorization", "").encode()
        if hmac.compare_digest(given, expected):
            return None
        return error(401, "missing or wrong API key", "invalid_api_key", "invalid_request_error")

    def run(messages: list[dict[str, str]], decoding: Decoding) -> tuple[Completion, str]:
        with lock:
            return backend.complete(messages, decoding), backend.digest()

    async def models(request: Request) -> JSONResponse:
        if (denied := unauthorized(request)) is not None:
            return denied
        try:
            digest = await run_in_threadpool(backend.digest)  # may hash a model file the first time
        except Exception as exc:
            return error(500, f"{type(exc).__name__}: {exc}", "internal_error", "server_error")
        entry = {
            "id": backend.model,
            "object": "model",
            "created": 0,
            "owned_by": "kebab-eval",
            "digest": digest,
        }
        return JSONResponse({"object": "list", "data": [entry]})

    async def completions(request: Request) -> JSONResponse:
        if (denied := unauthorized(request)) is not None:
            return denied
        req = await read_body(request, ChatRequest)
        if isinstance(req, tuple):
            status, message = req
            return error(status, message, "invalid_json" if status == 400 else "invalid_body")
        refusal = _unsupported(req, backend.model)
        if refusal is not None:
            return refusal
        decoding = Decoding(
            max_tokens=req.max_tokens,
            seed=req.seed,
            logprobs=req.logprobs,
            top_logprobs=(req.top_logprobs or 0) if req.logprobs else TOP_LOGPROBS,
        )
        messages = [m.model_dump() for m in req.messages]
        try:
            completion, digest = await run_in_threadpool(run, messages, decoding)
            key = json.dumps([digest, messages, decoding.as_dict()], sort_keys=True)
            # Rendered here so that a value JSON cannot carry (an infinite logprob) is a 500 too.
            return JSONResponse(chat_completion(completion, backend.model, digest, req.logprobs, key))
        except JudgeCallError as exc:
            return error(500, str(exc), "judge_call_failed", "server_error")
        except InputError as exc:  # the model cannot be loaded (a missing extra, a broken file)
            return error(500, str(exc), "model_unavailable", "server_error")
        except Exception as exc:  # a bug or a broken model: one line, never a traceback
            return error(500, f"{type(exc).__name__}: {exc}", "internal_error", "server_error")

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, HTTPException)
        code = "not_found" if exc.status_code == 404 else "method_not_allowed"
        return error(exc.status_code, f"{request.method} {request.url.path}: {exc.detail}", code)

    return Starlette(
        routes=[
            Route("/v1/models", models, methods=["GET"]),
            Route("/v1/chat/completions", completions, methods=["POST"]),
            Route("/health", health, methods=["GET"]),
        ],
        exception_handlers={HTTPException: http_error},
    )
