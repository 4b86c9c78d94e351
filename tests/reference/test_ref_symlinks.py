"""Symlinks in a corpus (issue 22 item 11): never followed out of the corpus root, followed once inside it,
loops end, and every link left out is named in the index's coverage and on the CLI's stderr."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kebab_eval_pipeline.reference.cache import cached_index
from kebab_eval_pipeline.reference.index import ReferenceIndex
from kebab_eval_pipeline.reference.ingest import corpus_files, scan_corpus
from tests.forked_cli import run_cli

CLI = [sys.executable, "-m", "kebab_eval_pipeline.cli"]
SECRET = "password=hunter2secret"


@pytest.fixture
def hostile_corpus(tmp_path: Path) -> Path:
    """A corpus with links out (file and folder), links in (file and folder), a loop and a dangling link.

    The outside tree holds a secret under names a corpus would read (``.md``, ``.txt``).
    """
    outside = tmp_path / "outside"
    (outside / "private").mkdir(parents=True)
    (outside / "creds.txt").write_text(f"{SECRET}\n", encoding="utf-8")
    (outside / "private" / "keys.md").write_text(f"# Keys\n\n{SECRET} in a folder\n", encoding="utf-8")
    corpus = tmp_path / "corpus"
    (corpus / "docs" / "deep").mkdir(parents=True)
    (corpus / "docs" / "guide.md").write_text("# Guide\n\nBrine the cabbage overnight.\n", encoding="utf-8")
    (corpus / "docs" / "deep" / "notes.md").write_text("# Notes\n\nKeep the crock cool.\n", encoding="utf-8")
    (corpus / "leak.txt").symlink_to(outside / "creds.txt")  # file link out
    (corpus / "vault").symlink_to(outside / "private")  # folder link out
    (corpus / "hostname.txt").symlink_to("/etc/hostname")  # absolute link out
    (corpus / "alias.md").symlink_to(corpus / "docs" / "guide.md")  # file link in: a duplicate
    (corpus / "mirror").symlink_to("docs")  # folder link in: a duplicate of docs/
    (corpus / "docs" / "deep" / "up").symlink_to("../..")  # a loop back to the root
    (corpus / "self").symlink_to(".")  # a loop to itself
    (corpus / "gone.md").symlink_to(corpus / "missing.md")  # dangling
    return corpus


EXPECTED_SKIPPED = {
    "alias.md": "duplicate of docs/guide.md",
    "docs/deep/up": "loop",
    "gone.md": "broken",
    "hostname.txt": "outside the corpus",
    "leak.txt": "outside the corpus",
    "mirror": "duplicate of docs",
    "self": "loop",
    "vault": "outside the corpus",
}


def test_scan_follows_links_only_inside_and_names_the_rest(hostile_corpus: Path) -> None:
    scan = scan_corpus(hostile_corpus)
    assert [rel for rel, _ in scan.files] == ["docs/deep/notes.md", "docs/guide.md"]
    assert {s.path: s.reason for s in scan.skipped_symlinks} == EXPECTED_SKIPPED
    assert [s.path for s in scan.skipped_symlinks] == sorted(EXPECTED_SKIPPED)
    assert corpus_files(hostile_corpus) == scan.files


def test_a_link_into_an_unwalked_folder_is_read_once_under_the_link(tmp_path: Path) -> None:
    # The target is inside the root but hidden: the plain walk never sees it, the link does, once.
    corpus = tmp_path / "corpus"
    (corpus / ".store").mkdir(parents=True)
    (corpus / ".store" / "a.md").write_text("# A\n\nalpha\n", encoding="utf-8")
    (corpus / "b-link").symlink_to(".store")
    (corpus / "a-link").symlink_to(".store")
    scan = scan_corpus(corpus)
    assert [rel for rel, _ in scan.files] == ["a-link/a.md"]
    assert [(s.path, s.reason) for s in scan.skipped_symlinks] == [("b-link", "duplicate of .store")]


def test_a_corpus_root_that_is_itself_a_link_still_works(hostile_corpus: Path, tmp_path: Path) -> None:
    via = tmp_path / "via"
    via.symlink_to(hostile_corpus)
    assert [rel for rel, _ in corpus_files(via)] == ["docs/deep/notes.md", "docs/guide.md"]


def _run(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DAGSTER_")}
    proc = run_cli(args, env=env, timeout=120)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def test_ref_index_and_search_never_return_outside_text(hostile_corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "idx"
    built = _run("ref", "index", str(hostile_corpus), "--out", str(out))
    assert built.returncode == 0, built.stderr
    assert "indexed 2 documents" in built.stdout and "8 symlinks skipped" in built.stdout
    for path, reason in EXPECTED_SKIPPED.items():
        assert f"warning: symlink not followed: {path} ({reason})" in built.stderr
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert {d["doc_id"] for d in manifest["documents"]} == {"docs/guide.md", "docs/deep/notes.md"}
    assert manifest["skipped_symlinks"] == [
        {"path": p, "reason": r} for p, r in sorted(EXPECTED_SKIPPED.items())
    ]
    assert SECRET not in (out / "chunks.jsonl").read_text(encoding="utf-8")
    hostname = (
        Path("/etc/hostname").read_text(encoding="utf-8").strip() if Path("/etc/hostname").exists() else ""
    )

    for query in ("password hunter2secret", "keys folder", hostname or "hostname"):
        searched = _run("ref", "search", str(out), query, "--json")
        assert searched.returncode == 0, searched.stderr
        hits = json.loads(searched.stdout)["hits"]
        assert SECRET not in searched.stdout
        assert {h["doc_path"] for h in hits} <= {"docs/guide.md", "docs/deep/notes.md"}
    # The coverage report (what the run's index_skipped_symlinks metric reads) counts them.
    index = ReferenceIndex.load(out)
    assert index.coverage()["skipped_symlinks"] == len(EXPECTED_SKIPPED)


def test_the_run_cache_key_sees_a_new_outside_link(hostile_corpus: Path, tmp_path: Path) -> None:
    # The cached index of a run's reference system carries the same list, kept current.
    first, _ = cached_index(hostile_corpus, cache_dir=tmp_path / "cache")
    assert len(first.skipped_symlinks) == len(EXPECTED_SKIPPED)
    (hostile_corpus / "docs" / "more.md").symlink_to(tmp_path / "outside" / "private" / "keys.md")
    second, hit = cached_index(hostile_corpus, cache_dir=tmp_path / "cache")
    assert not hit
    assert {"path": "docs/more.md", "reason": "outside the corpus"} in second.skipped_symlinks
    assert all(SECRET not in c.text for c in second.chunks)
