"""The labelling order: every prefix proportionally stratified by slice × judge verdict, seeded,
and independent of the order the run listed its items in."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kebab_eval_pipeline.judge.label_sample import labelling_order
from kebab_eval_pipeline.judge.labels import item_hash


def _items(sizes: dict[tuple[str, bool], int]) -> pd.DataFrame:
    rows = []
    for (slice_name, passes), size in sizes.items():
        for i in range(size):
            score = 4.0 if passes else 1.0
            rows.append(
                {
                    "item_hash": item_hash(f"{slice_name}{passes}{i}"),
                    "slice": slice_name,
                    "judge_score": score,
                }
            )
    return pd.DataFrame(rows, columns=["item_hash", "slice", "judge_score"])


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(
        st.tuples(st.sampled_from(["howto", "faq", "api"]), st.booleans()), st.integers(1, 40), min_size=1
    ),
    st.integers(0, 2**31),
)
# 1.03 items off at prefix 20 under the "largest deficit first" rule (a fresh-clone run found it)
@example(
    {("howto", False): 1, ("howto", True): 14, ("faq", False): 1, ("faq", True): 14, ("api", False): 1}, 0
)
def test_every_prefix_holds_each_stratum_in_its_share(sizes, seed):
    items = _items(sizes)
    order = labelling_order(items, 3.0, seed)
    assert len(order) == len(items) and set(order["item_hash"]) == set(items["item_hash"])
    total = len(items)
    counts = {f"{s} / {'pass' if p else 'fail'}": n for (s, p), n in sizes.items()}
    for n in range(1, total + 1):
        seen = order["stratum"].head(n).value_counts()
        for stratum, size in counts.items():
            share = n * size / total
            assert abs(seen.get(stratum, 0) - share) < 1.0 + 1e-9, (n, stratum)


def test_seeded_stable_and_blind_to_input_order():
    items = _items({("howto", True): 12, ("howto", False): 5, ("faq", True): 7})
    first = labelling_order(items, 3.0, seed=7)
    shuffled = labelling_order(items.sample(frac=1.0, random_state=3), 3.0, seed=7)
    assert list(first["item_hash"]) == list(shuffled["item_hash"])
    other = labelling_order(items, 3.0, seed=8)
    assert list(other["item_hash"]) != list(first["item_hash"])


def test_unscored_items_are_left_out_and_the_pass_score_sets_the_band():
    items = _items({("howto", True): 3}).assign(judge_score=[3.0, 2.9, np.nan])
    order = labelling_order(items, 3.0)
    assert sorted(order["stratum"]) == ["howto / fail", "howto / pass"]
    assert labelling_order(items.iloc[[2]], 3.0).empty
