"""The kebab-docs example (docs/examples/kebab-docs): its golden set against its bundled corpus.

The golden set anchors every support by document path + heading path (+ a verbatim snippet),
so these tests catch a golden set that went stale against the corpus and a run config that no
longer runs. The corpus is bundled (``corpus/``: kebab's 45 documentation files, copied
unchanged), so they run on any clone; where the project workspace's copy exists, the bundled
files are checked to be identical to it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.conftest import REPO, SHARED_CORPUS

EXAMPLE = REPO / "docs" / "examples" / "kebab-docs"
GOLDEN = EXAMPLE / "golden.yaml"
LEXICAL = EXAMPLE / "lexical.yaml"
CORPUS = EXAMPLE / "corpus"
CLI = [sys.executable, "-m", "kebab_eval_pipeline.cli"]


@pytest.fixture(scope="module")
def index_cache(tmp_path_factory):
    """One reference-index cache for the module: the corpus is indexed once, not per test."""
    return tmp_path_factory.mktemp("index_cache")


@pytest.fixture
def env(tmp_path, index_cache):
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("")
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("KEBAB_EVAL_", "DAGSTER_"))}
    environment["DAGSTER_HOME"] = str(home)
    environment["KEBAB_EVAL_INDEX_CACHE"] = str(index_cache)
    return environment


def cli(env, *args) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], env=env, cwd=REPO, capture_output=True, text=True, timeout=300)


def test_golden_set_resolves_against_the_corpus(env):
    proc = cli(env, "golden", "validate", str(GOLDEN), "--config", str(LEXICAL))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ok: 40 queries"), proc.stdout
    assert "Traceback" not in proc.stderr


def test_lexical_example_runs_end_to_end(env):
    proc = cli(env, "run", "--config", str(LEXICAL), "--run-id", "kebab-docs-lexical", "--baseline", "none")
    assert proc.returncode in (0, 1), proc.stderr[-3000:]  # 1 = a gate failed; still a complete run
    assert "golden set is stale" not in proc.stderr
    found = re.search(r"\bmrr\b\W+(\d+(?:\.\d+)?)", proc.stdout)
    assert found, proc.stdout
    assert 0.0 < float(found.group(1)) <= 1.0


def test_bundled_corpus_is_kebabs_documentation_unchanged():
    cited = set(re.findall(r"^\s*(?:- )?rel_path: (\S+)$", GOLDEN.read_text(encoding="utf-8"), re.M))
    bundled = {p.relative_to(CORPUS).as_posix() for p in CORPUS.rglob("*") if p.is_file()}
    assert len(bundled) == 45
    assert cited <= bundled, sorted(cited - bundled)
    if not SHARED_CORPUS.is_dir():
        pytest.skip(f"no full kebab-docs corpus at {SHARED_CORPUS} to compare with (project workspace only)")
    shared = {p.relative_to(SHARED_CORPUS).as_posix() for p in SHARED_CORPUS.rglob("*") if p.is_file()}
    assert bundled == shared
    changed = [r for r in sorted(bundled) if (CORPUS / r).read_bytes() != (SHARED_CORPUS / r).read_bytes()]
    assert not changed
