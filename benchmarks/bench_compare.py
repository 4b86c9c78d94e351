"""Benchmark: comparing two runs (SPEC §8) on N queries × H hits — ours vs ranx vs scipy.

    python benchmarks/bench_compare.py                        # 10k and 100k queries × 100 hits
    python benchmarks/bench_compare.py --queries 2000         # one size (repeatable flag)
    python benchmarks/bench_compare.py --skip ranx            # cases: see CASES below
    python benchmarks/bench_compare.py --resamples 2000       # resamples of every paired test
    python benchmarks/bench_compare.py --ranx-max-queries 0   # no cap on ranx's Fisher test
    python benchmarks/bench_compare.py --data /tmp/bc         # keep/reuse the generated runs
    python benchmarks/bench_compare.py --queries 100000 --profile exact   # cProfile one case

Data (seeded, built directly from tables — no system adapter — and not timed): per size, one
golden set of N answerable queries with 1–5 graded supports each (chunk id, doc id, document
path and a 20-line span), and three runs of H hits per query, every hit with a document, a line
range and a heading path (snippets are empty). A query's hits are H of 2H candidate chunks,
ranked by random keys, the gold chunks' keys scaled down by a log-normal factor (hit@10 ≈ 0.86,
about a fifth of the queries' mrr differs between a and b); a chunk is one of 10 sections of 20
lines of its document, and each candidate comes from a different document (so ours'
``doc_recall@k`` — document recall — equals the support ``recall@k``, trec_eval's ``recall_k``,
the chunk recall ranx computes; a retrieved sibling of a gold chunk would make document recall
differ by definition, not by error):

- ``a``: the baseline (``chunker_version`` chunker-1);
- ``b``: same chunker; for a random 30 % of the queries the gold chunks' factors are drawn
  afresh, which moves the gold up or down — on average slightly up, by an amount that shrinks
  as 1/√N so that b's improvement stays near the edge of significance at every N (the p-values
  are then worth comparing between tools);
- ``b2``: b's ranking under another chunker (chunker-2): other chunk ids, every chunk's lines
  shifted by 5. Compared with ``a`` this is ``fallback_span``; the shift keeps ≥ 50 % overlap
  with the gold chunk only, so the re-scored deltas must equal the exact ones (checked).

Each run is scored as ``pipeline.score``/``summarize`` do (``build_query_scores`` with the default
k = 1, 3, 5, 10, MRR cutoff 10 and ``auto`` matching → ``round_scores`` + ``summarize_scores``) and
written to a ``RunStore``; the cases read them back with ``RunStore.stored_run`` as
``kebab-eval compare`` does ("load s", timed apart from the work).

Cases, each in its own subprocess so that peak RSS is its own ("peak MiB" is the process's
``ru_maxrss``, load included; "case MiB" is the growth over the loaded inputs during the timed
work, from ``VmHWM`` reset through ``/proc/self/clear_refs``):

- ``exact``: ``compare_runs(a, b)`` with the default ``CompareSettings`` (10,000 resamples,
  seed 0): the stored per-query scores, paired tests of every mean metric (25 of the 63 metrics
  here; no answers), verdicts, drift, per-slice deltas, Markdown.
- ``fallback``: ``compare_runs(a, b2)``: both runs re-scored under ``span``, then as above.
- ``report``: ``report_files`` (md + html + json) of the exact comparison (comparison untimed).
- ``tests``: ours ``paired_test`` on the stored mrr and ndcg@10 columns (the inputs the
  comparison tests), and ``compare_query_scores`` on ranx's five metrics.
- ``ranx``: ``ranx.compare(qrels, [run_a, run_b], hit_rate@10, mrr@10, recall@10, precision@10,
  ndcg@10, stat_test="fisher", n_permutations=R, random_seed=0, max_p=0.05)`` — evaluation of
  both runs plus Fisher's randomization test (sign flips of the pairs, the test ours runs for
  graded metrics) per metric, run twice per pair (ranx tests a→b and b→a). Qrels/Run
  construction (dicts + ``from_dict``) is timed apart; numba is warmed up, untimed, on a tiny
  input with ids as long as the data's. Then, timed apart, ranx's evaluation alone and one
  ``fisher_randomization_test`` per column (mrr, ndcg@10). Fisher's test costs O(R·N) with a
  per-pair permutation in numba (~1 min per test at 100k): above ``--ranx-max-queries`` (default
  10,000) ``ranx.compare`` runs ``stat_test="student"`` (paired t) instead, and says so, and the
  one-test timings are of R/50 permutations, scaled. A probe also runs the Fisher test four
  times with the same ``random_seed`` (numba seeds only the calling thread's generator).
- ``ranking``: ``rank_runs(a, b, c, d, e)`` (``kebab-eval compare a b c d e``) on the default
  metrics mrr, ndcg@10 and hit@5: five runs on one chunker (exact: stored scores), each metric's
  10 pairwise paired tests with the default ``CompareSettings``, Holm, letters and per-run
  bootstrap CIs; then, timed apart, its three files. Runs ``c``, ``d``, ``e`` are generated only
  for this case: independent rankings of the same golden set, the gold's log-normal factor median
  moved by −1, +1 and +2 × EFFECT/√N. The (a, b) pair's p-values must equal ``exact``'s.
- ``scipy``: ``scipy.stats.permutation_test`` (paired: ``permutation_type="samples"``, statistic
  mean(b − a), sign flips, vectorized, ``batch`` bounding memory to ~2**22 values) and
  ``scipy.stats.bootstrap`` (paired, percentile) on the same columns as ``tests``, R resamples,
  ``rng=0``. scipy's paired resampling loops in Python over the N pairs once per batch, and the
  memory bound makes a batch ~2**22/N resamples, so ``permutation_test`` costs O(R·N²) (~5 min
  per column at 100k on a quiet 2-CPU VM): above ``--scipy-max-queries`` (default 10,000) it is timed on R/50
  resamples, scaled by the number of batches, and its p-value is not reported.

Agreement: deltas b − a must agree to 1e-9 (ranx's per-query values vs ours unrounded; scipy vs
ours on the same stored columns; ``compare_runs`` vs ``paired_test``; fallback vs exact).
p-values and CIs are Monte Carlo with different random streams (and definitions: ours and scipy
count the observed statistic, ranx does not; scipy doubles the smaller one-sided p), so they agree
within sampling error only: each p is printed with its Monte Carlo standard error (√(p(1−p)/R);
scipy's doubled p: 2√(q(1−q)/R), q = p/2), and |Δp| with its size in standard errors of the
difference ("in se"). ranx's paired t p-value (above the cap) is not Monte Carlo.
Not a test: timings depend on the machine (note its load).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import math
import os
import pstats
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SIZES = (10_000, 100_000)
CASES = ("exact", "fallback", "report", "tests", "ranx", "scipy", "ranking")
KS = (1, 3, 5, 10)
CUTOFF = 10
RUN_A, RUN_B, RUN_B2 = "a", "b", "b2"
#: The ranking case's extra runs and how far each moves the gold (× EFFECT/√N, as b's shift).
RANKING_EXTRA = {"c": -1.0, "d": 1.0, "e": 2.0}
RANKING_RUNS = (RUN_A, RUN_B, *RANKING_EXTRA)
RANKING_METRICS = ("mrr", "ndcg@10", "hit@5")
#: ranx metric → ours (per-query column and aggregate metric share the name).
RANX_METRICS = {
    "hit_rate@10": "hit@10",
    "mrr@10": "mrr",
    "recall@10": "recall@10",
    "precision@10": "precision@10",
    "ndcg@10": "ndcg@10",
}
TEST_COLUMNS = ("mrr", "ndcg@10")  # graded: ours' randomization test, comparable with Fisher/scipy
DOC_CHUNKS = 10  # a chunk is one of 10 sections of 20 lines in its document
CHUNK_LINES = 20
B2_SHIFT = 5  # b2's chunk lines are shifted by this much (overlap with the gold stays ≥ 50 %)
MOVED_SHARE = 0.3
# A gold chunk's random key is scaled by a log-normal factor, median GOLD_BOOST (the systems
# rank the gold high: hit@10 ≈ 0.86). For the moved queries b draws that factor afresh with its
# median lowered by EFFECT/√N in log: with EFFECT = 0, a and b would be exchangeable (no
# difference in expectation for any metric); EFFECT/√N keeps b's improvement near two standard
# errors at every N.
GOLD_BOOST = 0.08
GOLD_BOOST_SD = 1.0
EFFECT = 4.0
TOLERANCE = 1e-9
SCIPY_BATCH_VALUES = 1 << 22
EXTRAPOLATE = 50  # above a cap, competitors' O(R·N) tests are timed on R/50 resamples and scaled


# ------------------------------------------------------------------------------------------ data


def _ids(prefix: str, numbers: np.ndarray, suffix: str = ""):
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.binary_join_element_wise(prefix, pc.cast(pa.array(numbers), pa.string()), suffix, "")


def _rankings(n: int, n_hits: int, n_sup: np.ndarray, rng: np.random.Generator):
    """Support chunk offsets (n × 5, first n_sup valid) and a's/b's top-H chunk offsets (n × H)."""
    corpus = 2 * n_hits
    sup = np.empty((n, 5), dtype=np.int64)
    off_a = np.empty((n, n_hits), dtype=np.int64)
    off_b = np.empty((n, n_hits), dtype=np.int64)
    moved = rng.random(n) < MOVED_SHARE
    shift = EFFECT / np.sqrt(n)
    for start in range(0, n, 10_000):  # bounded memory for the random keys
        stop = min(start + 10_000, n)
        rows = stop - start
        sup[start:stop] = np.argsort(rng.random((rows, corpus), dtype=np.float32), axis=1)[:, :5]
        keys = rng.random((rows, corpus), dtype=np.float32)
        gold = np.arange(rows)[:, None], sup[start:stop]
        is_gold = np.arange(5)[None, :] < n_sup[start:stop, None]
        base = keys[gold]
        # Gold keys are scaled down by a log-normal factor: the systems tend to rank the gold high.
        boost_a = np.exp(rng.normal(np.log(GOLD_BOOST), GOLD_BOOST_SD, (rows, 5)))
        boost_b = np.exp(rng.normal(np.log(GOLD_BOOST) - shift, GOLD_BOOST_SD, (rows, 5)))
        boost_b = np.where(moved[start:stop, None], boost_b, boost_a)
        keys[gold] = np.where(is_gold, base * boost_a, base).astype(np.float32)
        off_a[start:stop] = np.argsort(keys, axis=1)[:, :n_hits]
        keys[gold] = np.where(is_gold, base * boost_b, base).astype(np.float32)
        off_b[start:stop] = np.argsort(keys, axis=1)[:, :n_hits]
    return sup, off_a, off_b, int(moved.sum())


def _extra_offsets(n: int, n_hits: int, n_sup: np.ndarray, sup: np.ndarray, rng, moves: float) -> np.ndarray:
    """Another system's top-H chunk offsets (n × H): fresh random keys, the gold's keys scaled by a
    log-normal factor whose median is moved by ``moves`` × EFFECT/√N (positive: ranks gold higher)."""
    corpus = 2 * n_hits
    out = np.empty((n, n_hits), dtype=np.int64)
    shift = moves * EFFECT / np.sqrt(n)
    for start in range(0, n, 10_000):
        stop = min(start + 10_000, n)
        rows = stop - start
        keys = rng.random((rows, corpus), dtype=np.float32)
        gold = np.arange(rows)[:, None], sup[start:stop]
        is_gold = np.arange(5)[None, :] < n_sup[start:stop, None]
        boost = np.exp(rng.normal(np.log(GOLD_BOOST) - shift, GOLD_BOOST_SD, (rows, 5)))
        keys[gold] = np.where(is_gold, keys[gold] * boost, keys[gold]).astype(np.float32)
        out[start:stop] = np.argsort(keys, axis=1)[:, :n_hits]
    return out


def _hits_frame(n: int, n_hits: int, offsets: np.ndarray, chunker: str, prefix: str, line_shift: int):
    """A run's hits table (``HIT_COLUMNS``, as the runner types it)."""
    import pyarrow as pa

    from kebab_eval_pipeline.systems.base import HIT_COLUMNS

    rows = n * n_hits
    corpus = 2 * n_hits
    q = np.repeat(np.arange(n, dtype=np.int64), n_hits)
    chunk = (np.arange(n, dtype=np.int64)[:, None] * corpus + offsets).ravel()
    doc = chunk  # one candidate chunk per document (see the docstring)
    first = (chunk % DOC_CHUNKS) * CHUNK_LINES + 1 + line_shift
    rank = np.tile(np.arange(1, n_hits + 1, dtype=np.int64), n)
    vocabulary = pa.array(["Guide", "Setup", "Usage", "Reference", "FAQ"])
    heading = pa.ListArray.from_arrays(
        pa.array(np.arange(0, 2 * rows + 1, 2, dtype=np.int32)),
        vocabulary.take(pa.array(np.stack([doc % 2, 2 + chunk % 3], axis=1).ravel())),
    )

    def const(value, type_=pa.string()):
        return pa.array([value], type_).take(pa.array(np.zeros(rows, dtype=np.int64)))

    table = pa.table(
        {
            "query_id": _ids("q", q),
            "rank": pa.array(rank),
            "chunk_id": _ids(prefix, chunk),
            "doc_id": _ids("d", doc),
            "doc_path": _ids("docs/d", doc, ".md"),
            "heading_path": heading,
            "line_start": pa.array(first),
            "line_end": pa.array(first + CHUNK_LINES - 1),
            "snippet": const(""),
            "score": pa.array(1000.0 - rank),
            "score_kind": const("bm25"),
            "lexical_score": const(None, pa.float64()),
            "vector_score": const(None, pa.float64()),
            "lexical_rank": const(None, pa.int64()),
            "vector_rank": const(None, pa.int64()),
            "index_version": const("idx-1"),
            "embedding_model": const(None),
            "chunker_version": const(chunker),
        }
    )
    return table.to_pandas().astype(HIT_COLUMNS)


