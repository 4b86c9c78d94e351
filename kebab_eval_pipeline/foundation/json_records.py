"""Tables and stored values as strict JSON: pandas/NumPy/Arrow scalars as plain Python, NaN and NA as
null, and non-finite floats found and nulled with their JSON paths (JSON has no inf or NaN)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import orjson
import pandas as pd


def plain_value(value: Any) -> Any:
    """Parquet/pandas scalars → JSON values; NaN/NA → None."""
    if value is None or value is pd.NA:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if hasattr(value, "tolist") and not isinstance(value, str):
        return (
            [plain_value(v) for v in value.tolist()]
            if getattr(value, "ndim", 0)
            else plain_value(value.item())
        )
    if isinstance(value, list | tuple):
        return [plain_value(v) for v in value]
    return value


def finite_json(doc: Any, path: str = "$") -> tuple[Any, list[str]]:
    """``doc`` with every non-finite float (inf, -inf, NaN: stored by older runs, e.g. replayed
    1e308 latencies summed to inf) replaced by None, and the JSON paths of those replaced — so the
    export stays valid JSON (``allow_nan=False``) and says what it nulled."""
    if isinstance(doc, float):
        return (doc, []) if math.isfinite(doc) else (None, [path])
    if isinstance(doc, dict):
        out, found = {}, []
        for key, value in doc.items():
            out[key], sub = finite_json(value, f"{path}.{key}")
            found += sub
        return out, found
    if isinstance(doc, list | tuple):
        items, found = [], []
        for i, value in enumerate(doc):
            item, sub = finite_json(value, f"{path}[{i}]")
            items.append(item)
            found += sub
        return items, found
    return doc, []


def json_records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """A table as JSON-ready records, one dict per row keyed by column label (a repeated label:
    the last column): NaN/NA → None, arrays → lists, NumPy scalars → Python. Converted a column at
    a time — NumPy number and bool columns whole — not a value at a time (a comparison's per-query
    table was most of its JSON's cost)."""
    if frame.shape[1] == 0:
        return [{} for _ in range(len(frame))]
    names = list(frame.columns)
    columns = [_plain_column(frame.iloc[:, i]) for i in range(frame.shape[1])]
    return [dict(zip(names, row, strict=True)) for row in zip(*columns, strict=True)]


def _plain_column(column: pd.Series) -> list[Any]:
    """One column's values as :func:`plain_value` gives them."""
    kind = column.dtype.kind if isinstance(column.dtype, np.dtype) else None
    if kind in ("i", "u", "b"):
        return column.to_numpy().tolist()
    if kind == "f":
        values = column.to_numpy()
        missing = np.isnan(values)
        if not missing.any():
            return values.tolist()
        boxed = values.astype(object)
        boxed[missing] = None
        return boxed.tolist()
    return [plain_value(v) for v in column.tolist()]


def json_text(doc: Any) -> str:
    """A report document as indented JSON text ending in a newline, NumPy values as numbers.
    orjson: the standard library's encoder leaves its C fast path when asked to indent, which made
    the comparison's JSON the slowest part of a 100k-query report."""
    return (
        orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY, default=str).decode()
        + "\n"
    )
