"""Benchmark: what the UI's per-query tables cost (issue 9).

The ``retrieval_results``, ``query_scores`` and ``comparison_report`` materializations now order
their per-query tables worst first (``reporting/per_query.py``) before the first 1,000 rows go
into Dagster metadata. Side by side, on the same tables:

- ``ours``: worst_scores_first / worst_results_first / verdicts_worst_first + the metadata table;
- ``golden order``: what the assets did before (the first 1,000 rows as they come), the floor;
- ``sort_values``: a pandas sort on ready-made keys (tier, rank) — the cheapest sort possible.

Tables are the demo run's real tables tiled to N queries (unique ids, ranks shuffled with a fixed
seed), so dtypes and value mixes are the pipeline's own.

    python benchmarks/bench_ui_tables.py --sizes 10000,100000
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from kebab_eval_pipeline.chain import pipeline
from kebab_eval_pipeline.chain.settings import load_settings
from kebab_eval_pipeline.compare.verdicts import VERDICTS
from kebab_eval_pipeline.orchestration.assets import _table_metadata, headline_columns
from kebab_eval_pipeline.reporting.per_query import (
    verdicts_worst_first,
    worst_results_first,
    worst_scores_first,
)


def demo_tables() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    settings = load_settings(None)
    golden = pipeline.load_golden_artifact(settings)
    retrieval = pipeline.retrieve(settings, golden)
    scores = pipeline.score(settings, golden, retrieval)
    return golden.queries, retrieval.results.outcomes, retrieval.results.hits, scores.scores


def tile(frame: pd.DataFrame, n: int, rng: np.random.Generator, per_query: int = 1) -> pd.DataFrame:
    """``frame`` repeated to ``n`` queries, query ids made unique (``q<copy>-<id>``)."""
    ids = frame["query_id"].unique()
    copies = -(-n // len(ids))
    parts = []
    for c in range(copies):
        part = frame.copy()
        part["query_id"] = f"q{c}-" + part["query_id"].astype(str)
        parts.append(part)
    out = pd.concat(parts, ignore_index=True)
    keep = out["query_id"].isin(out["query_id"].drop_duplicates().iloc[:n])
    out = out[keep].reset_index(drop=True)
    if "first_relevant_rank" in out:
        ranks = out["first_relevant_rank"].to_numpy(dtype=float, na_value=np.nan)
        out["first_relevant_rank"] = pd.array(rng.permutation(ranks), dtype="Float64").astype("Int64")
    return out


def best_of(fn, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def cases_at(n: int, queries, outcomes, hits, scores, rng: np.random.Generator) -> dict:
    """name → (ours, golden order, sort_values) callables over the tables tiled to ``n`` queries."""
    metrics = headline_columns([1, 3, 5, 10])
    q = tile(queries, n, rng)
    s = tile(scores, n, rng)
    o = tile(outcomes, n, rng)
    h = tile(hits, n, rng)
    v = pd.DataFrame(
        {
            "query_id": s["query_id"],
            "verdict": rng.choice(list(VERDICTS), size=len(s)),
            "a_rank": s["first_relevant_rank"],
        }
    )
    tier = pd.Series(rng.integers(0, 7, len(s)))
    return {
        "query_scores": (
            lambda: _table_metadata(worst_scores_first(s, metrics, q)),
            lambda: _table_metadata(s),
            lambda: s.assign(t=tier, r=s["first_relevant_rank"]).sort_values(["t", "r"], kind="stable"),
        ),
        "retrieval_results": (
            lambda: _table_metadata(worst_results_first(o, h, q)),
            lambda: _table_metadata(o),
            lambda: o.assign(t=tier.iloc[: len(o)]).sort_values(["t", "retrieval_ms"], kind="stable"),
        ),
        "comparison verdicts": (
            lambda: _table_metadata(verdicts_worst_first(v)),
            lambda: _table_metadata(v),
            lambda: v.sort_values(["verdict", "a_rank"], kind="stable"),
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    queries, outcomes, hits, scores = demo_tables()
    print(
        f"{'queries':>8} {'table':<18} {'ours s':>8} {'golden order s':>15} {'sort_values s':>14} "
        f"{'ours/golden':>12} {'ours/sort':>10}"
    )
    for n in (int(size) for size in args.sizes.split(",")):
        cases = cases_at(n, queries, outcomes, hits, scores, rng)
        for name, (ours, floor, plain) in cases.items():
            t_ours, t_floor, t_plain = (best_of(f, args.rounds) for f in (ours, floor, plain))
            print(
                f"{n:>8} {name:<18} {t_ours:>8.3f} {t_floor:>15.3f} {t_plain:>14.3f} "
                f"{t_ours / t_floor:>12.2f} {t_ours / t_plain:>10.2f}"
            )


if __name__ == "__main__":
    main()
