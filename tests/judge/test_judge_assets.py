"""The ``judge`` asset and ``kebab-eval rejudge`` in a real Dagster instance, the judge reached as
``backend: openai_compatible`` at a scripted judge served over HTTP on 127.0.0.1 (no model is
loaded): materialization metadata, the judge columns of ``query_scores``, the judge metrics of
``run_metrics``, the ``judge_spot_check`` warning, failed calls, the judge off by default, the
cache across processes — and the API key in no byte anything wrote."""

from __future__ import annotations

import json
import os
from pathlib import Path

import dagster as dg
import numpy as np
import pandas as pd
import pytest
import yaml

from kebab_eval_pipeline.chain.artifacts import JudgeArtifact, QueryScoresArtifact, RunMetricsArtifact
from kebab_eval_pipeline.judge.config import JudgeSettings
from kebab_eval_pipeline.judge.inputs import judged_query_ids
from kebab_eval_pipeline.judge.metrics import judge_run_metrics
from kebab_eval_pipeline.judge.run import spot_check_sample
from kebab_eval_pipeline.store.runs import RunStore
from tests.conftest import write
from tests.judge.scripted import DIGEST, MODEL, Endpoint, ScriptedJudge, demo_run, scripted_endpoint
from tests.orchestration.test_chain import materializations, run_partition
from tests.systems.adapters.test_http_adapter import _all_bytes_under
from tests.test_cli import cli, env, no_traceback

assert env  # the fixture, imported for this module's tests

KEY_ENV = "KEBAB_TEST_JUDGE_KEY"
SECRET = "jk-Wq7Zr4Lp0XvN3sT8"
PRICE = {"input_per_mtok": 2.5, "output_per_mtok": 10.0}


def judge_config(folder: Path, base_url: str, **top) -> Path:
    """A run config judging through the scripted endpoint: key by variable name only, the cache in
    ``folder``, failures not retried (a failing call costs one request)."""
    judge = {
        "backend": "openai_compatible",
        "model": MODEL,
        "base_url": base_url,
        "api_key_env": KEY_ENV,
        "cache_dir": str(folder / "judge-cache"),
        "retries": 0,
        "prices": {MODEL: PRICE},
    }
    return write(folder / "judged.yaml", yaml.safe_dump({"judge": judge, **top}))


def check_evaluation(result, name: str = "judge_spot_check"):
    [evaluation] = [
        e.event_specific_data
        for e in result.all_events
        if e.event_type_value == "ASSET_CHECK_EVALUATION" and e.event_specific_data.check_name == name
    ]
    return evaluation


def stored(defs, run_id: str) -> tuple[JudgeArtifact, QueryScoresArtifact, RunMetricsArtifact]:
    store = RunStore(defs.resources["artifact_storage"].base)
    return (
        JudgeArtifact.from_tables(*store.read("judge", run_id)),
        QueryScoresArtifact.from_tables(*store.read("query_scores", run_id)),
        RunMetricsArtifact.from_tables(*store.read("run_metrics", run_id)),
    )


def primary_scores(judgements: pd.DataFrame, criterion: str) -> dict[str, float]:
    rows = judgements[(judgements["role"] == "primary") & (judgements["criterion"] == criterion)]
    return dict(zip(rows["query_id"], rows["score"], strict=True))


def assert_no_secret(*roots: Path, texts: dict[str, str] | None = None) -> None:
    """The key is in no file under ``roots`` and in none of ``texts``."""
    scanned = 0
    for root in roots:
        for path, data in (_all_bytes_under(root) if root.is_dir() else {root: root.read_bytes()}).items():
            assert SECRET.encode() not in data, path
            scanned += 1
    assert scanned
    for where, text in (texts or {}).items():
        assert SECRET not in text, where


@pytest.fixture
def key(monkeypatch) -> str:
    monkeypatch.setenv(KEY_ENV, SECRET)
    return SECRET


def judged_run(instance, tmp_path: Path, run_id: str, judge: ScriptedJudge | None = None):
    """A judged demo run through the scripted endpoint: (defs, result, endpoint)."""
    with scripted_endpoint(judge) as endpoint:
        defs, result = run_partition(instance, run_id, config=judge_config(tmp_path, endpoint.base_url))
    assert result.success
    assert endpoint.authorizations and set(endpoint.authorizations) == {f"Bearer {SECRET}"}
    return defs, result, endpoint


