"""Benchmark: which engine should read + match + score a run's stored Parquet (issue 25).

    python benchmarks/bench_metrics_engine.py                          # 100k queries × 100 hits
    python benchmarks/bench_metrics_engine.py --queries 10000 --hits 50
    python benchmarks/bench_metrics_engine.py --data /tmp/bme --pytrec # keep the data; pytrec_eval too

Data: ``bench_metrics.generate`` (seeded: unique chunk ids per query, 1–5 graded chunk supports per
query, some never retrieved), re-written *as the artifact store writes tables* (pandas' ``string``
dtype → Arrow ``large_string`` with pandas metadata), so every candidate starts from what a run
stores. The path measured is what ``query_scores`` does for a ``match: chunk`` run without
answers: read the golden queries/supports and the hits (only the columns scoring needs) → match
hits to supports → every standard per-query measure (``retrieval_scores``: hit/recall/doc_recall/
recall_any/recall_all/precision/ndcg/map/judged at k = 1, 3, 5, 10, mrr, map, rprec, bpref) →
the run means. Candidates (each in a fresh subprocess):

- ``pandas-numpy`` — the package's reader (``store.artifact_store.read_frame``:
  ``read_table(...).to_pandas()``; pandas' ``string`` columns stay over the Arrow buffers, numbers
  become NumPy arrays), then the package's ``match_hits`` (Arrow/Acero hash join) and NumPy kernels;
- ``pandas-arrow`` — ``to_pandas(types_mapper=pd.ArrowDtype)`` (every column Arrow-backed), then
  the same kernels;
- ``arrow`` — pyarrow alone for read + match: Acero joins the Arrow tables on (query_id,
  chunk_id) and counts hits per query; the same NumPy kernels score the pairs;
- ``duckdb`` — DuckDB reads the Parquet and joins/counts in SQL (the hits never reach Python);
  the same kernels score the pairs;
- ``polars`` — the same with Polars' lazy Parquet scan (skipped when polars is not installed).

Every candidate's per-query values must equal ``pandas-numpy``'s exactly (same kernels); max |Δ|
is also printed against two hand-written DuckDB queries on the same files: ``floor`` (MRR, P@10,
nDCG@10 over the top 10 hits only — the practical limit) and ``full`` (:func:`full_sql`: the
package's standard measures over every hit — hit/recall/recall_any/recall_all/precision/ndcg/map/
judged at each k, mrr, map, rprec, bpref — the like-for-like reference), and, with ``--pytrec``,
against pytrec_eval (hit@10, mrr, recall@10, P@10, nDCG@10; ~1 min at 100k). The package's ratio
to both queries is printed. Peak RSS is the worker's ``VmHWM`` (its high-water mark since exec,
so nothing of this driver process is counted): ``peak MiB`` over all ``--repeat`` runs, ``peak 1st``
after the first (one scoring's peak; later runs add what the allocator kept of earlier ones). Time
is wall time of the whole path in the worker (imports done before the clock starts), the fastest
of ``--repeat`` runs; ``cpu s`` is the process's CPU time (every thread) in that run — steadier than
wall time when other work shares the cores, and what to compare when the load average exceeds the
CPU count. The load average is printed beside each row: on a shared machine compare the ratios of
one invocation. Not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_metrics import DUCKDB_SQL, _import_kernels, generate

ROOT = Path(__file__).resolve().parents[1]
KS = (1, 3, 5, 10)
CUTOFF = 10
CANDIDATES = ("pandas-numpy", "pandas-arrow", "arrow", "duckdb", "polars")
HIT_COLUMNS = ["query_id", "rank", "chunk_id"]  # what chunk matching and the kernels read
SUPPORT_COLUMNS = ["query_id", "support_idx", "chunk_id", "grade"]
QUERY_COLUMNS = ["query_id", "answerable", "required_support_groups"]
DECLARED = {  # the declared dtypes of systems/base.py HIT_COLUMNS and golden/tables.py
    "hits": {
        "query_id": "string",
        "rank": "int64",
        "chunk_id": "string",
        "doc_id": "string",
        "score": "float64",
    },
    "supports": {"query_id": "string", "support_idx": "int64", "chunk_id": "string", "grade": "int64"},
    "queries": {"query_id": "string", "answerable": "bool", "required_support_groups": "string"},
}
FLOOR = ("mrr", "precision@10", "ndcg@10")
FULL_MEASURES = (
    "mrr",
    "map",
    "rprec",
    "bpref",
    *(
        f"{m}@{k}"
        for m in ("hit", "recall", "recall_any", "recall_all", "precision", "ndcg", "map", "judged")
        for k in KS
    ),
)
PYTREC = ("hit@10", "mrr", "recall@10", "precision@10", "ndcg@10")
TARGET_RATIO = 2.0
TARGET_PEAK_MIB = 1024.0


# ------------------------------------------------------------------------------------------ data


def prepare(data: Path, n_queries: int, n_hits: int, seed: int) -> None:
    """Generate the run and store each table the way ``ArtifactStore.write`` does."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    generate(data, n_queries, n_hits, seed)
    for name, dtypes in DECLARED.items():
        frame = pq.read_table(data / f"{name}.parquet").to_pandas().astype(dtypes)
        table = pa.Table.from_pandas(frame, preserve_index=False)
        del frame
        pq.write_table(table, data / f"{name}.parquet", row_group_size=1_000_000)


