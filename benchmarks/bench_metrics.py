"""Benchmark: retrieval metrics on N queries × H hits — ours vs ranx vs pytrec_eval (and a DuckDB floor).

    python benchmarks/bench_metrics.py                        # 10k and 100k queries × 100 hits
    python benchmarks/bench_metrics.py --queries 100000       # one size (repeatable flag)
    python benchmarks/bench_metrics.py --skip ranx            # tools: ours, ranx, pytrec, duckdb
    python benchmarks/bench_metrics.py --data /tmp/bm         # keep/reuse the generated Parquet
    python benchmarks/bench_metrics.py --repeat 3             # each tool 3× interleaved, fastest shown

Generates a seeded run per size (unique chunk ids per query, 1–5 graded chunk-level supports per
query, some never retrieved) as Parquet (strings as ``large_string``, as the run store writes
pandas' string columns), then runs each tool in its own subprocess so that peak RSS
(``ru_maxrss``) is the tool's own. Every tool starts from the same Parquet files; per tool:

- ``read``: Parquet → the tool's in-memory input (DataFrames / Arrow columns);
- ``prepare``: building the tool's own structures from it;
- ``compute``: the evaluation proper.

Tools and measures (hit@10, mrr with cutoff 10, recall@10, precision@10, ndcg@10):

- ``ours``: read the queries, supports and hits tables with the product's own reader
  (``store.artifact_store.read_frame``, what ``ArtifactStore.read`` does for the ``query_scores``
  step: of the hits, the ``SCORING_HIT_COLUMNS`` the file holds — ``score`` is not one of them —
  that the supports can be compared on (``consulted_hit_columns``: a chunk-level golden set and a
  run without citations never read ``doc_id``), without all-null columns, ``SCORING_HIT_KEYS``
  (``query_id``) as codes from the dictionary pages), then ``match_hits`` (``auto``) +
  ``retrieval_scores`` (k = 10). Nothing is prepared ahead: "total" is what a user pays from
  Parquet to per-query values.
- ``ranx``: Qrels/Run built with ``Qrels.from_dict``/``Run.from_dict`` from dicts (faster than
  ranx's own ``from_df``; ranx only accepts object-dtype DataFrames), then
  ``ranx.evaluate(hit_rate@10, mrr@10, recall@10, precision@10, ndcg@10)``. ranx compiles numba
  kernels per id *string length*, so an untimed warm-up runs construction + evaluate on a tiny
  input whose ids have the same lengths as the data's.
- ``pytrec``: building the qrels/run dicts ``pytrec_eval`` needs, then ``evaluate`` (success_10,
  recall_10, P_10, ndcg_cut_10 on the full run; recip_rank on the run cut at 10).
- ``duckdb``: one hand-written SQL query over the Parquet files (MRR, P@10, nDCG@10) — the
  practical floor named in SPEC §10.

Each row is one worker run (with ``--repeat N``, the fastest of N, the tools interleaved); ``cpu s``
is the worker's CPU time over the timed part (every thread): on a shared machine, where wall time
includes waiting for a core, the CPU-seconds ratio to DuckDB is printed beside the wall ratio.

Arrow's memory pool matters on some machines: pyarrow's default (mimalloc) made the 10M-row
read 2–3× slower than ``ARROW_DEFAULT_MEMORY_POOL=jemalloc`` (or ``MIMALLOC_ARENA_EAGER_COMMIT=1``)
on a 2-CPU VM; the workers inherit the environment, and the pool is printed with the figures.

Semantics: ranx ``ndcg`` is the Järvelin–Kekäläinen form (linear gain, log2(rank + 1)) that
trec_eval ``ndcg_cut`` and ours use; ranx ``ndcg_burges`` (gain 2^grade − 1) is a different measure
and is not compared. Every tool's per-query values are checked against ours (max abs difference
must be ≤ 1e-9). Not a test: timings depend on the machine (note its load).
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
CUTOFF = 10
KS = (CUTOFF,)
TOOLS = ("ours", "ranx", "pytrec", "duckdb")
SIZES = (10_000, 100_000)
MEASURES = ("hit@10", "mrr", "recall@10", "precision@10", "ndcg@10")
RANX_METRICS = {
    "hit@10": "hit_rate@10",
    "mrr": "mrr@10",
    "recall@10": "recall@10",
    "precision@10": "precision@10",
    "ndcg@10": "ndcg@10",
}
RSS_LIMIT_MIB = 3 * 1024
DUCKDB_FACTOR = 2.0


# ------------------------------------------------------------------------------------------ data


def generate(out: Path, n_queries: int, n_hits: int, seed: int) -> None:
    """Write queries/supports/hits Parquet files (vectorised; ~10 s for 10M hits)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    corpus = 2 * n_hits  # chunks per query's neighbourhood: half of them get retrieved

    def ids(prefix: str, numbers: np.ndarray) -> pa.Array:
        # large_string: what the run store writes for pandas' string columns (SPEC's typed tables)
        joined = pc.binary_join_element_wise(prefix, pc.cast(pa.array(numbers), pa.string()), "")
        return joined.cast(pa.large_string())

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


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _system_s() -> float:
    """CPU seconds the kernel spent for this process so far (page faults of fresh memory, mostly)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_stime


def _import_kernels():
    # Import the kernels without running the package's __init__ (it builds the Dagster code
    # location, which is not part of what is measured here).
    pkg = types.ModuleType("kebab_eval_pipeline")
    pkg.__path__ = [str(ROOT / "kebab_eval_pipeline")]
    sys.modules.setdefault("kebab_eval_pipeline", pkg)
    from kebab_eval_pipeline.metrics.matching import match_hits
    from kebab_eval_pipeline.metrics.retrieval import retrieval_scores

    return match_hits, retrieval_scores


def _import_reader():
    """The run store's table reader and the hit columns/keys the ``query_scores`` step reads."""
    _import_kernels()
    from kebab_eval_pipeline.metrics.aggregate import SCORING_HIT_KEYS, consulted_hit_columns
    from kebab_eval_pipeline.store.artifact_store import read_frame

    return read_frame, consulted_hit_columns, SCORING_HIT_KEYS


