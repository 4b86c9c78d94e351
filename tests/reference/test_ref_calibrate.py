"""Calibrating the refusal gate: the curve's arithmetic, the choice rule, agreement with what the
answerer really does in a run, and ``kebab-eval ref calibrate`` as a real process."""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pytest

from kebab_eval_pipeline.chain import pipeline
from kebab_eval_pipeline.chain.settings import RunSettings
from kebab_eval_pipeline.reference.answer import GATE_FEATURES
from kebab_eval_pipeline.reference.calibrate import (
    CURVE_COLUMNS,
    THRESHOLDS,
    choose_gate,
    gate_observations,
    refusal_curve,
)
from kebab_eval_pipeline.systems.factory import build_system
from tests import forked_cli
from tests.conftest import REPO, demo_golden_subset


def observations(answerable: list[bool], values: list[float]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "query_id": [f"q{i}" for i in range(len(values))],
            "lang": "en",
            "answerable": answerable,
            **{f: values for f in GATE_FEATURES},
        }
    )


def test_curve_by_hand() -> None:
    # answerable: 0.2, 0.5, 0.8, NaN (always refused); unanswerable: 0.1, 0.4
    obs = observations([True, True, True, True, False, False], [0.2, 0.5, 0.8, np.nan, 0.1, 0.4])
    curve = refusal_curve(obs)
    assert list(curve.columns) == list(CURVE_COLUMNS)
    assert len(curve) == len(GATE_FEATURES) * len(THRESHOLDS)
    at = curve[curve["feature"] == "top_hit"].set_index("threshold")
    # t = 0: only the NaN one refused; both unanswerable answered
    assert at.loc[0.0, "over_refusal_rate"] == 0.25 and at.loc[0.0, "under_refusal_rate"] == 1.0
    # t = 0.45: answerable 0.2 and NaN refused (2/4); unanswerable both refused
    assert at.loc[0.45, "over_refusal_rate"] == 0.5
    assert at.loc[0.45, "refusal_correctness"] == 1.0 and at.loc[0.45, "unanswerable_answered"] == 0
    # a value equal to the threshold passes the gate (refused only when below)
    assert at.loc[0.5, "answerable_refused"] == 2 and at.loc[0.51, "answerable_refused"] == 3
    assert at.loc[1.0, "over_refusal_rate"] == 1.0
    assert (at["n_answerable"] == 4).all() and (at["n_unanswerable"] == 2).all()


def test_choice_lowest_over_refusal_meeting_refusal_correctness() -> None:
    obs = observations([True, True, True, True, False, False], [0.2, 0.5, 0.8, np.nan, 0.1, 0.4])
    choice = choose_gate(refusal_curve(obs), min_refusal_correctness=0.9, max_over_refusal=0.15)
    # refusal correctness 1.0 needs t > 0.40; over-refusal is 0.5 for t in (0.40, 0.50]:
    # thresholds 0.41..0.50, the middle of that run
    assert choice.feature == "top_hit"
    assert 0.41 <= choice.threshold <= 0.50 and choice.threshold in (0.45, 0.46)
    assert (choice.over_refusal_rate, choice.refusal_correctness) == (0.5, 1.0)
    assert not choice.meets_targets and "above the 0.15 target" in choice.reason
    relaxed = choose_gate(refusal_curve(obs), min_refusal_correctness=0.5, max_over_refusal=0.5)
    assert relaxed.over_refusal_rate == 0.25 and relaxed.refusal_correctness == 0.5 and relaxed.meets_targets


def test_choice_without_any_threshold_reaching_the_target() -> None:
    # an unanswerable query scores 1.0: no threshold < 1.01 refuses it
    obs = observations([True, False, False], [0.3, 1.0, 0.1])
    choice = choose_gate(refusal_curve(obs), min_refusal_correctness=0.9)
    assert choice.refusal_correctness == 0.5 and not choice.meets_targets
    assert "no threshold reaches refusal correctness 0.9" in choice.reason


def test_choice_needs_both_kinds_of_query() -> None:
    with pytest.raises(ValueError, match="answerable and unanswerable"):
        choose_gate(refusal_curve(observations([True, True], [0.3, 0.5])))
    curve = refusal_curve(observations([False], [0.3]))
    assert curve["over_refusal_rate"].isna().all()  # empty denominator → null
    with pytest.raises(ValueError, match="answerable and unanswerable"):
        choose_gate(curve)


