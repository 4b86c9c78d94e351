"""A search-only system's CI outputs list no answer gate: the default WFGY gates bound answers it
cannot give, so they are left out — not "⏭️ skipped" in every PR comment — and the outputs say
what was not measured instead.

Two search-only systems, each `kebab-eval run --pr-comment --junit` in a real subprocess:

* ``kind: python`` naming an object without ``ask`` (``tests/systems/python_systems.py``): the kind
  may answer, so only the built system tells — the gates are left out when it is built;
* ``kind: command`` without ``ask_argv``: its kind's declaration tells when the config loads.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.conftest import clean_cli_env, echo_golden, write
from tests.test_cli import cli, no_traceback

junitparser = pytest.importorskip("junitparser")

SYSTEMS = Path(__file__).parents[1] / "systems"
ANSWER_GATES = ("answer_precision", "chr", "under_refusal_rate", "over_refusal_rate")


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    return clean_cli_env(tmp_path_factory, "search-only")


def systems(tmp_path: Path) -> dict[str, str]:
    script = write(
        tmp_path / "search.py",
        "import json, sys\n"
        "q = sys.argv[1]\n"
        "print(json.dumps({'hits': [{'rank': i, 'chunk_id': f'{q}-c{i}'} for i in (1, 2)]}))\n",
    )
    return {
        "python": f"system: {{kind: python, callable: 'python_systems:SEARCH_ONLY', path: ['{SYSTEMS}']}}\n",
        "command": f"system: {{kind: command, search_argv: ['{sys.executable}', '{script}', '{{query}}']}}\n",
    }


@pytest.mark.parametrize("kind", ["python", "command"])
def test_a_search_only_systems_pr_comment_lists_no_answer_gate(kind, env, tmp_path):
    golden = echo_golden(tmp_path / "golden.yaml", "echo", ["alpha", "beta", "gamma"])
    config = write(
        tmp_path / "eval.yaml",
        f"golden: {golden}\n{systems(tmp_path)[kind]}baseline: none\ngates:\n  mrr: {{min: 0.5}}\n",
    )
    comment, junit = tmp_path / "comment.md", tmp_path / "junit.xml"
    proc = cli(
        env, "run", "--config", str(config), "--run-id", f"search-{kind}",
        "--pr-comment", str(comment), "--junit", str(junit),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    no_traceback(proc)
    text = comment.read_text(encoding="utf-8")
    for metric in ANSWER_GATES:
        assert f"gate_{metric}" not in text and f"{metric} " not in text.split("> not measured")[0], metric
        assert f"gate_{metric}" not in proc.stdout, metric
    assert "2 checks (1 gate + system health): 2 passed" in text and "skipped" not in text
    # …and what the run could not measure is said, with the reason
    reason = (
        "the python system python_systems:SEARCH_ONLY has no ask method"
        if kind == "python"
        else "the command system has no ask_argv"
    )
    assert f"> not measured ({reason}): refusal_correctness, under_refusal_rate, over_refusal_rate" in text
    suite = next(iter(junitparser.JUnitXml.fromfile(str(junit))))
    assert [case.name for case in suite] == ["mrr min 0.5", "system_health max_error_rate 0.1"]
    assert suite.skipped == 0
    properties = {p.name: p.value for p in suite.properties()}
    assert properties["not_measured.chr"] == reason
