"""Arrow tables read back as the DataFrames that were written, without an object per empty list.

``Table.to_pandas`` turns every value of a list column into a NumPy array of its own: the hits'
``heading_path`` (a list per hit, empty for nearly every system but the reference one) became ten
million empty arrays for a million queries × 10 hits — about 1 GiB, and the largest cost of the
step that merges a sharded run's retrieval. Here every empty list is one shared, read-only empty
array; lists with values and nulls are converted as ``to_pandas`` converts them.
"""

from __future__ import annotations

from collections.abc import Sequence

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


def table_to_frame(table: pa.Table, categorical: Sequence[str] = ()) -> pd.DataFrame:
    """``table.to_pandas()`` (its pandas metadata restores the written dtypes), list columns as
    :func:`list_objects` gives them, the dictionary columns named in ``categorical`` as
    :func:`dictionary_categorical` gives them, in the table's column order."""
    special = [
        (i, f.name)
        for i, f in enumerate(table.schema)
        if _is_list(f.type) or (f.name in categorical and pa.types.is_dictionary(f.type))
    ]
    if not special or table.num_rows == 0:
        return table.to_pandas()
    # pandas metadata would rebuild a written ``string`` column from a dictionary one string per
    # row (what reading it as a dictionary avoids): such columns are converted here instead.
    frame = table.drop_columns([name for _, name in special]).to_pandas()
    converted = {}
    for _, name in special:
        column = table.column(name)
        converted[name] = list_objects(column) if _is_list(column.type) else dictionary_categorical(column)
    if frame.columns.has_duplicates or len(frame.columns) + len(special) != table.num_columns:
        for position, name in special:  # a table pandas renamed or duplicated columns of
            frame.insert(position, name, converted[name])
        return frame
    # One frame over the converted arrays as they are: ``DataFrame.insert`` copies each inserted
    # array (the codes of 10M hits' query ids: 40 MB of fresh memory, 0.1 s in a new process).
    out = pd.DataFrame(
        {name: converted[name] if name in converted else frame[name] for name in table.column_names},
        index=frame.index,
        copy=False,
    )
    out.columns.name = frame.columns.name
    return out


def dictionary_categorical(column: pa.ChunkedArray | pa.DictionaryArray) -> pd.Categorical:
    """A dictionary-encoded string column as a pandas ``Categorical`` over one shared dictionary:
    categories are Arrow-backed strings (no Python object per value), codes the int32 indices
    (-1 for null). Chunks read from different Parquet row groups have dictionaries of their own:
    they are unified first (a hash of the distinct values, not of the rows)."""
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    value_type = column.type.value_type
    maps: list[np.ndarray | None] = [None] * len(chunks)
    if not chunks:
        dictionary = pa.array([], value_type)
    elif len(chunks) == 1:
        dictionary = chunks[0].dictionary
    else:
        # Unified as ``unify_dictionaries`` unifies them (values in order of first appearance,
        # chunk after chunk), each chunk's indices then mapped straight into the one codes array:
        # ``unify_dictionaries`` would write every chunk's indices anew (40 MB at 10M hits) before
        # they are copied once more into the codes.
        # One hash pass over the chunks' dictionaries gives the unified one and where each entry is.
        encoded = pc.dictionary_encode(pa.concat_arrays([c.dictionary for c in chunks]))
        dictionary = encoded.dictionary
        where = pc.fill_null(encoded.indices, -1).to_numpy().astype(np.int32, copy=False)
        bounds = np.cumsum([len(c.dictionary) for c in chunks])[:-1]
        maps = list(np.split(where, bounds))
    # one copy of the indices (each chunk's buffer is read in place); nulls become -1
    codes = np.empty(sum(len(c) for c in chunks), dtype=np.int32)
    start = 0
    for chunk, mapping in zip(chunks, maps, strict=True):
        indices = chunk.indices
        values = (
            indices.to_numpy(zero_copy_only=False)
            if indices.null_count == 0
            else pc.fill_null(indices, -1).to_numpy()
        )
        part = codes[start : start + len(chunk)]
        if mapping is None:
            part[:] = values
        else:  # index -1 (null) takes the appended -1
            np.take(np.append(mapping, np.int32(-1)), values, out=part)
        start += len(chunk)
    categories = pd.Index(pd.arrays.ArrowStringArray(_large(dictionary)))
    # The codes index the unified dictionary by construction: no need to validate them again.
    return pd.Categorical.from_codes(codes, dtype=pd.CategoricalDtype(categories), validate=False)


def _large(values: pa.Array) -> pa.Array:
    return values if values.type == pa.large_string() else values.cast(pa.large_string())
