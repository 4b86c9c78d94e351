"""The team project (docs/examples/dagster-project) as a team has it: its own folder and package,
its own ``definitions.py``, and this package installed as a dependency — not this checkout on
``sys.path``.

A new environment gets this package as a built wheel and the team project with ``pip install -e``
(its ``pyproject.toml`` names kebab-eval-pipeline as a dependency; the other libraries come from
this interpreter's site-packages through a ``.pth`` line, so nothing is downloaded). From the
project's folder, with a ``DAGSTER_HOME`` of its own and no ``KEBAB_EVAL_STORAGE``:

- Dagster's own CLI materializes ``search_index`` (its ``index_quality`` check evaluates the index)
  and runs the ``staging`` chain's job; ``kebab-eval run --chain staging`` makes a second run;
- ``kebab-eval`` finds every one of those runs from the chain's or the check's own config
  (``--chain staging --config eval/staging.yaml``, ``--gate search_index --config eval/gate.yaml``)
  and reads what the chain's assets read (``golden health`` finds the suspects
  ``staging/golden_health`` found); without the address it names where the runs are;
- the documented ``regression_bisect`` launchpad snippet, launched by ``dagster asset materialize``:
  under the package location's op name it is refused naming the chain's, under the chain's it
  materializes what ``kebab-eval bisect --chain staging`` prints;
- once the instance holds a run launched from the team's code location, ``kebab-eval run`` and
  ``sweep`` without ``--chain`` refuse to add runs of a location that workspace does not have;
  ``sweep --chain staging`` runs the variant as a run of the staging chain.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
import pytest

from tests import docs_pages
from tests.conftest import REPO
from tests.dagster_dev import loaded_locations
from tests.forked_cli import run_cli
from tests.systems.adapters.conftest import free_port

PROJECT = REPO / "docs" / "examples" / "dagster-project"
IN_PROCESS = {"execution": {"config": {"in_process": {}}}}  # Dagster's default executor, one process


@pytest.fixture(scope="module")
def team(tmp_path_factory) -> dict:
    """The environment (venv, project folder, process environment) of an installed team project."""
    root = tmp_path_factory.mktemp("team")
    # this package, built as a wheel from a copy of its sources (the build writes beside them)
    source = root / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    shutil.copytree(
        REPO / "kebab_eval_pipeline",
        source / "kebab_eval_pipeline",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    offline = {
        **{
            k: v for k, v in os.environ.items() if not k.startswith(("PYTHONPATH", "KEBAB_EVAL_", "DAGSTER_"))
        },
        "PIP_NO_INDEX": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    wheels = root / "wheels"
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", wheels, source],
        env=offline, cwd=root, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-3000:]
    [wheel] = wheels.glob("kebab_eval_pipeline-*.whl")
    # a new venv seeing this interpreter's libraries after its own site-packages (a venv made from
    # a venv's python would see the base Python's instead)
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()
    )  # fmt: skip
    outer = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    (purelib / "_outer_site_packages.pth").write_text("\n".join(outer) + "\n")
    # --ignore-installed: into the new venv, never replacing this interpreter's own (editable) copy
    pip = [python, "-m", "pip", "install", "--no-build-isolation", "-q"]
    installed = subprocess.run(
        [*pip, "--no-deps", "--ignore-installed", wheel],
        env=offline,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    project = root / "project"
    shutil.copytree(PROJECT, project, ignore=shutil.ignore_patterns("__pycache__", ".index", ".dagster_home"))
    # the team's own install: its dependencies resolved (kebab-eval-pipeline: the wheel above)
    team_install = subprocess.run(
        [*pip, "-e", project], env=offline, capture_output=True, text=True, timeout=600
    )
    assert team_install.returncode == 0, team_install.stderr[-3000:]
    home = root / "dagster_home"
    home.mkdir()
    env = {
        **{k: v for k, v in offline.items() if not k.startswith("PIP_")},
        "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
        "DAGSTER_HOME": str(home),
        "TEAM_INDEX_ROOT": str(root / "index"),
        "VIRTUAL_ENV": str(venv),
    }
    if os.environ.get("KEBAB_EVAL_INDEX_CACHE"):  # the session's (tests/conftest.py): indexes reused
        env["KEBAB_EVAL_INDEX_CACHE"] = os.environ["KEBAB_EVAL_INDEX_CACHE"]
    return {"python": str(python), "kebab": str(venv / "bin" / "kebab-eval"), "project": project, "env": env}


def run(team: dict, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        list(args), env=team["env"], cwd=team["project"], capture_output=True, text=True, timeout=timeout
    )
    assert "Traceback" not in proc.stderr or args[1:3] == ("-m", "dagster"), proc.stderr[-3000:]
    return proc


def kebab(team: dict, *args: str) -> subprocess.CompletedProcess:
    """``kebab-eval *args`` of the team's environment: ``python -m kebab_eval_pipeline.cli`` (what its
    console script runs; the test runs the script itself once) forked from a zygote of the venv's
    interpreter (:mod:`tests.forked_cli`): the installed package is imported by each command."""
    proc = run_cli(args, team["env"], team["project"], 600, python=team["python"])
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc


def dagster(team: dict, *args: str) -> subprocess.CompletedProcess:
    """``python -m dagster *args`` of the team's environment, forked as :func:`kebab` is."""
    return run_cli(args, team["env"], team["project"], 600, module="dagster", python=team["python"])


