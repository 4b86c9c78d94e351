from pathlib import Path

import pytest

from kebab_eval_pipeline.chain.settings import load_settings
from kebab_eval_pipeline.foundation.demo import DEMO_GOLDEN
from kebab_eval_pipeline.foundation.errors import InputError
from tests.conftest import write


def test_defaults_are_the_embedded_demo():
    s = load_settings(None)
    assert s.golden_path() == DEMO_GOLDEN
    assert s.system.kind == "reference" and s.system.mode == "lexical"
    assert s.k == [1, 3, 5, 10]
    assert set(s.effective_gates()) == {"answer_precision", "chr", "under_refusal_rate", "over_refusal_rate"}
    assert not any(g.blocking for g in s.effective_gates().values())


def test_spec_shape_with_k_under_system_and_regression_gates(tmp_path: Path):
    cfg = write(
        tmp_path / "cfg" / "run.yaml",
        """
golden: ../golden.yaml
system:
  kind: reference
  corpus: docs
  chunk_size: 400
  k: [10, 1, 5, 5]
  answers: false
baseline: none
gates:
  mrr: {min: 0.5}
  regression: {mrr: {max_drop: 0.02}}
""",
    )
    s = load_settings(cfg)
    assert s.k == [1, 5, 10]
    assert s.answers is False
    assert s.golden == str((tmp_path / "golden.yaml").resolve())
    assert s.system.corpus == str((tmp_path / "cfg" / "docs").resolve())
    assert s.gates["mrr"].min == 0.5 and s.gates["mrr"].blocking
    assert s.regression_gates["mrr"].max_drop == 0.02


def test_unknown_keys_are_listed_with_line_numbers(tmp_path: Path):
    cfg = write(
        tmp_path / "run.yaml", "golden: g.yaml\nsystem:\n  kind: reference\n  chunk_sise: 10\nbaselin: none\n"
    )
    with pytest.raises(InputError) as exc:
        load_settings(cfg)
    text = str(exc.value)
    assert "2 problems" in text
    assert "line 4" in text and "system.chunk_sise" in text and "unknown key" in text
    assert "line 5" in text and "baselin" in text
    assert str(cfg) in text


def test_malformed_yaml_names_line_and_column(tmp_path: Path):
    cfg = write(tmp_path / "run.yaml", "golden: [unclosed\nsystem: {kind: reference}\n")
    with pytest.raises(InputError) as exc:
        load_settings(cfg)
    assert "line 2" in str(exc.value) and "column" in str(exc.value) and "invalid YAML" in str(exc.value)


def test_missing_config_file(tmp_path: Path):
    with pytest.raises(InputError, match="not found"):
        load_settings(tmp_path / "nope.yaml")


def test_gate_without_bound_and_bad_overlap(tmp_path: Path):
    cfg = write(
        tmp_path / "run.yaml",
        "gates:\n  mrr: {blocking: true}\nsystem: {chunk_size: 100, chunk_overlap: 100}\n",
    )
    with pytest.raises(InputError) as exc:
        load_settings(cfg)
    assert "a gate needs 'min' or 'max'" in str(exc.value)
    assert "chunk_overlap must be smaller" in str(exc.value)


@pytest.mark.parametrize("bad", [".nan", ".inf", "-.inf"])
def test_non_finite_thresholds_are_refused(tmp_path, bad):
    """A NaN threshold would make a gate that can never pass (every comparison with NaN is false)."""
    cfg = tmp_path / "eval.yaml"
    cfg.write_text(f"gates:\n  mrr: {{min: {bad}}}\n")
    with pytest.raises(InputError) as err:
        load_settings(cfg)
    assert "eval.yaml" in str(err.value) and "mrr" in str(err.value)


def test_relevance_level_default_and_bounds(tmp_path: Path):
    assert load_settings(None).relevance_level == 1  # trec_eval's default -l 1: every number unchanged
    ok = write(tmp_path / "ok.yaml", "relevance_level: 2\n")
    assert load_settings(ok).relevance_level == 2
    for value, reason in (
        ("0", "greater than or equal to 1"),
        ("-1", "greater than or equal to 1"),
        ("2147483648", "less than or equal to 2147483647"),  # grades are 32-bit (TREC qrels)
        ("true", "True is not a grade: give an integer ≥ 1"),
        ('"2"', "'2' is not a grade"),
        ("1.5", "1.5 is not a grade"),
        ("null", "None is not a grade"),
    ):
        cfg = write(tmp_path / "bad.yaml", f"baseline: none\nrelevance_level: {value}\n")
        with pytest.raises(InputError) as exc:
            load_settings(cfg)
        text = str(exc.value)
        assert "relevance_level" in text and "line 2" in text and reason in text, (value, text)