def _result(data: Path, tool: str, frame) -> None:
    frame.to_parquet(data / f"result_{tool}.parquet")


def worker_ours(data: Path) -> dict:
    import pandas as pd  # noqa: F401  (imported before the clock starts, like every tool's imports)
    import pyarrow as pa

    match_hits, retrieval_scores = _import_kernels()
    read_frame, consulted_columns, scoring_keys = _import_reader()
    s0 = _system_s()
    c0 = time.process_time()
    t0 = time.perf_counter()
    queries = read_frame(data / "queries.parquet")
    supports = read_frame(data / "supports.parquet")
    columns = consulted_columns(supports, citations=False)  # a retrieval-only run: no citations
    hits = read_frame(data / "hits.parquet", columns, sparse=True, keys=scoring_keys)
    t1 = time.perf_counter()
    hit_columns = [f"{c} (codes)" if c in scoring_keys else c for c in hits.columns]
    matches = match_hits(hits, supports)
    t2 = time.perf_counter()
    scores = retrieval_scores(queries, supports, hits, matches, ks=KS, mrr_cutoff=CUTOFF)
    t3 = time.perf_counter()
    cpu = time.process_time() - c0
    system = _system_s() - s0
    peak = _peak_mib()
    _result(data, "ours", scores[["query_id", *MEASURES]])
    return {
        "read_s": t1 - t0,
        "prepare_s": 0.0,
        "compute_s": t3 - t1,
        "match_s": t2 - t1,
        "scores_s": t3 - t2,
        "cpu_s": cpu,
        "system_s": system,
        "peak_mib": peak,
        "hit_columns": hit_columns,
        "arrow_pool": pa.default_memory_pool().backend_name,
    }


