"""Hits whose heading path stops short of the gold section they lie in — the signature of a
splitter that drops sub-headings — counted per hit, and warned about by count once they are a
real share of the hits inside gold documents. Hand-made tables; every expected value worked out
in the comments. (The real frameworks: tests/frameworks/test_heading_recipes.py.)"""

from __future__ import annotations

from kebab_eval_pipeline.golden.model import GoldenQuery, GoldenSet, Support
from kebab_eval_pipeline.golden.tables import supports_table, typed_frame
from kebab_eval_pipeline.metrics.matching_diagnostics import (
    SHORTENED_SHARE,
    matching_warnings,
    shortened_headings,
)
from kebab_eval_pipeline.systems.base import HIT_COLUMNS

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


def test_the_warning_counts_them_once_they_are_a_real_share():
    # 1 shortened hit of 9 inside gold documents: below SHORTENED_SHARE (a parent section's own text)
    inside = [{"query_id": "q1", "doc_path": "docs/a.md", "heading_path": ["A", "B", "C"]}] * 8
    few = hits(*inside, {"query_id": "q1", "doc_path": "docs/a.md", "heading_path": ["A", "B"]})
    assert SHORTENED_SHARE * 9 > 1
    assert [w for w in matching_warnings(few, SUPPORTS, "anchor") if w["field"] == "heading_path"] == []
    # 3 of 11: the warning, with the counts and an example
    many = hits(
        *inside,
        {"query_id": "q1", "doc_path": "docs/a.md", "heading_path": ["A", "B"]},
        {"query_id": "q1", "doc_path": "docs/a.md", "heading_path": ["A"]},
        {"query_id": "q2", "doc_id": "D", "heading_path": ["X"]},
    )
    (warning,) = [w for w in matching_warnings(many, SUPPORTS, "anchor") if w["field"] == "heading_path"]
    assert (warning["hits_lacking"], warning["hits_total"], warning["supports_needing"]) == (3, 11, 2)
    assert warning["message"].startswith(
        "3 of 11 hits inside gold documents carry a heading path that is a proper prefix of a gold heading "
        "path (e.g. 'A > B' in 'docs/a.md'): the signature of a splitter that drops sub-headings"
    )
    assert warning["message"].endswith("so every chunk carries its full section path")
    # the same under auto (anchor, here) and under doc matching: the mapping is wrong either way
    assert [
        w["hits_lacking"] for w in matching_warnings(many, SUPPORTS, "auto") if w["field"] == "heading_path"
    ] == [3]
