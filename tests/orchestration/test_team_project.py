"""The evaluation inside a team's own Dagster project (docs/examples/dagster-project).

A separate project — its own package (``team_search``), its own assets built by its own code —
imports kebab_eval_pipeline and:

- gates its ``search_index`` asset with a blocking ``evaluation_check``: a good index is deployed;
  a chunker that drops headings is stopped (the check fails naming the gate and the distance, and
  ``deploy_index`` does not run, so the live index stays the good one);
- holds two evaluation chains side by side (``staging``, ``production``) without key clashes.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest

from kebab_eval_pipeline.chain.settings import load_settings
from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.foundation.location import run_storage
from kebab_eval_pipeline.orchestration import evaluation_chain
from kebab_eval_pipeline.orchestration.names import ChainNames
from kebab_eval_pipeline.store.runs import RunStore
from tests.conftest import REPO
from tests.forked_cli import run_cli

PROJECT = REPO / "docs" / "examples" / "dagster-project"
SEARCH = dg.AssetKey("search_index")
DEPLOY = dg.AssetKey("deploy_index")


@pytest.fixture
def team_defs(instance, tmp_path, monkeypatch):
    """The team project's Definitions, imported as Dagster would (its folder on sys.path); runs are
    stored where they are by default (beside the instance), found by their chain's or gate's address.
    (test_team_project_installed.py installs the project and this package as a user would.)"""
    monkeypatch.setenv("TEAM_INDEX_ROOT", str(tmp_path / "index"))
    monkeypatch.syspath_prepend(str(PROJECT))
    for name in [m for m in sys.modules if m == "team_search" or m.startswith("team_search.")]:
        monkeypatch.delitem(sys.modules, name)
    from team_search.definitions import defs

    return defs


def _build(defs: dg.Definitions, instance, drop_headings: bool) -> dg.ExecuteInProcessResult:
    job = defs.resolve_implicit_job_def_def_for_assets([SEARCH, DEPLOY])
    return job.execute_in_process(
        instance=instance,
        asset_selection=[SEARCH, DEPLOY],
        run_config={"ops": {"search_index": {"config": {"drop_headings": drop_headings}}}},
        raise_on_error=False,
    )


def _materialized(result) -> list[str]:
    return [
        e.event_specific_data.materialization.asset_key.to_user_string()
        for e in result.get_asset_materialization_events()
    ]


def _mrr_from_scores(base: Path, run_id: str) -> float:
    """The stored run's MRR recomputed from its per-query rows (means over applicable queries)."""
    scores = RunStore(str(base)).read("query_scores", run_id)[0]["query_scores"]
    return float(pd.to_numeric(scores["mrr"], errors="coerce").dropna().mean())


def test_a_good_index_deploys_and_a_headingless_one_is_stopped_by_the_blocking_check(
    team_defs, instance, tmp_path
):
    good = _build(team_defs, instance, drop_headings=False)
    assert good.success
    assert _materialized(good) == ["search_index", "deploy_index"]
    [passed] = good.get_asset_check_evaluations()
    assert (passed.check_name, passed.passed) == ("index_quality", True)
    meta = {k: v.value for k, v in passed.metadata.items()}
    run_id = meta["run_id"]
    base = Path(meta["storage"])
    # the check's runs are where `--gate search_index --config eval/gate.yaml` looks
    assert str(base) == run_storage(
        load_settings(PROJECT / "eval" / "gate.yaml").storage, gate=["search_index"]
    )
    # the check's run is a stored run like any other: its MRR is the mean of its per-query rows
    assert meta["metric/mrr"] == pytest.approx(_mrr_from_scores(base, run_id), abs=1e-4)
    assert meta["metric/mrr"] >= 0.5 and meta["metric/hit@5"] >= 0.7
    assert meta["system"]["args"]["index"].startswith(str(tmp_path / "index" / "builds"))
    live = tmp_path / "index" / "live" / "version.json"
    assert json.loads(live.read_text())["chunker_version"] == "sections-1"

    bad = _build(team_defs, instance, drop_headings=True)
    assert not bad.success  # a failed blocking check fails the run …
    assert _materialized(bad) == ["search_index"]  # … and deploy_index never ran
    [failed] = bad.get_asset_check_evaluations()
    assert failed.passed is False and failed.severity == dg.AssetCheckSeverity.ERROR
    meta = {k: v.value for k, v in failed.metadata.items()}
    # which gate, and by how much: no hit names a gold section once the headings are gone
    assert meta["failed_gates"] == ["gate_mrr_min", "gate_hit_at_5_min"]
    assert (meta["gate"], meta["value"], meta["threshold"], meta["missed_by"]) == (
        "gate_mrr_min",
        0.0,
        0.5,
        0.5,
    )
    assert "gate_mrr_min: mrr = 0.0000 misses ≥ 0.5 (by 0.5000)" in failed.description
    assert _mrr_from_scores(base, meta["run_id"]) == 0.0
    # the live index is still the good one
    assert json.loads(live.read_text())["chunker_version"] == "sections-1"
    # the second run's baseline is the first (the same system identity: the team's callable)
    assert meta["baseline"] == run_id
    # each check's run records what it is, and whether it passed
    stored = RunStore(str(base))
    for check_run, outcome in ((run_id, "passed"), (meta["run_id"], "failed")):
        recorded = stored.manifest("run_metrics", check_run)["info"]
        assert recorded["role"]["role"] == "team-check" and recorded["outcome"]["outcome"] == outcome
    # a good index again: compared with the last index that passed, never with the stopped one
    again = _build(team_defs, instance, drop_headings=False)
    [check] = again.get_asset_check_evaluations()
    assert again.success and check.metadata["baseline"].value == run_id
    skipped = stored.manifest("comparison_report", check.metadata["run_id"].value)["info"]["baseline_skipped"]
    assert skipped == [{"run_id": meta["run_id"], "reason": "failed gate_mrr_min, gate_hit_at_5_min"}]


