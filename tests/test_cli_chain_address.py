"""A chain's runs, read and made by the CLI from the chain's own config (``--chain`` / ``--gate``),
and the instance a CLI command writes into: real subprocesses, a real Dagster instance.

(tests/orchestration/test_team_project_installed.py does the same against the example project
installed as a team installs it; this module covers each command and each refusal.)"""

from __future__ import annotations

import json
import re
import subprocess

import dagster as dg
import pytest

from kebab_eval_pipeline.foundation.location import run_storage
from kebab_eval_pipeline.orchestration import evaluation_check
from kebab_eval_pipeline.store.runs import RunStore
from tests.conftest import write
from tests.forked_cli import run_cli
from tests.test_cli import cli, cli_env


def open_instance(home: str):
    """The instance at DAGSTER_HOME ``home``, as Dagster opens it."""
    from dagster._core.instance.ref import InstanceRef

    return dg.DagsterInstance.from_ref(InstanceRef.from_dir(home))


CHAIN_CONFIG = "k: [1, 5, 10]\nsystem: {kind: reference, mode: lexical, chunk_size: 300}\n"


@pytest.fixture(scope="module")
def chain_runs(tmp_path_factory):
    """Two runs of chain ``staging`` made by ``kebab-eval run --chain`` (s1: 300-character
    chunks, s2: 200), in an instance of their own; the environment and the chain's config."""
    root = tmp_path_factory.mktemp("chain")
    env = cli_env(root)
    config = write(root / "eval" / "staging.yaml", CHAIN_CONFIG)
    for run_id, extra in (("s1", []), ("s2", ["--chunk-size", "200"])):
        made = cli(env, "run", "--run-id", run_id, "--chain", "staging", "--config", str(config), *extra)
        assert made.returncode == 0, made.stderr
    return env, config


def test_the_cli_makes_a_chains_runs_as_the_chains_own(chain_runs):
    env, _ = chain_runs
    home = env["DAGSTER_HOME"]
    with open_instance(home) as instance:
        assert instance.get_dynamic_partitions("staging__eval_runs") == ["s1", "s2"]
        assert instance.get_dynamic_partitions("eval_runs") == []
        assert {r.job_name for r in instance.get_runs()} == {"staging__evaluation_run"}
        materialized = instance.fetch_materializations(dg.AssetKey(["staging", "run_metrics"]), limit=5)
        assert sorted(r.partition_key for r in materialized.records) == ["s1", "s2"]
    chain_folder = f"{home}/kebab-eval/artifacts/staging"
    assert sorted(m["run_id"] for m in RunStore(chain_folder).runs("run_metrics")) == ["s1", "s2"]
    assert RunStore(chain_folder).read("comparison_report", "s2")[1]["run_a"] == "s1"


def test_every_reading_command_finds_the_chains_runs_from_its_config(chain_runs, tmp_path):
    env, config = chain_runs
    at = ("--chain", "staging", "--config", str(config))
    listed = cli(env, "runs", "list", *at)
    assert re.findall(r"│ (s\d) .*│ (yes|no) ", listed.stdout) == [("s1", "yes"), ("s2", "yes")], (
        listed.stdout
    )
    history = cli(env, "history", "--csv", "--metric", "mrr", *at)
    assert [line.split(",")[0] for line in history.stdout.splitlines()[1:]] == ["s1", "s2"], history.stderr
    compared = cli(env, "compare", "s1", "s2", "--json", *at)
    assert compared.returncode == 0, compared.stderr
    assert json.loads(compared.stdout)["run_b"] == "s2"
    exported = cli(env, "export", "s2", *at)
    assert json.loads(exported.stdout)["run_id"] == "s2"
    bisected = cli(env, "bisect", "mrr", "--format", "json", *at)
    assert [(s["run_a"], s["run_b"]) for s in json.loads(bisected.stdout)["steps"]] == [("s1", "s2")]
    health = cli(env, "golden", "health", "--format", "json", *at)
    assert json.loads(health.stdout)["summary"]["suspect_gold_queue"] is not None, health.stderr
    suggested = cli(env, "golden", "suggest", "s2", "--out", str(tmp_path / "patch.yaml"), *at)
    assert suggested.returncode == 0, suggested.stderr
    pinned = cli(env, "baseline", "set", "s1", *at)
    assert pinned.returncode == 0, pinned.stderr
    shown = cli(env, "baseline", "show", "--json", *at)
    assert [p["run_id"] for p in json.loads(shown.stdout).values()] == ["s1"]
    assert cli(env, "baseline", "clear", *at).returncode == 0
    # the package location's store (the same config without --chain) has none, and says where they are
    lost = cli(env, "history", "--config", str(config))
    assert lost.stdout.strip() == "no stored runs"
    assert "folders under it hold the runs of chains or gates: staging (2 runs)" in lost.stderr
    assert "pass --chain NAME (evaluation_chain) or --gate ASSET (evaluation_check)" in lost.stderr
    # an address of nothing stored says what is stored nearby
    other = cli(env, "history", "--chain", "production", "--config", str(config))
    assert "no runs of chain production are stored" in other.stderr and "staging (2)" in other.stderr