# ------------------------------------------------------------------------------------------ workers


def _hwm_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _golden(data: Path, reader):
    return reader(data / "queries.parquet", QUERY_COLUMNS), reader(data / "supports.parquet", SUPPORT_COLUMNS)


def _pairs_frame(query_id, rank, support_idx, grade):
    """The matched pairs as ``MATCH_COLUMNS`` (what ``match_hits`` returns), from Arrow/NumPy columns."""
    import pandas as pd
    import pyarrow as pa

    from kebab_eval_pipeline.metrics.columns import arrow_to_pandas_string
    from kebab_eval_pipeline.metrics.matching import MATCH_COLUMNS

    qid = query_id.combine_chunks() if isinstance(query_id, pa.ChunkedArray) else query_id
    return pd.DataFrame(
        {
            "query_id": arrow_to_pandas_string(qid),
            "rank": np.asarray(rank, np.int64),
            "support_idx": np.asarray(support_idx, np.int64),
            "grade": np.asarray(grade, np.int64),
        }
    ).astype(MATCH_COLUMNS)


def _counts_in_order(queries, count_qid, counts) -> np.ndarray:
    """Per-query hit counts (aligned with ``queries``) from an engine's (query_id, count) table."""
    from kebab_eval_pipeline.metrics.columns import lookup_codes
    from kebab_eval_pipeline.metrics.retrieval import query_codes

    codes = lookup_codes(count_qid, query_codes(queries), runs=False)
    out = np.zeros(len(queries), np.int64)
    ok = codes >= 0
    out[codes[ok]] = np.asarray(counts, np.int64)[ok]
    return out


def _score(queries, supports, hits, matches, n_hits=None):
    _, retrieval_scores = _import_kernels()
    return retrieval_scores(queries, supports, hits, matches, ks=KS, mrr_cutoff=CUTOFF, n_hits=n_hits)


