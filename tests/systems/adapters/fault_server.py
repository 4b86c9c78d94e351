"""A real HTTP server on 127.0.0.1 for the http adapter's tests: every reply is decided by a
Python function of the request, so a test can serve hits, fail, hang or drop the connection.

    def respond(request: Received) -> Reply | Hang | Close: ...

    with FaultServer(respond) as server:
        server.url  # "http://127.0.0.1:PORT"
        server.count("/search", "q-01")  # requests seen for that path and key

The server is ``http.server.ThreadingHTTPServer`` (one daemon thread per connection, HTTP/1.0,
so every response closes its connection) on an ephemeral port. It records every request,
counts them per (path, key) — the key is the JSON body's ``id`` (else its ``query``) — and
tracks the most requests that were in flight at once.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Received:
    """One request as the server saw it; ``attempt`` is 1 for the first request with its key."""

    method: str
    path: str
    headers: dict[str, str]  # lower-case names
    body: bytes
    json: Any  # the parsed body, or None
    key: str
    attempt: int


@dataclass(frozen=True)
class Reply:
    """A response: ``body`` is sent as JSON unless it is bytes (sent as is)."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0  # wait before answering (slow but well-behaved)


@dataclass(frozen=True)
class Hang:
    """Send nothing for ``seconds`` (or until the server stops), then close the connection."""

    seconds: float = 3.0


@dataclass(frozen=True)
class Close:
    """Close the connection without sending a single byte."""


Action = Reply | Hang | Close


def json_key(request_json: Any, path: str) -> str:
    if isinstance(request_json, dict):
        for name in ("id", "query"):
            if isinstance(request_json.get(name), str):
                return request_json[name]
    return path


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 128  # a burst of concurrent connects must not wait for SYN retransmits

    owner: FaultServer


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        self.server.owner._handle(self)

    def do_POST(self) -> None:
        self.server.owner._handle(self)


class FaultServer:
    """See the module docstring."""

    def __init__(self, respond: Callable[[Received], Action]) -> None:
        self.respond = respond
        self.received: list[Received] = []
        self.counts: Counter[tuple[str, str]] = Counter()
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.owner = self
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def count(self, path: str, key: str) -> int:
        with self._lock:
            return self.counts[(path, key)]

    def __enter__(self) -> FaultServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopping.set()  # releases hanging handlers
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def _handle(self, handler: _Handler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = None
        path = handler.path.split("?", 1)[0]
        key = json_key(parsed, path)
        with self._lock:
            self.counts[(path, key)] += 1
            request = Received(
                method=handler.command,
                path=path,
                headers={k.lower(): v for k, v in handler.headers.items()},
                body=body,
                json=parsed,
                key=key,
                attempt=self.counts[(path, key)],
            )
            self.received.append(request)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        answered = False

        def answering() -> None:  # "in flight" ends before the first byte of the reply leaves
            nonlocal answered
            if not answered:
                answered = True
                with self._lock:
                    self.in_flight -= 1

        try:
            action = self.respond(request)
            if isinstance(action, Close):
                answering()
                handler.close_connection = True
                return
            if isinstance(action, Hang):
                self._stopping.wait(action.seconds)
                answering()
                handler.close_connection = True
                return
            if action.delay_s:
                time.sleep(action.delay_s)
            payload = action.body if isinstance(action.body, bytes) else json.dumps(action.body).encode()
            answering()
            try:
                handler.send_response(action.status)
                handler.send_header("Content-Type", "application/json")
                handler.send_header("Content-Length", str(len(payload)))
                for name, value in action.headers.items():
                    handler.send_header(name, value)
                handler.end_headers()
                handler.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up first
                pass
        finally:
            answering()
