"""Golden loading: canonical and kebab list formats, every offender listed at once."""

import json
from pathlib import Path

import pytest

from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.golden.load import golden_content_sha256, load_golden
from kebab_eval_pipeline.golden.tables import golden_from_tables, queries_table, supports_table
from tests.conftest import write

CANONICAL = """schema_version: "1"
name: mini
queries:
  - id: q1
    query: How long do I salt cabbage?
    lang: en
    category: factual
    tags: [kimchi]
    group: g1
    supports:
      - {rel_path: korean/kimchi.md, heading_path: [Kimchi, Salting]}
    must_contain: ["2 hours"]
  - id: q2
    query: Cabbage salting time?
    group: g1
    supports:
      - {rel_path: korean/kimchi.md, heading_path: [Kimchi, Salting], grade: 2}
  - id: q3
    query: Best wine yeast?
    answerable: false
    category: out_of_scope
"""


def test_canonical_maps_every_field(tmp_path: Path):
    loaded = load_golden(write(tmp_path / "g.yaml", CANONICAL))
    g = loaded.golden
    assert g.name == "mini" and g.format == "canonical" and len(g.queries) == 3
    q1, q2, q3 = g.queries
    assert q1.tags == ["kimchi"] and q1.group == "g1" and q1.must_contain == ["2 hours"]
    assert q1.supports[0].heading_path == ["Kimchi", "Salting"] and q1.supports[0].grade == 1
    assert q2.supports[0].grade == 2
    assert not q3.answerable and q3.supports == []
    assert g.sha256 == golden_content_sha256(tmp_path / "g.yaml")
    # table round trip is lossless
    assert (
        golden_from_tables(
            queries_table(g),
            supports_table(g),
            name=g.name,
            source=g.source,
            format=g.format,
            sha256=g.sha256,
        )
        == g
    )


def test_kebab_list_format(tmp_path: Path):
    path = write(
        tmp_path / "k.yaml",
        """
- id: a
  query: where is the index stored?
  expected_doc_ids: [docs/store.md]
  expected_chunk_ids: [c1, c2]
  must_contain: [sqlite]
- id: b
  query: what is the capital of France?
  expected_doc_ids: []
""",
    )
    g = load_golden(path).golden
    assert g.format == "kebab"
    a, b = g.queries
    assert [s.chunk_id for s in a.supports] == ["c1", "c2"]
    assert all(s.doc_id == "docs/store.md" for s in a.supports)
    assert a.answerable and not b.answerable


def test_every_offender_listed_with_position(tmp_path: Path):
    path = write(
        tmp_path / "bad.yaml",
        """schema_version: "1"
queries:
  - id: q1
    query: ""
  - id: q1
    query: dup
  - id: q3
    query: lines
    supports: [{rel_path: a.md, line_start: 9, line_end: 3}]
    required_support_groups: [[0, 4]]
  - id: q4
    query: typo
    answerabel: true
""",
    )
    with pytest.raises(InputError) as exc:
        load_golden(path)
    text = str(exc.value)
    offenders = exc.value.offenders
    assert len(offenders) == 5, text
    assert any(o.query_id == "q1" and o.field == "query" and o.position == "line 3" for o in offenders)
    assert any("duplicate id" in o.reason and o.position == "line 5" for o in offenders)
    assert any("line_start 9 > line_end 3" in o.reason for o in offenders)
    assert any("index [4] out of range" in o.reason for o in offenders)
    # an unknown query key of the canonical format would drop data: an error naming key and line
    assert any(
        o.query_id == "q4"
        and o.field == "answerabel"
        and o.position == "line 13"
        and "answerable" in o.reason
        for o in offenders
    )
    fixed = (
        path.read_text()
        .replace('query: ""', "query: fixed")
        .replace("id: q1\n    query: dup", "id: q2\n    query: dup")
        .replace("line_start: 9, line_end: 3", "line_start: 3, line_end: 9")
        .replace("[[0, 4]]", "[[0]]")
        .replace("answerabel", "answerable")
        .replace('schema_version: "1"', 'schema_version: "1"\nowner: search')
    )
    path.write_text(fixed)
    loaded = load_golden(path)
    # an unknown top-level key is still a warning naming it, not an error (SPEC §3.3)
    assert loaded.warnings == [f"{path}: unknown top-level fields ignored: owner"]


def test_group_members_must_expect_same_docs(tmp_path: Path):
    path = write(
        tmp_path / "g.jsonl",
        "\n".join(
            json.dumps(d)
            for d in [
                {"id": "a", "query": "x", "group": "g", "supports": [{"doc_id": "d1"}]},
                {"id": "b", "query": "y", "group": "g", "supports": [{"doc_id": "d2"}]},
            ]
        ),
    )
    with pytest.raises(InputError) as exc:
        load_golden(path)
    assert exc.value.offenders[0].query_id == "b" and exc.value.offenders[0].position == "line 2"
    assert "group 'g'" in exc.value.offenders[0].reason


def test_schema_version_rules(tmp_path: Path):
    with pytest.raises(InputError, match="newer than this tool"):
        load_golden(write(tmp_path / "a.yaml", 'schema_version: "2"\nqueries: [{id: a, query: x}]\n'))
    loaded = load_golden(
        write(tmp_path / "b.yaml", 'schema_version: "1.3"\nqueries: [{id: a, query: x}]\nextra: 1\n')
    )
    assert any("newer than 1" in w for w in loaded.warnings)
    assert any("unknown top-level fields ignored: extra" in w for w in loaded.warnings)


def test_malformed_and_missing(tmp_path: Path):
    with pytest.raises(InputError, match=r"missing\.yaml: no such file"):
        load_golden(tmp_path / "missing.yaml")
    with pytest.raises(InputError) as exc:
        load_golden(write(tmp_path / "m.yaml", "queries:\n  - id: a\n    query: [x\n"))
    assert "line" in str(exc.value) and "column" in str(exc.value)
    (tmp_path / "bin.yaml").write_bytes(b"queries:\n - id: \xff\xfe\n")
    with pytest.raises(InputError, match="not valid UTF-8"):
        load_golden(tmp_path / "bin.yaml")


def test_folder_forms_one_set(tmp_path: Path):
    write(tmp_path / "set" / "a.yaml", "queries: [{id: a, query: x}]\n")
    write(tmp_path / "set" / "b.jsonl", '{"id": "b", "query": "y"}\n')
    g = load_golden(tmp_path / "set").golden
    assert [q.id for q in g.queries] == ["a", "b"]
    assert g.sha256 == golden_content_sha256(tmp_path / "set")


def test_the_bundled_demo_golden_set_loads():
    from kebab_eval_pipeline.foundation.demo import DEMO_GOLDEN

    g = load_golden(DEMO_GOLDEN).golden
    assert len(g.queries) >= 60
    assert sum(not q.answerable for q in g.queries) >= 8
