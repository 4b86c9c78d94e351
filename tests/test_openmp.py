"""OpenMP threads that wait passively (foundation/openmp): set before an engine loads libgomp,
never over a value the user set, and set by the local judge before it imports PyTorch.

Each case runs in a fresh interpreter: libgomp reads the variable once per process, and this
process may have imported PyTorch already."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# What a C library sees (libgomp reads getenv, not os.environ), after wait_passively().
PROBE = """
import ctypes, json, sys
from kebab_eval_pipeline.foundation.openmp import wait_passively
in_force = wait_passively()
libc = ctypes.CDLL(None)
libc.getenv.restype = ctypes.c_char_p
seen = libc.getenv(b"OMP_WAIT_POLICY")
print(json.dumps({"in_force": in_force, "c_env": seen.decode() if seen else None}))
"""


def _python(code: str, env_changes: dict[str, str | None], pythonpath: list[Path] = ()) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in [*pythonpath, ROOT])
    for key, value in env_changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_unset_becomes_passive_for_the_c_library() -> None:
    assert _python(PROBE, {}) == {"in_force": True, "c_env": "PASSIVE"}


def test_a_value_the_user_set_wins() -> None:
    assert _python(PROBE, {"OMP_WAIT_POLICY": "ACTIVE"}) == {"in_force": False, "c_env": "ACTIVE"}
    assert _python(PROBE, {"OMP_WAIT_POLICY": "passive"}) == {"in_force": True, "c_env": "passive"}


def test_too_late_once_an_engine_is_imported(tmp_path) -> None:
    """After PyTorch is imported libgomp has read the variable: the call says it is not in force."""
    (tmp_path / "torch.py").write_text("")  # stands for torch: only its presence in sys.modules counts
    out = _python("import torch\n" + PROBE, {}, [tmp_path])
    assert out == {"in_force": False, "c_env": "PASSIVE"}


@pytest.mark.parametrize(("preset", "expected"), [(None, "PASSIVE"), ("ACTIVE", "ACTIVE")])
def test_the_local_judge_sets_it_before_it_imports_torch(tmp_path, preset, expected) -> None:
    """A ``torch`` that records the variable when imported, then fails as a missing extra would:
    the judge's load had set PASSIVE by then (or kept the user's value), and reported the missing
    extra as usual."""
    (tmp_path / "torch.py").write_text(
        "import builtins, os\nbuiltins.SEEN_AT_TORCH_IMPORT = os.environ.get('OMP_WAIT_POLICY')\n"
        "raise ImportError('no torch here', name='torch')\n"
    )
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    code = f"""
    import builtins, json
    from kebab_eval_pipeline.foundation.errors import InputError
    from kebab_eval_pipeline.judge.completion import Decoding
    from kebab_eval_pipeline.judge.local import LocalJudge
    try:
        LocalJudge({str(model)!r}).complete([{{"role": "user", "content": "hi"}}], Decoding(max_tokens=1))
    except InputError as exc:
        error = str(exc)
    print(json.dumps({{"seen": getattr(builtins, "SEEN_AT_TORCH_IMPORT", None), "error": error}}))
    """
    out = _python(code, {"OMP_WAIT_POLICY": preset}, [tmp_path])
    assert out["seen"] == expected
    assert "judge extra is missing (torch)" in out["error"]
