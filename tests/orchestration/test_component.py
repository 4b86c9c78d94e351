"""The evaluation chain as a Dagster Component, in a dg project that depends on this package the way
a user's does.

A new environment (a venv seeing this interpreter's libraries through a ``.pth`` line, so nothing
is downloaded) gets this package installed (``pip install -e``: its entry points registered, as any
install registers them) and a new project folder — its own ``pyproject.toml`` naming
kebab-eval-pipeline as a dependency, ``[tool.dg]``, a ``defs`` folder with the component's
``defs.yaml`` beside the chain's run config — installed with ``pip install -e`` too. The real ``dg``
of that environment then lists the component type, checks and lists the definitions, and the
component-loaded ``Definitions`` run the chain once into the chain's store. Bad attributes fail
``dg check defs`` naming the field and its line; the team example (docs/examples/dagster-project,
a ``defs.yaml`` per chain) passes ``dg check defs`` as its README says.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
import sysconfig
import textwrap
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest
import yaml

from kebab_eval_pipeline.orchestration import evaluation_chain
from kebab_eval_pipeline.store.runs import RunStore
from tests import docs_pages
from tests.conftest import REPO
from tests.forked_cli import run_cli

COMPONENT = "kebab_eval_pipeline.orchestration.EvaluationChainComponent"
EXAMPLE = REPO / "docs" / "examples" / "dagster-project"
RUN_CONFIG = textwrap.dedent(
    """\
    k: [1, 5, 10]
    system: {kind: reference, mode: lexical, chunk_size: 300}
    gates:
      mrr: {min: 0.3}
    golden_health:
      semantic_duplicates: off
    """
)


def readme_section() -> str:
    """The Dagster-project recipe's paragraph "A chain as a Dagster Component", to the next one."""
    return docs_pages.section("A chain as a Dagster Component.")


#: The recipe's defs.yaml ("A chain as a Dagster Component"), run as written by the tests below.
DEFS_YAML = re.search(r"```yaml\n(.*?)```", readme_section(), re.S).group(1)


pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("dagster_dg_cli") is None,
    reason="dagster-dg-cli (the test extra) is not installed",
)


@pytest.fixture(scope="module")
def dg_env(tmp_path_factory) -> dict:
    """A new environment with this package installed (its entry points registered) and a
    DAGSTER_HOME of its own."""
    root = tmp_path_factory.mktemp("dg_user")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()
    )  # fmt: skip
    # this interpreter's libraries after the venv's own (a venv made from a venv's python would see
    # the base Python's instead)
    outer = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    (purelib / "_outer_site_packages.pth").write_text("\n".join(outer) + "\n")
    home = root / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    env = {
        **{
            k: v for k, v in os.environ.items() if not k.startswith(("PYTHONPATH", "KEBAB_EVAL_", "DAGSTER_"))
        },
        "PIP_NO_INDEX": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
        "VIRTUAL_ENV": str(venv),
        "DAGSTER_HOME": str(home),
    }
    team = {"python": str(python), "env": env, "home": home, "root": root}
    # --ignore-installed: into the new venv, never replacing this interpreter's own copy
    pip(team, REPO, "--no-deps", "--ignore-installed", "-e", str(REPO))
    return team


def pip(team: dict, cwd: Path, *args: str) -> None:
    done = subprocess.run(
        [team["python"], "-m", "pip", "install", "-q", "--no-build-isolation", *args],
        cwd=cwd, env=team["env"], capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]


def dg_cli(team: dict, project: Path, *args: str) -> subprocess.CompletedProcess:
    """The environment's ``dg`` (what its console script runs) in ``project``, forked from a zygote
    of the venv's interpreter (:mod:`tests.forked_cli`): the installed packages are imported by
    each command."""
    return run_cli(args, team["env"], project, 300, module="dagster_dg_cli.cli", python=team["python"])


def new_project(root: Path, defs_yaml: str, name: str = "chainproj") -> Path:
    """A user's dg project: a package with ``definitions.py`` loading its ``defs`` folder, one team
    asset (``search_index``) and one evaluation chain (``defs/nightly/defs.yaml`` + ``eval.yaml``)."""
    project = root / name
    defs = project / name / "defs"
    (defs / "nightly").mkdir(parents=True)
    (project / "pyproject.toml").write_text(
        textwrap.dedent(
            f"""\
            [build-system]
            requires = ["setuptools>=77"]
            build-backend = "setuptools.build_meta"

            [project]
            name = "{name}"
            version = "0.1.0"
            requires-python = ">=3.11"
            dependencies = ["kebab-eval-pipeline", "dagster>=1.13"]

            [tool.setuptools.packages.find]
            include = ["{name}*"]

            [tool.dg]
            directory_type = "project"

            [tool.dg.project]
            root_module = "{name}"
            """
        )
    )
    (project / name / "__init__.py").write_text("")
    (project / name / "definitions.py").write_text(
        textwrap.dedent(
            """\
            from pathlib import Path

            import dagster as dg


            @dg.definitions
            def defs() -> dg.Definitions:
                return dg.load_from_defs_folder(path_within_project=Path(__file__).parent)
            """
        )
    )
    (defs / "__init__.py").write_text("")
    (defs / "team.py").write_text(
        'import dagster as dg\n\n\n@dg.asset\ndef search_index() -> None:\n    """The team\'s index."""\n'
    )
    (defs / "nightly" / "defs.yaml").write_text(defs_yaml)
    (defs / "nightly" / "eval.yaml").write_text(RUN_CONFIG)
    return project


