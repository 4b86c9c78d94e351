"""`kebab-eval ref index|search|ask` as real processes, the way the command adapter will call them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kebab_eval_pipeline.reference import ReferenceIndex
from tests.forked_cli import run_cli

CLI = [sys.executable, "-m", "kebab_eval_pipeline.cli"]


def ref(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DAGSTER_")}
    proc = run_cli(["ref", *args], env=env, timeout=300)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def test_index_search_ask_as_processes(corpus_dir: Path, tmp_path: Path) -> None:
    (corpus_dir / ".gitignore").write_text("tools/\n", encoding="utf-8")
    out = tmp_path / "idx"
    built = ref("index", str(corpus_dir), "--out", str(out), "--exclude", "notes.txt", "--chunk-size", "600")
    assert built.returncode == 0, built.stderr
    # 6 files, minus tools/brine.py (.gitignore) and notes.txt (--exclude); korean/empty.md has no chunk.
    assert "indexed 4 documents" in built.stdout
    assert "4 docs, 1 with zero chunks" in built.stdout and "no chunks: korean/empty.md" in built.stdout
    assert "tokens per chunk min" in built.stdout and "embedding none" in built.stdout
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["exclude"] == ["notes.txt"] and manifest["chunk_size"] == 600
    assert {d["doc_id"] for d in manifest["documents"]} == {
        "english/kombucha.md", "english/sourdough.md", "korean/empty.md", "korean/kimchi.md",
    }  # fmt: skip

    index = ReferenceIndex.load(out)
    searched = ref("search", str(out), "starter flour", "--k", "2", "--json")
    assert searched.returncode == 0, searched.stderr
    payload = json.loads(searched.stdout)
    assert payload["schema"] == "search_hit.v1" and payload["query"] == "starter flour"
    assert payload["hits"] == [h.model_dump() for h in index.search("starter flour", k=2)]

    asked = ref("ask", str(out), "소금물 농도는 얼마인가요?", "--json")
    assert asked.returncode == 0, asked.stderr
    body = json.loads(asked.stdout)
    assert "10퍼센트" in body["answer"]["text"]
    assert {c["chunk_id"] for c in body["answer"]["citations"]} <= {h["chunk_id"] for h in body["hits"]}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["search", "{idx}", "q", "--mode", "vector"], "built without them"),
        (["ask", "{idx}", "q", "--mode", "hybrid"], "built without them"),
        (["search", "{idx}", "q", "--mode", "semantic"], "unknown retrieval mode 'semantic'"),
        (["search", "{idx}", "q", "--k", "0"], "k must be >= 1"),
        (["search", "{missing}", "q"], "index directory does not exist"),
        (["index", "{missing}", "--out", "{idx}2"], "corpus directory does not exist"),
        (["index", "{corpus}", "--out", "{idx}3", "--chunk-overlap", "900"], "--chunk-overlap"),
    ],
)
def test_bad_input_exits_2(corpus_dir: Path, tmp_path: Path, args: list[str], message: str) -> None:
    idx = tmp_path / "idx"
    ReferenceIndex.build(corpus_dir).save(idx)
    filled = [a.format(idx=idx, missing=tmp_path / "missing", corpus=corpus_dir) for a in args]
    proc = ref(*filled)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert message in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_index_with_vectors_reuses_embeddings_in_place(
    needs_vectors: None, corpus_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "vidx"
    first = ref("index", str(corpus_dir), "--out", str(out), "--with-vectors")
    assert first.returncode == 0, first.stderr
    assert "embedding sentence-transformers/all-MiniLM-L6-v2" in first.stdout and "reused 0" in first.stdout
    again = ref("index", str(corpus_dir), "--out", str(out), "--with-vectors")
    assert "embedded 0," in again.stdout
    hybrid = ref("search", str(out), "bake the loaf", "--mode", "hybrid", "--json", "--k", "3")
    assert hybrid.returncode == 0, hybrid.stderr
    hits = json.loads(hybrid.stdout)["hits"]
    assert [h["score_kind"] for h in hits] == ["rrf"] * 3 and hits[0]["doc_path"] == "english/sourdough.md"
    # No model-loading chatter on either stream: callers parse stdout, users read stderr.
    assert hybrid.stderr == ""
