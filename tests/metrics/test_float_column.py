"""metrics/columns.float_column: a column as float64 with a chosen value for nulls — the fast path
for NumPy and masked numeric columns gives exactly what the general path (``astype("Float64")``)
gives, for every dtype a stored table or a merge produces and for each null value the callers use
(NaN, 0, inf, a large sentinel)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from kebab_eval_pipeline.metrics.columns import float_column

maybe_float = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True, width=64))
maybe_int = st.one_of(st.none(), st.integers(-(2**50), 2**50))


@st.composite
def columns(draw) -> pd.Series:
    n = draw(st.integers(0, 8))
    kind = draw(
        st.sampled_from(["float64", "float32", "int64", "bool", "Float64", "Int64", "boolean", "object"])
    )
    if kind in ("float64", "float32"):
        values = [np.nan if v is None else v for v in draw(st.lists(maybe_float, min_size=n, max_size=n))]
        with np.errstate(over="ignore"):
            return pd.Series(np.array(values, dtype=kind))
    if kind == "int64":
        return pd.Series(
            np.array(draw(st.lists(st.integers(-(2**50), 2**50), min_size=n, max_size=n)), dtype=kind)
        )
    if kind == "bool":
        return pd.Series(np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool))
    if kind == "Float64":
        floats = st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=True))
        return pd.Series(pd.array(draw(st.lists(floats, min_size=n, max_size=n)), dtype=kind))
    if kind == "Int64":
        return pd.Series(pd.array(draw(st.lists(maybe_int, min_size=n, max_size=n)), dtype=kind))
    if kind == "boolean":
        return pd.Series(
            pd.array(draw(st.lists(st.one_of(st.none(), st.booleans()), min_size=n, max_size=n)), dtype=kind)
        )
    # object: what a merge of integer ranks with missing rows can give
    return pd.Series(draw(st.lists(maybe_int, min_size=n, max_size=n)), dtype=object)


@settings(max_examples=300)
@given(columns(), st.sampled_from([np.nan, 0.0, np.inf, 1e9]))
def test_fast_path_equals_the_general_conversion(column, na_value):
    frame = pd.DataFrame({"x": column})
    before = frame["x"].copy()
    got = float_column(frame, "x", na_value)
    expected = column.astype("Float64").to_numpy(dtype=np.float64, na_value=na_value)
    assert got.dtype == np.float64 and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)  # NaN equals NaN here
    got[:] = 7.0  # a new array: the frame is untouched
    pd.testing.assert_series_equal(frame["x"], before)


def test_nulls_and_nan_take_the_null_value():
    frame = pd.DataFrame(
        {"f": [1.5, np.nan], "i": pd.array([2, None], dtype="Int64"), "o": pd.Series([3, None], dtype=object)}
    )
    for column in ("f", "i", "o"):
        assert float_column(frame, column)[0] in (1.5, 2.0, 3.0) and np.isnan(float_column(frame, column)[1])
        assert float_column(frame, column, 0.0)[1] == 0.0 and float_column(frame, column, np.inf)[1] == np.inf