def test_judged_run_materializes_judge_scores_and_metrics(instance, tmp_path, key) -> None:
    defs, result, endpoint = judged_run(instance, tmp_path, "judged")
    judged, scores, metrics = stored(defs, "judged")
    j = judged.judgements
    _, _, retrieval = demo_run()
    expected_ids = list(judged_query_ids(retrieval.results.outcomes))
    sample = spot_check_sample(expected_ids, 0.1, 0)
    assert len(j) == 2 * len(expected_ids) + 2 * len(sample) == endpoint.judge.calls

    # the judge asset: pinned model, prompt, decoding, the sample and the numbers
    meta = materializations(result)["judge"].metadata
    assert meta["enabled"].value is True and meta["judge_backend"].value == "openai_compatible"
    assert meta["judge_model"].value == MODEL
    assert meta["judge_digest"].value == DIGEST and meta["judge_pinned"].value is True  # from GET /models
    assert meta["prompt_version"].value == "v2"
    # the scripted judge's prose replies do not parse: said loudly, in the log and the metadata
    unparseable = int((j["method"] == "unparseable").sum())
    said = f"{unparseable} of {len(j)} judge replies did not parse"
    assert unparseable > 0 and meta["reply_warnings"].value.startswith(said)
    logged = [r.user_message for r in instance.all_logs(result.run_id)]
    assert any(m == f"judge: {meta['reply_warnings'].value}" for m in logged)
    # ... and with the run's numbers: its record, its report and its JSON export
    assert metrics.info["judge_reply_warnings"] == meta["reply_warnings"].value.split("\n")
    store = RunStore(defs.resources["artifact_storage"].base)
    report = store.read_file("run_metrics", "judged", "run.md").decode("utf-8")
    assert f"> ⚠ **judge replies**: {said}" in report
    from kebab_eval_pipeline.reporting.export import export_json

    assert export_json(store, "judged")["judge_reply_warnings"] == metrics.info["judge_reply_warnings"]
    # the default prompt (v2) asks for the score alone: one token, whatever max_tokens says
    assert meta["decoding"].value == {**JudgeSettings().decoding().as_dict(), "max_tokens": 1}
    assert meta["spot_check_judge"].value == {
        "backend": "openai_compatible",
        "model": MODEL,
        "digest": DIGEST,
        "prompt_version": "v2-alt",
    }
    assert meta["spot_check_queries"].value == len(sample) == len(judged.info["spot_check_queries"])
    assert meta["judged_queries"].value == len(expected_ids) and meta["judgements"].value == len(j)
    numbers, _ = judge_run_metrics(j, judged.info)
    for name, value in numbers.items():
        got = meta[f"judge/{name.removeprefix('judge_')}"].value
        assert got == (None if value is None else pytest.approx(value)), name
    assert meta["judge/model_calls"].value == len(j) and meta["judge/cache_hits"].value == 0
    assert 0 < meta["judge/unparseable_rate"].value < 1 and meta["judge/error_rate"].value == 0
    assert len(meta["per_query"].value.records) == len(j)
    assert Path(meta["cache"].value) == tmp_path / "judge-cache" / "judge-cache.sqlite"

    # the scores are what the scripted judge said for exactly what the judge read
    for row in j.itertuples(index=False):
        want = endpoint.judge.expected_score(json.loads(row.messages))
        assert (pd.isna(row.score) and want is None) or row.score == pytest.approx(want), row.query_id

    # query_scores: the main judge's scores per query, and their agreement with the rule
    qs = scores.scores.set_index("query_id")
    for criterion in ("groundedness", "correctness"):
        by_query = primary_scores(j, criterion)
        column = qs[f"judge_{criterion}"]
        want = np.array([by_query.get(q, np.nan) for q in qs.index], dtype=float)
        np.testing.assert_allclose(column.to_numpy(float), want, atol=5e-5)  # stored to 4 decimals
    g, rule = qs["judge_groundedness"], qs["groundedness_rule"]
    both = g.notna() & rule.notna()
    assert both.sum() > 10
    np.testing.assert_array_equal(qs.loc[both, "judge_rule_agreement"], ((g >= 3) == (rule >= 1))[both])
    assert qs.loc[~both, "judge_rule_agreement"].isna().all()

    # run_metrics: the means, the spot check, tokens and cost, and the judge's identity
    m = metrics.metrics
    assert m["judge_groundedness"] == pytest.approx(g.mean(), abs=5e-5)
    assert m["judge_correctness"] == pytest.approx(qs["judge_correctness"].mean(), abs=5e-5)
    assert m["judge_groundedness_rule_agreement"] == pytest.approx(
        qs["judge_rule_agreement"].mean(), abs=5e-5
    )
    assert m["judge_disagreement_rate"] == 0.0  # the prompt variant agrees with the scripted judge
    compared = {q for q in sample if not np.isnan(primary_scores(j, "groundedness")[q])}
    assert m["judge_spot_check_n"] == len(compared) > 0
    assert m["judge_prompt_tokens"] == int(j["prompt_tokens"].sum()) > 0
    assert m["judge_completion_tokens"] == int(j["completion_tokens"].sum()) > 0
    cost = (m["judge_prompt_tokens"] * 2.5 + m["judge_completion_tokens"] * 10.0) / 1e6
    assert m["judge_cost_usd"] == pytest.approx(cost, rel=1e-12)
    assert m["judge_latency_p50_ms"] > 0 and m["judge_latency_p95_ms"] >= m["judge_latency_p50_ms"]
    identity = metrics.info["judge"]
    assert identity["judge"]["digest"] == DIGEST and identity["judge"]["prompt_version"] == "v2"
    assert identity["spot_check_judge"]["prompt_version"] == "v2-alt"
    run_meta = materializations(result)["run_metrics"].metadata
    assert run_meta["judge"].value == identity
    assert run_meta["metric/judge_groundedness"].value == pytest.approx(m["judge_groundedness"])
    assert run_meta["metric/judge_disagreement_rate"].value == 0.0

    check = check_evaluation(result)
    assert check.passed and check.severity == dg.AssetCheckSeverity.WARN
    assert check.metadata["value"].value == 0.0 and check.metadata["spot_check_n"].value == len(compared)


