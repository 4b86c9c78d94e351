"""A run reads each input once and lets the parse go when the chain no longer needs it (no
per-process cache holds a run's inputs; kebab_eval_pipeline.chain.memory trims the heap)."""

from __future__ import annotations

import gc
import json
import os
import time
import weakref

import pandas as pd

from kebab_eval_pipeline.chain.memory import trim_heap
from kebab_eval_pipeline.chain.settings import RunSettings
from kebab_eval_pipeline.systems.factory import build_system
from kebab_eval_pipeline.systems.replay import TRACES


def _inputs(tmp_path, n: int = 30):
    golden, trace = tmp_path / "gold.jsonl", tmp_path / "trace.jsonl"
    golden.write_text(
        "".join(
            json.dumps({"qid": f"q{i}", "question": f"question {i}?", "gold_citations": [f"d{i}#1"]}) + "\n"
            for i in range(n)
        ),
        encoding="utf-8",
    )
    trace.write_text(
        "".join(
            json.dumps({"qid": f"q{i}", "q": f"question {i}?", "retrieved_ids": [f"d{i + i % 2}#1", "x#2"]})
            + "\n"
            for i in range(n)
        ),
        encoding="utf-8",
    )
    then = time.time() - 3600  # written long ago: the read-once caches keep them
    for path in (golden, trace):
        os.utime(path, (then, then))
    return golden, trace


def test_a_run_system_holds_its_own_parse_and_a_version_reading_keeps_one(tmp_path) -> None:
    """A run's system is built once per run (its run context) and let go after its retrieval: no
    process-wide cache holds its trace. A version reading (a sensor's tick) keeps its parse while
    the file is unchanged."""
    from kebab_eval_pipeline.systems.factory import live_info

    _, trace = _inputs(tmp_path)
    settings = RunSettings(system={"kind": "replay", "path": str(trace), "format": "wfgy"})
    assert build_system(settings).records is not build_system(settings).records
    TRACES.clear()
    loads = TRACES.loads
    first, second = live_info(settings), live_info(settings)
    assert TRACES.loads == loads + 1 and first == second
    assert first.details["trace_sha256"] == build_system(settings).info().details["trace_sha256"]
    assert trim_heap()  # glibc (the CI image): the call exists and ran


