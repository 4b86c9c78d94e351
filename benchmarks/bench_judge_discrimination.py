"""Benchmark: can a judge tell a right item from a wrong one, and at what cost per judgement?

    python benchmarks/bench_judge_discrimination.py                       # the default model, v2 and v1
    python benchmarks/bench_judge_discrimination.py --pairs 40 --versions v2
    python benchmarks/bench_judge_discrimination.py --model /path/to/other.gguf --versions v2

No person labels anything here, so the items are built to have a known answer. Each pair is one
item as the demo run produced it and the same item with one part swapped for another query's
(the swap partner is the query ``pairs // 2`` places further on, so every swap crosses topics):

- groundedness: the answer with its own top passages, and with another query's passages (the
  demo's reference system answers from its passages, so the first is grounded, the second not);
- correctness: the question with its own answer, and with another query's answer;
- relevance: the question with the first of its hits the golden set matched to a support (a
  golden-relevant passage), and with another query's (about another topic).

Reported per judge (model × prompt version) and criterion: the pair AUC — the share of pairs whose
real item scores above its swapped twin, ties counting half (0.5 is chance, 1 a perfect ranking)
— with a 95% bootstrap interval over pairs; the mean score of each side; Cohen's κ of the verdict
(pass at 3) against the construction (real = pass, swapped = fail), with its bootstrap interval
(``judge.agreement``, the figure runs report against people's labels); the share of
unscored replies; and the median wall time per judgement (model loaded; the first call per
criterion, which computes the instructions' key/value cache, excluded). Competitors run side by
side in this one process on the same pairs. Not a test: timings depend on the machine.

A constructed pair is an easy case — a swapped item is wrong in an obvious way — so a judge that
fails here fails at least as badly on real answers; passing here says nothing about the subtle
errors people label (`kebab-eval judge label` measures those).
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace

import numpy as np

from kebab_eval_pipeline.chain import pipeline
from kebab_eval_pipeline.chain.settings import RunSettings
from kebab_eval_pipeline.judge.agreement import agreement
from kebab_eval_pipeline.judge.completion import Decoding
from kebab_eval_pipeline.judge.config import JudgeSettings
from kebab_eval_pipeline.judge.inputs import judge_inputs
from kebab_eval_pipeline.judge.local import LocalJudge
from kebab_eval_pipeline.judge.parse import parse_judgement
from kebab_eval_pipeline.judge.prompts import JudgeInput, render, reply_decoding, score_only
from kebab_eval_pipeline.judge.relevance import RelevanceInput, relevance_prompt_version, render_relevance
from kebab_eval_pipeline.judge.relevance_calibration import relevance_items

PASS = 3.0
BOOTSTRAP = 2000


def pairs_for(n: int) -> dict[str, list[tuple[object, object]]]:
    """``{criterion: [(real item, swapped item), ...]}`` from the demo run (see the docstring)."""
    settings = RunSettings()
    golden = pipeline.load_golden_artifact(settings)
    retrieval = pipeline.retrieve(settings, golden)
    js = JudgeSettings()
    items = judge_inputs(
        golden.queries,
        retrieval.results.outcomes,
        retrieval.results.hits,
        retrieval.results.citations,
        js.context_k,
        js.context_chars,
    )
    ids = list(items)[:n]
    shift = max(1, len(ids) // 2)
    other = {q: ids[(i + shift) % len(ids)] for i, q in enumerate(ids)}
    grounded = [(items[q], replace(items[q], context=items[other[q]].context)) for q in ids]
    correct = [(items[q], replace(items[q], answer=items[other[q]].answer, citations=())) for q in ids]

    drawn = relevance_items(
        golden.queries,
        retrieval.results.hits,
        golden.supports,
        match=settings.match,
        relevance_level=1,
        n=10_000,
        seed=0,
        context_chars=js.context_chars,
    )
    first = drawn[drawn["gold_relevant"]].sort_values(["query_id", "rank"]).drop_duplicates("query_id")
    passages = [RelevanceInput.from_json(j) for j in first["judge_input"]][:n]
    shift = max(1, len(passages) // 2)
    relevant = [
        (p, replace(passages[(i + shift) % len(passages)], question=p.question))
        for i, p in enumerate(passages)
    ]
    return {"groundedness": grounded, "correctness": correct, "relevance": relevant}


def messages_for(criterion: str, version: str, item: object) -> tuple[list, str]:
    """The judge's messages for one item, and the prompt version they were rendered with."""
    if criterion == "relevance":
        rv = relevance_prompt_version(version)
        return render_relevance(item, rv), rv  # type: ignore[arg-type]
    assert isinstance(item, JudgeInput)
    return render(criterion, version, item), version  # type: ignore[arg-type]