def test_a_disagreeing_spot_check_warns_and_the_run_succeeds(instance, tmp_path, key) -> None:
    defs, result, _ = judged_run(instance, tmp_path, "shaky", ScriptedJudge(shift={"v2-alt": 3}))
    judged, _, metrics = stored(defs, "shaky")
    check = check_evaluation(result)
    n = int(metrics.metrics["judge_spot_check_n"])
    assert n > 0 and metrics.metrics["judge_disagreement_rate"] == 1.0  # every score moved by 3
    assert not check.passed and check.severity == dg.AssetCheckSeverity.WARN
    assert check.metadata["value"].value == 1.0 and check.metadata["threshold"].value == 0.2
    assert check.metadata["disagreeing"].value == n == check.metadata["spot_check_n"].value
    assert f"{n} of {n} spot-checked queries disagree" in check.description
    spot = judged.judgements[judged.judgements["role"] == "spot_check"]
    assert set(spot["prompt_version"]) == {"v2-alt"}


def test_judge_off_by_default(instance) -> None:
    defs, result = run_partition(instance, "plain")
    assert result.success
    judged, scores, metrics = stored(defs, "plain")
    assert not judged.enabled and judged.judgements.empty
    assert materializations(result)["judge"].metadata["enabled"].value is False
    assert not any(c.startswith("judge_") for c in scores.scores.columns)
    assert not any(name.startswith("judge_") for name in metrics.metrics)
    assert "judge" not in metrics.info and "judge" not in materializations(result)["run_metrics"].metadata
    # nothing to check: the spot check yields no result (Dagster shows it skipped, never passed),
    # and the run's log says why
    evaluated = [
        e.event_specific_data.check_name
        for e in result.all_events
        if e.event_type_value == "ASSET_CHECK_EVALUATION"
    ]
    assert "judge_spot_check" not in evaluated
    logged = [r.user_message for r in instance.all_logs(result.run_id) if r.dagster_event is None]
    assert "check judge_spot_check skipped: judge off (judge: null): nothing to check" in logged