def run_candidate(name: str, data: Path, repeat: int = 1) -> dict:
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    match_hits, _ = _import_kernels()
    from kebab_eval_pipeline.store.artifact_store import read_frame

    hits_path = str(data / "hits.parquet")
    sup_path = str(data / "supports.parquet")

    def once():
        stage: dict[str, float] = {}
        c0 = time.process_time()
        t0 = time.perf_counter()
        if name in ("pandas-numpy", "pandas-arrow"):
            if name == "pandas-numpy":
                reader = read_frame
            else:
                reader = lambda p, c: pq.read_table(p, columns=c).to_pandas(types_mapper=pd.ArrowDtype)  # noqa: E731
            queries, supports = _golden(data, reader)
            hits = reader(hits_path, HIT_COLUMNS)
            stage["read"] = time.perf_counter() - t0
            matches = match_hits(hits, supports, criterion="chunk")
            stage["match"] = time.perf_counter() - t0 - stage["read"]
            scores = _score(queries, supports, hits, matches)
        elif name == "arrow":
            queries, supports = _golden(data, read_frame)
            h = pq.read_table(hits_path, columns=HIT_COLUMNS)
            s = pq.read_table(sup_path, columns=SUPPORT_COLUMNS)
            stage["read"] = time.perf_counter() - t0
            pairs = h.join(s, keys=["query_id", "chunk_id"], join_type="inner", use_threads=True)
            pairs = pairs.sort_by(
                [("query_id", "ascending"), ("rank", "ascending"), ("support_idx", "ascending")]
            )
            counts = h.group_by("query_id").aggregate([("rank", "count")])
            matches = _pairs_frame(
                pairs.column("query_id"),
                pairs.column("rank"),
                pairs.column("support_idx"),
                pairs.column("grade"),
            )
            n_hits = _counts_in_order(queries, counts.column("query_id"), counts.column("rank_count"))
            stage["match"] = time.perf_counter() - t0 - stage["read"]
            scores = _score(queries, supports, pd.DataFrame(), matches, n_hits)
        elif name == "duckdb":
            import duckdb

            con = duckdb.connect()
            queries, supports = _golden(data, read_frame)
            stage["read"] = time.perf_counter() - t0
            pairs = con.sql(
                f"SELECT query_id, h.rank, s.support_idx, s.grade FROM read_parquet('{hits_path}') h "
                f"JOIN read_parquet('{sup_path}') s USING (query_id, chunk_id) ORDER BY ALL"
            ).to_arrow_table()
            counts = con.sql(
                f"SELECT query_id, count(*) AS n FROM read_parquet('{hits_path}') GROUP BY query_id"
            ).to_arrow_table()
            matches = _pairs_frame(
                pairs.column("query_id"),
                pairs.column("rank"),
                pairs.column("support_idx"),
                pairs.column("grade"),
            )
            n_hits = _counts_in_order(queries, counts.column("query_id"), counts.column("n"))
            stage["match"] = time.perf_counter() - t0 - stage["read"]
            scores = _score(queries, supports, pd.DataFrame(), matches, n_hits)
        elif name == "polars":
            import polars as pl

            queries, supports = _golden(data, read_frame)
            stage["read"] = time.perf_counter() - t0
            h = pl.scan_parquet(hits_path).select(HIT_COLUMNS)
            s = pl.scan_parquet(sup_path).select(SUPPORT_COLUMNS)
            pairs, counts = pl.collect_all(
                [
                    h.join(s, on=["query_id", "chunk_id"])
                    .select(["query_id", "rank", "support_idx", "grade"])
                    .sort(["query_id", "rank", "support_idx"]),
                    h.group_by("query_id").agg(pl.len().alias("n")),
                ]
            )
            pairs, counts = pairs.to_arrow(), counts.to_arrow()
            matches = _pairs_frame(
                pairs.column("query_id"),
                pairs.column("rank"),
                pairs.column("support_idx"),
                pairs.column("grade"),
            )
            n_hits = _counts_in_order(queries, counts.column("query_id"), counts.column("n"))
            stage["match"] = time.perf_counter() - t0 - stage["read"]
            scores = _score(queries, supports, pd.DataFrame(), matches, n_hits)
        else:
            raise SystemExit(f"unknown candidate {name!r}")
        t_kernels = time.perf_counter()
        stage["kernels"] = t_kernels - t0 - stage["read"] - stage["match"]
        means = {
            c: float(np.nanmean(scores[c].to_numpy(float))) for c in scores.columns if "@" in c or c in FLOOR
        }
        total = time.perf_counter() - t0
        stage["aggregate"] = total - (t_kernels - t0)
        stage["cpu"] = time.process_time() - c0  # every thread's CPU: steadier than wall on a busy machine
        return total, stage, scores, matches, means

    runs = [once()]
    peak1 = _hwm_mib()  # one scoring's peak: later runs add what the allocator kept of earlier ones
    runs += [once() for _ in range(repeat - 1)]
    total, stage, scores, matches, means = min(runs, key=lambda r: r[0])
    peak = _hwm_mib()
    object_columns = [
        f"{frame}.{c}"
        for frame, f in (("scores", scores), ("matches", matches))
        for c in f.columns
        if f[c].dtype == object
    ]
    keep = [
        "query_id",
        *(c for c in scores.columns if c == "mrr" or "@" in c or c in ("map", "rprec", "bpref")),
    ]
    scores[keep].to_parquet(data / f"result_{name}.parquet")
    return {
        "total_s": total,
        **{f"{k}_s": v for k, v in stage.items()},  # cpu_s among them
        "peak_mib": peak,
        "peak1_mib": peak1,
        "means": means,
        "object_columns": object_columns,
        "arrow_pool": pa.default_memory_pool().backend_name,
    }


