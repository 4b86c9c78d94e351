"""`kebab-eval ref serve` as a real process on an ephemeral 127.0.0.1 port."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from kebab_eval_pipeline.reference import ReferenceIndex
from tests.forked_cli import run_cli

CLI = [sys.executable, "-m", "kebab_eval_pipeline.cli"]


class Server:
    def __init__(self, proc: subprocess.Popen, url: str) -> None:
        self.proc = proc
        self.url = url

    def get(self, path: str) -> tuple[int, dict]:
        return self._send(urllib.request.Request(self.url + path))

    def post(self, path: str, body: object, raw: bytes | None = None) -> tuple[int, dict]:
        data = raw if raw is not None else json.dumps(body).encode("utf-8")
        request = urllib.request.Request(
            self.url + path, data=data, headers={"Content-Type": "application/json"}, method="POST"
        )
        return self._send(request)

    @staticmethod
    def _send(request: urllib.request.Request) -> tuple[int, dict]:
        try:
            with urllib.request.urlopen(request, timeout=60) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())


def start(index_dir: Path, *args: str) -> Server:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DAGSTER_")}
    proc = subprocess.Popen(
        [*CLI, "ref", "serve", str(index_dir), "--port", "0", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    line = proc.stdout.readline().strip()
    if not line.startswith("serving http://127.0.0.1:"):
        proc.kill()
        raise AssertionError(f"server did not start: {line!r} {proc.stderr.read()}")
    return Server(proc, line.removeprefix("serving "))


def stop(server: Server) -> str:
    server.proc.terminate()
    try:
        _, stderr = server.proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        server.proc.kill()
        _, stderr = server.proc.communicate()
    return stderr


@pytest.fixture(scope="module")
def lexical_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, ReferenceIndex]]:
    from tests.reference.conftest import write_corpus

    corpus = write_corpus(tmp_path_factory.mktemp("corpus"))
    index = ReferenceIndex.build(corpus)
    out = tmp_path_factory.mktemp("idx")
    index.save(out)
    server = start(out)
    yield server, index
    stderr = stop(server)
    assert "Traceback" not in stderr, stderr


def test_search_matches_in_process(lexical_server) -> None:
    server, index = lexical_server
    status, body = server.post("/search", {"query": "starter flour water", "k": 3})
    assert status == 200
    assert body["schema"] == "search_hit.v1" and body["mode"] == "lexical"
    assert body["hits"] == [h.model_dump() for h in index.search("starter flour water", k=3)]


def test_ask_cites_retrieved_hits(lexical_server) -> None:
    server, index = lexical_server
    status, body = server.post("/ask", {"query": "소금물 농도는 얼마인가요?"})
    assert status == 200
    answer = body["answer"]
    assert not answer["refused"] and "10퍼센트" in answer["text"]
    retrieved = {h["chunk_id"] for h in body["hits"]}
    # /ask defaults to 5 evidence hits (lexical returns fewer when fewer chunks match).
    assert body["hits"] == [h.model_dump() for h in index.search("소금물 농도는 얼마인가요?", k=5)]
    assert answer["citations"] and {c["chunk_id"] for c in answer["citations"]} <= retrieved
    assert answer["prompt_template_version"] == index.info().prompt_template_version
    status, refusal = server.post("/ask", {"query": "What is the airspeed of an unladen swallow?"})
    assert status == 200 and refusal["answer"]["refused"] is True
    assert refusal["answer"]["refusal_reason"].startswith("score_gate:")


def test_version_and_health(lexical_server) -> None:
    server, index = lexical_server
    status, body = server.get("/version")
    assert status == 200
    assert body["index_version"] == index.index_version
    assert body["chunker_version"] == index.chunker_version
    assert body["parser_version"] == index.manifest["parser_version"]
    assert body["embedding_version"] == "none" and body["mode"] == "lexical"
    assert server.get("/health") == (200, {"status": "ok"})


@pytest.mark.parametrize(
    ("body", "raw", "status", "fragment"),
    [
        (None, b"{not json", 400, "not valid JSON"),
        ([1, 2], None, 422, "must be a JSON object"),
        ({"k": 3}, None, 422, "query: Field required"),
        ({"query": "x", "k": 0}, None, 422, "k: Input should be greater than or equal to 1"),
        ({"query": "x", "mode": "semantic"}, None, 422, "mode: expected one of lexical, vector, hybrid"),
        ({"query": "x", "mode": "vector"}, None, 400, "built without them"),
    ],
)
def test_bad_requests_get_clear_errors(lexical_server, body, raw, status, fragment) -> None:
    server, _ = lexical_server
    got_status, got = server.post("/search", body, raw=raw)
    assert got_status == status
    assert fragment in got["error"]


def test_serve_refuses_vector_mode_without_vectors_and_bad_index(tmp_path: Path) -> None:
    from tests.reference.conftest import write_corpus

    index = ReferenceIndex.build(write_corpus(tmp_path / "corpus"))
    index.save(tmp_path / "idx")
    proc = run_cli(["ref", "serve", str(tmp_path / "idx"), "--port", "0", "--mode", "hybrid"], timeout=120)
    assert proc.returncode == 2 and "built without them" in proc.stderr and "Traceback" not in proc.stderr
    missing = run_cli(["ref", "serve", str(tmp_path / "nope"), "--port", "0"], timeout=120)
    assert missing.returncode == 2 and "index directory does not exist" in missing.stderr


def test_hybrid_server(vector_index: ReferenceIndex, tmp_path: Path) -> None:
    vector_index.save(tmp_path / "vidx")
    server = start(tmp_path / "vidx", "--mode", "hybrid")
    try:
        status, body = server.post("/search", {"query": "bake the loaf temperature", "k": 4})
        assert status == 200 and body["mode"] == "hybrid"
        assert body["hits"] == [
            h.model_dump() for h in vector_index.search("bake the loaf temperature", k=4, mode="hybrid")
        ]
        status, lexical = server.post("/search", {"query": "bake the loaf temperature", "mode": "lexical"})
        assert status == 200 and {h["score_kind"] for h in lexical["hits"]} == {"bm25"}
        _, version = server.get("/version")
        assert version["embedding_model"] == vector_index.manifest["embedding_model"]
        assert version["rrf_k"] == "60"
    finally:
        stderr = stop(server)
    assert "Traceback" not in stderr
