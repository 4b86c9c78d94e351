"""`kebab-eval golden health` as a user runs it: real subprocesses, exit codes 1 (an answerable
query without support), 0 (with unsupported_answerable: warn) and 2 (a bad golden_health: value)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import clean_cli_env
from tests.golden_health.health_sets import write_config, write_corpus, write_set
from tests.test_cli import cli, no_traceback


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("health-cli")
    corpus, golden = write_corpus(folder), write_set(folder)
    return folder, golden, corpus, clean_cli_env(tmp_path_factory, "health-cli")


def test_text_report_exits_1_on_answerable_queries_without_support(files):
    folder, golden, corpus, env = files
    proc = cli(env, "golden", "health", "--config", str(write_config(folder, golden, corpus)))
    no_traceback(proc)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("golden set health-demo sha256 ") and lines[0].endswith(": 15 queries")
    assert [" ".join(line.split()) for line in lines[1:7]] == [
        "fail unsupported_answerable: 2 — answerable queries with no relevant support",
        "warn stale_supports: 2 — supports the index no longer holds",
        "warn near_duplicates: 4 — duplicate question pairs",
        "warn leakage: 1 — questions quoting the corpus verbatim",
        "warn small_slices: 3 — slices too small to conclude on",
        "not checked suspect_gold_queue: – — suspect-gold hits of the latest comparison",
    ]
    assert "  salt-a ~ salt-c: the same question after normalisation" in lines
    assert "  stale [Tempeh > Black spots]: supports[0].heading_path: no section with this heading path" in (
        proc.stdout
    )
    assert "note: suspect-gold queue not checked: no stored comparison of a run on this golden set" in lines


def test_json_report_and_warn_only(files):
    folder, golden, corpus, env = files
    config = write_config(folder, golden, corpus, extra="  unsupported_answerable: warn\n")
    proc = cli(env, "golden", "health", "--config", str(config), "--format", "json")
    no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["golden"]["name"] == "health-demo" and doc["golden"]["sha256"] == _sha256(golden)
    assert doc["checks"] == {
        "unsupported_answerable": "warn",
        "stale_supports": "warn",
        "near_duplicates": "warn",
        "leakage": "warn",
        "small_slices": "warn",
        "suspect_gold_queue": "not checked",
    }
    assert doc["blocking_failure"] is False
    assert doc["summary"]["near_duplicates"] == 4 and doc["summary"]["suspect_gold_queue"] is None
    leak = [f for f in doc["findings"] if f["kind"] == "leakage"]
    assert leak == [
        {
            "kind": "leakage",
            "query_id": "leak",
            "other_query_id": None,
            "document": "vegetables/sauerkraut.md",
            "slice": None,
            "detail": "57% of its word 4-grams are in the document; "
            "quotes 7 words: “weigh the cabbage after removing the core”",
            "score": 0.5714,
        }
    ]
    assert len(doc["findings"]) == 12


def test_bad_threshold_exits_2_naming_the_key(files):
    folder, golden, corpus, env = files
    config = write_config(folder, golden, corpus, extra="  near_duplicate_jaccard: 1.5\n")
    proc = cli(env, "golden", "health", "--config", str(config))
    no_traceback(proc)
    assert proc.returncode == 2
    assert "golden_health.near_duplicate_jaccard" in proc.stderr and "less than or equal to 1" in proc.stderr
    proc = cli(env, "golden", "health", "--config", str(config), "--format", "yaml")
    assert proc.returncode == 2 and "'yaml': use text or json" in proc.stderr


def _sha256(path) -> str:
    from kebab_eval_pipeline.golden.load import golden_content_sha256

    return golden_content_sha256(path)
