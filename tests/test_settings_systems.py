"""Run settings for the four system kinds (SPEC §12): the union on ``kind``, per-kind validation
with line numbers, relative paths, and the CLI/launchpad system ``kind`` override."""

from __future__ import annotations

from pathlib import Path

import pytest

from kebab_eval_pipeline.chain.settings import load_settings, settings_from_dict
from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.orchestration.resources import EvalSettingsResource, SystemUnderTestResource
from kebab_eval_pipeline.systems.kinds.command import CommandSystemSettings
from kebab_eval_pipeline.systems.kinds.http import HttpSystemSettings
from kebab_eval_pipeline.systems.kinds.reference import ReferenceSystemSettings
from kebab_eval_pipeline.systems.kinds.replay import ReplaySystemSettings
from tests.conftest import write

EXAMPLES = Path(__file__).resolve().parents[1] / "docs" / "examples"


def test_kind_selects_the_settings_model_and_reference_is_the_default():
    assert isinstance(settings_from_dict({}).system, ReferenceSystemSettings)
    assert isinstance(settings_from_dict({"system": {"mode": "lexical"}}).system, ReferenceSystemSettings)
    command = settings_from_dict({"system": {"kind": "command", "search_argv": ["kebab", "{query}"]}}).system
    assert isinstance(command, CommandSystemSettings)
    assert (command.timeout_s, command.concurrency, command.ask_argv) == (30.0, 2, None)
    http = settings_from_dict({"system": {"kind": "http", "search_url": "http://127.0.0.1:1/s"}}).system
    assert isinstance(http, HttpSystemSettings)
    assert (http.retries, http.concurrency, http.search_request) == (2, 4, {"query": "{query}", "k": "{k}"})
    replay = settings_from_dict({"system": {"kind": "replay", "path": "t.jsonl"}}).system
    assert isinstance(replay, ReplaySystemSettings) and replay.format == "auto"


def test_every_problem_of_a_system_block_is_listed_with_its_line(tmp_path: Path):
    cfg = write(
        tmp_path / "run.yaml",
        "system:\n"
        "  kind: http\n"
        "  search_url: ftp://nowhere\n"
        "  retries: 99\n"
        "  headers_from_env: {Authorization: 'not a name'}\n"
        "  colour: blue\n",
    )
    with pytest.raises(InputError) as info:
        load_settings(cfg)
    text = str(info.value)
    assert "4 problems" in text
    assert "line 3" in text and "system.search_url" in text and "http:// or https://" in text
    assert "line 4" in text and "system.retries" in text
    assert "line 5" in text and "environment variable name" in text
    assert "line 6" in text and "system.colour" in text and "unknown key" in text


@pytest.mark.parametrize(
    ("system", "needle"),
    [
        ({"kind": "command"}, "system.search_argv"),
        ({"kind": "command", "search_argv": []}, "system.search_argv"),
        ({"kind": "command", "search_argv": ["x", "{mode}"]}, "set system.mode"),
        ({"kind": "http", "search_url": "http://h/s", "search_request": {"m": "{mode}"}}, "set system.mode"),
        ({"kind": "replay"}, "system.path"),
        ({"kind": "replay", "path": "t", "format": "csv"}, "system.format"),
        ({"kind": "quantum"}, "system.kind must be one of reference, command, http, replay, python"),
        ({"kind": "command", "search_argv": ["x"], "response": {"hit_fields": {"colour": "c"}}}, "colour"),
    ],
)
def test_system_block_errors_name_the_field(system: dict, needle: str):
    with pytest.raises(InputError) as info:
        settings_from_dict({"system": system})
    assert needle in str(info.value)


def test_relative_paths_resolve_against_the_config_folder(tmp_path: Path):
    replay = write(tmp_path / "cfg" / "replay.yaml", "system: {kind: replay, path: traces/t.jsonl}\n")
    assert load_settings(replay).system.path == str((tmp_path / "cfg" / "traces" / "t.jsonl").resolve())
    command = write(tmp_path / "cfg" / "cmd.yaml", "system: {kind: command, search_argv: [x], cwd: tools}\n")
    assert load_settings(command).system.cwd == str((tmp_path / "cfg" / "tools").resolve())


def test_system_kind_override_starts_from_an_empty_block(tmp_path: Path):
    cfg = write(tmp_path / "run.yaml", "system: {kind: reference, chunk_size: 500}\n")
    # the same kind keeps the file's block
    same = EvalSettingsResource(config_file=str(cfg)).load(SystemUnderTestResource(kind="reference"))
    assert same.system.chunk_size == 500
    # another kind drops it, so its required keys are reported
    with pytest.raises(InputError) as info:
        EvalSettingsResource(config_file=str(cfg)).load(SystemUnderTestResource(kind="replay"))
    assert "system.path" in str(info.value)


def test_overrides_keep_a_per_query_command_valid(tmp_path: Path):
    """A run override (``--baseline``, ``--golden``, a mode) re-validates only what the file set:
    the per_query command's "jsonl-only key set" check used to see every default as written and
    refused ``kebab-eval run --config command.yaml --baseline none`` (exit 2)."""
    cfg = write(tmp_path / "run.yaml", "system: {kind: command, search_argv: [prog, '{query}']}\n")
    settings = EvalSettingsResource(config_file=str(cfg), baseline="none").load(
        SystemUnderTestResource(mode="hybrid")
    )
    assert settings.baseline == "none"
    assert settings.system.kind == "command" and settings.system.mode == "hybrid"
    assert settings.system.max_restarts == 3 and "max_restarts" not in settings.system.model_fields_set
    # no system block at all: the default reference system, overridden
    bare = write(tmp_path / "bare.yaml", "k: [1, 5]\n")
    ref = EvalSettingsResource(config_file=str(bare), k=[2]).load(SystemUnderTestResource(chunk_size=300))
    assert (ref.system.kind, ref.system.chunk_size, ref.k) == ("reference", 300, [2])
    # what the file wrote still stands (and is still checked)
    jsonl_key = write(tmp_path / "bad.yaml", "system: {kind: command, search_argv: [p], max_restarts: 2}\n")
    with pytest.raises(InputError, match="max_restarts"):
        EvalSettingsResource(config_file=str(jsonl_key), baseline="none").load(None)


def test_shipped_example_configs_load():
    for path in sorted(EXAMPLES.glob("*/*.yaml")):
        if path.name.startswith("golden"):  # golden sets, not run configs
            continue
        settings = load_settings(path)
        assert settings.system.kind in ("reference", "command", "http", "replay"), path


def test_a_relative_program_path_is_relative_to_the_config_file_unless_cwd_is_set(tmp_path: Path):
    cfg = write(
        tmp_path / "cfg" / "cmd.yaml",
        "system: {kind: command, search_argv: [./bin/search, '{query}'], ask_argv: [kebab, ask]}\n",
    )
    system = load_settings(cfg).system
    assert system.search_argv == [str((tmp_path / "cfg" / "bin" / "search").resolve()), "{query}"]
    assert system.ask_argv == ["kebab", "ask"]  # a name on PATH stays a name
    with_cwd = write(
        tmp_path / "cfg" / "cwd.yaml", "system: {kind: command, search_argv: [./s], cwd: tools}\n"
    )
    assert load_settings(with_cwd).system.search_argv == ["./s"]
