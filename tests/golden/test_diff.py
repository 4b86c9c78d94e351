"""The diff of two golden-set versions (golden/diff.py) on constructed sets: each kind of difference
named with its ids and counts, labels never a difference, and the diff's symmetries as properties."""

from __future__ import annotations

import copy
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from kebab_eval_pipeline.golden.diff import DIFF_KINDS, GoldenDiff, diff_document, diff_golden, diff_markdown
from kebab_eval_pipeline.golden.model import GoldenSet
from kebab_eval_pipeline.golden.tables import queries_table, supports_table

V1 = [
    {"id": "same", "query": "How long does kimchi ferment?", "supports": [{"doc_id": "kimchi", "grade": 2}]},
    {"id": "reworded", "query": "What is kombucha?", "supports": [{"rel_path": "kombucha.md"}]},
    {
        "id": "regraded",
        "query": "Why is my sauerkraut soft?",
        "supports": [{"rel_path": "kraut.md", "heading_path": ["Soft kraut"], "grade": 1}],
    },
    {"id": "resupported", "query": "Salt ratio?", "supports": [{"rel_path": "salt.md", "line_start": 3}]},
    {"id": "dropped", "query": "Is mould safe?", "supports": [{"doc_id": "mould"}]},
    {"id": "refuse", "query": "What will the weather be?", "answerable": False},
]


def tables(queries: list[dict]):
    golden = GoldenSet.model_validate({"schema_version": "1", "name": "g", "queries": queries})
    return queries_table(golden), supports_table(golden)


def diff(a: list[dict], b: list[dict]) -> GoldenDiff:
    return diff_golden(*tables(a), *tables(b))


def v2() -> list[dict]:
    b = copy.deepcopy(V1)
    b[1]["query"] = "What is kombucha made of?"  # the question reworded
    b[2]["supports"][0]["grade"] = 2  # a relevance label changed
    b[3]["supports"].append({"rel_path": "brine.md"})  # a gold hit added
    b[5]["answerable"] = True  # other gold: answerability
    del b[4]
    b.append({"id": "added", "query": "Can I ferment garlic?", "supports": [{"doc_id": "garlic"}]})
    b[0]["category"] = "timing"  # labels only: not gold
    b[0]["tags"] = ["kimchi"]
    return b


def test_each_kind_of_difference_is_listed_with_its_ids_and_counted():
    d = diff(V1, v2())
    assert {kind: d.ids(kind) for kind in DIFF_KINDS} == {
        "added": ["added"],
        "removed": ["dropped"],
        "question_changed": ["reworded"],
        "supports_changed": ["regraded", "resupported"],
        "other_gold_changed": ["refuse"],
    }
    assert d.counts() == {
        "added": 1,
        "removed": 1,
        "question_changed": 1,
        "supports_changed": 2,
        "other_gold_changed": 1,
        "unchanged": 1,
    }
    assert d.unchanged.tolist() == ["same"] and (d.n_a, d.n_b) == (6, 6)
    assert d.n_dropped == 6 and not d.is_empty  # 1 added + 1 removed + 4 changed


def test_a_query_whose_question_and_supports_changed_counts_under_both():
    b = copy.deepcopy(V1)
    b[0]["query"] = "How long does kimchi ferment in winter?"
    b[0]["supports"][0]["grade"] = 1
    d = diff(V1, b)
    assert d.ids("question_changed") == d.ids("supports_changed") == ["same"]
    assert d.n_dropped == 1 and len(d.unchanged) == 5
    assert d.changed_fields().to_dict("records") == [{"query_id": "same", "fields": ["query", "supports"]}]


def test_labels_and_query_order_are_no_difference():
    b = list(reversed(copy.deepcopy(V1)))
    b[0]["difficulty"] = "hard"
    b[1]["lang"] = "en"
    d = diff(V1, b)
    assert d.is_empty and d.counts()["unchanged"] == 6 and d.n_dropped == 0


def test_sets_with_no_query_in_common():
    d = diff(V1[:2], V1[2:])
    assert d.ids("removed") == ["reworded", "same"]
    assert d.ids("added") == ["dropped", "refuse", "regraded", "resupported"]
    assert len(d.changes) == 0 and len(d.unchanged) == 0


