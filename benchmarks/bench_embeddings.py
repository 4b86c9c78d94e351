"""Benchmark: the reference system's embedding models side by side, vector mode, per language.

    python benchmarks/bench_embeddings.py
    python benchmarks/bench_embeddings.py --models minilm          # one model only
    python benchmarks/bench_embeddings.py --sets demo

For each golden set — the bundled demo (``kebab_eval_pipeline/data/demo``: fermentation
handbook, English and Korean) and the kebab documentation example
(``docs/examples/kebab-docs``: 45 files of mostly Korean prose) — and each embedding model of
``reference/vectors.py`` (``minilm``, ``multilingual-e5-small``), in this one process:

1. the model load (``get_embedder``: for MiniLM mostly the torch / sentence-transformers import);
2. the corpus embedding time: ``ReferenceIndex.build(..., with_vectors=True)`` minus the same
   build without vectors (chunking and BM25 are not the model's cost), on all cores;
3. every answerable golden query through ``ReferenceIndex.search(mode="vector", k=10)``, one
   at a time as the pipeline calls it (query embedding + cosine top-k): p50 / p95 latency;
4. retrieval quality per query language (the golden ``lang``): hit@5 (a relevant chunk in the
   top 5) and MRR@10. A hit is relevant when its ``doc_path`` is a support's ``rel_path`` and its
   heading path starts with the support's ``heading_path`` — the pipeline's ``anchor`` criterion
   (metrics/matching.py); snippets are not compared, so these are section-level figures.

Prints one table per set, then the multilingual/MiniLM ratios. Not a test: timings depend on
the machine and its load (the figures in the commit message were taken on 2 shared cores).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kebab_eval_pipeline.reference.index import ReferenceIndex  # noqa: E402
from kebab_eval_pipeline.reference.vectors import (  # noqa: E402
    EMBEDDING_MODELS,
    get_embedder,
    vectors_available,
)

SETS = {
    "demo": (
        ROOT / "kebab_eval_pipeline/data/demo/corpus",
        ROOT / "kebab_eval_pipeline/data/demo/golden.yaml",
    ),
    "kebab-docs": (ROOT / "docs/examples/kebab-docs/corpus", ROOT / "docs/examples/kebab-docs/golden.yaml"),
}
K = 10


def relevant(hit, supports: list[dict]) -> bool:
    """The anchor criterion: same document, and the hit's heading path starts with the gold one."""
    for s in supports:
        gold = list(s.get("heading_path") or [])
        if hit.doc_path == s.get("rel_path") and list(hit.heading_path[: len(gold)]) == gold:
            return True
    return False


def evaluate(
    index: ReferenceIndex, queries: list[dict]
) -> tuple[dict[str, tuple[int, float, float]], list[float]]:
    """Per language: (queries, hit@5, MRR@10); and every query's search latency in seconds."""
    per_lang: dict[str, list[tuple[int, float]]] = {}
    latencies = []
    for q in queries:
        started = time.perf_counter()
        hits = index.search(q["query"], K, mode="vector")
        latencies.append(time.perf_counter() - started)
        rank = next((h.rank for h in hits if relevant(h, q["supports"])), None)
        per_lang.setdefault(q.get("lang", "en"), []).append(
            (int(rank is not None and rank <= 5), 1.0 / rank if rank else 0.0)
        )
    table = {
        lang: (len(rows), statistics.fmean(r[0] for r in rows), statistics.fmean(r[1] for r in rows))
        for lang, rows in sorted(per_lang.items())
    }
    return table, latencies


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=list(EMBEDDING_MODELS), choices=EMBEDDING_MODELS)
    parser.add_argument("--sets", nargs="+", default=list(SETS), choices=list(SETS))
    args = parser.parse_args()
    missing = [m for m in args.models if not vectors_available(m)]
    if missing:
        print(f"not installed: {', '.join(missing)} (see pyproject.toml extras vectors / multilingual)")
        return 2

    load_s = {}
    for model in args.models:
        started = time.perf_counter()
        get_embedder(model)
        load_s[model] = time.perf_counter() - started

    results: dict[tuple[str, str], dict] = {}
    for set_name in args.sets:
        corpus, golden = SETS[set_name]
        queries = [
            q for q in yaml.safe_load(golden.read_text(encoding="utf-8"))["queries"] if q.get("supports")
        ]
        started = time.perf_counter()
        lexical = ReferenceIndex.build(corpus)
        lexical_s = time.perf_counter() - started
        n_chunks = lexical.manifest["n_chunks"]
        print(
            f"\n== {set_name}: {lexical.manifest['n_docs']} files, {n_chunks} chunks, "
            f"{len(queries)} answerable queries"
        )
        for model in args.models:
            started = time.perf_counter()
            index = ReferenceIndex.build(corpus, with_vectors=True, embedding_model=model)
            embed_s = max(time.perf_counter() - started - lexical_s, 0.0)
            # a few warm-up searches (first-call allocations), not counted
            for q in queries[:3]:
                index.search(q["query"], K, mode="vector")
            table, lat = evaluate(index, queries)
            results[(set_name, model)] = {"table": table, "embed_s": embed_s, "lat": lat}
            lat_ms = sorted(x * 1000 for x in lat)
            p95 = lat_ms[min(len(lat_ms) - 1, int(0.95 * len(lat_ms)))]
            print(
                f"  {model:<22} corpus embedding {embed_s:6.1f} s "
                f"({n_chunks / max(embed_s, 1e-9):6.1f} chunks/s)"
                f"   query p50 {statistics.median(lat_ms):6.1f} ms  p95 {p95:6.1f} ms"
            )
            for lang, (n, hit5, mrr) in table.items():
                print(f"  {'':<22} {lang}: n={n:<3} hit@5 {hit5:.3f}  MRR@10 {mrr:.3f}")

    print("\n== model load: " + ", ".join(f"{m} {s:.1f} s" for m, s in load_s.items()))
    if len(args.models) == 2:
        base, other = args.models
        print(f"== ratios {other} / {base}")
        for set_name in args.sets:
            a, b = results[(set_name, base)], results[(set_name, other)]
            parts = [
                f"embedding time x{b['embed_s'] / max(a['embed_s'], 1e-9):.2f}",
                f"query p50 x{statistics.median(b['lat']) / statistics.median(a['lat']):.2f}",
            ]
            for lang in a["table"]:
                ma, mb = a["table"][lang][2], b["table"][lang][2]
                parts.append(f"{lang} MRR {ma:.3f} -> {mb:.3f}")
            print(f"  {set_name}: " + "; ".join(parts))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