def _golden(n: int, n_hits: int, n_sup: np.ndarray, sup: np.ndarray, rng: np.random.Generator, seed: int):
    from kebab_eval_pipeline.chain.artifacts import GoldenArtifact
    from kebab_eval_pipeline.golden.tables import QUERY_COLUMNS, SUPPORT_COLUMNS, typed_frame

    q = np.arange(n)
    empty = [[] for _ in range(n)]
    tag_roll = rng.random(n)
    queries = typed_frame(
        {
            "query_id": [f"q{i}" for i in q],
            "query": [f"question {i}" for i in q],
            "lang": np.where(rng.random(n) < 0.7, "en", "ko"),
            "answerable": np.ones(n, dtype=bool),
            "category": np.array(["install", "config", "api", "concept", "howto", "troubleshoot"])[q % 6],
            "difficulty": np.array(["easy", "medium", "hard"])[rng.integers(0, 3, n)],
            "tags": [["critical"] if t < 0.05 else ["faq"] if t < 0.25 else [] for t in tag_roll],
            "group": [f"g{i // 30}" if i % 10 == 0 else None for i in q],
            "pending": np.zeros(n, dtype=bool),
            "n_supports": n_sup,
            "required_support_groups": ["[]"] * n,
            "must_contain": empty,
            "forbidden": empty,
            "gold_claim_substr": empty,
            "recency_rule": [None] * n,
            "expected_kind": [None] * n,
            "notes": [""] * n,
            "constraints": empty,
        },
        QUERY_COLUMNS,
    )
    keep = np.arange(5)[None, :] < n_sup[:, None]
    s_q = np.repeat(q, 5).reshape(n, 5)[keep]
    chunk = (q[:, None] * 2 * n_hits + sup)[keep]
    doc = chunk  # one candidate chunk per document (see the docstring)
    first = (chunk % DOC_CHUNKS) * CHUNK_LINES + 1
    m = len(s_q)
    supports = typed_frame(
        {
            "query_id": [f"q{i}" for i in s_q],
            "support_idx": np.tile(np.arange(5), n).reshape(n, 5)[keep],
            "chunk_id": [f"c{c}" for c in chunk],
            "doc_id": [f"d{d}" for d in doc],
            "rel_path": [f"docs/d{d}.md" for d in doc],
            "heading_path": [None] * m,
            "line_start": first,
            "line_end": first + CHUNK_LINES - 1,
            "snippet": [None] * m,
            "symbol": [None] * m,
            "symbol_kind": [None] * m,
            "section": [None] * m,
            "grade": rng.integers(1, 4, m),
        },
        SUPPORT_COLUMNS,
    )
    info = {
        "name": f"bench-{n}",
        "source": "synthetic",
        "format": "kebab",
        "sha256": f"{seed:08x}{n:056x}",
        "schema_version": "1",
        "files": [],
        "warnings": [],
    }
    return GoldenArtifact(queries, supports, info)


