"""Hits whose heading path stops short of the gold section they lie in, and which of them are
pieces of a sub-section that lost its heading (the signature of a splitter that drops
sub-headings) rather than a parent section's own text: counted per hit, warned about by count.
Hand-made tables, every expected value worked out in the comments; then the reference system's
real runs over the bundled demo and the kebab-docs example, where a parent's own text is 10-14 %
of the hits inside gold documents and no warning may appear. (The real frameworks, correct and
broken: tests/frameworks/test_heading_recipes.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from kebab_eval_pipeline.chain import pipeline
from kebab_eval_pipeline.chain.settings import load_settings, settings_from_dict
from kebab_eval_pipeline.golden.model import GoldenQuery, GoldenSet, Support
from kebab_eval_pipeline.golden.tables import supports_table, typed_frame
from kebab_eval_pipeline.metrics.matching_diagnostics import (
    LOST_MIN,
    LOST_SHARE,
    lost_pieces,
    matching_warnings,
    shortened_headings,
)
from kebab_eval_pipeline.systems.base import HIT_COLUMNS

KEBAB_DOCS = Path(__file__).resolve().parents[2] / "docs" / "examples" / "kebab-docs"

SUPPORTS = supports_table(
    GoldenSet(
        queries=[
            GoldenQuery(
                id="q1", query="?", supports=[Support(rel_path="docs/a.md", heading_path=["A", "B", "C"])]
            ),
            GoldenQuery(id="q2", query="?", supports=[Support(doc_id="D", heading_path=["X", "Y"])]),
            # a gold section and its parent both relevant: a hit on the parent matches, it is not short
            GoldenQuery(
                id="q3",
                query="?",
                supports=[
                    Support(rel_path="docs/a.md", heading_path=["A", "B"]),
                    Support(rel_path="docs/a.md", heading_path=["A"]),
                ],
            ),
            # grade 0: says what is NOT relevant; a hit above it is nothing to warn about
            GoldenQuery(
                id="q4", query="?", supports=[Support(rel_path="docs/a.md", heading_path=["A", "B"], grade=0)]
            ),
        ]
    )
)


def hits(*rows: dict):
    ranks: dict[str, int] = {}
    out = []
    for row in rows:
        ranks[row["query_id"]] = ranks.get(row["query_id"], 0) + 1
        out.append({"rank": ranks[row["query_id"]], **row})
    return typed_frame(out, HIT_COLUMNS)


def test_each_hit_is_judged_inside_and_shortened_or_not():
    table = hits(
        {"query_id": "q1", "doc_path": "docs/a.md", "heading_path": ["A"]},  # 0 short: A is above A > B > C
        {
            "query_id": "q1",
            "doc_path": "./docs/a.md",
            "heading_path": ["A", "B"],
        },  # 1 short (path normalised)
        {"query_id": "q1", "doc_path": "docs/a.md", "heading_path": ["A", "B", "C"]},  # 2 on the section
        {"query_id": "q1", "doc_path": "docs/a.md", "heading_path": ["A", "B", "C", "D"]},  # 3 below it
        {"query_id": "q1", "doc_path": "docs/a.md", "heading_path": ["A", "Bc"]},  # 4 a sibling: not a prefix
        {"query_id": "q1", "doc_path": "docs/a.md", "heading_path": []},  # 5 no heading: not inside
        {"query_id": "q1", "doc_path": "docs/b.md", "heading_path": ["A"]},  # 6 another document
        {"query_id": "q2", "doc_id": "D", "heading_path": ["X"]},  # 7 short, named by doc_id
        {"query_id": "q2", "doc_path": "docs/a.md", "heading_path": ["A"]},  # 8 q2's gold is not a.md
        {"query_id": "q3", "doc_path": "docs/a.md", "heading_path": ["A"]},  # 9 matches q3's gold A
        {"query_id": "q4", "doc_path": "docs/a.md", "heading_path": ["A"]},  # 10 above a grade-0 support
        {"query_id": "q1", "doc_path": "docs/a.md", "heading_path": ["  A ", "B"]},  # 11 short, whitespace
    )
    inside, shortened = shortened_headings(table, SUPPORTS)
    assert inside.tolist() == [True, True, True, True, True, False, False, True, False, True, False, True]
    assert shortened.tolist() == [
        True,
        True,
        False,
        False,
        False,
        False,
        False,
        True,
        False,
        False,
        False,
        True,
    ]


def lost(table) -> list[bool]:
    return lost_pieces(table, shortened_headings(table, SUPPORTS)[1]).tolist()


def heading_warnings(table) -> list[dict]:
    return [w for w in matching_warnings(table, SUPPORTS, "anchor") if w["field"] == "heading_path"]


def test_a_parents_own_text_is_one_chunk_however_many_queries_retrieve_it():
    # q1's gold is A > B > C in docs/a.md. The chunk "intro" (A's own text) is retrieved 12 times
    # (the same chunk id): every one is shortened, none is lost — one chunk carries A in a.md.
    table = hits(
        *[{"query_id": "q1", "doc_path": "docs/a.md", "heading_path": ["A"], "chunk_id": "intro"}] * 12
    )
    assert shortened_headings(table, SUPPORTS)[1].all()
    assert lost(table) == [False] * 12
    assert heading_warnings(table) == []  # 12 of 12 shortened: a share alone would have warned


def test_different_chunks_carrying_the_parents_path_are_lost_pieces():
    table = hits(
        {"query_id": "q1", "doc_path": "docs/a.md", "heading_path": ["A", "B"], "chunk_id": "b1"},  # 0 lost
        {"query_id": "q1", "doc_path": "docs/a.md", "heading_path": ["A", "B"], "chunk_id": "b2"},  # 1 lost
        {"query_id": "q3", "doc_path": "docs/a.md", "heading_path": ["A", "B"], "chunk_id": "b3"},
        # 2: q3's gold is A > B: it matches, not shortened — but it counts as a chunk carrying A > B
        {"query_id": "q1", "doc_path": "docs/a.md", "heading_path": ["A"], "chunk_id": "a1"},  # 3 one chunk
        {"query_id": "q1", "doc_path": "./docs/a.md", "heading_path": ["A"], "chunk_id": "a1"},  # 4 the same
        {"query_id": "q2", "doc_id": "D", "heading_path": ["X"], "chunk_id": "x1"},  # 5 one chunk of D
        {"query_id": "q2", "doc_id": "D", "heading_path": [" X "], "chunk_id": "x2"},  # 6 and another
        {
            "query_id": "q1",
            "doc_path": "docs/b.md",
            "heading_path": ["A", "B"],
            "chunk_id": "b4",
        },  # 7 not inside
    )
    assert lost(table) == [True, True, False, False, False, True, True, False]


def test_chunks_are_told_apart_by_id_else_text_else_lines_else_not_at_all():
    def two(**fields) -> list[bool]:
        rows = [{"query_id": "q1", "doc_path": "docs/a.md", "heading_path": ["A", "B"]} for _ in range(2)]
        return lost(hits(*({**row, **{k: v[n] for k, v in fields.items()}} for n, row in enumerate(rows))))

    assert two(chunk_id=["c1", "c2"], snippet=["same", "same"]) == [True, True]
    assert two(chunk_id=["c1", "c1"], snippet=["one", "two"]) == [False, False]  # the id wins
    assert two(snippet=["one", "two"]) == [True, True]
    assert two(snippet=["same", "same"]) == [False, False]
    assert two(line_start=[3, 9], line_end=[8, 12]) == [True, True]
    assert two(line_start=[3, 3], line_end=[8, 8]) == [False, False]
    assert two() == [False, False]  # nothing tells them apart: one chunk per path, never lost


def test_a_chunk_that_starts_above_a_sub_section_is_the_parents_own_text():
    # A > B's own text is cut into two chunks (lines 3-5 and 6-8); its sub-section A > B > C starts
    # at line 10 (seen in another query's hits). A later piece of C that lost its heading (line 14).
    table = hits(
        {
            "query_id": "q1",
            "doc_path": "docs/a.md",
            "heading_path": ["A", "B"],
            "line_start": 3,
            "line_end": 5,
        },
        {
            "query_id": "q1",
            "doc_path": "docs/a.md",
            "heading_path": ["A", "B"],
            "line_start": 6,
            "line_end": 8,
        },
        {"query_id": "q3", "doc_path": "docs/a.md", "heading_path": ["A", "B", "C"], "line_start": 10},
        {
            "query_id": "q1",
            "doc_path": "docs/a.md",
            "heading_path": ["A", "B"],
            "line_start": 14,
            "line_end": 16,
        },
    )
    assert lost(table) == [False, False, False, True]
    # without the sub-section's hit nothing places the pieces: all three are lost
    assert lost(table.drop(index=2).reset_index(drop=True)) == [True, True, True]
    # a sub-section of another document, or a sibling (A > Bc), places nothing either
    other = table.copy()
    other.at[2, "heading_path"] = ["A", "Bc"]
    assert lost(other) == [True, True, False, True]
    # a hit without lines among lined ones is judged by its chunks alone
    no_line = hits(
        *table.drop(columns=["rank"]).to_dict("records"),
        {"query_id": "q1", "doc_path": "docs/a.md", "heading_path": ["A", "B"], "snippet": "text"},
    )
    assert lost(no_line) == [False, False, False, True, True]


def _many(n_lost: int, n_inside: int):
    """q1's hits: ``n_lost`` different chunks carrying A > B (lost pieces) and the rest on the gold
    section A > B > C (inside, not shortened)."""
    pieces = [
        {"query_id": "q1", "doc_path": "docs/a.md", "heading_path": ["A", "B"], "chunk_id": f"p{n}"}
        for n in range(n_lost)
    ]
    on_gold = [
        {"query_id": "q1", "doc_path": "docs/a.md", "heading_path": ["A", "B", "C"], "chunk_id": f"g{n}"}
        for n in range(n_inside - n_lost)
    ]
    return hits(*pieces, *on_gold)


def test_the_warning_counts_lost_pieces_once_there_are_enough_of_them():
    assert (LOST_MIN, LOST_SHARE) == (5, 0.05)
    assert heading_warnings(_many(4, 8)) == []  # 4 < LOST_MIN, though half the hits
    assert heading_warnings(_many(5, 101)) == []  # 5 < 5 % of 101 = 5.05
    (warning,) = heading_warnings(_many(5, 100))
    assert (warning["hits_lacking"], warning["hits_total"], warning["supports_needing"]) == (5, 100, 1)
    # the example is the lost piece whose path the most chunks of its document carry: X in D (3)
    table = hits(
        *_many(5, 10).drop(columns=["rank"]).to_dict("records"),
        *[{"query_id": "q2", "doc_id": "D", "heading_path": ["X"], "chunk_id": f"x{n}"} for n in range(3)],
        {"query_id": "q1", "doc_path": "docs/a.md", "heading_path": ["A"], "chunk_id": "intro"},  # not lost
    )
    (warning,) = heading_warnings(table)
    # 5 + 3 lost of 14 inside; q1 and q2 have shortened hits: their 2 positive heading supports
    assert (warning["hits_lacking"], warning["hits_total"], warning["supports_needing"]) == (8, 14, 2)
    assert warning["message"].startswith(
        "8 of 14 hits inside gold documents carry a heading path that is a proper prefix of a gold heading "
        "path and that other chunks of the same document carry too (e.g. 'A > B' in 'docs/a.md', carried "
        "by 5 different chunks of the run): the signature of a splitter that drops sub-headings"
    )
    assert warning["message"].endswith("so every chunk carries its full section path")
    # the same under auto (anchor, here): the mapping is wrong whatever the criterion
    assert [
        w["hits_lacking"] for w in matching_warnings(table, SUPPORTS, "auto") if w["field"] == "heading_path"
    ] == [8]


# -- real runs: the reference system gives every chunk its full heading path -------------------------


def reference_run(settings) -> tuple:
    """Retrieval over the golden set, in-process (what the Dagster assets call): hits, supports and
    the run's matching warnings."""
    golden = pipeline.load_golden_artifact(settings)
    retrieval = pipeline.retrieve(settings, golden)
    scores = pipeline.score(settings, golden, retrieval)
    return retrieval.results.hits, golden.supports, scores.info["matching_warnings"]