def _trec_dicts(sup: dict, hits: dict) -> tuple[dict, dict]:
    qrels: dict[str, dict[str, int]] = {}
    for q, c, g in zip(sup["query_id"], sup["chunk_id"], sup["grade"], strict=True):
        qrels.setdefault(q, {})[c] = g
    run: dict[str, dict[str, float]] = {}
    for q, c, s in zip(hits["query_id"], hits["chunk_id"], hits["score"], strict=True):
        run.setdefault(q, {})[c] = s
    return qrels, run


def _read_trec_input(data: Path) -> tuple[dict, dict]:
    import pyarrow.parquet as pq

    hits = pq.read_table(data / "hits.parquet", columns=["query_id", "chunk_id", "score"]).to_pydict()
    sup = pq.read_table(data / "supports.parquet", columns=["query_id", "chunk_id", "grade"]).to_pydict()
    return hits, sup


def worker_ranx(data: Path) -> dict:
    import pandas as pd
    import ranx

    metrics = list(RANX_METRICS.values())
    c0 = time.process_time()
    t0 = time.perf_counter()
    hits, sup = _read_trec_input(data)
    t1 = time.perf_counter()
    c1 = time.process_time()

    # Untimed warm-up: ranx's numba kernels are specialised on the doc-id array dtype (<U{max len}),
    # so the tiny input uses ids as long as the data's (construction and evaluate both compile).
    q_len = max(map(len, sup["chunk_id"]))
    r_len = max(map(len, hits["chunk_id"]))
    tiny_q = {f"w{i}": {"a" * q_len: 1, "b" * q_len: 2} for i in range(2)}
    tiny_r = {f"w{i}": {"a" * r_len: 2.0, "c" * r_len: 1.0} for i in range(2)}
    ranx.evaluate(
        ranx.Qrels.from_dict(tiny_q),
        ranx.Run.from_dict(tiny_r),
        metrics,
        return_mean=False,
        save_results_in_run=False,
    )
    warm = time.perf_counter() - t1

    c2 = time.process_time()
    t2 = time.perf_counter()
    qrels_d, run_d = _trec_dicts(sup, hits)
    del hits, sup
    qrels = ranx.Qrels.from_dict(qrels_d)
    run = ranx.Run.from_dict(run_d)
    del qrels_d, run_d
    t3 = time.perf_counter()
    res = ranx.evaluate(qrels, run, metrics, return_mean=False, save_results_in_run=False)
    t4 = time.perf_counter()
    cpu = (c1 - c0) + (time.process_time() - c2)  # the warm-up is not counted
    peak = _peak_mib()
    qids = list(qrels.get_query_ids())
    if qids != list(run.get_query_ids()):
        raise SystemExit("ranx: qrels and run query order differ")
    frame = {"query_id": qids} | {
        ours: np.asarray(res[name], dtype=float) for ours, name in RANX_METRICS.items()
    }
    _result(data, "ranx", pd.DataFrame(frame))
    return {
        "read_s": t1 - t0,
        "prepare_s": t3 - t2,
        "compute_s": t4 - t3,
        "warmup_s": warm,
        "cpu_s": cpu,
        "peak_mib": peak,
    }


