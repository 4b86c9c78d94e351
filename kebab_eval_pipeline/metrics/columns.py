"""Arrow/NumPy column helpers shared by matching and the metric kernels.

Whole columns in, whole columns out: strings as Arrow ``large_string`` arrays (zero-copy from
pandas' Arrow-backed strings), lookups and joins by Arrow compute kernels and Acero's hash join,
elementwise string tests by NumPy's ``StringDType`` ufuncs — never a Python loop over rows.
"""

from __future__ import annotations

import concurrent.futures
import os
from collections.abc import Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from numpy.dtypes import StringDType

__all__ = [
    "arrow_to_pandas_string",
    "as_large_string",
    "concat_strings",
    "contains_each",
    "contiguous",
    "count_codes",
    "equi_join",
    "float_column",
    "int_column",
    "key_codes",
    "key_counts",
    "key_space",
    "key_values",
    "lookup_codes",
    "null_mask",
    "sorted_unique",
    "starts_with_each",
    "string_column",
    "take_rows",
]


def string_column(
    frame: pd.DataFrame, column: str, *, empty_as_null: bool = True
) -> pa.Array | pa.ChunkedArray:
    """``frame[column]`` as Arrow ``large_string`` (all-null when the column is absent).

    Zero-copy for pandas' Arrow-backed string dtypes (the result may then be chunked).
    ``empty_as_null`` turns ``""`` into null.
    """
    if column not in frame.columns:
        return pa.nulls(len(frame), type=pa.large_string())
    arr = as_large_string(pa.array(frame[column], from_pandas=True))
    if empty_as_null and len(arr) and arr.null_count < len(arr):
        empty = pc.equal(arr, "")
        if pc.any(empty).as_py():
            arr = pc.if_else(empty, pa.scalar(None, pa.large_string()), arr)
    return arr


def key_codes(frame: pd.DataFrame, column: str, value_set: pa.Array, dtype=np.int64) -> np.ndarray:
    """Position of each row's ``frame[column]`` in ``value_set`` (``dtype``, int64 by default;
    -1 for null, ``""``, a value not in it, or an absent column) — ``lookup_codes(string_column(
    frame, column), value_set)``.

    A ``Categorical`` column (a key read from its Parquet dictionary pages,
    :func:`kebab_eval_pipeline.store.artifact_store.read_frame`) is looked up once per category
    and its codes mapped: no string is built per row."""
    if column not in frame.columns:
        return np.full(len(frame), -1, dtype=dtype)
    values = frame[column]
    if not isinstance(values.dtype, pd.CategoricalDtype):
        return lookup_codes(string_column(frame, column), value_set).astype(dtype, copy=False)
    per_category = lookup_codes(_categories(values), value_set, runs=False).astype(dtype)
    # code -1 (null) takes the appended -1
    return _take(np.append(per_category, per_category.dtype.type(-1)), values.array.codes)


def key_counts(frame: pd.DataFrame, column: str, value_set: pa.Array) -> np.ndarray:
    """How many rows of ``frame`` hold each entry of ``value_set`` in ``column`` (int64, aligned
    with ``value_set``): ``count_codes`` of the column, by codes for a ``Categorical`` one."""
    values = frame[column] if column in frame.columns else None
    if values is None or not isinstance(values.dtype, pd.CategoricalDtype):
        return count_codes(string_column(frame, column), value_set)
    per_category = lookup_codes(_categories(values), value_set, runs=False)
    codes = values.array.codes
    if len(codes) and codes.min() < 0:  # nulls (code -1) belong to no entry
        codes = codes[codes >= 0]
    by_category = _bincount(codes, len(per_category))
    known = per_category >= 0
    return np.bincount(per_category[known], weights=by_category[known], minlength=len(value_set)).astype(
        np.int64
    )


#: Rows per block where a whole-array conversion to intp would copy 10M hits at once.
_BLOCK_ROWS = 1 << 20