def _replay_run(tmp_path, monkeypatch, **extra) -> tuple:
    """A fresh DAGSTER_HOME and a config replaying ``_inputs``' trace against its golden set
    (``extra``: more config keys); returns the home and the config path."""
    golden, trace = _inputs(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n", encoding="utf-8")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    config = tmp_path / "run.yaml"
    config.write_text(
        json.dumps(
            {
                "golden": str(golden),
                "system": {"kind": "replay", "path": str(trace), "format": "wfgy"},
                "match": "chunk",
                "baseline": "none",
                "storage": str(home / "runs"),
                **extra,
            }
        ),
        encoding="utf-8",
    )
    return home, config


def test_a_cli_run_parses_each_input_once_and_holds_neither_afterwards(tmp_path, monkeypatch) -> None:
    from kebab_eval_pipeline.cli.run import run

    home, config = _replay_run(tmp_path, monkeypatch)
    from kebab_eval_pipeline.golden import load as golden_load
    from kebab_eval_pipeline.systems import replay

    parsed: dict[str, list] = {"golden": [], "trace": [], "system": []}

    def counted(name, read, keep):
        def wrapper(*args, **kwargs):
            value = read(*args, **kwargs)
            parsed[name].append(weakref.ref(keep(value)))
            return value

        return wrapper

    monkeypatch.setattr(golden_load, "_load_golden", counted("golden", golden_load._load_golden, lambda v: v))
    # the trace's records live in the system built from it (its records are slotted: no weakref)
    from kebab_eval_pipeline.systems import factory

    monkeypatch.setattr(replay, "read_trace", counted("trace", replay.read_trace, lambda v: replay))
    monkeypatch.setattr(factory, "build_system", counted("system", factory.build_system, lambda v: v))
    run(
        run_id="r1",
        config=config,
        golden=None,
        system=None,
        mode=None,
        answers=None,
        baseline=None,
        chunk_size=None,
        judge=None,
    )
    # the CLI's checks, the input observation, golden_set and the shards shared one parse of each
    assert [len(parsed["golden"]), len(parsed["trace"]), len(parsed["system"])] == [1, 1, 1]
    # nothing of the run holds either parse once it has ended (no per-process cache keeps them; no
    # cycle keeps them either: reference counting freed them, no collection was needed)
    assert parsed["golden"][0]() is None and parsed["system"][0]() is None
    assert gc.get_freeze_count() == 0  # the collector is the caller's again

    from kebab_eval_pipeline.store.runs import RunStore

    store = RunStore(home / "runs")
    stored = store.read("run_metrics", "r1")[0]["metrics"]
    hit1 = stored.loc[stored["metric"] == "hit@1", "value"].item()
    assert hit1 == 0.5  # the even queries rank their gold chunk first, the odd ones miss it

    # Scoring read the hits without the columns no hit sets (paths, lines, versions of a WFGY
    # trace): the stored scores are those of the hits read whole.
    from kebab_eval_pipeline.chain import pipeline
    from kebab_eval_pipeline.chain.artifacts import GoldenArtifact, RetrievalArtifact
    from kebab_eval_pipeline.chain.run_overrides import settings_for_run

    settings = settings_for_run(config, {})
    sparse = pipeline.with_scoring_hits(
        RetrievalArtifact.from_tables(*store.read("retrieval_results", "r1")), store, "r1", settings
    )
    whole = RetrievalArtifact.from_tables(*store.read("retrieval_results", "r1"))
    skipped = set(whole.results.hits.columns) - set(sparse.results.hits.columns)
    assert {"doc_path", "doc_id", "line_start", "line_end", "index_version"} <= skipped
    assert "chunk_id" in sparse.results.hits.columns and "query_id" in sparse.results.hits.columns
    golden_art = GoldenArtifact.from_tables(*store.read("golden_set", "r1"))
    rescored = pipeline.score(settings, golden_art, whole).scores
    stored_scores = store.read("query_scores", "r1")[0]["query_scores"]
    pd.testing.assert_frame_equal(stored_scores, rescored)


def test_a_jsonl_trace_keeps_each_record_as_its_line(tmp_path) -> None:
    """A replayed JSONL trace holds each query's line, not its parsed ranking and answer (a third of
    the memory at a million queries); the outcomes are those of the parsed record."""
    from kebab_eval_pipeline.systems.outcome import QueryRequest
    from kebab_eval_pipeline.systems.replay import read_trace

    _, trace = _inputs(tmp_path, n=5)
    lines = trace.read_text(encoding="utf-8").splitlines()
    records, fmt, *_ = read_trace(trace, "auto")
    assert fmt == "wfgy"
    assert [records[f"q{i}"].line for i in range(5)] == lines
    assert all(r.raw_hits is None and r.raw_answer is None for r in records.values())
    assert records["q3"].raw(fmt) == (["d4#1", "x#2"], None)
    system = build_system(RunSettings(system={"kind": "replay", "path": str(trace), "format": "wfgy"}))
    (outcome,) = system.run_queries([QueryRequest("q3", "question 3?")], k=1, answers=True)
    assert [h.chunk_id for h in outcome.hits] == ["d4#1"] and outcome.error is None


def test_a_sweep_parses_its_golden_set_once_for_every_variant(tmp_path, monkeypatch) -> None:
    """The variants of a sweep share one parse of their golden set (each variant parsed it again:
    ~3.5 s a variant at 100k queries), and every variant is stored with that set's hash."""
    from kebab_eval_pipeline.cli.sweep import sweep
    from kebab_eval_pipeline.golden import load as golden_load
    from kebab_eval_pipeline.store.runs import RunStore

    sweep_grid = {"name": "ks", "grid": {"k": [[1, 5], [1, 10]]}, "metric": "mrr"}
    home, config = _replay_run(tmp_path, monkeypatch, sweep=sweep_grid)
    parses = []

    def counted(*args, **kwargs):
        parses.append(args[0])
        return load(*args, **kwargs)

    load = golden_load._load_golden
    monkeypatch.setattr(golden_load, "_load_golden", counted)
    sweep(config=config, storage=None, only=None, rerun=False, output="text", outcome=None, chain=None)
    assert len(parses) == 1
    store = RunStore(home / "runs")
    variants = [r["run_id"] for r in store.runs("golden_set") if r["run_id"].startswith("sweep-ks-")]
    assert len(variants) == 2, variants
    assert len({store.read("golden_set", run_id)[1]["sha256"] for run_id in variants}) == 1


_FRAGMENTED_FREE = """
import sys
import numpy as np
from kebab_eval_pipeline.chain.memory import return_large_blocks


def rss_mib():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS")) / 1024


if sys.argv[1] == "fixed":
    assert return_large_blocks()
del_me = np.ones(16 << 17)  # 16 MiB mapped, then freed: glibc's threshold follows it up
del del_me
before = rss_mib()
big, small = [], []
for _ in range(40):  # 40 × 4 MiB, each followed by a small block that stays: the heap cannot shrink
    big.append(np.ones(1 << 19))
    small.append(np.ones(64))
del big
print(rss_mib() - before)
"""


def test_large_blocks_go_back_to_the_system_as_they_are_freed() -> None:
    """After ``return_large_blocks`` (called with the heap trim before the scoring step), a freed
    block of 1 MiB or more no longer stays resident behind a live small one: the scoring step's
    per-query arrays of a million-query run are such blocks. Without it (glibc's default), the
    same 160 MiB stays resident — what the test measures is real."""
    import subprocess
    import sys

    def retained(mode: str) -> float:
        out = subprocess.run(
            [sys.executable, "-c", _FRAGMENTED_FREE, mode], capture_output=True, text=True, check=True
        )
        return float(out.stdout.strip())

    assert retained("default") > 120  # MiB: glibc kept the freed 4 MiB blocks in its heap
    assert retained("fixed") < 20