def python(team: dict, code: str) -> str:
    proc = run(team, team["python"], "-c", code)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


@contextmanager
def team_instance(team: dict) -> Iterator[dg.DagsterInstance]:
    """The team's Dagster instance (its ``DAGSTER_HOME``), opened in this process: what its runs and
    assets recorded, read without starting another interpreter that imports Dagster."""
    with dg.DagsterInstance.from_config(team["env"]["DAGSTER_HOME"]) as instance:
        yield instance


def readme_address_commands() -> list[str]:
    """The commands of the Dagster-project recipe's "Where a chain's runs are" (its ```bash block)."""
    block = re.search(r"```bash\n(.*?)```", docs_pages.section("Where a chain's runs are"), re.S).group(1)
    commands = [line.strip() for line in block.splitlines() if line.strip()]
    assert commands and all(c.startswith("kebab-eval ") for c in commands), commands
    return commands


def example_readme_commands() -> list[str]:
    """The ``kebab-eval`` lines of the example project's README (its ```bash block)."""
    block = re.search(r"```bash\n(.*?)```", (PROJECT / "README.md").read_text(encoding="utf-8"), re.S).group(
        1
    )
    commands = [line.strip() for line in block.splitlines() if line.startswith("kebab-eval ")]
    assert len(commands) == 3, commands
    return commands


STAGING = ("--chain", "staging", "--config", "eval/staging.yaml")
GATE = ("--gate", "search_index", "--config", "eval/gate.yaml")