def test_two_chains_live_side_by_side_with_their_own_keys_resources_and_runs(team_defs, instance, tmp_path):
    graph = team_defs.resolve_asset_graph()
    keys = {k.to_user_string() for k in graph.get_all_asset_keys()}
    for chain in ("staging", "production"):
        assert {f"{chain}/golden_set", f"{chain}/run_metrics", f"{chain}/comparison_report"} <= keys
        assert f"{chain}__eval_settings" in team_defs.resources
    assert {"search_index", "deploy_index"} <= keys
    runs = {}
    for chain, chunk_size in (("staging", 300), ("production", 800)):
        names = ChainNames(chain)
        instance.add_dynamic_partitions(names.partitions_name, ["r1"])
        # a launchpad override of one field (Dagster then replaces the resource's whole config):
        # the chain's own file and settings must still hold
        override = {names.resource("eval_settings"): {"config": {"baseline": "none"}}}
        result = team_defs.resolve_job_def(names.name("evaluation_run")).execute_in_process(
            instance=instance, partition_key="r1", run_config={"resources": override}
        )
        assert result.success
        [gate] = [e for e in result.get_asset_check_evaluations() if e.check_name == "gate_mrr_min"]
        assert gate.asset_key == names.key("run_metrics")
        runs[chain] = gate.metadata["value"].value
        [metrics] = [
            e.event_specific_data.materialization.metadata
            for e in result.get_asset_materialization_events()
            if e.asset_key == names.key("run_metrics")
        ]
        assert metrics["chunker_version"].value == f"md-heading-2:size={chunk_size}:overlap=0"
        assert metrics["k"].value == [1, 5, 10]  # eval/<chain>.yaml's, not the defaults'
        # the chain's runs are where `--chain <chain> --config eval/<chain>.yaml` looks
        store = Path(run_storage(load_settings(PROJECT / "eval" / f"{chain}.yaml").storage, chain=chain))
        assert store == Path(os.environ["DAGSTER_HOME"]) / "kebab-eval" / "artifacts" / chain
        assert "no baseline" in str(RunStore(str(store)).read("comparison_report", "r1")[1]["baseline_note"])
    # one run id, two chains, two stores: each MRR is its own store's per-query mean
    for chain, mrr in runs.items():
        assert mrr == pytest.approx(_mrr_from_scores(Path(run_storage(chain=chain)), "r1"), abs=1e-4)
    assert runs["staging"] != runs["production"]  # 300- vs 800-character chunks: two systems, two numbers


def test_the_team_project_loads_with_dagsters_own_loader(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KEBAB_EVAL_", "DAGSTER_"))}
    home = tmp_path / "home"
    home.mkdir()
    env |= {"DAGSTER_HOME": str(home), "TEAM_INDEX_ROOT": str(tmp_path / "index")}
    done = run_cli(  # `dagster definitions validate`, forked ready-imported
        ["definitions", "validate", "-m", "team_search.definitions"],
        env=env,
        cwd=PROJECT,
        timeout=120,
        module="dagster",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Validation successful" in done.stdout + done.stderr


def test_chain_names_and_configuration_errors_say_what_is_wrong(tmp_path):
    with pytest.raises(InputError, match="invalid evaluation chain name") as bad:
        ChainNames("9-lives")
    assert "letter then letters" in bad.value.render()
    with pytest.raises(InputError, match="has no configuration"):
        evaluation_chain("staging")
    with pytest.raises(InputError, match="does not exist") as missing:
        evaluation_chain("staging", config=tmp_path / "nope.yaml")
    assert "nope.yaml" in missing.value.render()
    config = tmp_path / "eval.yaml"
    config.write_text("k: [1, 5]\n")
    with pytest.raises(InputError, match="run config is invalid") as invalid:
        evaluation_chain("staging", config=config, settings={"k": "ten"})
    assert "k" in invalid.value.render()
    # the same name twice is Dagster's own duplicate-key error, not a silent overwrite
    with pytest.raises(Exception, match="staging"):
        dg.Definitions.merge(
            evaluation_chain("staging", config=config), evaluation_chain("staging", config=config)
        ).resolve_asset_graph()
