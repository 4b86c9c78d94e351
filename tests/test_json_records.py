"""foundation/json_records: a table as JSON records, converted a column at a time, gives exactly
what converting each value of ``DataFrame.to_dict("records")`` gives, for every column type a
stored table holds (NumPy numbers with NaN, nullable and Arrow-backed columns, categories,
timestamps, arrays and mappings in object columns), and it serialises to the same JSON."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from kebab_eval_pipeline.foundation.json_records import json_records, json_text, plain_value


def per_value(frame: pd.DataFrame) -> list[dict]:
    """The reference: every value of every row through plain_value."""
    return [{k: plain_value(v) for k, v in row.items()} for row in frame.to_dict("records")]


def same(a, b) -> bool:
    """Equal values of equal types (a NaN equals a NaN; NaT equals NaT)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if a is pd.NaT:
        return b is pd.NaT
    return a == b


floats = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.just(float("nan")))
floats32 = st.one_of(st.floats(width=32), st.just(float("nan")))
maybe_int = st.one_of(st.none(), st.integers(-(2**40), 2**40))
maybe_text = st.one_of(st.none(), st.text(max_size=5))


@st.composite
def frames(draw) -> pd.DataFrame:
    n = draw(st.integers(0, 6))
    makers = {
        "float64": lambda: np.array(draw(st.lists(floats, min_size=n, max_size=n)), dtype=np.float64),
        "float32": lambda: np.array(draw(st.lists(floats32, min_size=n, max_size=n)), dtype=np.float32),
        "int64": lambda: np.array(
            draw(st.lists(st.integers(-(2**62), 2**62), min_size=n, max_size=n)), dtype=np.int64
        ),
        "uint8": lambda: np.array(
            draw(st.lists(st.integers(0, 255), min_size=n, max_size=n)), dtype=np.uint8
        ),
        "bool": lambda: np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool),
        "Int64": lambda: pd.array(draw(st.lists(maybe_int, min_size=n, max_size=n)), dtype="Int64"),
        "Float64": lambda: pd.array(
            draw(st.lists(st.one_of(st.none(), st.floats(allow_nan=False)), min_size=n, max_size=n)),
            dtype="Float64",
        ),
        "boolean": lambda: pd.array(
            draw(st.lists(st.one_of(st.none(), st.booleans()), min_size=n, max_size=n)), dtype="boolean"
        ),
        "string": lambda: pd.array(draw(st.lists(maybe_text, min_size=n, max_size=n)), dtype="string"),
        "arrow string": lambda: pd.array(
            draw(st.lists(maybe_text, min_size=n, max_size=n)), dtype="string[pyarrow]"
        ),
        "category": lambda: pd.Categorical(
            draw(st.lists(st.sampled_from(["a", "b", None]), min_size=n, max_size=n))
        ),
        "datetime": lambda: pd.to_datetime(
            draw(st.lists(st.one_of(st.none(), st.integers(0, 2**40)), min_size=n, max_size=n)), unit="s"
        ),
        "object": lambda: pd.Series(
            draw(
                st.lists(
                    st.one_of(
                        st.none(),
                        floats,
                        maybe_text,
                        st.lists(floats, max_size=3).map(np.array),
                        st.lists(st.one_of(st.none(), st.integers(0, 9)), max_size=3),
                        st.dictionaries(st.sampled_from(["x", "y"]), st.integers(0, 9), max_size=2),
                        st.integers(0, 9).map(np.int64),
                    ),
                    min_size=n,
                    max_size=n,
                )
            ),
            dtype=object,
        ),
    }
    kinds = draw(st.lists(st.sampled_from(sorted(makers)), max_size=6))
    frame = pd.DataFrame({f"c{i}-{kind}": makers[kind]() for i, kind in enumerate(kinds)}, index=range(n))
    return frame


@settings(max_examples=300)
@given(frames())
def test_column_wise_records_equal_value_wise_ones(frame):
    got, expected = json_records(frame), per_value(frame)
    assert len(got) == len(expected) == len(frame)
    for row, want in zip(got, expected, strict=True):
        assert list(row) == list(want)
        assert all(same(row[k], want[k]) for k in want), (row, want)


def test_numbers_missing_values_and_arrays_as_json():
    frame = pd.DataFrame(
        {
            "score": [0.5, np.nan],
            "rank": np.array([1, 2], dtype=np.int64),
            "ok": [True, False],
            "level": pd.array([3, None], dtype="Int64"),
            "hits": [np.array([1.0, np.nan]), None],
        }
    )
    assert json_records(frame) == [
        {"score": 0.5, "rank": 1, "ok": True, "level": 3, "hits": [1.0, None]},
        {"score": None, "rank": 2, "ok": False, "level": None, "hits": None},
    ]
    assert json_text(json_records(frame)) == json_text(per_value(frame))
    assert json_records(pd.DataFrame(index=range(2))) == [{}, {}]