def _outcomes(n: int, n_hits: int, rng: np.random.Generator):
    from kebab_eval_pipeline.golden.tables import typed_frame
    from kebab_eval_pipeline.systems.base import OUTCOME_COLUMNS

    return typed_frame(
        {
            "query_id": [f"q{i}" for i in range(n)],
            "n_hits": np.full(n, n_hits),
            "retrieval_ms": rng.lognormal(3.0, 0.5, n),
            "answer_ms": np.full(n, np.nan),
            "timed_out": np.zeros(n, dtype=bool),
            "attempts": np.ones(n, dtype=np.int64),
            "answered": np.zeros(n, dtype=bool),
        },
        OUTCOME_COLUMNS,
    )


def _write_run(store, run_id: str, golden, hits, outcomes, chunker: str, mode: str) -> dict[str, np.ndarray]:
    """Score one run as ``pipeline.score``/``summarize`` do and store its four artifacts; returns
    the unrounded per-query values of ranx's metrics."""
    from kebab_eval_pipeline.chain import pipeline
    from kebab_eval_pipeline.chain.artifacts import QueryScoresArtifact, RetrievalArtifact
    from kebab_eval_pipeline.chain.settings import settings_from_dict
    from kebab_eval_pipeline.contract import SystemInfo
    from kebab_eval_pipeline.golden.tables import typed_frame
    from kebab_eval_pipeline.metrics.aggregate import round_scores, score_results, summarize_scores
    from kebab_eval_pipeline.metrics.retrieval import SCORING_VERSION
    from kebab_eval_pipeline.systems.base import CITATION_COLUMNS
    from kebab_eval_pipeline.systems.runner import RetrievalResults

    system = SystemInfo(kind="replay", mode=mode, chunker_version=chunker, index_version="idx-1")
    results = RetrievalResults(
        outcomes=outcomes,
        hits=hits,
        citations=typed_frame([], CITATION_COLUMNS),
        known_chunks=typed_frame({"chunk_id": []}, {"chunk_id": "string"}),
        system=system,
    )
    retrieval = RetrievalArtifact(
        results, {"k_requested": CUTOFF, "answers": False, "golden_sha256": golden.sha256}
    )
    settings = settings_from_dict({"k": list(KS), "mrr_cutoff": CUTOFF, "answers": False, "baseline": "none"})
    scores = score_results(golden.queries, golden.supports, retrieval.results, list(KS), CUTOFF, "auto", None)
    summary = summarize_scores(scores, KS)
    query_scores = QueryScoresArtifact(
        round_scores(scores),
        {
            "k": list(KS),
            "mrr_cutoff": CUTOFF,
            "match": "auto",
            "source_root": None,
            "hit_verdicts": None,
            # today's metric definitions, as pipeline.score records them: without it a comparison
            # takes the runs for older ones and re-scores them from their hits (legacy.is_current)
            "scoring_version": SCORING_VERSION,
        },
        summary,
    )
    metrics = pipeline.summarize(run_id, settings, golden, retrieval, query_scores)
    for asset, artifact in (
        ("golden_set", golden),
        ("retrieval_results", retrieval),
        ("query_scores", query_scores),
        ("run_metrics", metrics),
    ):
        store.write(asset, run_id, *artifact.to_tables())
    return {ours: scores[ours].to_numpy(dtype=float) for ours in RANX_METRICS.values()}


