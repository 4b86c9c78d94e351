"""Support ↔ hit matching (SPEC §5): every rule, every criterion, on hand-made tables."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from kebab_eval_pipeline.golden.model import GoldenQuery, GoldenSet, Support
from kebab_eval_pipeline.golden.tables import supports_table, typed_frame
from kebab_eval_pipeline.metrics.matching import (
    MATCH_COLUMNS,
    match_hits,
    normalise_headings,
    normalise_paths,
    normalise_text,
    relevance,
)
from kebab_eval_pipeline.systems.base import HIT_COLUMNS


def supports_of(*supports: Support, qid: str = "q") -> pd.DataFrame:
    return supports_table(GoldenSet(queries=[GoldenQuery(id=qid, query="?", supports=list(supports))]))


def hits_of(*rows: dict, qid: str = "q") -> pd.DataFrame:
    return typed_frame([{"query_id": qid, "rank": i + 1, **row} for i, row in enumerate(rows)], HIT_COLUMNS)


def pairs(hits: pd.DataFrame, supports: pd.DataFrame, criterion: str = "auto", **kw) -> list[tuple]:
    m = match_hits(hits, supports, criterion=criterion, **kw)
    assert list(m.columns) == list(MATCH_COLUMNS)
    assert {c: str(t) for c, t in m.dtypes.items()} == MATCH_COLUMNS
    return [(r.query_id, r.rank, r.support_idx) for r in m.itertuples()]


# ---------------------------------------------------------------------------------- normalisers


def test_normalise_paths() -> None:
    got = normalise_paths(pa.array(["./a/b.md", "a\\b.md", "././a/b.md", ".\\a\\b.md", "a/./b.md", None]))
    assert got.to_pylist() == ["a/b.md", "a/b.md", "a/b.md", "a/b.md", "a/./b.md", None]


def test_normalise_headings_trims_and_collapses() -> None:
    got = normalise_headings([["  Intro ", "Set\t up  now"], None, [], ["A"]])
    assert got.to_pylist() == ["Intro > Set up now", None, "", "A"]


def test_normalise_text() -> None:
    assert normalise_text(pa.array(["  Hello\n\tWORLD  ", None])).to_pylist() == ["hello world", None]


# ---------------------------------------------------------------------------------- single fields


def test_chunk_id_equal() -> None:
    h = hits_of({"chunk_id": "c1"}, {"chunk_id": "c2"}, {"chunk_id": None})
    assert pairs(h, supports_of(Support(chunk_id="c2"))) == [("q", 2, 0)]


def test_doc_id_equal() -> None:
    h = hits_of({"doc_id": "d1"}, {"doc_id": "d2"}, {"doc_id": "d1"})
    assert pairs(h, supports_of(Support(doc_id="d1"))) == [("q", 1, 0), ("q", 3, 0)]


def test_rel_path_normalised_both_sides() -> None:
    h = hits_of({"doc_path": "./docs/a.md"}, {"doc_path": "docs\\a.md"}, {"doc_path": "docs/b.md"}, {})
    assert pairs(h, supports_of(Support(rel_path="docs/a.md"))) == [("q", 1, 0), ("q", 2, 0)]
    assert pairs(h, supports_of(Support(rel_path="./docs\\a.md"))) == [("q", 1, 0), ("q", 2, 0)]


def test_heading_prefix_is_whole_headings() -> None:
    h = hits_of(
        {"doc_path": "a.md", "heading_path": ["A", "Bc"]},  # "A > Bc" must NOT match gold ["A", "B"]
        {"doc_path": "a.md", "heading_path": ["A", "B"]},  # exact path matches
        {"doc_path": "a.md", "heading_path": [" A ", "B", "C"]},  # deeper (and untrimmed) matches
        {"doc_path": "a.md", "heading_path": ["A"]},  # shallower does not
        {"doc_path": "a.md", "heading_path": []},
        {"doc_path": "a.md", "heading_path": None},
        {"doc_path": "a.md", "heading_path": ["A  ", "B  x"]},  # "B x" is not "B"
    )
    s = supports_of(Support(rel_path="a.md", heading_path=["A", "B"]))
    assert pairs(h, s) == [("q", 2, 0), ("q", 3, 0)]
    assert pairs(h, s, "anchor") == [("q", 2, 0), ("q", 3, 0)]


def test_heading_whitespace_collapsed_on_both_sides() -> None:
    h = hits_of({"heading_path": ["Set   up", "Install"]})
    assert pairs(h, supports_of(Support(heading_path=[" Set up "]))) == [("q", 1, 0)]


def test_line_overlap() -> None:
    h = hits_of(
        {"line_start": 1, "line_end": 9},  # ends before gold
        {"line_start": 1, "line_end": 10},  # touches the first gold line
        {"line_start": 12, "line_end": 14},  # inside
        {"line_start": 20, "line_end": 30},  # touches the last gold line
        {"line_start": 21, "line_end": 30},  # after
        {"line_start": None, "line_end": None},  # no lines: no overlap
        {"line_start": 15, "line_end": None},  # one end: the single line 15
    )
    assert pairs(h, supports_of(Support(line_start=10, line_end=20))) == [
        ("q", 2, 0),
        ("q", 3, 0),
        ("q", 4, 0),
        ("q", 7, 0),
    ]


def test_gold_with_one_line_end_is_a_single_line() -> None:
    h = hits_of({"line_start": 1, "line_end": 4}, {"line_start": 5, "line_end": 8})
    assert pairs(h, supports_of(Support(line_start=5))) == [("q", 2, 0)]


def test_snippet_default_is_case_and_whitespace_insensitive() -> None:
    h = hits_of({"snippet": "The  Quick\nbrown fox"}, {"snippet": "quick red"}, {"snippet": None})
    s = supports_of(Support(snippet="quick BROWN"))
    assert pairs(h, s) == [("q", 1, 0)]
    assert pairs(h, s, strict_snippet=True) == []
    assert pairs(h, supports_of(Support(snippet="Quick\nbrown")), strict_snippet=True) == [("q", 1, 0)]


def test_whitespace_only_snippet_is_unset() -> None:
    h = hits_of({"snippet": "x"})
    assert pairs(h, supports_of(Support(snippet="   "))) == []  # no usable field → never matches


# ---------------------------------------------------------------------------------- combinations


def test_fields_requires_every_set_field() -> None:
    s = supports_of(
        Support(chunk_id="c1", doc_id="d1", rel_path="a.md", line_start=3, line_end=4, snippet="xyz")
    )
    full = {
        "chunk_id": "c1",
        "doc_id": "d1",
        "doc_path": "a.md",
        "line_start": 1,
        "line_end": 3,
        "snippet": "xyz",
    }
    variants = [
        full,
        {**full, "doc_id": "d2"},
        {**full, "doc_path": "b.md"},
        {**full, "line_start": 5, "line_end": 6},
        {**full, "snippet": "abc"},
        {**full, "chunk_id": "c9"},
    ]
    assert pairs(hits_of(*variants), s, "fields") == [("q", 1, 0)]
    # `auto` resolves to the strongest criterion instead: the support sets a chunk id and the hits
    # carry chunk ids, so the chunk id alone decides (every variant but the last keeps c1).
    assert pairs(hits_of(*variants), s) == [("q", r, 0) for r in range(1, 6)]


def test_auto_without_id_fields_joins_on_query() -> None:
    s = supports_of(Support(heading_path=["A"], snippet="needle"))
    h = hits_of(
        {"heading_path": ["A", "B"], "snippet": "a needle here"},
        {"heading_path": ["B"], "snippet": "needle"},
        {"heading_path": ["A"], "snippet": "hay"},
    )
    assert pairs(h, s) == [("q", 1, 0)]


def test_hits_of_other_queries_never_match() -> None:
    h = pd.concat([hits_of({"chunk_id": "c1"}, qid="other"), hits_of({"chunk_id": "c1"}, qid="q")])
    assert pairs(h.reset_index(drop=True), supports_of(Support(chunk_id="c1"))) == [("q", 1, 0)]
    s = supports_of(Support(heading_path=["A"]))
    h2 = pd.concat([hits_of({"heading_path": ["A"]}, qid="other"), hits_of({"heading_path": ["A"]})])
    assert pairs(h2.reset_index(drop=True), s) == [("q", 1, 0)]


def test_several_supports_and_queries() -> None:
    g = GoldenSet(
        queries=[
            GoldenQuery(id="q1", query="?", supports=[Support(chunk_id="a"), Support(chunk_id="b", grade=3)]),
            GoldenQuery(id="q2", query="?", supports=[Support(chunk_id="a")]),
        ]
    )
    s = supports_table(g)
    h = pd.concat(
        [
            hits_of({"chunk_id": "b"}, {"chunk_id": "a"}, {"chunk_id": "a"}, qid="q1"),
            hits_of({"chunk_id": "b"}, qid="q2"),
        ]
    ).reset_index(drop=True)
    m = match_hits(h, s)
    assert m.values.tolist() == [["q1", 1, 1, 3], ["q1", 2, 0, 1], ["q1", 3, 0, 1]]


# ---------------------------------------------------------------------------------- criteria


HITS = hits_of(
    {
        "chunk_id": "c1",
        "doc_id": "d1",
        "doc_path": "a.md",
        "heading_path": ["A", "B"],
        "line_start": 1,
        "line_end": 10,
    },
    {
        "chunk_id": "c2",
        "doc_id": "d1",
        "doc_path": "a.md",
        "heading_path": ["A", "C"],
        "line_start": 11,
        "line_end": 20,
    },
    {
        "chunk_id": "c3",
        "doc_id": "a.md",
        "doc_path": None,
        "heading_path": [],
        "line_start": 5,
        "line_end": 14,
    },
    {
        "chunk_id": "c4",
        "doc_id": "d2",
        "doc_path": "b.md",
        "heading_path": ["A", "B"],
        "line_start": 1,
        "line_end": 20,
    },
)


def test_criterion_chunk_uses_chunk_id_only() -> None:
    s = supports_of(Support(chunk_id="c2", doc_id="zzz", rel_path="nowhere.md"), Support(doc_id="d1"))
    assert pairs(HITS, s, "chunk") == [("q", 2, 0)]


def test_criterion_doc() -> None:
    s = supports_of(
        Support(doc_id="d1", chunk_id="c9"),  # doc_id wins, chunk ignored
        Support(rel_path="./a.md", heading_path=["Z"]),  # rel_path ↔ doc_path or doc_id, heading ignored
        Support(chunk_id="c1"),  # no document: never matches under `doc`
    )
    assert pairs(HITS, s, "doc") == [("q", 1, 0), ("q", 1, 1), ("q", 2, 0), ("q", 2, 1), ("q", 3, 1)]


def test_criterion_anchor() -> None:
    s = supports_of(
        Support(rel_path="a.md", heading_path=["A"], chunk_id="c9", line_start=100, line_end=100),
        Support(rel_path="a.md", heading_path=["A", "B"]),
        Support(doc_id="d2", heading_path=["A", "B"]),  # no rel_path: the doc_id names the document
        Support(rel_path="b.md"),  # no heading: the whole document
        Support(heading_path=["A", "B"]),  # no document: never matches under `anchor`
    )
    assert pairs(HITS, s, "anchor") == [
        ("q", 1, 0),
        ("q", 1, 1),
        ("q", 2, 0),
        ("q", 4, 2),
        ("q", 4, 3),
    ]


def test_criterion_span_needs_half_the_gold_span() -> None:
    # gold 7..14 (8 lines): hit 1..10 overlaps 4 → 50 % → match; 11..20 overlaps 4 → match;
    # gold 9..14 (6 lines): 1..10 overlaps 2 (< 3) → no; 11..20 overlaps 4 → match.
    s = supports_of(
        Support(rel_path="a.md", line_start=7, line_end=14),
        Support(rel_path="a.md", line_start=9, line_end=14, chunk_id="c1"),
        Support(doc_id="d2", line_start=1, line_end=100),  # 20 of 100 lines: no
        Support(chunk_id="c1", line_start=1, line_end=10),  # no document: never under `span`
    )
    assert pairs(HITS, s, "span") == [("q", 1, 0), ("q", 2, 0), ("q", 2, 1)]
    # Support 3 names no document, so `auto` resolves to `fields` here: any overlap (and every
    # other field; support 1 also sets chunk c1).
    assert pairs(HITS, s, "auto") == [("q", 1, 0), ("q", 1, 1), ("q", 1, 3), ("q", 2, 0), ("q", 4, 2)]


def test_support_without_usable_fields_never_matches() -> None:
    s = supports_of(Support(symbol="parse", symbol_kind="func"), Support())
    assert pairs(HITS, s) == []
    for criterion in ("chunk", "doc", "anchor", "span"):
        assert pairs(HITS, supports_of(Support(snippet="x")), criterion) == []


def test_unknown_criterion_rejected() -> None:
    with pytest.raises(ValueError, match="unknown match criterion"):
        match_hits(HITS, supports_of(Support(chunk_id="c1")), criterion="fuzzy")


def test_empty_inputs() -> None:
    empty_hits = typed_frame([], HIT_COLUMNS)
    assert pairs(empty_hits, supports_of(Support(chunk_id="c1"))) == []
    assert pairs(HITS, supports_of()) == []


def test_minimal_hit_columns_are_enough() -> None:
    h = pd.DataFrame(
        {"query_id": pd.array(["q", "q"], dtype="string"), "rank": [1, 2], "chunk_id": ["x", "c1"]}
    )
    assert pairs(h, supports_of(Support(chunk_id="c1"), Support(rel_path="a.md"))) == [("q", 2, 0)]


# ---------------------------------------------------------------------------------- relevance()


def test_relevance_gain_is_max_grade_and_grade_zero_is_not_relevant() -> None:
    s = supports_of(
        Support(chunk_id="c1", grade=1), Support(doc_id="d1", grade=3), Support(chunk_id="c4", grade=0)
    )
    out = relevance(HITS, match_hits(HITS, s))
    assert out["gain"].tolist() == [3, 3, 0, 0]
    assert out["relevant"].tolist() == [True, True, False, False]
    assert list(out.columns[: len(HITS.columns)]) == list(HITS.columns)


def test_relevance_without_matches() -> None:
    out = relevance(HITS, match_hits(HITS, supports_of()))
    assert out["gain"].tolist() == [0, 0, 0, 0]
    assert not out["relevant"].any()


def test_large_run_uses_run_length_codes() -> None:
    # > 1024 hits grouped by query exercises the run-length lookup path.
    n_q, per_q = 300, 10
    qids = np.repeat([f"q{i}" for i in range(n_q)], per_q)
    chunks = [f"c{i % per_q}" for i in range(n_q * per_q)]
    h = pd.DataFrame(
        {
            "query_id": pd.array(qids, dtype="string"),
            "rank": np.tile(np.arange(1, per_q + 1), n_q),
            "chunk_id": chunks,
        }
    )
    g = GoldenSet(
        queries=[
            GoldenQuery(id=f"q{i}", query="?", supports=[Support(chunk_id=f"c{i % 7}")]) for i in range(n_q)
        ]
    )
    m = match_hits(h, supports_table(g))
    assert len(m) == n_q
    got = dict(zip(m["query_id"], m["rank"], strict=True))
    assert got == {f"q{i}": i % 7 + 1 for i in range(n_q)}
    assert m["query_id"].tolist() == sorted(got)  # sorted by query id


def test_parquet_round_trip_gives_the_same_matches(tmp_path) -> None:
    # Stored runs come back with pandas' default string dtype and lists as NumPy arrays.
    s = supports_of(
        Support(rel_path="a.md", heading_path=["A", "B"]),
        Support(chunk_id="c3", snippet="Hello  World"),
        Support(doc_id="d2", line_start=3, line_end=4),
    )
    h = hits_of(
        {"chunk_id": "c1", "doc_id": "d1", "doc_path": "./a.md", "heading_path": ["A", "B", "C"]},
        {"chunk_id": "c3", "doc_id": "d1", "snippet": "say hello world"},
        {"chunk_id": "c4", "doc_id": "d2", "line_start": 4, "line_end": 9, "heading_path": None},
    )
    h.to_parquet(tmp_path / "h.parquet")
    s.to_parquet(tmp_path / "s.parquet")
    h2, s2 = pd.read_parquet(tmp_path / "h.parquet"), pd.read_parquet(tmp_path / "s.parquet")
    expected = [("q", 1, 0), ("q", 2, 1), ("q", 3, 2)]
    assert pairs(h, s) == expected
    assert pairs(h2, s2) == expected
