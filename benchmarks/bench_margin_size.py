"""Benchmark: error rate of non-inferiority decisions at the margin — paired-t bound vs score bound.

    python benchmarks/bench_margin_size.py                 # n = 30, 60, 100, 200; δ = 0.01 … 0.05
    python benchmarks/bench_margin_size.py --n 400 --repeats 50000

A margin decision ("b is no worse than a by more than δ") must be wrong at most α = 5% of the time
when b is in truth exactly δ worse. For each n and δ this prints that rate (the size) for:

- ``t``: the paired-t lower bound the comparison used before (``mean − t·sd/√n``);
- ``score``: the comparison's score bound (``compare/paired_score.py``);

on **0/1 scores** (hit@k: exact, every outcome of the trinomial enumerated, worst over 31 gain
rates from 0 to 0.44, so no Monte Carlo error) and **graded scores** (MRR-like reciprocal-rank
changes: simulated, worst over 6 gain rates, with its Monte Carlo standard error); ``ratio`` is
t/score. A size above α + 3·MC error is marked ``!``. Also timed: one score bound (what a
comparison pays per metric). The engine is ``tests/compare/margin_simulation.py``, which the
suite runs at small scale.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from kebab_eval_pipeline.compare.paired_score import score_bounds
from tests.compare.margin_simulation import binary_size, graded_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, action="append", help="golden-set sizes (repeatable)")
    parser.add_argument("--margin", type=float, action="append", help="margins δ (repeatable)")
    parser.add_argument("--repeats", type=int, default=20_000, help="simulated comparisons per graded design")
    parser.add_argument("--alpha", type=float, default=0.05)
    args = parser.parse_args()
    sizes = args.n or [30, 60, 100, 200]
    margins = args.margin or [0.01, 0.02, 0.03, 0.04, 0.05]
    alpha = args.alpha
    print(f"size at the margin (α = {alpha}); binary exact, graded simulated ({args.repeats:,} per design)")
    print(
        f"{'n':>4} {'δ':>5} | {'binary t':>8} {'score':>6} {'ratio':>6} | "
        f"{'graded t':>8} {'score':>6} {'±MC':>6} {'ratio':>6}"
    )
    worst = {"binary": 0.0, "graded": 0.0}
    started = time.perf_counter()
    for n in sizes:
        for delta in margins:
            bt, bs = binary_size("t", n, delta, alpha), binary_size("score", n, delta, alpha)
            gt, _ = graded_size("t", n, delta, alpha, args.repeats, seed=n)
            gs, se = graded_size("score", n, delta, alpha, args.repeats, seed=n)
            worst["binary"], worst["graded"] = max(worst["binary"], bs), max(worst["graded"], gs)
            flag_b = "!" if bs > alpha + 1e-12 else " "
            flag_g = "!" if gs > alpha + 3 * se else " "
            print(
                f"{n:>4} {delta:>5.2f} | {bt:>8.4f} {bs:>6.4f}{flag_b}{bt / max(bs, 1e-9):>6.1f} | "
                f"{gt:>8.4f} {gs:>6.4f}{flag_g}{se:>6.4f} {gt / max(gs, 1e-9):>6.1f}"
            )
    print(f"worst score-bound size: binary {worst['binary']:.4f} (exact), graded {worst['graded']:.4f}")
    print(f"grid computed in {time.perf_counter() - started:.1f} s")
    x = np.random.default_rng(0).integers(0, 30, size=1000).astype(float)
    t0 = time.perf_counter()
    score_bounds(np.full(1000, 200.0), x, x[::-1], x + x[::-1], alpha)
    per = (time.perf_counter() - t0) / 1000
    print(f"one score bound (vectorised over 1,000 metrics): {per * 1e6:.1f} µs per metric")


if __name__ == "__main__":
    main()
