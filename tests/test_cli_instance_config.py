"""A ``dagster.yaml`` in DAGSTER_HOME that Dagster cannot use is bad input: exit 2 naming the file,
the line, the key and the remedy, for every command that opens the instance — never exit 3.

Issue 44: a broken or unknown-key dagster.yaml exited 3 ("internal failure") with Dagster's
exception text (for an unknown key, the whole instance schema on one line); a configured class
whose module cannot be imported failed the run midway (``RuntimeError: run x failed``, exit 3).
"""

from __future__ import annotations

import pytest

from tests.replay_case import clean_env, cli, write_case

REMEDY = "fix the file (its keys: https://docs.dagster.io/deployment/oss/dagster-yaml), or point DAGSTER_HOME"

CASES = {
    "not YAML": (
        "storage:\n  sqlite:\n    base_dir: [unclosed\n",
        "dagster.yaml:line 4, column 1: not YAML: expected ',' or ']', but got '<stream end>'",
    ),
    "unknown key": (
        "telemetry:\n  enabled: false\nbogus_key: 1\n",
        "dagster.yaml:line 3 — field 'bogus_key': unknown key 'bogus_key'",
    ),
    "unknown nested key": (
        "storage:\n  sqlite:\n    base_dirr: /tmp/x\n",
        "dagster.yaml:line 3 — field 'storage.sqlite.base_dirr': "
        "unknown key 'base_dirr' under storage:sqlite",
    ),
    "not a mapping": ("- telemetry\n", "dagster.yaml: expected a mapping of settings (key: value), got list"),
    "wrong type": (
        "telemetry:\n  enabled: maybe\n",
        "dagster.yaml:line 2 — field 'telemetry.enabled': Invalid scalar",
    ),
    "class not importable": (
        "telemetry:\n  enabled: false\n"
        "run_coordinator:\n  module: no_such_module_kebab\n  class: Coordinator\n",
        "dagster.yaml:line 3 — field 'run_coordinator': cannot load a configured class: "
        "Couldn't import module no_such_module_kebab",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("command", ["run", "runs add"])
def test_a_dagster_yaml_dagster_refuses_exits_2_naming_file_line_key_and_remedy(tmp_path, case, command):
    text, said = CASES[case]
    write_case(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text(text, encoding="utf-8")
    args = ["run", "--config", "cfg.yaml", "--run-id", "r1"] if command == "run" else ["runs", "add", "r1"]
    proc = cli(tmp_path, *args, env=clean_env(DAGSTER_HOME=str(home)))
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "internal failure" not in proc.stderr
    assert f"{home}/{said}" in proc.stderr
    assert "cannot open the Dagster instance: DAGSTER_HOME's dagster.yaml is invalid" in proc.stderr
    assert REMEDY in proc.stderr
    assert 'Expected: "' not in proc.stderr  # not Dagster's listing of the whole schema
    assert (home / "dagster.yaml").read_text(encoding="utf-8") == text  # the user's file, untouched
    assert not (tmp_path / "dagster_home").exists()  # nothing opened elsewhere instead
    assert not [p for p in (home / "kebab-eval").rglob("*") if p.is_file()]  # no run stored
