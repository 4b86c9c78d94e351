"""Every run knows what it is: real runs of one named command system in a temp Dagster instance.

One history, made once for the module (run tags as the schedule, the CLI, CI and the launchpad set
them; sweep variants as their run ids name them), in this order:

=============  =====================  ====  =========================================================
run            started as             mrr   what it shows
=============  =====================  ====  =========================================================
nightly-1      the nightly schedule   0.80  passes
bad            kebab-eval run         0.10  fails gate_mrr_min (min 0.3): the chain stops
ci-2           CI                     0.75  baseline nightly-1, not 'bad' (the issue: +0.65 "passed")
v12            sweep variant          0.60  no baseline: no earlier variant of its sweep
v8             sweep variant          0.40  baseline v12 (its sweep's), fails max_drop
exp            --role experiment      1.00  no baseline: no earlier experiment
ci-3           CI                     0.40  baseline ci-2, not exp / v8 / v12: max_drop fails
ci-4           CI, 'bad' pinned       0.80  the pinned failed run is used, and flagged
=============  =====================  ====  =========================================================

The system is one ``name`` (``search``) whatever its argv, so before roles and outcomes each run's
``previous`` was simply the run before it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import dagster as dg
import pytest
import yaml

from kebab_eval_pipeline.chain.pipeline import rank_sweep
from kebab_eval_pipeline.chain.settings import load_settings
from kebab_eval_pipeline.compare.bisect_stored import bisect_stored
from kebab_eval_pipeline.definitions import JOB_NAME, build_definitions
from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.foundation.run_ids import TRIGGER_TAG
from kebab_eval_pipeline.foundation.run_roles import ROLE_TAG
from kebab_eval_pipeline.reporting.export import export_json
from kebab_eval_pipeline.reporting.history import metric_history
from kebab_eval_pipeline.store.pins import pin_baseline
from kebab_eval_pipeline.store.runs import RunStore
from kebab_eval_pipeline.sweep.grid import expand
from tests import docs_pages
from tests.conftest import clean_cli_env, write
from tests.test_cli import cli, no_traceback

N = 20
# Finds the gold document for the first `good` queries (q00 … q19), a wrong one for the rest: MRR good/20.
SEARCH = (
    "import json, sys\n"
    "q, good = sys.argv[1], int(sys.argv[2])\n"
    "doc = 'doc-' + q if int(q[1:]) < good else 'doc-wrong'\n"
    "print(json.dumps({'hits': [{'rank': 1, 'chunk_id': doc, 'doc_id': doc}]}))\n"
)


def argv(good: int) -> list[str]:
    # -S: the search needs only the standard library, and skipping site's .pth files makes each of
    # the module's ~160 calls a third cheaper
    return [sys.executable, "-S", "-c", SEARCH, "{query}", str(good)]


SWEEP = {"name": "chunking", "grid": {"system.search_argv": [argv(12), argv(8)]}}
V12, V8 = (v.run_id for v in expand(SWEEP["name"], SWEEP["grid"]))


def config(folder: Path, good: int) -> Path:
    """The team's config with the system finding ``good`` of 20; one golden set, store and name."""
    doc = {
        "golden": str(folder / "golden.yaml"),
        "storage": str(folder / "store"),
        "answers": False,
        "system": {"kind": "command", "name": "search", "search_argv": argv(good), "concurrency": 4},
        "gates": {"mrr": {"min": 0.3}, "regression": {"mrr": {"max_drop": 0.1}}},
        "sweep": SWEEP,
    }
    return write(folder / f"good{good}.yaml", yaml.safe_dump(doc))


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("roles")
    queries = [
        {"id": f"q{i:02d}", "query": f"q{i:02d}", "supports": [{"doc_id": f"doc-q{i:02d}"}]} for i in range(N)
    ]
    write(folder / "golden.yaml", yaml.safe_dump({"schema_version": "1", "queries": queries}))
    return folder


