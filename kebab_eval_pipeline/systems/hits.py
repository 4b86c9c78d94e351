"""Many queries' hits as the typed hits table, built column by column from their blocks.

Adapters parse a system's hits straight into per-field lists (:func:`.wire.parse_hit_block`), the
runner concatenates the lists of every query and converts each column once
(:func:`hits_frame`): no Python object is built per hit on the way from the response to the stored
table. At 20,000 queries × 100 hits, one pydantic :class:`~kebab_eval_pipeline.contract.Hit` per
hit (validated, then copied to renumber it) was most of a replayed run's time (issue 25).

The block itself (:class:`~kebab_eval_pipeline.contract.HitBlock`) is part of the contract: the
reference system builds its hits as blocks too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kebab_eval_pipeline.contract import DEFAULTS, FIELDS, HitBlock, as_block
from kebab_eval_pipeline.systems.base import HIT_COLUMNS

__all__ = ["DEFAULTS", "FIELDS", "HitBlock", "as_block", "hits_frame"]

if TYPE_CHECKING:  # the table's libraries are imported when a table is built: not by the CLI's checks
    import pandas as pd

# ----------------------------------------------------------------------------------- the table


#: The heading path of every row without one: one shared empty list, not one per row. Millions of
#: tracked lists in the hits table made every later full garbage collection of a run slow (seconds
#: at 2M hits); the table's readers never modify a cell.
_NO_HEADINGS: list = []


def _strings(values: list):
    import pandas as pd
    import pyarrow as pa

    # pandas' "string" dtype is Arrow's large_string here; built in one pass by Arrow.
    return pd.arrays.ArrowStringArray(pa.array(values, type=pa.large_string()))


def _integers(values: list):
    import pandas as pd
    import pyarrow as pa

    arrow = pa.array(values, type=pa.int64())
    mask = arrow.is_null().to_numpy(zero_copy_only=False)
    return pd.arrays.IntegerArray(arrow.fill_null(0).to_numpy(), mask)


def _column(name: str, dtype: str, values: list):
    import numpy as np
    import pyarrow as pa

    if dtype == "string":
        return _strings(values)
    if dtype == "int64":
        return np.asarray(values, dtype=np.int64)
    if dtype == "Int64":
        return _integers(values)
    if dtype == "float64":
        return pa.array(values, type=pa.float64()).to_numpy(zero_copy_only=False)
    out = np.empty(len(values), dtype=object)  # heading_path: one list per row
    for i, value in enumerate(values):
        out[i] = value
    return out


def _constant(name: str, dtype: str, n: int):
    """A column holding one value (a field no block has) without a list of n Python values."""
    import numpy as np
    import pandas as pd
    import pyarrow as pa

    value = DEFAULTS.get(name)
    if dtype == "string":
        arrow = pa.nulls(n, pa.large_string()) if value is None else pa.array([value] * n, pa.large_string())
        return pd.arrays.ArrowStringArray(arrow)
    if dtype == "Int64":
        return pd.arrays.IntegerArray(np.zeros(n, dtype=np.int64), np.ones(n, dtype=bool))
    if dtype == "float64":
        return np.full(n, np.nan)
    return _column(name, dtype, [_NO_HEADINGS] * n)


def hits_frame(blocks: Sequence[tuple[str, HitBlock]]) -> pd.DataFrame:
    """The hits table (:data:`~.base.HIT_COLUMNS`, their dtypes, a RangeIndex) of ``(query id,
    block)`` pairs, in their order: the same frame ``typed_frame`` makes of one row per hit."""
    import numpy as np
    import pandas as pd

    n = sum(block.n for _, block in blocks)
    present = set().union(*(block.columns for _, block in blocks))
    data: dict[str, Any] = {}
    for name, dtype in HIT_COLUMNS.items():
        if name == "query_id":
            values: list = []
            for qid, block in blocks:
                values += [qid] * block.n
            data[name] = _strings(values)
        elif name == "rank":
            data[name] = np.concatenate(
                [np.arange(1, block.n + 1, dtype=np.int64) for _, block in blocks] or [np.empty(0, np.int64)]
            )
        elif name not in present:
            data[name] = _constant(name, dtype, n)
        else:
            values = []
            for _, block in blocks:
                if name not in block.columns:
                    values += [_NO_HEADINGS] * block.n if name == "heading_path" else block.column(name)
                elif name == "heading_path":  # a copy: the table shares no list with an adapter's
                    values += [list(v) if v else _NO_HEADINGS for v in block.columns[name]]
                else:
                    values += block.columns[name]
            data[name] = _column(name, dtype, values)
    return pd.DataFrame(data, index=pd.RangeIndex(n), columns=list(HIT_COLUMNS))