def full_sql(data: Path, ks=KS, mrr_cutoff: int = CUTOFF, level: int = 1) -> str:
    """One hand-written DuckDB query for the package's standard measures of a ``match: chunk``
    run over *every* hit: hit, recall, recall_any, recall_all, precision, ndcg, map and judged at
    each k; mrr (cut at ``mrr_cutoff``), map, rprec, bpref — the definitions of
    ``retrieval_scores``, NULL (NaN) for a query that is not applicable.

    The join of hits and supports on (query_id, chunk_id) *is* the package's one-to-one assignment
    here because the generated data has distinct chunk ids per query on both sides (a hit matches
    at most one support, a support at most one hit); ``required_support_groups`` are empty (each
    relevant support is its own group) and supports name no document (``doc_recall@k`` equals
    ``recall@k``, so it is left out)."""
    rel = f"grade >= {level}"
    per_k = []
    for k in ks:
        per_k += [
            f"count(*) FILTER ({rel} AND rank <= {k}) AS found{k}",
            f"sum(grade / log2(rank + 1)) FILTER (grade > 0 AND rank <= {k}) AS dcg{k}",
            f"sum(nrel / rank) FILTER ({rel} AND rank <= {k}) AS ap{k}",
            f"count(*) FILTER (rank <= {k}) AS judged{k}",
        ]
    ideal = [f"sum(grade / log2(pos + 1)) FILTER (pos <= {k}) AS idcg{k}" for k in ks]
    out = []
    for k in ks:
        out += [
            f'CASE WHEN R > 0 THEN (coalesce(frr, {_BIG}) <= {k})::DOUBLE END AS "hit@{k}"',
            f'coalesce(found{k}, 0) / R AS "recall@{k}"',
            f'CASE WHEN R > 0 THEN (coalesce(frr, {_BIG}) <= {k})::DOUBLE END AS "recall_any@{k}"',
            f'CASE WHEN R > 0 THEN (coalesce(found{k}, 0) = R)::DOUBLE END AS "recall_all@{k}"',
            f'CASE WHEN R > 0 THEN coalesce(found{k}, 0) / {k} END AS "precision@{k}"',
            f'CASE WHEN R > 0 THEN coalesce(dcg{k}, 0) / idcg{k} END AS "ndcg@{k}"',
            f'coalesce(ap{k}, 0) / R AS "map@{k}"',
            f"CASE WHEN R > 0 THEN CASE WHEN coalesce(n_hits, 0) > 0 "
            f'THEN coalesce(judged{k}, 0) / least(n_hits, {k}) ELSE 0 END END AS "judged@{k}"',
        ]
    return f"""
WITH s AS (SELECT query_id, chunk_id, grade FROM read_parquet('{data}/supports.parquet')),
q AS (SELECT query_id FROM read_parquet('{data}/queries.parquet') WHERE answerable),
rs AS (SELECT query_id, (count(*) FILTER ({rel}))::DOUBLE AS R, count(*) FILTER (NOT {rel}) AS N
       FROM s GROUP BY query_id),
h AS (SELECT query_id, rank, chunk_id FROM read_parquet('{data}/hits.parquet')),
nh AS (SELECT query_id, count(*) AS n_hits FROM h GROUP BY query_id),
m AS (SELECT query_id, rank, grade,
             count(*) FILTER ({rel}) OVER w AS nrel,
             count(*) FILTER (NOT {rel}) OVER w AS above
      FROM h JOIN s USING (query_id, chunk_id)
      WINDOW w AS (PARTITION BY query_id ORDER BY rank ROWS UNBOUNDED PRECEDING)),
per_q AS (SELECT query_id, min(rank) FILTER ({rel}) AS frr,
                 sum(nrel / rank) FILTER ({rel}) AS ap,
                 count(*) FILTER ({rel} AND rank <= R) AS rfound,
                 sum(CASE WHEN above > 0 THEN 1 - least(above, R) / greatest(least(N, R), 1) ELSE 1 END)
                     FILTER ({rel}) AS bp,
                 {", ".join(per_k)}
          FROM m JOIN rs USING (query_id) GROUP BY query_id),
ideal AS (SELECT query_id, {", ".join(ideal)} FROM (
            SELECT query_id, grade, row_number() OVER (PARTITION BY query_id ORDER BY grade DESC) AS pos
            FROM s WHERE grade > 0) GROUP BY query_id)
SELECT q.query_id,
       CASE WHEN R > 0 THEN CASE WHEN frr <= {mrr_cutoff} THEN 1.0 / frr ELSE 0 END END AS "mrr",
       coalesce(ap, 0) / R AS "map", coalesce(rfound, 0) / R AS "rprec", coalesce(bp, 0) / R AS "bpref",
       {", ".join(out)}
FROM q LEFT JOIN rs USING (query_id) LEFT JOIN per_q USING (query_id) LEFT JOIN nh USING (query_id)
       LEFT JOIN ideal USING (query_id)
"""


