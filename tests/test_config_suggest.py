"""A typo'd config key gets a "did you mean" naming the key meant, at every nesting level (issue 23)."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kebab_eval_pipeline.chain.settings import RunSettings, load_settings
from kebab_eval_pipeline.foundation.config_suggest import model_at, suggestion, unknown_key_reason
from kebab_eval_pipeline.foundation.errors import InputError
from tests.conftest import write
from tests.forked_cli import run_cli
from tests.test_cli import cli_env

TYPOS = """\
systm:
  kind: reference
gates:
  mrr: {mn: 0.3}
compare:
  seeed: 1
judge:
  modle: x
system_helth: null
"""

SYSTEM_TYPOS = """\
system:
  kind: command
  serch_argv: [x]
  search_argv: [x, "{query}"]
  anwers: false
  headers: {X-A: b}
"""


def problems(path: Path) -> list[str]:
    with pytest.raises(InputError) as info:
        load_settings(path)
    return sorted(o.render() for o in info.value.offenders)


def test_each_level_names_the_key_meant(tmp_path):
    path = write(tmp_path / "run.yaml", TYPOS)
    assert problems(path) == sorted(
        f"{path}:{where}"
        for where in (
            "line 2 — field 'systm': unknown key — did you mean 'system'?",
            "line 4 — field 'gates.mrr.mn': unknown key — did you mean 'min'?",
            "line 6 — field 'compare.seeed': unknown key — did you mean 'seed'?",
            "line 8 — field 'judge.modle': unknown key — did you mean 'model'?",
            "line 9 — field 'system_helth': unknown key — did you mean 'system_health'?",
        )
    )


def test_system_keys_come_from_its_kind(tmp_path):
    """A command system's keys (and k/answers, accepted under system too); an http-only key in a
    command system, far from every command key, gets no guess."""
    path = write(tmp_path / "run.yaml", SYSTEM_TYPOS)
    assert problems(path) == sorted(
        f"{path}:{where}"
        for where in (
            "line 3 — field 'system.serch_argv': unknown key — did you mean 'search_argv'?",
            "line 5 — field 'system.anwers': unknown key — did you mean 'answers'?",
            "line 6 — field 'system.headers': unknown key",
        )
    )


def test_cli_exits_2_with_the_suggestion(tmp_path):
    config = write(tmp_path / "run.yaml", "systm:\n  kind: reference\n")
    proc = run_cli(["run", "--config", str(config)], env=cli_env(tmp_path), timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert "field 'systm': unknown key — did you mean 'system'?" in proc.stderr


#: Every place of the run config with a model of its own (pydantic's locations, union tags in).
PLACES = [
    (),
    ("system", "reference"),
    ("system", "command"),
    ("system", "http"),
    ("system", "replay"),
    ("system", "python"),
    ("gates", "mrr"),
    ("regression_gates", "mrr"),
    ("verdict_gates", "regression"),
    ("compare",),
    ("system_health",),
    ("judge",),
]


def test_every_place_has_a_model():
    assert all(model_at(RunSettings, place) is not None for place in PLACES)
    assert model_at(RunSettings, ("system", "http", "headers")) is None  # free-form: no guesses


@given(st.sampled_from(PLACES), st.data())
def test_a_key_missing_one_letter_is_recognised(place, data):
    keys = [f.alias or name for name, f in model_at(RunSettings, place).model_fields.items()]
    key = data.draw(st.sampled_from([k for k in keys if len(k) >= 4]))
    i = data.draw(st.integers(0, len(key) - 1))
    typo = key[:i] + key[i + 1 :]
    if typo in keys:
        return  # e.g. a key that is another key minus a letter: not a typo
    reason = unknown_key_reason(RunSettings, (*place, typo))
    meant = suggestion(typo, keys)
    assert meant is not None and reason == f"unknown key — did you mean '{meant}'?"
    ratio = difflib.SequenceMatcher(None, typo.lower(), meant.lower()).ratio()
    assert ratio >= difflib.SequenceMatcher(None, typo.lower(), key.lower()).ratio()  # the closest