def auc_with_interval(real: np.ndarray, swapped: np.ndarray, seed: int = 0) -> tuple[float, float, float]:
    """Pair AUC (real > swapped, ties half) and its 95% percentile bootstrap interval over pairs."""
    wins = np.where(real > swapped, 1.0, np.where(real == swapped, 0.5, 0.0))
    rng = np.random.default_rng(seed)
    boots = wins[rng.integers(0, len(wins), (BOOTSTRAP, len(wins)))].mean(axis=1)
    return float(wins.mean()), float(np.quantile(boots, 0.025)), float(np.quantile(boots, 0.975))


def judge_pairs(judge: LocalJudge, version: str, criterion: str, pairs: list) -> dict:
    decoding = Decoding()
    real, swapped, seconds, unscored = [], [], [], 0
    for k, pair in enumerate(pairs):
        scored = []
        for item in pair:
            messages, used = messages_for(criterion, version, item)
            started = time.perf_counter()
            completion = judge.complete(messages, reply_decoding(used, decoding))
            if k > 0:  # the first pair computes the instructions' key/value cache
                seconds.append(time.perf_counter() - started)
            parsed = parse_judgement(completion, score_only=score_only(used))
            unscored += parsed.score is None
            scored.append(parsed.score)
        real.append(scored[0])
        swapped.append(scored[1])
    r = np.array([np.nan if s is None else s for s in real])
    w = np.array([np.nan if s is None else s for s in swapped])
    both = ~(np.isnan(r) | np.isnan(w))
    auc, low, high = auc_with_interval(r[both], w[both]) if both.any() else (np.nan,) * 3
    truth = np.r_[np.full(both.sum(), "pass"), np.full(both.sum(), "fail")]
    said = np.where(np.r_[r[both], w[both]] >= PASS, "pass", "fail")
    agreed = agreement(truth, said, ["fail", "pass"]) if both.any() else None
    kappa = None if agreed is None else agreed.kappa
    return {
        "pairs": int(both.sum()),
        "auc": auc,
        "auc_low": low,
        "auc_high": high,
        "mean_real": float(np.nanmean(r)),
        "mean_swapped": float(np.nanmean(w)),
        "kappa": float("nan") if kappa is None else kappa,
        "kappa_ci": "" if kappa is None else f"[{agreed.ci_low:.2f}, {agreed.ci_high:.2f}]",
        "unscored": unscored / (2 * len(pairs)),
        "median_s": statistics.median(seconds) if seconds else float("nan"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=30, help="pairs per criterion (default 30)")
    parser.add_argument("--versions", default="v2,v1", help="prompt versions, comma-separated")
    parser.add_argument("--model", action="append", default=None, help="a .gguf or model folder (repeatable)")
    parser.add_argument("--criteria", default="groundedness,correctness,relevance")
    args = parser.parse_args()
    pairs = pairs_for(args.pairs)
    criteria = args.criteria.split(",")
    models = args.model or [None]
    print(f"pairs per criterion: { {c: len(pairs[c]) for c in criteria} }")
    print(
        f"{'model':<34} {'prompt':<7} {'criterion':<13} {'n':>3} {'AUC [95% CI]':>20} "
        f"{'real':>5} {'swap':>5} {'κ [95% CI]':>18} {'unscored':>8} {'s/judgement':>11}"
    )
    for model in models:
        judge = LocalJudge(model)
        started = time.perf_counter()
        judge.complete(render("groundedness", "v2", pairs["groundedness"][0][0]), Decoding(max_tokens=1))
        load = time.perf_counter() - started
        print(f"# {judge.model}: loaded and first call in {load:.1f} s")
        for version in args.versions.split(","):
            for criterion in criteria:
                r = judge_pairs(judge, version, criterion, pairs[criterion])
                ci = f"{r['auc']:.2f} [{r['auc_low']:.2f}, {r['auc_high']:.2f}]"
                kappa = f"{r['kappa']:.2f} {r['kappa_ci']}"
                print(
                    f"{judge.model[:34]:<34} {version:<7} {criterion:<13} {r['pairs']:>3} {ci:>20} "
                    f"{r['mean_real']:>5.2f} {r['mean_swapped']:>5.2f} "
                    f"{kappa:>18} "
                    f"{r['unscored']:>8.0%} {r['median_s']:>11.2f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