def generate(data: Path, n: int, n_hits: int, seed: int, ranking: bool = False) -> dict:
    """Write runs a, b and b2 into ``data/store`` and ours' unrounded per-query values (a, b) for
    ranx's metrics into ``data/unrounded.parquet``; with ``ranking``, also runs c, d and e (drawn
    after everything else, so a, b and b2 are the same either way)."""
    import pandas as pd

    from kebab_eval_pipeline.store.runs import RunStore

    rng = np.random.default_rng(seed)
    n_sup = rng.integers(1, 6, n)
    sup, off_a, off_b, moved = _rankings(n, n_hits, n_sup, rng)
    golden = _golden(n, n_hits, n_sup, sup, rng, seed)
    outcomes = _outcomes(n, n_hits, rng)
    store = RunStore(data / "store")
    unrounded = {"query_id": golden.queries["query_id"].to_numpy(dtype=object)}
    for run_id, offsets, chunker, prefix, shift, mode in (
        (RUN_A, off_a, "chunker-1", "c", 0, "lexical"),
        (RUN_B, off_b, "chunker-1", "c", 0, "hybrid"),
        (RUN_B2, off_b, "chunker-2", "x", B2_SHIFT, "hybrid"),
    ):
        hits = _hits_frame(n, n_hits, offsets, chunker, prefix, shift)
        values = _write_run(store, run_id, golden, hits, outcomes, chunker, mode)
        del hits
        if run_id != RUN_B2:
            unrounded |= {f"{run_id}:{c}": v for c, v in values.items()}
    if ranking:
        for run_id, moves in RANKING_EXTRA.items():
            offsets = _extra_offsets(n, n_hits, n_sup, sup, rng, moves)
            hits = _hits_frame(n, n_hits, offsets, "chunker-1", "c", 0)
            _write_run(store, run_id, golden, hits, outcomes, "chunker-1", "hybrid")
            del hits, offsets
    pd.DataFrame(unrounded).to_parquet(data / "unrounded.parquet")
    return {"moved": moved, "supports": int(n_sup.sum())}


# ------------------------------------------------------------------------------------------ workers


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _status_mib(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


class Phase:
    """Times a block; its memory growth is VmHWM (reset at the start) minus VmRSS at the start.
    With ``profile``, the block runs under cProfile and the top functions go to stderr."""

    def __init__(self, profile: bool = False):
        self.profile = cProfile.Profile() if profile else None

    def __enter__(self):
        with contextlib.suppress(OSError):  # resets VmHWM (Linux); else the growth is an upper bound
            Path("/proc/self/clear_refs").write_text("5")
        self.rss0 = _status_mib("VmRSS")
        if self.profile:
            self.profile.enable()
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.t0
        self.grew_mib = max(0.0, _status_mib("VmHWM") - self.rss0)
        if self.profile:
            self.profile.disable()
            for order in ("tottime", "cumulative"):
                out = io.StringIO()
                pstats.Stats(self.profile, stream=out).sort_stats(order).print_stats(15)
                print(out.getvalue(), file=sys.stderr)
        return False


def _load(data: Path, *runs: str):
    from kebab_eval_pipeline.store.runs import RunStore

    store = RunStore(data / "store")
    t0 = time.perf_counter()
    bundles = [store.stored_run(r) for r in runs]
    return bundles, time.perf_counter() - t0


def _per_metric(report) -> dict[str, dict]:
    keep = ["paired_delta", "p_value", "ci_low", "ci_high", "test", "n_paired", "a", "b"]
    rows = {}
    for row in report.per_metric[["metric", *keep]].to_dict("records"):
        rows[row["metric"]] = {k: None if _isna(row[k]) else _plain(row[k]) for k in keep}
    return rows


def _isna(x) -> bool:
    import pandas as pd

    return x is None or bool(pd.isna(x))


def _plain(x):
    return x if isinstance(x, str) else float(x)


def _compare_worker(data: Path, b_run: str, resamples: int, profile: bool) -> dict:
    from kebab_eval_pipeline.compare.runs import compare_runs
    from kebab_eval_pipeline.compare.settings import CompareSettings

    (a, b), load_s = _load(data, RUN_A, b_run)
    options = CompareSettings(resamples=resamples)
    with Phase(profile) as phase:
        report = compare_runs(a, b, options=options)
    tested = int(report.per_metric["p_value"].notna().sum())
    return {
        "load_s": load_s,
        "compute_s": phase.seconds,
        "case_mib": phase.grew_mib,
        "peak_mib": _peak_mib(),
        "mode": report.info["chunker_version_match"],
        "tested": tested,
        "metrics": len(report.per_metric),
        "verdicts": report.info["verdict_counts"],
        "per_metric": _per_metric(report),
    }


def worker_exact(data: Path, args: argparse.Namespace) -> dict:
    return _compare_worker(data, RUN_B, args.resamples, args.profile == "exact")


def worker_fallback(data: Path, args: argparse.Namespace) -> dict:
    return _compare_worker(data, RUN_B2, args.resamples, args.profile == "fallback")


def worker_report(data: Path, args: argparse.Namespace) -> dict:
    from kebab_eval_pipeline.compare.document import report_files
    from kebab_eval_pipeline.compare.runs import compare_runs
    from kebab_eval_pipeline.compare.settings import CompareSettings

    (a, b), load_s = _load(data, RUN_A, RUN_B)
    report = compare_runs(a, b, options=CompareSettings(resamples=args.resamples))
    del a, b
    with Phase(args.profile == "report") as phase:
        files = report_files(report)
    return {
        "load_s": load_s,
        "compute_s": phase.seconds,
        "case_mib": phase.grew_mib,
        "peak_mib": _peak_mib(),
        "bytes": {name: len(content) for name, content in files.items()},
    }


def _stored_columns(data: Path) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], object, object]:
    """Both runs' stored (rounded) query_scores tables and their aligned test columns."""
    from kebab_eval_pipeline.store.runs import RunStore

    store = RunStore(data / "store")
    qa = store.read("query_scores", RUN_A)[0]["query_scores"]
    qb = store.read("query_scores", RUN_B)[0]["query_scores"]
    if not qa["query_id"].equals(qb["query_id"]):
        raise SystemExit("runs a and b list their queries in different orders")
    cols_a = {c: qa[c].astype("Float64").to_numpy(dtype=float, na_value=np.nan) for c in TEST_COLUMNS}
    cols_b = {c: qb[c].astype("Float64").to_numpy(dtype=float, na_value=np.nan) for c in TEST_COLUMNS}
    return cols_a, cols_b, qa, qb


def worker_tests(data: Path, args: argparse.Namespace) -> dict:
    from kebab_eval_pipeline.compare.significance import compare_query_scores, paired_test

    cols_a, cols_b, qa, qb = _stored_columns(data)
    out: dict = {"columns": {}}
    for column in TEST_COLUMNS:
        with Phase(args.profile == "tests") as phase:
            r = paired_test(cols_a[column], cols_b[column], seed=0, n_resamples=args.resamples)
        out["columns"][column] = {
            "seconds": phase.seconds,
            "delta": r.delta,
            "p_value": r.p_value,
            "ci_low": r.ci_low,
            "ci_high": r.ci_high,
            "note": r.note,
        }
    with Phase() as five:
        compare_query_scores(qa, qb, list(RANX_METRICS.values()), seed=0, n_resamples=args.resamples)
    return {
        **out,
        "load_s": 0.0,
        "compute_s": sum(c["seconds"] for c in out["columns"].values()),
        "five_s": five.seconds,
        "case_mib": max(phase.grew_mib, five.grew_mib),
        "peak_mib": _peak_mib(),
    }


