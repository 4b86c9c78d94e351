"""A new asset of the chain is two edits: its declaration in ``chain/artifacts.py`` (its artifact
type and its :class:`~kebab_eval_pipeline.chain.artifacts.Stage`) and its definition in
``orchestration/assets.py``. Every list of the chain's assets — the job's selection, the store's
artifact types, the stored-run assets, the asset checks, the CLI's interrupt note, ``rejudge`` —
is derived from the declaration: a copy of the package with exactly those two files edited runs
the demo chain with the new asset, stored like the others."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import kebab_eval_pipeline
from tests.forked_cli import run_cli

PACKAGE = Path(kebab_eval_pipeline.__file__).parent

ARTIFACT = '''

@dataclass
class QueryLengthsArtifact:
    """Each golden query's length in characters (a stage added by tests/orchestration/test_new_stage.py)."""

    lengths: pd.DataFrame
    info: dict[str, Any]

    def to_tables(self) -> tuple[Tables, dict[str, Any]]:
        return {"lengths": self.lengths}, self.info

    @classmethod
    def from_tables(cls, tables: Tables, info: dict[str, Any]) -> QueryLengthsArtifact:
        return cls(tables["lengths"], info)


@dataclass(frozen=True)
class Stage:'''

ASSET = """
    @_chain_asset(names, "query_lengths", storage_keys, deps=_chain_deps(names, "golden_set"))
    def query_lengths(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        from kebab_eval_pipeline.chain.artifacts import QueryLengthsArtifact

        golden_set: GoldenArtifact = read_chain_artifact(context, "golden_set", names)
        queries = golden_set.queries
        lengths = pd.DataFrame({"query_id": queries["query_id"], "chars": queries["query"].str.len()})
        art = QueryLengthsArtifact(lengths, {"queries": len(lengths)})
        return publish_chain_artifact(context, "query_lengths", art, {"queries": len(lengths)}, names)

    return ChainAssets("""

PROBE = """
import json, sys
import dagster as dg
from kebab_eval_pipeline.chain.artifacts import ARTIFACT_TYPES, CHAIN_ASSETS, JUDGED_ASSETS
from kebab_eval_pipeline.definitions import build_definitions
from kebab_eval_pipeline.orchestration.checks import gate_checks
from kebab_eval_pipeline.orchestration.assets import DEFAULT_CHAIN
from kebab_eval_pipeline.orchestration.io import READ_ONCE
from kebab_eval_pipeline.store.runs import RUN_ASSETS

defs = build_definitions(None)
job = defs.resolve_job_def("evaluation_run")
print(json.dumps({
    "chain": list(CHAIN_ASSETS),
    "judged": list(JUDGED_ASSETS),
    "types": sorted(ARTIFACT_TYPES),
    "stored_run": list(RUN_ASSETS),
    "read_once": list(READ_ONCE),
    "eval_assets": [a.key.path[-1] for a in DEFAULT_CHAIN.eval_assets],
    "job": sorted(k.path[-1] for k in job.asset_layer.selected_asset_keys),
    "checked": sorted({k.asset_key.path[-1] for c in gate_checks(defs.resources["eval_settings"].load())
                       for k in c.check_keys}),
}))
"""


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, f"{path.name}: the anchor {old!r} is not there once"
    path.write_text(text.replace(old, new), encoding="utf-8")


def test_a_new_chain_asset_is_its_declaration_and_its_definition(tmp_path) -> None:
    copy = tmp_path / "src" / "kebab_eval_pipeline"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    artifacts, assets = copy / "chain" / "artifacts.py", copy / "orchestration" / "assets.py"
    _edit(artifacts, "\n\n@dataclass(frozen=True)\nclass Stage:", ARTIFACT)
    _edit(
        artifacts,
        '    Stage("comparison_report", ComparisonArtifact, "comparison", checks=("regression_gates",)),\n',
        '    Stage("comparison_report", ComparisonArtifact, "comparison", checks=("regression_gates",)),\n'
        '    Stage("query_lengths", QueryLengthsArtifact, "lengths", stored_run=True),\n',
    )
    _edit(assets, "\n    return ChainAssets(", ASSET)
    _edit(
        assets,
        "        comparison_report=comparison_report,\n",
        "        comparison_report=comparison_report,\n        query_lengths=query_lengths,\n",
    )
    _edit(
        assets,
        "    comparison_report: dg.AssetsDefinition\n",
        "    comparison_report: dg.AssetsDefinition\n    query_lengths: dg.AssetsDefinition\n",
    )
    changed = sorted(
        str(p.relative_to(copy))
        for p in copy.rglob("*.py")
        if p.read_bytes() != (PACKAGE / p.relative_to(copy)).read_bytes()
    )
    assert changed == ["chain/artifacts.py", "orchestration/assets.py"]

    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n", encoding="utf-8")
    env = {
        **os.environ,
        "PYTHONPATH": str(copy.parent),
        "DAGSTER_HOME": str(home),
        "KEBAB_EVAL_STORAGE": str(tmp_path / "runs"),
    }
    env.pop("KEBAB_EVAL_CONFIG", None)
    probe = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert probe.returncode == 0, probe.stderr
    lists = json.loads(probe.stdout.splitlines()[-1])
    assert lists["chain"][-1] == lists["judged"][-1] == lists["eval_assets"][-1] == "query_lengths"
    assert "query_lengths" in lists["types"] and "query_lengths" in lists["job"]
    assert lists["stored_run"] == [
        "golden_set",
        "retrieval_results",
        "query_scores",
        "run_metrics",
        "query_lengths",
    ]
    assert (
        lists["read_once"] == ["golden_set", "retrieval_results"] and "query_lengths" not in lists["checked"]
    )

    cwd = tmp_path / "work"
    cwd.mkdir()
    run = run_cli(["run", "--run-id", "r1"], env=env, cwd=cwd)  # the copy: its $PYTHONPATH
    assert run.returncode == 0, run.stdout + run.stderr
    from kebab_eval_pipeline.store.artifact_store import ArtifactStore

    tables, info = ArtifactStore(tmp_path / "runs").read("query_lengths", "r1")
    assert info == {"queries": 105} and len(tables["lengths"]) == 105  # the demo golden set
    assert (tables["lengths"]["chars"] > 0).all()
