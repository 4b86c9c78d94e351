"""Ids are the text the user wrote: an unquoted YAML scalar YAML 1.1 would type (``010`` → 8,
``1:30`` → 90, ``0x1F`` → 31, ``no`` → false, ``2024-01-02`` → a date) is read as its text in every
YAML golden format and wherever a value is an identifier or a slice value; only the keys meant as
numbers or bools (``grade``, ``answerable`` …) are typed. Null stays "no value", refused with
"quote it" where an id is required. Run configs refuse such a scalar where text is expected, saying
to quote it. Whatever the tool writes back (convert, record) reads back as the same ids."""

from __future__ import annotations

import string
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kebab_eval_pipeline.chain.settings import load_settings
from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.foundation.yaml_io import id_problem
from kebab_eval_pipeline.golden.convert import render_canonical
from kebab_eval_pipeline.golden.load import TYPED_KEYS, load_golden
from kebab_eval_pipeline.golden.model import GoldenQuery
from kebab_eval_pipeline.golden.record import RecordFile

#: The issue's cases: what YAML 1.1 made of each before (8, 90, 31, 1000, 12, 5, bools, a date …).
RENAMED = ["010", "1:30", "0x1F", "1_000", "+12", "0b101", "no", "on", "yes", "off", "1e3", ".inf",
           "-.inf", ".NaN", "2024-01-02", "2024-01-02T10:00:00Z", "0o17", "1.5", "12:30:45", "=", "<<",
           "True", "OFF", "0"]  # fmt: skip


def golden(tmp_path: Path, text: str, name: str = "g.yaml") -> list[GoldenQuery]:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return load_golden(path).golden.queries


@pytest.mark.parametrize("scalar", RENAMED)
def test_every_yaml_format_reads_an_unquoted_id_as_its_text(tmp_path: Path, scalar: str):
    s = scalar
    kebab = golden(
        tmp_path,
        f"- id: {s}\n  query: q\n  lang: {s}\n  tags: [{s}, t]\n  group: {s}\n  difficulty: {s}\n"
        f"  category: {s}\n  expected_chunk_ids: [{s}]\n  expected_doc_ids: [{s}]\n",
        "kebab.yaml",
    )
    (q,) = kebab
    assert (q.id, q.lang, q.tags, q.group, q.difficulty, q.category) == (s, s, [s, "t"], s, s, s)
    assert [(x.chunk_id, x.doc_id) for x in q.supports] == [(s, s)]
    (q,) = golden(tmp_path, f"queries:\n- id: {s}\n  query: {s}\n  supports:\n  - doc_id: {s}\n"
                  f"    chunk_id: {s}\n    rel_path: {s}\n    heading_path: [{s}]\n    snippet: {s}\n"
                  f"    grade: 2\n", "canonical.yaml")  # fmt: skip
    assert (q.id, q.query) == (s, s)
    support = q.supports[0]
    assert (support.doc_id, support.chunk_id, support.rel_path, support.heading_path, support.snippet) == (
        s, s, s, [s], s)  # fmt: skip
    assert support.grade == 2
    anchor = f"- id: {s}\n  question: q\n  tags: [{s}]\n  gold_supports:\n  - rel_path: {s}\n"
    (q,) = golden(tmp_path, anchor + f"    heading_path: [{s}]\n    snippets: [{s}]\n", "anchor.yaml")
    assert (q.id, q.tags, q.supports[0].rel_path, q.supports[0].heading_path, q.supports[0].snippet) == (
        s, [s], s, [s], s)  # fmt: skip
    (q,) = golden(tmp_path, f"queries:\n- id: {s}\n  intent: q\n  lang: {s}\n  expected:\n    file: {s}\n"
                  f"    symbol: {s}\n    line_range: [3, 010]\n", "ckv.yaml")  # fmt: skip
    assert (q.id, q.lang, q.supports[0].rel_path, q.supports[0].symbol) == (s, s, s, s)
    assert (q.supports[0].line_start, q.supports[0].line_end) == (3, 8)  # a typed key: YAML's number
    (q,) = golden(tmp_path, f"- qid: {s}\n  question: q\n  gold_citations: [{s}]\n", "wfgy.yaml")
    assert (q.id, q.supports[0].chunk_id) == (s, s)


def test_010_and_8_are_two_queries_not_a_collision(tmp_path: Path):
    # main: 010 was read as 8, so the set held "8" twice ("duplicate id") or, alone, a renamed id.
    queries = golden(tmp_path, "- id: 010\n  query: a\n  expected_doc_ids: [d1]\n"
                     "- id: 8\n  query: b\n  expected_doc_ids: [d2]\n")  # fmt: skip
    assert [q.id for q in queries] == ["010", "8"]


def test_keys_meant_as_numbers_and_bools_stay_typed(tmp_path: Path):
    (q,) = golden(tmp_path, "queries:\n- id: a\n  query: x\n  answerable: yes\n  pending: off\n  supports:\n"
                  "  - {doc_id: d, chunk_id: c, grade: 0x2, line_start: 1_0, line_end: 12}\n"
                  "  required_support_groups: [[0]]\n")  # fmt: skip
    assert (q.answerable, q.pending, q.required_support_groups) == (True, False, [[0]])
    assert (q.supports[0].grade, q.supports[0].line_start, q.supports[0].line_end) == (2, 10, 12)
    assert {"answerable", "pending", "grade", "line_start", "line_end", "required_support_groups",
            "line_range"} == TYPED_KEYS  # fmt: skip
    (q,) = golden(tmp_path, "- qid: w\n  question: q\n  answerable: no\n", "wfgy.yaml")
    assert (q.answerable, q.category) == (False, "unanswerable")


