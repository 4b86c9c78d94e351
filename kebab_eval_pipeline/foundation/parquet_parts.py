"""A table kept as the Parquet files it was written in (one per shard), read one part at a time.

A sharded run's hits are written by each shard step; the collecting step merges them into the
run's ``retrieval_results``. Read into memory, ten million hit rows (a million queries × 10) took
1.6 GiB of Arrow buffers in that step alone; as :class:`ParquetParts` only the files' footers are
read, the merged table is written part by part (:meth:`ParquetParts.write_parquet`), and what the
step itself needs (rank-1 rows, version columns) is read column- and row-wise from each part.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator, Sequence

import pyarrow as pa
import pyarrow.parquet as pq
from upath import UPath

#: Rows per row group: what ``pq.write_table`` uses for a table of any size (pyarrow's default).
ROW_GROUP_ROWS = 1024 * 1024


def _read(path: UPath, columns: Sequence[str] | None = None) -> pa.Table:
    return pq.read_table(
        io.BytesIO(path.read_bytes()), columns=list(columns) if columns is not None else None
    )


class ParquetParts:
    """The rows of ``paths`` (Parquet files of one table, in order) as one table of ``schema``
    (the parts' schemas unified: an all-null column in one part takes the others' type)."""

    def __init__(self, paths: Sequence[UPath], schema: pa.Schema, num_rows: int) -> None:
        self.paths = list(paths)
        self.schema = schema
        self.num_rows = num_rows

    @classmethod
    def open(cls, path: UPath) -> ParquetParts:
        """One file, of which only the footer is read."""
        with path.open("rb") as handle:
            file = pq.ParquetFile(handle)
            return cls([path], file.schema_arrow, file.metadata.num_rows)

    @classmethod
    def concat(cls, parts: Sequence[ParquetParts]) -> ParquetParts:
        """The parts' rows one after the other (schemas unified, the first one's metadata kept)."""
        schema = pa.unify_schemas([p.schema for p in parts], promote_options="permissive")
        return cls([path for p in parts for path in p.paths], schema, sum(p.num_rows for p in parts))

    def __len__(self) -> int:
        return self.num_rows

    @property
    def column_names(self) -> list[str]:
        return self.schema.names

    def tables(
        self,
        columns: Sequence[str] | None = None,
        rows: Callable[[pa.Table], pa.Array] | None = None,
    ) -> Iterator[pa.Table]:
        """Each part as a table of ``columns`` (all: None) in the unified schema's types; ``rows``:
        a mask of the part's rows to keep (e.g. rank 1), computed on the columns read."""
        names = list(columns) if columns is not None else self.schema.names
        target = pa.schema([self.schema.field(name) for name in names], metadata=self.schema.metadata)
        for path in self.paths:
            table = _read(path, names)
            if rows is not None:
                table = table.filter(rows(table))
            yield table.cast(target)

    def read(
        self, columns: Sequence[str] | None = None, rows: Callable[[pa.Table], pa.Array] | None = None
    ) -> pa.Table:
        """:meth:`tables` concatenated (only what is selected is ever held at once)."""
        parts = list(self.tables(columns, rows))
        if not parts:
            return self.schema.empty_table()
        return parts[0] if len(parts) == 1 else pa.concat_tables(parts)

    def write_parquet(self, sink) -> None:
        """All rows as one Parquet file, laid out as ``pq.write_table`` lays out the whole table
        (row groups of :data:`ROW_GROUP_ROWS`: the same bytes whatever the number of parts), with
        at most one row group's rows in memory at a time."""
        with pq.ParquetWriter(sink, self.schema) as writer:
            pending: list[pa.Table] = []
            rows = 0
            for table in self.tables():
                pending.append(table)
                rows += table.num_rows
                while rows >= ROW_GROUP_ROWS:
                    merged = pa.concat_tables(pending)
                    writer.write_table(merged.slice(0, ROW_GROUP_ROWS), row_group_size=ROW_GROUP_ROWS)
                    pending, rows = [merged.slice(ROW_GROUP_ROWS)], rows - ROW_GROUP_ROWS
            if rows or not self.num_rows:  # an empty table is written as one empty row group
                writer.write_table(pa.concat_tables(pending) if pending else self.schema.empty_table())
