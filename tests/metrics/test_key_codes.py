"""The hits' ``query_id`` read as codes (a Categorical from the Parquet dictionary pages, what the
``query_scores`` step reads) gives exactly the matches and scores the string column gives."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kebab_eval_pipeline.golden.model import GoldenQuery, GoldenSet, Support
from kebab_eval_pipeline.golden.tables import queries_table, supports_table, typed_frame
from kebab_eval_pipeline.metrics.aggregate import SCORING_HIT_KEYS
from kebab_eval_pipeline.metrics.columns import key_codes, key_counts, key_values
from kebab_eval_pipeline.metrics.matching import match_hits
from kebab_eval_pipeline.metrics.retrieval import retrieval_scores
from kebab_eval_pipeline.store.artifact_store import read_frame
from kebab_eval_pipeline.systems.base import HIT_COLUMNS


def _golden() -> GoldenSet:
    return GoldenSet(
        queries=[
            GoldenQuery(
                id="q1", query="?", supports=[Support(chunk_id="c1", grade=2), Support(chunk_id="c3")]
            ),
            GoldenQuery(id="q2", query="?", supports=[Support(doc_id="d2"), Support(rel_path="docs/b.md")]),
            GoldenQuery(id="q3", query="?", supports=[Support(chunk_id="c9")]),  # no hit retrieves it
            GoldenQuery(id="q4", query="?", supports=[Support(chunk_id="c1")]),  # no hits at all
        ]
    )


def _hits(tmp_path) -> tuple[pd.DataFrame, pd.DataFrame]:
    rows = [
        {"query_id": "q1", "rank": 1, "chunk_id": "c0", "doc_id": "d1"},
        {"query_id": "q1", "rank": 2, "chunk_id": "c3", "doc_id": "d1"},
        {"query_id": "q1", "rank": 3, "chunk_id": "c1", "doc_id": "d1"},
        {"query_id": "q2", "rank": 1, "chunk_id": "c5", "doc_id": "d2", "doc_path": "docs/b.md"},
        {"query_id": "q2", "rank": 2, "chunk_id": "c6", "doc_id": "d7", "doc_path": "./docs/b.md"},
        {"query_id": "q3", "rank": 1, "chunk_id": "c1", "doc_id": "d1"},
        {"query_id": "qx", "rank": 1, "chunk_id": "c1", "doc_id": "d1"},  # a query not in the golden set
        {"query_id": "", "rank": 1, "chunk_id": "c1", "doc_id": "d1"},  # an empty id: no query
    ]
    path = tmp_path / "hits.parquet"
    pq.write_table(
        pa.Table.from_pandas(typed_frame(rows, HIT_COLUMNS), preserve_index=False), path, row_group_size=3
    )
    return read_frame(path), read_frame(path, keys=SCORING_HIT_KEYS)


@pytest.mark.parametrize("criterion", ["auto", "chunk", "doc", "fields"])
def test_codes_match_and_score_as_the_strings_do(tmp_path, criterion) -> None:
    golden = _golden()
    queries, supports = queries_table(golden), supports_table(golden)
    plain, coded = _hits(tmp_path)
    assert isinstance(coded["query_id"].dtype, pd.CategoricalDtype)
    assert not isinstance(plain["query_id"].dtype, pd.CategoricalDtype)
    m_plain = match_hits(plain, supports, criterion=criterion)
    m_coded = match_hits(coded, supports, criterion=criterion)
    pd.testing.assert_frame_equal(m_coded, m_plain)
    assert len(m_plain) > 0
    s_plain = retrieval_scores(queries, supports, plain, m_plain, ks=(1, 3))
    s_coded = retrieval_scores(queries, supports, coded, m_coded, ks=(1, 3))
    pd.testing.assert_frame_equal(s_coded, s_plain)
    assert s_coded["n_hits"].tolist() == [3, 2, 1, 0]


def test_key_helpers_agree_with_the_string_lookups(tmp_path) -> None:
    plain, coded = _hits(tmp_path)
    value_set = pa.array(["q3", "q1", "q2", "q4"], pa.large_string())
    expected = [1, 1, 1, 2, 2, 0, -1, -1]
    assert key_codes(plain, "query_id", value_set).tolist() == expected
    assert key_codes(coded, "query_id", value_set, np.int32).tolist() == expected
    assert key_counts(coded, "query_id", value_set).tolist() == [1, 3, 2, 0]
    assert key_counts(plain, "query_id", value_set).tolist() == [1, 3, 2, 0]
    rows = np.array([7, 0, 6, 3])
    assert key_values(coded, "query_id", rows).to_pylist() == [None, "q1", "qx", "q2"]
    assert key_values(plain, "query_id", rows).to_pylist() == [None, "q1", "qx", "q2"]