def worker_scipy(data: Path, args: argparse.Namespace) -> dict:
    from scipy.stats import bootstrap, permutation_test

    def mean_diff(x, y, axis):
        return np.mean(y - x, axis=axis)

    cols_a, cols_b, _, _ = _stored_columns(data)
    out: dict = {"columns": {}}
    grew = 0.0
    for column in TEST_COLUMNS:
        a, b = cols_a[column], cols_b[column]
        keep = ~(np.isnan(a) | np.isnan(b))
        a, b = a[keep], b[keep]
        batch = max(1, SCIPY_BATCH_VALUES // a.size)
        # Above the cap, time R/EXTRAPOLATE resamples and scale by the number of batches (the
        # cost is per batch: a Python loop over the N pairs); the p-value is then not reported.
        capped = bool(args.scipy_max_queries) and a.size > args.scipy_max_queries
        perm_resamples = max(batch, args.resamples // EXTRAPOLATE) if capped else args.resamples
        with Phase(args.profile == "scipy") as perm:
            p = permutation_test(
                (a, b),
                mean_diff,
                permutation_type="samples",
                vectorized=True,
                n_resamples=perm_resamples,
                batch=batch,
                rng=0,
            )
        perm_s = perm.seconds * math.ceil(args.resamples / batch) / math.ceil(perm_resamples / batch)
        with Phase() as boot:
            ci = bootstrap(
                (a, b),
                mean_diff,
                paired=True,
                vectorized=True,
                n_resamples=args.resamples,
                batch=batch,
                method="percentile",
                rng=0,
            )
        grew = max(grew, perm.grew_mib, boot.grew_mib)
        out["columns"][column] = {
            "perm_s": perm_s,
            "perm_estimated": capped,
            "boot_s": boot.seconds,
            "seconds": perm_s + boot.seconds,
            "delta": float(p.statistic),
            "p_value": None if capped else float(p.pvalue),
            "ci_low": float(ci.confidence_interval.low),
            "ci_high": float(ci.confidence_interval.high),
            "batch": batch,
        }
    return {
        **out,
        "load_s": 0.0,
        "compute_s": sum(c["seconds"] for c in out["columns"].values()),
        "estimated": any(c["perm_estimated"] for c in out["columns"].values()),
        "case_mib": grew,
        "peak_mib": _peak_mib(),
    }


def worker_ranx(data: Path, args: argparse.Namespace) -> dict:
    import pandas as pd
    import pyarrow.parquet as pq
    import ranx
    from ranx.statistical_tests import fisher_randomization_test

    from kebab_eval_pipeline.store.runs import RunStore

    store = RunStore(data / "store")
    n = pq.read_metadata(store.table_path("query_scores", RUN_A, "query_scores")).num_rows
    fisher = not args.ranx_max_queries or n <= args.ranx_max_queries
    stat_test = "fisher" if fisher else "student"
    metrics = list(RANX_METRICS)

    t0 = time.perf_counter()
    sup = pq.read_table(
        store.table_path("golden_set", RUN_A, "supports"), columns=["query_id", "chunk_id", "grade"]
    ).to_pydict()
    hits = {
        run: pq.read_table(
            store.table_path("retrieval_results", run, "hits"), columns=["query_id", "chunk_id", "score"]
        ).to_pydict()
        for run in (RUN_A, RUN_B)
    }
    read_s = time.perf_counter() - t0

    # Untimed warm-up: numba kernels are specialised on the id array dtype (<U{max len}).
    t1 = time.perf_counter()
    q_len = max(map(len, sup["chunk_id"]))
    r_len = max(len(c) for h in hits.values() for c in h["chunk_id"])
    tiny_q = ranx.Qrels.from_dict({f"w{i}": {"a" * q_len: 1, "b" * q_len: 2} for i in range(3)})
    tiny_r = [
        ranx.Run.from_dict({f"w{i}": {"a" * r_len: 2.0 + j, "c" * r_len: 1.0} for i in range(3)}, name=str(j))
        for j in range(2)
    ]
    ranx.compare(tiny_q, tiny_r, metrics, stat_test=stat_test, n_permutations=10, max_p=0.05, random_seed=0)
    # Is ranx's Fisher test reproducible with a fixed random_seed? (numba seeds one thread only.)
    probe = np.random.default_rng(1).random((2, 5000))
    probe_p = [fisher_randomization_test(probe[0], probe[1], 2000, 0.05, 0)[0] for _ in range(4)]
    warm_s = time.perf_counter() - t1

    with Phase() as build:
        qrels_d: dict[str, dict[str, int]] = {}
        for q, c, g in zip(sup["query_id"], sup["chunk_id"], sup["grade"], strict=True):
            qrels_d.setdefault(q, {})[c] = g
        qrels = ranx.Qrels.from_dict(qrels_d)
        runs = []
        for run_id, h in hits.items():
            run_d: dict[str, dict[str, float]] = {}
            for q, c, s in zip(h["query_id"], h["chunk_id"], h["score"], strict=True):
                run_d.setdefault(q, {})[c] = s
            runs.append(ranx.Run.from_dict(run_d, name=run_id))
        del qrels_d, run_d, hits, sup
    with Phase(args.profile == "ranx") as compare:
        report = ranx.compare(
            qrels,
            runs,
            metrics,
            stat_test=stat_test,
            n_permutations=args.resamples,
            max_p=0.05,
            random_seed=0,
        )
    with Phase() as evaluate:
        per_query = {
            r.name: ranx.evaluate(qrels, r, metrics, return_mean=False, save_results_in_run=False)
            for r in runs
        }
    qids = list(qrels.get_query_ids())
    if any(list(r.get_query_ids()) != qids for r in runs):
        raise SystemExit("ranx: qrels and run query order differ")
    frame = {"query_id": qids}
    for r in runs:
        frame |= {
            f"{r.name}:{ours}": np.asarray(per_query[r.name][m], float) for m, ours in RANX_METRICS.items()
        }
    pd.DataFrame(frame).to_parquet(data / "result_ranx.parquet")

    columns: dict[str, dict] = {}
    comparison = report.comparisons[frozenset((RUN_A, RUN_B))]
    for m, ours in RANX_METRICS.items():
        columns[ours] = {"p_value": float(comparison[m]["p_value"])}
    # One Fisher test per column, one direction, timed apart (above the cap: R/EXTRAPOLATE
    # permutations, scaled — the cost is linear in the permutations).
    permutations = args.resamples if fisher else max(1, args.resamples // EXTRAPOLATE)
    for m, ours in RANX_METRICS.items():
        if ours in TEST_COLUMNS:
            with Phase() as one:
                fisher_randomization_test(per_query[RUN_A][m], per_query[RUN_B][m], permutations, 0.05, 0)
            columns[ours]["seconds"] = one.seconds * args.resamples / permutations
            columns[ours]["estimated"] = not fisher
    return {
        "stat_test": stat_test,
        "read_s": read_s,
        "warmup_s": warm_s,
        "probe_p": probe_p,
        "load_s": build.seconds,
        "compute_s": compare.seconds,
        "evaluate_s": evaluate.seconds,
        "case_mib": max(build.grew_mib, compare.grew_mib),
        "peak_mib": _peak_mib(),
        "columns": columns,
    }


def worker_ranking(data: Path, args: argparse.Namespace) -> dict:
    from kebab_eval_pipeline.compare.ranking import rank_runs
    from kebab_eval_pipeline.compare.ranking_report import ranking_files
    from kebab_eval_pipeline.compare.settings import CompareSettings

    runs, load_s = _load(data, *RANKING_RUNS)
    with Phase(args.profile == "ranking") as phase:
        ranking = rank_runs(runs, list(RANKING_METRICS), options=CompareSettings(resamples=args.resamples))
    with Phase() as files:
        ranking_files(ranking)
    ab = ranking.pairs[(ranking.pairs["run_a"] == RUN_A) & (ranking.pairs["run_b"] == RUN_B)]
    rows = ranking.per_run.set_index(["metric", "run_id"])
    return {
        "load_s": load_s,
        "compute_s": phase.seconds,
        "files_s": files.seconds,
        "case_mib": max(phase.grew_mib, files.grew_mib),
        "peak_mib": _peak_mib(),
        "tests": len(ranking.pairs),
        "mode": ranking.info["matching"]["mode"],
        "ab_p": {r.metric: r.p_value for r in ab.itertuples()},
        "table": {
            metric: {
                run: [float(rows.loc[(metric, run), "mean"]), rows.loc[(metric, run), "letters"]]
                for run in ranking.info["order"]
            }
            for metric in RANKING_METRICS
        },
    }


WORKERS = {
    "exact": worker_exact,
    "fallback": worker_fallback,
    "report": worker_report,
    "tests": worker_tests,
    "ranx": worker_ranx,
    "scipy": worker_scipy,
    "ranking": worker_ranking,
}


# ------------------------------------------------------------------------------------------ driver


def _run_worker(name: str, n: int, data: Path, args: argparse.Namespace) -> dict:
    command = [
        sys.executable,
        __file__,
        "--worker",
        name,
        "--data",
        str(data),
        "--queries",
        str(n),
        "--resamples",
        str(args.resamples),
        "--ranx-max-queries",
        str(args.ranx_max_queries),
        "--scipy-max-queries",
        str(args.scipy_max_queries),
        "--hits",
        str(args.hits),
        "--seed",
        str(args.seed),
    ]
    if args.profile:
        command += ["--profile", args.profile]
    if getattr(args, "with_ranking_runs", False):
        command.append("--with-ranking-runs")
    load = os.getloadavg()[0]
    proc = subprocess.run(
        command,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    if proc.returncode:
        raise SystemExit(f"{name} failed:\n{proc.stderr}")
    if args.profile == name:
        print(f"--- cProfile of {name} ---\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1]) | {"load1": load}


def _check(label: str, passed: bool) -> bool:
    print(f"  {'PASS' if passed else 'FAIL'}  {label}")
    return passed


def _fmt(x: float | None, spec: str = ".4g") -> str:
    return "—" if x is None or (isinstance(x, float) and np.isnan(x)) else format(x, spec)


WHAT = {
    "exact": "compare_runs(a, b): stored scores, {tested} paired tests of {metrics} metrics, verdicts, md",
    "fallback": "compare_runs(a, b2): {mode}, re-scoring both runs + the above",
    "report": "report_files: md {md} + html {html} + json {json} bytes",
    "tests": "ours paired_test on mrr + ndcg@10 (the 5 ranx metrics: {five:.2f} s)",
    "ranx": "ranx.compare: evaluate 2 runs ({evaluate_s:.2f} s) + {stat_test} × 5 metrics × 2 directions",
    "scipy": "scipy permutation_test + bootstrap on mrr + ndcg@10{est}",
    "ranking": "rank_runs(a, b, c, d, e) ({mode}): {tests} paired tests, Holm, letters, CIs; "
    "files {files_s:.2f} s",
}


def _what(case: str, r: dict) -> str:
    if case == "report":
        kb = {k.split(".")[1]: f"{v:,}" for k, v in r["bytes"].items()}
        return WHAT[case].format(**kb)
    est = " (permutation_test time extrapolated, see below)" if r.get("estimated") else ""
    return WHAT[case].format(**r, five=r.get("five_s", 0.0), est=est)


def run_size(n: int, args: argparse.Namespace) -> tuple[bool, dict]:
    """Generate (or reuse) one size, run every case, print its tables; False when a check fails."""
    tmp = None
    if args.data is None:
        tmp = tempfile.TemporaryDirectory(prefix="bench_compare_")
        data = Path(tmp.name)
    else:
        data = args.data / f"q{n}_h{args.hits}_s{args.seed}"
    cases = [args.profile] if args.profile else [c for c in CASES if c not in args.skip]
    args.with_ranking_runs = "ranking" in cases
    extra_missing = args.with_ranking_runs and not (data / "store" / "run_metrics" / "e").exists()
    if not (data / "unrounded.parquet").exists() or extra_missing:
        shutil.rmtree(data / "store", ignore_errors=True)
        data.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        gen = _run_worker("generate", n, data, args)
        print(
            f"generated golden set ({n:,} queries, {gen['supports']:,} supports) and runs a, b, b2"
            f"{', c, d, e' if args.with_ranking_runs else ''} "
            f"({n:,} × {args.hits} hits each; b moves the gold for {gen['moved']:,} queries) "
            f"in {time.perf_counter() - t0:.0f} s (peak {gen['peak_mib']:,.0f} MiB), not timed"
        )

    results: dict[str, dict] = {}
    for case in cases:
        results[case] = _run_worker(case, n, data, args)

    print(f"\n{n:,} queries × {args.hits} hits, {args.resamples:,} resamples")
    print(
        f"{'case':<9} {'N':>8} {'load s':>7} {'compute s':>10} {'peak MiB':>9} {'case MiB':>9} "
        f"{'load1':>5}  what"
    )
    for case, r in results.items():
        print(
            f"{case:<9} {n:>8,} {r['load_s']:>7.2f} {r['compute_s']:>10.2f} {r['peak_mib']:>9,.0f} "
            f"{r['case_mib']:>9,.0f} {r['load1']:>5.2f}  {_what(case, r)}"
        )
    if "ranx" in results:
        r = results["ranx"]
        probe = r["probe_p"]
        print(
            f"ranx: read {r['read_s']:.2f} s; load = building Qrels/Runs (dicts + from_dict); warm-up "
            f"(untimed) {r['warmup_s']:.1f} s; stat_test {r['stat_test']}"
            + (
                f" (Fisher's test is O(R·N) in numba, ~1 min per test at 100k: above "
                f"--ranx-max-queries {args.ranx_max_queries:,} compare runs the paired t-test, and one "
                f"Fisher test is timed on R/{EXTRAPOLATE} permutations and scaled)"
                if r["stat_test"] != "fisher"
                else ""
            )
        )
        print(
            "ranx: fisher_randomization_test(random_seed=0) repeated 4× on the same 5,000 pairs gave "
            f"p = {', '.join(f'{p:.4f}' for p in probe)}"
            + (" — not reproducible (numba seeds only one thread)" if len(set(probe)) > 1 else "")
        )

    ok = True
    print("\nratios (> 1: ours is faster)")
    exact, fallback = results.get("exact"), results.get("fallback")
    tests, ranx_r, scipy_r = results.get("tests"), results.get("ranx"), results.get("scipy")
    if ranx_r and fallback:
        print(
            f"  ranx compare / ours fallback compare: {ranx_r['compute_s'] / fallback['compute_s']:.1f}x "
            f"(ranx: evaluate + {ranx_r['stat_test']} on 5 @10 metrics; ours: re-score both runs on "
            f"every metric at k = 1, 3, 5, 10 + {fallback['tested']} tests + verdicts + md)"
        )
        total = ranx_r["load_s"] + ranx_r["compute_s"]
        print(
            f"  ranx build + compare / ours load + fallback compare: "
            f"{total / (fallback['load_s'] + fallback['compute_s']):.1f}x"
        )
    if ranx_r and exact:
        print(
            f"  ranx compare / ours exact compare: {ranx_r['compute_s'] / exact['compute_s']:.1f}x "
            "(ours reads stored scores: no evaluation)"
        )
    if ranx_r and tests:
        tests_s = ranx_r["compute_s"] - ranx_r["evaluate_s"]
        if ranx_r["stat_test"] == "fisher":
            print(
                f"  ranx tests in compare (compare − evaluate, 10 Fisher tests) / ours "
                f"compare_query_scores on the 5 metrics: {tests_s / tests['five_s']:.1f}x "
                f"({tests_s:.2f} s vs {tests['five_s']:.2f} s)"
            )
        else:
            print(
                f"  (ranx's paired t-tests are closed-form: compare − evaluate = {tests_s:.2f} s, "
                f"vs ours' randomization tests + bootstrap CIs on the 5 metrics {tests['five_s']:.2f} s)"
            )
        for column in TEST_COLUMNS:
            r, o_s = ranx_r["columns"][column], tests["columns"][column]["seconds"]
            est = f" est. from R/{EXTRAPOLATE}" if r["estimated"] else ""
            print(
                f"  ranx one Fisher test / ours paired_test (test + bootstrap CI), {column}: "
                f"{r['seconds'] / o_s:.0f}x ({r['seconds']:.2f} s{est} vs {o_s:.3f} s)"
            )
    if scipy_r and tests:
        for column in TEST_COLUMNS:
            s, o = scipy_r["columns"][column], tests["columns"][column]
            est = f" est. from R/{EXTRAPOLATE}" if s["perm_estimated"] else ""
            print(
                f"  scipy permutation_test + bootstrap / ours paired_test, {column}: "
                f"{s['seconds'] / o['seconds']:.0f}x ({s['perm_s']:.2f} s{est} + {s['boot_s']:.2f} s vs "
                f"{o['seconds']:.3f} s; scipy batch {s['batch']})"
            )

    if "ranking" in results:
        table = results["ranking"]["table"]
        print("\nranking (mean and letters; runs sharing a letter are not significantly different)")
        for metric, rows in table.items():
            print(
                f"  {metric:<8} "
                + "  ".join(f"{run} {mean:.4f} {letters}" for run, (mean, letters) in rows.items())
            )

    print("\nagreement (Δ = mean of b − a; p two-sided; CI 95 % of Δ)")
    ok &= _agreement(data, results, args)
    if tmp is not None:
        tmp.cleanup()
    summary = {case: r["compute_s"] for case, r in results.items()}
    summary |= {f"{case}:mib": r["case_mib"] for case, r in results.items()}
    if "ranx" in results:
        summary["ranx:kind"] = f"ranx.compare with {results['ranx']['stat_test']}"
    if "scipy" in results:
        summary["scipy:kind"] = "permutation_test " + (
            "extrapolated" if results["scipy"]["estimated"] else "timed"
        )
    return ok, summary


def _agreement(data: Path, results: dict[str, dict], args: argparse.Namespace) -> bool:
    import pandas as pd

    ok = True
    exact, fallback, tests = results.get("exact"), results.get("fallback"), results.get("tests")
    ranx_r, scipy_r = results.get("ranx"), results.get("scipy")
    unrounded = pd.read_parquet(data / "unrounded.parquet")
    r = args.resamples

    def mc_se(kind: str, p: float | None) -> float | None:
        """Monte Carlo standard error of a p-value from R resamples (None: not Monte Carlo)."""
        if p is None or kind in ("student", "none"):
            return None
        if kind == "doubled":  # scipy: 2 × the smaller one-sided share
            q = min(p / 2, 0.5)
            return 2 * float(np.sqrt(q * (1 - q) / r))
        return float(np.sqrt(p * (1 - p) / r))

    print(
        f"{'column':<8} {'source':<23} {'Δ':>12} {'p':>8} {'MC se':>7} {'|Δp| vs first':>13} "
        f"{'in se':>6} {'CI low':>9} {'CI high':>9}"
    )
    for column in TEST_COLUMNS:
        ours = tests["columns"][column] if tests else None
        rows = []
        if ours:
            rows.append(
                ("ours paired_test", "mc", ours["delta"], ours["p_value"], ours["ci_low"], ours["ci_high"])
            )
        if exact:
            e = exact["per_metric"][column]
            rows.append(
                ("ours compare (exact)", "mc", e["paired_delta"], e["p_value"], e["ci_low"], e["ci_high"])
            )
        if fallback:
            f = fallback["per_metric"][column]
            rows.append(
                ("ours compare (fallback)", "mc", f["paired_delta"], f["p_value"], f["ci_low"], f["ci_high"])
            )
        if scipy_r:
            s = scipy_r["columns"][column]
            rows.append(("scipy", "doubled", s["delta"], s["p_value"], s["ci_low"], s["ci_high"]))
        if ranx_r:
            delta = float(np.mean(unrounded[f"b:{column}"] - unrounded[f"a:{column}"]))
            test = ranx_r["stat_test"]
            p_ranx = ranx_r["columns"][column]["p_value"]
            rows.append((f"ranx ({test})", test, delta, p_ranx, None, None))
        kind0, p0 = (rows[0][1], rows[0][3]) if rows else ("none", None)
        se0 = mc_se(kind0, p0)
        for i, (source, kind, delta, p, low, high) in enumerate(rows):
            se = mc_se(kind, p)
            dp = abs(p - p0) if i and p0 is not None and p is not None else None
            within = dp / np.hypot(se0, se) if dp is not None and se0 and se else None
            print(
                f"{column:<8} {source:<23} {_fmt(delta, '.9f'):>12} {_fmt(p, '.4f'):>8} {_fmt(se, '.4f'):>7} "
                f"{_fmt(dp, '.4f'):>13} {_fmt(within, '.1f'):>6} {_fmt(low, '.5f'):>9} {_fmt(high, '.5f'):>9}"
            )
    print(
        "(ranx Δ: from ours' unrounded per-query values, which ranx's equal; the other rows test the "
        "stored 4-decimal scores. 'in se': |Δp| over the Monte Carlo se of the difference)"
    )

    if tests and scipy_r:
        worst = max(abs(tests["columns"][c]["delta"] - scipy_r["columns"][c]["delta"]) for c in TEST_COLUMNS)
        ok &= _check(
            f"scipy Δ = ours paired_test Δ (max |diff| {worst:.1e} ≤ {TOLERANCE:g})", worst <= TOLERANCE
        )
    if tests and exact:
        worst = max(
            abs(round(tests["columns"][c]["delta"], 4) - exact["per_metric"][c]["paired_delta"])
            for c in TEST_COLUMNS
        )
        same_p = all(
            tests["columns"][c]["p_value"] == exact["per_metric"][c]["p_value"] for c in TEST_COLUMNS
        )
        ok &= _check(
            f"compare_runs paired_delta = paired_test Δ rounded to 4 (max |diff| {worst:.1e})",
            worst <= TOLERANCE,
        )
        ok &= _check("compare_runs p = paired_test p (same seed: identical)", same_p)
    if ranx_r:
        ranx_q = pd.read_parquet(data / "result_ranx.parquet").set_index("query_id")
        ours_q = unrounded.set_index("query_id")
        ranx_q = ranx_q.loc[ours_q.index]
        worst_q = max(
            float(np.max(np.abs(ranx_q[f"{r}:{c}"].to_numpy() - ours_q[f"{r}:{c}"].to_numpy())))
            for r in (RUN_A, RUN_B)
            for c in RANX_METRICS.values()
        )
        ok &= _check(
            f"ranx per-query values = ours unrounded, 5 metrics × 2 runs (max |diff| {worst_q:.1e})",
            worst_q <= TOLERANCE,
        )
        worst_d = max(
            abs(
                float(np.mean(ranx_q[f"b:{c}"] - ranx_q[f"a:{c}"]))
                - float(np.mean(ours_q[f"b:{c}"] - ours_q[f"a:{c}"]))
            )
            for c in RANX_METRICS.values()
        )
        ok &= _check(f"ranx Δ = ours unrounded Δ, 5 metrics (max |diff| {worst_d:.1e})", worst_d <= TOLERANCE)
        if exact:
            worst_a = max(
                abs(float(np.mean(ranx_q[f"{r}:{c}"])) - exact["per_metric"][c][r])
                for r in "ab"
                for c in RANX_METRICS.values()
            )
            ok &= _check(
                f"ranx means = ours stored aggregates to 4 decimals (max |diff| {worst_a:.1e} ≤ 5e-5)",
                worst_a <= 5e-5 + TOLERANCE,
            )
    ranking = results.get("ranking")
    if ranking and exact:
        differ = [m for m in RANKING_METRICS if ranking["ab_p"][m] != exact["per_metric"][m]["p_value"]]
        ok &= _check(
            "ranking's (a, b) p-values = compare_runs(a, b)'s, "
            + ", ".join(RANKING_METRICS)
            + (f" (differ: {', '.join(differ)})" if differ else ""),
            not differ,
        )
    if exact and fallback:
        print(f"fallback mode: {fallback['mode']}")
        worst, p_diff = 0.0, []
        for metric, e in exact["per_metric"].items():
            f = fallback["per_metric"].get(metric)
            if f is None or e["test"] is None:
                continue
            other = np.inf if f["paired_delta"] is None else f["paired_delta"]
            worst = max(worst, abs(e["paired_delta"] - other))
            if e["p_value"] != f["p_value"]:
                p_diff.append(metric)
        ok &= _check(
            f"fallback_span re-scoring reproduces the exact deltas (by construction; max |diff| {worst:.1e})",
            worst <= TOLERANCE,
        )
        ok &= _check(
            "… and the same p-values" + (f" (differ: {', '.join(p_diff)})" if p_diff else ""), not p_diff
        )
    return ok


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, action="append", help=f"size to run (repeatable; default {SIZES})")
    ap.add_argument("--hits", type=int, default=100)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--resamples", type=int, default=10_000, help="resamples of every paired test")
    ap.add_argument("--skip", action="append", default=[], choices=CASES)
    ap.add_argument(
        "--ranx-max-queries",
        type=int,
        default=10_000,
        help="above this many queries ranx runs a paired t-test, not Fisher's (0: no cap)",
    )
    ap.add_argument(
        "--scipy-max-queries",
        type=int,
        default=10_000,
        help="above this many queries scipy's permutation_test is timed on R/50 resamples and "
        "scaled, without a p-value (0: no cap)",
    )
    ap.add_argument("--data", type=Path, help="keep/reuse generated runs under this directory")
    ap.add_argument("--profile", choices=CASES, help="run only this case, under cProfile (stderr shown)")
    ap.add_argument("--worker", choices=(*CASES, "generate"), help=argparse.SUPPRESS)
    ap.add_argument("--with-ranking-runs", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.worker == "generate":
        args.data.mkdir(parents=True, exist_ok=True)
        result = generate(args.data, args.queries[0], args.hits, args.seed, ranking=args.with_ranking_runs)
        print(json.dumps(result | {"peak_mib": _peak_mib()}))
        return
    if args.worker:
        print(json.dumps(WORKERS[args.worker](args.data, args)))
        return
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    ok = True
    summaries = {}
    for n in args.queries or SIZES:
        size_ok, summaries[n] = run_size(n, args)
        ok &= size_ok
    if len(summaries) > 1:
        sizes = sorted(summaries)
        lo, hi = sizes[0], sizes[-1]
        print(f"\nscaling {lo:,} → {hi:,} queries (×{hi / lo:g}):")
        for case in CASES:
            if case in summaries[lo] and case in summaries[hi]:
                if (
                    case in ("ranx", "scipy")
                    and summaries[lo][case + ":kind"] != summaries[hi][case + ":kind"]
                ):
                    kinds = f"{summaries[lo][case + ':kind']} → {summaries[hi][case + ':kind']}"
                    print(f"  {case:<9} not comparable: {kinds}")
                    continue
                mib_lo, mib_hi = summaries[lo][case + ":mib"], summaries[hi][case + ":mib"]
                print(
                    f"  {case:<9} time ×{summaries[hi][case] / summaries[lo][case]:.1f}, "
                    f"case memory {mib_lo:,.0f} → {mib_hi:,.0f} MiB"
                )
    if not ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
