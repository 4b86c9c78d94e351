"""A real third-party RAG retriever for the test suite: a Haystack 2 BM25 pipeline over a folder
of Markdown, served the way a team would serve it — nothing in here knows about kebab-eval.

Pipeline (built once per process, in about a second for kebab-docs)::

    TextFileToDocument(store_full_path=True)
      → MarkdownHeaderSplitter(keep_headers=True, secondary_split="word", split_length=N)
      → DocumentWriter → InMemoryDocumentStore ← InMemoryBM25Retriever(top_k=k)

Hits are Haystack's own ``Document.to_dict()`` (its default, flattened form), unchanged: ``id``,
``content``, ``score``, ``file_path`` (absolute: ``store_full_path=True``), ``header``,
``parent_headers``, ``split_id``, ``split_idx_start``, ``source_id``, ``page_number``, plus
``blob``/``embedding``/``sparse_embedding`` (null). No line numbers: the splitter records none.

Modes (``--corpus DIR`` and ``--chunk-size N`` on each; env ``HAYSTACK_APP_CORPUS`` /
``HAYSTACK_APP_CHUNK_SIZE`` as defaults)::

    haystack_app.py serve [--port 0]   # HTTP on 127.0.0.1: POST /search {"query", "k"} → [doc dict, …];
                                       # GET /version → versions JSON; prints "listening on URL" first
    haystack_app.py jsonl              # one JSON request per stdin line {"id", "query", "k", "answer"}
                                       # → one reply per stdout line {"id", "hits": [doc dict, …]}
    haystack_app.py search QUERY [--k 10]   # one search, the hit list on stdout
    haystack_app.py version            # the versions JSON on stdout
    build(corpus, chunk_size)          # in-process: an object with search(query, k) → the
                                       # retriever's {"documents": [Document, …]}, and versions()

The versions JSON names the chunker ``haystack-md-header-<N>`` (``chunker_version``), an
``index_version`` hashing that, the Haystack version and the corpus content, and ``coverage``
(documents processed, chunks). Haystack's telemetry is switched off before it is imported: the
tests run offline.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")  # before haystack is imported

DEFAULT_CHUNK_SIZE = 200
DEFAULT_K = 10


class App:
    """The indexed corpus and a BM25 retriever over it."""

    def __init__(self, corpus: Path, chunk_size: int) -> None:
        import haystack
        from haystack import Pipeline
        from haystack.components.converters import TextFileToDocument
        from haystack.components.preprocessors import MarkdownHeaderSplitter
        from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
        from haystack.components.writers import DocumentWriter
        from haystack.document_stores.in_memory import InMemoryDocumentStore

        corpus = corpus.resolve()
        files = sorted(p for p in corpus.rglob("*.md") if p.is_file())
        if not files:
            raise SystemExit(f"haystack_app: no Markdown files under {corpus}")
        self.store = InMemoryDocumentStore()
        indexing = Pipeline()
        indexing.add_component("convert", TextFileToDocument(store_full_path=True))
        indexing.add_component(
            "split",
            MarkdownHeaderSplitter(keep_headers=True, secondary_split="word", split_length=chunk_size),
        )
        indexing.add_component("write", DocumentWriter(document_store=self.store))
        indexing.connect("convert", "split")
        indexing.connect("split", "write")
        indexing.run({"convert": {"sources": [str(p) for p in files]}})
        self.retriever = InMemoryBM25Retriever(document_store=self.store, top_k=DEFAULT_K)

        chunker_version = f"haystack-md-header-{chunk_size}"
        digest = hashlib.sha256(f"{chunker_version}|haystack-ai {haystack.__version__}".encode())
        for p in files:  # corpus content, in path order, so any edit changes the index version
            digest.update(p.relative_to(corpus).as_posix().encode() + b"\0" + p.read_bytes())
        self.versions: dict[str, Any] = {
            "chunker_version": chunker_version,
            "index_version": f"haystack-bm25:{digest.hexdigest()[:16]}",
            "haystack_version": haystack.__version__,
            "coverage": {"docs_processed": len(files), "chunks": self.store.count_documents()},
        }

    def search(self, query: str, k: int = DEFAULT_K) -> list[dict[str, Any]]:
        """The top ``k`` documents for ``query``, as Haystack serialises them (unchanged)."""
        documents = self.retriever.run(query=query, top_k=k)["documents"]
        return [d.to_dict() for d in documents]


class InProcess:
    """The same App for an in-process evaluation: ``search`` returns the retriever's own output,
    ``{"documents": [Document, …]}``, Haystack objects unconverted; ``versions()`` the versions JSON."""

    def __init__(self, corpus: str, chunk_size: int = DEFAULT_CHUNK_SIZE) -> None:
        self.app = App(Path(corpus), int(chunk_size))

    def search(self, query: str, k: int) -> dict[str, Any]:
        return self.app.retriever.run(query=query, top_k=k)

    def versions(self) -> dict[str, Any]:
        return self.app.versions


def build(corpus: str, chunk_size: int = DEFAULT_CHUNK_SIZE) -> InProcess:
    """A factory for in-process use (``build(corpus=…, chunk_size=…)``)."""
    return InProcess(corpus, chunk_size)


# -- request handling shared by the modes -------------------------------------------------------


def _request(body: Any) -> tuple[str, int]:
    """``(query, k)`` from a request object; ValueError naming the bad field."""
    if not isinstance(body, dict):
        raise ValueError("expected a JSON object")
    query = body.get("query")
    if not isinstance(query, str) or not query.strip():
        raise ValueError("field 'query': expected a non-empty string")
    k = body.get("k", DEFAULT_K)
    if isinstance(k, str) and k.isdigit():
        k = int(k)
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= 1000:
        raise ValueError("field 'k': expected an integer from 1 to 1000")
    return query, k


def serve(app: App, port: int) -> None:
    """HTTP on 127.0.0.1 until killed; the first stdout line says where."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _send(self, status: int, payload: Any) -> None:
            data = json.dumps(payload, ensure_ascii=False).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/version":
                self._send(200, app.versions)
            elif self.path == "/health":
                self._send(200, {"ok": True})
            else:
                self._send(404, {"error": f"no route {self.path}"})

        def do_POST(self) -> None:
            if self.path != "/search":
                self._send(404, {"error": f"no route {self.path}"})
                return
            try:
                length = int(self.headers.get("Content-Length") or 0)
                query, k = _request(json.loads(self.rfile.read(length) or b"null"))
            except ValueError as exc:  # JSONDecodeError is a ValueError
                self._send(400, {"error": str(exc)})
                return
            self._send(200, app.search(query, k))

        def log_message(self, format: str, *args: Any) -> None:
            pass  # one line per request would drown the test output

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(f"listening on http://127.0.0.1:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()


def jsonl(app: App) -> None:
    """One reply line per request line, in order, until stdin closes. A bad request gets a reply
    with ``error`` (and its ``id`` when it had one) instead of ending the process."""
    for line in sys.stdin:
        if not line.strip():
            continue
        request_id = None
        try:
            body = json.loads(line)
            request_id = body.get("id") if isinstance(body, dict) else None
            if isinstance(body, dict) and body.get("op") == "version":  # the adapter's greeting
                sys.stdout.write(json.dumps({"id": request_id, **app.versions}) + "\n")
                sys.stdout.flush()
                continue
            query, k = _request(body)
            reply: dict[str, Any] = {"id": request_id, "hits": app.search(query, k)}
        except ValueError as exc:
            reply = {"id": request_id, "error": str(exc)}
        sys.stdout.write(json.dumps(reply, ensure_ascii=False) + "\n")
        sys.stdout.flush()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=["serve", "jsonl", "search", "version"])
    parser.add_argument("query", nargs="?", help="search mode: the query")
    parser.add_argument("--corpus", type=Path, default=os.environ.get("HAYSTACK_APP_CORPUS"))
    parser.add_argument(
        "--chunk-size",
        type=int,
        default=int(os.environ.get("HAYSTACK_APP_CHUNK_SIZE", DEFAULT_CHUNK_SIZE)),
        help="words per chunk (MarkdownHeaderSplitter split_length)",
    )
    parser.add_argument("--port", type=int, default=0, help="serve mode: 0 picks a free port")
    parser.add_argument("--k", type=int, default=DEFAULT_K, help="search mode: hits to return")
    args = parser.parse_args(argv)
    if args.corpus is None or not Path(args.corpus).is_dir():
        parser.error(f"--corpus: not a folder: {args.corpus}")
    if args.chunk_size < 1:
        parser.error("--chunk-size: expected a positive integer")
    if args.mode == "search" and not args.query:
        parser.error("search mode needs a QUERY")

    app = App(Path(args.corpus), args.chunk_size)
    if args.mode == "serve":
        serve(app, args.port)
    elif args.mode == "jsonl":
        jsonl(app)
    elif args.mode == "search":
        print(json.dumps(app.search(args.query, args.k), ensure_ascii=False))
    else:
        print(json.dumps(app.versions))


if __name__ == "__main__":
    main()
