"""Tables and stored values as strict JSON: pandas/NumPy/Arrow scalars as plain Python, NaN and NA as
null, and non-finite floats found and nulled with their JSON paths (JSON has no inf or NaN)."""

from __future__ import annotations

import math
from typing import Any

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
    """A table as JSON-ready records: NaN/NA → None, arrays → lists, NumPy scalars → Python."""
    return [{k: plain_value(v) for k, v in row.items()} for row in frame.to_dict("records")]


def json_text(doc: Any) -> str:
    """A report document as indented JSON text ending in a newline, NumPy values as numbers.
    orjson: the standard library's encoder leaves its C fast path when asked to indent, which made
    the comparison's JSON the slowest part of a 100k-query report."""
    return (
        orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY, default=str).decode()
        + "\n"
    )
