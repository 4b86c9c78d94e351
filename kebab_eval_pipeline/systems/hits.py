"""One query's hits as columns (:class:`HitBlock`), and many blocks as the typed hits table.

Adapters parse a system's hits straight into per-field lists (:func:`.wire.parse_hit_block`), the
runner concatenates the lists of every query and converts each column once
(:func:`hits_frame`): no Python object is built per hit on the way from the response to the stored
table. At 20,000 queries × 100 hits, one pydantic :class:`~kebab_eval_pipeline.contract.Hit` per
hit (validated, then copied to renumber it) was most of a replayed run's time (issue 25).

A :class:`HitBlock` still reads as the list of :class:`Hit` it stands for (``len``, indexing,
iteration, ``==`` with a list of Hits): code and tests that look at an outcome's hits one by one
keep working, and pay for a Hit only when they look.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from kebab_eval_pipeline.contract import Hit
from kebab_eval_pipeline.systems.base import HIT_COLUMNS

if TYPE_CHECKING:  # the table's libraries are imported when a table is built: not by the CLI's checks
    import pandas as pd

#: The per-hit fields a block may hold (every hits-table column but query_id and rank: rank is
#: 1..n by position, the query id is the outcome's).
FIELDS: tuple[str, ...] = tuple(name for name in HIT_COLUMNS if name not in ("query_id", "rank"))
#: What an absent column holds in every row (a Hit's defaults).
DEFAULTS: dict[str, Any] = {name: None for name in FIELDS} | {"snippet": "", "score_kind": "other"}


class HitBlock(Sequence):
    """The hits of one query, best first, ranked 1..n, as columns.

    ``columns`` maps a field of :data:`FIELDS` to a list of ``n`` values already valid for the
    hits table (str or None, int or None, finite float or None, ``heading_path`` a list of str);
    a field left out holds its :data:`DEFAULTS` value (``heading_path``: an empty list) in every
    row, so a replayed list of chunk ids is one column. Blocks are not modified once built.
    """

    __slots__ = ("columns", "n")

    def __init__(self, n: int = 0, columns: dict[str, list] | None = None) -> None:
        self.n = n
        self.columns = columns or {}

    @classmethod
    def from_hits(cls, hits: Iterable[Hit]) -> HitBlock:
        """A block of ``hits`` (already validated Hit models), renumbered 1..n in their order."""
        hits = list(hits)
        columns: dict[str, list] = {}
        for name in FIELDS:
            values = [getattr(h, name) for h in hits]
            if name == "heading_path":
                values = [list(v) for v in values]  # the table shares no list with the caller's Hit
            default = [] if name == "heading_path" else DEFAULTS[name]
            if any(v != default for v in values):  # a column of defaults is left out
                columns[name] = values
        return cls(len(hits), columns)

    def value(self, name: str, i: int) -> Any:
        """Field ``name`` of hit ``i`` (0-based)."""
        column = self.columns.get(name)
        if column is not None:
            return column[i]
        return [] if name == "heading_path" else DEFAULTS[name]

    def column(self, name: str) -> list:
        """Field ``name`` of every hit, as a new list."""
        column = self.columns.get(name)
        if column is not None:
            return list(column)
        if name == "heading_path":
            return [[] for _ in range(self.n)]
        return [DEFAULTS[name]] * self.n

    def hit(self, i: int) -> Hit:
        """Hit ``i`` (0-based) as the documented model (values are valid: not validated again)."""
        fields = {name: self.value(name, i) for name in FIELDS}
        fields["heading_path"] = list(fields["heading_path"])
        return Hit.model_construct(rank=i + 1, **fields)

    def head(self, k: int) -> HitBlock:
        """The first ``k`` hits."""
        if k >= self.n:
            return self
        return HitBlock(k, {name: values[:k] for name, values in self.columns.items()})

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            return [self.hit(i) for i in range(*index.indices(self.n))]
        if index < 0:
            index += self.n
        if not 0 <= index < self.n:
            raise IndexError("hit index out of range")
        return self.hit(index)

    def __iter__(self) -> Iterator[Hit]:
        return (self.hit(i) for i in range(self.n))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, HitBlock):
            return self.n == other.n and all(self.column(f) == other.column(f) for f in FIELDS)
        if isinstance(other, list | tuple):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"HitBlock(n={self.n}, columns={sorted(self.columns)})"


def as_block(hits: HitBlock | Sequence[Hit] | None) -> HitBlock:
    """An outcome's hits as a block (an adapter may still hand over a list of Hit models)."""
    if isinstance(hits, HitBlock):
        return hits
    return HitBlock.from_hits(hits or [])


# ----------------------------------------------------------------------------------- the table


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
    return _column(name, dtype, [[] for _ in range(n)])


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
                    values += block.column(name)
                elif name == "heading_path":  # a copy: the table shares no list with an adapter's
                    values += [list(v) for v in block.columns[name]]
                else:
                    values += block.columns[name]
            data[name] = _column(name, dtype, values)
    return pd.DataFrame(data, index=pd.RangeIndex(n), columns=list(HIT_COLUMNS))
