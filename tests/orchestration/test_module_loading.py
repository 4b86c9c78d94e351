"""The package as Dagster users name it: ``-m kebab_eval_pipeline`` and ``dg`` load the code location,
while ``import kebab_eval_pipeline`` stays free of Dagster (the CLI and ``kebab-eval ref search`` start
without it).

``dagster asset materialize -m kebab_eval_pipeline`` itself is run in tests/test_cli.py, and the UI
tests start the webserver with ``-m kebab_eval_pipeline`` (tests/ui/dagster_ui.py), so each way of
naming the package is exercised by a real process.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.forked_cli import run_cli
from tests.test_cli import cli, cli_env

REPO = Path(__file__).resolve().parents[2]
DG = shutil.which("dg", path=str(Path(sys.executable).parent)) or shutil.which("dg")


def _python(code: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, cwd=REPO
    )


def test_import_is_light_and_defs_is_lazy(tmp_path):
    env = cli_env(tmp_path)
    code = """
import json, sys
import kebab_eval_pipeline as package
before = sorted(m for m in ("dagster", "pandas", "pydantic") if m in sys.modules)
named = "defs" in dir(package)
defs = package.defs
import kebab_eval_pipeline.definitions as definitions
print(json.dumps({
    "before": before,
    "named": named,
    "same": defs is definitions.defs,
    "type": type(defs).__name__,
    "after": "dagster" in sys.modules,
}))
"""
    done = _python(code, env)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    # importing the package imports nothing heavy; the first use of `defs` brings Dagster in
    assert result == {"before": [], "named": True, "same": True, "type": "LazyDefinitions", "after": True}

    missing = _python("import kebab_eval_pipeline as p; p.no_such_thing", env)
    assert missing.returncode == 1
    assert "AttributeError: module 'kebab_eval_pipeline' has no attribute 'no_such_thing'" in missing.stderr


@pytest.mark.skipif(DG is None, reason="dagster-dg-cli (the test extra) is not installed")
def test_dg_checks_and_launches_a_run_partition(tmp_path):
    """``dg`` reads ``[tool.dg]`` in pyproject.toml: the checkout is a dg project whose code location
    is the package's definitions. A partition registered by the CLI is materialised by ``dg launch``,
    and the CLI reads the run back."""
    env = {**cli_env(tmp_path), "KEBAB_EVAL_STORAGE": str(tmp_path / "store")}

    def dg(*args: str) -> subprocess.CompletedProcess:
        # the `dg` console script's module, forked ready-imported
        return run_cli(args, env=env, cwd=REPO, timeout=300, module="dagster_dg_cli.cli")

    checked = dg("check", "defs")
    assert checked.returncode == 0, checked.stderr[-3000:]
    assert "All definitions loaded successfully" in checked.stdout + checked.stderr

    assert cli(env, "runs", "add", "dg-1").returncode == 0
    launched = dg("launch", "--assets", "*", "--partition", "dg-1")
    assert launched.returncode == 0, launched.stderr[-3000:]
    assert "RUN_SUCCESS" in launched.stdout + launched.stderr

    exported = cli(env, "export", "dg-1")
    assert exported.returncode == 0, exported.stderr
    document = json.loads(exported.stdout)
    assert document["run_id"] == "dg-1"
    assert len(document["per_query"]) == 105  # the demo golden set, every query one row
    assert (tmp_path / "store").is_dir()

    # the same chain as `kebab-eval run`: the same numbers
    assert cli(env, "run", "--run-id", "cli-1").returncode == 0
    by_cli = json.loads(cli(env, "export", "cli-1").stdout)
    for metric in ("mrr", "hit@5", "ndcg@10", "refusal_correctness"):
        assert document["metrics"][metric] == by_cli["metrics"][metric], metric
    assert document["versions"] == by_cli["versions"]
