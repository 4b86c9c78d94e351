"""The labels file: what a person's label is, every bad line named at once, the latest label of a
labeller kept, several labellers' median, and an append that survives an abrupt end."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.judge.labels import (
    Label,
    append_label,
    item_hash,
    labels_table,
    parse_labels,
    read_labels,
    reference_labels,
)

H1, H2 = item_hash("one"), item_hash("two")


def _label(**over) -> dict:
    base = {
        "criterion": "groundedness",
        "query_id": "q1",
        "item_hash": H1,
        "label": 4,
        "labeller": "ana",
        "labelled_at": "2026-12-06T15:10:00+00:00",
    }
    return {**base, **over}


def test_a_good_file_reads_with_who_and_when(tmp_path):
    path = tmp_path / "labels.jsonl"
    path.write_text(
        json.dumps(_label()) + "\n\n" + json.dumps(_label(item_hash=H2, label=0, run_id="r1")) + "\n"
    )
    table = read_labels(path)
    assert list(table["label"]) == [4, 0] and list(table["labeller"]) == ["ana", "ana"]
    assert list(table["run_id"]) == ["", "r1"]
    assert table["labelled_at"].iloc[0] == "2026-12-06T15:10:00Z"


def test_every_bad_line_is_named_with_its_field_and_reason():
    lines = [
        json.dumps(_label()),
        "{not json",
        json.dumps(_label(label=6, query_id="q2")),
        json.dumps(_label(label="4", query_id="q3")),
        json.dumps(_label(criterion="fluency", query_id="q4")),
        json.dumps(_label(labelled_at="2026-12-06T15:10:00", query_id="q5")),
        json.dumps(_label(labeller="  ", query_id="q6")),
        json.dumps(_label(item_hash="abc", query_id="q7")),
        json.dumps(_label(score=3, query_id="q8")),
        json.dumps([1, 2]),
    ]
    with pytest.raises(InputError) as caught:
        parse_labels("\n".join(lines), "labels.jsonl")
    shown = [o.render() for o in caught.value.offenders]
    assert len(shown) == 9
    assert shown[0].startswith("labels.jsonl:line 2, column 2: not JSON")
    assert (
        "labels.jsonl:line 3 — query 'q2' — field 'label': Input should be less than or equal to 5" in shown
    )
    assert any(s.startswith("labels.jsonl:line 4 — query 'q3' — field 'label'") for s in shown)
    assert any("line 5 — query 'q4' — field 'criterion'" in s for s in shown)
    assert any("line 6 — query 'q5' — field 'labelled_at': needs a time zone" in s for s in shown)
    assert any("line 7 — query 'q6' — field 'labeller': must name the person" in s for s in shown)
    assert any("line 8 — query 'q7' — field 'item_hash': must be 64 lower-case hex" in s for s in shown)
    assert any("line 9 — query 'q8' — field 'score': unknown field" in s for s in shown)
    assert shown[-1] == "labels.jsonl:line 10: a label is a JSON object"


def test_a_labeller_relabelling_replaces_and_several_labellers_give_the_lower_median():
    labels = [
        Label.model_validate(_label(label=1)),
        Label.model_validate(_label(label=5)),  # ana again: replaces her 1
        Label.model_validate(_label(labeller="bo", label=2)),
        Label.model_validate(_label(labeller="cy", label=3)),
        Label.model_validate(_label(labeller="di", label=4)),
        Label.model_validate(_label(item_hash=H2, label=0, query_id="q2")),
    ]
    table = labels_table(labels)
    assert (
        len(table) == 5
        and table.loc[(table["labeller"] == "ana") & (table["item_hash"] == H1), "label"].item() == 5
    )
    refs = reference_labels(table).set_index("item_hash")
    assert refs.loc[H1, "label"] == 3 and refs.loc[H1, "labellers"] == 4  # 2 3 4 5 → lower median 3
    assert refs.loc[H2, "label"] == 0 and refs.loc[H2, "labellers"] == 1


def test_an_absent_file_is_no_label_and_appends_keep_earlier_lines(tmp_path):
    path = tmp_path / "sub" / "labels.jsonl"
    assert read_labels(path).empty
    path.parent.mkdir()
    path.write_text(json.dumps(_label()))  # a hand-edited file without its last newline
    append_label(path, Label.model_validate(_label(item_hash=H2, label=2)))
    table = read_labels(path)
    assert list(table["item_hash"]) == [H1, H2] and list(table["label"]) == [4, 2]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.builds(
            Label,
            criterion=st.sampled_from(["groundedness", "correctness", "relevance"]),
            query_id=st.text(min_size=1, max_size=12).filter(str.strip),
            item_hash=st.binary(min_size=1, max_size=8).map(lambda b: item_hash(b.hex())),
            label=st.integers(0, 5),
            labeller=st.text(min_size=1, max_size=10).filter(lambda s: s == s.strip() and s),
            labelled_at=st.datetimes(timezones=st.just(UTC), min_value=datetime(2000, 1, 1)),
            run_id=st.text(max_size=10),
            note=st.text(max_size=20),
        ),
        max_size=8,
    )
)
def test_labels_written_read_back_equal(labels):
    text = "".join(label.to_line() + "\n" for label in labels)
    assert parse_labels(text, "x") == labels


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 4), st.integers(0, 5)), max_size=40))
def test_the_reference_label_is_each_items_lower_median(triples):
    labels = labels_table(
        Label.model_validate(_label(item_hash=item_hash(str(item)), labeller=f"p{person}", label=label))
        for item, person, label in triples
    )
    refs = reference_labels(labels).set_index("item_hash")
    assert len(refs) == labels["item_hash"].nunique()
    for key, group in labels.groupby("item_hash"):
        values = sorted(group["label"])
        assert refs.loc[key, "label"] == values[(len(values) - 1) // 2]
        assert refs.loc[key, "labellers"] == group["labeller"].nunique()
