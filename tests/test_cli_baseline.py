"""`kebab-eval baseline set|show|clear` as a user runs them, and a real run whose comparison uses the pin."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from kebab_eval_pipeline.artifacts import RunMetricsArtifact
from kebab_eval_pipeline.compare.baseline import PINS_FILE
from kebab_eval_pipeline.storage import ArtifactStore
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
    store = ArtifactStore(artifacts)
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
