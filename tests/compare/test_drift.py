"""Golden-set drift: queries only in one run and changed gold are listed, never silently dropped."""

from __future__ import annotations

import copy

from hypothesis import given, settings
from hypothesis import strategies as st

from kebab_eval_pipeline.compare.document import comparison_document
from kebab_eval_pipeline.compare.drift import GOLD_QUERY_FIELDS, changed_gold
from kebab_eval_pipeline.compare.runs import compare_runs
from kebab_eval_pipeline.golden.model import GoldenSet
from kebab_eval_pipeline.golden.tables import queries_table, supports_table
from tests.compare.conftest import hit, replay_bundle, write_golden

BASE = [
    {"id": "keep", "query": "kept?", "supports": [{"rel_path": "a.md", "line_start": 1, "line_end": 4}]},
    {"id": "gone", "query": "removed later?", "supports": [{"rel_path": "b.md"}]},
    {"id": "moved", "query": "moved?", "supports": [{"rel_path": "c.md", "line_start": 10, "line_end": 12}]},
    {"id": "refuse", "query": "unknowable?", "answerable": False, "supports": []},
]


def tables(queries: list[dict]):
    golden = GoldenSet.model_validate({"schema_version": "1", "name": "g", "queries": queries})
    return queries_table(golden), supports_table(golden)


def changed(a: list[dict], b: list[dict]) -> dict[str, list[str]]:
    qa, sa = tables(a)
    qb, sb = tables(b)
    out = changed_gold(qa, sa, qb, sb)
    return dict(zip(out["query_id"], out["fields"], strict=True))


def test_identical_sets_have_no_changed_gold():
    assert changed(BASE, copy.deepcopy(BASE)) == {}


def test_each_kind_of_gold_change_is_named():
    b = copy.deepcopy(BASE)
    b[0]["supports"][0]["line_end"] = 5  # a support's span
    b[2]["must_contain"] = ["twelve"]  # an answer constraint
    b[3]["answerable"] = True  # answerability
    b[3]["supports"] = [{"rel_path": "d.md"}]
    assert changed(BASE, b) == {
        "keep": ["supports"],
        "moved": ["must_contain"],
        "refuse": ["answerable", "supports"],
    }


def test_support_order_and_labels():
    b = copy.deepcopy(BASE)
    b[0]["supports"].append({"rel_path": "z.md"})
    b[1]["category"] = "renamed"  # a label, not gold
    b[1]["tags"] = ["new-tag"]
    assert changed(BASE, b) == {"keep": ["supports"]}
    swapped = copy.deepcopy(b)
    swapped[0]["supports"].reverse()  # same supports, other order: support_idx differs
    assert changed(b, swapped) == {"keep": ["supports"]}


_text = st.text(alphabet="abcdé한 ", min_size=1, max_size=6)


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(min_value=1, max_value=6),
    target=st.integers(min_value=0, max_value=5),
    field=st.sampled_from(["query", "must_contain", "forbidden", "line_start", "rel_path"]),
    value=_text,
)
def test_one_change_is_reported_exactly_once(n, target, field, value):
    """Property: changing one field of one query reports exactly that query and that field."""
    a = [
        {
            "id": f"q{i}",
            "query": f"question {i}",
            "must_contain": [f"m{i}"],
            "supports": [{"rel_path": f"doc{i}.md", "line_start": i + 1, "line_end": i + 3}],
        }
        for i in range(n)
    ]
    b = copy.deepcopy(a)
    q = b[target % n]
    if field == "line_start":
        q["supports"][0]["line_start"] = q["supports"][0]["line_start"] + 1
        expected = "supports"
    elif field == "rel_path":
        q["supports"][0]["rel_path"] = f"other-{value.strip() or 'x'}.md"
        expected = "supports"
    elif field == "query":
        q["query"] = q["query"] + " " + value
        expected = "query"
    else:
        q[field] = [*q.get(field, []), value]
        expected = field
    assert expected in (*GOLD_QUERY_FIELDS, "supports")
    assert changed(a, b) == {q["id"]: [expected]}
    assert changed(a, a) == {}


