"""Stored tables read back without an object per empty list (store/frames.py): the same frame
``to_pandas`` gives, value for value, with one shared read-only empty array."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kebab_eval_pipeline.store.frames import EMPTY_LIST, table_to_frame

heading = st.one_of(st.none(), st.lists(st.one_of(st.none(), st.text(max_size=5)), max_size=3))


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return list(a) == list(b)


@settings(max_examples=150, deadline=None)
@given(
    rows=st.lists(st.tuples(st.text(max_size=4), heading, st.integers(-5, 5)), max_size=40),
    chunks=st.integers(1, 3),
)
def test_table_to_frame_equals_to_pandas_value_for_value(rows, chunks):
    frame = pd.DataFrame(
        {
            "query_id": pd.array([r[0] for r in rows], dtype="string"),
            "heading_path": pd.Series([r[1] for r in rows], dtype=object),
            "rank": np.array([r[2] for r in rows], dtype=np.int64),
        }
    )
    table = pa.Table.from_pandas(frame, preserve_index=False)
    size = max(1, len(rows) // chunks)
    table = pa.concat_tables([table.slice(i, size) for i in range(0, len(rows), size)] or [table])
    want, got = table.to_pandas(), table_to_frame(table)
    assert list(got.columns) == list(want.columns) == ["query_id", "heading_path", "rank"]
    assert got.dtypes.to_dict() == want.dtypes.to_dict()
    pd.testing.assert_series_equal(got["query_id"], want["query_id"])
    pd.testing.assert_series_equal(got["rank"], want["rank"])
    assert all(_same(a, b) for a, b in zip(got["heading_path"], want["heading_path"], strict=True))
    for value, written in zip(got["heading_path"], (r[1] for r in rows), strict=True):
        if written == []:
            assert value is EMPTY_LIST  # one shared array, not one per row


def test_the_shared_empty_list_cannot_be_changed_in_place():
    table = pa.table({"heading_path": pa.array([[], []], pa.list_(pa.string()))})
    value = table_to_frame(table)["heading_path"].iloc[0]
    assert value is EMPTY_LIST and len(value) == 0
    with pytest.raises(ValueError):
        value.resize(3)


def test_null_columns_are_the_flat_columns_no_row_sets(tmp_path) -> None:
    """A sparse read leaves out exactly the flat columns whose every row is null in every row group;
    a list column, a column set in one row group only, and an empty file's columns are kept."""
    import pyarrow.parquet as pq

    from kebab_eval_pipeline.store.artifact_store import _read_parquet, null_columns

    table = pa.table(
        {
            "query_id": ["a", "b", "c", "d"],
            "doc_path": pa.array([None] * 4, pa.large_string()),
            "line_start": pa.array([None, None, None, 7], pa.int64()),  # set in the 2nd row group
            "index_version": pa.array([None] * 4, pa.large_string()),
            "heading_path": pa.array([None] * 4, pa.list_(pa.string())),
        }
    )
    path = tmp_path / "hits.parquet"
    pq.write_table(table, path, row_group_size=2)
    assert null_columns(pq.read_metadata(path)) == {"doc_path", "index_version"}
    frame = _read_parquet(path, ["query_id", "doc_path", "line_start"], sparse=True)
    assert list(frame.columns) == ["query_id", "line_start"]
    assert list(_read_parquet(path, None, sparse=True).columns) == ["query_id", "line_start", "heading_path"]
    pq.write_table(table.slice(0, 0), tmp_path / "empty.parquet")
    assert null_columns(pq.read_metadata(tmp_path / "empty.parquet")) == set()


def test_keys_are_read_as_categoricals_from_the_dictionary_pages(tmp_path) -> None:
    """A column named in ``keys`` comes back as a Categorical over one dictionary unified across row
    groups (nulls as code -1), with the values the plain read gives; other columns are unchanged,
    and a key that is not a string column is read as written."""
    import pyarrow.parquet as pq

    from kebab_eval_pipeline.store.artifact_store import read_frame

    table = pa.table(
        {
            "query_id": pa.array(["q1", "q1", None, "q2", "q3", "q1", ""], pa.large_string()),
            "rank": pa.array([1, 2, 1, 1, 1, 3, 1], pa.int64()),
            "chunk_id": pa.array(["a", "b", "c", None, "e", "f", "g"], pa.large_string()),
        }
    )
    path = tmp_path / "hits.parquet"
    pq.write_table(table, path, row_group_size=3)  # three row groups, three dictionaries
    plain = read_frame(path)
    coded = read_frame(path, keys=["query_id", "rank"])
    assert isinstance(coded["query_id"].dtype, pd.CategoricalDtype)
    assert coded["query_id"].array.codes.dtype.kind == "i"  # pandas keeps the narrowest width
    assert coded["query_id"].array.codes[2] == -1
    assert sorted(coded["query_id"].cat.categories) == ["", "q1", "q2", "q3"]
    assert coded["query_id"].astype(object).where(coded["query_id"].notna(), None).tolist() == [
        "q1",
        "q1",
        None,
        "q2",
        "q3",
        "q1",
        "",
    ]
    assert coded["rank"].dtype == np.int64 and coded["rank"].tolist() == plain["rank"].tolist()
    pd.testing.assert_series_equal(coded["chunk_id"], plain["chunk_id"])
    assert list(coded.columns) == list(plain.columns)
