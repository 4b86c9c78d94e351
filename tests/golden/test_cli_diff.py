"""`kebab-eval golden diff A B` as a user runs it: real subprocesses, on golden files and on the
golden sets of runs stored by a real `kebab-eval run` (the documented commands, as written), then
`compare` of two runs on the two versions; exit 0 whatever the difference, 2 on bad input."""

from __future__ import annotations

import json
import shlex

import pytest
import yaml

from tests import docs_pages
from tests.conftest import clean_cli_env, demo_golden_subset, write
from tests.test_cli import cli, no_traceback

N_V1 = 10


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A folder holding golden-v1.yaml (the demo's first 10 queries) and golden-v2.yaml (one
    question reworded, one query's supports moved, one query added), and the CLI's environment."""
    folder = tmp_path_factory.mktemp("golden-diff")
    v1 = demo_golden_subset(folder / "golden-v1.yaml", slice(0, N_V1 + 1))
    doc = yaml.safe_load(v1.read_text(encoding="utf-8"))
    added = doc["queries"].pop()  # v1: the first 10; v2 adds the 11th
    write(folder / "golden-v1.yaml", yaml.safe_dump(doc, allow_unicode=True, sort_keys=False))
    queries = doc["queries"]
    ids = {
        "reworded": queries[4]["id"],
        "moved": queries[1]["id"],
        "added": added["id"],
    }
    queries[4]["query"] += " Please answer briefly."
    queries[1]["supports"] = queries[2]["supports"]  # its gold is now another section
    queries.append(added)
    write(folder / "golden-v2.yaml", yaml.safe_dump(doc, allow_unicode=True, sort_keys=False))
    return folder, ids, clean_cli_env(tmp_path_factory, "golden-diff")


@pytest.fixture(scope="module")
def documented(folder):
    """The golden-sets guide's block, run line by line in the folder (each line's process)."""
    path, _, env = folder
    block = docs_pages.snippet("bash", "kebab-eval golden diff golden-v1.yaml golden-v2.yaml")
    procs = []
    for line in block.text.splitlines():
        args = shlex.split(line, comments=True)
        assert args[0] == "kebab-eval", line
        procs.append(cli(env, *args[1:], cwd=path))
    return procs


def test_the_documented_commands_run_as_written(documented, folder):
    _, ids, _ = folder
    _, files, stored = documented
    for proc in documented:
        no_traceback(proc)
        assert proc.returncode == 0, proc.stderr
    md = files.stdout
    assert md.startswith("# Golden-set diff: `golden-v1.yaml` → `golden-v2.yaml`\n")
    table = [line for line in md.splitlines() if line.startswith("| ") and not line.startswith("| change")]
    assert table == [
        "| added | 1 |",
        "| removed | 0 |",
        "| question changed | 1 |",
        "| supports changed | 1 |",
        "| other gold changed | 0 |",
        f"| unchanged | {N_V1 - 2} |",
    ]
    assert f"- added (1): {ids['added']}" in md and f"- question changed (1): {ids['reworded']}" in md
    assert f"- supports changed (1): {ids['moved']}" in md
    doc = json.loads(stored.stdout)  # the stored run's golden set (v1) against the file v2
    assert doc["a"]["source"] == "gold-v1" and doc["a"]["kind"] == "run" and doc["a"]["queries"] == N_V1
    assert doc["b"] == {
        "source": "golden-v2.yaml",
        "kind": "file",
        "name": "demo-fermentation",
        "sha256": doc["b"]["sha256"],
        "queries": N_V1 + 1,
    }
    assert doc["identical"] is False
    assert doc["counts"] == {
        "added": 1,
        "removed": 0,
        "question_changed": 1,
        "supports_changed": 1,
        "other_gold_changed": 0,
        "unchanged": N_V1 - 2,
    }
    assert (doc["added"], doc["removed"]) == ([ids["added"]], [])
    assert (doc["question_changed"], doc["supports_changed"]) == ([ids["reworded"]], [ids["moved"]])


def test_two_stored_runs_and_their_comparison(documented, folder):
    path, ids, env = folder
    ran = cli(env, "run", "--run-id", "gold-v2", "--golden", "golden-v2.yaml", "--baseline", "none", cwd=path)
    assert ran.returncode == 0, ran.stderr
    by_runs = cli(env, "golden", "diff", "gold-v1", "gold-v2", "--format", "json", cwd=path)
    by_files = cli(env, "golden", "diff", "golden-v1.yaml", "golden-v2.yaml", "--format", "json", cwd=path)
    assert by_runs.returncode == by_files.returncode == 0, by_runs.stderr + by_files.stderr
    runs_doc, files_doc = json.loads(by_runs.stdout), json.loads(by_files.stdout)
    assert runs_doc["a"]["kind"] == runs_doc["b"]["kind"] == "run"
    assert runs_doc["a"]["sha256"] == files_doc["a"]["sha256"]  # a run keeps its file's content hash
    assert {k: v for k, v in runs_doc.items() if k not in ("a", "b")} == {
        k: v for k, v in files_doc.items() if k not in ("a", "b")
    }
    same = cli(env, "golden", "diff", "gold-v1", "golden-v1.yaml", cwd=path)
    assert same.returncode == 0 and f"No difference: the same {N_V1} queries" in same.stdout

    compared = cli(env, "compare", "gold-v1", "gold-v2", "--json", cwd=path)
    assert compared.returncode == 0, compared.stderr
    report = json.loads(compared.stdout)
    restriction = report["golden_restriction"]
    assert restriction["n_compared"] == N_V1 - 2 and restriction["n_dropped"] == 3
    assert restriction["dropped"] == {
        "added": 1,
        "removed": 0,
        "question_changed": 1,
        "supports_changed": 1,
        "other_gold_changed": 0,
    }
    # what the reference system indexed is a number of the whole run: left as each run measured it
    assert restriction["not_restricted"] and all(
        m.startswith("index_") for m in restriction["not_restricted"]
    )
    verdicts = {q["query_id"]: q["verdict"] for q in report["per_query"]}
    assert verdicts[ids["added"]] == "only_b"
    assert verdicts[ids["reworded"]] == verdicts[ids["moved"]] == "gold_changed"
    mrr = next(r for r in report["per_metric"] if r["metric"] == "mrr")
    assert mrr["n_paired"] == N_V1 - 2 - sum(1 for q in report["per_query"] if q["verdict"] == "not_scored")
    # the same system on the same corpus: over the unchanged queries no quality metric moved
    rows = {r["metric"]: r for r in report["per_metric"]}
    assert [rows[m]["delta"] for m in ("mrr", "hit@1", "hit@5", "recall@5", "ndcg@10")] == [0.0] * 5
    assert rows["n_queries"]["a"] == rows["n_queries"]["b"] == N_V1 - 2
    line = next(w for w in report["warnings"] if w.startswith("golden sets differ"))
    assert line.endswith(f"compared over the {N_V1 - 2} unchanged queries")


def test_bad_input_exits_2_naming_the_argument(folder):
    path, _, env = folder
    bad = write(path / "broken.yaml", "schema_version: '1'\nqueries:\n  - {id: x}\n")
    cases = [
        (["golden-v1.yaml", "missing.yaml"], ["missing.yaml: no such file, and no stored run of that id"]),
        (["golden-v1.yaml", "../elsewhere/x.yaml"], ["../elsewhere/x.yaml: no such file, and not a run id"]),
        (["golden-v1.yaml", str(bad)], [str(bad), "query 'x'", "field 'query'"]),
        (["golden-v1.yaml", "golden-v2.yaml", "--format", "html"], ["--format: 'html': use md or json"]),
    ]
    for args, expected in cases:
        proc = cli(env, "golden", "diff", *args, cwd=path)
        no_traceback(proc)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert proc.stdout == ""
        flat = " ".join(proc.stderr.split())
        assert all(e in flat for e in expected), (args, proc.stderr)
