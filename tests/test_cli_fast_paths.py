"""Commands that need no Dagster instance do not start one (issue: errors took 20–25 s under load).

Structural, not timed: each command runs in a real subprocess through the console script's entry
point, which then reports whether Dagster (and its SQL stack) was imported. Bad input must exit 2
before Dagster is imported; ``runs list``, ``history``, ``export``, ``compare`` and ``baseline show``
read the stored artifacts (and a default instance's SQLite index) directly.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import get_args

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kebab_eval_pipeline.chain.settings import DEMO_GOLDEN
from kebab_eval_pipeline.contract import RetrievalMode
from kebab_eval_pipeline.foundation.location import is_local, local_path
from kebab_eval_pipeline.orchestration.registered_runs import (
    EVAL_RUNS,
    default_sqlite_index,
    read_sqlite_partitions,
    registered_runs,
)
from kebab_eval_pipeline.reference.index import ALL_MODES
from tests.conftest import write
from tests.test_cli import cli, cli_env

#: What opening a Dagster instance imports.
DAGSTER = {"dagster", "sqlalchemy", "alembic"}
#: Runs ``kebab-eval ARGS`` (JSON in argv[1]) in this process, then prints on the last line of
#: stdout the exit code and which heavy packages the command imported.
PROBE = """
import json, sys
from kebab_eval_pipeline import cli
sys.argv = ["kebab-eval", *json.loads(sys.argv[1])]
try:
    cli.main()
    code = 0
except SystemExit as exc:
    code = 0 if exc.code is None else exc.code
heavy = sorted(m for m in ("dagster", "sqlalchemy", "alembic", "pandas", "numpy") if m in sys.modules)
sys.stdout.flush()
print("\\n" + json.dumps({"code": code, "heavy": heavy}))
"""


def probe(env: dict, *args: str, cwd: Path | None = None) -> tuple[dict, subprocess.CompletedProcess]:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(list(args))],
        env={**env, "COLUMNS": "250"},  # long temporary paths: not folded mid-word
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc


@pytest.fixture
def env(tmp_path):
    return cli_env(tmp_path, bare=True)


def _bad_golden(tmp_path: Path) -> Path:
    """The demo golden set with a duplicate id and an invalid ``answerable``: offenders deep in a
    105-query file, as a user's typo would be."""
    text = DEMO_GOLDEN.read_text(encoding="utf-8")
    bad = text.replace("id: fact-002", "id: fact-001", 1).replace("answerable: true", "answerable: maybe", 1)
    assert bad != text
    return write(tmp_path / "bad-golden.yaml", bad)


@pytest.mark.parametrize(
    "case",
    ["typo'd config key", "missing golden file", "bad golden file", "missing replay trace"],
)
def test_bad_input_exits_2_before_dagster_is_imported(env, tmp_path, case):
    if case == "typo'd config key":
        args = ["--config", str(write(tmp_path / "eval.yaml", "golen: golden.yaml\nk: [1, 5]\n"))]
        expected = ["eval.yaml:line 1", "field 'golen': unknown key"]
    elif case == "missing golden file":
        args = ["--golden", str(tmp_path / "nope.yaml")]
        expected = ["nope.yaml: no such file"]
    elif case == "bad golden file":
        args = ["--golden", str(_bad_golden(tmp_path))]
        expected = ["fact-001", "answerable"]
    else:
        config = write(tmp_path / "replay.yaml", "system:\n  kind: replay\n  path: no-such-trace.jsonl\n")
        args = ["--config", str(config)]
        expected = ["no-such-trace.jsonl — field 'system.path': no such file"]
    result, proc = probe(env, "run", *args)
    assert result["code"] == 2, proc.stderr
    said = " ".join(proc.stderr.split())  # rich may wrap the message at the terminal width
    for text in expected:
        assert text in said, proc.stderr
    # the config and golden files are read before pandas is imported; the trace once the system is built
    allowed = {"pandas", "numpy"} if case == "missing replay trace" else set()
    assert set(result["heavy"]) <= allowed, f"{case}: imported {result['heavy']} before refusing the input"
    # nothing was registered or written: no instance database, no artifacts
    assert not (Path(env["DAGSTER_HOME"]) / "history").exists()


