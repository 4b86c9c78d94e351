"""Benchmark: do the judge's corrected intervals cover the truth as often as they say?

    python benchmarks/bench_ppi_coverage.py                  # 1,000 synthetic runs per design
    python benchmarks/bench_ppi_coverage.py --runs 5000

Synthetic runs of N = 1,000 judged items with a known truth (what a person would say of every
item) and a biased judge; a person labels n of them at random. For each design this prints how often
the 95% interval holds the run's true mean:

- ``ppi``: the prediction-powered (PPI++) interval a calibrated run reports (``judge/ppi.py``);
- ``judge``: the judge's own interval (its mean ± 1.96 se): what a judged mean claims uncalibrated;
- ``labels``: the labels' own interval (the classical one, n items only);

with each interval's mean width (``w``: PPI++ should be narrower than the labels' alone when the
judge is informative), and for pairs of runs the corrected difference's interval (``Δ``:
``compare/corrected.py``, the two standard errors added) over runs that share their labelled
items. Monte Carlo error of a coverage near 0.95 is about ±0.007 at 1,000 runs.

Designs: ``binary`` (truth relevant with p = 0.6; the judge says yes to 90% of relevant and 30% of
the others), ``graded`` (truth 0–5; the judge adds 0 to 2 points, capped at 5), ``weak`` (the
judge's score is noise around its own mean: uninformative, so PPI++ falls back to the labels).

A second table is the comparison's provisional difference corrected by people's relevance labels
(``compare/provisional_corrected.py``): 400 queries, 300 of them with pooled unjudged hits; per
query a hit@1-like 0/1 for each run (b truly better by 0.1); the judge's provisional labels turn
b's 0 into 1 on a share of the pooled queries (``favours b``: 35%; ``both ways``: 20% of b's 0s up
and 20% of a's 0s up, no net bias); people label n pooled queries at random. Columns: coverage of
the true difference (0.1), of each comparison's own difference as people would label it all, of
the judge's provisional difference with a naive interval, and the corrected interval's width.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from kebab_eval_pipeline.compare.provisional_corrected import corrected_mean
from kebab_eval_pipeline.judge.ppi import ppi_mean

Z = 1.959963984540054
N = 1000


def _truth_and_judge(design: str, rng: np.random.Generator, shift: float = 0.0):
    if design == "binary":
        truth = (rng.random(N) < 0.6 + shift).astype(float)
        judge = np.where(truth == 1, rng.random(N) < 0.9, rng.random(N) < 0.3).astype(float)
    elif design == "graded":
        truth = np.clip(rng.integers(0, 6, N) + round(shift * 5), 0, 5).astype(float)
        judge = np.clip(truth + rng.integers(0, 3, N), 0, 5).astype(float)
    else:  # weak: the judge says about the same of everything
        truth = np.clip(rng.integers(0, 6, N) + round(shift * 5), 0, 5).astype(float)
        judge = np.clip(np.rint(3.4 + rng.normal(0, 0.3, N)), 0, 5)
    return truth, judge


def coverage(design: str, n: int, runs: int, seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    hits = {"ppi": 0, "judge": 0, "labels": 0, "delta": 0}
    width = {"ppi": 0.0, "judge": 0.0, "labels": 0.0, "delta": 0.0}
    for _ in range(runs):
        labelled = rng.choice(N, n, replace=False)
        rest = np.setdiff1d(np.arange(N), labelled)
        estimates = []
        for shift in (0.0, 0.1):  # two runs: the second one truly better
            truth, judge = _truth_and_judge(design, rng, shift)
            r = ppi_mean(truth[labelled], judge[labelled], judge[rest])
            estimates.append((r, truth.mean()))
            if shift == 0.0:
                hits["ppi"] += r.ci_low <= truth.mean() <= r.ci_high
                width["ppi"] += r.ci_high - r.ci_low
                se = judge.std() / np.sqrt(N)
                hits["judge"] += abs(judge.mean() - truth.mean()) <= Z * se
                width["judge"] += 2 * Z * se
                y = truth[labelled]
                se_y = y.std(ddof=1) / np.sqrt(n)
                hits["labels"] += abs(y.mean() - truth.mean()) <= Z * se_y
                width["labels"] += 2 * Z * se_y
        (ra, ta), (rb, tb) = estimates
        se_sum = (ra.ci_high - ra.ci_low + rb.ci_high - rb.ci_low) / (2 * Z)
        delta = rb.estimate - ra.estimate
        hits["delta"] += abs(delta - (tb - ta)) <= Z * se_sum
        width["delta"] += 2 * Z * se_sum
    return {**{k: v / runs for k, v in hits.items()}, **{f"w_{k}": v / runs for k, v in width.items()}}


def provisional_coverage(design: str, n: int, runs: int, seed: int) -> dict[str, float]:
    """The second table's row (module doc): coverage of the corrected provisional difference."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    queries, pooled_n = 400, 300
    ids = np.array([f"q{i}" for i in range(queries)])
    pooled = set(ids[:pooled_n])
    in_pool = np.arange(queries) < pooled_n
    out = {"true": 0, "own": 0, "naive": 0, "width": 0.0}
    for _ in range(runs):
        ya = rng.binomial(1, 0.5, queries).astype(float)
        yb = rng.binomial(1, 0.6, queries).astype(float)
        fa, fb = ya.copy(), yb.copy()
        if design == "favours b":
            fb[in_pool & (yb == 0) & (rng.random(queries) < 0.35)] = 1.0
        else:
            fb[in_pool & (yb == 0) & (rng.random(queries) < 0.2)] = 1.0
            fa[in_pool & (ya == 0) & (rng.random(queries) < 0.2)] = 1.0
        f, y = pd.Series(fb - fa, index=ids), pd.Series(yb - ya, index=ids)
        labelled = set(rng.choice(ids[:pooled_n], n, replace=False))
        r = corrected_mean(f, y, pooled, labelled, 0.05)
        out["true"] += r["ci_low"] <= 0.1 <= r["ci_high"]
        out["own"] += r["ci_low"] <= y.mean() <= r["ci_high"]
        half = Z * f.std(ddof=1) / np.sqrt(queries)
        out["naive"] += f.mean() - half <= 0.1 <= f.mean() + half
        out["width"] += r["ci_high"] - r["ci_low"]
    return {k: v / runs for k, v in out.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=2024)
    args = parser.parse_args()
    print(f"{args.runs} synthetic runs of {N} items per design; 95% intervals; coverage (mean width)")
    print(f"{'design':8} {'n':>4} {'ppi':>14} {'judge':>14} {'labels':>14} {'Δ (2 runs)':>14}")
    started = time.perf_counter()
    for design in ("binary", "graded", "weak"):
        for n in (20, 50, 100, 200):
            c = coverage(design, n, args.runs, args.seed + n)
            cells = [f"{c[k]:.3f} ({c['w_' + k]:.3f})" for k in ("ppi", "judge", "labels", "delta")]
            print(f"{design:8} {n:>4} " + " ".join(f"{cell:>14}" for cell in cells))
    print()
    print("provisional Δ corrected by people's labels: 400 queries, 300 pooled; coverage of the truth")
    print(f"{'design':10} {'n':>4} {'true Δ':>8} {'own Δ':>8} {'judge Δ':>8} {'width':>8}")
    for design in ("favours b", "both ways"):
        for n in (10, 20, 50, 100):
            c = provisional_coverage(design, n, args.runs, args.seed + n)
            print(
                f"{design:10} {n:>4} {c['true']:>8.3f} {c['own']:>8.3f} {c['naive']:>8.3f} {c['width']:>8.3f}"
            )
    print(f"({time.perf_counter() - started:.1f} s)")


if __name__ == "__main__":
    main()
