"""The kebab-docs example (docs/examples/kebab-docs): its golden sets (golden.yaml and the
held-out golden-holdout.yaml) against its bundled corpus.

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
import yaml

from tests.conftest import REPO, SHARED_CORPUS
from tests.forked_cli import run_cli

EXAMPLE = REPO / "docs" / "examples" / "kebab-docs"
GOLDEN = EXAMPLE / "golden.yaml"
HOLDOUT = EXAMPLE / "golden-holdout.yaml"
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
    return run_cli(args, env=env, cwd=REPO, timeout=300)


def test_golden_set_resolves_against_the_corpus(env):
    proc = cli(env, "golden", "validate", str(GOLDEN), "--config", str(LEXICAL))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ok: 40 queries"), proc.stdout
    assert "Traceback" not in proc.stderr


def test_holdout_golden_set_resolves_against_the_corpus(env):
    proc = cli(env, "golden", "validate", str(HOLDOUT), "--config", str(LEXICAL))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ok: 60 queries (48 answerable, 12 unanswerable"), proc.stdout
    assert "Traceback" not in proc.stderr


def test_holdout_golden_set_shape():
    """The held-out set keeps the shape it was written to: 30 Korean + 30 English questions,
    6 unanswerable per language, answerable ones spread over 20+ documents, no question
    copied from golden.yaml, and every snippet a verbatim quote of the document it cites."""
    holdout = yaml.safe_load(HOLDOUT.read_text(encoding="utf-8"))
    assert holdout["name"] == "kebab-docs-holdout"
    queries = holdout["queries"]
    assert len(queries) == 60
    assert len({q["id"] for q in queries}) == 60
    for lang in ("ko", "en"):
        of_lang = [q for q in queries if q["lang"] == lang]
        assert len(of_lang) == 30, lang
        assert all(q["id"].startswith(f"ho-{lang}-") for q in of_lang), lang
        assert sum(q.get("answerable", True) is False for q in of_lang) == 6, lang
    unanswerable = [q for q in queries if q.get("answerable", True) is False]
    assert len(unanswerable) == 12
    assert not any(q.get("supports") for q in unanswerable)
    answerable = [q for q in queries if q.get("answerable", True)]
    assert all(q.get("supports") for q in answerable)
    assert {q["category"] for q in answerable} <= {"factual", "multi_hop"}
    assert sum(q["category"] == "multi_hop" for q in answerable) >= 4
    cited = {s["rel_path"] for q in answerable for s in q["supports"]}
    assert len(cited) >= 20, sorted(cited)
    seen = {q["query"].casefold() for q in yaml.safe_load(GOLDEN.read_text(encoding="utf-8"))["queries"]}
    assert not [q["id"] for q in queries if q["query"].casefold() in seen]

    def collapse(text: str) -> str:
        return " ".join(text.split())

    for q in answerable:
        for s in q["supports"]:
            document = collapse((CORPUS / s["rel_path"]).read_text(encoding="utf-8"))
            assert collapse(s["snippet"]) in document, (q["id"], s["rel_path"], s["snippet"])


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
