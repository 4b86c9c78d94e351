"""The ``run_ranking`` asset: a real Dagster instance, three real evaluation runs, then the ranking
materialized from the code location's definitions with its launchpad config."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from kebab_eval_pipeline.chain import pipeline
from kebab_eval_pipeline.compare.runs import compare_runs
from kebab_eval_pipeline.definitions import build_definitions, run_settings
from kebab_eval_pipeline.store.runs import RunStore
from tests.orchestration.test_chain import run_partition

RUNS = ("c300", "c800", "c1200")


def materialize_ranking(defs, instance, config: dict):
    job = defs.resolve_implicit_global_asset_job_def()
    return job.execute_in_process(
        asset_selection=[dg.AssetKey("run_ranking")],
        instance=instance,
        run_config={"ops": {"run_ranking": {"config": config}}},
        raise_on_error=False,
    )


def test_run_ranking_over_three_stored_runs(instance, tmp_path):
    cfg = tmp_path / "eval.yaml"
    cfg.write_text("answers: false\nbaseline: none\n", encoding="utf-8")
    for run_id, size in zip(RUNS, (300, 800, 1200), strict=True):
        defs, result = run_partition(instance, run_id, cfg, overrides={"chunk_size": size})
        assert result.success, run_id
    defs = build_definitions(cfg)
    assert "run_ranking" in {key.path[-1] for key in defs.resolve_asset_graph().get_all_asset_keys()}

    result = materialize_ranking(defs, instance, {"run_ids": list(RUNS), "name": "chunk-sizes"})
    assert result.success
    (event,) = result.get_asset_materialization_events()
    meta = event.step_materialization_data.materialization.metadata
    report = meta["report"].value
    assert report.startswith("# Ranking of 3 runs") and "## Pairwise tests (delta = b − a)" in report
    assert meta["metrics"].value == ["mrr", "ndcg@10", "hit@5"]
    assert meta["queries_in_common"].value == 105 and meta["matching"].value == "fallback_anchor"
    files = {key: Path(meta[key].value) for key in ("report_md", "report_html", "report_json")}
    assert {p.name for p in files.values()} == {"ranking.md", "ranking.html", "ranking.json"}
    assert files["report_md"].read_text(encoding="utf-8") == report
    assert "<svg" in files["report_html"].read_text(encoding="utf-8")

    # Stored as the chain's assets are: tables and info under {storage}/run_ranking/{name}/.
    store = RunStore(defs.resources["artifact_storage"].base)
    tables, info = store.read("run_ranking", "chunk-sizes")
    assert info["runs"] == list(RUNS) and info["markdown"] == report
    assert len(tables["per_run"]) == 9 and len(tables["pairs"]) == 9
    # The same numbers as the pure function on the same stored runs, and each pair as compare A B.
    direct = pipeline.rank_stored(store, list(RUNS), run_settings(defs))
    assert tables["pairs"]["p_value"].tolist() == direct.pairs["p_value"].tolist()
    assert tables["per_run"]["mean"].tolist() == direct.per_run["mean"].tolist()
    assert [list(x) for x in tables["per_run"]["better_than"]] == list(direct.per_run["better_than"])
    pairwise = compare_runs(store.stored_run("c300"), store.stored_run("c1200")).per_metric.set_index(
        "metric"
    )
    pairs = tables["pairs"].set_index(["metric", "run_a", "run_b"])
    for metric in ("mrr", "ndcg@10", "hit@5"):
        assert pairs.loc[(metric, "c300", "c1200"), "p_value"] == pairwise.loc[metric, "p_value"]
    best = meta["best/hit@5"].value.split(", ")
    hit5 = direct.per_run[direct.per_run["metric"] == "hit@5"]
    assert best == list(hit5.loc[hit5["rank"] == 1, "run_id"])

    # Bad config: the step fails as bad input, naming every offender.
    result = materialize_ranking(
        defs, instance, {"run_ids": ["c300", "gone", "also-gone"], "metrics": ["nope"]}
    )
    assert not result.success
    (failure,) = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    text = failure.event_specific_data.error.message + str(failure.event_specific_data.user_failure_data)
    for offender in ("run gone:", "run also-gone:", "unknown metric 'nope'"):
        assert offender in text, text
    assert "input_error" in str(failure.event_specific_data.user_failure_data.metadata)


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_run_ranking_refuses_alpha_outside_zero_one(instance, alpha):
    defs = build_definitions()
    result = materialize_ranking(defs, instance, {"run_ids": ["a", "b", "c"], "alpha": alpha})
    assert not result.success
    (failure,) = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    assert f"--alpha: {alpha}: must be above 0 and below 1" in str(
        failure.event_specific_data.user_failure_data
    )
