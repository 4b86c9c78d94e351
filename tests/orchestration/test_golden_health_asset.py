"""The ``golden_health`` asset on a real Dagster instance: two stored runs on the first version of
a golden set (their comparison has a suspect-gold queue), then the asset and its checks
materialized for that version and again for an edited version — the two materializations are the
trend, each naming its golden version in metadata and tags."""

from __future__ import annotations

import dagster as dg
import yaml

from kebab_eval_pipeline.definitions import build_definitions
from kebab_eval_pipeline.golden.load import golden_content_sha256
from kebab_eval_pipeline.golden_health.findings import CHECK_KINDS
from kebab_eval_pipeline.store.runs import RunStore
from tests.conftest import demo_golden_subset
from tests.orchestration.test_chain import run_partition

KEY = dg.AssetKey("golden_health")


def check_evaluations(result) -> dict:
    return {
        e.event_specific_data.check_name: e.event_specific_data
        for e in result.all_events
        if e.event_type_value == "ASSET_CHECK_EVALUATION"
    }


def materialize(config, instance):
    defs = build_definitions(config)
    result = defs.resolve_implicit_global_asset_job_def().execute_in_process(
        asset_selection=[KEY], instance=instance, raise_on_error=False
    )
    (event,) = result.get_asset_materialization_events()
    return defs, result, event.step_materialization_data.materialization


def numbers(materialization) -> dict:
    meta = materialization.metadata
    return {k: meta[k].value for k in meta if k.startswith("health/") or k == "queries"}


def test_golden_health_over_two_golden_versions(instance, tmp_path):
    golden = demo_golden_subset(tmp_path / "golden.yaml", slice(0, 14))
    config = tmp_path / "eval.yaml"
    config.write_text(
        f"golden: {golden}\nanswers: false\nowners: ['team:golden-curators']\n"
        "golden_health: {semantic_duplicates: 'off', slice_dimensions: [difficulty], min_slice_queries: 5}\n",
        encoding="utf-8",
    )
    # Two runs on version 1 (another chunk size each): the second is compared with the first.
    for run_id, size in (("c300", 300), ("c1200", 1200)):
        _, result = run_partition(instance, run_id, config, overrides={"chunk_size": size})
        assert result.success, run_id
    queue = RunStore(build_definitions(config).resources["artifact_storage"].base).stored_run("c1200")
    queue = queue.comparison().suspect_gold
    assert len(queue) > 0

    defs, result, first = materialize(config, instance)
    assert result.success
    spec = defs.resolve_asset_graph().get(KEY)
    assert spec.owners == ["team:golden-curators"]
    assert dg.AssetKey("golden_file") in spec.parent_keys
    v1 = golden_content_sha256(golden)
    assert first.metadata["golden_sha256"].value == v1
    assert first.tags["kebab/golden_sha256"] == v1[:16]
    assert first.tags["kebab/golden_name"] == "demo-fermentation"
    # the first 14 demo queries: difficulty easy 7, medium 6, hard 1 (a small slice); nothing else
    assert numbers(first) == {
        "queries": 14,
        "health/unsupported_answerable": 0,
        "health/stale_supports": 0,
        "health/near_duplicates": 0,
        "health/leakage": 0,
        "health/small_slices": 1,
        "health/suspect_gold_queue": len(queue),
    }
    checks = check_evaluations(result)
    assert set(checks) == set(CHECK_KINDS)
    assert {name: c.passed for name, c in checks.items()} == {
        **dict.fromkeys(CHECK_KINDS, True),
        "small_slices": False,
        "suspect_gold_queue": False,
    }
    small = checks["small_slices"]
    assert small.severity == dg.AssetCheckSeverity.WARN and small.metadata["count"].value == 1
    assert (
        r"| difficulty=hard | 1 | 1 query (\< 5): too few to conclude on |"  # "<" escaped in Markdown
        in small.metadata["offenders"].value
    )
    suspect = checks["suspect_gold_queue"]
    assert suspect.severity == dg.AssetCheckSeverity.WARN
    assert suspect.metadata["count"].value == len(queue) and suspect.metadata["outcome"].text == "warn"
    table = suspect.metadata["offenders"].value
    for query_id, hits in queue.groupby("query_id").size().items():
        assert f"| {query_id} | {hits} | {hits} unjudged hit" in table
    assert "(loss; run c1200 vs c300)" in table or "(regression; run c1200 vs c300)" in table

    # Version 2: an answerable question with no support and a copy of the first question.
    doc = yaml.safe_load(golden.read_text(encoding="utf-8"))
    first_query = doc["queries"][0]
    doc["queries"] += [
        {
            "id": "new-unsupported",
            "query": "Which starter culture is the most traditional?",
            "difficulty": "hard",
        },
        {**first_query, "id": "copy-001", "query": first_query["query"].upper() + "!!"},
    ]
    golden.write_text(yaml.safe_dump(doc, allow_unicode=True, sort_keys=False), encoding="utf-8")
    _, result, second = materialize(config, instance)
    assert not result.success  # the blocking check failed the run, after the materialization
    v2 = golden_content_sha256(golden)
    assert v2 != v1 and second.metadata["golden_sha256"].value == v2
    assert second.tags["kebab/golden_sha256"] == v2[:16]
    # no comparison of a run on version 2: the queue is not checked (no point on its trend line)
    assert (
        numbers(second)
        == {
            "queries": 22,
            "health/unsupported_answerable": 1,
            "health/stale_supports": 0,
            "health/near_duplicates": 1,
            "health/leakage": 0,
            "health/small_slices": 0,
            "health/suspect_gold_queue": None,
        }
        or "health/suspect_gold_queue" not in second.metadata
    )
    assert second.metadata["not_checked"].value == ["suspect_gold_queue"]
    checks = check_evaluations(result)
    unsupported = checks["unsupported_answerable"]
    assert not unsupported.passed and unsupported.severity == dg.AssetCheckSeverity.ERROR
    assert "| new-unsupported | answerable, but no supports" in unsupported.metadata["offenders"].value
    duplicates = checks["near_duplicates"]
    assert not duplicates.passed and duplicates.severity == dg.AssetCheckSeverity.WARN
    assert (
        f"| exact_duplicate | {first_query['id']} | copy-001 | 1 |" in duplicates.metadata["offenders"].value
    )
    # the queue could not be checked: no result (never "passed"), the reason in the metadata
    assert "suspect_gold_queue" not in checks
    why = "suspect-gold queue not checked: no stored comparison of a run on this golden set"
    assert second.metadata["skipped_checks"].value == {"suspect_gold_queue": why}

    # Selected with a run partition (`--select '*' --partition ID`): the step does nothing.
    result = (
        build_definitions(config)
        .resolve_implicit_global_asset_job_def()
        .execute_in_process(
            asset_selection=[KEY], instance=instance, partition_key="c300", raise_on_error=False
        )
    )
    assert result.success and not result.get_asset_materialization_events()
    assert not check_evaluations(result)

    # The trend: both materializations, newest first, each with its golden version.
    history = instance.fetch_materializations(KEY, limit=10).records
    assert [r.asset_materialization.metadata["golden_sha256"].value for r in history] == [v2, v1]
    assert [r.asset_materialization.metadata["health/unsupported_answerable"].value for r in history] == [
        1,
        0,
    ]
