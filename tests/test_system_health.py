"""A failed system fails the run (``system_health``): the pure verdict, the settings, the blocking
asset check through a real Dagster run, and ``kebab-eval run`` / ``dagster asset materialize``
against real failing systems — a closed loopback port, a command that exits non-zero, a program
that cannot start, a command that fails some queries. Also: no Dagster telemetry, no banner."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from kebab_eval_pipeline.chain.artifacts import RetrievalArtifact, RunMetricsArtifact
from kebab_eval_pipeline.chain.settings import settings_from_dict
from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.metrics.health import system_health
from kebab_eval_pipeline.metrics.settings import DEFAULT_MAX_ERROR_RATE, SystemHealthSettings
from tests.conftest import REPO, write
from tests.forked_cli import run_cli
from tests.systems.adapters.conftest import run_config

CLI = [sys.executable, "-m", "kebab_eval_pipeline.cli"]
N = 20  # queries in the small golden set
#: The dagster.yaml the CLI creates: telemetry off, and no community dialog over the UI.
CREATED_CONFIG = {"telemetry": {"enabled": False}, "nux": {"enabled": False}}
BANNER = ("Telemetry", "telemetry", "Welcome to Dagster", "usage statistics")

# A command system in one argv: fails (exit 3, with a stderr line) for the queries named in
# argv[2] (comma-separated), else prints one hit on the query's document.
FLAKY = (
    "import json, sys\n"
    "q, failing = sys.argv[1], sys.argv[2].split(',')\n"
    "if q in failing:\n"
    "    sys.stderr.write('index locked\\n'); sys.exit(3)\n"
    "print(json.dumps({'hits': [{'rank': 1, 'chunk_id': q, 'doc_id': 'doc-' + q}]}))\n"
)


def closed_port() -> int:
    """A loopback port nothing listens on: bound, then closed."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def golden(folder: Path) -> Path:
    queries = [
        {"id": f"q{i:02d}", "query": f"q{i:02d}", "supports": [{"doc_id": f"doc-q{i:02d}"}]} for i in range(N)
    ]
    return write(folder / "golden.yaml", yaml.safe_dump({"schema_version": "1", "queries": queries}))


def config(folder: Path, system: dict, **extra) -> Path:
    doc = {"golden": str(golden(folder)), "system": system, "answers": False, **extra}
    return write(folder / "run.yaml", yaml.safe_dump(doc))


def flaky(failing: list[str]) -> dict:
    return {
        "kind": "command",
        "search_argv": [sys.executable, "-c", FLAKY, "{query}", ",".join(failing) or "-"],
        "concurrency": 2,
    }


def dead_http() -> dict:
    return {"kind": "http", "search_url": f"http://127.0.0.1:{closed_port()}/search", "retries": 0}


