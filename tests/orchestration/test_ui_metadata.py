"""What the Dagster UI is given: one owned group of described assets with kinds and stage tags,
the system under test as a resource, per-query tables worst first with links to the full
Parquet files, a compact summary first on run_metrics, and launchpad overrides that keep the
config file. Real definitions and materializations on a real instance; the browser test
(tests/ui) checks the same things on screen."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pandas as pd
import pytest

from kebab_eval_pipeline.definitions import JOB_NAME, build_definitions
from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.metrics import catalogue
from kebab_eval_pipeline.orchestration.assets import GROUP, headline_columns
from kebab_eval_pipeline.orchestration.resources import CONFIG_ENV, SystemUnderTestResource
from kebab_eval_pipeline.reporting.per_query import (
    verdicts_worst_first,
    worst_results_first,
    worst_scores_first,
)
from kebab_eval_pipeline.store.runs import RunStore
from tests.conftest import write
from tests.orchestration.test_chain import materializations, run_partition

CHAIN = ("golden_set", "retrieval_results", "judge", "query_scores", "run_metrics", "comparison_report")
GATES = "gates:\n  mrr: {min: 0.3}\n  hit@1: {min: 0.99, blocking: false}\n"


def test_asset_graph_is_one_owned_group_with_kinds_and_the_system_as_a_resource(tmp_path):
    cfg = write(tmp_path / "eval.yaml", "owners: [search-team@example.com, 'team:rag']\n" + GATES)
    defs = build_definitions(cfg)
    nodes = {node.key.path[-1]: node for node in defs.resolve_asset_graph().asset_nodes}
    # run_ranking: unpartitioned, over runs named in its config (not part of the run's job)
    # regression_bisect: likewise, over the stored runs, with the metric named in its config;
    # golden_health: unpartitioned, the golden set's own health (orchestration/golden_health.py)
    assert set(nodes) == {
        *CHAIN,
        "golden_file",
        "system_under_test",
        "run_ranking",
        "regression_bisect",
        "golden_health",
    }
    for name, node in nodes.items():
        assert node.group_name == GROUP, name
        assert node.owners == ["search-team@example.com", "team:rag"], name
        assert len(node.description or "") > 40, name
        assert node.tags["stage"] in (
            "input",
            "golden",
            "retrieval",
            "judging",
            "scoring",
            "metrics",
            "comparison",
            "ranking",
            "bisect",
        )
    for name in CHAIN:
        assert {"pandas", "parquet"} <= nodes[name].kinds, name
    assert nodes["retrieval_results"].tags["stage"] == "retrieval"

    system = defs.resources["system_under_test"]
    assert isinstance(system, SystemUnderTestResource)
    assert (system.kind, system.mode, system.chunk_size) == ("reference", "lexical", 800)
    # every asset that builds or calls the system declares the resource, so the UI lists its users
    graph = defs.resolve_asset_graph()
    for name in CHAIN:
        required = graph.get(dg.AssetKey(name)).assets_def.required_resource_keys
        assert "system_under_test" in required, name
    job = defs.resolve_job_def(JOB_NAME)
    assert {key.path[-1] for key in job.asset_layer.selected_asset_keys} == set(CHAIN)


def test_default_owner_and_a_bad_owner_is_a_config_error(tmp_path):
    defs = build_definitions()
    assert {tuple(n.owners) for n in defs.resolve_asset_graph().asset_nodes} == {("team:evaluation",)}
    bad = write(tmp_path / "eval.yaml", "owners: [alice, 'team:ok', 'bob@']\n")
    with pytest.raises(InputError) as info:
        build_definitions(bad)
    text = str(info.value)
    assert str(bad) in text and "owners" in text and "'alice'" in text and "'bob@'" in text


def _records(meta_table) -> pd.DataFrame:
    return pd.DataFrame([record.data for record in meta_table.records])


def test_materializations_lead_with_what_a_person_reads_first(instance, tmp_path):
    cfg = write(tmp_path / "eval.yaml", GATES)
    run_partition(instance, "ci-20261122-101500", config=cfg)
    defs, result = run_partition(instance, "ci-20261122-111500", config=cfg, overrides={"chunk_size": 300})
    assert result.success
    mats = materializations(result)
    store = RunStore(defs.resources["artifact_storage"].base)
    run = "ci-20261122-111500"

    # Every table is linked as its Parquet file, identical to what the store reads back.
    for asset in CHAIN:
        tables, _ = store.read(asset, run)
        for name, frame in tables.items():
            path = mats[asset].metadata[f"file/{name}"].value
            assert f"/{asset}/{run}/" in path and path.endswith(f"/{name}.parquet")
            pd.testing.assert_frame_equal(pd.read_parquet(path), frame)

    golden = store.read("golden_set", run)[0]["queries"]
    scores = store.read("query_scores", run)[0]["query_scores"]
    meta = mats["query_scores"].metadata
    shown = _records(meta["per_query"].value)
    expected = worst_scores_first(scores, headline_columns([1, 3, 5, 10]), golden)
    assert list(shown["query_id"]) == list(expected["query_id"])
    assert shown["issue"].iloc[0] != "ok" and shown["issue"].iloc[-1] == "ok"
    assert meta["queries_with_issues"].value == int((expected["issue"] != "ok").sum()) > 0
    columns = {c.name: c for c in meta["per_query"].value.schema.columns}
    assert columns["first_relevant_rank"].type == "int" and columns["mrr"].type == "float"
    assert "rank of the first relevant hit" in columns["first_relevant_rank"].description

    outcomes, hits = (store.read("retrieval_results", run)[0][t] for t in ("outcomes", "hits"))
    shown = _records(mats["retrieval_results"].metadata["per_query"].value)
    assert list(shown["query_id"]) == list(worst_results_first(outcomes, hits, golden)["query_id"])
    assert mats["retrieval_results"].metadata["per_query_rows_shown"].value == len(outcomes)

    # run_metrics: the compact summary first, then the plotted numbers, then the rest
    meta = mats["run_metrics"].metadata
    keys = list(meta)
    assert keys[0] == "summary" and keys[1].startswith("metric/")
    mrr = meta["metric/mrr"].value
    summary = meta["summary"].value
    assert f"|mrr|{mrr:.4f}|" in summary and "≥0.3 pass" in summary and "≥0.99 warn" in summary
    assert "chunker `md-heading-2:size=300:overlap=0`" in summary
    evaluations = [
        e.event_specific_data for e in result.all_events if e.event_type_value == "ASSET_CHECK_EVALUATION"
    ]
    # the gates on run_metrics (system_health is a check there too, but not a gate)
    on_metrics = [
        e for e in evaluations if e.asset_key.path[-1] == "run_metrics" and e.check_name != "system_health"
    ]
    # the breakdowns table: the headline metrics of every slice with queries, all dimensions
    breakdowns = store.read("run_metrics", run)[0]["breakdowns"]
    shown = _records(meta["breakdowns"].value)
    headline = breakdowns[breakdowns["metric"].isin(catalogue.summary_names()) & (breakdowns["n"] > 0)]
    assert len(shown) == len(headline) < len(breakdowns)
    assert set(shown["dimension"]) == set(breakdowns["dimension"])  # every dimension, none cut off
    assert set(shown["metric"]) == set(catalogue.summary_names()) and (shown["n"] > 0).all()
    mrr_ko = shown[(shown["dimension"] == "lang") & (shown["value"] == "ko") & (shown["metric"] == "mrr")]
    expected = headline[
        (headline["dimension"] == "lang") & (headline["value"] == "ko") & (headline["metric"] == "mrr")
    ]
    assert mrr_ko["score"].tolist() == expected["score"].tolist() and len(mrr_ko) == 1
    assert meta["gates/passed"].value == sum(e.passed for e in on_metrics) >= 1
    assert meta["gates/warned"].value == sum(not e.passed for e in on_metrics) >= 1
    assert meta["gates/failed"].value == 0

    # comparison_report: the Markdown report first, regressions and losses first in its table
    meta = mats["comparison_report"].metadata
    assert next(iter(meta)) == "report" and meta["report"].value.startswith("# Comparison:")
    per_query = store.read("comparison_report", run)[0]["per_query"]
    shown = _records(meta["per_query"].value)
    assert list(shown["query_id"]) == list(verdicts_worst_first(per_query)["query_id"])
    assert shown["verdict"].iloc[0] in ("regression", "loss")
    html = meta["report_html"].value
    assert html.endswith("comparison.html") and "<svg" in Path(html).read_text(encoding="utf-8")


def test_launchpad_overrides_keep_the_config_file(instance, tmp_path, monkeypatch):
    """Dagster replaces a resource's whole config when a launchpad run names any field; the
    settings then still come from the code location's config file ($KEBAB_EVAL_CONFIG)."""
    cfg = write(tmp_path / "eval.yaml", "k: [1, 3]\n" + GATES)
    monkeypatch.setenv(CONFIG_ENV, str(cfg))
    defs = build_definitions(cfg)
    instance.add_dynamic_partitions("eval_runs", ["launchpad"])
    run_config = {
        "resources": {
            "eval_settings": {"config": {"answers": False}},
            "system_under_test": {"config": {"chunk_size": 300}},
        }
    }
    result = defs.resolve_job_def(JOB_NAME).execute_in_process(
        partition_key="launchpad", instance=instance, run_config=run_config
    )
    assert result.success
    store = RunStore(defs.resources["artifact_storage"].base)
    _, info = store.read("run_metrics", "launchpad")
    assert info["k"] == [1, 3]  # from the file
    assert info["answers"] is False  # from the launchpad
    assert info["versions"]["chunker_version"] == "md-heading-2:size=300:overlap=0"
    checks = {
        e.event_specific_data.check_name
        for e in result.all_events
        if e.event_type_value == "ASSET_CHECK_EVALUATION"
    }
    assert {"gate_mrr_min", "gate_hit_at_1_min"} <= checks