def _bincount(codes: np.ndarray, n: int) -> np.ndarray:
    """``np.bincount(codes, minlength=n)`` of non-negative codes, a block of rows at a time:
    ``np.bincount`` first converts its input to ``intp``, a copy of the whole array (80 MB of fresh
    memory for the int32 codes of 10M hits); a block's copy is reused."""
    if codes.dtype == np.intp or len(codes) <= _BLOCK_ROWS:
        return np.bincount(codes, minlength=n)
    out = np.zeros(n, dtype=np.intp)
    for start in range(0, len(codes), _BLOCK_ROWS):
        out += np.bincount(codes[start : start + _BLOCK_ROWS], minlength=n)
    return out


def key_space(frame: pd.DataFrame, column: str) -> tuple[np.ndarray, pa.Array] | None:
    """For a ``Categorical`` ``frame[column]`` (a key read from its Parquet dictionary pages): its
    codes as they are (-1 for null) and its categories as ``large_string`` (``""`` as null), so a
    join can look the other side up among the categories rather than give every row a code of its
    own. None for any other column (or an absent one)."""
    values = frame[column] if column in frame.columns else None
    if values is None or not isinstance(values.dtype, pd.CategoricalDtype):
        return None
    return values.array.codes, _categories(values)


def _take(table: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """``table[codes]`` (codes may be -1: the last entry), a block of rows at a time: NumPy turns
    int32 indices into ``intp`` first, a copy of the whole array (80 MB at 10M hits)."""
    if codes.dtype == np.intp or len(codes) <= _BLOCK_ROWS:
        return table[codes]
    out = np.empty(len(codes), dtype=table.dtype)
    for start in range(0, len(codes), _BLOCK_ROWS):
        stop = start + _BLOCK_ROWS
        np.take(table, codes[start:stop], out=out[start:stop])
    return out


def key_values(frame: pd.DataFrame, column: str, rows: np.ndarray) -> pa.Array:
    """``take_rows(string_column(frame, column), rows)``: the column's values at ``rows`` as one
    ``large_string`` array (``""`` as null); from the categories for a ``Categorical`` column."""
    values = frame[column] if column in frame.columns else None
    if values is None or not isinstance(values.dtype, pd.CategoricalDtype):
        return as_large_string(take_rows(string_column(frame, column), rows))
    codes = values.array.codes[np.asarray(rows, dtype=np.int64)]
    return _categories(values).take(pa.array(codes, mask=codes < 0))


def _categories(values: pd.Series) -> pa.Array:
    """The categories of a string ``Categorical`` column as ``large_string`` (``""`` as null)."""
    categories = as_large_string(pa.array(values.cat.categories.array, from_pandas=True))
    empty = pc.equal(categories, "")
    if len(categories) and pc.any(empty).as_py():
        categories = pc.if_else(empty, pa.scalar(None, pa.large_string()), categories)
    return categories


_MASKED_NUMERIC = (pd.arrays.FloatingArray, pd.arrays.IntegerArray, pd.arrays.BooleanArray)


def float_column(qs: pd.DataFrame, column: str, na_value: float = np.nan) -> np.ndarray:
    """Column ``column`` of ``qs`` as a new float64 array, ``na_value`` (NaN by default) where null
    or NaN (a numpy numeric, bool or masked ``Float64``/``Int64``/``boolean`` column, or anything
    ``astype("Float64")`` accepts).

    Called once per metric column per comparison, slice and breakdown: numeric columns convert
    directly (~4x cheaper than going through ``Float64``, same values); others take the general path."""
    col = qs[column]
    if isinstance(col.dtype, np.dtype) and col.dtype.kind in "fiub":
        # (to_numpy with a non-NaN na_value returns a view of a column without NaN, copy or not)
        values = col.to_numpy(dtype=np.float64, copy=True)
        if not np.isnan(na_value):
            values[np.isnan(values)] = na_value
        return values
    if isinstance(col.array, _MASKED_NUMERIC):
        return col.to_numpy(dtype=np.float64, na_value=na_value, copy=True)
    return col.astype("Float64").to_numpy(dtype=np.float64, na_value=na_value)


def int_column(frame: pd.DataFrame, column: str) -> np.ndarray:
    """``frame[column]`` as float64 (NaN for null or an absent column) — exact for any line number."""
    if column not in frame.columns:
        return np.full(len(frame), np.nan)
    return float_column(frame, column)


def lookup_codes(values: pa.Array | pa.ChunkedArray, value_set: pa.Array, *, runs: bool = True) -> np.ndarray:
    """Position of each value in ``value_set`` (int64; -1 for null or absent values).

    ``value_set`` must hold distinct values. With ``runs`` (the default) consecutive equal values
    are looked up once — a hits table grouped by query costs one lookup per query, not per hit.
    Large inputs are split across threads (Arrow releases the GIL).
    """
    values = as_large_string(values)
    value_set = as_large_string(value_set)
    n = len(values)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    if len(value_set) == 0:
        return np.full(n, -1, dtype=np.int64)
    grouped = _runs(values) if runs else None
    if grouped is not None:
        run_values, lengths = grouped
        return np.repeat(_index_in(run_values, value_set), lengths)
    return _index_in(values, value_set)


def count_codes(values: pa.Array | pa.ChunkedArray, value_set: pa.Array) -> np.ndarray:
    """How often each entry of ``value_set`` occurs in ``values`` (int64, aligned with ``value_set``).

    Same as ``np.bincount(lookup_codes(values, value_set))`` without materialising per-row codes
    when equal values come in runs (hits grouped by query).
    """
    values = as_large_string(values)
    value_set = as_large_string(value_set)
    counts = np.zeros(len(value_set), dtype=np.int64)
    if len(values) == 0 or len(value_set) == 0:
        return counts
    grouped = _runs(values)
    if grouped is None:
        codes = _index_in(values, value_set)
        return np.bincount(codes[codes >= 0], minlength=len(value_set)).astype(np.int64)
    run_values, lengths = grouped
    codes = _index_in(run_values, value_set)
    ok = codes >= 0
    return np.bincount(codes[ok], weights=lengths[ok], minlength=len(value_set)).astype(np.int64)


def _runs(values: pa.Array | pa.ChunkedArray) -> tuple[pa.Array | pa.ChunkedArray, np.ndarray] | None:
    """(value of each run, run length) when runs of equal values make lookups ≥ 4× cheaper, else None."""
    n = len(values)
    if n <= 1024:
        return None
    change = pc.fill_null(pc.not_equal(values[1:], values[:-1]), True)
    starts = np.concatenate(([0], pc.indices_nonzero(change).to_numpy().astype(np.int64) + 1))
    if len(starts) * 4 > n:
        return None
    return take_rows(values, starts), np.diff(np.append(starts, n))


def equi_join(
    left: Sequence[pa.Array | pa.ChunkedArray], right: Sequence[pa.Array | pa.ChunkedArray]
) -> tuple[np.ndarray, np.ndarray]:
    """All pairs ``(i, j)`` whose key columns are equal (and non-null) on both sides.

    ``left`` and ``right`` are parallel lists of key columns (e.g. ``[query_id, chunk_id]``);
    ``left`` is the big side (hits), ``right`` the small one (supports, citations), on which the
    hash table is built. Arrow's multi-threaded hash join (Acero) does the work. Returns two int64
    position arrays, sorted by left position then right position.
    """
    n_left, n_right = len(left[0]), len(right[0])
    if n_left == 0 or n_right == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    keys = [f"k{n}" for n in range(len(left))]
    left_keys, right_keys = [_join_key(a) for a in left], [_join_key(a) for a in right]
    for n, (a, b) in enumerate(zip(left_keys, right_keys, strict=True)):
        if {a.type, b.type} == {pa.string(), pa.large_string()}:  # one side too big for 32-bit offsets
            left_keys[n], right_keys[n] = as_large_string(a), as_large_string(b)
    if n_left + n_right <= _SMALL_JOIN:
        small = _small_join(left_keys, right_keys)
        if small is not None:
            return small
    lt = pa.table({**dict(zip(keys, left_keys, strict=True)), "__i": _positions(n_left)})
    rt = pa.table({**dict(zip(keys, right_keys, strict=True)), "__j": _positions(n_right)})
    out = lt.join(rt, keys=keys, join_type="inner", use_threads=True)
    i = out.column("__i").to_numpy().astype(np.int64, copy=False)
    j = out.column("__j").to_numpy().astype(np.int64, copy=False)
    order = np.lexsort((j, i))
    return i[order], j[order]


# Below this many rows on both sides together, equi_join sorts codes in NumPy: Acero's plan setup
# (and its first import, ~20 ms) costs more than the whole join of a demo-sized run.
_SMALL_JOIN = 50_000


def _small_join(left: list, right: list) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`equi_join` of small inputs without Acero, same pairs in the same order; None for key
    types it does not handle (a float key, or two sides of different types)."""
    n_left = len(left[0])
    if len(left) > 3:  # the composite code below stays within int64 for up to 3 keys
        return None
    composite = None
    for a, b in zip(left, right, strict=True):
        if a.type != b.type or not (
            pa.types.is_string(a.type) or pa.types.is_large_string(a.type) or pa.types.is_integer(a.type)
        ):
            return None
        chunks = [c for x in (a, b) for c in (x.chunks if isinstance(x, pa.ChunkedArray) else [x])]
        # One array, one dictionary: equal values get equal codes (nulls stay null: never join).
        encoded = pc.dictionary_encode(pa.concat_arrays(chunks))
        codes = pc.fill_null(encoded.indices, -1).to_numpy().astype(np.int64)
        width = np.int64(len(encoded.dictionary))
        composite = (
            codes
            if composite is None
            else np.where((composite < 0) | (codes < 0), -1, composite * width + codes)
        )
    left_codes, right_codes = composite[:n_left], composite[n_left:]
    order = np.argsort(right_codes, kind="stable")  # right positions ascending within a key
    sorted_codes = right_codes[order]
    lo = np.searchsorted(sorted_codes, left_codes, side="left")
    hi = np.searchsorted(sorted_codes, left_codes, side="right")
    count = np.where(left_codes >= 0, hi - lo, 0)
    i = np.repeat(np.arange(n_left, dtype=np.int64), count)
    # Position of each pair within its left row's run of matches.
    within = np.arange(len(i), dtype=np.int64) - np.repeat(np.cumsum(count) - count, count)
    j = order[np.repeat(lo, count) + within].astype(np.int64)
    return i, j


def take_rows(values: pa.Array | pa.ChunkedArray, rows: np.ndarray) -> pa.Array:
    """``values.take(rows)`` as one contiguous array, taken chunk by chunk.

    ``ChunkedArray.take`` on a string column read from Parquet (tens of chunks) cost up to 0.5 s
    in a fresh process for 100k rows of 10M — it builds the whole column anew — against ~10 ms
    chunk by chunk (pyarrow 26).
    """
    rows = np.asarray(rows, dtype=np.int64)
    if not isinstance(values, pa.ChunkedArray):
        return values.take(pa.array(rows))
    if values.num_chunks == 1:
        return values.chunk(0).take(pa.array(rows))
    if values.num_chunks == 0 or len(rows) == 0:
        return pa.array([], type=values.type)
    bounds = np.cumsum([0] + [len(c) for c in values.chunks], dtype=np.int64)
    which = np.searchsorted(bounds, rows, side="right") - 1
    grouped = bool(np.all(which[1:] >= which[:-1]))
    order = np.arange(len(rows)) if grouped else np.argsort(which, kind="stable")
    cuts = np.searchsorted(which[order], np.arange(values.num_chunks + 1))
    parts = [
        values.chunk(c).take(pa.array(rows[order[cuts[c] : cuts[c + 1]]] - bounds[c]))
        for c in range(values.num_chunks)
        if cuts[c + 1] > cuts[c]
    ]
    taken = pa.concat_arrays(parts)
    if not grouped:
        inverse = np.empty_like(order)
        inverse[order] = np.arange(len(order))
        taken = taken.take(pa.array(inverse))
    return taken


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """``np.unique(values)`` of a 1-d array, by sort + mask. NumPy 2.x answers ``np.unique``
    without ``return_index``/``return_inverse``/``return_counts`` from a hash table, which measured
    15–50× slower than this on 150k int64 keys (numpy 2.4)."""
    out = np.sort(values)
    if len(out) > 1:
        out = out[np.concatenate(([True], out[1:] != out[:-1]))]
    return out


def concat_strings(*parts: pa.Array | str) -> pa.Array:
    """Elementwise concatenation of string arrays and constants (null when any array part is null)."""
    args = [pa.scalar(p, pa.large_string()) if isinstance(p, str) else as_large_string(p) for p in parts]
    return pc.binary_join_element_wise(*args, pa.scalar("", pa.large_string()))


def arrow_to_pandas_string(values: pa.Array | pa.ChunkedArray) -> pd.api.extensions.ExtensionArray:
    """An Arrow string array as pandas' ``string`` dtype (Arrow-backed, zero-copy)."""
    return pd.arrays.ArrowStringArray(as_large_string(values))


def contains_each(haystack: pa.Array, needle: pa.Array) -> np.ndarray:
    """Elementwise ``needle[i] in haystack[i]`` (bool); False where either side is null."""
    missing = null_mask(haystack) | null_mask(needle)
    hay = np.asarray(
        pc.fill_null(as_large_string(haystack), "").to_numpy(zero_copy_only=False), StringDType()
    )
    ndl = np.asarray(pc.fill_null(as_large_string(needle), "").to_numpy(zero_copy_only=False), StringDType())
    return (np.strings.find(hay, ndl) >= 0) & ~missing


def starts_with_each(values: pa.Array, prefix: pa.Array) -> np.ndarray:
    """Elementwise ``values[i].startswith(prefix[i])`` (bool); False where either side is null."""
    missing = null_mask(values) | null_mask(prefix)
    val = np.asarray(pc.fill_null(as_large_string(values), "").to_numpy(zero_copy_only=False), StringDType())
    pre = np.asarray(pc.fill_null(as_large_string(prefix), "").to_numpy(zero_copy_only=False), StringDType())
    return np.strings.startswith(val, pre) & ~missing


def as_large_string(values: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    if isinstance(values, pa.ChunkedArray) and values.num_chunks == 1:
        values = values.chunk(0)
    if values.type != pa.large_string():
        values = values.cast(pa.large_string())
    return values


def contiguous(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """One array of ``values``: a chunked column's chunks combined (a single chunk taken as it is)."""
    if isinstance(values, pa.ChunkedArray):
        return values.combine_chunks() if values.num_chunks != 1 else values.chunk(0)
    return values


def _join_key(values: pa.Array | pa.ChunkedArray | np.ndarray) -> pa.Array | pa.ChunkedArray:
    """A join key column. Strings become 32-bit-offset ``string`` chunks when they fit: Arrow's
    hash join is about twice as fast on those as on ``large_string``. The cast only rewrites the
    offsets (the character data is shared) and the chunks are kept: combining them would copy
    every string for a slower join overall."""
    if isinstance(values, np.ndarray):
        return pa.array(values)
    if pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
        try:
            return values.cast(pa.string())
        except (pa.ArrowInvalid, pa.ArrowCapacityError):  # a chunk with > 2 GiB of text
            return as_large_string(values)
    return values


def _positions(n: int) -> np.ndarray:
    """Row positions 0..n-1, as int32 when they fit (half the memory of int64)."""
    return np.arange(n, dtype=np.int32 if n < 2**31 else np.int64)


def null_mask(values: pa.Array) -> np.ndarray:
    if values.null_count == 0:
        return np.zeros(len(values), dtype=bool)
    return values.is_null().to_numpy(zero_copy_only=False)


_PARALLEL_MIN = 2_000_000


def _index_in(values: pa.Array, value_set: pa.Array) -> np.ndarray:
    n = len(values)
    workers = min(os.cpu_count() or 1, 8)
    if n < _PARALLEL_MIN or workers < 2:
        return pc.fill_null(pc.index_in(values, value_set=value_set), -1).to_numpy().astype(np.int64)
    bounds = np.linspace(0, n, workers + 1, dtype=np.int64)

    def part(b: tuple[int, int]) -> np.ndarray:
        chunk = values.slice(b[0], b[1] - b[0])
        return pc.fill_null(pc.index_in(chunk, value_set=value_set), -1).to_numpy().astype(np.int64)

    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        parts = list(pool.map(part, zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True)))
    return np.concatenate(parts)