def test_failing_calls_are_recorded_and_the_key_is_never_written(instance, tmp_path, key) -> None:
    _, _, retrieval = demo_run()
    outcomes = retrieval.results.outcomes.set_index("query_id")
    ids = list(judged_query_ids(retrieval.results.outcomes))
    victims = ids[1:4]
    # A careless endpoint: its error message quotes the caller's credentials.
    failing = ScriptedJudge(
        fail=tuple(f"ANSWER: {outcomes.loc[q, 'answer_text']}\n" for q in victims),
        fail_message=f"upstream refused Authorization: Bearer {SECRET}",
    )
    defs, result, _ = judged_run(instance, tmp_path, "flaky", failing)
    judged, _, metrics = stored(defs, "flaky")
    j = judged.judgements
    errors = j[j["error"].notna()]
    sampled = set(judged.info["spot_check_queries"])
    assert set(errors["query_id"]) == set(victims)
    assert len(errors) == 2 * len(victims) + 2 * len(sampled & set(victims))
    assert errors["score"].isna().all() and set(errors["method"]) == {"error"}
    for message in errors["error"]:
        assert "HTTP 500" in message and "***" in message and SECRET not in message
    primary = j["role"] == "primary"
    rate = 2 * len(victims) / primary.sum()
    assert metrics.metrics["judge_error_rate"] == pytest.approx(rate, abs=5e-5)
    meta = materializations(result)["judge"].metadata
    assert meta["judge/error_rate"].value == pytest.approx(rate, abs=5e-5)
    # unscored rows cost nothing known: the cost covers the rest, and it is still a number
    assert metrics.metrics["judge_cost_usd"] > 0

    texts = {
        f"metadata {m.asset_key.to_user_string()}": dg.serialize_value(m)
        for m in (
            e.step_materialization_data.materialization for e in result.get_asset_materialization_events()
        )
    }
    texts["event log"] = "\n".join(dg.serialize_value(r) for r in instance.all_logs(result.run_id))
    home = Path(os.environ["DAGSTER_HOME"])
    assert Path(str(defs.resources["artifact_storage"].base)).is_relative_to(home)
    assert_no_secret(home, tmp_path / "judge-cache", texts=texts)


def _rejudged(env, run_id: str) -> tuple[JudgeArtifact, dict]:
    """The stored judge artifact of ``run_id`` and the metadata of its latest materialization."""
    home = env["DAGSTER_HOME"]
    store = RunStore(Path(home) / "kebab-eval" / "artifacts")
    with dg.DagsterInstance.from_config(home) as instance:
        [record] = instance.fetch_materializations(dg.AssetKey("judge"), limit=1).records
    meta = {k: v.value for k, v in record.asset_materialization.metadata.items()}
    assert record.asset_materialization.partition == run_id
    return JudgeArtifact.from_tables(*store.read("judge", run_id)), meta


def test_rejudge_uses_the_cache_and_refuses_what_it_cannot_rejudge(env, tmp_path) -> None:
    env = {**env, KEY_ENV: SECRET, "COLUMNS": "400"}  # Rich: no wrapped messages
    outputs = {}
    with scripted_endpoint() as endpoint:
        cfg = judge_config(tmp_path / "cfg", endpoint.base_url)
        outputs["run"] = cli(env, "run", "--config", str(cfg), "--run-id", "j1")
        assert outputs["run"].returncode == 0, outputs["run"].stderr
        first, meta = _rejudged(env, "j1")
        calls = endpoint.judge.calls
        assert calls == len(first.judgements) == first.info["model_calls"] == meta["judge/model_calls"]

        outputs["same"] = cli(env, "rejudge", "j1", "--config", str(cfg))
        again, again_meta = _rejudged(env, "j1")
        assert endpoint.judge.calls == calls  # not one request reached the model
        outputs["alt"] = cli(env, "rejudge", "j1", "--config", str(cfg), "--prompt-version", "v2-alt")
        alt, _ = _rejudged(env, "j1")
        alt_calls = endpoint.judge.calls - calls
        outputs["missing"] = cli(env, "rejudge", "never-ran", "--config", str(cfg))
        other_k = judge_config(tmp_path / "other-k", endpoint.base_url, k=[1, 3])
        outputs["other k"] = cli(env, "rejudge", "j1", "--config", str(other_k))
    assert again_meta["judge/model_calls"] == 0 and again_meta["judge/cache_hits"] == len(first.judgements)
    _assert_rejudged(endpoint, outputs, first, again, alt, alt_calls)
    cache = tmp_path / "cfg" / "judge-cache"
    assert_no_secret(
        Path(env["DAGSTER_HOME"]),
        cache,
        texts={f"{n} {s}": getattr(p, s) for n, p in outputs.items() for s in ("stdout", "stderr")},
    )


