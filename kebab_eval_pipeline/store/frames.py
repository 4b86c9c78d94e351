"""Arrow tables read back as the DataFrames that were written, without an object per empty list.

``Table.to_pandas`` turns every value of a list column into a NumPy array of its own: the hits'
``heading_path`` (a list per hit, empty for nearly every system but the reference one) became ten
million empty arrays for a million queries × 10 hits — about 1 GiB, and the largest cost of the
step that merges a sharded run's retrieval. Here every empty list is one shared, read-only empty
array; lists with values and nulls are converted as ``to_pandas`` converts them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

#: The one value of every empty list read (read-only: no reader may append to a shared value).
EMPTY_LIST = np.array([], dtype=object)
EMPTY_LIST.flags.writeable = False


def _is_list(kind: pa.DataType) -> bool:
    return pa.types.is_list(kind) or pa.types.is_large_list(kind)


def list_objects(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A list column as an object array: None for a null, :data:`EMPTY_LIST` for an empty list,
    and the array ``to_pandas`` gives for a list with values."""
    n = len(column)
    holder = np.empty(1, dtype=object)
    holder[0] = EMPTY_LIST
    out = np.repeat(holder, n)  # n references to the one empty array, no loop
    if n == 0:
        return out
    lengths = pc.list_value_length(column)
    nulls = pc.is_null(column).to_numpy(zero_copy_only=False)
    if nulls.any():
        out[nulls] = None
    filled = pc.fill_null(pc.greater(lengths, 0), False).to_numpy(zero_copy_only=False)
    if filled.any():
        out[np.flatnonzero(filled)] = column.filter(pa.array(filled)).to_pandas().to_numpy(dtype=object)
    return out


def table_to_frame(table: pa.Table) -> pd.DataFrame:
    """``table.to_pandas()`` (its pandas metadata restores the written dtypes), list columns as
    :func:`list_objects` gives them, in the table's column order."""
    lists = [(i, f.name) for i, f in enumerate(table.schema) if _is_list(f.type)]
    if not lists or table.num_rows == 0:
        return table.to_pandas()
    frame = table.drop_columns([name for _, name in lists]).to_pandas()
    for position, name in lists:
        frame.insert(position, name, list_objects(table.column(name)))
    return frame
