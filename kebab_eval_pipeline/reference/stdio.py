"""The reference system over stdin/stdout, one JSON object per line (``kebab-eval ref serve-jsonl``):
the far side of the command adapter's ``protocol: jsonl`` (systems/command_jsonl.py).

* ``{"id", "op": "version"}`` → ``{"id", "system", "mode", <versions>, "coverage"}`` (as ``GET /version``).
* ``{"id", "query": str, "k"?: int = 10, "answer"?: bool = false, "mode"?: str}`` →
  ``{"id", "schema": "search_hit.v1", "mode", "hits": [Hit...], "answer"?: Answer}`` — the answer,
  when asked for, is built from exactly these hits (one retrieval, as ``POST /ask`` does).
* A request it cannot serve → ``{"id", "error": "..."}``; it keeps serving. End of input ends it.

Imports neither Starlette nor Uvicorn: start-up is the index load.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import IO, Any

from kebab_eval_pipeline.contract import Answer, Hit
from kebab_eval_pipeline.reference.index import ALL_MODES, ReferenceIndex

MAX_K = 1000  # the largest k a request may ask for (here and in ``ref serve``)


def version_report(index: ReferenceIndex, mode: str) -> dict[str, Any]:
    """What the reference system reports as its versions (``GET /version`` and the version line)."""
    info = index.info(mode)
    return {
        "system": "kebab-eval-reference",
        "mode": mode,
        **info.versions(),
        **info.details,
        "coverage": info.coverage,
    }


def search_reply(query: str, mode: str, hits: Sequence[Hit]) -> dict[str, Any]:
    """``search_hit.v1`` hits of ``query``: what ``POST /search`` returns and ``ref search --json`` prints."""
    return {"schema": "search_hit.v1", "query": query, "mode": mode, "hits": [h.model_dump() for h in hits]}


def ask_reply(query: str, mode: str, answer: Answer, hits: Sequence[Hit]) -> dict[str, Any]:
    """The answer with its evidence hits: what ``POST /ask`` returns and ``ref ask --json`` prints."""
    dumped = [h.model_dump() for h in hits]
    return {"query": query, "mode": mode, "answer": answer.model_dump(), "hits": dumped}


def handle(
    request: Any, index: ReferenceIndex, mode: str = "lexical", gate_threshold: float | None = None
) -> dict[str, Any]:
    """The reply object for one parsed request line (never raises for a bad request)."""
    if not isinstance(request, dict):
        return {"id": None, "error": f"a request is a JSON object, got {type(request).__name__}"}
    rid = request.get("id")
    if request.get("op") == "version":
        return {"id": rid, **version_report(index, mode)}
    if request.get("op") not in (None, "query"):
        return {"id": rid, "error": f"unknown op {request.get('op')!r}"}
    query, k, chosen = request.get("query"), request.get("k", 10), request.get("mode") or mode
    if not isinstance(query, str):
        return {"id": rid, "error": "query: expected a string"}
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        return {"id": rid, "error": f"k: expected an integer from 1 to {MAX_K}, got {k!r}"}
    if chosen not in ALL_MODES:
        return {"id": rid, "error": f"mode: expected one of {', '.join(ALL_MODES)}, got {chosen!r}"}
    try:
        hits = index.search(query, k=k, mode=chosen)
        reply: dict[str, Any] = {
            "id": rid,
            "schema": "search_hit.v1",
            "mode": chosen,
            "hits": [h.model_dump() for h in hits],
        }
        if request.get("answer") is True:
            reply["answer"] = index.ask(query, hits, gate_threshold=gate_threshold).model_dump()
    except ValueError as exc:  # e.g. vector mode on a lexical-only index
        return {"id": rid, "error": str(exc)}
    return reply


def serve_jsonl(
    index: ReferenceIndex,
    stdin: IO[bytes],
    stdout: IO[bytes],
    mode: str = "lexical",
    gate_threshold: float | None = None,
) -> None:
    """Answer request lines from ``stdin`` on ``stdout`` until end of input.

    ``mode`` is the default retrieval mode, checked before the first line (ValueError), so a
    misconfigured server fails at start-up. The streams are binary: UTF-8 whatever the locale.
    """
    index.check_mode(mode)
    while line := stdin.readline():
        text = line.decode("utf-8", "replace")
        if not text.strip():
            continue
        try:
            request = json.loads(text)
        except ValueError as exc:
            reply: dict[str, Any] = {"id": None, "error": f"request is not JSON: {exc}"}
        else:
            try:
                reply = handle(request, index, mode, gate_threshold)
            except Exception as exc:  # keep serving: one bad query must not end the process
                rid = request.get("id") if isinstance(request, dict) else None
                reply = {"id": rid, "error": f"{type(exc).__name__}: {exc}"}
        stdout.write((json.dumps(reply, ensure_ascii=False) + "\n").encode("utf-8"))
        stdout.flush()
