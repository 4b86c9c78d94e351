"""Two runs judged by different judges: the comparison says so, keeps the judged numbers but calls
none of them better or worse, and skips a regression gate on them — until one run is re-judged
with the other's judge. Real runs, a real ``rejudge``, through the CLI (the judge a scripted
endpoint on 127.0.0.1)."""

from __future__ import annotations

import dataclasses
import json

import pytest
import yaml

from kebab_eval_pipeline.compare.judge_drift import is_judged_metric, judge_drift
from tests.judge.scripted import ScriptedJudge, scripted_endpoint
from tests.judge.test_calibration import write_labels
from tests.judge.test_judge_assets import KEY_ENV, SECRET, judge_config
from tests.test_cli import cli, env, no_traceback

assert env  # the fixture, imported for this module's tests


def test_judged_metrics_are_named_by_family_slices_included():
    assert is_judged_metric("judge_groundedness") and is_judged_metric("judge_correctness[category=howto]")
    assert is_judged_metric("judge_groundedness_corrected") and is_judged_metric("judge_groundedness_kappa")
    assert (
        not is_judged_metric("mrr") and not is_judged_metric("judge_cost_usd") and not is_judged_metric("x")
    )


def test_drift_is_a_different_digest_or_prompt_version_of_the_main_judge():
    def info(digest, prompt):
        return {"judge": {"judge": {"model": "m", "digest": digest, "prompt_version": prompt}}}

    assert judge_drift(info("d1", "v1"), info("d1", "v1"), "a", "b") is None
    assert judge_drift(info("d1", "v1"), {}, "a", "b") is None  # one run not judged: nothing to compare
    drift = judge_drift(info("d1", "v1"), info("d2", "v1-alt"), "a", "b")
    assert drift["differs"] == ["digest", "prompt_version"]
    assert "`kebab-eval rejudge b --model m --prompt-version v1`" in drift["note"]


class HarshAlt(ScriptedJudge):
    """The scripted judge, two points harsher (floored at 0) under the v2-alt prompt wording."""

    def script(self, messages):
        said = super().script(messages)
        if said.prompt_version != "v2-alt":
            return said
        return dataclasses.replace(said, score=max(0, said.score - 2))


def _rows(report: dict) -> dict[str, dict]:
    return {row["metric"]: row for row in report["per_metric"]}


def test_a_comparison_across_judges_refuses_judged_verdicts_until_rejudged(env, tmp_path):
    env = {**env, KEY_ENV: SECRET, "COLUMNS": "400"}
    # the v2-alt wording scores lower: a large judged "difference" that is only the judge's
    judge = HarshAlt()
    with scripted_endpoint(judge) as endpoint:
        cfg = judge_config(tmp_path / "cfg", endpoint.base_url)
        doc = yaml.safe_load(cfg.read_text())
        doc["gates"] = {
            "regression": {
                "judge_groundedness": {"max_drop": 0.1, "non_inferior": 3.0},
                "mrr": {"max_drop": 0.1},
            }
        }
        gated = tmp_path / "cfg" / "gated.yaml"
        gated.write_text(yaml.safe_dump(doc))
        for run_id in ("j1", "j2"):
            ran = cli(env, "run", "--config", str(cfg), "--run-id", run_id)
            assert ran.returncode == 0, ran.stderr
        alt = cli(env, "rejudge", "j2", "--config", str(cfg), "--prompt-version", "v2-alt")
        assert alt.returncode == 0, alt.stderr
        across = cli(env, "compare", "j1", "j2", "--json", "--config", str(gated))
        gate_run = cli(env, "compare", "j1", "j2", "--config", str(gated))
        back = cli(env, "rejudge", "j2", "--config", str(cfg), "--prompt-version", "v2")
        assert back.returncode == 0, back.stderr
        same = cli(env, "compare", "j1", "j2", "--json", "--config", str(gated))
    for proc in (across, gate_run, same):
        no_traceback(proc)
    assert across.returncode == 0, across.stderr

    report = json.loads(across.stdout)
    drift = report["judge_drift"]
    assert drift["differs"] == ["prompt_version"] and drift["a"]["prompt_version"] == "v2"
    assert drift["b"]["prompt_version"] == "v2-alt"
    assert any(w.startswith("the runs were judged by different judges") for w in report["warnings"])
    rows = _rows(report)
    ground = rows["judge_groundedness"]
    assert ground["delta"] < -1.0 and ground["p_value"] < 0.001  # a "difference" made by the judge alone
    assert ground["significance"] is None and ground["direction"] is None and ground["judge_drift"] is True
    assert ground["leaning"] == "worse"  # the number is still shown for what it is
    assert rows["mrr"]["judge_drift"] is False  # retrieval: unaffected (the same system twice)
    gates = {g["name"]: g for g in report["gates"]}
    ground_gate = gates["gate_judge_groundedness_max_drop"]
    assert ground_gate["skipped"] and ground_gate["passed"]
    assert ground_gate["reason"].endswith(
        "skipped: the runs were judged by different judges; re-judge one run with the other's judge"
    )
    assert not gates["gate_mrr_max_drop"]["skipped"] and gates["gate_mrr_max_drop"]["passed"]
    # the report's margin section claims nothing the skipped gate refused to decide
    assert gates["gate_judge_groundedness_non_inferior"]["skipped"]
    [margin] = [m for m in report["margins"] if m["metric"] == "judge_groundedness"]
    assert margin["verdict"] is None and margin["text"].startswith(
        "not decided: the runs were judged by different"
    )
    assert gate_run.returncode == 0, gate_run.stderr  # a skipped gate never fails the comparison
    assert "judged by different judges" in gate_run.stdout + gate_run.stderr

    # re-judged with the first run's judge (from the cache): comparable again, no drift, gate decides
    assert same.returncode == 0, same.stderr
    again = json.loads(same.stdout)
    assert "judge_drift" not in again
    assert _rows(again)["judge_groundedness"]["delta"] == 0.0
    assert not {g["name"]: g for g in again["gates"]}["gate_judge_groundedness_max_drop"]["skipped"]