@pytest.fixture(scope="module")
def history(folder, tmp_path_factory):
    """The module's runs (see the module docstring): run id → the Dagster result."""
    home = tmp_path_factory.mktemp("roles-home")
    (home / "dagster.yaml").write_text("")
    results = {}
    with pytest.MonkeyPatch.context() as mp, dg.instance_for_test(temp_dir=str(home)) as instance:
        mp.setenv("DAGSTER_HOME", str(home))

        def run(run_id: str, good: int, tags: dict[str, str]) -> None:
            defs = build_definitions(config(folder, good))
            instance.add_dynamic_partitions("eval_runs", [run_id])
            results[run_id] = defs.resolve_job_def(JOB_NAME).execute_in_process(
                partition_key=run_id, instance=instance, raise_on_error=False, tags=tags
            )

        run("nightly-1", 16, {TRIGGER_TAG: "nightly"})
        run("bad", 2, {TRIGGER_TAG: "cli"})
        run("ci-2", 15, {TRIGGER_TAG: "ci"})
        run(V12, 16, {TRIGGER_TAG: "cli"})  # the variant's own argv (12 of 20) replaces the base's
        run(V8, 16, {})  # launched from the UI's backfill: no tags at all
        run("exp", 20, {TRIGGER_TAG: "cli", ROLE_TAG: "experiment"})
        run("ci-3", 8, {TRIGGER_TAG: "ci"})
        pin_baseline(RunStore(str(folder / "store")), "bad")
        run("ci-4", 16, {TRIGGER_TAG: "ci"})
        # a role tag that is no role: refused at the first step, before any query runs
        run("typo", 16, {ROLE_TAG: "nighty"})
    return results


@pytest.fixture(scope="module")
def store(folder, history) -> RunStore:
    return RunStore(str(folder / "store"))


def info(store: RunStore, asset: str, run_id: str) -> dict:
    return store.manifest(asset, run_id)["info"]


def test_each_run_records_its_role_from_how_it_was_started(store, history):
    roles = {r: info(store, "run_metrics", r)["role"]["role"] for r in history if r != "typo"}
    assert roles == {
        "nightly-1": "nightly",
        "bad": "manual",
        "ci-2": "ci",
        V12: "sweep-variant",
        V8: "sweep-variant",
        "exp": "experiment",
        "ci-3": "ci",
        "ci-4": "ci",
    }
    assert info(store, "run_metrics", V8)["role"] == {
        "role": "sweep-variant",
        "source": "its run id is a variant of sweep 'chunking'",
        "sweep": "chunking",
    }
    assert info(store, "run_metrics", "nightly-1")["role"]["source"] == "run tag kebab-eval/trigger=nightly"
    # the UI shows it on run_metrics, with the outcome so far, and the whole outcome on the comparison
    meta = {
        e.asset_key.path[-1]: e.materialization.metadata
        for e in history["ci-3"].get_asset_materialization_events()
    }
    assert meta["run_metrics"]["role"].value == "ci"
    assert meta["run_metrics"]["outcome"].value.startswith("passed: system health and absolute gates")
    assert meta["comparison_report"]["outcome"].value == "failed (gate_mrr_max_drop)"
    assert meta["comparison_report"]["role"].value == "ci"


def test_a_role_tag_that_is_no_role_fails_the_first_step_naming_the_tag(store, history):
    result = history["typo"]
    assert not result.success and not store.exists("retrieval_results", "typo")
    [failure] = [e for e in result.all_events if e.is_step_failure]
    assert failure.step_key == "golden_set"
    description = failure.step_failure_data.user_failure_data.description
    assert "run tag kebab-eval/role" in description and "'nighty': expected one of ci, nightly" in description


def test_outcomes_are_recorded_by_run_metrics_and_completed_by_the_comparison(store, history):
    assert not history["bad"].success and not store.exists("comparison_report", "bad")
    assert info(store, "run_metrics", "bad")["outcome"] == {
        "outcome": "failed",
        "system_healthy": True,
        "failed": ["gate_mrr_min"],
        "covers": "system health and absolute gates (the regression gates: comparison_report)",
    }
    assert info(store, "run_metrics", "ci-3")["outcome"]["outcome"] == "passed"  # its part passed …
    assert info(store, "comparison_report", "ci-3")["outcome"] == {  # … the whole run did not
        "outcome": "failed",
        "failed": ["gate_mrr_max_drop"],
        "compared": True,
        "note": "",
    }
    assert not history["ci-3"].success and history["ci-2"].success
    # the export says both
    exported = export_json(store, "ci-3")
    assert exported["role"] == {"role": "ci", "source": "run tag kebab-eval/trigger=ci", "sweep": None}
    assert exported["outcome"]["outcome"] == "failed" and exported["outcome"]["failed"] == [
        "gate_mrr_max_drop"
    ]


def test_a_failed_run_is_not_the_next_runs_baseline_and_the_report_names_it(store, history):
    """(a) The issue: 'bad' (mrr 0.10, gate_mrr_min failed) was ci-2's baseline, so max_drop passed
    with "mrr moved +0.6500 (0.1000 → 0.7500)"."""
    report = info(store, "comparison_report", "ci-2")
    assert report["run_a"] == "nightly-1"
    assert report["baseline_note"].endswith("; skipped 1 later run(s): 'bad' failed gate_mrr_min)")
    assert report["baseline_skipped"] == [{"run_id": "bad", "reason": "failed gate_mrr_min"}]
    [drop] = report["gates"]
    # 20 queries cannot resolve a drop of 0.1 in mrr: the reason says so (gates/resolution.py).
    assert drop["passed"] and drop["reason"].startswith(
        "mrr moved -0.0500 (0.8000 → 0.7500); allowed drop 0.1 (finer than 20 queries resolve: ±0."
    )
    markdown = store.read_file("comparison_report", "ci-2", "comparison.md").decode()
    assert "skipped 1 later run(s): 'bad' failed gate_mrr_min)" in markdown


