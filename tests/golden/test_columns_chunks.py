"""A golden set loaded in chunks of frames gives exactly the tables of one loaded as plain lists."""

from __future__ import annotations

import json
import random

import pandas as pd
import pytest

from kebab_eval_pipeline.golden.columns import QUERY_COLUMNS, SUPPORT_COLUMNS, GoldenColumns
from kebab_eval_pipeline.golden.load import load_golden


def _golden_lines(n: int, seed: int) -> str:
    rng = random.Random(seed)
    lines = []
    for i in range(n):
        entry = {
            "id": f"q{i:03d}",
            "query": f"question {i} {'한국어' if i % 3 == 0 else 'english'}?",
            "answerable": i % 7 != 0,
            "tags": [f"t{j}" for j in range(rng.randrange(3))],
            "must_contain": ["x"] if i % 4 == 0 else [],
            **({"category": rng.choice(["how-to", "api"])} if i % 5 else {}),
        }
        if entry["answerable"]:
            entry["supports"] = [
                {
                    "chunk_id": f"d{i}#{j}",
                    "rel_path": f"docs/d{i}.md",
                    "line_start": (j + 1) * 10 if j % 2 else None,
                    "line_end": (j + 1) * 10 + 5 if j % 2 else None,
                    "heading_path": ["A", f"B{j}"] if j else None,
                }
                for j in range(rng.randrange(1, 4))
            ]
        lines.append(json.dumps(entry, ensure_ascii=False))
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(("n", "chunk"), [(57, 10), (40, 10), (9, 10), (31, 1)])
def test_chunked_tables_equal_the_unchunked_ones(tmp_path, monkeypatch, n, chunk) -> None:
    path = tmp_path / "gold.jsonl"
    path.write_text(_golden_lines(n, seed=n), encoding="utf-8")
    whole = load_golden(path).tables()
    monkeypatch.setattr(GoldenColumns, "CHUNK_QUERIES", chunk)
    chunked_loaded = load_golden(path)
    assert len(chunked_loaded) == n
    chunked = chunked_loaded.tables()
    for got, want, columns in zip(chunked, whole, (QUERY_COLUMNS, SUPPORT_COLUMNS), strict=True):
        assert list(got.columns) == list(columns)
        assert len(want) > 0
        pd.testing.assert_frame_equal(got, want)
    queries = chunked[0]
    assert queries["query_id"].tolist() == [f"q{i:03d}" for i in range(n)]
    assert queries.dtypes.to_dict() == whole[0].dtypes.to_dict()
    # the model rebuilt from the chunked tables is the one rebuilt from the whole ones
    assert chunked_loaded.golden.model_dump() == load_golden(path).golden.model_dump()


def test_empty_lists_share_one_value_that_no_table_reader_changes(tmp_path) -> None:
    path = tmp_path / "gold.jsonl"
    path.write_text(_golden_lines(20, seed=1), encoding="utf-8")
    queries = load_golden(path).tables()[0]
    empty = [v for v in queries["constraints"] if len(v) == 0]
    assert len(empty) == 20 and all(v is empty[0] for v in empty) and empty[0] == []
