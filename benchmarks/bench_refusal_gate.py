"""The reference answerer's refusal gate before and after calibration, per golden set and mode.

For the demo golden set and both kebab-docs golden sets (``golden.yaml``, the held-out
``golden-holdout.yaml``), in lexical and hybrid mode:

1. the calibration curve (``kebab-eval ref calibrate``'s arithmetic): for every gate feature, the
   lowest over-refusal whose refusal correctness is ≥ 0.9, and the threshold giving it;
2. full runs with answers under the old gate (``top_hit`` ≥ 0.35) and the shipped default, each
   scored by the pipeline: over-refusal, under-refusal, refusal correctness, answer precision
   and citation hit rate (CHR), with the numbers of queries behind each.

Run: ``python benchmarks/bench_refusal_gate.py [--modes lexical,hybrid] [--curve-out DIR]``.
Hybrid needs the vectors extra (first run: the corpora are embedded, minutes).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

# benchmarks/ is on sys.path when a script here runs: the query-vector memo is bench_fusion's
from bench_fusion import GOLDEN_SETS, memoise_query_vectors

from kebab_eval_pipeline.chain import pipeline
from kebab_eval_pipeline.chain.artifacts import RetrievalArtifact
from kebab_eval_pipeline.chain.settings import RunSettings
from kebab_eval_pipeline.reference.answer import DEFAULT_GATE_FEATURE, DEFAULT_GATE_THRESHOLD, GATE_FEATURES
from kebab_eval_pipeline.reference.cache import cached_index
from kebab_eval_pipeline.reference.calibrate import gate_observations, refusal_curve
from kebab_eval_pipeline.systems.reference_adapter import ReferenceSystem
from kebab_eval_pipeline.systems.runner import run_golden

OLD_GATE = ("top_hit", 0.35)
METRICS = ("over_refusal", "under_refusal", "refusal_correct", "answer_precision", "chr")


def _answer_metrics(system: ReferenceSystem, settings: RunSettings, golden) -> dict[str, tuple[float, int]]:
    k = max(max(settings.k), settings.mrr_cutoff)
    results = run_golden(system, golden.queries, k=k, answers=True)
    scores = pipeline.score(settings, golden, RetrievalArtifact(results, {})).scores
    out = {}
    for name in METRICS:
        values = scores[name].to_numpy(dtype=np.float64)
        n = int(np.isfinite(values).sum())
        out[name] = (float(np.nanmean(values)) if n else float("nan"), n)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default="lexical,hybrid")
    parser.add_argument("--curve-out", type=Path, help="write each curve as CSV into this folder")
    parser.add_argument(
        "--gates",
        default="",
        help="more gates to run, FEATURE:THRESHOLD,... (beside the old one and the shipped default)",
    )
    args = parser.parse_args()
    modes = args.modes.split(",")
    new_gate = (DEFAULT_GATE_FEATURE, DEFAULT_GATE_THRESHOLD)
    print(f"old gate: {OLD_GATE[0]} >= {OLD_GATE[1]}; shipped default: {new_gate[0]} >= {new_gate[1]}\n")
    for set_name, (corpus, golden_path) in GOLDEN_SETS.items():
        if not golden_path.is_file():
            continue
        settings = RunSettings.model_validate({"golden": str(golden_path), "answers": True})
        golden = pipeline.load_golden_artifact(settings)
        index, _ = cached_index(corpus, with_vectors="hybrid" in modes or "vector" in modes)
        if index.has_vectors:
            memoise_query_vectors(index)
        n_unanswerable = int((~golden.queries["answerable"].astype(bool)).sum())
        print(f"== {set_name}: {len(golden.queries)} queries, {n_unanswerable} unanswerable")
        for mode in modes:
            system = ReferenceSystem(index, mode=mode)
            curve = refusal_curve(gate_observations(index, golden.queries, mode, 5, system.fusion))
            if args.curve_out:
                args.curve_out.mkdir(parents=True, exist_ok=True)
                curve.to_csv(args.curve_out / f"{set_name}-{mode}.csv", index=False)
            print(f"  {mode}: lowest over-refusal with refusal correctness >= 0.9, per feature:")
            for feature in GATE_FEATURES:
                rows = curve[(curve["feature"] == feature) & (curve["refusal_correctness"] >= 0.9 - 1e-12)]
                best = rows.loc[rows["over_refusal_rate"].idxmin()]
                print(
                    f"    {feature:<13} over-refusal {best['over_refusal_rate']:.3f} at threshold "
                    f"{best['threshold']:.2f} (refusal correctness {best['refusal_correctness']:.3f})"
                )
            print(f"    {'gate':<22}" + "".join(f"{m:>18}" for m in METRICS))
            extra = [("", (g.split(":")[0], float(g.split(":")[1]))) for g in args.gates.split(",") if g]
            for label, (feature, threshold) in (("old", OLD_GATE), ("default", new_gate), *extra):
                gated = ReferenceSystem(index, mode=mode, gate_threshold=threshold, gate_feature=feature)
                metric = _answer_metrics(gated, settings, golden)
                cells = "".join(f"{metric[m][0]:>11.3f} (n={metric[m][1]:>3})" for m in METRICS)
                name = (label + ": " if label else "") + feature + " " + format(threshold, "g")
                print(f"    {name:<22}{cells}")
        print()


if __name__ == "__main__":
    sys.exit(main())