@pytest.fixture
def env(tmp_path):
    """A fresh DAGSTER_HOME that does not exist yet: the CLI creates it and its dagster.yaml."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("KEBAB_EVAL_", "DAGSTER_"))}
    environment["DAGSTER_HOME"] = str(tmp_path / "dagster_home")
    environment["PYTHONPATH"] = os.pathsep.join([str(REPO), environment.get("PYTHONPATH", "")])
    return environment


def cli(env, *args, cwd=None) -> subprocess.CompletedProcess:
    return run_cli(args, env=env, cwd=cwd, timeout=300)


def flat(text: str) -> str:
    """Rich wraps long lines at the terminal width: compare without the breaks."""
    return " ".join(text.split())


def no_banner(proc: subprocess.CompletedProcess) -> None:
    for word in BANNER:
        assert word not in proc.stdout + proc.stderr, (word, proc.stderr[-2000:])


# ---------------------------------------------------------------------------------------------
# the verdict (pure)


def outcomes(classes: list[str | None]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "query_id": [f"q{i}" for i in range(len(classes))],
            "error_class": pd.array(classes, dtype="string"),
            "error": pd.array(
                [None if c is None else f"{c}: boom {i}" for i, c in enumerate(classes)], "string"
            ),
        }
    )


def test_verdict_of_a_dead_system_names_count_rate_and_classes():
    verdict = system_health(outcomes(["connection"] * 60), SystemHealthSettings())
    assert (verdict.failed, verdict.queries, verdict.error_rate) == (60, 60, 1.0)
    assert not verdict.healthy and verdict.blocking and verdict.fails_run
    assert verdict.classes == {"connection": 60}
    assert verdict.message == (
        "system health: 60 of 60 queries failed (error_rate 1.0 > max 0.1): connection ×60; "
        "first: q0: connection: boom 0"
    )


def test_verdict_every_query_failed_fails_even_at_max_rate_one():
    verdict = system_health(
        outcomes(["timeout", "connection", "timeout"]), SystemHealthSettings(max_error_rate=1.0)
    )
    assert not verdict.healthy and verdict.fails_run
    assert "3 of 3 queries failed (every query failed): timeout ×2, connection ×1" in verdict.message


def test_verdict_under_threshold_is_healthy_and_null_never_blocks():
    one = system_health(outcomes([None] * 19 + ["exit_code"]), SystemHealthSettings())
    assert one.healthy and one.error_rate == 0.05
    assert "1 of 20 queries failed (error_rate 0.05 ≤ max 0.1): exit_code ×1" in one.message
    off = system_health(outcomes(["connection"] * 4), None)
    assert not off.healthy and not off.blocking and not off.fails_run
    clean = system_health(outcomes([None, None]), SystemHealthSettings())
    assert (
        clean.healthy
        and clean.failed == 0
        and clean.message.endswith("0 of 2 queries failed (error_rate 0.0 ≤ max 0.1)")
    )
    empty = system_health(outcomes([]), SystemHealthSettings())
    assert empty.healthy and empty.error_rate is None


def test_verdict_names_the_top_three_classes_then_counts_the_rest():
    classes = ["a"] * 4 + ["b"] * 3 + ["c"] * 2 + ["d", "e"]
    verdict = system_health(outcomes(classes), SystemHealthSettings())
    assert "a ×4, b ×3, c ×2, 2 more class(es) ×2;" in verdict.message


@settings(max_examples=200, deadline=None)
@given(
    classes=st.lists(st.sampled_from([None, None, "connection", "timeout", "http_5xx"]), max_size=40),
    limit=st.floats(0.0, 1.0),
    blocking=st.booleans(),
)
def test_verdict_property(classes, limit, blocking):
    """Against an independent count: healthy ⇔ not (every query failed or rate > max)."""
    verdict = system_health(outcomes(classes), SystemHealthSettings(max_error_rate=limit, blocking=blocking))
    failed = sum(c is not None for c in classes)
    assert verdict.failed == failed and verdict.queries == len(classes)
    rate = failed / len(classes) if classes else None
    assert verdict.error_rate == rate
    expected_healthy = not classes or not (failed == len(classes) or failed / len(classes) > limit)
    assert verdict.healthy == expected_healthy
    assert verdict.fails_run == (blocking and not expected_healthy)
    assert sum(verdict.classes.values()) == failed
    assert list(verdict.classes.values()) == sorted(verdict.classes.values(), reverse=True)
    assert f"{failed} of {len(classes)} queries failed" in verdict.message


def test_settings_default_null_and_bad_values():
    assert settings_from_dict({}).system_health == SystemHealthSettings(max_error_rate=DEFAULT_MAX_ERROR_RATE)
    assert settings_from_dict({"system_health": None}).system_health is None
    assert settings_from_dict({"system_health": {"blocking": False}}).system_health.max_error_rate == 0.1
    text = "system_health:\n  max_error_rate: 1.5\n  blokcing: true\n"
    with pytest.raises(InputError) as exc:
        settings_from_dict(yaml.safe_load(text), source="run.yaml", text=text)
    rendered = str(exc.value)
    assert "run.yaml:line 2 — field 'system_health.max_error_rate'" in rendered
    assert "run.yaml:line 3 — field 'system_health.blokcing': unknown key" in rendered


# ---------------------------------------------------------------------------------------------
# the blocking check through a real Dagster run


def test_dead_http_system_fails_the_dagster_run_but_keeps_its_outputs(instance, tmp_path):
    result, store = run_config(instance, config(tmp_path, dead_http()), "dead-1")
    assert not result.success
    checks = {e.check_name: e for e in result.get_asset_check_evaluations()}
    health = checks["system_health"]
    assert not health.passed and health.blocking and health.severity == dg.AssetCheckSeverity.ERROR
    assert health.description.startswith(
        f"system health: {N} of {N} queries failed (error_rate 1.0 > max 0.1)"
    )
    assert "connection ×20" in health.description
    assert health.metadata["failed"].value == N and health.metadata["error_classes"].value == {
        "connection": N
    }
    # the chain up to run_metrics is stored: one row per query, each with its error
    materialized = {e.asset_key.path[-1] for e in result.get_asset_materialization_events()}
    assert materialized == {"golden_set", "retrieval_results", "judge", "query_scores", "run_metrics"}
    stored = RetrievalArtifact.from_tables(*store.read("retrieval_results", "dead-1")).results.outcomes
    assert len(stored) == N and (stored["error_class"] == "connection").all()
    info = RunMetricsArtifact.from_tables(*store.read("run_metrics", "dead-1")).info
    assert info["system_health"]["healthy"] is False and info["system_health"]["failed"] == N


def test_blocking_false_turns_the_check_into_a_warning(instance, tmp_path):
    cfg = config(tmp_path, dead_http(), system_health={"blocking": False})
    result, _ = run_config(instance, cfg, "dead-warn")
    assert result.success
    health = next(e for e in result.get_asset_check_evaluations() if e.check_name == "system_health")
    assert not health.passed and health.severity == dg.AssetCheckSeverity.WARN


# ---------------------------------------------------------------------------------------------
# kebab-eval run: exit codes and messages against real failing systems


def test_cli_dead_http_server_exits_1_naming_count_and_class(env, tmp_path):
    proc = cli(env, "run", "--run-id", "down", "--config", str(config(tmp_path, dead_http())))
    assert proc.returncode == 1, proc.stderr[-3000:]
    message = flat(proc.stderr)
    assert (
        f"system failed: run down: system health: {N} of {N} queries failed "
        f"(error_rate 1.0 > max 0.1): connection ×{N}" in message
    )
    assert "FAIL system health" in flat(proc.stdout)  # beside the metrics table
    assert "Traceback" not in proc.stderr + proc.stdout
    assert "Stack Trace" not in proc.stderr  # the CLI states the failed check; Dagster's trace is dropped
    run_md = Path(env["DAGSTER_HOME"]) / "kebab-eval" / "artifacts" / "reports" / "down" / "run.md"
    assert f"**FAIL** — system health: {N} of {N} queries failed" in run_md.read_text()
    no_banner(proc)


def test_cli_command_exiting_non_zero_exits_1(env, tmp_path):
    failing = [f"q{i:02d}" for i in range(N)]
    proc = cli(env, "run", "--run-id", "broken", "--config", str(config(tmp_path, flaky(failing))))
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert f"{N} of {N} queries failed (error_rate 1.0 > max 0.1): exit_code ×{N}" in flat(proc.stderr)


def test_cli_program_that_cannot_start_exits_1_and_a_missing_one_exits_2(env, tmp_path):
    # an executable file whose interpreter does not exist: every query fails to start
    script = write(tmp_path / "search.sh", "#!/nonexistent/interpreter\n")
    script.chmod(0o755)
    system = {"kind": "command", "search_argv": [str(script), "{query}"]}
    proc = cli(env, "run", "--run-id", "nostart", "--config", str(config(tmp_path / "a", system)))
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert f"{N} of {N} queries failed (error_rate 1.0 > max 0.1): exception ×{N}" in flat(proc.stderr)
    # a program that is not there at all is a config error, found before any query runs
    system = {"kind": "command", "search_argv": ["no-such-search-program-kebab", "{query}"]}
    proc = cli(env, "run", "--run-id", "missing", "--config", str(config(tmp_path / "b", system)))
    assert proc.returncode == 2 and "not found on PATH" in flat(proc.stderr)


def test_cli_one_failure_in_twenty_passes_with_a_warning(env, tmp_path):
    proc = cli(env, "run", "--run-id", "one-bad", "--config", str(config(tmp_path, flaky(["q07"]))))
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = flat(proc.stdout)
    assert (
        f"warn system health: 1 of {N} queries failed (error_rate 0.05 ≤ max 0.1): exit_code ×1; "
        "first: q07: exit_code:" in out
    )
    assert "system failed" not in proc.stderr


def test_cli_threshold_and_off_switches(env, tmp_path):
    five = [f"q{i:02d}" for i in range(5)]  # 25% > the default 10%
    failing = cli(env, "run", "--run-id", "five", "--config", str(config(tmp_path / "a", flaky(five))))
    assert failing.returncode == 1 and "5 of 20 queries failed (error_rate 0.25 > max 0.1)" in flat(
        failing.stderr
    )
    cfg = config(tmp_path / "b", flaky(five), system_health={"max_error_rate": 1.0})
    assert cli(env, "run", "--run-id", "five-ok", "--config", str(cfg)).returncode == 0
    for name, block in (("blocking", {"blocking": False}), ("null", None)):
        cfg = config(tmp_path / name, dead_http(), system_health=block)
        proc = cli(env, "run", "--run-id", f"dead-{name}", "--config", str(cfg))
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert f"warn system health: {N} of {N} queries failed" in flat(proc.stdout)


def test_failed_run_is_never_the_previous_baseline(env, tmp_path):
    # One named system (its argv differs between the two configs), so only health tells them apart.
    healthy = config(tmp_path / "ok", {**flaky([]), "name": "search"})
    assert cli(env, "run", "--run-id", "h1", "--config", str(healthy)).returncode == 0
    # the same golden set (same content) against the same system, now failing every query
    broken = {**flaky([f"q{i:02d}" for i in range(N)]), "name": "search"}
    dead = write(
        tmp_path / "dead.yaml",
        yaml.safe_dump({"golden": str(tmp_path / "ok" / "golden.yaml"), "system": broken, "answers": False}),
    )
    assert cli(env, "run", "--run-id", "d1", "--config", str(dead)).returncode == 1
    again = cli(env, "run", "--run-id", "h2", "--config", str(healthy))
    assert again.returncode == 0, again.stderr[-3000:]
    assert "comparison: baseline 'h1'" in flat(again.stdout)
    assert "skipped 1 later run(s): 'd1' failed system_health (its system under test failed)" in flat(
        again.stdout
    )


def test_dagster_asset_materialize_fails_on_a_dead_system(env, tmp_path):
    cfg = config(tmp_path, dead_http())
    assert cli(env, "runs", "add", "mat-1").returncode == 0
    # `python -m dagster asset materialize ...`, a process of its own forked ready-imported
    proc = run_cli(
        [
            "asset",
            "materialize",
            "-m",
            "kebab_eval_pipeline.definitions",
            "--select",
            "*",
            "--partition",
            "mat-1",
        ],
        env={**env, "KEBAB_EVAL_CONFIG": str(cfg)},
        cwd=tmp_path,
        timeout=300,
        module="dagster",
    )
    assert proc.returncode != 0
    assert "system_health" in proc.stdout + proc.stderr
    no_banner(proc)  # the dagster.yaml the CLI created has telemetry off


# ---------------------------------------------------------------------------------------------
# telemetry: off in every dagster.yaml the project writes or documents, no banner


def test_cli_creates_dagster_yaml_with_telemetry_off_and_prints_no_banner(env, tmp_path):
    proc = cli(env, "run", "--run-id", "t1", "--config", str(config(tmp_path, flaky([]))))
    assert proc.returncode == 0, proc.stderr[-3000:]
    no_banner(proc)
    # The run's title names the command system by its executable (a command has no mode).
    assert f"{N} queries, command: {Path(sys.executable).name})" in flat(proc.stdout), proc.stdout
    assert "None" not in proc.stdout
    home = Path(env["DAGSTER_HOME"])
    assert yaml.safe_load((home / "dagster.yaml").read_text()) == CREATED_CONFIG
    assert not (home / ".telemetry").exists()  # Dagster writes its instance id there when on


def test_a_users_dagster_yaml_is_left_alone_and_still_no_banner(env, tmp_path):
    home = Path(env["DAGSTER_HOME"])
    home.mkdir()
    mine = "# my instance settings\nrun_monitoring:\n  enabled: false\n"
    (home / "dagster.yaml").write_text(mine)
    proc = cli(env, "run", "--run-id", "t2", "--config", str(config(tmp_path, flaky([]))))
    assert proc.returncode == 0, proc.stderr[-3000:]
    no_banner(proc)
    assert (home / "dagster.yaml").read_text() == mine
    assert not (home / ".telemetry").exists()


def test_project_local_home_gets_telemetry_off(tmp_path):
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("KEBAB_EVAL_", "DAGSTER_"))}
    environment["PYTHONPATH"] = os.pathsep.join([str(REPO), environment.get("PYTHONPATH", "")])
    proc = cli(environment, "runs", "add", "local-1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    created = tmp_path / ".kebab-eval" / "dagster_home" / "dagster.yaml"
    assert yaml.safe_load(created.read_text()) == CREATED_CONFIG


def test_created_dagster_yaml_switches_the_community_dialog_off(tmp_path, monkeypatch):
    """Dagster itself reads the created file as "no telemetry, no community dialog" (the
    webserver asks ``instance.nux_enabled`` before showing it); an older project-local file that
    only set telemetry is upgraded, a user's own file is not touched."""
    from dagster import DagsterInstance

    from kebab_eval_pipeline.cli.instance import open_instance

    home = tmp_path / "home"
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    with open_instance() as inst:
        assert (inst.telemetry_enabled, inst.nux_enabled) == (False, False)
    with DagsterInstance.from_config(str(home)) as inst:  # as the webserver loads it
        assert (inst.telemetry_enabled, inst.nux_enabled) == (False, False)

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DAGSTER_HOME")
    own = tmp_path / ".kebab-eval" / "dagster_home" / "dagster.yaml"
    own.parent.mkdir(parents=True)
    own.write_text("telemetry:\n  enabled: false\n")  # what versions before the nux setting wrote
    with open_instance() as inst:
        assert not inst.nux_enabled
    assert yaml.safe_load(own.read_text()) == CREATED_CONFIG


def test_in_process_instance_obeys_an_explicit_telemetry_setting(tmp_path, monkeypatch):
    from kebab_eval_pipeline.cli.instance import open_instance

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: true\n")
    with open_instance() as inst:
        assert inst.telemetry_enabled  # the user's explicit choice
    (home / "dagster.yaml").write_text("# no telemetry key\n")
    with open_instance() as inst:
        assert not inst.telemetry_enabled


def test_documented_dagster_yaml_disables_telemetry():
    doc = yaml.safe_load((REPO / "docs" / "deploy" / "dagster.yaml").read_text())
    assert doc["telemetry"] == {"enabled": False}
    assert doc["nux"] == {"enabled": False}  # no community dialog over the UI either
    assert "postgres" in doc["storage"]  # the rest of the documented file is intact
