"""The flakiness kernels and the noise floor on hand-worked values (checked against numpy/pandas)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from kebab_eval_pipeline.metrics.flakiness import MISS, flakiness_columns, modal
from kebab_eval_pipeline.metrics.repeats import noise_floor


def test_modal_counts_flips_distinct_values_and_the_smallest_mode():
    # columns: constant; 2-2 tie (mode = smaller); 3 of 4 agree; all different
    values = np.array([[5, 1, 7, 1], [5, 2, 7, 2], [5, 1, 3, 3], [5, 2, 7, 4]])
    flips, distinct, mode = modal(values)
    assert flips.tolist() == [0, 2, 1, 3]
    assert distinct.tolist() == [1, 2, 2, 4]
    assert mode.tolist() == [5, 1, 7, 1]
    # one repeat: nothing can flip
    flips, distinct, mode = modal(np.array([[3, 9]]))
    assert flips.tolist() == [0, 0] and distinct.tolist() == [1, 1] and mode.tolist() == [3, 9]


def test_modal_agrees_with_value_counts_on_random_columns():
    rng = np.random.default_rng(7)
    values = rng.integers(0, 4, size=(9, 300))
    flips, distinct, mode = modal(values)
    for q in range(values.shape[1]):
        counts = pd.Series(values[:, q]).value_counts()
        best = counts.max()
        assert flips[q] == 9 - best and distinct[q] == len(counts)
        assert mode[q] == min(counts[counts == best].index)


def test_flakiness_columns_hand_worked():
    nan = np.nan
    # 3 repeats × 3 queries: q0 found at 1,1,4; q1 missed once (rank 2, miss, 2); q2 has no gold
    ranks = np.array([[1, 2, nan], [1, nan, nan], [4, 2, nan]])
    hit1 = np.array([[1, 0, nan], [1, 0, nan], [0, 0, nan]])
    hit3 = np.array([[1, 1, nan], [1, 0, nan], [0, 1, nan]])
    refused = [pd.Series([False, True, pd.NA], dtype="boolean")] * 3
    answers = [
        pd.Series(["a", "x", pd.NA], dtype="string"),
        pd.Series(["b", "x", pd.NA], dtype="string"),
        pd.Series(["a", "x", pd.NA], dtype="string"),
    ]
    table, modal_rank, _ = flakiness_columns(
        ranks, [hit1, hit3], refused, answers, np.array([True, True, False])
    )
    row = table.astype(object).where(table.notna(), None).to_dict("records")
    assert row[0] == {
        "repeats": 3,
        "flips": 2,  # (1, a), (1, b), (4, a): three different whole outcomes
        "rank_flips": 1,
        "distinct_ranks": 2,
        "rank_best": 1,
        "rank_worst": 4,
        "miss_repeats": 0,
        "hit_flips": 1,
        "refusal_flips": 0,
        "answer_flips": 1,
    }
    assert row[1] == {
        "repeats": 3,
        "flips": 1,
        "rank_flips": 1,
        "distinct_ranks": 2,
        "rank_best": 2,
        "rank_worst": 2,
        "miss_repeats": 1,
        "hit_flips": 1,
        "refusal_flips": 0,
        "answer_flips": 0,
    }
    # no gold, no answer: only the whole-outcome flips and the repeat count apply
    assert row[2] == {
        "repeats": 3,
        "flips": 0,
        "rank_flips": None,
        "distinct_ranks": None,
        "rank_best": None,
        "rank_worst": None,
        "miss_repeats": None,
        "hit_flips": None,
        "refusal_flips": None,
        "answer_flips": None,
    }
    assert modal_rank[:2].tolist() == [1.0, 2.0] and np.isnan(modal_rank[2])
    assert MISS > 10**18


def test_noise_floor_is_the_sample_std_and_range_of_the_per_repeat_values():
    per_repeat = pd.DataFrame(
        {
            "repeat": pd.array([1, 2, 3, 1, 2, 3], dtype="int32"),
            "metric": pd.array(["mrr"] * 3 + ["chr"] * 3, dtype="string"),
            "value": pd.array([0.5, 0.6, 0.7, None, 0.25, None], dtype="Float64"),
        }
    )
    floor = noise_floor(per_repeat).set_index("metric")
    assert floor.loc["mrr", "std"] == 0.1 and floor.loc["mrr", "spread"] == 0.2  # sqrt(0.02 / 2)
    assert floor.loc["mrr", "mean"] == 0.6 and floor.loc["mrr", "repeats"] == 3
    assert floor.loc["mrr", "se"] == round(0.1 / np.sqrt(3), 4)  # the standard error of the mean
    assert floor.loc["chr", "repeats"] == 1 and np.isnan(floor.loc["chr", "std"])
    assert floor.loc["chr", "spread"] == 0.0
