"""`kebab-eval baseline set|show|clear` as a user runs them, and a real run whose comparison uses the pin."""

from __future__ import annotations

import json
import shlex
import sys
from datetime import UTC, datetime
from pathlib import Path

from kebab_eval_pipeline.chain.artifacts import RunMetricsArtifact
from kebab_eval_pipeline.store.layout import PINS_FILE
from kebab_eval_pipeline.store.runs import RunStore
from tests.test_cli import cli, env, no_traceback  # noqa: F401  (env is a fixture)


def test_pin_show_run_against_the_pin_then_clear(env):  # noqa: F811
    env = {**env, "COLUMNS": "500"}  # rich wraps at the terminal width; keep each note on one line
    artifacts = Path(env["DAGSTER_HOME"]) / "kebab-eval" / "artifacts"  # the CLI's default storage

    empty = cli(env, "baseline", "show")
    assert empty.returncode == 0, empty.stderr
    assert "no pinned baselines" in empty.stdout

    first = cli(env, "run", "--run-id", "release-1")
    assert first.returncode == 0, first.stderr
    assert (
        "comparison: no baseline: no pinned baseline for golden set 'demo-fermentation', and no earlier run"
        in first.stdout
    )

    pinned = cli(env, "baseline", "set", "release-1")
    assert pinned.returncode == 0, pinned.stderr
    assert "pinned release-1 as the baseline of golden set 'demo-fermentation' at sha256 " in pinned.stdout

    shown = cli(env, "baseline", "show", "--json")
    assert shown.returncode == 0, shown.stderr
    pins = json.loads(shown.stdout)
    store = RunStore(artifacts)
    release = store.manifest("run_metrics", "release-1")["info"]
    assert pins == {
        "demo-fermentation": {
            "run_id": "release-1",
            "golden_sha256": release["golden"]["sha256"],
            "pinned_at": pins["demo-fermentation"]["pinned_at"],
        }
    }
    table = cli(env, "baseline", "show")
    assert "release-1" in table.stdout and release["golden"]["sha256"][:12] in table.stdout

    # A later run on the same golden set: `previous` would choose it, the pin must win. (Metrics
    # only: were it chosen, loading its other artifacts would fail the comparison.)
    decoy = RunMetricsArtifact.from_tables(*store.read("run_metrics", "release-1"))
    decoy.info = {**decoy.info, "run_id": "nightly", "created_at": datetime.now(UTC).isoformat()}
    store.write("run_metrics", "nightly", *decoy.to_tables())

    second = cli(env, "run", "--run-id", "candidate")
    assert second.returncode == 0, second.stderr
    assert (
        "comparison: baseline 'release-1' (auto: pinned for golden set 'demo-fermentation' at "
        in second.stdout
    )

    bad = cli(env, "baseline", "set", "nope")
    assert bad.returncode == 2
    no_traceback(bad)
    assert "run nope" in bad.stderr and "no stored run_metrics" in bad.stderr

    typo = cli(env, "baseline", "clear", "--golden", "demo")
    assert typo.returncode == 2 and "'demo' has no pin" in typo.stderr
    no_traceback(typo)

    cleared = cli(env, "baseline", "clear")
    assert cleared.returncode == 0, cleared.stderr
    assert "cleared the pinned baseline of golden set 'demo-fermentation'" in cleared.stdout
    assert json.loads(cli(env, "baseline", "show", "--json").stdout) == {}


def test_bad_pin_file_and_bad_baseline_option_exit_2_without_traceback(env, tmp_path):  # noqa: F811
    artifacts = Path(env["DAGSTER_HOME"]) / "kebab-eval" / "artifacts"
    artifacts.mkdir(parents=True)
    (artifacts / PINS_FILE).write_text("{oops", encoding="utf-8")
    shown = cli(env, "baseline", "show")
    assert shown.returncode == 2
    no_traceback(shown)
    assert "corrupt" in shown.stderr and PINS_FILE in shown.stderr

    # An explicit baseline is a run id: refused with the config, before any run is registered.
    run = cli(env, "run", "--run-id", "x", "--baseline", "../elsewhere")
    assert run.returncode == 2
    no_traceback(run)
    assert "baseline" in run.stderr and "nor a valid run id" in run.stderr