@pytest.fixture(scope="module")
def chainproj(dg_env, tmp_path_factory) -> Path:
    """The user's dg project with the README's defs.yaml, installed in ``dg_env`` once for the
    module (the user's install: kebab-eval-pipeline as a dependency). A test that edits its
    defs.yaml puts the README's back before it ends."""
    project = new_project(tmp_path_factory.mktemp("dg_project"), DEFS_YAML)
    pip(dg_env, project, "-e", str(project))
    return project


def test_a_new_dg_project_lists_checks_and_runs_a_chain_from_its_defs_yaml(dg_env, chainproj, tmp_path):
    project = chainproj

    listed = dg_cli(dg_env, project, "list", "components", "--json")
    assert listed.returncode == 0, listed.stderr[-3000:]
    assert COMPONENT in [c["key"] for c in json.loads(listed.stdout)["items"]]

    checked = dg_cli(dg_env, project, "check", "defs")
    assert checked.returncode == 0, checked.stderr[-3000:]
    assert "All definitions loaded successfully" in checked.stdout + checked.stderr

    shown = dg_cli(dg_env, project, "list", "defs", "--json")
    assert shown.returncode == 0, shown.stderr[-3000:]
    defs = json.loads(shown.stdout)
    # what the Python factory gives for the same name and file: the component only maps onto it
    factory = evaluation_chain("nightly", config=project / "chainproj" / "defs" / "nightly" / "eval.yaml")
    graph = factory.resolve_asset_graph()
    assets = {a["asset_key"] for a in defs["assets"]}
    assert assets == {k.to_user_string() for k in graph.get_all_asset_keys()} | {"search_index"}
    assert {"nightly/golden_set", "nightly/run_metrics", "nightly/comparison_report"} <= assets
    chain_sources = {a["source"] for a in defs["assets"] if a["asset_key"].startswith("nightly/")}
    assert chain_sources == {"chainproj/defs/nightly/defs.yaml:2"}  # its `type:` line
    checks = {c["key"] for c in defs["asset_checks"]}
    expected = {f"{k.asset_key.to_user_string()}:{k.name}" for k in graph.asset_check_keys}
    assert checks == expected | {"search_index:index_quality"}
    assert {
        "nightly/run_metrics:gate_mrr_min",
        "nightly/system_under_test:fresh_passing_evaluation",
    } <= checks
    assert [j["name"] for j in defs["jobs"]] == ["nightly__evaluation_run"]
    assert {s["name"] for s in defs["schedules"]} == {"nightly__nightly_eval_schedule"}

    # one run of the chain through the component-loaded Definitions, into the chain's store
    ran = subprocess.run(
        [
            dg_env["python"], "-c",
            "import json, dagster as dg\n"
            "from chainproj.definitions import defs\n"
            "d = defs()\n"
            "i = dg.DagsterInstance.get()\n"
            "i.add_dynamic_partitions('nightly__eval_runs', ['r1'])\n"
            "job = d.resolve_job_def('nightly__evaluation_run')\n"
            "r = job.execute_in_process(instance=i, partition_key='r1')\n"
            "[m] = [e.event_specific_data.materialization for e in r.get_asset_materialization_events()\n"
            "       if e.asset_key == dg.AssetKey(['nightly', 'run_metrics'])]\n"
            "print(json.dumps({'success': r.success, 'mrr': m.metadata['metric/mrr'].value}))\n",
        ],
        cwd=tmp_path, env=dg_env["env"], capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-3000:]
    result = json.loads(ran.stdout.strip().splitlines()[-1])
    assert result["success"] is True
    # stored where `kebab-eval … --chain nightly --config …/eval.yaml` looks: its MRR is the mean of
    # the stored per-query rows
    store = RunStore(str(dg_env["home"] / "kebab-eval" / "artifacts" / "nightly"))
    scores = store.read("query_scores", "r1")[0]["query_scores"]
    assert len(scores) == 105  # the bundled demo golden set
    assert result["mrr"] == pytest.approx(float(scores["mrr"].dropna().mean()), abs=1e-4)
    assert result["mrr"] > 0.3  # eval.yaml's gate passed


