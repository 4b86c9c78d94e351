"""The run config's judge: block and its launchpad/CLI overrides: defaults, path resolution and
errors that name the file, the line and the key."""

from __future__ import annotations

import pytest

from kebab_eval_pipeline.chain.settings import load_settings
from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.judge.config import JudgeSettings, variant_of
from kebab_eval_pipeline.orchestration.resources import EvalSettingsResource
from tests.conftest import write


def test_the_judge_is_off_by_default_and_an_empty_block_is_the_local_default(tmp_path) -> None:
    assert load_settings(None).judge is None
    judge = load_settings(write(tmp_path / "on.yaml", "judge: {}\n")).judge
    assert judge == JudgeSettings()
    assert (judge.backend, judge.model, judge.prompt_version, judge.spot_check_rate) == (
        "local",
        None,
        "v2",
        0.1,
    )
    assert judge.spot_check_judge().prompt_version == "v2-alt"
    assert judge.decoding().temperature == 0.0


def test_local_paths_resolve_against_the_config_folder_and_endpoint_names_do_not(tmp_path) -> None:
    local = load_settings(
        write(tmp_path / "cfg" / "a.yaml", "judge: {model: models/j.gguf, cache_dir: c}\n")
    ).judge
    assert local.model == str(tmp_path / "cfg" / "models" / "j.gguf")
    assert local.cache_dir == str(tmp_path / "cfg" / "c")
    endpoint = load_settings(
        write(
            tmp_path / "cfg" / "b.yaml",
            "judge: {backend: openai_compatible, base_url: 'http://127.0.0.1:1/v1/', model: qwen2.5:14b}\n",
        )
    ).judge
    assert endpoint.model == "qwen2.5:14b" and endpoint.base_url == "http://127.0.0.1:1/v1"


@pytest.mark.parametrize(
    ("block", "field", "reason"),
    [
        ("{backend: openai_compatible}", "judge", "needs base_url and model"),
        (
            "{prompt_version: v9}",
            "judge.prompt_version",
            "unknown prompt version 'v9' (known: v1, v1-alt, v2, v2-alt)",
        ),
        ("{api_key_env: 'sk-live 123'}", "judge.api_key_env", "environment variable name"),
        ("{base_url: 'ftp://x'}", "judge.base_url", "http:// or https://"),
        ("{spot_check: {prompt_version: v2}}", "judge", "the second judge equals the main judge"),
        ("{spot_check_rate: 1.5}", "judge.spot_check_rate", "less than or equal to 1"),
        ("{temperature: 0.7}", "judge.temperature", "unknown key"),
        (
            "{prices: {m: {input_per_mtok: -1}}}",
            "judge.prices.m.input_per_mtok",
            "greater than or equal to 0",
        ),
    ],
)
def test_a_bad_judge_block_names_file_line_key_and_reason(
    tmp_path, block: str, field: str, reason: str
) -> None:
    path = write(tmp_path / "bad.yaml", f"k: [1, 5]\njudge: {block}\n")
    with pytest.raises(InputError) as err:
        load_settings(path)
    [offender] = err.value.offenders
    assert offender.file == str(path) and offender.field == field
    assert offender.position == "line 2"
    assert reason in offender.reason


def test_variant_of_flips_between_the_two_wordings() -> None:
    assert variant_of("v1") == "v1-alt" and variant_of("v1-alt") == "v1"
    assert variant_of("v2") == "v2-alt" and variant_of("v2-alt") == "v2"


def test_launchpad_and_cli_overrides_turn_the_judge_on_off_or_change_it(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("KEBAB_EVAL_CONFIG", raising=False)
    cfg = write(tmp_path / "j.yaml", "judge: {context_k: 2, prompt_version: v1-alt}\n")
    assert EvalSettingsResource().load().judge is None
    assert EvalSettingsResource(judge=True).load().judge == JudgeSettings()
    kept = EvalSettingsResource(config_file=str(cfg), judge=True).load().judge
    assert (kept.context_k, kept.prompt_version) == (2, "v1-alt")
    assert EvalSettingsResource(config_file=str(cfg), judge=False).load().judge is None
    changed = (
        EvalSettingsResource(config_file=str(cfg), judge_prompt_version="v1", judge_model="/m.gguf")
        .load()
        .judge
    )
    assert (changed.context_k, changed.prompt_version, changed.model) == (2, "v1", "/m.gguf")
    assert changed.spot_check_judge().prompt_version == "v1-alt"