# A user's own system behind the command adapter (protocol jsonl: one process for the whole run):
# it answers every query with nothing, so every query the reference found, it "misses".
EMPTY_SYSTEM = """\
import json, sys
for line in sys.stdin:
    request = json.loads(line)
    print(json.dumps({"id": request["id"], "hits": []}), flush=True)
"""


def test_automatic_baselines_stay_within_one_system(env, tmp_path):  # noqa: F811
    """The issue's first hour: the demo, then a user's command system on the same golden set (no
    automatic baseline, saying why), the demo again (its own earlier run), then the command
    system against the demo by name ("comparing two systems", no "regression")."""
    env = {**env, "COLUMNS": "500"}
    artifacts = Path(env["DAGSTER_HOME"]) / "kebab-eval" / "artifacts"
    script = tmp_path / "empty_system.py"
    script.write_text(EMPTY_SYSTEM, encoding="utf-8")
    config = tmp_path / "mine.yaml"
    config.write_text(
        "system:\n  kind: command\n  protocol: jsonl\n"
        f"  argv: [{json.dumps(sys.executable)}, {json.dumps(str(script))}]\nanswers: false\n",
        encoding="utf-8",
    )
    command = f"command `{shlex.join([sys.executable, str(script)])}`"
    demo = "reference demo corpus (lexical)"

    assert cli(env, "run", "--run-id", "demo-1").returncode == 0
    mine = cli(env, "run", "--run-id", "mine-1", "--config", str(config))
    assert mine.returncode == 0, mine.stderr
    assert (
        f"comparison: no baseline: no pinned baseline for golden set 'demo-fermentation', and no earlier "
        f"run of {command} on golden set 'demo-fermentation' at sha256 "
    ) in mine.stdout
    assert "1 earlier run(s) of other systems on this set skipped" in mine.stdout
    assert "regression" not in mine.stdout

    again = cli(env, "run", "--run-id", "demo-2")
    assert again.returncode == 0, again.stderr
    rule = f"so the most recent earlier run of {demo} on golden set 'demo-fermentation'"
    assert "comparison: baseline 'demo-1' (auto: no pinned baseline for golden set" in again.stdout
    assert rule in again.stdout

    versus = cli(env, "run", "--run-id", "mine-2", "--config", str(config), "--baseline", "demo-2")
    assert versus.returncode == 0, versus.stderr
    line = next(x for x in versus.stdout.splitlines() if x.startswith("comparison: "))
    assert f"comparing two systems: {demo} vs {command}" in line
    assert "b missed " in line and "regression" not in line

    store = RunStore(artifacts)
    identity = store.manifest("run_metrics", "mine-2")["info"]["system"]["identity"]
    assert identity == {
        "kind": "command",
        "target": shlex.join([sys.executable, str(script)]),
        "mode": None,
        "name": None,
        "label": command,
    }
    report = json.loads(Path(store.file_path("comparison_report", "mine-2", "comparison.json")).read_text())
    assert report["cross_system"] is True and report["verdict_labels"]["regression"] == "b missed"
    markdown = (artifacts / "reports" / "mine-2" / "comparison.md").read_text()
    assert markdown.startswith("# Comparison of two systems: `mine-2` vs `demo-2`")

    exported = json.loads(cli(env, "export", "mine-1").stdout)
    assert exported["system"]["identity"]["label"] == command

    # `kebab-eval compare` words it the same way; two runs of the demo stay a regression check.
    compared = cli(env, "compare", "demo-2", "mine-1")
    assert compared.returncode == 0, compared.stderr
    assert compared.stdout.startswith("# Comparison of two systems: `mine-1` vs `demo-2`")
    same = cli(env, "compare", "demo-1", "demo-2", "--json")
    assert json.loads(same.stdout)["systems_note"] == f"one system: {demo}"
