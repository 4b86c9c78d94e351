"""The ``regression_bisect`` asset: materialized from the code location's definitions on a real
Dagster instance, over the synthetic stored history of tests/compare/bisect_history.py (two known
change points), with its launchpad config."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from kebab_eval_pipeline.compare.bisect_stored import bisect_stored
from kebab_eval_pipeline.definitions import build_definitions
from kebab_eval_pipeline.orchestration.bisect import build_bisect_asset
from kebab_eval_pipeline.orchestration.names import ChainNames
from kebab_eval_pipeline.store.runs import RunStore
from tests.compare.bisect_history import DROPPED, IDS, write_history

KEY = dg.AssetKey("regression_bisect")


@pytest.fixture(scope="module")
def defs(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("bisect-asset")
    store = write_history(tmp_path / "history")
    cfg = tmp_path / "eval.yaml"
    cfg.write_text(f"storage: {store.base}\n", encoding="utf-8")
    return build_definitions(cfg)


def materialize(defs, instance, config: dict):
    job = defs.resolve_implicit_global_asset_job_def()
    return job.execute_in_process(
        asset_selection=[KEY],
        instance=instance,
        run_config={"ops": {"regression_bisect": {"config": config}}},
        raise_on_error=False,
    )


def test_regression_bisect_over_stored_runs(defs, instance):
    assert KEY in defs.resolve_asset_graph().get_all_asset_keys()
    result = materialize(defs, instance, {"metric": "mrr", "name": "mrr-history"})
    assert result.success
    (event,) = result.get_asset_materialization_events()
    meta = event.step_materialization_data.materialization.metadata
    assert meta["changes"].value == 2 and meta["runs"].value == 8 and meta["metric"].value == "mrr"
    report = meta["report"].value
    assert report.startswith("# Bisect of `mrr` over 8 runs") and "## Step 3: `build-e` → `build-r`" in report
    changes = [r.data for r in meta["change_table"].value.records]
    assert [(c["step"], c["run_a"], c["run_b"]) for c in changes] == [
        (3, "build-e", "build-r"),
        (6, "build-y", "build-u"),
    ]
    assert changes[0]["changed_fields"] == "chunker_version, index_version, system.trace_sha256"
    steps = [r.data for r in meta["steps"].value.records]
    assert [s["run_b"] for s in steps] == IDS[1:] and [s["changed"] for s in steps] == [
        False,
        False,
        True,
        False,
        False,
        True,
        False,
    ]
    assert {c.name for c in meta["steps"].value.schema.columns} >= {"delta", "p_raw", "p_adjusted"}
    assert Path(meta["report_md"].value).read_text(encoding="utf-8") == report

    # Stored as the chain's assets store theirs, with the numbers of the pure function.
    store = RunStore(defs.resources["artifact_storage"].base)
    tables, info = store.read("regression_bisect", "mrr-history")
    direct = bisect_stored(store, "mrr")
    assert tables["steps"]["p_raw"].tolist() == direct.steps["p_raw"].tolist()
    assert tables["flips"][tables["flips"]["step"] == 6]["query_id"].tolist() == DROPPED
    assert info["n_changes"] == 2 and info["markdown"] == report


def test_bad_config_fails_as_bad_input_and_no_metric_is_a_no_op(defs, instance):
    result = materialize(defs, instance, {"metric": "nope", "since": "not-a-date"})
    assert not result.success
    (failure,) = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    text = str(failure.event_specific_data.user_failure_data)
    assert "--since: 'not-a-date' is neither a stored run id nor a date" in text
    assert "input_error" in str(failure.event_specific_data.user_failure_data.metadata)
    result = materialize(defs, instance, {"metric": "nope"})
    (failure,) = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    assert "'nope' is not a metric; known: mrr" in str(failure.event_specific_data.user_failure_data)
    # No metric: nothing bisected, nothing materialized, no failure ("materialize all" of a partition).
    result = materialize(defs, instance, {})
    assert result.success and not result.get_asset_materialization_events()


def test_a_prefixed_chain_has_its_own_key_and_resources():
    asset = build_bisect_asset(ChainNames("staging"))
    assert asset.key == dg.AssetKey(["staging", "regression_bisect"])
    assert {"staging__eval_settings", "staging__artifact_storage"} <= asset.required_resource_keys
    assert not {"eval_settings", "artifact_storage"} & asset.required_resource_keys
    assert asset.group_names_by_key[asset.key] == "staging_evaluation"
