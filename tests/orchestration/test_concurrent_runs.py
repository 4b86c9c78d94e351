"""Four run partitions materialised at once by four real `dagster asset materialize` processes
sharing one Dagster instance, one artifact storage and one (cold) reference-index cache; and
concurrent `kebab-eval baseline set` writers of the shared pin document."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import dagster as dg
import pandas as pd

from kebab_eval_pipeline.chain import pipeline
from kebab_eval_pipeline.chain.artifacts import ComparisonArtifact, QueryScoresArtifact, RunMetricsArtifact
from kebab_eval_pipeline.chain.settings import load_settings
from kebab_eval_pipeline.store.pins import read_pins
from kebab_eval_pipeline.store.runs import RunStore
from tests.conftest import demo_golden_subset, write
from tests.forked_cli import start_cli
from tests.orchestration.test_crash_recovery import finish, partition_runs, start_materialize
from tests.test_cli import cli_env

SUBSET_A = slice(0, 20)  # three runs share this golden set (same sha256: each may be a baseline)
SUBSET_B = slice(20, 36)
RUNS = {
    # run id: (golden subset, extra config) — deliberately different settings, so results differ
    "lexical": (SUBSET_A, ""),
    "k-no-answers": (SUBSET_A, "k: [1, 2, 20]\nanswers: false\n"),
    "chunk-400": (SUBSET_A, "system: {kind: reference, chunk_size: 400}\n"),
    "other-golden": (SUBSET_B, "system: {kind: reference, chunk_size: 400}\n"),
}


def run_alone(config: Path, run_id: str, store: RunStore) -> None:
    """The same settings evaluated alone, in-process (pipeline functions, no Dagster), stored in a
    separate ``store`` through the same Parquet round trip."""
    settings = load_settings(config)
    golden = pipeline.load_golden_artifact(settings)
    retrieval = pipeline.retrieve(settings, golden)
    scores = pipeline.score(settings, golden, retrieval)
    store.write("query_scores", run_id, *scores.to_tables())
    store.write(
        "run_metrics", run_id, *pipeline.summarize(run_id, settings, golden, retrieval, scores).to_tables()
    )


def without_timings(frame: pd.DataFrame, name_column: str | None = None) -> pd.DataFrame:
    """Drop what measures wall time (latency columns or ``*_ms*`` metric rows): all else must match."""
    frame = frame.drop(columns=[c for c in frame.columns if c.endswith("_ms")])
    if name_column:
        frame = frame[~frame[name_column].str.contains("_ms")]
    return frame.reset_index(drop=True)


def test_four_partitions_materialized_at_once_are_correct_and_independent(instance, tmp_path):
    goldens = {
        part.start: demo_golden_subset(tmp_path / f"golden-{part.start}.yaml", part)
        for part in (SUBSET_A, SUBSET_B)
    }
    configs = {
        run_id: write(
            tmp_path / f"{run_id}.yaml", f"golden: {goldens[part.start]}\ndefault_gates: false\n{extra}"
        )
        for run_id, (part, extra) in RUNS.items()
    }
    instance.add_dynamic_partitions("eval_runs", list(RUNS))  # `kebab-eval runs add`, four times
    # cold and shared: the two runs on chunk size 400 race to build its entry (the default settings'
    # index ships with the package: those runs load it)
    cache = tmp_path / "index-cache"

    logs = {run_id: tmp_path / f"{run_id}.log" for run_id in RUNS}
    procs = {
        run_id: start_materialize(run_id, configs[run_id], logs[run_id], KEBAB_EVAL_INDEX_CACHE=str(cache))
        for run_id in RUNS
    }
    for run_id, proc in procs.items():
        finish(proc, logs[run_id])

    # The instance recorded exactly one successful run per partition.
    for run_id in RUNS:
        assert [r.status for r in partition_runs(instance, run_id)] == [dg.DagsterRunStatus.SUCCESS]
        for asset in (
            "golden_set",
            "retrieval_results",
            "judge",
            "query_scores",
            "run_metrics",
            "comparison_report",
        ):
            assert run_id in instance.get_materialized_partitions(dg.AssetKey(asset)), (run_id, asset)

    # One cache entry, for chunk size 400, complete; no staging folder left by the losing builder.
    assert len([p for p in cache.iterdir() if not p.name.startswith(".")]) == 1
    assert [p.name for p in cache.iterdir() if p.name.startswith(".")] == []

    # Each partition holds what its settings give when run alone.
    store = RunStore(tmp_path / "dagster_home" / "kebab-eval" / "artifacts")
    alone = RunStore(tmp_path / "alone")
    metrics, infos = {}, {}
    for run_id in RUNS:
        run_alone(configs[run_id], run_id, alone)
        shared_scores = QueryScoresArtifact.from_tables(*store.read("query_scores", run_id)).scores
        alone_scores = QueryScoresArtifact.from_tables(*alone.read("query_scores", run_id)).scores
        pd.testing.assert_frame_equal(without_timings(shared_scores), without_timings(alone_scores))
        tables, infos[run_id] = store.read("run_metrics", run_id)
        alone_tables, alone_info = alone.read("run_metrics", run_id)
        for name, column in (("metrics", "metric"), ("breakdowns", "metric")):
            pd.testing.assert_frame_equal(
                without_timings(tables[name], column), without_timings(alone_tables[name], column)
            )
        assert infos[run_id]["versions"] == alone_info["versions"]
        assert infos[run_id]["golden"]["sha256"] == alone_info["golden"]["sha256"]
        metrics[run_id] = RunMetricsArtifact.from_tables(tables, infos[run_id]).metrics

    # ... and the settings really differ, so a mixed-up partition could not pass the checks above.
    assert "hit@10" in metrics["lexical"] and "hit@20" not in metrics["lexical"]
    assert "hit@20" in metrics["k-no-answers"] and "hit@10" not in metrics["k-no-answers"]
    assert metrics["lexical"]["citation_coverage"] is not None  # answers on
    assert metrics["k-no-answers"]["citation_coverage"] is None
    assert infos["chunk-400"]["versions"]["chunker_version"] == "md-heading-2:size=400:overlap=0"
    assert infos["lexical"]["versions"]["chunker_version"] == "md-heading-2:size=800:overlap=0"
    assert metrics["other-golden"]["n_queries"] == SUBSET_B.stop - SUBSET_B.start
    assert metrics["lexical"]["n_queries"] == SUBSET_A.stop - SUBSET_A.start

    # Automatic baselines: a complete neighbour on the same golden set, finished earlier, or none.
    chosen = {}
    for run_id in RUNS:
        report = ComparisonArtifact.from_tables(*store.read("comparison_report", run_id))
        chosen[run_id] = baseline = report.info["run_a"]
        if baseline is None:
            assert report.info["verdict_counts"] and "no baseline" in report.markdown
            continue
        assert baseline in RUNS and baseline != run_id
        assert infos[baseline]["golden"]["sha256"] == infos[run_id]["golden"]["sha256"]
        assert infos[baseline]["created_at"] < infos[run_id]["created_at"]
        # What the comparison read is the neighbour's final, complete artifacts.
        assert report.info["versions_a"] == infos[baseline]["versions"]
        assert report.info["metrics_a"]["n_queries"] == metrics[baseline]["n_queries"]
        assert len(report.per_query) == metrics[run_id]["n_queries"]
    assert chosen["other-golden"] is None  # the only run on its golden set
    same_golden = [r for r in RUNS if r != "other-golden"]
    first = min(same_golden, key=lambda r: infos[r]["created_at"])
    assert chosen[first] is None  # nothing on its golden set had finished before it


CLI_WORKER = """
import json, sys, time
from pathlib import Path
import dagster  # noqa: F401  (imported before the start line, like the CLI itself, so what follows overlaps)
from kebab_eval_pipeline import cli
spec = json.loads(sys.argv[1])


