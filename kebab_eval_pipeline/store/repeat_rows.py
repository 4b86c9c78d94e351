"""Some rows of a stored table, read without the others: one repeat's rows of a repeats table
(:func:`read_repeat`), or the rows of a few queries (:func:`read_rows`).

A repeated run stores repeats 2..N of its hits in one table (``repeat_hits``, rows ordered by
repeat: see :mod:`kebab_eval_pipeline.systems.repeats`). The scoring step reads them one repeat at
a time, in the columns it consults: Parquet's row-group statistics skip the other repeats' row
groups, and the filter drops the rest, so the step never holds every repeat's hits at once.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import pandas as pd
import pyarrow.parquet as pq
from upath import UPath

from kebab_eval_pipeline.foundation.location import is_local, local_path
from kebab_eval_pipeline.store.artifact_store import ArtifactStore
from kebab_eval_pipeline.store.frames import table_to_frame


def read_repeat(
    store: ArtifactStore, asset: str, run_id: str, table: str, repeat: int, columns: Sequence[str]
) -> pd.DataFrame:
    """The rows of ``table`` (of the published ``asset`` of ``run_id``) whose ``repeat`` is
    ``repeat``, in ``columns`` (those the file holds, in its order; never the ``repeat`` column
    itself), index from 0. InputError when the asset is not stored."""
    path = store.table_path(asset, run_id, table)
    source = local_path(path) if is_local(path) else io.BytesIO(UPath(path).read_bytes())
    file = pq.ParquetFile(source)
    wanted = set(columns)
    names = [c for c in file.schema_arrow.names if c in wanted and c != "repeat"]
    data = pq.read_table(source, columns=names, filters=[("repeat", "=", repeat)])
    return table_to_frame(data).reset_index(drop=True)


def read_rows(
    store: ArtifactStore,
    asset: str,
    run_id: str,
    table: str,
    column: str,
    values: Sequence[str],
    columns: Sequence[str] | None = None,
) -> pd.DataFrame:
    """The rows of ``table`` (of the published ``asset`` of ``run_id``) whose ``column`` is one of
    ``values``, in ``columns`` (None: all), stored order, index from 0 — a Parquet ``in`` filter,
    so the other rows are never turned into a frame. InputError when the asset is not stored."""
    path = store.table_path(asset, run_id, table)
    source = local_path(path) if is_local(path) else io.BytesIO(UPath(path).read_bytes())
    names = (
        None
        if columns is None
        else [c for c in pq.ParquetFile(source).schema_arrow.names if c in set(columns)]
    )
    if not values:
        data = pq.read_table(source, columns=names).slice(0, 0)
    else:
        data = pq.read_table(source, columns=names, filters=[(column, "in", list(values))])
    return table_to_frame(data).reset_index(drop=True)
