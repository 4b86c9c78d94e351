"""A judge measured against a person's labels: κ equal to statsmodels' on the joined items, the
corrected mean equal to the reference PPI++ implementation, labels matched by the exact item (a
changed answer is unlabelled) — and ``kebab-eval judge label`` / ``judge calibrate`` end to end
on a judged run stored by a real ``kebab-eval run`` (the judge a scripted endpoint on 127.0.0.1),
the labels typed through a pipe as a person types them."""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import dagster as dg
import numpy as np
import pandas as pd
import pytest
import yaml
from statsmodels.stats.inter_rater import cohens_kappa

from kebab_eval_pipeline.chain.artifacts import JudgeArtifact, RunMetricsArtifact
from kebab_eval_pipeline.judge.agreement import confusion_matrix
from kebab_eval_pipeline.judge.calibration import answer_items, calibrate_criterion, calibrate_run
from kebab_eval_pipeline.judge.label_sample import labelling_order
from kebab_eval_pipeline.judge.labels import item_hash, parse_labels, read_labels, reference_labels
from kebab_eval_pipeline.judge.ppi import ppi_mean
from kebab_eval_pipeline.store.runs import RunStore
from tests import docs_pages
from tests.judge.scripted import ScriptedJudge, scripted_endpoint
from tests.judge.test_judge_assets import KEY_ENV, SECRET, judge_config, judged_run, key
from tests.orchestration.test_chain import run_partition
from tests.test_cli import cli, env, no_traceback
from tests.test_cli_matching import check_of

assert env and key  # the fixtures, imported for this module's tests


def _synthetic(n_items: int, n_labelled: int, seed: int):
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 6, n_items)
    judged = np.clip(truth + rng.integers(-1, 3, n_items), 0, 5).astype(float)  # biased upwards
    items = pd.DataFrame(
        {
            "query_id": [f"q{i}" for i in range(n_items)],
            "criterion": "groundedness",
            "item_hash": [item_hash(f"item {i}") for i in range(n_items)],
            "judge_score": judged,
            "model": "m",
            "digest": "sha256:d",
            "prompt_version": "v1",
            "judge_input": "{}",
        }
    )
    chosen = rng.choice(n_items, n_labelled, replace=False)
    labels = pd.DataFrame(
        {
            "criterion": "groundedness",
            "query_id": items["query_id"].iloc[chosen].to_numpy(),
            "item_hash": items["item_hash"].iloc[chosen].to_numpy(),
            "label": truth[chosen],
            "labeller": "ana",
        }
    )
    slices = pd.Series(np.where(np.arange(n_items) % 2, "faq", "howto"), index=items["query_id"])
    return items, labels, slices, truth, judged, chosen


def test_kappa_and_corrected_mean_equal_independent_implementations():
    items, labels, slices, truth, judged, chosen = _synthetic(300, 60, seed=1)
    result = calibrate_criterion(items, reference_labels(labels), labels, slices, "groundedness", 3.0)
    assert (result.items, result.labelled, result.labellers) == (300, 60, ["ana"])
    assert result.corrected_note == ""  # 60 labels: no small-sample warning
    table = confusion_matrix(truth[chosen], judged[chosen].astype(int), list(range(6)))
    assert result.graded["kappa"] == pytest.approx(cohens_kappa(table, wt="quadratic", return_results=False))
    verdict = confusion_matrix(truth[chosen] >= 3, judged[chosen] >= 3, [False, True])
    assert result.binary["kappa"] == pytest.approx(cohens_kappa(verdict, return_results=False))
    assert result.binary["confusion"] == verdict.tolist()
    rest = np.setdiff1d(np.arange(300), chosen)
    expected = ppi_mean(truth[chosen], judged[chosen], judged[rest])
    assert result.corrected == pytest.approx(expected.as_dict(), rel=1e-12)
    if importlib.util.find_spec("ppi_py") is not None:  # the reference implementation (judge extra)
        from ppi_py import ppi_mean_ci, ppi_mean_pointestimate

        point = ppi_mean_pointestimate(truth[chosen].astype(float), judged[chosen], judged[rest])
        low, high = ppi_mean_ci(truth[chosen].astype(float), judged[chosen], judged[rest], alpha=0.05)
        assert result.corrected["estimate"] == pytest.approx(float(np.ravel(point)[0]))
        assert (result.corrected["ci_low"], result.corrected["ci_high"]) == pytest.approx(
            (float(np.ravel(low)[0]), float(np.ravel(high)[0]))
        )
    assert result.judged_mean == pytest.approx(judged.mean())
    assert result.judged_mean > truth.mean() + 0.3  # the judge's bias, which the correction removes
    assert {s["slice"] for s in result.slices} == {"faq", "howto"}
    assert sum(s["n"] for s in result.slices) == 60
    # every number the report shows, re-derived: the judged mean's interval by scipy, each slice's
    # verdict κ by statsmodels
    from scipy import stats

    low, high = stats.norm.interval(0.95, loc=judged.mean(), scale=stats.sem(judged))
    assert result.judged_ci == pytest.approx((low, high))
    slice_of = np.where(chosen % 2, "faq", "howto")
    for row in result.slices:
        inside = slice_of == row["slice"]
        table = confusion_matrix(truth[chosen][inside] >= 3, judged[chosen][inside] >= 3, [False, True])
        assert row["n"] == inside.sum()
        assert row["kappa"] == pytest.approx(cohens_kappa(table, return_results=False))


