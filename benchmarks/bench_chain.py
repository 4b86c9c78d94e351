"""The whole chain through Dagster vs the same work as a plain script (SPEC §10).

Runs both on the bundled demo (or a golden set replicated N times) in one process and
prints seconds and the Dagster/plain ratio. Not a test: run it by hand.

    python benchmarks/bench_chain.py [--repeat-golden 10] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import dagster as dg
import yaml

from kebab_eval_pipeline.chain import pipeline
from kebab_eval_pipeline.definitions import JOB_NAME, build_definitions, run_settings
from kebab_eval_pipeline.foundation.demo import DEMO_GOLDEN

# as `kebab-eval run` does: Dagster's DEBUG event stream goes to the instance, not the terminal
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


def replicated_golden(times: int, folder: Path) -> Path:
    """The demo golden set with every query repeated ``times`` times (fresh ids, same supports)."""
    doc = yaml.safe_load(DEMO_GOLDEN.read_text(encoding="utf-8"))
    queries = []
    for n in range(times):
        for q in doc["queries"]:
            q = dict(q, id=f"{q['id']}-r{n}")
            if q.get("group"):
                q["group"] = f"{q['group']}-r{n}"
            queries.append(q)
    path = folder / "golden.yaml"
    path.write_text(yaml.safe_dump({**doc, "queries": queries}, allow_unicode=True), encoding="utf-8")
    return path


def plain(defs: dg.Definitions, run_id: str) -> None:
    settings = run_settings(defs)
    golden = pipeline.load_golden_artifact(settings)
    retrieval = pipeline.retrieve(settings, golden)
    scores = pipeline.score(settings, golden, retrieval)
    pipeline.summarize(run_id, settings, golden, retrieval, scores)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat-golden", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["DAGSTER_HOME"] = tmp
        golden = replicated_golden(args.repeat_golden, Path(tmp))
        defs = build_definitions(overrides={"golden": str(golden), "baseline": "none"})
        job = defs.resolve_job_def(JOB_NAME)
        plain(defs, "warm-up")  # index build and imports out of the timings
        plain_s, dagster_s = [], []
        with dg.instance_for_test(temp_dir=tmp) as instance:
            for r in range(args.rounds):
                started = time.perf_counter()
                plain(defs, f"plain-{r}")
                plain_s.append(time.perf_counter() - started)
                instance.add_dynamic_partitions("eval_runs", [f"bench-{r}"])
                started = time.perf_counter()
                result = job.execute_in_process(
                    partition_key=f"bench-{r}", instance=instance, run_config=QUIET
                )
                dagster_s.append(time.perf_counter() - started)
                assert result.success
        n_queries = len(yaml.safe_load(golden.read_text())["queries"])
        p, d = statistics.median(plain_s), statistics.median(dagster_s)
        print(f"queries: {n_queries}, rounds: {args.rounds}")
        print(f"plain script : {p:7.3f} s (median)")
        print(f"dagster chain: {d:7.3f} s (median; incl. Parquet writes, metadata, gate checks)")
        print(f"ratio dagster/plain: {d / p:.2f}x   overhead: {d - p:.3f} s")


if __name__ == "__main__":
    main()