@pytest.mark.parametrize("written", ["null", "~", ""])
def test_a_null_id_is_refused_saying_quote_it(tmp_path: Path, written: str):
    path = tmp_path / "g.yaml"
    path.write_text(f"- id: {written}\n  query: a\n  tags: [{written or 'null'}]\n  expected_doc_ids: [d]\n")
    with pytest.raises(InputError) as err:
        load_golden(path)
    by_field = {o.field: o for o in err.value.offenders}
    assert set(by_field) == {"id", "tags.0"}
    assert "quote it" in by_field["id"].reason and by_field["id"].position == "line 1"
    assert "quote it" in by_field["tags.0"].reason


def test_a_json_number_in_a_text_field_says_quote_it(tmp_path: Path):
    path = tmp_path / "g.json"
    path.write_text('[{"id": "a", "query": "x", "expected_doc_ids": [1e3], "lang": true}]')
    with pytest.raises(InputError) as err:
        load_golden(path)
    reasons = {o.field: o.reason for o in err.value.offenders}
    assert reasons == {
        "supports.0.doc_id": "expected text, got the float 1000.0: quote it",
        "lang": "expected text, got the bool True: quote it",
    }


def test_run_config_refuses_an_unquoted_renamed_value_saying_quote_it(tmp_path: Path):
    # main: "Input should be a valid string" — refused, but not saying why or what to do.
    path = tmp_path / "run.yaml"
    path.write_text("baseline: 010\ngolden_health:\n  semantic_languages: [en, no]\n")
    with pytest.raises(InputError) as err:
        load_settings(path)
    reasons = {o.field: (o.position, o.reason) for o in err.value.offenders}
    assert reasons == {
        "baseline": (
            "line 1",
            "YAML reads the unquoted 010 as a number (8), not as the text written: quote it ('010')",
        ),
        "golden_health.semantic_languages.1": (
            "line 3",
            "YAML reads the unquoted no as a bool (false), not as the text written: quote it ('no')",
        ),
    }
    path.write_text("baseline: '010'\ngolden_health:\n  semantic_languages: [en, 'no']\n")
    loaded = load_settings(path)
    assert (loaded.baseline, loaded.golden_health.semantic_languages) == ("010", ["en", "no"])


def test_convert_and_record_write_ids_that_read_back(tmp_path: Path):
    source = tmp_path / "in.yaml"
    source.write_text("- id: 010\n  query: a\n  expected_doc_ids: [0x1F]\n  tags: [no]\n")
    loaded = load_golden(source).golden
    for suffix in (".yaml", ".json", ".jsonl"):
        out = tmp_path / f"out{suffix}"
        out.write_text(render_canonical(loaded, suffix))
        (q,) = load_golden(out).golden.queries
        assert (q.id, q.supports[0].doc_id, q.tags) == ("010", "0x1F", ["no"])
    # A recording session appends to a file whose ids were written unquoted: they stay theirs.
    record = tmp_path / "rec.yaml"
    record.write_text("schema_version: '1'\nname: rec\nqueries:\n- id: 010\n  query: a\n"
                      "  supports:\n  - doc_id: d\n")  # fmt: skip
    session = RecordFile.open(record)
    assert session.ids() == {"010"}
    assert session.append(GoldenQuery(id="1:30", query="b", supports=[{"doc_id": "2024-01-02"}]))
    queries = load_golden(record).golden.queries
    assert [(q.id, q.supports[0].doc_id) for q in queries] == [("010", "d"), ("1:30", "2024-01-02")]


# Characters an id may hold (query ids: no whitespace or control character), YAML's indicators
# included: the property keeps only texts YAML reads as one plain scalar of exactly that text.
ID_CHARS = st.sampled_from(string.ascii_letters + string.digits + string.punctuation + "é中_") | (
    st.characters(blacklist_categories=("Cc", "Cs", "Zs", "Zl", "Zp", "Cf"))
)


def plain_scalar(text: str, line: str) -> bool:
    """Whether ``line`` (``text`` written unquoted in it) holds ``text`` as a plain scalar."""
    try:
        root = yaml.compose(line, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return False
    if not isinstance(root, yaml.SequenceNode) or len(root.value) != 1:
        return False
    (node,) = [v for k, v in root.value[0].value if k.value == "id"]
    return isinstance(node, yaml.ScalarNode) and node.style is None and node.value == text


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(text=st.text(ID_CHARS, min_size=1, max_size=12) | st.sampled_from(RENAMED))
def test_any_id_written_unquoted_reads_back_as_the_same_id(tmp_path: Path, text: str):
    assume(id_problem(text, query_id=True) is None)
    document = f"- id: {text}\n  query: q\n  expected_doc_ids:\n  - {text}\n  tags:\n  - {text}\n"
    assume(plain_scalar(text, document))
    path = tmp_path / "g.yaml"
    path.write_text(document, encoding="utf-8")
    try:
        (q,) = load_golden(path).golden.queries
    except InputError as exc:  # only YAML's empty value may be refused, and then saying to quote it
        assert yaml.safe_load(f"x: {text}")["x"] is None, exc
        assert all("quote it" in o.reason for o in exc.offenders), exc
        return
    assert (q.id, q.supports[0].doc_id, q.tags) == (text, text, [text])
    # ... and what the tool writes (quoted where YAML needs it) reads back as the same id
    out = tmp_path / "out.yaml"
    out.write_text(render_canonical(load_golden(path).golden, ".yaml"), encoding="utf-8")
    (again,) = load_golden(out).golden.queries
    assert (again.id, again.supports[0].doc_id, again.tags) == (text, text, [text])
