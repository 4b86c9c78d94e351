"""Benchmark: one evaluation run's throughput on 2 Celery workers against 1 (issue 25).

    python benchmarks/bench_celery_throughput.py                       # 10k queries, 2 vs 1 worker
    python benchmarks/bench_celery_throughput.py --queries 2000 --latency-ms 50 --concurrency 4
    python benchmarks/bench_celery_throughput.py --replay 100000       # 100k replayed: celery = in-process

Throughput: an http system under test on 127.0.0.1 (a starlette/uvicorn app in a process of its
own, started by this script) answers every search after ``--latency-ms`` (50 ms), one hit per
query. The run config reaches it through the http adapter with ``concurrency`` requests in flight
per step process (``--concurrency``, 4) and cuts the run into ``--shards`` shards (8): each shard
of retrieval_results is a Dagster step, and each Celery worker (one pool process each) runs one
step at a time, so a worker holds at most ``concurrency`` requests in flight — the per-worker
limit. The same run (10k queries by default) is materialized with 1 worker, then with 2, on the
deployment of docs/site/recipes/celery.md: Redis (``redis-server``), PostgreSQL (a throwaway cluster, or
``KEBAB_EVAL_TEST_POSTGRES_URL``) and moto's S3-compatible server, all on 127.0.0.1
(tests/celery_cluster.py). Printed per worker count: the wall time of ``dagster asset
materialize``, the retrieval phase (first shard step's start to last shard step's success, from
the run's event log) and its throughput in queries per second; then the ratios 2 workers / 1
worker, with the load average beside them. Target: retrieval throughput ratio ≥ 1.8×. The ideal,
with ``concurrency / latency`` queries per second per worker, is printed too.

``--replay N``: a generated replay trace of N queries (tests/celery_cluster.py
``write_replay_run``) materialized on 2 workers and run in-process (``kebab-eval run``) into the
same bucket; prints both wall times and checks that query_scores and the metrics are equal.

Needs the ``celery`` and ``postgres`` extras, ``redis-server`` and the sharded chain
(``shard_queries`` in the run config). Not a test: timings depend on the machine.

Measured (2 shared cores, load 2–6, 2026-11-27): 10k queries, 50 ms, concurrency 4, 8 shards —
1 worker: run 175.5 s, retrieval 147.2 s (67.9 q/s); 2 workers: run 118.4 s, retrieval 76.7 s
(130.3 q/s); ratio 1.92× (whole run 1.48×). ``--replay 100000 --shards 10``: 2 workers 399 s,
in-process 475 s (load 5–8), query_scores and run_metrics equal.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

MATERIALIZE = [
    sys.executable,
    "-m",
    "dagster",
    "asset",
    "materialize",
    "-m",
    "kebab_eval_pipeline.definitions",
]
CLI = [sys.executable, "-m", "kebab_eval_pipeline.cli"]


def serve(port: int, latency_ms: float) -> None:
    """The system under test: POST /search {query, k} → after latency_ms, one hit ``{query}-c1``."""
    import uvicorn
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def search(request):
        body = await request.json()
        await asyncio.sleep(latency_ms / 1000)
        return JSONResponse({"hits": [{"rank": 1, "chunk_id": f"{body['query']}-c1", "score": 1.0}]})

    app = Starlette(routes=[Route("/search", search, methods=["POST"])])
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def write_http_run(folder: Path, n: int, port: int, concurrency: int, shards: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    golden = folder / "golden.jsonl"
    with golden.open("w", encoding="utf-8") as fh:
        for i in range(1, n + 1):
            qid = f"t{i:06d}"
            fh.write(json.dumps({"id": qid, "query": qid, "supports": [{"chunk_id": f"{qid}-c1"}]}) + "\n")
    config = folder / "eval.yaml"
    run = {
        "golden": str(golden),
        "system": {
            "kind": "http",
            "search_url": f"http://127.0.0.1:{port}/search",
            "concurrency": concurrency,
            "timeout_s": 30,
        },
        "answers": False,
        "baseline": "none",
        "shard_queries": -(-n // shards),
    }
    config.write_text(json.dumps(run, indent=2), encoding="utf-8")  # JSON is YAML
    return config


def materialize(env: dict, partition: str) -> float:
    assert subprocess.run([*CLI, "runs", "add", partition], env=env, capture_output=True).returncode == 0
    started = time.monotonic()
    proc = subprocess.run(
        [*MATERIALIZE, "--select", "*", "--partition", partition], env=env, capture_output=True, text=True
    )
    wall = time.monotonic() - started
    if proc.returncode != 0:
        raise SystemExit(f"materialize {partition} failed:\n{proc.stderr[-4000:]}")
    return wall


def retrieval_phase(env: dict, partition: str) -> tuple[float, int]:
    """Seconds from the first retrieval shard step's start to the last one's success, and the
    number of shard steps, from the run's event log."""
    import dagster as dg

    from tests.celery_cluster import deployment_environ

    with deployment_environ(env), dg.DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
        [run] = instance.get_runs(filters=dg.RunsFilter(tags={"dagster/partition": partition}))
        records = [r for r in instance.all_logs(run.run_id) if r.dagster_event]
    shard = [r for r in records if "retrieve_shard" in (r.dagster_event.step_key or "")]
    starts = [r.timestamp for r in shard if r.dagster_event.event_type == dg.DagsterEventType.STEP_START]
    ends = [r.timestamp for r in shard if r.dagster_event.event_type == dg.DagsterEventType.STEP_SUCCESS]
    if not starts:
        raise SystemExit("no retrieve_shard steps in the run: this benchmark needs the sharded chain")
    return max(ends) - min(starts), len(ends)