def test_document_and_markdown():
    about_a = {"source": "v1.yaml", "kind": "file", "name": "g", "sha256": "0123456789abcdef", "queries": 6}
    about_b = {"source": "nightly-7", "kind": "run", "name": "g", "sha256": "fedcba9876543210", "queries": 6}
    d = diff(V1, v2())
    doc = diff_document(d, about_a, about_b)
    assert json.loads(json.dumps(doc)) == doc  # JSON-ready as it is
    assert doc["identical"] is False and doc["a"] == about_a and doc["counts"]["supports_changed"] == 2
    assert doc["other_gold_changed"] == [{"query_id": "refuse", "fields": ["answerable"]}]
    assert doc["question_changed"] == ["reworded"]
    md = diff_markdown(d, about_a, about_b)
    assert md.splitlines()[:4] == [
        "# Golden-set diff: `v1.yaml` → `nightly-7`",
        "",
        "- a: `v1.yaml` (golden set g, sha256 0123456789ab, 6 queries)",
        "- b: `nightly-7` (stored run, golden set g, sha256 fedcba987654, 6 queries)",
    ]
    assert "| supports changed | 2 |" in md and "| unchanged | 1 |" in md
    assert "- supports changed (2): regraded, resupported" in md
    assert "- other gold changed (1): refuse (answerable)" in md
    same = diff_markdown(diff(V1, V1), about_a, about_a)
    assert "No difference: the same 6 queries" in same and "| change |" not in same


def test_markdown_caps_long_id_lists():
    many = [{"id": f"q{i:03d}", "query": f"question {i}?"} for i in range(120)]
    md = diff_markdown(diff(many[:1], many), {"source": "a"}, {"source": "b"})
    line = next(x for x in md.splitlines() if x.startswith("- added"))
    assert line.startswith("- added (119): q001, q002,") and "q050" in line and "q051" not in line
    assert line.endswith("… 69 more (--format json lists all)")


# -- properties -----------------------------------------------------------------------------------

_ids = st.sampled_from([f"q{i}" for i in range(8)])
_support = st.fixed_dictionaries(
    {"doc_id": st.sampled_from(["d1", "d2", "d3"]), "grade": st.integers(min_value=0, max_value=3)}
)
_query = st.fixed_dictionaries(
    {
        "query": st.sampled_from(["why?", "how?", "when?"]),
        "answerable": st.booleans(),
        "supports": st.lists(_support, max_size=3),
        "category": st.sampled_from(["general", "factual"]),
    }
)
_golden = st.dictionaries(_ids, _query, min_size=1, max_size=8).map(
    lambda by_id: [{"id": q, **fields} for q, fields in by_id.items()]
)


@settings(max_examples=60, deadline=None)
@given(a=_golden)
def test_a_set_diffed_with_itself_is_empty(a):
    d = diff(a, copy.deepcopy(a))
    assert d.is_empty and d.n_dropped == 0
    assert d.counts() == {**dict.fromkeys(DIFF_KINDS, 0), "unchanged": len(a)}


@settings(max_examples=60, deadline=None)
@given(a=_golden, b=_golden)
def test_the_diff_reversed_swaps_added_and_removed_and_keeps_the_changes(a, b):
    forward, backward = diff(a, b), diff(b, a)
    assert forward.ids("added") == backward.ids("removed")
    assert forward.ids("removed") == backward.ids("added")
    for kind in ("question_changed", "supports_changed", "other_gold_changed"):
        assert forward.ids(kind) == backward.ids(kind)
    assert forward.unchanged.tolist() == backward.unchanged.tolist()
    # every query of either set is added, removed, changed or unchanged: exactly one of those
    ids_a, ids_b = {q["id"] for q in a}, {q["id"] for q in b}
    changed = set(forward.changes["query_id"])
    assert set(forward.ids("added")) == ids_b - ids_a and set(forward.ids("removed")) == ids_a - ids_b
    assert changed | set(forward.unchanged) == ids_a & ids_b and not changed & set(forward.unchanged)
    # a query in both is unchanged exactly when its question, answerability and supports are equal
    by_id_b = {q["id"]: q for q in b}
    expected = sorted(
        q["id"]
        for q in a
        if q["id"] in by_id_b
        and all(q[f] == by_id_b[q["id"]][f] for f in ("query", "answerable", "supports"))
    )
    assert forward.unchanged.tolist() == expected
