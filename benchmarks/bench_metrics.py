"""Benchmark: retrieval metrics on N queries × H hits — ours vs pytrec_eval (and a DuckDB floor).

    python benchmarks/bench_metrics.py                       # 100k queries × 100 hits (10M hit rows)
    python benchmarks/bench_metrics.py --queries 20000       # smaller
    python benchmarks/bench_metrics.py --skip pytrec         # tools: ours, pytrec, duckdb

Generates a seeded run (unique chunk ids per query, 1–5 graded chunk-level supports per query, some
never retrieved) as Parquet, then runs each tool in its own subprocess so that peak RSS
(``ru_maxrss``) is the tool's own. Timed per tool:

- ``ours``: ``match_hits`` + ``retrieval_scores`` (k = 1, 3, 5, 10; MRR cutoff 10) on the tables
  as ``pandas.read_parquet`` returns them;
- ``pytrec``: building the qrels/run dicts pytrec_eval needs ("prepare") and ``evaluate`` (full run
  for success/recall/P/ndcg_cut, the run cut at 10 for recip_rank);
- ``duckdb``: one hand-written SQL query over the Parquet files (MRR, P@10, nDCG@10) — the
  practical floor named in SPEC §10.

Every tool's per-query values are checked against ours (max abs difference must be ≤ 1e-9).
Not a test: timings depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
KS = (1, 3, 5, 10)
CUTOFF = 10
TOOLS = ("ours", "pytrec", "duckdb")


# ------------------------------------------------------------------------------------------ data


def generate(out: Path, n_queries: int, n_hits: int, seed: int) -> None:
    """Write queries/supports/hits Parquet files (vectorised; ~10 s for 10M hits)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    corpus = 2 * n_hits  # chunks per query's neighbourhood: half of them get retrieved

    def ids(prefix: str, numbers: np.ndarray) -> pa.Array:
        return pc.binary_join_element_wise(prefix, pc.cast(pa.array(numbers), pa.string()), "")

    def distinct_per_row(rows: int, width: int, take: int) -> np.ndarray:
        # `take` distinct offsets in [0, width) per row, in random order (argsort of random keys).
        keys = rng.random((rows, width), dtype=np.float32)
        return np.argsort(keys, axis=1)[:, :take].astype(np.int64)

    q = np.arange(n_queries, dtype=np.int64)
    qid = ids("q", q)
    pq.write_table(
        pa.table(
            {
                "query_id": qid,
                "answerable": pa.array(np.ones(n_queries, dtype=bool)),
                "required_support_groups": pa.array(["[]"] * n_queries),
            }
        ),
        out / "queries.parquet",
    )

    chunk_offsets = np.empty((n_queries, n_hits), dtype=np.int64)
    for start in range(0, n_queries, 10_000):  # bounded memory for the random keys
        stop = min(start + 10_000, n_queries)
        chunk_offsets[start:stop] = distinct_per_row(stop - start, corpus, n_hits)
    chunk_no = (q[:, None] * corpus + chunk_offsets).ravel()
    hit_q = np.repeat(q, n_hits)
    rank = np.tile(np.arange(1, n_hits + 1, dtype=np.int64), n_queries)
    pq.write_table(
        pa.table(
            {
                "query_id": qid.take(pa.array(hit_q)),
                "rank": pa.array(rank),
                "chunk_id": ids("c", chunk_no),
                "doc_id": ids("d", chunk_no // 10),
                "score": pa.array(1000.0 - rank),
            }
        ),
        out / "hits.parquet",
        row_group_size=1_000_000,
    )

    n_sup = rng.integers(1, 6, n_queries)
    sup_offsets = np.concatenate(
        [distinct_per_row(min(10_000, n_queries - s), corpus, 5) for s in range(0, n_queries, 10_000)]
    )
    keep = np.arange(5)[None, :] < n_sup[:, None]
    s_q = np.repeat(q, 5).reshape(n_queries, 5)[keep]
    s_chunk = (q[:, None] * corpus + sup_offsets)[keep]
    s_idx = np.tile(np.arange(5), n_queries).reshape(n_queries, 5)[keep]
    pq.write_table(
        pa.table(
            {
                "query_id": qid.take(pa.array(s_q)),
                "support_idx": pa.array(s_idx),
                "chunk_id": ids("c", s_chunk),
                "grade": pa.array(rng.integers(1, 4, len(s_q))),
            }
        ),
        out / "supports.parquet",
    )


# ------------------------------------------------------------------------------------------ workers


def _rss_mib() -> float:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _import_kernels():
    # Import the kernels without running the package's __init__ (it builds the Dagster code
    # location, which is not part of what is measured here).
    pkg = types.ModuleType("kebab_eval_pipeline")
    pkg.__path__ = [str(ROOT / "kebab_eval_pipeline")]
    sys.modules.setdefault("kebab_eval_pipeline", pkg)
    from kebab_eval_pipeline.matching import match_hits
    from kebab_eval_pipeline.metrics.retrieval import retrieval_scores

    return match_hits, retrieval_scores


def worker_ours(data: Path) -> dict:
    import pandas as pd

    match_hits, retrieval_scores = _import_kernels()
    t0 = time.perf_counter()
    queries = pd.read_parquet(data / "queries.parquet")
    supports = pd.read_parquet(data / "supports.parquet")
    hits = pd.read_parquet(data / "hits.parquet")
    load = time.perf_counter() - t0
    rss_loaded = _rss_mib()
    t0 = time.perf_counter()
    matches = match_hits(hits, supports)
    t_match = time.perf_counter() - t0
    scores = retrieval_scores(queries, supports, hits, matches, ks=KS, mrr_cutoff=CUTOFF)
    compute = time.perf_counter() - t0
    cols = ["mrr"] + [f"{m}@{k}" for m in ("hit", "recall", "precision", "ndcg") for k in KS]
    scores[["query_id", *cols]].to_parquet(data / "result_ours.parquet")
    return {
        "load_s": load,
        "prepare_s": 0.0,
        "compute_s": compute,
        "match_s": t_match,
        "rss_loaded_mib": rss_loaded,
        "peak_mib": _peak_mib(),
    }


def worker_pytrec(data: Path) -> dict:
    import pyarrow.parquet as pq
    import pytrec_eval

    t0 = time.perf_counter()
    hits = pq.read_table(data / "hits.parquet", columns=["query_id", "chunk_id", "score"]).to_pydict()
    sup = pq.read_table(data / "supports.parquet", columns=["query_id", "chunk_id", "grade"]).to_pydict()
    load = time.perf_counter() - t0
    rss_loaded = _rss_mib()
    t0 = time.perf_counter()
    qrels: dict[str, dict[str, int]] = {}
    for q, c, g in zip(sup["query_id"], sup["chunk_id"], sup["grade"], strict=True):
        qrels.setdefault(q, {})[c] = g
    run: dict[str, dict[str, float]] = {}
    cut: dict[str, dict[str, float]] = {}
    for q, c, s in zip(hits["query_id"], hits["chunk_id"], hits["score"], strict=True):
        run.setdefault(q, {})[c] = s
        if s > 1000 - CUTOFF - 0.5:
            cut.setdefault(q, {})[c] = s
    del hits, sup
    prepare = time.perf_counter() - t0
    t0 = time.perf_counter()
    ks = ",".join(map(str, KS))
    full = pytrec_eval.RelevanceEvaluator(
        qrels, {f"success.{ks}", f"recall.{ks}", f"P.{ks}", f"ndcg_cut.{ks}"}
    )
    res = full.evaluate(run)
    rr = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(cut)
    compute = time.perf_counter() - t0
    import pandas as pd

    qids = sorted(res)
    frame = {"query_id": qids, "mrr": [rr.get(q, {}).get("recip_rank", 0.0) for q in qids]}
    for name, trec in (("hit", "success"), ("recall", "recall"), ("precision", "P"), ("ndcg", "ndcg_cut")):
        for k in KS:
            frame[f"{name}@{k}"] = [res[q][f"{trec}_{k}"] for q in qids]
    pd.DataFrame(frame).to_parquet(data / "result_pytrec.parquet")
    return {
        "load_s": load,
        "prepare_s": prepare,
        "compute_s": compute,
        "rss_loaded_mib": rss_loaded,
        "peak_mib": _peak_mib(),
    }


DUCKDB_SQL = """
WITH s AS (SELECT query_id, chunk_id, grade FROM read_parquet('{d}/supports.parquet') WHERE grade > 0),
h AS (SELECT query_id, rank, chunk_id FROM read_parquet('{d}/hits.parquet') WHERE rank <= 10),
m AS (SELECT h.query_id, h.rank, max(s.grade) AS gain FROM h JOIN s USING (query_id, chunk_id) GROUP BY ALL),
per_q AS (SELECT query_id, min(rank) AS frr, count(*) AS rel, sum(gain / log2(rank + 1)) AS dcg
          FROM m GROUP BY query_id),
ideal AS (SELECT query_id, sum(grade / log2(pos + 1)) AS idcg FROM (
            SELECT query_id, grade, row_number() OVER (PARTITION BY query_id ORDER BY grade DESC) AS pos
            FROM s)
          WHERE pos <= 10 GROUP BY query_id)
SELECT ideal.query_id, coalesce(1.0 / frr, 0) AS "mrr", coalesce(rel, 0) / 10.0 AS "precision@10",
       coalesce(dcg, 0) / idcg AS "ndcg@10"
FROM ideal LEFT JOIN per_q USING (query_id)
"""


def worker_duckdb(data: Path) -> dict:
    import duckdb

    con = duckdb.connect()
    rss_loaded = _rss_mib()
    t0 = time.perf_counter()
    frame = con.execute(DUCKDB_SQL.format(d=data)).df()
    compute = time.perf_counter() - t0
    frame.to_parquet(data / "result_duckdb.parquet")
    return {
        "load_s": 0.0,
        "prepare_s": 0.0,
        "compute_s": compute,
        "rss_loaded_mib": rss_loaded,
        "peak_mib": _peak_mib(),
    }


WORKERS = {"ours": worker_ours, "pytrec": worker_pytrec, "duckdb": worker_duckdb}


# ------------------------------------------------------------------------------------------ driver


def verify(data: Path, tool: str) -> float:
    """Max abs difference between ``tool``'s per-query values and ours (common columns)."""
    import pandas as pd

    ours = pd.read_parquet(data / "result_ours.parquet").set_index("query_id")
    other = pd.read_parquet(data / f"result_{tool}.parquet").set_index("query_id")
    other.index = other.index.astype(ours.index.dtype)
    if len(other) != len(ours):
        raise SystemExit(f"{tool}: {len(other)} queries vs ours {len(ours)}")
    other = other.loc[ours.index]
    return float(max(np.nanmax(np.abs(ours[c].to_numpy() - other[c].to_numpy())) for c in other.columns))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=100_000)
    ap.add_argument("--hits", type=int, default=100)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--skip", action="append", default=[], choices=TOOLS)
    ap.add_argument("--data", type=Path, help="reuse/keep generated data in this directory")
    ap.add_argument("--worker", choices=TOOLS, help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.worker:
        print(json.dumps(WORKERS[args.worker](args.data)))
        return

    tmp = None
    data = args.data
    if data is None:
        tmp = tempfile.TemporaryDirectory(prefix="bench_metrics_")
        data = Path(tmp.name)
    data.mkdir(parents=True, exist_ok=True)
    if not (data / "hits.parquet").exists():
        t0 = time.perf_counter()
        generate(data, args.queries, args.hits, args.seed)
        print(
            f"generated {args.queries:,} queries × {args.hits} hits "
            f"in {time.perf_counter() - t0:.1f} s → {data}"
        )

    results = {}
    for tool in TOOLS:
        if tool in args.skip:
            continue
        proc = subprocess.run(
            [sys.executable, __file__, "--worker", tool, "--data", str(data)],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            check=False,
        )
        if proc.returncode:
            raise SystemExit(f"{tool} failed:\n{proc.stderr}")
        results[tool] = json.loads(proc.stdout.strip().splitlines()[-1])

    base = results["ours"]["compute_s"]
    print(f"\n{args.queries:,} queries × {args.hits} hits ({args.queries * args.hits:,} hit rows)")
    print(
        f"{'tool':<8} {'load s':>8} {'prepare s':>10} {'compute s':>10} {'RSS loaded':>11} {'peak RSS':>10} "
        f"{'compute/ours':>13} {'max |Δ|':>9}"
    )
    for tool, r in results.items():
        delta = 0.0 if tool == "ours" else verify(data, tool)
        print(
            f"{tool:<8} {r['load_s']:>8.2f} {r['prepare_s']:>10.2f} {r['compute_s']:>10.2f} "
            f"{r['rss_loaded_mib']:>8.0f} MiB {r['peak_mib']:>6.0f} MiB "
            f"{r['compute_s'] / base:>12.2f}x {delta:>9.1e}"
        )
        if delta > 1e-9:
            raise SystemExit(f"{tool} disagrees with ours by {delta}")
    if "ours" in results:
        print(f"ours: match_hits {results['ours']['match_s']:.2f} s of {base:.2f} s")
    if "pytrec" in results:
        p = results["pytrec"]
        print(f"pytrec prepare+evaluate / ours = {(p['prepare_s'] + p['compute_s']) / base:.1f}x")
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