_BIG = 2**62  # "no relevant hit" rank for hit@k


def run_full(data: Path, repeat: int = 1) -> dict:
    """The hand-written DuckDB query for the package's standard measures (:func:`full_sql`)."""
    import duckdb

    con = duckdb.connect()
    total = cpu = peak1 = float("inf")
    sql = full_sql(data)
    for _ in range(repeat):
        c0 = time.process_time()
        t0 = time.perf_counter()
        frame = con.execute(sql).df()
        total = min(total, time.perf_counter() - t0)
        cpu = min(cpu, time.process_time() - c0)
        peak1 = min(peak1, _hwm_mib())  # after the first run
    peak = _hwm_mib()
    frame.to_parquet(data / "result_full.parquet")
    return {"total_s": total, "cpu_s": cpu, "peak_mib": peak, "peak1_mib": peak1}


def run_floor(data: Path, repeat: int = 1) -> dict:
    import duckdb

    con = duckdb.connect()
    total = cpu = peak1 = float("inf")
    for _ in range(repeat):
        c0 = time.process_time()
        t0 = time.perf_counter()
        frame = con.execute(DUCKDB_SQL.format(d=data)).df()
        total = min(total, time.perf_counter() - t0)
        cpu = min(cpu, time.process_time() - c0)
        peak1 = min(peak1, _hwm_mib())  # after the first run
    peak = _hwm_mib()
    frame.to_parquet(data / "result_floor.parquet")
    return {"total_s": total, "cpu_s": cpu, "peak_mib": peak, "peak1_mib": peak1}


