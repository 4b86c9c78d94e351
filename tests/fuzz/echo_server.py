"""A real HTTP search/ask service on 127.0.0.1 that echoes the credential it is sent (issue 44).

The secrets family's http cases point ``search_url`` / ``ask_url`` at
``http://127.0.0.1:{port}/<where>/<form>/search`` (and ``…/ask``): the server takes the token
from the request's ``Authorization: Bearer …`` header — the value the tool read from the
environment — and puts it, written in ``form`` (:func:`echo`), where ``where`` says: a 5xx or
401 body, or a hit's doc id / chunk id / snippet, or the answer's text. One server (threads)
serves every case of a harness run.
"""

from __future__ import annotations

import base64
import contextlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import quote

#: How a system may write a secret back: as it is, JSON-escaped (``\/``, every character as
#: ``\uXXXX``), URL-encoded, base64 — alone or as the ``Bearer …`` header value it came in.
FORMS = ("raw", "json-slash", "json-unicode", "url", "base64", "base64-bearer")


def echo(secret: str, form: str) -> str:
    """``secret`` written in ``form``, as text to put inside a JSON string literal as it is."""
    if form == "raw":
        return secret
    if form == "json-slash":
        return secret.replace("/", "\\/")
    if form == "json-unicode":
        return "".join(f"\\u{ord(c):04x}" for c in secret)
    if form == "url":
        return quote(secret, safe="")
    if form == "base64":
        return base64.b64encode(secret.encode()).decode()
    if form == "base64-bearer":
        return base64.b64encode(f"Bearer {secret}".encode()).decode()
    raise ValueError(form)


def reply(where: str, text: str, op: str) -> tuple[int, str]:
    """(status, JSON body text) echoing ``text`` (already in its form) where ``where`` says."""
    if where == "5xx":
        return 503, '{"error": "upstream rejected the credential ' + text + '"}'
    if where == "401":
        return 401, '{"detail": "invalid token: ' + text + '"}'
    hit = {"doc_id": "d1.md", "chunk_id": "d1.md#1", "snippet": "plain text", "rank": 1}
    marker = "@ECHO@"
    if where in ("doc_id", "chunk_id", "snippet"):
        hit[where] = f"{where}-{marker}"
    body: dict = {"hits": [hit]}
    if op == "ask":
        body["answer"] = {
            "text": f"the answer is {marker}" if where == "answer" else "the answer",
            "citations": [],
        }
    return 200, json.dumps(body).replace(marker, text)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # quiet: the harness reports outcomes, not requests
        pass

    def _send(self, status: int, body: str) -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._send(200, '{"index_version": "echo-1"}')

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        parts = self.path.strip("/").split("/")
        if len(parts) != 3:
            self._send(404, '{"error": "no such route"}')
            return
        where, form, op = parts
        auth = self.headers.get("Authorization") or ""
        secret = auth.removeprefix("Bearer ")
        self._send(*reply(where, echo(secret, form), op))


@contextlib.contextmanager
def echo_server() -> Iterator[int]:
    """Serve on an ephemeral port of 127.0.0.1 for the ``with`` block; yields the port."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