def test_the_readme_lists_every_attribute_of_the_component():
    from kebab_eval_pipeline.orchestration.component import EvaluationChainComponent, GatedAsset

    rows = re.findall(r"^\| (`.+?`) \| (.+) \|$", readme_section(), re.M)
    listed = [name for cell, _ in rows for name in re.findall(r"`(\w+)`", cell)]
    assert listed == list(EvaluationChainComponent.model().model_fields)
    [gated] = [what for cell, what in rows if cell == "`gated_asset`"]
    assert re.findall(r"`(\w+)`", gated.split(":", 1)[1]) == list(GatedAsset.model().model_fields)


@pytest.fixture
def bad_defs_yaml(chainproj) -> Iterator[Path]:
    """The installed project's defs.yaml, for a test to write bad attributes into; the README's
    defs.yaml is back afterwards (the module's other tests load the same project)."""
    yaml_file = chainproj / "chainproj" / "defs" / "nightly" / "defs.yaml"
    yield yaml_file
    yaml_file.write_text(DEFS_YAML)


def test_bad_attributes_fail_dg_check_defs_naming_the_field_and_its_line(dg_env, chainproj, bad_defs_yaml):
    project, yaml_file = chainproj, bad_defs_yaml

    def check(attributes: str) -> str:
        yaml_file.write_text(f"type: {COMPONENT}\nattributes:\n{textwrap.indent(attributes, '  ')}")
        done = dg_cli(dg_env, project, "check", "defs")
        out = done.stdout + done.stderr
        assert done.returncode == 1, out[-3000:]
        return out

    # an unknown field and a gated asset without its key: both, each with its line
    out = check("name: nightly\ncolour: blue\nconfig: eval.yaml\ngated_asset: {check_name: index_quality}\n")
    assert f"{yaml_file}:4 - {COMPONENT} attributes.colour Additional properties are not allowed" in out
    assert f"{yaml_file}:6 - {COMPONENT} attributes.gated_asset" in out
    # a chain name that cannot be part of asset keys
    out = check("name: 9lives\nconfig: eval.yaml\n")
    assert f"attributes.name at {yaml_file}:3" in out and "String should match pattern" in out
    # a run config the factory refuses: the defs.yaml, the file and the field
    out = check("name: nightly\nconfig: missing.yaml\n")
    assert f"InputError: {yaml_file}: evaluation chain 'nightly': the run config file does not exist" in out
    assert f"{yaml_file.parent / 'missing.yaml'} — field 'config': not a file" in out


def test_the_team_example_passes_dg_check_defs_as_its_readme_says(dg_env):
    """The ``dg`` lines of the example's README, run in its folder as written."""
    readme = (EXAMPLE / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```bash\n(.*?)```", readme, re.S).group(1)
    commands = [line.split("#", 1)[0].strip() for line in block.splitlines() if line.startswith("dg ")]
    assert commands == ["dg check defs", "dg list defs"], commands
    for command in commands:
        done = dg_cli(dg_env, EXAMPLE, *shlex.split(command)[1:])
        assert done.returncode == 0, f"{command}\n{done.stderr[-3000:]}"
    shown = dg_cli(dg_env, EXAMPLE, "list", "defs", "--json")
    defs = json.loads(shown.stdout)
    sources = {a["asset_key"].split("/")[0]: a.get("source", "").split(":")[0] for a in defs["assets"]}
    assert sources["staging"] == "team_search/defs/staging/defs.yaml"
    assert sources["production"] == "team_search/defs/production/defs.yaml"
    assert "search_index:index_quality" in {c["key"] for c in defs["asset_checks"]}
    # the README's defs.yaml is the example's own
    [shown_yaml] = re.findall(r"```yaml\n(.*?)```", readme, re.S)
    production = EXAMPLE / "team_search" / "defs" / "production" / "defs.yaml"
    assert yaml.safe_load(shown_yaml) == yaml.safe_load(production.read_text(encoding="utf-8"))


def test_a_gated_asset_without_the_metadata_its_system_is_built_from_fails_its_check(
    instance, tmp_path, monkeypatch
):
    """``system_from_metadata`` naming an entry the materialization lacks: the blocking check fails,
    naming the field and the entry (a check that cannot evaluate never passes)."""
    project = new_project(
        tmp_path,
        DEFS_YAML
        + "    system: {kind: python, callable: 'team.search:Search'}\n"
        + "    system_from_metadata: {args.index: index_path}\n",
        name="gatedproj",
    )
    monkeypatch.syspath_prepend(str(project))
    defs = dg.load_from_defs_folder(path_within_project=project)
    key = dg.AssetKey("search_index")
    result = defs.resolve_implicit_job_def_def_for_assets([key]).execute_in_process(
        instance=instance, asset_selection=[key], raise_on_error=False
    )
    [check] = result.get_asset_check_evaluations()
    assert (check.check_name, check.passed, check.severity) == (
        "index_quality",
        False,
        dg.AssetCheckSeverity.ERROR,
    )
    assert check.description == (
        "could not evaluate: the asset's latest materialization lacks the metadata the system is built "
        "from (1 problem):\n  - system_from_metadata.args.index: no metadata entry 'index_path'"
    )
