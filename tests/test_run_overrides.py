"""The CLI's fail-fast settings (``settings_for_run``, no Dagster) are the settings the run uses
(``run_settings(build_definitions(...))``, through the Dagster resources), for any overrides."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kebab_eval_pipeline.chain.run_overrides import CONFIG_ENV, settings_for_run
from kebab_eval_pipeline.definitions import build_definitions, run_settings
from kebab_eval_pipeline.foundation.demo import DEMO_GOLDEN
from kebab_eval_pipeline.foundation.errors import InputError
from tests.conftest import write

CONFIG = """\
golden: {golden}
k: [1, 3, 10]
baseline: previous
system:
  kind: reference
  mode: lexical
  chunk_size: 500
judge:
  model: ./models/judge.gguf
  prompt_version: v1
"""

OVERRIDES = st.fixed_dictionaries(
    {},
    optional={
        "golden": st.just(str(DEMO_GOLDEN)),
        "system_kind": st.sampled_from(["reference", "replay"]),
        "mode": st.sampled_from(["lexical", "vector", "hybrid"]),
        "answers": st.booleans(),
        "baseline": st.sampled_from(["auto", "none", "pinned", "previous", "run-7"]),
        "chunk_size": st.sampled_from([200, 400, 1200]),
        "judge": st.booleans(),
        "judge_model": st.just("other-model"),
        "judge_prompt_version": st.sampled_from(["v1", "v1-alt"]),
    },
)


def _outcome(make):
    """The settings as a dict, or the InputError's message: both paths must agree on either."""
    try:
        return make().model_dump()
    except InputError as exc:
        return f"InputError: {exc}"


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(overrides=OVERRIDES, from_env=st.booleans())
def test_fail_fast_settings_are_the_run_settings(tmp_path, monkeypatch, overrides, from_env):
    config = write(tmp_path / "eval.yaml", CONFIG.format(golden=DEMO_GOLDEN))
    monkeypatch.delenv(CONFIG_ENV, raising=False)
    given_config = None if from_env else config
    if from_env:  # no --config: $KEBAB_EVAL_CONFIG names the file, for both paths
        monkeypatch.setenv(CONFIG_ENV, str(config))
    fast = _outcome(lambda: settings_for_run(given_config, overrides))
    slow = _outcome(lambda: run_settings(build_definitions(given_config, overrides=overrides)))
    assert fast == slow


def test_overrides_apply_as_documented(tmp_path):
    config = write(tmp_path / "eval.yaml", CONFIG.format(golden=DEMO_GOLDEN))
    plain = settings_for_run(config)
    assert plain.k == [1, 3, 10] and plain.judge is not None and plain.system.chunk_size == 500
    changed = settings_for_run(config, {"chunk_size": 300, "judge": False, "answers": True, "mode": None})
    assert changed.system.chunk_size == 300 and changed.system.mode == "lexical"
    assert changed.judge is None and changed.answers is True
    with pytest.raises(InputError, match=r"system\.path"):
        settings_for_run(config, {"system_kind": "replay"})  # a new kind starts from an empty block


def test_overrides_of_a_per_query_command_config_check_only_what_the_file_set(tmp_path):
    """``run --config command.yaml --baseline none`` must not see every default as written (the
    per_query command's "jsonl-only key set" check refused it, exit 2); what the file wrote stands."""
    cfg = write(tmp_path / "run.yaml", "system: {kind: command, search_argv: [prog, '{query}']}\n")
    settings = settings_for_run(cfg, {"baseline": "none", "mode": "hybrid"})
    assert settings.baseline == "none"
    assert settings.system.kind == "command" and settings.system.mode == "hybrid"
    assert settings.system.max_restarts == 3 and "max_restarts" not in settings.system.model_fields_set
    bare = write(tmp_path / "bare.yaml", "k: [1, 5]\n")
    ref = settings_for_run(bare, {"chunk_size": 300, "answers": True})
    assert (ref.system.kind, ref.system.chunk_size, ref.k, ref.answers) == ("reference", 300, [1, 5], True)
    jsonl_key = write(tmp_path / "bad.yaml", "system: {kind: command, search_argv: [p], max_restarts: 2}\n")
    with pytest.raises(InputError, match="max_restarts"):
        settings_for_run(jsonl_key, {"baseline": "none"})
