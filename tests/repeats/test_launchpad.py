"""``repeat`` from the Dagster launchpad (the eval_settings resource's run config), across shards."""

from __future__ import annotations

import dagster as dg

from kebab_eval_pipeline.chain import pipeline
from kebab_eval_pipeline.chain.settings import RunSettings
from kebab_eval_pipeline.definitions import JOB_NAME, build_definitions, run_settings
from kebab_eval_pipeline.store.runs import RunStore
from tests.conftest import write


def test_repeat_from_run_config_in_shards_equals_the_plain_pipeline(instance, tmp_path):
    config = write(
        tmp_path / "run.yaml", f"storage: {tmp_path / 'store'}\nbaseline: none\nshard_queries: 40\n"
    )
    defs = build_definitions(config)
    instance.add_dynamic_partitions("eval_runs", ["lp"])
    # What a launchpad run config sets: the eval_settings resource's repeat field (Dagster replaces
    # the resource's whole config, so the config file is named again; else $KEBAB_EVAL_CONFIG).
    result = defs.resolve_job_def(JOB_NAME).execute_in_process(
        partition_key="lp",
        instance=instance,
        run_config={"resources": {"eval_settings": {"config": {"config_file": str(config), "repeat": 2}}}},
    )
    assert result.success
    retrieve_steps = [
        e.step_key for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_SUCCESS
    ]
    assert sum("retrieve_shard" in s for s in retrieve_steps) == 3  # 105 demo queries / 40

    store = RunStore(tmp_path / "store")
    run = store.stored_run("lp")
    assert run.retrieval.repeat_count == 2
    # The same run without Dagster, unsharded: the same repeats table (repeat, then golden order).
    settings = run_settings(defs).model_copy(update={"repeat": 2})
    golden = pipeline.load_golden_artifact(settings)
    plain = pipeline.retrieve(settings, golden, shard_queries=10_000)
    stored = run.retrieval.repeats.outcomes
    assert stored["query_id"].tolist() == plain.repeats.outcomes["query_id"].tolist()
    assert stored["repeat"].tolist() == [2] * len(golden.queries)
    hits = ["query_id", "rank", "chunk_id", "repeat"]
    assert run.retrieval.repeats.hits[hits].equals(plain.repeats.hits[hits])
    scored = pipeline.score(settings, golden, plain)
    assert run.scores.scores["hit@1"].equals(scored.scores["hit@1"])
    assert run.metrics.metrics["mrr"] == scored.summary.metrics["mrr"]
    materialized = {
        e.asset_key.path[-1]: e.step_materialization_data.materialization
        for e in result.get_asset_materialization_events()
    }
    summary = materialized["run_metrics"].metadata["summary"].value
    assert "2 repeats · deterministic: 0 flips in 2 repeats" in summary and "noise floor" in summary
    report = materialized["run_metrics"].metadata["report"].value
    assert "## Repeats and noise floor" in report
    assert RunSettings().repeat == 1