def test_sweep_variants_and_experiments_are_never_a_regular_runs_baseline(store, history):
    """(b) A variant of the named system between regular runs is skipped; variants compare with each
    other; an experiment with experiments."""
    report = info(store, "comparison_report", "ci-3")
    assert report["run_a"] == "ci-2"
    assert [s["run_id"] for s in report["baseline_skipped"]] == ["exp", V8, V12]
    assert report["baseline_skipped"][0]["reason"] == "is an experiment"
    assert report["baseline_skipped"][1]["reason"] == "is a variant of sweep 'chunking'"
    # the true drop is caught: 0.75 → 0.40 (against exp it would have read 1.00 → 0.40)
    assert report["gates"][0]["reason"].startswith("mrr moved -0.3500 (0.7500 → 0.4000); allowed drop 0.1")
    assert info(store, "comparison_report", V8)["run_a"] == V12  # its sweep's other variant
    first = info(store, "comparison_report", V12)
    assert first["run_a"] is None and "no earlier variant of sweep 'chunking'" in first["baseline_note"]
    assert "3 earlier run(s) on this set that are not variants of the sweep skipped" in first["baseline_note"]
    experiment = info(store, "comparison_report", "exp")
    assert experiment["run_a"] is None
    assert "no earlier experiment of command 'search'" in experiment["baseline_note"]


def test_a_pinned_failed_run_is_used_and_flagged(store, history):
    """(c) A pin is a deliberate choice: used whatever its outcome, and the report says it failed."""
    report = info(store, "comparison_report", "ci-4")
    assert report["run_a"] == "bad"
    flag = "pinned baseline 'bad' failed its blocking checks: gate_mrr_min"
    assert report["baseline_note"].endswith(f"; {flag})") and report["warnings"][0] == flag
    assert report["baseline_skipped"] == []


def test_history_shows_and_filters_role_and_outcome(store, history):
    """(d) The history table: every run with its role and outcome; --role and --outcome filter."""
    frame = metric_history(store, ["mrr"])
    rows = {r.run_id: (r.role, r.outcome, r.failed, r.mrr) for r in frame.itertuples()}
    assert rows == {
        "nightly-1": ("nightly", "passed", "", 0.8),
        "bad": ("manual", "failed", "gate_mrr_min", 0.1),
        "ci-2": ("ci", "passed", "", 0.75),
        V12: ("sweep-variant (chunking)", "passed", "", 0.6),
        V8: ("sweep-variant (chunking)", "failed", "gate_mrr_max_drop", 0.4),
        "exp": ("experiment", "passed", "", 1.0),
        "ci-3": ("ci", "failed", "gate_mrr_max_drop", 0.4),
        "ci-4": ("ci", "passed", "", 0.8),
    }
    passed_regular = metric_history(store, ["mrr"], roles=["regular"], outcome="passed")
    assert list(passed_regular["run_id"]) == ["nightly-1", "ci-2", "ci-4"]
    assert list(metric_history(store, ["mrr"], roles=["sweep:chunking", "experiment"])["run_id"]) == [
        V12,
        V8,
        "exp",
    ]


def test_bisect_shows_role_and_outcome_and_filters(store, history):
    everything = bisect_stored(store, "mrr")
    assert everything.info["runs"][:3] == ["nightly-1", "bad", "ci-2"]
    assert everything.info["roles"][:3] == ["nightly", "manual", "ci"]
    assert everything.info["outcomes"][:3] == ["passed", "failed", "passed"]
    notes = " ".join(everything.info["notes"])
    assert (
        "runs of several role families: 5 regular run(s), 2 variant(s) of sweep 'chunking', 1 experiment(s)"
        in notes
    )
    assert "3 run(s) failed their blocking checks: bad, " in notes
    # the drop into 'bad' and the recovery after it are changes, each saying 'bad' failed
    changes = {(c["run_a"], c["run_b"]): c for c in everything.changes.to_dict("records")}
    assert changes[("bad", "ci-2")]["caution"] == "the run before this step, 'bad', failed gate_mrr_min"
    assert changes[("nightly-1", "bad")]["caution"] == "the run after this step, 'bad', failed gate_mrr_min"
    steps = everything.steps.set_index("run_b")
    assert (steps.loc["ci-2", "role_a"], steps.loc["ci-2", "outcome_a"]) == ("manual", "failed")
    kept = bisect_stored(store, "mrr", roles=["regular"], outcome="passed")
    assert kept.info["runs"] == ["nightly-1", "ci-2", "ci-4"] and kept.info["n_changes"] == 0
    assert "kept 3 of 8 run(s) in the window: role regular, outcome passed" in kept.info["notes"]
    with pytest.raises(InputError) as caught:
        bisect_stored(store, "mrr", roles=["nighty"], outcome="green")
    assert [o.file for o in caught.value.offenders] == ["--role", "--outcome"]