def test_comparison_lists_drift_and_flags_changed_gold(tmp_path):
    v2 = copy.deepcopy(BASE)
    v2 = [q for q in v2 if q["id"] != "gone"]
    v2.append({"id": "new", "query": "added?", "supports": [{"rel_path": "n.md"}]})
    v2[1]["supports"][0]["line_end"] = 14  # "moved": the gold span grew
    golden_a = write_golden(tmp_path / "v1.yaml", BASE)
    golden_b = write_golden(tmp_path / "v2.yaml", v2)
    trace = [
        {"query_id": "keep", "hits": [hit(1, "a.md", (1, 4))]},
        {"query_id": "gone", "hits": [hit(1, "b.md", (1, 2))]},
        {"query_id": "moved", "hits": [hit(2, "c.md", (10, 12))]},
        {"query_id": "new", "hits": [hit(1, "n.md", (1, 2))]},
        {"query_id": "refuse", "hits": []},
    ]
    a = replay_bundle(tmp_path, "a", golden_a, trace)
    b = replay_bundle(tmp_path, "b", golden_b, trace)
    report = compare_runs(a, b)
    info = report.info
    assert info["only_in_a"] == ["gone"] and info["only_in_b"] == ["new"]
    assert info["gold_changed"] == [{"query_id": "moved", "fields": ["supports"]}]
    v = report.per_query.set_index("query_id")
    assert v.loc["gone", "verdict"] == "only_a" and v.loc["new", "verdict"] == "only_b"
    assert bool(v.loc["moved", "gold_changed"]) and not bool(v.loc["keep", "gold_changed"])
    # its gold changed: set aside, not compared (its ranks stay as information)
    assert v.loc["moved", "verdict"] == "gold_changed"
    assert v.loc["moved", "note"] == "gold changed (supports): not compared"
    assert any(
        "golden sets differ" in w and "1 with changed gold: compared over the 2 unchanged queries" in w
        for w in info["warnings"]
    )
    assert info["golden_restriction"] == {
        "n_compared": 2,
        "n_dropped": 3,
        "dropped": {
            "added": 1,
            "removed": 1,
            "question_changed": 0,
            "supports_changed": 1,
            "other_gold_changed": 0,
        },
        "not_restricted": [],
    }
    md = report.markdown
    assert "## Golden-set drift" in md and "gone" in md and "new" in md and "moved (supports)" in md
    # Every query of either set has exactly one row.
    assert sorted(report.per_query["query_id"]) == ["gone", "keep", "moved", "new", "refuse"]


def test_drift_of_many_queries_is_capped_in_the_report_and_complete_in_the_json(tmp_path):
    # 40 queries only in a, 40 only in b, 30 with changed gold: the Markdown (shown in the UI)
    # names the first 25 of each and says how many more; the JSON document lists every one.
    old = [{"id": f"old{i:02d}", "query": f"old {i}?", "supports": [{"rel_path": "o.md"}]} for i in range(40)]
    new = [{"id": f"new{i:02d}", "query": f"new {i}?", "supports": [{"rel_path": "n.md"}]} for i in range(40)]
    moved_a = [
        {
            "id": f"mv{i:02d}",
            "query": f"mv {i}?",
            "supports": [{"rel_path": "m.md", "line_start": 1, "line_end": 2}],
        }
        for i in range(30)
    ]
    moved_b = copy.deepcopy(moved_a)
    for q in moved_b:
        q["supports"][0]["line_end"] = 3
    golden_a = write_golden(tmp_path / "a.yaml", old + moved_a)
    golden_b = write_golden(tmp_path / "b.yaml", new + moved_b)
    trace = [{"query_id": q["id"], "hits": [hit(1, "m.md", (1, 2))]} for q in old + new + moved_a]
    report = compare_runs(
        replay_bundle(tmp_path, "a", golden_a, trace), replay_bundle(tmp_path, "b", golden_b, trace)
    )
    # the report says how many resamples its tests drew (fewer can be configured for huge runs)
    assert "(seed 0, 10,000 resamples for the randomization tests and the bootstrap)" in report.markdown
    drift = report.markdown.split("## Golden-set drift", 1)[1]
    lines = [line for line in drift.splitlines() if line.startswith("- ")]
    assert len(lines) == 3
    only_a, only_b, changed_line = lines
    assert only_a.startswith("- only in `a` (40): old00, old01,") and "old24" in only_a
    assert "old25" not in only_a and only_a.endswith("… 15 more (the JSON report lists all)")
    assert only_b.startswith("- only in `b` (40): new00,") and only_b.endswith(
        "… 15 more (the JSON report lists all)"
    )
    assert changed_line.startswith("- gold changed (30): mv00 (supports), mv01 (supports),")
    assert "mv24 (supports)" in changed_line and "mv25" not in changed_line
    assert changed_line.endswith("… 5 more (the JSON report lists all)")
    doc = comparison_document(report)
    assert doc["only_in_a"] == [f"old{i:02d}" for i in range(40)]
    assert doc["only_in_b"] == [f"new{i:02d}" for i in range(40)]
    assert [c["query_id"] for c in doc["gold_changed"]] == [f"mv{i:02d}" for i in range(30)]