@pytest.fixture(scope="module")
def store_with_a_run(tmp_path_factory):
    """A DAGSTER_HOME holding one real demo run (``fast-1``), made with ``kebab-eval run``."""
    tmp = tmp_path_factory.mktemp("fast-paths")
    environment = cli_env(tmp, bare=True)
    made = cli(environment, "run", "--run-id", "fast-1")
    assert made.returncode == 0, made.stderr
    return environment


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["runs", "list"], "fast-1"),
        (["history", "--csv"], "fast-1,"),
        (["export", "fast-1", "--format", "json"], '"run_id": "fast-1"'),
        (["compare", "fast-1", "fast-1"], "# Comparison: `fast-1` vs baseline `fast-1`"),
        (["baseline", "show"], "no pinned baselines"),
    ],
)
def test_reading_commands_do_not_import_dagster(store_with_a_run, args, expected):
    result, proc = probe(store_with_a_run, *args)
    assert result["code"] == 0, proc.stderr
    assert expected in proc.stdout
    assert not DAGSTER & set(result["heavy"]), f"{args}: imported {result['heavy']}"


def test_runs_list_asks_dagster_when_the_instance_is_not_on_default_storage(tmp_path):
    """A dagster.yaml naming its storage (here SQLite elsewhere): the partitions live there, so
    `runs list` asks the instance, and lists what was registered in it."""
    environment = cli_env(tmp_path, bare=True)
    home = Path(environment["DAGSTER_HOME"])
    elsewhere = tmp_path / "elsewhere"
    (home / "dagster.yaml").write_text(
        f"storage:\n  sqlite:\n    base_dir: {elsewhere}\ntelemetry:\n  enabled: false\n"
    )
    added = cli(environment, "runs", "add", "elsewhere-1")
    assert added.returncode == 0, added.stderr
    assert (elsewhere / "history" / "runs" / "index.db").exists()
    assert not (home / "history").exists()
    assert default_sqlite_index(home) is None
    result, proc = probe(environment, "runs", "list")
    assert result["code"] == 0, proc.stderr
    assert "elsewhere-1" in proc.stdout
    assert "dagster" in result["heavy"]  # the fallback really asked Dagster


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    keys=st.lists(
        st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,20}", fullmatch=True).filter(lambda k: ".." not in k),
        unique=True,
        max_size=8,
    )
)
def test_sqlite_read_equals_what_the_instance_returns(instance, keys):
    """Keys added in any order (and another partitions definition's, which must not show): the direct
    read returns exactly Dagster's list, in Dagster's order; the instance is never asked."""
    home = Path(instance.root_directory)
    existing = instance.get_dynamic_partitions(EVAL_RUNS)
    new = [k for k in keys if k not in existing]
    instance.add_dynamic_partitions(EVAL_RUNS, new)
    instance.add_dynamic_partitions("other_partitions", ["not-a-run", *new[:1]])

    def no_instance():
        raise AssertionError("the instance was asked although its SQLite index is readable")

    expected = list(instance.get_dynamic_partitions(EVAL_RUNS))
    assert list(registered_runs(home, no_instance)) == expected
    assert expected[len(existing) :] == new


def test_missing_or_foreign_index_database(tmp_path):
    """No index yet: nothing registered ([]); a database without Dagster's table: None (the caller
    then asks the instance, as the subprocess test above shows); a dagster.yaml that cannot be
    parsed: not read directly; one naming only settings that leave storage alone: read directly."""
    home = tmp_path / "home"
    home.mkdir()
    index = default_sqlite_index(home)
    assert index == home / "history" / "runs" / "index.db"
    assert read_sqlite_partitions(index) == []
    index.parent.mkdir(parents=True)
    sqlite3.connect(index).close()  # an empty database file
    assert read_sqlite_partitions(index) is None
    (home / "dagster.yaml").write_text("telemetry: [unclosed\n")
    assert default_sqlite_index(home) is None
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\nnux:\n  enabled: false\n")
    assert default_sqlite_index(home) == index


@given(
    path=st.one_of(
        st.text(st.characters(blacklist_characters="\x00", blacklist_categories=["Cs"]), max_size=40),
        st.sampled_from(["a//b/", "./x", "~/x", "", "/", "file:///x/y", "local:///x", "s3:bucket/x", "C:/x"]),
    ),
    as_path=st.booleans(),
)
def test_atomic_plain_paths_need_no_fsspec_and_mean_what_upath_says(path, as_path):
    """The fast answer for plain paths (no UPath, so no fsspec import on every command) is UPath's."""
    from upath import UPath

    given_path = Path(path) if as_path else path
    expected_local = UPath(given_path).protocol in ("", "file", "local")
    assert is_local(given_path) == expected_local
    if expected_local:
        assert local_path(given_path) == Path(UPath(given_path).path)


def test_ref_cli_mode_help_names_the_index_modes():
    """The ref CLI names the modes without importing the index: the same three, in the same order."""
    assert get_args(RetrievalMode) == ALL_MODES