def test_an_installed_team_project_and_the_cli_share_one_address_for_its_runs(team):
    # the package is the installed wheel, the project its own folder: neither comes from the checkout
    where = json.loads(
        python(
            team,
            "import json, importlib.metadata as m, kebab_eval_pipeline as k, team_search as t; "
            "print(json.dumps([k.__file__, t.__file__, m.requires('team-search')]))",
        )
    )
    assert "/venv/lib/" in where[0] and not where[0].startswith(str(REPO)), where
    assert where[1].startswith(str(team["project"])), where
    assert "kebab-eval-pipeline" in where[2]

    # -- runs made by Dagster's own CLI and by kebab-eval ----------------------------------------
    built = dagster(
        team, "asset", "materialize", "-m", "team_search.definitions", "--select", "search_index",
        "--config-json", json.dumps(IN_PROCESS),
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-3000:]
    assert "Asset check 'index_quality' on 'search_index' passed" in built.stderr
    registered = run(team, team["kebab"], "runs", "add", "r1", *STAGING)  # the console script itself
    assert registered.returncode == 0, registered.stderr
    assert "registered run r1 in staging__eval_runs" in registered.stdout
    executed = dagster(
        team, "job", "execute", "-m", "team_search.definitions", "-j", "staging__evaluation_run",
        "--tags", json.dumps({"dagster/partition": "r1"}),
    )  # fmt: skip
    assert executed.returncode == 0 and "RUN_SUCCESS" in executed.stderr, executed.stderr[-3000:]
    second = kebab(team, "run", "--run-id", "r2", "--chunk-size", "200", *STAGING)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "comparison: baseline 'r1'" in second.stdout

    # -- found from the chain's and the gate's own config ------------------------------------------
    listed = kebab(team, "runs", "list", *STAGING)
    assert re.findall(r"│ (r\d) .*│ (yes|no) ", listed.stdout) == [("r1", "yes"), ("r2", "yes")], (
        listed.stdout
    )
    history = kebab(team, "history", "--csv", "--metric", "mrr", *STAGING)
    rows = [line.split(",") for line in history.stdout.strip().splitlines()]
    assert [r[0] for r in rows[1:]] == ["r1", "r2"], history.stdout
    # each run's number as the chain's asset recorded it in the instance (r1 by Dagster's own run)
    with team_instance(team) as instance:
        records = instance.fetch_materializations(dg.AssetKey(["staging", "run_metrics"]), limit=10).records
        recorded = {r.partition_key: r.asset_materialization.metadata["metric/mrr"].value for r in records}
    header = rows[0]
    assert {r[0]: float(r[header.index("mrr")]) for r in rows[1:]} == pytest.approx(recorded, abs=5e-5)
    gate_runs = kebab(team, "history", "--csv", "--metric", "mrr", *GATE)
    [header, gate_row] = gate_runs.stdout.strip().splitlines()
    assert re.fullmatch(r"index_quality-\d{8}-\d{6}-[0-9a-f]{8}", gate_row.split(",")[0]), gate_runs.stdout
    assert float(gate_row.split(",")[header.split(",").index("mrr")]) >= 0.5
    bisected = kebab(team, "bisect", "mrr", "--format", "json", *STAGING)
    assert bisected.returncode == 0, bisected.stderr
    steps = json.loads(bisected.stdout)["steps"]
    assert [(s["run_a"], s["run_b"]) for s in steps] == [("r1", "r2")]
    # the recipe's commands of "Where a chain's runs are", as written, from the project's folder;
    # one the test ran above with the same arguments (nothing written since) is not run again
    ran = {("runs", "list", *STAGING): listed}
    for line in readme_address_commands():
        args = tuple(shlex.split(line)[1:])
        proc = ran[args] if args in ran else ran.setdefault(args, kebab(team, *args))
        assert proc.returncode == 0, f"{line}\n{proc.stderr[-2000:]}"
        assert "no runs" not in proc.stdout + proc.stderr and "0 stored run" not in proc.stderr, line
    # and the kebab-eval commands of the example project's own README (its last one, a run, writes)
    for line in example_readme_commands():
        args = tuple(shlex.split(line.split("#", 1)[0])[1:])
        proc = ran[args] if args in ran else kebab(team, *args)
        assert proc.returncode == 0, f"{line}\n{proc.stderr[-2000:]}"
    # without the address: exit 2 as before, now saying where the runs are
    lost = kebab(team, "bisect", "mrr", "--config", "eval/staging.yaml")
    assert lost.returncode == 2
    assert "search_index (1 run), staging (3 runs)" in lost.stderr and "--chain NAME" in lost.stderr

    # golden health reads the chain's store: the suspects staging/golden_health finds
    health_asset = dagster(
        team, "asset", "materialize", "-m", "team_search.definitions", "--select", "staging/golden_health",
        "--config-json", json.dumps(IN_PROCESS),
    )  # fmt: skip
    assert health_asset.returncode == 0, health_asset.stderr[-3000:]
    with team_instance(team) as instance:
        event = instance.get_latest_materialization_event(dg.AssetKey(["staging", "golden_health"]))
    metadata = event.asset_materialization.metadata
    asset_counts = {k: v.value for k, v in metadata.items() if k.startswith("health/")}
    health = kebab(team, "golden", "health", "--format", "json", *STAGING)
    assert health.returncode in (0, 1), health.stderr
    summary = json.loads(health.stdout)["summary"]
    assert summary["suspect_gold_queue"] is not None  # checked: the chain's comparison r1 → r2
    assert asset_counts["health/suspect_gold_queue"] == summary["suspect_gold_queue"] > 0
    assert {k.split("/", 1)[1]: v for k, v in asset_counts.items()} == {
        k: v for k, v in summary.items() if f"health/{k}" in asset_counts
    }

    # -- the README's launchpad snippet, launched by Dagster against the chain ---------------------
    wrong = {"ops": {"regression_bisect": {"config": {"metric": "mrr"}}}, **IN_PROCESS}
    refused = dagster(
        team, "asset", "materialize", "-m", "team_search.definitions",
        "--select", "staging/regression_bisect", "--config-json", json.dumps(wrong),
    )  # fmt: skip
    assert refused.returncode != 0
    assert (
        "ops.regression_bisect: no op of that name in this run, so Dagster would ignore it: this run's op "
        "is staging__regression_bisect" in refused.stderr
    ), refused.stderr[-3000:]
    right = {"ops": {"staging__regression_bisect": {"config": {"metric": "mrr"}}}, **IN_PROCESS}
    bisect_asset = dagster(
        team, "asset", "materialize", "-m", "team_search.definitions",
        "--select", "staging/regression_bisect", "--config-json", json.dumps(right),
    )  # fmt: skip
    assert bisect_asset.returncode == 0, bisect_asset.stderr[-3000:]
    stored = json.loads(
        python(
            team,
            "import json; from kebab_eval_pipeline.foundation.location import run_storage; "
            "from kebab_eval_pipeline.store.runs import RunStore; "
            "print(RunStore(run_storage(chain='staging')).read_file('regression_bisect', 'latest', "
            "'bisect.json').decode())",
        )
    )
    # what `kebab-eval bisect --chain staging` prints over the same runs (r1, r2, the README's run)
    printed = json.loads(kebab(team, "bisect", "mrr", "--format", "json", *STAGING).stdout)["steps"]
    assert len(printed) == 2
    assert [(s["run_a"], s["run_b"], s["delta"]) for s in stored["steps"]] == [
        (s["run_a"], s["run_b"], s["delta"]) for s in printed
    ]

    # -- the team's instance gets only its own workspace's runs ------------------------------------
    launched = dagster(
        team, "job", "launch", "-m", "team_search.definitions", "-j", "staging__register_sweep"
    )
    assert launched.returncode == 0, launched.stderr[-3000:]
    for command in (("run", "--config", "eval/staging.yaml"), ("sweep", "eval/staging.yaml")):
        foreign = kebab(team, *command)
        assert foreign.returncode == 2, foreign.stderr
        assert "DAGSTER_HOME is the instance of a Dagster workspace without this package's code location" in (
            foreign.stderr
        )
        assert (
            "its runs come from team_search.definitions" in foreign.stderr
            and "--chain NAME" in foreign.stderr
        )
    swept = kebab(team, "sweep", "eval/staging.yaml", "--chain", "staging", "--only", "chunk_size-200")
    assert swept.returncode == 0, swept.stderr[-3000:]
    with team_instance(team) as instance:
        runs = {
            "jobs": sorted({r.job_name for r in instance.get_runs()}),
            "own": instance.get_dynamic_partitions("eval_runs"),
            "staging": instance.get_dynamic_partitions("staging__eval_runs"),
        }
    assert "evaluation_run" not in runs["jobs"] and runs["own"] == []
    assert {"staging__evaluation_run", "staging__register_sweep"} <= set(runs["jobs"])
    assert [k for k in runs["staging"] if k.startswith("sweep-")] == [
        re.search(r"\] (sweep-chunking-chunk_size-200-\w+) ", swept.stderr).group(1)
    ]


def test_the_example_readme_opens_the_teams_ui_with_dagster_dev(team):
    """The example project README's ``dagster dev`` line, run as written in the installed project
    (on a port the OS gives): the team's code location loads, with its chains and gate."""
    block = re.search(r"```bash\n(.*?)```", (PROJECT / "README.md").read_text(encoding="utf-8"), re.S)[1]
    [line] = [ln for ln in block.splitlines() if ln.startswith("dagster dev ")]
    port = free_port()
    locations = loaded_locations(
        f"{line.split('#')[0].strip()} -p {port}\n",
        port,
        team["project"],
        team["env"],
        team["project"] / "dev.log",
    )
    assert locations == [("team_search.definitions", "RepositoryLocation")]