# ------------------------------------------------------------------------------------------ driver


def max_delta(data: Path, a: str, b: str, measures) -> float:
    import pandas as pd

    x = pd.read_parquet(data / f"result_{a}.parquet").set_index("query_id")
    y = pd.read_parquet(data / f"result_{b}.parquet")
    y["query_id"] = y["query_id"].astype(x.index.dtype)
    y = y.set_index("query_id")
    if len(y) != len(x) or not y.index.isin(x.index).all():
        return float("inf")
    y = y.loc[x.index]
    worst = 0.0
    for m in measures:
        if m not in y.columns:
            continue
        u, v = x[m].to_numpy(float), y[m].to_numpy(float)
        d = np.abs(u - v)
        d[np.isnan(u) & np.isnan(v)] = 0.0
        d[np.isnan(d)] = np.inf
        worst = max(worst, float(d.max(initial=0.0)))
    return worst


def _child(*argv: str) -> dict:
    proc = subprocess.run(
        [sys.executable, __file__, *argv],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    if proc.returncode:
        raise SystemExit(f"{' '.join(argv)} failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=100_000)
    ap.add_argument("--hits", type=int, default=100)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--data", type=Path, help="keep/reuse the generated data under this directory")
    ap.add_argument("--only", action="append", choices=CANDIDATES, help="candidates to run (repeatable)")
    ap.add_argument("--pytrec", action="store_true", help="also compare with pytrec_eval (slow)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per worker; the fastest counts (default 3)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        if args.worker == "floor":
            out = run_floor(args.dir, args.repeat)
        elif args.worker == "full":
            out = run_full(args.dir, args.repeat)
        elif args.worker == "pytrec":
            from bench_metrics import worker_pytrec

            out = worker_pytrec(args.dir)
        else:
            out = run_candidate(args.worker, args.dir, args.repeat)
        print(json.dumps(out))
        return

    tmp = None
    if args.data is None:
        tmp = tempfile.TemporaryDirectory(prefix="bench_engine_")
        data = Path(tmp.name)
    else:
        data = args.data / f"q{args.queries}_h{args.hits}_s{args.seed}"
        data.mkdir(parents=True, exist_ok=True)
    if not (data / "hits.parquet").exists():
        t0 = time.perf_counter()
        prepare(data, args.queries, args.hits, args.seed)
        print(
            f"generated {args.queries:,} queries × {args.hits} hits "
            f"in {time.perf_counter() - t0:.1f} s → {data}"
        )
    candidates = list(args.only or CANDIDATES)
    if "polars" in candidates:
        try:
            import polars  # noqa: F401
        except ImportError:
            candidates.remove("polars")
            print("polars not installed: skipped")
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    results = {}
    for name in ["floor", "full", *candidates]:
        load = os.getloadavg()[0]
        results[name] = _child("--worker", name, "--dir", str(data), "--repeat", str(args.repeat)) | {
            "load1": load
        }
    if args.pytrec:
        results["pytrec"] = _child("--worker", "pytrec", "--dir", str(data)) | {"load1": os.getloadavg()[0]}
        results["pytrec"]["total_s"] = sum(results["pytrec"][k] for k in ("read_s", "prepare_s", "compute_s"))

    floor = results["floor"]["total_s"]
    full = results["full"]
    nan = float("nan")
    reference = candidates[0]
    print(
        f"\n{args.queries:,} queries × {args.hits} hits; path: read → match (chunk) → per-query measures "
        f"(k = {', '.join(map(str, KS))}; mrr, map, rprec, bpref) → means; Arrow pool "
        f"{results[reference].get('arrow_pool')}"
    )
    print(
        f"{'engine':<13} {'read s':>7} {'match s':>8} {'kernels s':>9} {'total s':>8} {'× floor':>8} "
        f"{'cpu s':>6} {'cpu × floor':>11} {'cpu × full':>10} {'peak MiB':>9} {'peak 1st':>9} "
        f"{'|Δ| vs ' + reference:>20} "
        f"{'|Δ| vs floor':>13} {'|Δ| vs full':>12} {'|Δ| vs pytrec':>14} {'load1':>6}"
    )
    ok = True
    for name, r in results.items():
        ratio = r["total_s"] / floor
        if name in ("floor", "full", "pytrec"):
            d_ref = d_floor = d_full = d_trec = "-"
            if name == "full" and reference in results:
                d_full = f"{max_delta(data, reference, 'full', FULL_MEASURES):.1e}"
        else:
            measures = [
                "mrr",
                "map",
                "rprec",
                "bpref",
                *(
                    f"{m}@{k}"
                    for m in (
                        "hit",
                        "recall",
                        "precision",
                        "ndcg",
                        "map",
                        "judged",
                        "recall_all",
                        "recall_any",
                        "doc_recall",
                    )
                    for k in KS
                ),
            ]
            d_ref = f"{max_delta(data, reference, name, measures):.1e}"
            d_floor = f"{max_delta(data, name, 'floor', FLOOR):.1e}"
            d_full = f"{max_delta(data, name, 'full', FULL_MEASURES):.1e}"
            d_trec = f"{max_delta(data, name, 'pytrec', PYTREC):.1e}" if "pytrec" in results else "-"
            close = [float(d) <= 1e-9 for d in (d_floor, d_full, d_trec) if d != "-"]
            ok &= d_ref == "0.0e+00" and all(close)
            if r.get("object_columns"):
                print(f"  {name}: object columns {r['object_columns']}")
        print(
            f"{name:<13} {r.get('read_s', 0):>7.2f} {r.get('match_s', 0):>8.2f} "
            f"{r.get('kernels_s', 0):>9.2f} {r['total_s']:>8.2f} {ratio:>8.2f} {r.get('cpu_s', nan):>6.2f} "
            f"{r.get('cpu_s', nan) / results['floor']['cpu_s']:>11.2f} "
            f"{r.get('cpu_s', nan) / full['cpu_s']:>10.2f} "
            f"{r['peak_mib']:>9.0f} {r.get('peak1_mib', nan):>9.0f} "
            f"{d_ref:>20} {d_floor:>13} {d_full:>12} {d_trec:>14} "
            f"{r['load1']:>6.2f}"
        )
    if "pandas-numpy" in results:  # the package's path
        r = results["pandas-numpy"]
        print(
            f"  package path / 3-measure DuckDB query: {r['total_s'] / floor:.2f}x wall, "
            f"{r['cpu_s'] / results['floor']['cpu_s']:.2f}x CPU; / same-measures DuckDB query: "
            f"{r['total_s'] / full['total_s']:.2f}x wall, {r['cpu_s'] / full['cpu_s']:.2f}x CPU"
        )
        ok &= _check(
            f"package path within {TARGET_RATIO:g}x of the floor", r["total_s"] / floor <= TARGET_RATIO
        )
        ok &= _check(
            f"package path within {TARGET_RATIO:g}x of the same-measures query",
            r["total_s"] / full["total_s"] <= TARGET_RATIO,
        )
        ok &= _check(
            f"package path peak RSS ≤ {TARGET_PEAK_MIB:.0f} MiB (over all {args.repeat} runs)",
            r["peak_mib"] <= TARGET_PEAK_MIB,
        )
        ok &= _check(
            f"package path peak RSS ≤ {TARGET_PEAK_MIB:.0f} MiB (one run)", r["peak1_mib"] <= TARGET_PEAK_MIB
        )
    if tmp is not None:
        tmp.cleanup()
    if not ok:
        raise SystemExit(1)


def _check(label: str, passed: bool) -> bool:
    print(f"  {'PASS' if passed else 'FAIL'}  {label}")
    return passed


if __name__ == "__main__":
    main()
