"""Benchmark: the query_scores and run_metrics steps of a 100k × 100 run read from the artifact store.

    python benchmarks/bench_score_steps.py                        # 100k queries × 100 hits
    python benchmarks/bench_score_steps.py --queries 10000 --data /tmp/bss --profile
    python benchmarks/bench_score_steps.py --compare-reads        # also as the steps read before

A stored run as the chain leaves it before scoring (``golden_set`` and ``retrieval_results`` written
by ``ArtifactStore.write`` from the declared typed tables: every ``HIT_COLUMNS`` column, chunk and
document ids and paths set, the rest null; outcomes without answers) is generated once (seeded, from
``bench_metrics.generate``: 1–5 graded chunk supports per query that also name their document).
Then, in a fresh subprocess, what the two assets do with ``match: chunk`` and no answers
(``pipeline.score`` then ``pipeline.summarize``) is timed stage by stage: reading each input
artifact, matching + per-query kernels (``score_results``), the matching diagnostics, rounding,
the run summary (aggregates and breakdowns), run_metrics (``summarize``: identity, health, gates,
the run report) — each step in a fresh process reading its inputs with the column selections its
asset declares (``--compare-reads``: also reading every column, as the steps did before issue 25).
Peak RSS is the worker's ``VmHWM``; CPU is the process's CPU time (every thread). ``--profile``
prints the top functions. Not a test: timings depend on the machine (the load average is printed).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_metrics import generate

ROOT = Path(__file__).resolve().parents[1]
RUN_ID = "bench-steps"


def prepare(store_dir: Path, data: Path, n_queries: int, n_hits: int, seed: int) -> None:
    """Write golden_set and retrieval_results of ``RUN_ID`` under ``store_dir``."""
    import pandas as pd
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from kebab_eval_pipeline.chain.artifacts import GoldenArtifact, RetrievalArtifact
    from kebab_eval_pipeline.contract import SystemInfo
    from kebab_eval_pipeline.golden.tables import QUERY_COLUMNS, SUPPORT_COLUMNS
    from kebab_eval_pipeline.store.runs import RunStore
    from kebab_eval_pipeline.systems.base import CITATION_COLUMNS, HIT_COLUMNS, OUTCOME_COLUMNS
    from kebab_eval_pipeline.systems.runner import RetrievalResults

    generate(data, n_queries, n_hits, seed)

    def typed(columns: dict[str, str], values: dict, n: int) -> pd.DataFrame:
        out = {}
        for name, dtype in columns.items():
            if name in values:
                value = values[name]
                if np.isscalar(value):  # a constant column
                    value = np.full(n, value, dtype=object if isinstance(value, str) else None)
                elif isinstance(value, pd.Series):
                    value = value.reset_index(drop=True)
                out[name] = pd.Series(value).astype(dtype)
            elif dtype == "object":
                out[name] = pd.Series([None] * n, dtype=object)
            else:
                out[name] = pd.Series(pd.array([None] * n, dtype=dtype if dtype != "bool" else "boolean"))
                if dtype == "bool":
                    out[name] = out[name].fillna(False).astype(bool)
        return pd.DataFrame(out)

    q = pq.read_table(data / "queries.parquet").to_pandas()
    s = pq.read_table(data / "supports.parquet").to_pandas()
    h = pq.read_table(data / "hits.parquet")
    nq = len(q)
    queries = typed(
        QUERY_COLUMNS,
        {
            "query_id": q["query_id"],
            "query": "question " + q["query_id"],
            "lang": np.where(np.arange(nq) % 3 == 0, "de", "en"),
            "answerable": True,
            "category": np.array(["howto", "api", "concept", "faq"])[np.arange(nq) % 4],
            "difficulty": np.array(["easy", "hard"])[np.arange(nq) % 2],
            "tags": [["t1"] if i % 2 else [] for i in range(nq)],
            "pending": False,
            "n_supports": s.groupby("query_id").size().reindex(q["query_id"]).fillna(0).to_numpy(int),
            "required_support_groups": "[]",
            "must_contain": [[]] * nq,
            "forbidden": [[]] * nq,
            "gold_claim_substr": [[]] * nq,
            "constraints": [[]] * nq,
        },
        nq,
    )
    chunk_no = s["chunk_id"].str.slice(1).astype(int)
    supports = typed(
        SUPPORT_COLUMNS,
        {
            "query_id": s["query_id"],
            "support_idx": s["support_idx"],
            "chunk_id": s["chunk_id"],
            "doc_id": "d" + (chunk_no // 10).astype(str),
            "grade": s["grade"],
        },
        len(s),
    )
    doc_id = h.column("doc_id")
    hits = typed(
        HIT_COLUMNS,
        {
            "query_id": pd.arrays.ArrowStringArray(h.column("query_id").cast("large_string")),
            "rank": h.column("rank").to_numpy(),
            "chunk_id": pd.arrays.ArrowStringArray(h.column("chunk_id").cast("large_string")),
            "doc_id": pd.arrays.ArrowStringArray(doc_id.cast("large_string")),
            "doc_path": pd.arrays.ArrowStringArray(
                pc.binary_join_element_wise("docs/", doc_id, ".md", "").cast("large_string")
            ),
            "score": h.column("score").to_numpy(),
            "score_kind": "bm25",
        },
        len(h),
    )
    del h
    outcomes = typed(
        OUTCOME_COLUMNS,
        {
            "query_id": q["query_id"],
            "n_hits": n_hits,
            "retrieval_ms": np.random.default_rng(seed).gamma(2.0, 10.0, nq),
            "timed_out": False,
            "attempts": 1,
            "answered": False,
        },
        nq,
    )
    info = {"name": "bench", "source": "bench", "format": "jsonl", "sha256": "0" * 64, "schema_version": 1}
    store = RunStore(store_dir)
    golden = GoldenArtifact(queries, supports, {**info, "files": [], "warnings": []})
    store.write("golden_set", RUN_ID, *golden.to_tables())
    results = RetrievalResults(
        outcomes=outcomes,
        hits=hits,
        citations=typed(CITATION_COLUMNS, {}, 0),
        known_chunks=typed({"chunk_id": "string"}, {}, 0),
        system=SystemInfo(kind="replay", mode="file"),
    )
    retrieval = RetrievalArtifact(
        results, {"k_requested": 10, "answers": False, "golden_sha256": "0" * 64, "stale_golden": []}
    )
    store.write("retrieval_results", RUN_ID, *retrieval.to_tables())


def _hwm_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def worker(store_dir: Path, step: str, profile: bool, all_columns: bool = False) -> dict:
    """One step as its asset runs it: read the inputs as the IO manager does (the same column
    selections), compute, write the output artifact."""
    from kebab_eval_pipeline.chain import pipeline
    from kebab_eval_pipeline.chain.artifacts import (
        GoldenArtifact,
        QueryScoresArtifact,
        RetrievalArtifact,
    )
    from kebab_eval_pipeline.chain.settings import RunSettings
    from kebab_eval_pipeline.orchestration import assets
    from kebab_eval_pipeline.store.runs import RunStore

    def columns(asset_def) -> dict | None:
        if all_columns:  # as every step read it before issue 25
            return None
        spec = asset_def.node_def.input_def_named("retrieval_results")
        return (spec.metadata or {}).get("columns")

    settings = RunSettings(match="chunk", answers=False)
    store = RunStore(store_dir)
    stages: dict[str, float] = {}
    prof = cProfile.Profile() if profile else None
    if prof:
        prof.enable()
    c0 = time.process_time()
    t0 = time.perf_counter()
    golden = GoldenArtifact.from_tables(*store.read("golden_set", RUN_ID))
    stages["read golden_set"] = time.perf_counter() - t0
    t = time.perf_counter()
    asset_def = assets.query_scores if step == "query_scores" else assets.run_metrics
    retrieval = RetrievalArtifact.from_tables(
        *store.read("retrieval_results", RUN_ID, columns=columns(asset_def))
    )
    if step == "query_scores" and not all_columns:  # the hits, in the columns the settings need
        retrieval = pipeline.with_scoring_hits(retrieval, store, RUN_ID, settings)
    stages["read retrieval_results"] = time.perf_counter() - t
    extra: dict = {}
    if step == "query_scores":
        t = time.perf_counter()
        art = pipeline.score(settings, golden, retrieval)
        stages["pipeline.score"] = time.perf_counter() - t
        t = time.perf_counter()
        # the asset's UI metadata: the per-query table, worst first (TABLE_ROW_LIMIT rows shown)
        worst = assets.worst_scores_first(art.scores, assets.headline_columns(settings.k), golden.queries)
        assets._table_metadata(worst)
        stages["per-query UI table"] = time.perf_counter() - t
        t = time.perf_counter()
        store.write("query_scores", RUN_ID, *art.to_tables())
        stages["write query_scores"] = time.perf_counter() - t
        extra["object_columns"] = [c for c in art.scores.columns if art.scores[c].dtype == object]
    else:
        t = time.perf_counter()
        scores = QueryScoresArtifact.from_tables(*store.read("query_scores", RUN_ID))
        stages["read query_scores"] = time.perf_counter() - t
        t = time.perf_counter()
        art = pipeline.summarize(RUN_ID, settings, golden, retrieval, scores)
        stages["pipeline.summarize"] = time.perf_counter() - t
        t = time.perf_counter()
        store.write("run_metrics", RUN_ID, *art.to_tables())
        stages["write run_metrics"] = time.perf_counter() - t
        extra = {k: art.metrics.get(k) for k in ("mrr", "ndcg@10", "map", "bpref")}
    total = time.perf_counter() - t0
    if prof:
        prof.disable()
        pstats.Stats(prof, stream=sys.stderr).sort_stats("cumulative").print_stats(40)
    cpu = time.process_time() - c0
    return {"stages": stages, "total_s": total, "cpu_s": cpu, "peak_mib": _hwm_mib(), **extra}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=100_000)
    ap.add_argument("--hits", type=int, default=100)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--data", type=Path, help="keep/reuse the stored run under this directory")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument(
        "--compare-reads", action="store_true", help="also run each step reading every column (as before)"
    )
    ap.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--step", default="query_scores", help=argparse.SUPPRESS)
    ap.add_argument("--all-columns", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.step, args.profile, args.all_columns)))
        return
    tmp = None
    if args.data is None:
        tmp = tempfile.TemporaryDirectory(prefix="bench_steps_")
        base = Path(tmp.name)
    else:
        base = args.data / f"q{args.queries}_h{args.hits}_s{args.seed}"
    store_dir, data = base / "store", base / "data"
    if not (store_dir / "retrieval_results").exists():
        data.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                f"import bench_score_steps as b; from pathlib import Path; "
                f"b.prepare(Path({str(store_dir)!r}), Path({str(data)!r}), "
                f"{args.queries}, {args.hits}, {args.seed})",
            ],
            cwd=Path(__file__).parent,
            env={**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{Path(__file__).parent}"},
            check=True,
        )
        del proc
        print(
            f"stored a {args.queries:,} × {args.hits} run in {time.perf_counter() - t0:.1f} s → {store_dir}"
        )
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    print(
        f"{args.queries:,} queries × {args.hits} hits, match: chunk, no answers; each step in a fresh process"
    )
    for step in ("query_scores", "run_metrics"):
        for reads in ("selected", "all") if args.compare_reads else ("selected",):
            proc = subprocess.run(
                [sys.executable, __file__, "--worker", str(store_dir), "--step", step]
                + (["--profile"] if args.profile else [])
                + (["--all-columns"] if reads == "all" else []),
                capture_output=True,
                text=True,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
                check=False,
            )
            if proc.returncode:
                raise SystemExit(proc.stderr)
            if args.profile:
                print(proc.stderr)
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            label = step + (" (every column read, as before)" if reads == "all" else "")
            print(
                f"{label}: {r['total_s']:.2f} s, {r['cpu_s']:.2f} s CPU, peak RSS {r['peak_mib']:.0f} MiB "
                f"(load1 {os.getloadavg()[0]:.2f})"
            )
            for name, seconds in r["stages"].items():
                print(f"  {name:<26} {seconds:>7.2f} s")
            rest = {k: v for k, v in r.items() if k not in ("stages", "total_s", "cpu_s", "peak_mib")}
            print(f"  {rest}")
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