def test_a_gates_runs_are_found_from_its_asset_and_config(instance, tmp_path, monkeypatch):
    """An evaluation_check's runs, stored by the check in a real materialization, read by --gate."""
    monkeypatch.chdir(tmp_path)
    config = write(tmp_path / "gate.yaml", "k: [1, 5, 10]\ngates:\n  mrr: {min: 0.3}\n")

    @dg.asset(key=["team", "search-index"])
    def index() -> None:
        return None

    check = evaluation_check(index, config=config, name="index_quality")
    defs = dg.Definitions(assets=[index], asset_checks=[check])
    result = defs.resolve_implicit_global_asset_job_def().execute_in_process(instance=instance)
    [evaluation] = result.get_asset_check_evaluations()
    run_id = evaluation.metadata["run_id"].value
    assert evaluation.metadata["storage"].value == run_storage(gate=["team", "search-index"])
    assert evaluation.metadata["storage"].value.endswith("/team__search_index")
    (tmp_path / "cli").mkdir()
    env = {**cli_env(tmp_path / "cli"), "DAGSTER_HOME": instance.root_directory}
    listed = cli(env, "runs", "list", "--gate", "team/search-index", "--config", str(config))
    assert re.findall(r"│ (index_quality-\S+) ", listed.stdout) == [run_id], listed.stdout
    history = cli(env, "history", "--csv", "--gate", "team/search-index", "--config", str(config))
    assert history.stdout.splitlines()[1].split(",")[0] == run_id


@pytest.mark.parametrize(
    ("args", "offender"),
    [
        (["history", "--chain", "staging", "--gate", "search_index"], "--gate: give --chain"),
        (["history", "--chain", "9-lives"], "--chain: '9-lives': a chain's name is a letter"),
        (["history", "--gate", "team//index"], "--gate: 'team//index': an asset key"),
        (
            ["run", "--chain", "staging"],
            "--config: give the file evaluation_chain('staging', config=…) names",
        ),
        (["sweep", "x.yaml", "--chain", "bad name"], "--chain: 'bad name'"),
        (["runs", "add", "r1", "--config", "x.yaml"], "--config: the package's own location reads"),
    ],
)
def test_a_bad_address_is_exit_2_naming_it(args, offender, tmp_path):
    proc = cli(cli_env(tmp_path), *args)
    assert proc.returncode == 2, proc.stderr
    assert offender in proc.stderr and "Traceback" not in proc.stderr


FOREIGN_PROJECT = """
import dagster as dg

@dg.asset
def index() -> None:
    return None

defs = dg.Definitions(assets=[index], jobs=[dg.define_asset_job("build_index", [index])])
"""


def dagster_cli(env: dict, cwd, *args: str) -> subprocess.CompletedProcess:
    """``python -m dagster *args`` as its own process, forked ready-imported (:mod:`tests.forked_cli`:
    Dagster's own import is most of a short command's start)."""
    return run_cli(args, env=env, cwd=cwd, timeout=300, module="dagster")


def test_a_workspace_without_this_location_gets_no_runs_of_it(tmp_path):
    """An instance whose runs were launched from another code location (a team's workspace that
    does not load this package) is refused by the commands that would add runs of this package's
    location; once a run of this location was launched there, they run."""
    env = cli_env(tmp_path)
    write(tmp_path / "team_project.py", FOREIGN_PROJECT)
    launched = dagster_cli(env, tmp_path, "job", "launch", "-m", "team_project", "-j", "build_index")
    assert launched.returncode == 0, launched.stderr[-3000:]
    for args in (["run", "--run-id", "x1"], ["runs", "add", "x1"]):
        refused = cli(env, *args)
        assert refused.returncode == 2, refused.stderr
        assert (
            "DAGSTER_HOME is the instance of a Dagster workspace without this package's code location: "
            f"`kebab-eval {' '.join(args[:2]) if args[0] == 'runs' else 'run'}` would add runs"
        ) in refused.stderr
        assert "its runs come from team_project" in refused.stderr and "--chain NAME" in refused.stderr
    with open_instance(env["DAGSTER_HOME"]) as instance:
        assert [r.job_name for r in instance.get_runs()] == ["build_index"]
        assert instance.get_dynamic_partitions("eval_runs") == []
    # the same workspace with this package's location too: once a run of it was launched there
    # (its register_sweep job: a config with a sweep), the CLI adds runs of it
    env["KEBAB_EVAL_CONFIG"] = str(
        write(tmp_path / "sweep.yaml", "sweep: {name: sizes, grid: {system.chunk_size: [200, 400]}}\n")
    )
    ours = dagster_cli(
        env, tmp_path, "job", "launch", "-m", "kebab_eval_pipeline.definitions", "-j", "register_sweep"
    )
    assert ours.returncode == 0, ours.stderr[-3000:]
    added = cli(env, "runs", "add", "x1")
    assert added.returncode == 0, added.stderr
    assert "registered run x1 in eval_runs" in added.stdout