def worker_pytrec(data: Path) -> dict:
    import pandas as pd
    import pytrec_eval

    c0 = time.process_time()
    t0 = time.perf_counter()
    hits, sup = _read_trec_input(data)
    t1 = time.perf_counter()
    qrels, run = _trec_dicts(sup, hits)
    cut: dict[str, dict[str, float]] = {}  # recip_rank has no cut-off: evaluate it on the top 10
    for q, c, s in zip(hits["query_id"], hits["chunk_id"], hits["score"], strict=True):
        if s > 1000 - CUTOFF - 0.5:
            cut.setdefault(q, {})[c] = s
    del hits, sup
    t2 = time.perf_counter()
    res = pytrec_eval.RelevanceEvaluator(
        qrels, {f"success.{CUTOFF}", f"recall.{CUTOFF}", f"P.{CUTOFF}", f"ndcg_cut.{CUTOFF}"}
    ).evaluate(run)
    rr = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(cut)
    t3 = time.perf_counter()
    cpu = time.process_time() - c0
    peak = _peak_mib()
    qids = sorted(res)
    frame = {"query_id": qids, "mrr": [rr.get(q, {}).get("recip_rank", 0.0) for q in qids]}
    for ours, trec in (("hit", "success"), ("recall", "recall"), ("precision", "P"), ("ndcg", "ndcg_cut")):
        frame[f"{ours}@{CUTOFF}"] = [res[q][f"{trec}_{CUTOFF}"] for q in qids]
    _result(data, "pytrec", pd.DataFrame(frame))
    return {"read_s": t1 - t0, "prepare_s": t2 - t1, "compute_s": t3 - t2, "cpu_s": cpu, "peak_mib": peak}


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
    s0 = _system_s()
    c0 = time.process_time()
    t0 = time.perf_counter()
    frame = con.execute(DUCKDB_SQL.format(d=data)).df()
    t1 = time.perf_counter()
    cpu = time.process_time() - c0
    system = _system_s() - s0
    peak = _peak_mib()
    _result(data, "duckdb", frame)
    return {
        "read_s": 0.0,
        "prepare_s": 0.0,
        "compute_s": t1 - t0,
        "cpu_s": cpu,
        "system_s": system,
        "peak_mib": peak,
    }


WORKERS = {"ours": worker_ours, "ranx": worker_ranx, "pytrec": worker_pytrec, "duckdb": worker_duckdb}


# ------------------------------------------------------------------------------------------ driver


def differences(data: Path, tool: str) -> dict[str, float]:
    """Per measure, the max abs difference between ``tool``'s per-query values and ours."""
    import pandas as pd

    ours = pd.read_parquet(data / "result_ours.parquet").set_index("query_id")
    other = pd.read_parquet(data / f"result_{tool}.parquet").set_index("query_id")
    other.index = other.index.astype(ours.index.dtype)
    if len(other) != len(ours) or not other.index.isin(ours.index).all():
        raise SystemExit(f"{tool}: {len(other)} queries vs ours {len(ours)} (or different ids)")
    other = other.loc[ours.index]
    out = {}
    for column in other.columns:
        a, b = ours[column].to_numpy(float), other[column].to_numpy(float)
        d = np.abs(a - b)
        d[np.isnan(a) & np.isnan(b)] = 0.0
        d[np.isnan(d)] = np.inf  # a value on one side only
        out[column] = float(d.max(initial=0.0))
    return out


