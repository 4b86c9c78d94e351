"""Fusion methods of the reference system's hybrid mode, side by side, per golden set and language.

For each golden set — the bundled demo, and kebab's documentation (docs/examples/kebab-docs:
``golden.yaml`` and the held-out ``golden-holdout.yaml``) — builds the index with vectors once
(through the index cache), then scores retrieval (hit@5, MRR) per language for:

* the two channels alone: ``lexical`` (BM25) and ``vector`` (all-MiniLM-L6-v2);
* every fusion in :data:`VARIANTS`: plain RRF (the old default), weighted RRF, min-max and
  z-score CombSUM, with and without language-aware weighting, and the shipped default
  (:data:`~kebab_eval_pipeline.reference.fusion.DEFAULT_FUSION`).

A fusion "holds" on a slice when its MRR and hit@5 are both ≥ the better channel's; the last
column counts the slices (overall, ko, en, per golden set) where it does. Query embeddings are
computed once per query and reused by every variant, so the timing column is the fusion's own
cost plus BM25 (the embedding is ~98% of a real hybrid query: see bench_reference.py).

Run: ``python benchmarks/bench_fusion.py [--only demo|kebab-docs|holdout]``. Needs the vectors
extra; the first run embeds the corpora (a few minutes on 2 cores), later runs load the cache
(``KEBAB_EVAL_INDEX_CACHE``; default under ``$DAGSTER_HOME``).
"""

from __future__ import annotations

import argparse
import sys
import time
from functools import cache
from pathlib import Path

from kebab_eval_pipeline.chain import pipeline
from kebab_eval_pipeline.chain.artifacts import RetrievalArtifact
from kebab_eval_pipeline.chain.settings import RunSettings
from kebab_eval_pipeline.foundation.demo import DEMO_CORPUS, DEMO_GOLDEN
from kebab_eval_pipeline.metrics.aggregate import breakdowns
from kebab_eval_pipeline.reference.cache import cached_index
from kebab_eval_pipeline.reference.fusion import DEFAULT_FUSION, FusionSpec
from kebab_eval_pipeline.reference.index import ReferenceIndex
from kebab_eval_pipeline.reference.vectors import get_embedder
from kebab_eval_pipeline.systems.reference_adapter import ReferenceSystem
from kebab_eval_pipeline.systems.runner import run_golden

REPO = Path(__file__).resolve().parents[1]
KEBAB_DOCS = REPO / "docs" / "examples" / "kebab-docs"

GOLDEN_SETS = {
    "demo": (DEMO_CORPUS, DEMO_GOLDEN),
    "kebab-docs": (KEBAB_DOCS / "corpus", KEBAB_DOCS / "golden.yaml"),
    "holdout": (KEBAB_DOCS / "corpus", KEBAB_DOCS / "golden-holdout.yaml"),
}

VARIANTS: dict[str, FusionSpec] = {
    "rrf (old default)": FusionSpec("rrf"),
    "rrf w=1/1.5": FusionSpec("rrf", vector_weight=1.5),
    "minmax": FusionSpec("minmax"),
    "zscore": FusionSpec("zscore"),
    "rrf +lang": FusionSpec("rrf", language_aware=True),
    "minmax +lang": FusionSpec("minmax", language_aware=True),
    "zscore +lang": FusionSpec("zscore", language_aware=True),
    "default": DEFAULT_FUSION,  # rrf, w=1/1.5, language-aware
}


def memoise_query_vectors(index: ReferenceIndex) -> None:
    """Embed each distinct query once for the whole benchmark (the variants differ only after it)."""
    embedder = get_embedder()

    @cache
    def vector_ranking(query: str, depth: int) -> tuple[tuple[int, float], ...]:
        assert index.vectors is not None
        return tuple(index.vectors.search(embedder.encode([query])[0], depth))

    index._vector_ranking = lambda query, depth: list(vector_ranking(query, depth))  # type: ignore[method-assign]