def run(args):
    sys.argv = ["kebab-eval", *args]
    cli.main()  # the console script's entry point: exits 2 (bad input) or 3 (internal failure)


for args in spec["warm_up"]:  # before the start line: the timed commands then really overlap
    run(args)
ready = Path(spec["ready"])
(ready / spec["name"]).touch()
while len(list(ready.iterdir())) < spec["workers"]:
    time.sleep(0.002)
for args in spec["commands"]:
    run(args)
"""


def run_cli_together(
    environment: dict, ready: Path, commands: dict[str, list[list[str]]], warm_up: list[list[str]] = ()
) -> dict[str, str]:
    """One process per entry of ``commands`` (name → `kebab-eval` argument lists, run in order in
    one interpreter, as the console script runs them), each after the ``warm_up`` commands, all
    released at the same instant; returns each one's stdout, failing on any non-zero exit. Each
    process is forked ready-imported (:func:`tests.forked_cli.start_cli`, the worker a module in
    the folder beside ``ready``)."""
    ready.mkdir()
    (ready.parent / "kebab_cli_worker.py").write_text(CLI_WORKER, encoding="utf-8")
    procs = {}
    for name, argv_list in commands.items():
        spec = {"ready": str(ready), "workers": len(commands), "name": name}
        spec |= {"warm_up": list(warm_up), "commands": argv_list}
        procs[name] = start_cli(
            [json.dumps(spec)],
            env=environment,
            cwd=ready.parent,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            module="kebab_cli_worker",
        )
    outputs = {}
    for name, proc in procs.items():
        outputs[name], err = proc.communicate(timeout=300)
        assert proc.returncode == 0, f"{name}: exit {proc.returncode}: {err}"
    return outputs


def test_concurrent_baseline_set_for_different_golden_sets_keeps_every_pin(instance, tmp_path):
    """Four processes pin, all at once through the CLI's `baseline set`, eight golden sets each
    (every pin a read-modify-write of the one shared pin document): none of the 32 pins is lost."""
    workers, rounds = 4, 8
    settings = load_settings(
        write(tmp_path / "eval.yaml", f"golden: {demo_golden_subset(tmp_path / 'g.yaml', slice(0, 5))}\n")
    )
    golden = pipeline.load_golden_artifact(settings)
    retrieval = pipeline.retrieve(settings, golden)
    scores = pipeline.score(settings, golden, retrieval)
    tables, info = pipeline.summarize("seed", settings, golden, retrieval, scores).to_tables()
    environment = dict(os.environ)  # DAGSTER_HOME: the instance fixture's (already initialised) home
    store = RunStore(Path(environment["DAGSTER_HOME"]) / "kebab-eval" / "artifacts")  # the CLI's default
    # golden set name → the one stored run that gets pinned for it
    runs = {f"set-{w}-{r}": f"run-{w}-{r}" for w in range(workers) for r in range(rounds)}
    for name, run_id in runs.items():
        golden_info = {**info["golden"], "name": name}
        store.write("run_metrics", run_id, tables, {**info, "run_id": run_id, "golden": golden_info})

    outputs = run_cli_together(
        environment,
        tmp_path / "ready",
        {f"w{w}": [["baseline", "set", f"run-{w}-{r}"] for r in range(rounds)] for w in range(workers)},
        warm_up=[["baseline", "show", "--json"]],
    )
    for worker, out in outputs.items():
        assert out.count("pinned run-") == rounds, (worker, out)

    assert {name: pin["run_id"] for name, pin in read_pins(store).items()} == runs


def test_concurrent_first_commands_on_a_fresh_dagster_home(tmp_path, monkeypatch):
    """Four `kebab-eval` commands started at once on a new DAGSTER_HOME (the first nightly jobs of
    a fresh CI machine) all succeed, and the instance they create stays usable."""
    env = cli_env(tmp_path, bare=True)  # no storage created yet
    outputs = run_cli_together(env, tmp_path / "ready", {f"w{n}": [["runs", "list"]] for n in range(4)})
    assert all("run_id" in out for out in outputs.values())
    monkeypatch.setenv("DAGSTER_HOME", env["DAGSTER_HOME"])
    with dg.DagsterInstance.get() as created:  # opens (and checks the schema of) every storage
        assert created.get_runs() == [] and list(created.all_instigator_state()) == []