def throughput(args) -> None:
    from tests.celery_cluster import celery_workers, deployment_env, free_port, redis_server, s3_server
    from tests.postgres import postgres_server

    root = Path(tempfile.mkdtemp(prefix="bench-celery-"))
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(port), "--latency-ms", str(args.latency_ms)]
    )
    try:
        config = write_http_run(root / "run", args.queries, port, args.concurrency, args.shards)
        with redis_server() as broker, s3_server() as s3, postgres_server() as pg:
            env = deployment_env(dict(os.environ), root / "dagster_home", broker, s3, pg, prefix="bench")
            env["KEBAB_EVAL_CONFIG"] = str(config)
            rows = {}
            for count in (1, 2):
                with celery_workers(env, count):
                    wall = materialize(env, f"tp-{count}w")
                    phase, steps = retrieval_phase(env, f"tp-{count}w")
                rows[count] = (wall, phase, steps, os.getloadavg()[0])
    finally:
        server.terminate()
        server.wait()
    ideal = args.concurrency / (args.latency_ms / 1000)
    print(
        f"\n{args.queries} queries, {args.latency_ms:g} ms per query, concurrency {args.concurrency} per "
        f"worker, {args.shards} shards; ideal {ideal:.0f} q/s per worker"
    )
    print(f"{'workers':>7} {'run wall s':>10} {'retrieval s':>11} {'shards':>6} {'q/s':>7} {'load1':>6}")
    for count, (wall, phase, steps, load) in rows.items():
        print(f"{count:>7} {wall:>10.1f} {phase:>11.1f} {steps:>6} {args.queries / phase:>7.1f} {load:>6.2f}")
    (w1, p1, _, _), (w2, p2, _, _) = rows[1], rows[2]
    print(
        f"ratio 2/1 workers: retrieval throughput {p1 / p2:.2f}x (target >= 1.8x), whole run {w1 / w2:.2f}x"
    )


def replay(args) -> None:
    import pandas as pd

    from kebab_eval_pipeline.store.runs import RunStore
    from tests.celery_cluster import (
        celery_workers,
        deployment_env,
        deployment_environ,
        redis_server,
        s3_server,
        write_replay_run,
    )
    from tests.postgres import postgres_server

    root = Path(tempfile.mkdtemp(prefix="bench-replay-"))
    config = write_replay_run(root / "run", args.replay)
    with redis_server() as broker, s3_server() as s3, postgres_server() as pg:
        env = deployment_env(dict(os.environ), root / "dagster_home", broker, s3, pg, prefix="bench")
        env["KEBAB_EVAL_CONFIG"] = str(config)
        if args.shards > 1:
            run = json.loads(config.read_text())
            run["shard_queries"] = -(-args.replay // args.shards)
            config.write_text(json.dumps(run))
        with celery_workers(env, 2):
            celery_wall = materialize(env, "replay-celery")
        started = time.monotonic()
        proc = subprocess.run(
            [*CLI, "run", "--run-id", "replay-inproc"], env=env, capture_output=True, text=True
        )
        inproc_wall = time.monotonic() - started
        if proc.returncode != 0:
            raise SystemExit(f"kebab-eval run failed:\n{proc.stderr[-4000:]}")
        with deployment_environ(env):
            store = RunStore(env["KEBAB_EVAL_STORAGE"])
            a = store.read("query_scores", "replay-celery")[0]["query_scores"]
            b = store.read("query_scores", "replay-inproc")[0]["query_scores"]
            keep = [c for c in a.columns if "latency" not in c and "_ms" not in c and c != "run_id"]
            pd.testing.assert_frame_equal(a[keep], b[keep])
            ma = store.read("run_metrics", "replay-celery")[0]["metrics"]
            mb = store.read("run_metrics", "replay-inproc")[0]["metrics"]
            pd.testing.assert_frame_equal(ma, mb)
    print(
        f"\nreplay of {args.replay} queries ({args.shards} shards): celery, 2 workers {celery_wall:.1f}s; "
        f"in-process {inproc_wall:.1f}s; query_scores and run_metrics equal; load {os.getloadavg()[0]:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--latency-ms", type=float, default=50)
    parser.add_argument("--concurrency", type=int, default=4, help="requests in flight per worker")
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--replay", type=int, default=0, help="instead: a replayed run of N queries")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.latency_ms)
    elif args.replay:
        replay(args)
    else:
        throughput(args)


if __name__ == "__main__":
    main()