def test_the_leaderboard_shows_role_and_outcome_and_ranks_by_outcome(folder, store, history):
    settings = load_settings(config(folder, 16))
    board = rank_sweep(store, settings)
    by_run = {r["run_id"]: (r["role"], r["outcome"]) for r in board.table.to_dict("records")}
    assert by_run == {
        V12: ("sweep-variant (chunking)", "passed"),
        V8: ("sweep-variant (chunking)", "failed (gate_mrr_max_drop)"),
    }
    with pytest.raises(InputError) as caught:  # one variant passed: nothing to rank
        rank_sweep(store, settings, outcome="passed")
    assert caught.value.offenders[0].reason == (
        "1 of 2 variants stored with outcome passed: a leaderboard needs two"
    )


def test_the_cli_shows_and_filters_them_too(folder, store, history, tmp_path_factory):
    env = clean_cli_env(tmp_path_factory, "roles-cli")
    cfg = str(config(folder, 16))
    csv = cli(env, "history", "--metric", "mrr", "--csv", "--config", cfg, "--outcome", "failed")
    assert csv.returncode == 0, csv.stderr
    lines = csv.stdout.splitlines()
    assert lines[0] == "run_id,created_at,chunker_version,golden,role,outcome,failed,mrr"
    assert [line.split(",")[0] for line in lines[1:]] == ["bad", V8, "ci-3"]
    assert ",manual,failed,gate_mrr_min,0.1" in csv.stdout
    table = cli(
        {**env, "COLUMNS": "200"}, "history", "--metric", "mrr", "--config", cfg, "--role", "sweep:chunking"
    )
    assert table.returncode == 0, table.stderr
    [row] = [line for line in table.stdout.splitlines() if V8 in line]
    assert "sweep-variant (chunking)" in row and "failed (gate_mrr_max_drop)" in row
    bisected = cli(env, "bisect", "mrr", "--config", cfg, "--role", "regular", "--format", "json")
    assert bisected.returncode == 0, bisected.stderr
    doc = json.loads(bisected.stdout)
    assert doc["runs"] == ["nightly-1", "bad", "ci-2", "ci-3", "ci-4"]
    assert doc["outcomes"] == ["passed", "failed", "passed", "failed", "passed"]
    text = cli(env, "bisect", "mrr", "--config", cfg, "--role", "regular")
    assert "  caution: the run before this step, 'bad', failed gate_mrr_min" in text.stdout
    assert "runs (oldest first):" in text.stdout
    bad = cli(env, "history", "--config", cfg, "--role", "nighty", "--outcome", "green")
    assert bad.returncode == 2
    no_traceback(bad)
    assert (
        "--role: 'nighty'" in bad.stderr
        and "--outcome: 'green': expected one of passed, failed" in bad.stderr
    )


def test_the_documented_role_and_outcome_commands_run_as_written(store, history, tmp_path_factory):
    """The baselines page's ``history``/``bisect`` filter snippet, line by line, against this
    module's runs (the store named by KEBAB_EVAL_STORAGE, as a team sets it)."""
    block = docs_pages.snippet("bash", "kebab-eval history --role regular").text
    commands = [line.split("#")[0].split() for line in block.splitlines()]
    assert [c[:2] for c in commands] == [["kebab-eval", "history"]] * 2 + [["kebab-eval", "bisect"]]
    env = {**clean_cli_env(tmp_path_factory, "roles-readme"), "KEBAB_EVAL_STORAGE": str(store.base)}
    passing, variants, bisected = (cli(env, *c[1:]) for c in commands)
    for proc in (passing, variants, bisected):
        assert proc.returncode == 0, proc.stderr
    assert [r for r in ("nightly-1", "bad", "ci-2", "ci-3", "ci-4", "exp") if r in passing.stdout] == [
        "nightly-1",
        "ci-2",
        "ci-4",
    ]
    assert V12 in variants.stdout and V8 in variants.stdout and "ci-2" not in variants.stdout
    assert (
        "bisect mrr over 5 runs" in bisected.stdout
        and "kept 5 of 8 run(s) in the window: role regular" in (bisected.stdout)
    )