def _scores(system: ReferenceSystem, settings: RunSettings, golden) -> tuple[dict, float]:
    k = max(max(settings.k), settings.mrr_cutoff)
    started = time.perf_counter()
    results = run_golden(system, golden.queries, k=k, answers=False)
    elapsed = time.perf_counter() - started
    scores = pipeline.score(settings, golden, RetrievalArtifact(results, {})).scores
    out = {"all": {"mrr": float(scores["mrr"].mean()), "hit@5": float(scores["hit@5"].mean())}}
    table = breakdowns(scores, settings.k)
    table = table[table["dimension"] == "lang"]
    for lang in sorted(set(table["value"])):
        row = table[table["value"] == lang]
        metric = dict(zip(row["metric"], row["score"], strict=True))
        out[lang] = {"mrr": float(metric["mrr"]), "hit@5": float(metric["hit@5"])}
    return out, elapsed / max(1, len(golden.queries))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(GOLDEN_SETS), action="append")
    args = parser.parse_args()
    held: dict[str, list[str]] = {name: [] for name in VARIANTS}
    slices_total = 0
    for set_name, (corpus, golden_path) in GOLDEN_SETS.items():
        if args.only and set_name not in args.only:
            continue
        if not golden_path.is_file():
            print(f"({set_name}: {golden_path} not found, skipped)\n")
            continue
        settings = RunSettings.model_validate({"golden": str(golden_path), "answers": False})
        golden = pipeline.load_golden_artifact(settings)
        started = time.perf_counter()
        index, _ = cached_index(corpus, chunk_size=800, chunk_overlap=0, with_vectors=True)
        memoise_query_vectors(index)
        n_lang = golden.queries["lang"].value_counts().to_dict()
        langs = ", ".join(f"{k} {v}" for k, v in sorted(n_lang.items()))
        print(
            f"== {set_name}: {len(golden.queries)} queries ({langs}), "
            f"{len(index.chunks)} chunks; index ready in {time.perf_counter() - started:.1f} s"
        )
        rows: dict[str, tuple[dict, float]] = {}
        for mode in ("lexical", "vector"):
            rows[mode] = _scores(ReferenceSystem(index, mode=mode), settings, golden)
        # warm the query-vector memo so no variant pays for embedding
        for name, spec in VARIANTS.items():
            rows[name] = _scores(ReferenceSystem(index, mode="hybrid", fusion=spec), settings, golden)
        slices = [s for s in ("all", "ko", "en") if s in rows["lexical"][0]]
        header = f"{'method':<18}" + "".join(f" {s + ' mrr':>9} {s + ' hit@5':>9}" for s in slices)
        print(header + f" {'ms/query':>9}")
        for name, (metric, per_query) in rows.items():
            cells = ""
            for s in slices:
                best_mrr = max(rows["lexical"][0][s]["mrr"], rows["vector"][0][s]["mrr"])
                best_hit = max(rows["lexical"][0][s]["hit@5"], rows["vector"][0][s]["hit@5"])
                ok = metric[s]["mrr"] >= best_mrr - 1e-9 and metric[s]["hit@5"] >= best_hit - 1e-9
                mark = "" if name in ("lexical", "vector") else (" " if ok else "*")
                cells += f" {metric[s]['mrr']:>8.3f}{mark or ' '} {metric[s]['hit@5']:>8.3f} "
                if name in held and ok:
                    held[name].append(f"{set_name}/{s}")
            print(f"{name:<18}{cells}{per_query * 1000:>9.2f}")
        slices_total += len(slices)
        print("(* = below the better single channel on MRR or hit@5)\n")
    print(f"slices where the fusion is >= the better channel on both MRR and hit@5 (of {slices_total}):")
    for name, slices_ok in held.items():
        print(f"  {name:<18} {len(slices_ok):>2}")


if __name__ == "__main__":
    sys.exit(main())
