"""Scoring reads only the hit columns its golden supports (or citations) can be compared on, and the
scores are exactly those of the hits read whole; stored tables read one chunk per row group give
exactly the frame ``ParquetFile.read`` gives."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kebab_eval_pipeline.golden.model import GoldenQuery, GoldenSet, Support
from kebab_eval_pipeline.golden.tables import queries_table, supports_table, typed_frame
from kebab_eval_pipeline.metrics.aggregate import (
    CITATION_HIT_COLUMNS,
    SCORING_HIT_COLUMNS,
    SCORING_HIT_KEYS,
    build_query_scores,
    consulted_hit_columns,
)
from kebab_eval_pipeline.metrics.matching import COMPARED_HIT_COLUMNS, compared_hit_columns
from kebab_eval_pipeline.store.artifact_store import read_frame
from kebab_eval_pipeline.store.frames import table_to_frame
from kebab_eval_pipeline.systems.base import HIT_COLUMNS, OUTCOME_COLUMNS


def _supports(*supports: Support) -> pd.DataFrame:
    return supports_table(GoldenSet(queries=[GoldenQuery(id="q1", query="?", supports=list(supports))]))


@pytest.mark.parametrize(
    ("supports", "compared"),
    [
        ([Support(chunk_id="c1")], {"chunk_id"}),
        ([Support(doc_id="d1")], {"doc_id"}),
        ([Support(rel_path="docs/a.md")], {"doc_id", "doc_path"}),  # a path may name a doc_id
        ([Support(rel_path="a.md", line_start=3)], {"doc_id", "doc_path", "line_start", "line_end"}),
        # a heading path: every compared column (the split-nodes diagnostic tells chunks apart)
        ([Support(doc_id="d1", heading_path=["A", "B"])], set(COMPARED_HIT_COLUMNS)),
        ([Support(snippet="some text")], {"snippet"}),
        ([Support(chunk_id="c1"), Support(doc_id="d1", grade=0)], {"chunk_id", "doc_id"}),  # any grade
        ([Support(chunk_id="", doc_id="d1")], {"doc_id"}),  # an empty string sets nothing
    ],
)
def test_compared_hit_columns_are_those_a_set_support_field_names(supports, compared) -> None:
    assert compared_hit_columns(_supports(*supports)) == compared


def test_consulted_hit_columns_keep_order_and_every_column_not_compared() -> None:
    chunk_only = _supports(Support(chunk_id="c1"))
    not_compared = ["query_id", "rank", "index_version", "embedding_model", "chunker_version"]
    assert consulted_hit_columns(chunk_only, citations=False) == [
        "query_id",
        "rank",
        "chunk_id",
        "index_version",
        "embedding_model",
        "chunker_version",
    ]
    # citations are resolved among the hits by chunk id, or by path and lines
    with_citations = consulted_hit_columns(chunk_only, citations=True)
    assert with_citations == [c for c in SCORING_HIT_COLUMNS if c in {*not_compared, *CITATION_HIT_COLUMNS}]
    assert consulted_hit_columns(supports_table(GoldenSet(queries=[])), citations=False) == not_compared
    assert consulted_hit_columns(chunk_only, False, ["rank", "doc_id", "chunk_id"]) == ["rank", "chunk_id"]


def _golden() -> GoldenSet:
    return GoldenSet(
        queries=[
            GoldenQuery(
                id="q1", query="?", supports=[Support(chunk_id="c1", grade=2), Support(chunk_id="c3")]
            ),
            GoldenQuery(
                id="q2", query="?", supports=[Support(chunk_id="c5"), Support(chunk_id="c8", grade=0)]
            ),
            GoldenQuery(id="q3", query="?", supports=[Support(chunk_id="c9")]),  # never retrieved
            GoldenQuery(id="q4", query="?", supports=[Support(chunk_id="c1")]),  # no hits
        ]
    )


def _hit_rows() -> list[dict]:
    # every hit carries documents, paths, lines, headings and snippets that no chunk-level support
    # can be compared on (the d1/a.md ones would match a document-level support of q1)
    common = {"doc_id": "d1", "doc_path": "a.md", "line_start": 1, "line_end": 9, "snippet": "text"}
    return [
        {"query_id": "q1", "rank": 1, "chunk_id": "c0", "heading_path": ["A"], **common},
        {"query_id": "q1", "rank": 2, "chunk_id": "c3", "heading_path": ["A"], **common},
        {"query_id": "q1", "rank": 3, "chunk_id": "c1", "heading_path": [], **common},
        {"query_id": "q2", "rank": 1, "chunk_id": "c8", "heading_path": ["B"], **common},
        {"query_id": "q2", "rank": 2, "chunk_id": "c5", "heading_path": ["B"], **common},
        {"query_id": "q3", "rank": 1, "chunk_id": "c1", "heading_path": ["C"], **common},
    ]


@pytest.mark.parametrize("extra", [None, Support(doc_id="d1"), Support(rel_path="a.md", line_start=2)])
def test_scores_from_the_consulted_columns_equal_the_scores_from_every_column(tmp_path, extra) -> None:
    golden = _golden()
    if extra is not None:  # a document-level support: its columns are read again, and matter
        golden.queries[0].supports.append(extra)
    queries, supports = queries_table(golden), supports_table(golden)
    path = tmp_path / "hits.parquet"
    frame = typed_frame(_hit_rows(), HIT_COLUMNS)
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, row_group_size=4)
    columns = consulted_hit_columns(supports, citations=False)
    every = read_frame(path, list(SCORING_HIT_COLUMNS), sparse=True, keys=SCORING_HIT_KEYS)
    consulted = read_frame(path, columns, sparse=True, keys=SCORING_HIT_KEYS)
    if extra is None:
        assert list(consulted.columns) == ["query_id", "rank", "chunk_id"]  # versions are all null
    else:
        assert {"doc_id"} <= set(consulted.columns) < set(every.columns)
    outcomes = typed_frame(
        [{"query_id": q, "n_hits": n} for q, n in (("q1", 3), ("q2", 2), ("q3", 1), ("q4", 0))],
        OUTCOME_COLUMNS,
    )
    citations = pd.DataFrame({"query_id": pd.Series([], dtype="string")})
    scored = {
        name: build_query_scores(queries, supports, hits, outcomes, citations, ks=(1, 3))
        for name, hits in (("every", every), ("consulted", consulted))
    }
    pd.testing.assert_frame_equal(scored["consulted"], scored["every"])
    got = scored["every"].set_index("query_id")
    assert got["recall@3"].tolist() == [1.0, 1.0, 0.0, 0.0]
    # the document-level support is found by the rank-1 hit's doc_id / path and lines
    assert got.loc["q1", "mrr"] == (0.5 if extra is None else 1.0)
    assert got.loc["q2", "mrr"] == 0.5  # c8 (grade 0) at rank 1 is not relevant
    assert got.loc["q4", "n_hits"] == 0


def test_a_table_is_read_one_chunk_per_row_group_as_parquet_file_reads_it(tmp_path) -> None:
    rows = [{**r, "query_id": f"{r['query_id']}-{i}"} for i in range(5) for r in _hit_rows()]
    frame = typed_frame(rows, HIT_COLUMNS)
    path = tmp_path / "hits.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, row_group_size=7)
    assert pq.ParquetFile(path).metadata.num_row_groups == 5
    for columns, keys in ((None, ()), (["query_id", "rank", "chunk_id"], SCORING_HIT_KEYS)):
        whole = pq.ParquetFile(path, read_dictionary=list(keys)).read(columns=columns)
        expected = table_to_frame(whole, categorical=list(keys))
        got = read_frame(path, columns, keys=keys)
        pd.testing.assert_frame_equal(got, expected)
        assert got["chunk_id"].array._pa_array.num_chunks == 5  # one per row group, not one copy
    empty = tmp_path / "empty.parquet"
    pq.write_table(pa.Table.from_pandas(frame.iloc[:0], preserve_index=False), empty)
    pd.testing.assert_frame_equal(read_frame(empty), table_to_frame(pq.read_table(empty)), check_dtype=True)


@pytest.mark.parametrize("with_citation", [False, True])
def test_the_query_scores_step_reads_the_hit_columns_its_supports_need(tmp_path, with_citation) -> None:
    """``pipeline.with_scoring_hits`` given the golden supports (what the ``query_scores`` asset
    passes): a chunk-level golden set reads no document, path, line, heading or snippet column of
    the stored hits, unless a citation is to be resolved among them; without supports, what the
    settings alone consult."""
    from kebab_eval_pipeline.chain.artifacts import RetrievalArtifact
    from kebab_eval_pipeline.chain.pipeline import scoring_hit_columns, with_scoring_hits
    from kebab_eval_pipeline.chain.settings import RunSettings
    from kebab_eval_pipeline.store.runs import RunStore
    from kebab_eval_pipeline.systems.base import CITATION_COLUMNS

    store = RunStore(tmp_path)
    cited = [{"query_id": "q1", "position": 1, "chunk_id": "c1"}] if with_citation else []
    tables = {
        "hits": typed_frame(_hit_rows(), HIT_COLUMNS),
        "outcomes": typed_frame([{"query_id": "q1", "n_hits": 3}], OUTCOME_COLUMNS),
        "citations": typed_frame(cited, CITATION_COLUMNS),
        "known_chunks": pd.DataFrame({"chunk_id": pd.Series([], dtype="string")}),
    }
    store.write("retrieval_results", "r1", tables, {"system": {"kind": "fake"}})
    as_read = RetrievalArtifact.from_tables(*store.read("retrieval_results", "r1", columns={"hits": []}))
    settings = RunSettings(match="auto")
    supports = supports_table(_golden())
    got = with_scoring_hits(as_read, store, "r1", settings, supports=supports).results.hits
    expected = ["query_id", "rank", "chunk_id"]
    if with_citation:
        expected = ["query_id", "rank", "chunk_id", "doc_path", "line_start", "line_end"]
    assert list(got.columns) == expected
    assert got["chunk_id"].tolist() == [r["chunk_id"] for r in _hit_rows()]
    # without supports: every column the settings consult that holds a value (versions are null)
    whole = with_scoring_hits(as_read, store, "r1", settings).results.hits
    assert list(whole.columns) == [c for c in scoring_hit_columns(settings) if c not in _VERSIONS]
    assert len(whole.columns) == 9


_VERSIONS = ("index_version", "embedding_model", "chunker_version")