def test_corrected_estimates_compare_and_gate_across_judges(env, tmp_path):
    """Both runs calibrated against one person's labels: the corrected estimates compare them even
    though different judges scored them, and the regression gate decides on them, saying so."""
    from scipy.special import ndtri

    from kebab_eval_pipeline.chain.artifacts import JudgeArtifact
    from kebab_eval_pipeline.judge.calibration import answer_items
    from kebab_eval_pipeline.store.runs import RunStore

    env = {**env, KEY_ENV: SECRET, "COLUMNS": "400"}
    labels = tmp_path / "labels.jsonl"
    with scripted_endpoint(HarshAlt()) as endpoint:
        cfg = judge_config(tmp_path / "cfg", endpoint.base_url)
        assert cli(env, "run", "--config", str(cfg), "--run-id", "j1").returncode == 0
        store = RunStore(tmp_path / "dagster_home" / "kebab-eval" / "artifacts")
        items = answer_items(JudgeArtifact.from_tables(*store.read("judge", "j1")).judgements)
        ground = items[items["criterion"] == "groundedness"].iloc[::2]  # every other item: a person
        write_labels(labels, ground)  # who scores as the v2 judge does
        doc = yaml.safe_load(cfg.read_text())
        doc["judge"]["calibration"] = {"labels": str(labels), "min_labels": 10, "min_kappa": -1}
        doc["gates"] = {"regression": {"judge_groundedness": {"max_drop": 0.5, "non_inferior": 1.5}}}
        calibrated = tmp_path / "cfg" / "calibrated.yaml"
        calibrated.write_text(yaml.safe_dump(doc))
        for args in (
            ("rejudge", "j1"),
            ("run", "--run-id", "j2"),
            ("rejudge", "j2", "--prompt-version", "v2-alt"),
        ):
            done = cli(env, *args, "--config", str(calibrated))
            assert done.returncode == 0, (args, done.stderr)
        compared = cli(env, "compare", "j1", "j2", "--json", "--config", str(calibrated))
    assert compared.returncode == 0, compared.stderr
    report = json.loads(compared.stdout)
    assert report["judge_drift"]["differs"] == ["prompt_version"]
    [row] = report["corrected"]
    assert row["metric"] == "judge_groundedness" and row["labelled_a"] == row["labelled_b"] == len(ground)
    # re-derived from each run's stored interval: Δ = b − a, half-width z·(se_a + se_b)
    stored = {}
    for run_id in ("j1", "j2"):
        info = store.read("run_metrics", run_id)[1]["judge_calibration"]
        [c] = [c for c in info["criteria"] if c["criterion"] == "groundedness"]
        stored[run_id] = c["corrected"]
    z = float(ndtri(0.975))
    se = [(p["ci_high"] - p["ci_low"]) / (2 * z) for p in stored.values()]
    delta = stored["j2"]["estimate"] - stored["j1"]["estimate"]
    assert row["delta"] == round(delta, 4)
    assert (row["ci_low"], row["ci_high"]) == (
        pytest.approx(delta - z * sum(se)),
        pytest.approx(delta + z * sum(se)),
    )
    raw = _rows(report)["judge_groundedness"]["delta"]
    assert raw < -1.0 and abs(row["delta"]) < 0.5  # the harsh judge's drop, corrected away
    assert row["ci_low"] < 0 < row["ci_high"] and row["direction"] is None
    gates = {g["name"]: g for g in report["gates"]}
    drop, inferior = gates["gate_judge_groundedness_max_drop"], gates["gate_judge_groundedness_non_inferior"]
    for gate in (drop, inferior):  # decided on the corrected estimates: not skipped despite the drift
        assert not gate["skipped"] and gate["reason"].startswith("judge_groundedness corrected by labels")
    assert drop["passed"] and drop["delta"] == row["delta"]
    assert inferior["verdict"] == ("non-inferior" if row["ci_low"] > -1.5 else "inconclusive")
    [margin] = [m for m in report["margins"] if m["metric"] == "judge_groundedness"]  # as the gate decided
    assert (margin["verdict"], margin["passed"], margin["text"]) == (
        inferior["verdict"],
        inferior["passed"],
        inferior["reason"],
    )
    assert (
        "## Judged metrics corrected by labels"
        in cli(env, "compare", "j1", "j2", "--config", str(calibrated)).stdout
    )