@pytest.mark.parametrize("feature", GATE_FEATURES)
def test_curve_agrees_with_the_answerers_real_refusals(feature: str, tmp_path) -> None:
    """The demo golden set through the real pipeline: the queries a run refuses at a threshold are
    exactly those the calibration's observations put below it."""
    threshold = 0.3
    settings = RunSettings.model_validate(
        {"system": {"kind": "reference", "refusal_feature": feature, "refusal_threshold": threshold}}
    )
    golden = pipeline.load_golden_artifact(settings)
    system = build_system(settings)
    obs = gate_observations(system.index, golden.queries, k=10)
    results = pipeline.retrieve(settings, golden).results.outcomes
    refused_in_run = set(results.loc[results["refused"].astype(bool), "query_id"])
    values = obs.set_index("query_id")[feature]
    refused_by_curve = set(values[(values < threshold) | values.isna()].index)
    assert refused_by_curve == refused_in_run
    assert 0 < len(refused_in_run) < len(obs)
    row = refusal_curve(obs).query("feature == @feature and threshold == @threshold").iloc[0]
    answerable = obs.set_index("query_id")["answerable"]
    assert row["answerable_refused"] == sum(answerable[q] for q in refused_in_run)
    # the rates equal what the pipeline's own answer metrics report for that run
    retrieval = pipeline.retrieve(settings, golden)
    scores = pipeline.score(settings, golden, retrieval).scores
    assert row["over_refusal_rate"] == pytest.approx(scores["over_refusal"].mean())
    assert row["refusal_correctness"] == pytest.approx(scores["refusal_correct"].mean())


def run_cli(tmp_path, *args):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KEBAB_EVAL_", "DAGSTER_"))}
    env["DAGSTER_HOME"] = str(tmp_path)
    env["KEBAB_EVAL_INDEX_CACHE"] = str(tmp_path / "indexes")
    return forked_cli.run_cli(["ref", "calibrate", *args], env=env, cwd=REPO)


def test_cli_on_the_demo(tmp_path) -> None:
    proc = run_cli(tmp_path, "--json", "--out", str(tmp_path / "curve.csv"))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["queries"] == {"answerable": 92, "unanswerable": 13}
    curve = pd.read_csv(tmp_path / "curve.csv")
    assert len(curve) == len(doc["curve"]) == len(GATE_FEATURES) * len(THRESHOLDS)
    choice = doc["choice"]
    assert choice["refusal_correctness"] >= 0.9
    feasible = curve[curve["refusal_correctness"] >= 0.9]
    assert choice["over_refusal_rate"] == pytest.approx(feasible["over_refusal_rate"].min())
    assert doc["current"]["feature"] == "top_hit"
    # a gate off the 0.01 grid is reported at its exact threshold, not a rounded neighbour
    off_grid = tmp_path / "off-grid.yaml"
    off_grid.write_text("system: {kind: reference, refusal_threshold: 0.355}\n", encoding="utf-8")
    exact = json.loads(run_cli(tmp_path, "--config", str(off_grid), "--json").stdout)
    assert exact["current"]["threshold"] == 0.355
    at_035 = curve[(curve["feature"] == "top_hit") & (curve["threshold"] == 0.35)].iloc[0]
    at_036 = curve[(curve["feature"] == "top_hit") & (curve["threshold"] == 0.36)].iloc[0]
    assert (
        at_035["answerable_refused"] <= exact["current"]["answerable_refused"] <= at_036["answerable_refused"]
    )
    text = run_cli(tmp_path)
    assert text.returncode == 0, text.stderr
    assert "recommended gate:" in text.stdout and "refusal_threshold:" in text.stdout
    # a golden file and an output path that read as console markup are printed as written
    named = demo_golden_subset(tmp_path / "demo [/b] [bold]set.yaml", slice(None))
    marked = tmp_path / "curve[/b][bold].csv"
    text = run_cli(tmp_path, "--golden", str(named), "--out", str(marked))
    assert text.returncode == 0, text.stderr
    assert f"golden set: {named} (92 answerable, 13 unanswerable)" in text.stdout
    assert f"curve written to {marked}" in text.stdout and marked.exists()


def test_cli_refuses_what_it_cannot_calibrate(tmp_path) -> None:
    answerable_only = tmp_path / "golden.yaml"
    answerable_only.write_text(
        'schema_version: "1"\nqueries:\n  - id: q1\n    query: how long to ferment kimchi\n'
        "    supports: [{rel_path: korean/kimchi.md}]\n",
        encoding="utf-8",
    )
    proc = run_cli(tmp_path, "--golden", str(answerable_only))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "answerable and unanswerable" in proc.stderr
    config = tmp_path / "command.yaml"
    config.write_text("system: {kind: command, search_argv: [echo, '{query}']}\n", encoding="utf-8")
    proc = run_cli(tmp_path, "--config", str(config))
    assert proc.returncode == 2 and "needs the reference system" in proc.stderr
