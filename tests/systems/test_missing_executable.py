"""A command system whose executable is missing is reported by the field that holds it and the
executable's name, with the folder it was looked for from (issue 23)."""

from __future__ import annotations

import os
import sys

import pytest

from kebab_eval_pipeline.chain.settings import settings_from_dict
from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.systems.factory import build_system

MISSING = "kebab-no-such-tool-xyz"


def offender(tmp_path, **system):
    settings = settings_from_dict({"system": {"kind": "command", "cwd": str(tmp_path), **system}})
    with pytest.raises(InputError) as info:
        build_system(settings)
    (only,) = info.value.offenders
    return only


@pytest.mark.parametrize(
    "system, field",
    [
        ({"search_argv": [MISSING, "{query}"]}, "system.search_argv[0]"),
        (
            {"search_argv": [sys.executable, "-c", "1", "{query}"], "ask_argv": [MISSING]},
            "system.ask_argv[0]",
        ),
        (
            {"search_argv": [sys.executable, "-c", "1", "{query}"], "version_argv": [MISSING]},
            "system.version_argv[0]",
        ),
        ({"protocol": "jsonl", "argv": [MISSING, "--serve"]}, "system.argv[0]"),
    ],
)
def test_the_field_and_the_executable_are_named(tmp_path, system, field):
    found = offender(tmp_path, **system)
    assert found.field == field
    assert found.reason == f"executable {MISSING!r} not found on PATH (cwd {tmp_path})"
    assert f"field '{field}': executable '{MISSING}' not found on PATH" in found.render()


def test_a_file_in_cwd_is_pointed_at(tmp_path):
    (tmp_path / "mysys").write_text("#!/bin/sh\n")
    found = offender(tmp_path, search_argv=["mysys", "{query}"])
    assert found.reason == (
        f"executable 'mysys' not found on PATH (cwd {tmp_path}; "
        "./mysys is in that folder: write it as a path)"
    )


def test_a_path_is_checked_from_cwd(tmp_path):
    found = offender(tmp_path, search_argv=["./bin/mysys", "{query}"])
    assert (found.field, found.reason) == (
        "system.search_argv[0]",
        f"executable './bin/mysys' not found (cwd {tmp_path})",
    )
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "mysys").write_text("#!/bin/sh\n")
    os.chmod(tmp_path / "bin" / "mysys", 0o644)
    found = offender(tmp_path, search_argv=["./bin/mysys", "{query}"])
    assert found.reason == f"executable './bin/mysys' is not an executable file (cwd {tmp_path})"


def test_a_missing_cwd_is_named_as_cwd(tmp_path):
    found = offender(tmp_path / "absent", search_argv=[sys.executable, "{query}"])
    assert found.field == "system.cwd" and "is not a folder" in found.reason