def test_a_changed_answer_is_unlabelled_and_too_few_labels_say_why():
    items, labels, slices, *_ = _synthetic(20, 3, seed=2)
    changed = labels.assign(item_hash=[item_hash("the answer as it was"), *labels["item_hash"].iloc[1:]])
    result = calibrate_criterion(items, reference_labels(changed), changed, slices, "groundedness", 3.0)
    assert result.labelled == 2 and result.corrected is not None
    assert result.corrected_note.startswith("only 2 labelled items: below 50 the interval runs narrow")
    one = changed.iloc[:2]
    result = calibrate_criterion(items, reference_labels(one), one, slices, "groundedness", 3.0)
    assert result.labelled == 1 and result.corrected is None
    assert result.corrected_note == "1 labelled item(s): the corrected mean needs at least 2"
    none = calibrate_criterion(
        items, reference_labels(one.iloc[:0]), one.iloc[:0], slices, "groundedness", 3.0
    )
    assert (
        none.labelled == 0
        and none.graded is None
        and none.judged_mean == pytest.approx(items["judge_score"].mean())
    )


def test_the_documented_label_line():
    block = docs_pages.snippet("json", '{"criterion": "groundedness", "query_id": "fact-028"')
    [label] = parse_labels(block.text, block.where)
    assert (label.criterion, label.query_id, label.label, label.labeller) == (
        "groundedness",
        "fact-028",
        4,
        "ana",
    )
    assert label.item_hash == item_hash('{"answer": "Shiro miso uses 5–7% salt [1]."}')
    assert label.labelled_at.utcoffset().total_seconds() == 0


