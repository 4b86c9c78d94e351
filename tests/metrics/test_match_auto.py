"""What ``match: auto`` resolves to, per query, and the warnings that keep matching from silently
scoring zero — on hand-made tables, every expected value worked out in the comments."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kebab_eval_pipeline.golden.model import GoldenQuery, GoldenSet, Support
from kebab_eval_pipeline.golden.tables import queries_table, supports_table, typed_frame
from kebab_eval_pipeline.metrics.aggregate import aggregate_metrics, build_query_scores
from kebab_eval_pipeline.metrics.matching import match_hits, resolve_auto
from kebab_eval_pipeline.metrics.matching_diagnostics import match_line, matching_warnings, summarize_criteria
from kebab_eval_pipeline.systems.base import CITATION_COLUMNS, HIT_COLUMNS, OUTCOME_COLUMNS


def golden(*queries: tuple[str, list[Support]]) -> pd.DataFrame:
    return supports_table(GoldenSet(queries=[GoldenQuery(id=q, query="?", supports=s) for q, s in queries]))


def hits(*rows: dict) -> pd.DataFrame:
    """Hits of query ``q`` unless a row names another; ranks in row order per query."""
    out, ranks = [], {}
    for row in rows:
        q = row.get("query_id", "q")
        ranks[q] = ranks.get(q, 0) + 1
        out.append({"query_id": q, "rank": ranks[q], **row})
    return typed_frame(out, HIT_COLUMNS)


# The seven kinds of query, each named after what `auto` should pick when the hits carry every field.
SUPPORTS = golden(
    ("q_chunk", [Support(chunk_id="c1", rel_path="a.md", line_start=1, line_end=5)]),
    ("q_span", [Support(rel_path="a.md", line_start=1, line_end=5), Support(doc_id="D", line_start=3)]),
    ("q_anchor", [Support(rel_path="a.md", heading_path=["A"]), Support(rel_path="b.md")]),
    ("q_doc", [Support(rel_path="a.md"), Support(doc_id="D")]),
    ("q_fields", [Support(chunk_id="c1"), Support(rel_path="a.md")]),  # chunk-only + doc-only: neither rule
    ("q_negative", [Support(rel_path="a.md"), Support(chunk_id="c9", grade=0)]),  # grade 0 does not count
    ("q_only_zero", [Support(chunk_id="c9", grade=0)]),  # no positive support: all of them count
)


def test_hits_carrying_everything_get_the_strongest_criterion_of_each_query() -> None:
    h = hits({"chunk_id": "x", "doc_path": "a.md", "heading_path": ["A"], "line_start": 1, "line_end": 2})
    got = resolve_auto(h, SUPPORTS)
    assert got.to_dict() == {
        "q_chunk": "chunk",
        "q_span": "span",  # every support names a document (rel_path or doc_id) and a line
        "q_anchor": "anchor",  # one heading path suffices
        "q_doc": "doc",
        "q_fields": "fields",
        "q_negative": "doc",  # the grade-0 chunk support is ignored, so not `fields`
        "q_only_zero": "chunk",
    }
    assert got.name == "match_criterion" and str(got.dtype) == "string"


def test_what_the_hits_carry_is_decided_per_run_by_half_of_all_hits() -> None:
    # 4 hits: all chunk ids; lines on 2 (= half: carried); heading paths on 1 (a quarter: not).
    h = hits(
        {"chunk_id": "a", "line_start": 1, "heading_path": ["A"]},
        {"chunk_id": "b", "line_end": 9, "heading_path": []},  # empty heading list: unset
        {"chunk_id": "c", "query_id": "other"},
        {"chunk_id": "d", "query_id": "other"},
    )
    got = resolve_auto(h, SUPPORTS).to_dict()
    assert (got["q_chunk"], got["q_span"], got["q_anchor"]) == ("chunk", "span", "doc")
    # Now no chunk ids and lines on 1 of 4, heading paths on 2 of 4.
    h2 = hits(
        {"line_start": 1, "heading_path": ["A"]},
        {"heading_path": ["B"]},
        {"query_id": "other"},
        {"query_id": "other", "chunk_id": ""},  # empty string: unset
    )
    got2 = resolve_auto(h2, SUPPORTS).to_dict()
    # q_chunk: no chunk ids, no lines, no heading in its support → doc; q_span → doc.
    assert (got2["q_chunk"], got2["q_span"], got2["q_anchor"], got2["q_only_zero"]) == (
        "doc",
        "doc",
        "anchor",
        "fields",
    )


def test_an_empty_run_carries_nothing() -> None:
    got = resolve_auto(hits(), SUPPORTS).to_dict()
    assert got["q_chunk"] == got["q_span"] == got["q_anchor"] == "doc"
    assert got["q_fields"] == got["q_only_zero"] == "fields"
    assert resolve_auto(hits(), golden()).empty


def test_each_query_is_matched_by_its_own_criterion() -> None:
    s = golden(
        ("s", [Support(rel_path="a.md", line_start=1, line_end=10)]),  # → span
        ("f", [Support(heading_path=["A"], snippet="needle")]),  # → fields (no document)
    )
    h = hits(
        {"query_id": "s", "doc_path": "a.md", "line_start": 9, "line_end": 30},  # 2 of 10 lines: no
        {"query_id": "s", "doc_path": "a.md", "line_start": 4, "line_end": 30},  # 7 of 10: a span match
        {"query_id": "f", "heading_path": ["A", "B"], "snippet": "a needle", "line_start": 1},
        {"query_id": "f", "heading_path": ["A"], "snippet": "hay", "line_start": 1},
    )
    assert resolve_auto(h, s).to_dict() == {"s": "span", "f": "fields"}
    m = match_hits(h, s)
    assert list(zip(m["query_id"], m["rank"], strict=True)) == [("f", 1), ("s", 2)]
    # `fields` alone would have taken s's first hit too (any overlap).
    assert len(match_hits(h, s, "fields")) == 3
    # An explicit resolution overrides what the hits say (scoring passes the run's to citations).
    forced = pd.Series({"s": "doc", "f": "fields"})
    assert len(match_hits(h, s, resolved=forced)) == 3


def test_query_scores_carry_the_criterion_and_aggregation_ignores_it() -> None:
    g = GoldenSet(
        queries=[
            GoldenQuery(id="a", query="?", supports=[Support(rel_path="a.md", heading_path=["A"])]),
            GoldenQuery(id="b", query="?", supports=[Support(rel_path="b.md")]),
            GoldenQuery(id="u", query="?", answerable=False),
        ]
    )
    h = hits(
        {"query_id": "a", "doc_path": "a.md", "heading_path": ["A", "x"]},
        {"query_id": "b", "doc_path": "c.md", "heading_path": ["B"]},
        {"query_id": "b", "doc_path": "b.md", "heading_path": ["B"]},
    )
    outcomes = typed_frame(
        [{"query_id": q, "n_hits": n} for q, n in (("a", 1), ("b", 2), ("u", 0))], OUTCOME_COLUMNS
    )
    qs = build_query_scores(
        queries_table(g), supports_table(g), h, outcomes, typed_frame([], CITATION_COLUMNS)
    )
    assert qs["match_criterion"].tolist() == ["anchor", "doc", pd.NA]  # u has nothing to match
    assert str(qs["match_criterion"].dtype) == "string"
    assert aggregate_metrics(qs)["mrr"] == pytest.approx((1 + 1 / 2) / 2)
    forced = build_query_scores(
        queries_table(g), supports_table(g), h, outcomes, typed_frame([], CITATION_COLUMNS), criterion="doc"
    )
    assert forced["match_criterion"].tolist() == ["doc", "doc", pd.NA]
    assert summarize_criteria(qs["match_criterion"]) == ("mixed", {"anchor": 1, "doc": 1})
    assert summarize_criteria(forced["match_criterion"]) == ("doc", {"doc": 2})
    assert match_line({"match": "auto", "match_by_query": {"anchor": 60}}) == "auto → anchor (60 queries)"
    assert match_line({"match": "span", "match_by_query": {"span": 1}}) == "span (1 query)"
    assert match_line({"match": "auto"}) is None  # a run stored before the criterion was recorded


@settings(max_examples=60, deadline=None)
@given(
    flags=st.lists(
        st.tuples(st.booleans(), st.booleans(), st.booleans(), st.booleans()), min_size=1, max_size=6
    ),
    carried=st.tuples(st.booleans(), st.booleans(), st.booleans()),
)
def test_resolution_follows_the_rules_for_any_single_support_query(flags, carried) -> None:
    """One support per query with any mix of chunk id / document / lines / heading, against hits
    carrying any mix of chunk ids / lines / headings: the rule of the docstring, written out."""
    queries = []
    for i, (chunk, doc, lines, heading) in enumerate(flags):
        support = Support(
            chunk_id="c" if chunk else None,
            rel_path="a.md" if doc else None,
            line_start=1 if lines else None,
            heading_path=["A"] if heading else None,
            snippet=None if (chunk or doc or lines or heading) else "x",
        )
        queries.append((f"q{i}", [support]))
    c_chunk, c_lines, c_heading = carried
    h = hits(
        {
            "chunk_id": "c" if c_chunk else None,
            "line_start": 1 if c_lines else None,
            "heading_path": ["A"] if c_heading else None,
        }
    )
    got = resolve_auto(h, golden(*queries)).to_dict()
    for i, (chunk, doc, lines, heading) in enumerate(flags):
        if chunk and c_chunk:
            want = "chunk"
        elif doc and lines and c_lines:
            want = "span"
        elif doc and heading and c_heading:
            want = "anchor"
        elif doc:
            want = "doc"
        else:
            want = "fields"
        assert got[f"q{i}"] == want


# ------------------------------------------------------------------------------------- warnings

ANCHOR_AND_SPAN = golden(
    ("q1", [Support(rel_path="docs/x.md", heading_path=["X", "Setup"], line_start=10, line_end=14)]),
    ("q2", [Support(rel_path="docs/y.md", heading_path=["Y"], line_start=1, line_end=3)]),
    ("q3", [Support(rel_path="docs/x.md", heading_path=["X"], line_start=2, line_end=2, grade=0)]),
)
NO_LINES = hits(
    {"query_id": "q1", "doc_path": "docs/x.md", "heading_path": ["X", "Setup"], "chunk_id": "k1"},
    {"query_id": "q1", "doc_path": "docs/z.md", "heading_path": ["Z"], "chunk_id": "k2"},
    {"query_id": "q2", "doc_path": "docs/y.md", "heading_path": ["Y", "More"], "chunk_id": "k3"},
)


def test_hits_without_lines_under_auto_fall_back_to_anchor_and_say_so() -> None:
    resolved = resolve_auto(NO_LINES, ANCHOR_AND_SPAN)
    assert resolved.to_dict() == {"q1": "anchor", "q2": "anchor", "q3": "anchor"}
    warnings = matching_warnings(NO_LINES, ANCHOR_AND_SPAN, "auto", resolved)
    assert len(warnings) == 1
    w = warnings[0]
    # 2 positive supports set lines (q3's is grade 0); both queries fell back to anchor.
    assert (w["field"], w["hits_lacking"], w["hits_total"], w["supports_needing"]) == ("lines", 3, 3, 2)
    assert w["message"] == (
        "3 of 3 hits carry no line range (line_start/line_end), but 2 gold supports set line spans: "
        "match: auto fell back to anchor (2 queries)"
    )
    # ... and the fallback scores: both queries match at rank 1.
    assert len(match_hits(NO_LINES, ANCHOR_AND_SPAN).query("grade > 0")) == 2
    assert matching_warnings(NO_LINES, ANCHOR_AND_SPAN, "auto") == warnings  # resolved by default


def test_forced_span_against_hits_without_lines_cannot_match() -> None:
    warnings = matching_warnings(NO_LINES, ANCHOR_AND_SPAN, "span")
    assert [w["field"] for w in warnings] == ["lines"]
    assert warnings[0]["message"] == (
        "span matching cannot match these hits: 3 of 3 hits carry no line range (line_start/line_end), "
        "and 2 gold supports need line spans"
    )
    assert len(match_hits(NO_LINES, ANCHOR_AND_SPAN, "span")) == 0  # the zero it warns about
    # Forced doc does not use lines: nothing to warn about, and q1/q2 match by document.
    assert matching_warnings(NO_LINES, ANCHOR_AND_SPAN, "doc") == []


def test_hits_without_headings_or_chunk_ids() -> None:
    h = hits({"query_id": "q1", "doc_path": "docs/x.md"}, {"query_id": "q2", "doc_path": "docs/y.md"})
    warnings = matching_warnings(h, ANCHOR_AND_SPAN, "anchor")
    assert [(w["field"], w["hits_lacking"], w["hits_total"], w["supports_needing"]) for w in warnings] == [
        ("heading_path", 2, 2, 2)
    ]
    assert warnings[0]["message"].startswith("anchor matching cannot match these hits: 2 of 2 hits carry no ")
    # Under auto: no lines and no headings → doc, with both fallbacks named.
    auto = matching_warnings(h, ANCHOR_AND_SPAN, "auto")
    assert [w["field"] for w in auto] == ["lines", "heading_path"]
    assert all(w["message"].endswith("match: auto fell back to doc (2 queries)") for w in auto)
    chunks = golden(("q1", [Support(chunk_id="k1")]), ("q2", [Support(chunk_id="k3")]))
    forced = matching_warnings(h, chunks, "chunk")
    assert [(w["field"], w["hits_lacking"], w["supports_needing"]) for w in forced] == [("chunk_id", 2, 2)]
    assert forced[0]["message"].startswith("chunk matching cannot match these hits")
    # auto: chunk-only supports without chunk ids in the hits resolve to `fields`, which still needs them.
    auto_chunks = matching_warnings(h, chunks, "auto")
    assert auto_chunks[0]["message"].endswith(
        "fell back to fields (2 queries); under 'fields' the supports that set them cannot match"
    )


def test_a_quarter_of_hits_lacking_a_needed_field_is_reported() -> None:
    # 3 of 4 hits carry lines (auto → span), the 4th cannot match a span; 1 of 4 is not a quarter
    # of 5, so a fifth hit with lines keeps it quiet.
    s = golden(("q1", [Support(rel_path="docs/x.md", line_start=1, line_end=2)]))
    rows = [{"query_id": "q1", "doc_path": "docs/x.md", "line_start": 1}] * 3 + [
        {"query_id": "q1", "doc_path": "docs/x.md"}
    ]
    warnings = matching_warnings(hits(*rows), s, "auto")
    assert [(w["field"], w["hits_lacking"], w["hits_total"]) for w in warnings] == [("lines", 1, 4)]
    assert "under span matching those hits can never match the 1 gold supports" in warnings[0]["message"]
    assert matching_warnings(hits(*rows, rows[0]), s, "auto") == []


def test_basenames_where_the_golden_set_has_relative_paths() -> None:
    # Haystack's default store_full_path=False: hits name files by basename.
    h = hits(
        {"query_id": "q1", "doc_path": "x.md", "heading_path": ["X", "Setup"]},
        {"query_id": "q1", "doc_path": "z.md", "heading_path": ["Z"]},
        {"query_id": "q2", "doc_path": "y.md", "heading_path": ["Y"]},
    )
    warnings = matching_warnings(h, ANCHOR_AND_SPAN, "auto")
    paths = [w for w in warnings if w["field"] == "doc_path"]
    assert len(paths) == 1
    assert (paths[0]["hits_lacking"], paths[0]["hits_total"], paths[0]["supports_needing"]) == (3, 3, 2)
    assert paths[0]["message"] == (
        "no hit's doc_path matches any gold rel_path: 2 of 3 hits carry basenames (e.g. 'x.md') where the "
        "golden set has relative paths (e.g. 'docs/x.md'); the 2 gold supports named by rel_path cannot "
        "match any of the 3 hits"
    )
    prefixed = hits({"query_id": "q1", "doc_path": "/srv/kb/docs/x.md", "heading_path": ["X"]})
    msg = matching_warnings(prefixed, ANCHOR_AND_SPAN, "anchor")[0]["message"]
    assert "1 of 1 hits carry paths with another prefix (e.g. '/srv/kb/docs/x.md')" in msg
    unrelated = hits({"query_id": "q1", "doc_path": "other.md", "heading_path": ["X"]})
    msg = matching_warnings(unrelated, ANCHOR_AND_SPAN, "anchor")[0]["message"]
    assert msg.startswith(
        "no hit's doc_path matches any gold rel_path (e.g. hit 'other.md', gold 'docs/x.md')"
    )
    # Forced chunk never compares paths.
    assert all(w["field"] != "doc_path" for w in matching_warnings(h, ANCHOR_AND_SPAN, "chunk"))


def test_documents_named_by_doc_id_and_the_catch_all() -> None:
    s = golden(("q1", [Support(doc_id="D1")]), ("q2", [Support(rel_path="docs/y.md")]))
    h = hits(
        {"query_id": "q1", "doc_id": "E", "doc_path": "docs/y.md"},
        {"query_id": "q2", "doc_path": "docs/z.md"},
    )
    warnings = matching_warnings(h, s, "auto")
    # docs/y.md is a gold path (of q2), so the path check passes; D1 is named by no hit.
    assert [(w["field"], w["supports_needing"]) for w in warnings] == [("doc_id", 1)]
    assert warnings[0]["message"].startswith(
        "no hit's doc_id equals any gold doc_id (e.g. hit 'E', gold 'D1')"
    )
    # Every field fine, yet nothing matches (each query's hits name the other query's document).
    s2 = golden(("q1", [Support(rel_path="docs/z.md")]), ("q2", [Support(rel_path="docs/y.md")]))
    catch_all = matching_warnings(h, s2, "auto")
    assert [(w["field"], w["hits_lacking"], w["supports_needing"]) for w in catch_all] == [("matches", 2, 2)]
    assert catch_all[0]["message"] == (
        "none of the 2 hits matches any of the 2 gold supports under auto matching: "
        "every retrieval score is 0"
    )
    good = hits({"query_id": "q1", "doc_path": "docs/z.md"})
    assert matching_warnings(good, s2, "auto") == []
    assert matching_warnings(hits(), s2, "auto") == []  # an empty run is reported elsewhere


def test_one_document_named_by_several_supports_under_doc_matching_is_reported() -> None:
    # Two chunks of d1 are gold; the hits carry no chunk ids, so auto falls back to doc, where both
    # supports are d1 and one hit of d1 is credited to one of them: recall@1 0.5 with d1 at rank 1.
    s = golden(
        ("q1", [Support(doc_id="d1", chunk_id="c1"), Support(doc_id="d1", chunk_id="c2")]),
        ("q2", [Support(doc_id="d2"), Support(doc_id="d3")]),  # two documents: nothing to say
    )
    h = hits({"query_id": "q1", "doc_id": "d1"}, {"query_id": "q2", "doc_id": "d2"})
    assert resolve_auto(h, s).to_dict() == {"q1": "doc", "q2": "doc"}
    warnings = matching_warnings(h, s, "auto")
    repeats = [w for w in warnings if "one document in several supports" in w["message"]]
    assert [(w["field"], w["supports_needing"]) for w in repeats] == [("doc_id", 2)]
    assert repeats[0]["message"].startswith(
        "1 query matched by document names one document in several supports (2 supports; first: q1): "
    )
    # The consequence the warning names, as scored: d1 at rank 1 recalls half of q1's gold.
    outcomes = typed_frame([{"query_id": q, "n_hits": 1} for q in ("q1", "q2")], OUTCOME_COLUMNS)
    queries = queries_table(GoldenSet(queries=[GoldenQuery(id=q, query="?") for q in ("q1", "q2")]))
    scores = build_query_scores(queries, s, h, outcomes, typed_frame([], CITATION_COLUMNS), ks=(1,))
    assert scores.set_index("query_id").loc["q1", "recall@1"] == 0.5
    # A bare document beside a snippet of it, under a forced doc: the same; by chunk, nothing to say.
    s2 = golden(("q1", [Support(doc_id="d1"), Support(doc_id="d1", snippet="one")]))
    assert any("one document in several supports" in w["message"] for w in matching_warnings(h, s2, "doc"))
    h_chunks = hits(
        {"query_id": "q1", "doc_id": "d1", "chunk_id": "c1"},
        {"query_id": "q1", "doc_id": "d1", "chunk_id": "c2"},
    )
    assert not any("several supports" in w["message"] for w in matching_warnings(h_chunks, s, "auto"))
