"""Benchmark: the golden-set health kernels on synthetic golden sets of growing size.

    python benchmarks/bench_golden_health.py                      # 1,000 / 10,000 / 30,000 questions
    python benchmarks/bench_golden_health.py --sizes 5000 50000

Questions are runs of 6–13 consecutive words drawn from a corpus (``--corpus``, default the shared
kebab-docs corpus, else the bundled demo corpus), so many of them quote it: the worst case for
the leakage join. Each size reports the wall time of the exact + near-duplicate pass (character
3-gram Jaccard ≥ 0.8, sparse products in blocks), of the leakage pass (word 4-grams against the
corpus) and the process's peak RSS. The near-duplicate pass compares every pair of questions, so
its time grows with the square of the questions. Not a test: timings depend on the machine and
its load (say how loaded it was when you quote them).
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

import numpy as np
import pandas as pd

from kebab_eval_pipeline.chain.golden_health_run import corpus_documents
from kebab_eval_pipeline.foundation.demo import DEMO_CORPUS
from kebab_eval_pipeline.golden_health.duplicates import exact_duplicates, near_duplicates
from kebab_eval_pipeline.golden_health.leakage import leaked_questions
from kebab_eval_pipeline.golden_health.text import normalise

SHARED = Path(__file__).resolve().parents[2] / "shared" / "corpora" / "kebab-docs"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 30_000])
    parser.add_argument("--corpus", type=Path, default=SHARED if SHARED.is_dir() else DEMO_CORPUS)
    args = parser.parse_args()
    docs = corpus_documents(args.corpus)
    words = " ".join(docs["text"].tolist()).split()
    print(f"corpus {args.corpus}: {len(docs)} documents, {int(docs['text'].str.len().sum()):,} characters")
    print(
        f"{'questions':>10} {'duplicates s':>13} {'pairs':>7} {'leakage s':>10} {'leaks':>7} {'peak MiB':>9}"
    )
    rng = np.random.default_rng(0)
    for n in args.sizes:
        starts, lengths = rng.integers(0, len(words) - 14, n), rng.integers(6, 14, n)
        questions = pd.Series(
            [" ".join(words[s : s + k]) + "?" for s, k in zip(starts, lengths, strict=True)]
        )
        groups = np.array([None] * n, dtype=object)
        t = time.perf_counter()
        normalised = normalise(questions)
        pairs = len(exact_duplicates(normalised, groups)) + len(near_duplicates(normalised, groups, 3, 0.8))
        duplicates = time.perf_counter() - t
        t = time.perf_counter()
        leaks = len(leaked_questions(questions, docs, 4, 0.6))
        leakage = time.perf_counter() - t
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
        print(f"{n:>10,} {duplicates:>13.2f} {pairs:>7,} {leakage:>10.2f} {leaks:>7,} {peak:>9,}")


if __name__ == "__main__":
    main()