@pytest.mark.parametrize("chunk_size", [200, 400, 800, 1600])
def test_the_demo_reference_run_leaves_shortened_hits_but_no_lost_piece(chunk_size):
    """The bundled demo (``kebab-eval run`` with no config, at four chunk sizes): many queries share
    each short document, so a parent's own text (above its first sub-heading) is 12-14 % of the hits
    inside gold documents — one chunk per parent, or two at 200 characters, and those two start
    above the sub-sections."""
    settings = settings_from_dict(
        {"system": {"kind": "reference", "chunk_size": chunk_size}, "answers": False, "baseline": "none"}
    )
    hits_table, supports, warnings = reference_run(settings)
    inside, shortened = shortened_headings(hits_table, supports)
    share = shortened.sum() / inside.sum()
    print(f"demo at {chunk_size}: {shortened.sum()} of {inside.sum()} shortened ({share:.1%}), 0 lost")
    assert share > 0.12  # what a share threshold cannot tell from a broken splitter
    assert not lost_pieces(hits_table, shortened).any()
    assert [w for w in warnings if w["field"] == "heading_path"] == []


@pytest.mark.parametrize("golden", ["golden.yaml", "golden-holdout.yaml"])
def test_the_kebab_docs_example_run_has_no_heading_warning(golden):
    """docs/examples/kebab-docs/lexical.yaml, as shipped, with each of its golden sets."""
    settings = load_settings(
        KEBAB_DOCS / "lexical.yaml", replace={"golden": golden, "answers": False, "baseline": "none"}
    )
    hits_table, supports, warnings = reference_run(settings)
    inside, shortened = shortened_headings(hits_table, supports)
    assert inside.sum() > 100 and shortened.any()
    assert not lost_pieces(hits_table, shortened).any()
    assert [w for w in warnings if w["field"] == "heading_path"] == []