def label_session(env, args, typed: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kebab_eval_pipeline.cli", *args],
        input=typed,
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_label_then_calibrate_a_stored_judged_run(env, tmp_path):
    """The guide's two commands as written (run in a folder of their own), the run judged first."""
    env = {**env, KEY_ENV: SECRET, "COLUMNS": "400"}
    with scripted_endpoint() as endpoint:
        cfg = judge_config(tmp_path / "cfg", endpoint.base_url)
        run = cli(env, "run", "--config", str(cfg), "--run-id", "j1")
        assert run.returncode == 0, run.stderr
    block = docs_pages.snippet("bash", "kebab-eval judge label j1")
    label_line, calibrate_line = (shlex.split(line)[1:] for line in block.text.strip().splitlines())
    labels = tmp_path / "labels" / "groundedness.jsonl"
    # 5, 0, a typo (asked again), a skip, 4, the scale, 2, then stop
    first = label_session(env, label_line, "5\n0\nseven\ns\n4\n?\n2\nq\n", tmp_path)
    assert first.returncode == 0, first.stderr
    no_traceback(first)
    assert "'seven' is not a score" in first.stdout
    assert first.stdout.rstrip().endswith(
        "labelled 4, skipped 1, left 55: written to labels/groundedness.jsonl"
    )

    store = RunStore(Path(env["DAGSTER_HOME"]) / "kebab-eval" / "artifacts")
    judge = JudgeArtifact.from_tables(*store.read("judge", "j1"))
    golden = store.read("golden_set", "j1")[0]["queries"]
    items = answer_items(judge.judgements)
    ground = items[items["criterion"] == "groundedness"]
    ground = ground.assign(
        slice=ground["query_id"].map(dict(zip(golden["query_id"], golden["category"], strict=True)))
    )
    order = labelling_order(ground, 3.0, seed=0, limit=8)
    written = read_labels(labels)
    expected_items = list(order["item_hash"].iloc[[0, 1, 3, 4]])  # the third was skipped
    assert list(written["item_hash"]) == expected_items
    assert list(written["label"]) == [5, 0, 4, 2] and set(written["labeller"]) == {"ana"}
    assert set(written["run_id"]) == {"j1"} and set(written["criterion"]) == {"groundedness"}
    # the person saw what the judge saw: the first item's question is on screen
    first_seen = json.loads(order["judge_input"].iloc[0])
    assert f"QUESTION: {first_seen['question']}" in first.stdout
    assert "judge_score" not in first.stdout and "score 0-5 (s skip, q quit, ? scale): " in first.stdout

    # resumed: the four labelled items are not shown again; the session ends at end of input
    again = label_session(env, label_line, "3\n", tmp_path)
    assert again.returncode == 0, again.stderr
    assert "56 of a sample of 60 item(s) (seed 0; 4 already labelled by ana)" in again.stdout
    written = read_labels(labels)
    assert list(written["item_hash"]) == [*expected_items, order["item_hash"].iloc[2]]

    shown = cli(env, *calibrate_line, "--format", "json", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    doc = json.loads(shown.stdout)
    [ground_doc] = [c for c in doc["criteria"] if c["criterion"] == "groundedness"]
    report = calibrate_run(judge.judgements, written, golden, 3.0)
    assert ground_doc == json.loads(json.dumps(report[0].as_dict()))
    by_hash = ground.set_index("item_hash")["judge_score"]
    person = written["label"].to_numpy()
    judged = np.rint(by_hash.loc[written["item_hash"]].to_numpy()).astype(int)
    table = confusion_matrix(person, judged, list(range(6)))
    kappa = cohens_kappa(table, wt="quadratic", return_results=False)
    assert ground_doc["labelled"] == 5 and ground_doc["graded"]["kappa"] == pytest.approx(kappa)
    assert ground_doc["judge"]["model"] == "scripted-judge"
    text = cli(env, *calibrate_line, cwd=tmp_path)
    assert text.returncode == 0, text.stderr
    assert "groundedness — judge scripted-judge" in text.stdout and "5 labelled by ana" in text.stdout
    assert "corrected mean" in text.stdout and "κ on the 0–5 scale (quadratic weights):" in text.stdout

    # the labels configured as the run's calibration, blocking at a κ no judge reaches: rejudge
    # (every judgement from the cache) prints the failed check and exits 1
    strict = _calibrated_config(
        tmp_path / "cfg", "http://127.0.0.1:9/v1", labels, min_kappa=1.0, min_labels=2
    )
    doc = yaml.safe_load(strict.read_text())
    doc["judge"]["calibration"]["blocking"] = True
    with scripted_endpoint() as endpoint:
        doc["judge"]["base_url"] = endpoint.base_url
        strict.write_text(yaml.safe_dump(doc))
        rejudged = cli(env, "rejudge", "j1", "--config", str(strict))
    assert rejudged.returncode == 1, rejudged.stderr
    no_traceback(rejudged)
    assert (
        "check FAIL judge_calibration: the judge agrees with the labels below κ 1 (graded): groundedness κ"
        in (rejudged.stdout)
    )
    assert endpoint.judge.calls == 0  # the judgements came from the cache
    assert "+ judge_calibration): " in rejudged.stdout  # counted with the gates

    # CI outputs say what the exit code says: the failed blocking check is a JUnit <failure>
    import xml.etree.ElementTree as ET
    from datetime import UTC, datetime

    from kebab_eval_pipeline.chain.settings import load_settings
    from kebab_eval_pipeline.cli.ci_outputs import stored_view
    from kebab_eval_pipeline.reporting.junit import render_junit

    view = stored_view(
        RunStore(Path(env["DAGSTER_HOME"]) / "kebab-eval" / "artifacts"), "j1", load_settings(strict)
    )
    suite = ET.fromstring(render_junit(view, datetime.now(UTC), 1.0)).find("testsuite")
    [case] = [c for c in suite.iter("testcase") if c.get("name").startswith("judge_calibration ")]
    assert case.get("name") == "judge_calibration min_kappa_graded 1"
    failure = case.find("failure")
    assert failure is not None and failure.get("message").startswith(
        "the judge agrees with the labels below κ 1"
    )
    assert int(suite.get("failures")) >= 1


def test_bad_input_exits_2_naming_it(env, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"criterion": "groundedness"}\n')
    unjudged = cli(env, "run", "--run-id", "plain")
    assert unjudged.returncode == 0, unjudged.stderr

    def label(*options: str):
        return cli(
            env,
            "judge",
            "label",
            "plain",
            *options,
            "--labels",
            str(tmp_path / "none.jsonl"),
            "--labeller",
            "a",
        )

    outputs = {
        "not judged": cli(env, "judge", "calibrate", "plain", "--labels", str(tmp_path / "none.jsonl")),
        "never ran": cli(env, "judge", "calibrate", "nope", "--labels", str(tmp_path / "none.jsonl")),
        "bad file": cli(env, "judge", "calibrate", "plain", "--labels", str(bad)),
        "criterion": cli(
            env, "judge", "label", "plain", "--labels", str(bad), "--labeller", "a", "--criterion", "x"
        ),
        "pool of a missing run": label("--against", "gone", "--criterion", "relevance"),
        "relevance options elsewhere": label("--against", "gone", "--depth", "5"),
    }
    for proc in outputs.values():
        assert proc.returncode == 2, proc.stderr
        no_traceback(proc)
    assert "plain — field 'run_id': it has no judgements: judge it with `kebab-eval rejudge plain` first" in (
        outputs["not judged"].stderr
    )
    assert "nope — field 'run_id': no stored judgements for this run" in outputs["never ran"].stderr
    assert f"{bad}:line 1 — field 'query_id': Field required" in outputs["bad file"].stderr
    assert "--criterion: 'x': use groundedness, correctness, relevance" in outputs["criterion"].stderr
    assert "gone — field '--against': no stored run under" in outputs["pool of a missing run"].stderr
    # every offender at once: two options only relevance takes
    elsewhere = outputs["relevance options elsewhere"].stderr
    assert "bad labelling options (2 problems)" in elsewhere
    assert "--against: only with --criterion relevance (not groundedness)" in elsewhere
    assert "--depth: only with --criterion relevance (not groundedness)" in elsewhere


def write_labels(path: Path, items: pd.DataFrame, label_of=lambda score: score) -> None:
    """One groundedness label by "ana" per row of ``items`` (``answer_items`` rows): ``label_of``
    the judge's own score, rounded (by default the score itself: a person who agrees)."""
    from kebab_eval_pipeline.judge.labels import Label, append_label

    for row in items.itertuples(index=False):
        append_label(
            path,
            Label(
                criterion="groundedness",
                query_id=row.query_id,
                item_hash=row.item_hash,
                label=label_of(round(float(row.judge_score))),
                labeller="ana",
                labelled_at="2026-12-06T15:10:00+00:00",
            ),
        )


def _labels_for(judgements: pd.DataFrame, path: Path, *, agree: bool, n: int) -> None:
    """``n`` groundedness labels of a run's items: the judge's own score (``agree``) or its mirror
    (5 − score: a person who disagrees everywhere)."""
    items = answer_items(judgements)
    ground = items[items["criterion"] == "groundedness"].head(n)
    write_labels(path, ground, (lambda s: s) if agree else (lambda s: 5 - s))


def _calibrated_config(tmp_path: Path, base_url: str, labels: Path, gates=None, **calibration) -> Path:
    cfg = judge_config(tmp_path, base_url, **({"gates": gates} if gates else {}))
    doc = yaml.safe_load(cfg.read_text())
    doc["judge"]["calibration"] = {
        "labels": os.path.relpath(labels, tmp_path),
        "min_labels": 10,
        **calibration,
    }
    cfg.write_text(yaml.safe_dump(doc))
    return cfg


def test_a_calibrated_run_records_the_agreement_and_a_blocking_check_fails_it(instance, tmp_path, key):
    assert key
    first_defs, _, _ = judged_run(instance, tmp_path / "first", "plain")
    judgements = JudgeArtifact.from_tables(
        *RunStore(first_defs.resources["artifact_storage"].base).read("judge", "plain")
    ).judgements
    agreeing, disagreeing = tmp_path / "cal" / "agree.jsonl", tmp_path / "cal" / "disagree.jsonl"
    _labels_for(judgements, agreeing, agree=True, n=12)
    _labels_for(judgements, disagreeing, agree=False, n=12)

    with scripted_endpoint() as endpoint:
        good_defs, good = run_partition(
            instance,
            "calibrated",
            config=_calibrated_config(
                tmp_path / "cal",
                endpoint.base_url,
                agreeing,
                gates={"judge_groundedness_corrected": {"min": 0.5}},
            ),
        )
        bad_defs, bad = run_partition(
            instance,
            "miscalibrated",
            config=_calibrated_config(tmp_path / "cal", endpoint.base_url, disagreeing, blocking=True),
        )
    assert good.success
    passed = check_of(good, "judge_calibration")
    assert passed.passed and passed.severity == dg.AssetCheckSeverity.WARN
    [materialized] = [
        e.step_materialization_data.materialization
        for e in good.get_asset_materialization_events()
        if e.asset_key.path[-1] == "run_metrics"
    ]
    shown = materialized.metadata["judge_calibration"].value  # in the UI, beside the metrics
    assert shown["check"]["status"] == "passed" and shown["criteria"][0]["judge"]["model"] == "scripted-judge"
    assert materialized.metadata["metrics"].value["judge_groundedness_kappa"] == 1.0
    assert "groundedness κ 1.00 over 12" in passed.description
    assert "correctness: 0 labelled item(s), fewer than min_labels 10" in passed.description
    gate = check_of(good, "gate_judge_groundedness_corrected_min")  # a gate holds a corrected mean
    assert gate.passed and gate.metadata["value"].value > 0.5

    store = RunStore(good_defs.resources["artifact_storage"].base)
    metrics = RunMetricsArtifact.from_tables(*store.read("run_metrics", "calibrated"))
    record = metrics.info["judge_calibration"]
    assert record["labels"] == str(agreeing) and record["labels_read"] == 12
    assert record["labels_sha256"] == hashlib.sha256(agreeing.read_bytes()).hexdigest()
    golden = store.read("golden_set", "calibrated")[0]["queries"]
    stored_judgements = JudgeArtifact.from_tables(*store.read("judge", "calibrated")).judgements
    expected = calibrate_run(stored_judgements, read_labels(agreeing), golden, 3.0)
    assert record["criteria"] == json.loads(json.dumps([c.as_dict() for c in expected]))
    ground = expected[0]
    assert metrics.metrics["judge_groundedness_corrected"] == round(ground.corrected["estimate"], 4)
    assert (
        metrics.metrics["judge_groundedness_kappa"] == 1.0
        and metrics.denominators["judge_groundedness_kappa"] == 12
    )
    assert metrics.metrics["judge_correctness_corrected"] is None
    report = store.read_file("run_metrics", "calibrated", "run.md").decode("utf-8")
    assert "## Judge calibration" in report and "Check `judge_calibration`: **passed**" in report
    assert "| groundedness | scripted-judge v2 | 12 | 1.00 [1.00, 1.00] |" in report

    # labels that disagree everywhere, blocking: the check fails as an error and the run fails
    assert not bad.success
    failed = check_of(bad, "judge_calibration")
    assert not failed.passed and failed.severity == dg.AssetCheckSeverity.ERROR
    assert failed.description.startswith(
        "the judge agrees with the labels below κ 0.4 (graded): groundedness κ -"
    )
    bad_metrics = RunMetricsArtifact.from_tables(
        *RunStore(bad_defs.resources["artifact_storage"].base).read("run_metrics", "miscalibrated")
    )
    assert bad_metrics.info["outcome"]["failed"] == ["judge_calibration"]
    assert bad_metrics.metrics["judge_groundedness_kappa"] < 0


def test_the_relevance_judge_is_measured_against_the_golden_sets_verdicts(instance, tmp_path, key):
    """``judge.relevance_sample``: hits the golden set judged are asked the relevance question; the
    run stores the judge's agreement with the golden verdicts, re-derivable from what it stored."""
    from kebab_eval_pipeline.chain.settings import load_settings
    from kebab_eval_pipeline.judge.relevance import RELEVANCE_SCORE_ONLY_VERSION
    from kebab_eval_pipeline.judge.relevance_calibration import MAX_RANK
    from kebab_eval_pipeline.metrics.matching import match_hits

    assert key
    with scripted_endpoint() as endpoint:
        cfg = judge_config(tmp_path, endpoint.base_url)
        doc = yaml.safe_load(cfg.read_text())
        doc["judge"]["relevance_sample"] = 30
        cfg.write_text(yaml.safe_dump(doc))
        defs, result = run_partition(instance, "rel", config=cfg)
    assert result.success
    store = RunStore(defs.resources["artifact_storage"].base)
    judge = JudgeArtifact.from_tables(*store.read("judge", "rel"))
    asked = judge.judgements[judge.judgements["role"] == "calibration"]
    assert len(asked) == 30 and set(asked["criterion"]) == {"relevance"}
    # beside the default v2 prompt, the relevance question asks for the score alone too
    assert set(asked["prompt_version"]) == {RELEVANCE_SCORE_ONLY_VERSION}
    assert set(asked["completion_tokens"]) == {1}
    sample = pd.DataFrame(judge.info["relevance_sample"])
    assert len(sample) == 30 and sample["rank"].max() <= MAX_RANK

    # the golden verdicts are the matcher's, re-derived from the stored hits and supports
    hits = store.read("retrieval_results", "rel")[0]["hits"]
    golden = store.read("golden_set", "rel")[0]
    settings = load_settings(cfg)
    matches = match_hits(hits[hits["rank"] <= MAX_RANK], golden["supports"], str(settings.match))
    best = matches.groupby(["query_id", "rank"])["grade"].max()
    for row in sample.itertuples(index=False):
        assert best.loc[(row.query_id, row.rank)] == row.gold_grade
        assert row.gold_relevant == (row.gold_grade >= settings.relevance_level)

    metrics = RunMetricsArtifact.from_tables(*store.read("run_metrics", "rel"))
    record = metrics.info["judge_relevance_calibration"]
    scores = dict(zip([item_hash(j) for j in asked["judge_input"]], asked["score"], strict=True))
    said = sample["item_hash"].map(scores)
    both = said.notna().to_numpy()
    assert record["n"] == int(both.sum()) and record["asked"] == 30
    assert record["no_verdict"] == 30 - int(both.sum())
    gold = sample["gold_relevant"].to_numpy()[both]
    judged = said.to_numpy(dtype=float)[both] >= 3.0
    table = confusion_matrix(gold, judged, [False, True])
    if record["kappa"] is not None:
        assert record["kappa"] == pytest.approx(cohens_kappa(table, return_results=False))
    assert metrics.metrics["judge_relevance_kappa"] == (
        None if record["kappa"] is None else round(record["kappa"], 4)
    )
    assert record["confusion"] == [
        [int((~gold & ~judged).sum()), int((~gold & judged).sum())],
        [int((gold & ~judged).sum()), int((gold & judged).sum())],
    ]
    relevant = gold.sum()
    assert record["sensitivity"] == (
        None if relevant == 0 else pytest.approx((gold & judged).sum() / relevant)
    )
    negatives = (~gold).sum()
    assert record["specificity"] == (
        None if negatives == 0 else pytest.approx((~gold & ~judged).sum() / negatives)
    )
    report = store.read_file("run_metrics", "rel", "run.md").decode("utf-8")
    assert "## Relevance judge against the golden set" in report

    # judged in shards (the relevance sample rides with the first): the same sample, the same record
    with scripted_endpoint() as endpoint:
        doc["shard_queries"] = 20
        doc["judge"]["base_url"] = endpoint.base_url
        cfg.write_text(yaml.safe_dump(doc))
        sharded_defs, sharded = run_partition(instance, "rel-sharded", config=cfg)
    assert sharded.success
    sharded_store = RunStore(sharded_defs.resources["artifact_storage"].base)
    again = RunMetricsArtifact.from_tables(*sharded_store.read("run_metrics", "rel-sharded"))
    assert again.info["judge_relevance_calibration"] == record


class OrderSensitive(ScriptedJudge):
    """The scripted judge, swayed by which passage comes first (as LLM judges are): its score is
    the scripted one plus 2 (capped at 5) when the first passage's text sorts before the last's."""

    def script(self, messages):
        said = super().script(messages)
        user = messages[-1]["content"]
        passages = [line for line in user.splitlines() if line.startswith("[") and "] " in line]
        if len(passages) < 2 or said.criterion == "relevance":
            return said
        return dataclasses.replace(
            said, score=min(5, said.score + 2) if passages[0] < passages[-1] else said.score
        )


@pytest.mark.parametrize("judge_class", [ScriptedJudge, OrderSensitive])
def test_self_consistency_judges_reordered_evidence_and_reports_flips(instance, tmp_path, key, judge_class):
    from kebab_eval_pipeline.judge.prompts import JudgeInput

    assert key
    with scripted_endpoint(judge_class()) as endpoint:
        cfg = judge_config(tmp_path, endpoint.base_url)
        doc = yaml.safe_load(cfg.read_text())
        doc["judge"]["self_consistency"] = True
        cfg.write_text(yaml.safe_dump(doc))
        defs, result = run_partition(instance, "sc", config=cfg)
    assert result.success
    store = RunStore(defs.resources["artifact_storage"].base)
    judgements = JudgeArtifact.from_tables(*store.read("judge", "sc")).judgements
    primary = judgements[judgements["role"] == "primary"].set_index(["query_id", "criterion"])
    shuffled = judgements[judgements["role"] == "shuffled"].set_index(["query_id", "criterion"])
    assert len(shuffled) > 0
    for (query_id, criterion), row in shuffled.iterrows():
        before = JudgeInput.from_json(primary.loc[(query_id, criterion), "judge_input"])
        after = JudgeInput.from_json(row["judge_input"])
        # the same passages, refs kept, in another order; the rest unchanged
        assert (after.question, after.answer, after.citations) == (
            before.question,
            before.answer,
            before.citations,
        )
        assert (
            sorted(map(str, after.context)) == sorted(map(str, before.context))
            and after.context != before.context
        )
    two_or_more = {
        q
        for q, c in primary.index
        if len(JudgeInput.from_json(primary.loc[(q, c), "judge_input"]).context) >= 2
    }
    assert set(shuffled.index.get_level_values("query_id")) == two_or_more

    metrics = RunMetricsArtifact.from_tables(*store.read("run_metrics", "sc"))
    details = metrics.info["judge_self_consistency"]
    for criterion in ("groundedness", "correctness"):
        both = (
            primary.xs(criterion, level="criterion")["score"]
            .to_frame("first")
            .join(shuffled.xs(criterion, level="criterion")["score"].to_frame("again"), how="inner")
            .dropna()
        )
        flips = int(((both["first"] >= 3) != (both["again"] >= 3)).sum())
        assert details[criterion]["flips"] == flips and details[criterion]["n"] == len(both)
        assert metrics.metrics[f"judge_{criterion}_flip_rate"] == round(flips / len(both), 4)
        if judge_class is ScriptedJudge:  # a judge blind to the order never flips
            assert flips == 0 and details[criterion]["mean_abs_change"] == 0.0
        else:
            assert flips > 0
    report = store.read_file("run_metrics", "sc", "run.md").decode("utf-8")
    assert "## Judge self-consistency" in report