def _assert_rejudged(endpoint: Endpoint, outputs, first, again, alt, alt_calls: int) -> None:
    for proc in outputs.values():
        no_traceback(proc)
    assert outputs["same"].returncode == 0, outputs["same"].stderr
    assert "judge_groundedness" in outputs["same"].stdout
    # the same judge again: every judgement from the cache, no model call
    assert again.info["model_calls"] == 0 and again.info["cache_hits"] == len(again.judgements)
    assert again.judgements["cached"].all()
    same = ["query_id", "criterion", "role", "score", "input_hash", "reply"]
    pd.testing.assert_frame_equal(again.judgements[same], first.judgements[same])

    # another prompt version: every primary judgement misses, except those of the spot-check
    # sample, whose v2-alt replies the first run's spot check stored
    assert outputs["alt"].returncode == 0, outputs["alt"].stderr
    sample = set(first.info["spot_check_queries"])
    primary = alt.judgements[alt.judgements["role"] == "primary"]
    assert set(primary["prompt_version"]) == {"v2-alt"} and alt.info["judge"]["prompt_version"] == "v2-alt"
    assert list(primary["cached"]) == [q in sample for q in primary["query_id"]]
    assert alt.info["model_calls"] == alt_calls == int((~primary["cached"]).sum())
    assert alt_calls == 2 * (first.info["judged_queries"] - len(sample)) > 0

    # bad input: exit 2, one message naming the run, or the config file and the setting
    missing, other_k = outputs["missing"], outputs["other k"]
    assert missing.returncode == 2 and other_k.returncode == 2
    assert "nothing to re-judge" in missing.stderr
    assert "never-ran — field 'run_id': no stored results for this run" in missing.stderr
    assert (
        "other-k/judged.yaml — field 'k': the run was scored with k=[1, 3, 5, 10], this config says [1, 3]"
        in (other_k.stderr)
    )
    assert endpoint.authorizations and set(endpoint.authorizations) == {f"Bearer {SECRET}"}


def test_a_chain_without_a_judge_judges_in_one_step_when_the_launchpad_turns_it_on(
    instance, tmp_path, key
) -> None:
    """A config without a judge: the judge is one step (no plan and collecting steps), which stores
    the judge's "off" artifact — and judges, its shards one after the other, when a run's resource
    config (the launchpad) turns the judge on: the same judgements a sharded judge makes."""
    from kebab_eval_pipeline.definitions import JOB_NAME, build_definitions

    config = write(tmp_path / "plain.yaml", yaml.safe_dump({"baseline": "none", "shard_queries": 40}))
    defs = build_definitions(config)
    job = defs.resolve_job_def(JOB_NAME)
    instance.add_dynamic_partitions("eval_runs", ["off", "on"])
    off = job.execute_in_process(partition_key="off", instance=instance)
    steps = {e.step_key for e in off.all_events if e.step_key}
    assert "judge" in steps and not any(s.startswith("judge.") for s in steps)
    assert materializations(off)["judge"].metadata["enabled"].value is False

    with scripted_endpoint() as endpoint:
        judge = yaml.safe_load(judge_config(tmp_path, endpoint.base_url).read_text(encoding="utf-8"))
        settings_json = json.dumps(judge)  # the launchpad's settings_json: the judge: block for one run
        on = job.execute_in_process(
            partition_key="on",
            instance=instance,
            run_config={
                "resources": {
                    "eval_settings": {"config": {"config_file": str(config), "settings_json": settings_json}}
                }
            },
        )
    assert on.success
    meta = materializations(on)["judge"].metadata
    judged, _, _ = stored(defs, "on")
    _, _, retrieval = demo_run()
    expected_ids = list(judged_query_ids(retrieval.results.outcomes))
    # the answered queries, 40 to a shard, judged one shard after the other in the judge's step
    assert meta["enabled"].value is True and meta["shards"].value == -(-len(expected_ids) // 40) > 1
    sample = spot_check_sample(expected_ids, 0.1, 0)
    assert len(judged.judgements) == 2 * len(expected_ids) + 2 * len(sample) == endpoint.judge.calls
    assert sorted(set(judged.judgements["query_id"])) == sorted(expected_ids)
