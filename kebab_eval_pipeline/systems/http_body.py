"""Reading the http adapter's response bodies: decompressed here, at most ``max_response_mb``, then
parsed as JSON; what cannot be read fails the query with its class (``too_large``,
``bad_response``, ``bad_json``).
"""

from __future__ import annotations

import asyncio
import itertools
import zlib
from collections.abc import Iterator
from typing import Any

import httpx

from kebab_eval_pipeline.foundation.limits import MIB
from kebab_eval_pipeline.foundation.yaml_io import json_loads
from kebab_eval_pipeline.systems.outcome import BAD_JSON, BAD_RESPONSE, QueryFailure, too_large

ERROR_BODY_BYTES = 1 << 16  # of an error response's body, read for its message


def parse_body(data: bytes) -> Any:
    """JSON from a response body (UTF-8/16/32 detected); QueryFailure(``bad_json``) when it is not
    JSON or is nested too deeply for Python's parser (e.g. ``[[[[…`` 100,000 deep)."""
    try:
        return json_loads(data)
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
            raise too_large(cap, f"the body ({int(declared) / MIB:.1f} MiB declared)")
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
                raise too_large(cap, "the body")
            if n % 16 == 0:  # a bomb's chunk is many pieces: let timers and other queries run
                await asyncio.sleep(0)
    return bytes(body)


async def error_body(response: httpx.Response) -> bytes:
    """The first ``ERROR_BODY_BYTES`` of an error response's body (decompressed), for its message."""
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
                raise too_large(cap, "the body")
    return bytes(body)
