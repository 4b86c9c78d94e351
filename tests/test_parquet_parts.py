"""ParquetParts: a table left in its part files writes the same Parquet bytes as the whole table."""

from __future__ import annotations

import io
import random

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from kebab_eval_pipeline.foundation import parquet_parts
from kebab_eval_pipeline.foundation.parquet_parts import ParquetParts


def _part(rng: random.Random, start: int, n: int, with_versions: bool) -> pa.Table:
    return pa.table(
        {
            "query_id": pa.array([f"q{(start + i) // 3}" for i in range(n)], pa.large_string()),
            "rank": pa.array([(start + i) % 3 + 1 for i in range(n)], pa.int64()),
            "heading_path": pa.array(
                [["A", "B"] if with_versions and rng.random() < 0.5 else [] for _ in range(n)],
                pa.list_(pa.string()) if with_versions else pa.list_(pa.null()),
            ),
            "index_version": pa.array(
                [rng.choice(["v1", "v2", None]) if with_versions else None for _ in range(n)],
                pa.large_string(),
            ),
        },
        metadata={b"pandas": b"{}"},
    )


@pytest.mark.parametrize("seed", range(6))
def test_parts_write_the_bytes_of_the_whole_table(tmp_path, monkeypatch, seed) -> None:
    rng = random.Random(seed)
    monkeypatch.setattr(parquet_parts, "ROW_GROUP_ROWS", rng.choice([4, 7, 50]))
    sizes = [rng.choice([0, 1, 3, 9, 20]) for _ in range(rng.randrange(1, 7))]
    tables, start = [], 0
    for i, n in enumerate(sizes):
        tables.append(_part(rng, start, n, with_versions=i % 2 == 1))
        start += n
    parts = []
    for i, table in enumerate(tables):
        path = tmp_path / f"{i}.parquet"
        pq.write_table(table, path)
        parts.append(ParquetParts.open(path))
    merged = ParquetParts.concat(parts)
    assert len(merged) == sum(sizes)
    # as the one-part case sees it: read back from Parquet (a list's child is named "element")
    whole = pa.concat_tables(
        [pq.read_table(tmp_path / f"{i}.parquet") for i in range(len(tables))], promote_options="permissive"
    )
    got, want = io.BytesIO(), io.BytesIO()
    merged.write_parquet(got)
    pq.write_table(whole, want, row_group_size=parquet_parts.ROW_GROUP_ROWS)
    assert got.getvalue() == want.getvalue()
    assert pq.read_table(io.BytesIO(got.getvalue())).equals(whole)
    top = merged.read(["query_id", "rank"], rows=lambda t: pc.equal(t["rank"], 1))
    assert top.equals(whole.filter(pc.equal(whole["rank"], 1)).select(["query_id", "rank"]))