def run_size(n_queries: int, args: argparse.Namespace) -> bool:
    """Generate (or reuse) one size, run every tool, print its table; False when a check fails."""
    tmp = None
    if args.data is None:
        tmp = tempfile.TemporaryDirectory(prefix="bench_metrics_")
        data = Path(tmp.name)
    else:
        data = args.data / f"q{n_queries}_h{args.hits}_s{args.seed}_large"
    data.mkdir(parents=True, exist_ok=True)
    if not (data / "hits.parquet").exists():
        t0 = time.perf_counter()
        generate(data, n_queries, args.hits, args.seed)
        took = time.perf_counter() - t0
        print(f"generated {n_queries:,} queries × {args.hits} hits in {took:.1f} s → {data}")

    results: dict[str, dict] = {}
    for _ in range(args.repeat):  # tools interleaved, so a burst of load hits each alike
        for tool in TOOLS:
            if tool in args.skip:
                continue
            load = os.getloadavg()[0]
            proc = subprocess.run(
                [sys.executable, __file__, "--worker", tool, "--data", str(data)],
                capture_output=True,
                text=True,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
                check=False,
            )
            if proc.returncode:
                raise SystemExit(f"{tool} failed:\n{proc.stderr}")
            got = json.loads(proc.stdout.strip().splitlines()[-1]) | {"load1": load}
            got["total_s"] = got["read_s"] + got["prepare_s"] + got["compute_s"]
            if tool not in results or got["total_s"] < results[tool]["total_s"]:
                results[tool] = got  # the fastest run of each tool

    ok = True
    rows = n_queries * args.hits
    print(f"\n{n_queries:,} queries × {args.hits} hits ({rows:,} hit rows); measures: {', '.join(MEASURES)}")
    print(
        f"{'tool':<7} {'read s':>7} {'prepare s':>10} {'compute s':>10} {'total s':>8} {'cpu s':>6} "
        f"{'peak RSS MiB':>13} {'max |Δ| vs ours':>16}  {'load1':>5}"
    )
    diffs: dict[str, dict[str, float]] = {}
    for tool, r in results.items():
        if tool != "ours" and "ours" in results:
            diffs[tool] = differences(data, tool)
        delta = max(diffs[tool].values()) if tool in diffs else 0.0
        print(
            f"{tool:<7} {r['read_s']:>7.2f} {r['prepare_s']:>10.2f} {r['compute_s']:>10.2f} "
            f"{r['total_s']:>8.2f} {r['cpu_s']:>6.2f} {r['peak_mib']:>13.0f} {delta:>16.1e}  "
            f"{r['load1']:>5.2f}"
        )
    for tool, per in diffs.items():
        bad = {m: d for m, d in per.items() if d > 1e-9}
        if bad:
            ok = False
            print(f"MISMATCH {tool} vs ours: " + ", ".join(f"{m} {d:.3g}" for m, d in bad.items()))
    if "ours" in results:
        o = results["ours"]
        print(
            f"ours: read {o['read_s']:.2f} s (hits columns {', '.join(o['hit_columns'])}) + match_hits "
            f"{o['match_s']:.2f} s + retrieval_scores {o['scores_s']:.2f} s; Arrow memory pool "
            f"{o['arrow_pool']}"
        )
        if "ranx" in results:
            print(f"ranx: warm-up (untimed) {results['ranx']['warmup_s']:.1f} s")
        for tool in ("pytrec", "ranx"):
            if tool in results:
                r = results[tool]
                own = r["prepare_s"] + r["compute_s"]
                print(
                    f"{tool}/ours: total {r['total_s'] / o['total_s']:.1f}x, "
                    f"prepare+compute vs ours compute {own / o['compute_s']:.1f}x"
                )
                ok &= _check(f"ours faster than {tool} end to end", o["total_s"] < r["total_s"])
        if "duckdb" in results:
            ratio = o["total_s"] / results["duckdb"]["total_s"]
            print(
                f"ours/duckdb: total {ratio:.1f}x, ours compute only "
                f"{o['compute_s'] / results['duckdb']['total_s']:.1f}x, CPU seconds "
                f"{o['cpu_s'] / results['duckdb']['cpu_s']:.1f}x (of which system: ours "
                f"{o['system_s']:.2f} s, duckdb {results['duckdb']['system_s']:.2f} s)"
            )
            ok &= _check(f"ours within {DUCKDB_FACTOR:g}x of the DuckDB floor", ratio <= DUCKDB_FACTOR)
        if rows >= 10_000_000:
            ok &= _check(f"ours peak RSS ≤ {RSS_LIMIT_MIB} MiB", o["peak_mib"] <= RSS_LIMIT_MIB)
    if tmp is not None:
        tmp.cleanup()
    return ok


def _check(label: str, passed: bool) -> bool:
    print(f"  {'PASS' if passed else 'FAIL'}  {label}")
    return passed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, action="append", help=f"size to run (repeatable; default {SIZES})")
    ap.add_argument("--hits", type=int, default=100)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--repeat", type=int, default=1, help="runs per tool (interleaved); the fastest is shown")
    ap.add_argument("--skip", action="append", default=[], choices=TOOLS)
    ap.add_argument("--data", type=Path, help="keep/reuse generated data under this directory")
    ap.add_argument("--worker", choices=TOOLS, help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.worker:
        print(json.dumps(WORKERS[args.worker](args.data)))
        return
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    ok = True
    for n in args.queries or SIZES:
        ok &= run_size(n, args)
    if not ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
