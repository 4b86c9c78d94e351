"""Serving a Starlette app with Uvicorn, shared by ``kebab-eval ref serve`` (the reference system)
and ``kebab-eval judge serve`` (the judge model): reading a JSON request body, deciding whether an
address may be served without authentication, binding the socket, running the server.

Uvicorn and Starlette come with the Dagster webserver, so serving adds no dependency.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Any, TypeVar

import uvicorn
from pydantic import BaseModel, ValidationError
from starlette.applications import Starlette
from starlette.requests import Request

BodyT = TypeVar("BodyT", bound=BaseModel)


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
