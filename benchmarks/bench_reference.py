"""Benchmark: the built-in reference RAG system on a real corpus — build, query, ask, load.

    python benchmarks/bench_reference.py                          # kebab-docs, 1000 queries
    python benchmarks/bench_reference.py --queries 300 --skip-vectors
    python benchmarks/bench_reference.py --corpus path/to/docs --rounds 5 --profile
    python benchmarks/bench_reference.py --vector-queries 1000      # vector/hybrid on every query

Measures ``ReferenceIndex`` (kebab_eval_pipeline/reference) on ``--corpus`` (default:
``shared/corpora/kebab-docs`` beside the repository; exit 2 when it is missing). Every stage
runs in a fresh subprocess, so that its peak RSS (``resource.getrusage(RUSAGE_SELF).ru_maxrss``
in the child, cross-checked with ``VmHWM``; helpers from bench_golden.py) is the stage's own.
Children import the reference modules without running the package ``__init__``s (at commit
fe2e403 those import Dagster and the adapter; neither is measured here), as bench_metrics.py
and bench_golden.py do:

1. index build, lexical only (``chunk_size=800, chunk_overlap=0``): median wall seconds over
   ``--rounds`` children, with docs, chunks and tokens per chunk from the manifest;
2. index build with vectors (one child, all cores, as ``kebab-eval ref index --with-vectors``
   runs): the model load (``get_embedder()``, mostly the torch / sentence-transformers import)
   apart from the embedding time (``Embedder.encode`` wrapped with a timer) and chunks/s embedded;
3. query workload: ``--queries`` queries sampled (fixed seed) from the corpus's own chunks —
   sentences (long ones cut to a window of words), heading texts and a few Korean queries (from
   Korean sentences and a hand-written list). One query at a time, as the pipeline calls
   ``search``, in children pinned to one CPU with ``OMP_NUM_THREADS=1`` (and
   ``torch.set_num_threads(1)``): lexical ``search`` (target ≥ 1,000 q/s, PASS/MISS), ``ask``
   (lexical search + extractive answer), vector and hybrid ``search`` (on the first
   ``--vector-queries``, default 200: each costs ~50 lexical queries); q/s, p50/p95 latency.
   The lexical child also splits one lexical search into its steps (tokenize, vocabulary
   filter, bm25s ``get_scores``, sort, ``Hit`` construction) and, on a MISS or with
   ``--profile``, prints cProfile's top functions for the lexical loop;
4. index load from disk (``ReferenceIndex.load``), lexical and with vectors (median of rounds;
   the model is not loaded by ``load`` — see stage 2 for its cost);
5. one summary table and the cost ratios (vector/lexical, hybrid/lexical, ...).

Warm-up queries (the first 20) run before each timed loop. Not a test: timings depend on the
machine.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

from bench_golden import _hwm_mib, _rss_mib

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = ROOT.parent / "shared/corpora/kebab-docs"
TARGET_QPS = 1_000.0
K = 10
WARMUP = 20
WORKERS = ("build-lexical", "build-vectors", "query-lexical", "query-vector", "load")
# One thread everywhere in the query children: numpy (bm25s), BLAS and torch.
SINGLE_THREAD_ENV = {
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "NUMBA_NUM_THREADS": "1",
    "TOKENIZERS_PARALLELISM": "false",
}
KO_QUERIES = (
    "하이브리드 검색은 점수를 어떻게 합치나요?",
    "청크 크기와 겹침 설정",
    "임베딩 모델은 무엇을 쓰나요",
    "음성 파일 화자 분리",
    "PDF 파싱이 실패하면 어떻게 되나요",
    "색인 캐시는 어디에 저장되나요",
    "평가 지표는 무엇인가요",
    "로컬 LLM 답변의 인용 형식",
)


# ------------------------------------------------------------------------------------------ queries

_HANGUL = re.compile("[\uac00-\ud7a3]")
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def _clean(line: str) -> str:
    line = _LINK.sub(r"\1", line)
    line = re.sub(r"^\s*(?:#+|[-*+>]|\d+[.)])\s*", "", line)
    return re.sub(r"[`*]+", "", line).strip()


def make_queries(chunks_file: Path, n: int, seed: int) -> tuple[list[str], dict[str, int]]:
    """``n`` queries sampled from the chunks of a saved index: ~75 % sentences, ~20 % headings,
    ~5 % Korean (at least 5). Standard library only: the parent process stays small."""
    rng = random.Random(seed)
    sentences: list[str] = []
    korean: list[str] = []
    headings: set[str] = set()
    with chunks_file.open(encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            headings.update(h.strip() for h in row["heading_path"] if len(h.split()) >= 2)
            in_code = False
            for raw in row["text"].splitlines():
                if raw.lstrip().startswith("```"):
                    in_code = not in_code
                    continue
                if in_code or raw.lstrip().startswith("|") or raw.startswith("---"):
                    continue
                for sentence in _SENTENCE_END.split(_clean(raw)):
                    words = sentence.split()
                    if len(words) < 3 or len(sentence) < 15:
                        continue
                    (korean if len(_HANGUL.findall(sentence)) >= 4 else sentences).append(sentence)
    n_ko = min(n, max(5, round(n * 0.05)))
    n_head = min(n - n_ko, round(n * 0.20))
    n_sent = n - n_ko - n_head

    def sample(pool: list[str], count: int) -> list[str]:
        pool = sorted(set(pool))
        return rng.sample(pool, count) if count <= len(pool) else rng.choices(pool, k=count)

    def window(sentence: str) -> str:
        words = sentence.split()
        if len(words) <= 16:
            return sentence
        size = rng.randint(6, 14)
        start = rng.randrange(len(words) - size + 1)
        return " ".join(words[start : start + size])

    ko = [KO_QUERIES[i % len(KO_QUERIES)] for i in range(min(len(KO_QUERIES), n_ko // 2))]
    ko += [window(s) for s in sample(korean or list(KO_QUERIES), n_ko - len(ko))]
    queries = [window(s) for s in sample(sentences, n_sent)] + sample(sorted(headings), n_head) + ko
    rng.shuffle(queries)
    return queries, {"sentences": n_sent, "headings": n_head, "korean": n_ko}


# ------------------------------------------------------------------------------------------ workers


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _memory(import_rss: float) -> dict:
    return {"import_rss_mib": import_rss, "peak_mib": _peak_mib(), "hwm_mib": _hwm_mib()}


def _import_reference():
    """``ReferenceIndex`` without running ``kebab_eval_pipeline/__init__`` or the reference package's
    ``__init__`` (Dagster and the adapter are not part of what is measured)."""
    pkg = types.ModuleType("kebab_eval_pipeline")
    pkg.__path__ = [str(ROOT / "kebab_eval_pipeline")]
    sys.modules.setdefault(pkg.__name__, pkg)
    ref = types.ModuleType("kebab_eval_pipeline.reference")
    ref.__path__ = [str(ROOT / "kebab_eval_pipeline/reference")]
    sys.modules.setdefault(ref.__name__, ref)
    from kebab_eval_pipeline.reference.index import ReferenceIndex

    return ReferenceIndex


def _one_cpu() -> int:
    cpu = min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    return cpu


def _latency_stats(lat, wall: float) -> dict:
    import numpy as np

    return {
        "n": len(lat),
        "wall_s": wall,
        "qps": len(lat) / wall,
        "mean_ms": float(lat.mean() * 1e3),
        "p50_ms": float(np.percentile(lat, 50) * 1e3),
        "p95_ms": float(np.percentile(lat, 95) * 1e3),
    }


def _timed_loop(fn, queries: list[str], subset: int | None = None) -> tuple[dict, list]:
    """Run ``fn`` on each query (after ``WARMUP`` untimed calls); latency stats and the results.
    With ``subset``, ``stats["subset"]`` holds the stats of the first ``subset`` queries."""
    import numpy as np

    for q in queries[:WARMUP]:
        fn(q)
    lat = np.empty(len(queries))
    out = []
    started = time.perf_counter()
    for i, q in enumerate(queries):
        t = time.perf_counter()
        out.append(fn(q))
        lat[i] = time.perf_counter() - t
    stats = _latency_stats(lat, time.perf_counter() - started)
    if subset is not None:
        stats["subset"] = _latency_stats(lat[:subset], float(lat[:subset].sum()))
    return stats, out


def worker_build_lexical(args: argparse.Namespace) -> dict:
    t0 = time.perf_counter()
    reference_index = _import_reference()
    import_s = time.perf_counter() - t0
    import_rss = _rss_mib()
    t0 = time.perf_counter()
    index = reference_index.build(args.corpus, chunk_size=800, chunk_overlap=0)
    build_s = time.perf_counter() - t0
    save_s = None
    if args.save:
        t0 = time.perf_counter()
        index.save(args.work / "lexical")
        save_s = time.perf_counter() - t0
    m = index.manifest
    return {
        "import_s": import_s,
        "build_s": build_s,
        "save_s": save_s,
        "n_docs": m["n_docs"],
        "n_chunks": m["n_chunks"],
        "vocab": len(index.lexical._vocab),
        "stats": {k: v for k, v in m["stats"].items() if k.startswith("tokens_")},
        "index_version": m["index_version"],
        **_memory(import_rss),
    }


def worker_build_vectors(args: argparse.Namespace) -> dict:
    reference_index = _import_reference()
    from kebab_eval_pipeline.reference.vectors import get_embedder

    import_rss = _rss_mib()
    t0 = time.perf_counter()
    embedder = get_embedder()  # imports torch + sentence-transformers, reads the weights
    model_s = time.perf_counter() - t0
    model_rss = _rss_mib()
    import torch

    spent = {"s": 0.0, "texts": 0, "calls": 0}
    encode = embedder.encode

    def timed_encode(texts: list[str]):
        t = time.perf_counter()
        out = encode(texts)
        spent["s"] += time.perf_counter() - t
        spent["texts"] += len(texts)
        spent["calls"] += 1
        return out

    embedder.encode = timed_encode  # instance attribute: VectorIndex.build calls embedder.encode
    t0 = time.perf_counter()
    index = reference_index.build(args.corpus, chunk_size=800, chunk_overlap=0, with_vectors=True)
    build_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    index.save(args.work / "vectors")
    save_s = time.perf_counter() - t0
    return {
        "model_s": model_s,
        "model_rss_mib": model_rss,
        "torch_threads": torch.get_num_threads(),
        "build_s": build_s,  # without the model load (get_embedder() is cached by then)
        "embed_s": spent["s"],
        "embedded": spent["texts"],
        "encode_calls": spent["calls"],
        "save_s": save_s,
        "n_chunks": index.manifest["n_chunks"],
        "embedding_version": index.manifest["embedding_version"],
        **_memory(import_rss),
    }


def _lexical_anatomy(index, queries: list[str]) -> dict:
    """Mean microseconds per query for each step of ``ReferenceIndex.search(mode="lexical")``,
    re-enacted from its parts (private attributes; kept in step with index.py/lexical.py)."""
    import numpy as np

    from kebab_eval_pipeline.reference.tokenize import tokenize

    lex = index.lexical
    steps = dict.fromkeys(("tokenize", "vocab filter", "BM25 scores", "sort + top-k", "hit columns"), 0)
    clock = time.perf_counter_ns
    for q in queries:
        t0 = clock()
        tokens = tokenize(q)
        t1 = clock()
        known = [t for t in tokens if t in lex._vocab]
        t2 = clock()
        if not known:
            steps["tokenize"] += t1 - t0
            steps["vocab filter"] += t2 - t1
            continue
        scores = lex.scores(known).astype(np.float64)
        t3 = clock()
        order = np.lexsort((np.arange(scores.size), -scores))
        top = [(int(i), float(scores[i])) for i in order[:K] if scores[i] > 0]
        t4 = clock()
        index._block(
            "bm25", [(i, s, {"lexical_score": s, "lexical_rank": r}) for r, (i, s) in enumerate(top, 1)]
        )
        t5 = clock()
        for name, dt in zip(steps, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4), strict=True):
            steps[name] += dt
    return {name: ns / len(queries) / 1e3 for name, ns in steps.items()}


def _profile(fn, queries: list[str], top: int = 15) -> str:
    import cProfile
    import io
    import pstats

    prof = cProfile.Profile()
    prof.enable()
    for q in queries:
        fn(q)
    prof.disable()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(top)
    lines = [ln for ln in buf.getvalue().splitlines() if ln.strip()]
    start = next((i for i, ln in enumerate(lines) if "function calls" in ln), 0)
    return "\n".join(lines[start:])


def worker_query_lexical(args: argparse.Namespace) -> dict:
    cpu = _one_cpu()
    reference_index = _import_reference()
    import_rss = _rss_mib()
    index = reference_index.load(args.work / "lexical")
    queries = json.loads((args.work / "queries.json").read_text(encoding="utf-8"))
    search, hits = _timed_loop(lambda q: index.search(q, k=K, mode="lexical"), queries, args.vector_queries)
    ask, answers = _timed_loop(lambda q: index.ask(q, index.search(q, k=K, mode="lexical")), queries)
    result = {
        "cpu": cpu,
        "lexical": search,
        "ask": ask,
        "with_hits": sum(1 for h in hits if h),
        "mean_hits": sum(len(h) for h in hits) / len(hits),
        "answered": sum(1 for a in answers if not a.refused),
        "anatomy_us": _lexical_anatomy(index, queries),
        "import_sys_modules_dagster": "dagster" in sys.modules,
        "torch_imported": "torch" in sys.modules,
    }
    if args.profile or search["qps"] < TARGET_QPS:
        result["profile"] = _profile(lambda q: index.search(q, k=K, mode="lexical"), queries)
    return {**result, **_memory(import_rss)}


def worker_query_vector(args: argparse.Namespace) -> dict:
    cpu = _one_cpu()
    reference_index = _import_reference()
    from kebab_eval_pipeline.reference.vectors import get_embedder

    import_rss = _rss_mib()
    index = reference_index.load(args.work / "vectors")
    t0 = time.perf_counter()
    embedder = get_embedder()
    model_s = time.perf_counter() - t0
    import torch

    torch.set_num_threads(1)
    queries = json.loads((args.work / "queries.json").read_text(encoding="utf-8"))
    queries = queries[: args.vector_queries]  # ~50x the cost of a lexical query each
    encode, _ = _timed_loop(lambda q: embedder.encode([q]), queries)
    vector, _ = _timed_loop(lambda q: index.search(q, k=K, mode="vector"), queries)
    hybrid, _ = _timed_loop(lambda q: index.search(q, k=K, mode="hybrid"), queries)
    return {
        "cpu": cpu,
        "model_s": model_s,
        "torch_threads": torch.get_num_threads(),
        "encode": encode,
        "vector": vector,
        "hybrid": hybrid,
        **_memory(import_rss),
    }


def worker_load(args: argparse.Namespace) -> dict:
    reference_index = _import_reference()
    import_rss = _rss_mib()
    t0 = time.perf_counter()
    index = reference_index.load(args.work / args.kind)
    load_s = time.perf_counter() - t0
    return {
        "load_s": load_s,
        "n_chunks": len(index.chunks),
        "has_vectors": index.has_vectors,
        "torch_imported": "torch" in sys.modules,
        **_memory(import_rss),
    }


WORKER_FUNCS = {
    "build-lexical": worker_build_lexical,
    "build-vectors": worker_build_vectors,
    "query-lexical": worker_query_lexical,
    "query-vector": worker_query_vector,
    "load": worker_load,
}


# ------------------------------------------------------------------------------------------ driver


def _child(*argv: str, single_thread: bool = False) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if single_thread:
        env.update(SINGLE_THREAD_ENV)
    proc = subprocess.run(
        [sys.executable, __file__, *argv], capture_output=True, text=True, env=env, check=False
    )
    if proc.returncode:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _fmt_stats(s: dict) -> str:
    return f"{s['qps']:>8,.0f} q/s   p50 {s['p50_ms']:7.3f} ms   p95 {s['p95_ms']:7.3f} ms"


def main() -> None:
    started = time.perf_counter()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    ap.add_argument("--queries", type=int, default=1000, help="queries in the workload")
    ap.add_argument(
        "--vector-queries",
        type=int,
        default=200,
        help="first N of the queries for vector/hybrid (default 200)",
    )
    ap.add_argument("--rounds", type=int, default=3, help="fresh children for lexical build and loads")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--skip-vectors", action="store_true", help="lexical only (no model, no torch)")
    ap.add_argument("--profile", action="store_true", help="cProfile the lexical loop even on PASS")
    ap.add_argument("--worker", choices=WORKERS, help=argparse.SUPPRESS)
    ap.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--save", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--kind", choices=("lexical", "vectors"), help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.worker:
        print(json.dumps(WORKER_FUNCS[args.worker](args)))
        return
    corpus = args.corpus.resolve()
    if not corpus.is_dir():
        print(
            f"error: corpus folder not found: {corpus}\n"
            "  pass --corpus DIR (a folder of Markdown files), or put the kebab-docs corpus at "
            f"{DEFAULT_CORPUS}",
            file=sys.stderr,
        )
        raise SystemExit(2)
    if min(args.queries, args.rounds, args.vector_queries) < 1:
        ap.error("--queries, --vector-queries and --rounds must be >= 1")
    args.vector_queries = min(args.vector_queries, args.queries)

    with tempfile.TemporaryDirectory(prefix="bench_reference_") as tmp:
        work = Path(tmp)
        common = ("--corpus", str(corpus), "--work", str(work), "--vector-queries", str(args.vector_queries))
        load_before = os.getloadavg()[0]
        print(
            f"corpus {corpus}; python {sys.version.split()[0]}; {os.cpu_count()} CPUs; "
            f"load average {load_before:.2f}",
            flush=True,
        )

        # 1. lexical build
        builds = [
            _child("--worker", "build-lexical", *common, *(["--save"] if r == 0 else []))
            for r in range(args.rounds)
        ]
        b = builds[0]
        lex_build_s = statistics.median(r["build_s"] for r in builds)
        lex_build_peak = max(r["peak_mib"] for r in builds)
        st = b["stats"]
        print(
            f"[1] lexical build: {lex_build_s:.3f} s median of {args.rounds} "
            f"({', '.join(format(r['build_s'], '.3f') for r in builds)}); save {b['save_s']:.3f} s; "
            f"import {statistics.median(r['import_s'] for r in builds):.2f} s\n"
            f"    {b['n_docs']} docs, {b['n_chunks']:,} chunks, vocabulary {b['vocab']:,} tokens; "
            f"tokens/chunk min {st['tokens_min']} mean {st['tokens_mean']:.1f} p95 {st['tokens_p95']:.0f} "
            f"max {st['tokens_max']}; index_version {b['index_version']}\n"
            f"    RSS after import {b['import_rss_mib']:.0f} MiB, peak {lex_build_peak:.0f} MiB",
            flush=True,
        )

        # 2. build with vectors
        vb = None
        if not args.skip_vectors:
            vb = _child("--worker", "build-vectors", *common)
            rest = vb["build_s"] - vb["embed_s"]
            print(
                f"[2] build with vectors: model load {vb['model_s']:.2f} s + build {vb['build_s']:.2f} s "
                f"(embedding {vb['embed_s']:.2f} s, rest {rest:.2f} s); save {vb['save_s']:.3f} s\n"
                f"    {vb['embedded']:,} chunks embedded at {vb['embedded'] / vb['embed_s']:.1f} chunks/s "
                f"({vb['torch_threads']} torch threads); RSS after import {vb['import_rss_mib']:.0f} MiB, "
                f"after model load {vb['model_rss_mib']:.0f} MiB, peak {vb['peak_mib']:.0f} MiB",
                flush=True,
            )

        # 3. query workload
        queries, mix = make_queries(work / "lexical/chunks.jsonl", args.queries, args.seed)
        (work / "queries.json").write_text(json.dumps(queries, ensure_ascii=False), encoding="utf-8")
        words = statistics.mean(len(q.split()) for q in queries)
        print(
            f"[3] {len(queries):,} queries (seed {args.seed}): {mix['sentences']} sentences, "
            f"{mix['headings']} headings, {mix['korean']} Korean; {words:.1f} words on average\n"
            f"    e.g. {queries[:3]}",
            flush=True,
        )
        ql = _child(
            "--worker", "query-lexical", *common, *(["--profile"] if args.profile else []), single_thread=True
        )
        lex, ask = ql["lexical"], ql["ask"]
        verdict = "PASS" if lex["qps"] >= TARGET_QPS else "MISS"
        print(
            f"    one thread, pinned to CPU {ql['cpu']}; {ql['with_hits']:,}/{len(queries):,} queries with "
            f"≥ 1 lexical hit (mean {ql['mean_hits']:.1f}); {ql['answered']:,} answered, "
            f"{len(queries) - ql['answered']:,} refused by the gate\n"
            f"    lexical {_fmt_stats(lex)}   target ≥ {TARGET_QPS:,.0f} q/s: {verdict}\n"
            f"    ask     {_fmt_stats(ask)}   (lexical search + extractive answer)",
            flush=True,
        )
        anatomy = ql["anatomy_us"]
        total_us = sum(anatomy.values())
        print(f"    one lexical search, step by step ({total_us:.0f} µs/query re-enacted):")
        for name, us in anatomy.items():
            print(f"      {name:<18} {us:8.1f} µs  {us / total_us:6.1%}")
        if "profile" in ql:
            print("    cProfile of the lexical loop (top by own time):")
            print("\n".join(f"      {ln}" for ln in ql["profile"].splitlines()))
        qv = None
        if vb is not None:
            qv = _child("--worker", "query-vector", *common, single_thread=True)
            print(
                f"    vector child: model load {qv['model_s']:.2f} s ({qv['torch_threads']} torch thread); "
                f"first {qv['vector']['n']:,} queries\n"
                f"    encode  {_fmt_stats(qv['encode'])}   (embedder.encode([query]) alone)\n"
                f"    vector  {_fmt_stats(qv['vector'])}\n"
                f"    hybrid  {_fmt_stats(qv['hybrid'])}",
                flush=True,
            )

        # 4. load from disk
        kinds = ["lexical"] + ([] if vb is None else ["vectors"])
        loads = {
            kind: [_child("--worker", "load", *common, "--kind", kind) for _ in range(args.rounds)]
            for kind in kinds
        }
        load = {
            kind: {
                "load_s": statistics.median(r["load_s"] for r in runs),
                "peak_mib": max(r["peak_mib"] for r in runs),
                "hwm_mib": max(r["hwm_mib"] for r in runs),
                "torch": any(r["torch_imported"] for r in runs),
            }
            for kind, runs in loads.items()
        }
        for kind, r in load.items():
            print(
                f"[4] load {kind:<8}: {r['load_s']:.3f} s median of {args.rounds}; "
                f"peak {r['peak_mib']:.0f} MiB"
                f"{'' if r['torch'] else ' (torch not imported)'}",
                flush=True,
            )

    # 5. summary
    n_chunks = b["n_chunks"]
    rows = [
        ("build, lexical", lex_build_s, f"{n_chunks / lex_build_s:,.0f} chunks/s", None, lex_build_peak),
    ]
    if vb is not None:
        rows += [
            (
                "build, with vectors",
                vb["model_s"] + vb["build_s"],
                f"{vb['embedded'] / vb['embed_s']:.1f} chunks/s embedded",
                None,
                vb["peak_mib"],
            ),
            ("  of which model load", vb["model_s"], "", None, None),
            ("  of which embedding", vb["embed_s"], f"{vb['encode_calls']} encode call(s)", None, None),
        ]
    rows += [
        ("query, lexical", lex["wall_s"], f"{lex['qps']:,.0f} q/s", lex, ql["peak_mib"]),
        ("ask (lexical + answer)", ask["wall_s"], f"{ask['qps']:,.0f} q/s", ask, ql["peak_mib"]),
    ]
    if qv is not None:
        rows += [
            (
                "query, vector",
                qv["vector"]["wall_s"],
                f"{qv['vector']['qps']:,.0f} q/s",
                qv["vector"],
                qv["peak_mib"],
            ),
            (
                "query, hybrid",
                qv["hybrid"]["wall_s"],
                f"{qv['hybrid']['qps']:,.0f} q/s",
                qv["hybrid"],
                qv["peak_mib"],
            ),
        ]
    for kind, r in load.items():
        rows.append((f"load, {kind}", r["load_s"], "", None, r["peak_mib"]))

    print(f"\nsummary — {b['n_docs']} docs, {n_chunks:,} chunks; queries one at a time, k={K}")
    header = f"{'stage':<24} {'seconds':>9} {'queries':>8} {'rate':<26} {'p50 ms':>8} {'p95 ms':>8} "
    header += f"{'peak RSS':>9}"
    print(header)
    print("-" * len(header))
    for name, secs, rate, lat, peak in rows:
        p50 = f"{lat['p50_ms']:.3f}" if lat else "-"
        p95 = f"{lat['p95_ms']:.3f}" if lat else "-"
        mem = f"{peak:.0f} MiB" if peak is not None else "-"
        n = f"{lat['n']:,}" if lat else "-"
        print(f"{name:<24} {secs:>9.3f} {n:>8} {rate:<26} {p50:>8} {p95:>8} {mem:>9}")
    print("(query/ask rows share their child's peak RSS; query children pinned to one CPU, one thread)")

    print("\nratios (mean seconds per query over the same queries):")
    print(f"  ask / lexical            {ask['mean_ms'] / lex['mean_ms']:8.1f}x")
    if qv is not None:
        v, h, sub = qv["vector"], qv["hybrid"], lex["subset"]
        print(
            f"  vector / lexical         {v['mean_ms'] / sub['mean_ms']:8.1f}x   (first {v['n']:,} queries)"
        )
        print(f"  hybrid / lexical         {h['mean_ms'] / sub['mean_ms']:8.1f}x")
        print(f"  hybrid / vector          {h['mean_ms'] / v['mean_ms']:8.2f}x")
        print(f"  query encode / vector    {qv['encode']['mean_ms'] / v['mean_ms']:8.1%} of a vector query")
        print(
            f"  build with vectors / lexical build  {(vb['model_s'] + vb['build_s']) / lex_build_s:8.1f}x "
            f"(without model load {vb['build_s'] / lex_build_s:.1f}x)"
        )
        print(
            "  load with vectors / lexical load    "
            f"{load['vectors']['load_s'] / load['lexical']['load_s']:8.2f}x"
        )
        print(
            f"  ready for vector queries from disk: load {load['vectors']['load_s']:.2f} s + model load "
            f"{qv['model_s']:.2f} s = {load['vectors']['load_s'] + qv['model_s']:.2f} s "
            f"(lexical: {load['lexical']['load_s']:.2f} s)"
        )
    print(f"\nlexical target ≥ {TARGET_QPS:,.0f} q/s on one core: {lex['qps']:,.0f} q/s → {verdict}")
    load_after = os.getloadavg()[0]
    print(
        f"wall time {time.perf_counter() - started:.1f} s; load average {load_before:.2f} → {load_after:.2f}"
    )
    if max(load_before, load_after) > 0.5 * (os.cpu_count() or 1):
        print("note: the machine was busy with other work during the run; timings are inflated by it")


if __name__ == "__main__":
    main()
