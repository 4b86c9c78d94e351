"""Conversion to the canonical format is lossless and stable; the JSON Schema describes what is written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.golden.convert import json_schema, render_canonical
from kebab_eval_pipeline.golden.load import load_golden
from kebab_eval_pipeline.golden.model import GoldenQuery, GoldenSet, Support
from kebab_eval_pipeline.golden.tables import golden_from_tables, queries_table, supports_table
from tests.conftest import write

FIXTURES = Path(__file__).parent / "fixtures"
FIXTURE_NAMES = sorted(p.name for p in FIXTURES.iterdir() if p.suffix in (".yaml", ".json", ".jsonl"))
SUFFIXES = (".yaml", ".json", ".jsonl")


def test_every_format_has_a_fixture():
    assert len(FIXTURE_NAMES) == 8
    assert {load_golden(FIXTURES / n).golden.format for n in FIXTURE_NAMES} == {
        "canonical",
        "ckv",
        "kebab",
        "supports",
        "wfgy",
    }


@pytest.mark.parametrize("suffix", SUFFIXES)
@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_conversion_is_lossless_and_stable(tmp_path: Path, name: str, suffix: str):
    original = load_golden(FIXTURES / name).golden
    text = render_canonical(original, suffix)
    out = write(tmp_path / f"converted{suffix}", text)
    reloaded = load_golden(out)
    assert reloaded.warnings == []
    assert reloaded.golden.format == "canonical"
    assert reloaded.golden.queries == original.queries  # lossless
    if suffix != ".jsonl":  # JSONL holds queries only: no set name
        assert reloaded.golden.name == original.name
    # canonical → canonical again: byte-identical text
    assert render_canonical(reloaded.golden, suffix) == text
    again = write(tmp_path / f"again{suffix}", render_canonical(reloaded.golden, suffix))
    assert again.read_bytes() == out.read_bytes()


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_conversions_commute_across_suffixes(tmp_path: Path, name: str):
    original = load_golden(FIXTURES / name).golden
    via_yaml = load_golden(write(tmp_path / "a.yaml", render_canonical(original, ".yaml"))).golden
    via_jsonl = load_golden(write(tmp_path / "b.jsonl", render_canonical(via_yaml, ".jsonl"))).golden
    assert render_canonical(via_jsonl, ".jsonl") == render_canonical(original, ".jsonl")
    assert render_canonical(via_yaml, ".json") == render_canonical(original, ".json")


@pytest.mark.parametrize("suffix", [".yaml", ".yml", ".json", ".jsonl"])
def test_canonical_round_trips_in_every_suffix(tmp_path: Path, suffix: str):
    golden = load_golden(FIXTURES / "support_anchor.yaml").golden
    out = write(tmp_path / f"set{suffix}", render_canonical(golden, suffix))
    assert load_golden(out).golden.queries == golden.queries


def test_rendered_documents_shape():
    golden = load_golden(FIXTURES / "ckv_queries.yaml").golden
    doc = yaml.safe_load(render_canonical(golden, ".yaml"))
    assert list(doc) == ["schema_version", "name", "queries"]
    assert doc["schema_version"] == "1" and doc["name"] == "ckv_queries"
    first = doc["queries"][0]
    # id and query first; defaults left out
    assert list(first)[:2] == ["id", "query"]
    assert first == {
        "id": "q1",
        "query": "where does the server start listening on its port",
        "category": "code",
        "supports": [{"rel_path": "server.go", "line_start": 22, "line_end": 29, "symbol": "Server.Listen",
                      "symbol_kind": "Method"}],
    }  # fmt: skip
    assert json.loads(render_canonical(golden, ".json")) == doc
    lines = render_canonical(golden, ".jsonl").splitlines()
    assert [json.loads(line) for line in lines] == doc["queries"]


def test_non_ascii_text_is_written_as_text():
    golden = load_golden(FIXTURES / "kebab_golden.yaml").golden
    for suffix in SUFFIXES:
        assert "하이브리드 검색은" in render_canonical(golden, suffix)


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_tables_round_trip_every_fixture(name: str):
    golden = load_golden(FIXTURES / name).golden
    rebuilt = golden_from_tables(
        queries_table(golden),
        supports_table(golden),
        name=golden.name,
        source=golden.source,
        format=golden.format,
        sha256=golden.sha256,
    )
    assert rebuilt == golden


# ---------------------------------------------------------------------------------------------
# Regressions: text the renderer wrote that the loader then read differently
# ---------------------------------------------------------------------------------------------


def _one_query_set(text: str) -> GoldenSet:
    return GoldenSet(queries=[GoldenQuery(id="q1", query="x", supports=[Support(doc_id="d", snippet=text)])])


@pytest.mark.parametrize("char", ["\x85", "\u2028", "\u2029", "\x0b", "\x0c", "\x1c", "\r"])
def test_jsonl_round_trip_keeps_unicode_line_separators(tmp_path: Path, char: str):
    """Regression: the JSONL reader split lines with str.splitlines(), breaking at U+2028 & co."""
    golden = _one_query_set(f"first{char}second")
    out = write(tmp_path / "g.jsonl", render_canonical(golden, ".jsonl"))
    assert load_golden(out).golden.queries == golden.queries


@pytest.mark.parametrize("char", ["\x85", "\u2028", "\u2029"])
def test_yaml_round_trip_keeps_line_separators(tmp_path: Path, char: str):
    """Regression: U+0085 (NEL) inside a single-quoted YAML scalar was folded to a space."""
    golden = _one_query_set(f"first{char}second {char}")
    out = write(tmp_path / "g.yaml", render_canonical(golden, ".yaml"))
    assert load_golden(out).golden.queries == golden.queries


def test_jsonl_with_escaped_line_separators_loads(tmp_path: Path):
    """The same text escaped (json.dumps default) loads fine: the bug above is the raw form only."""
    entry = {"id": "q1", "query": "x", "supports": [{"doc_id": "d", "snippet": "a\u2028b\x85c"}]}
    path = write(tmp_path / "g.jsonl", json.dumps(entry) + "\n")
    assert load_golden(path).golden.queries[0].supports[0].snippet == "a\u2028b\x85c"


# ---------------------------------------------------------------------------------------------
# JSON Schema
# ---------------------------------------------------------------------------------------------


def test_json_schema_shape():
    schema = json_schema()
    json.dumps(schema)  # serialisable as is
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["title"] == "kebab-eval golden set (schema_version 1)"
    assert "queries" in schema["required"]
    # loader-filled fields are not part of the curated document
    assert not {"source", "format", "sha256"} & set(schema["properties"])
    assert set(schema["$defs"]) >= {"GoldenQuery", "Support"}
    assert set(schema["$defs"]["GoldenQuery"]["properties"]) == set(GoldenQuery.model_fields)
    assert set(schema["$defs"]["Support"]["properties"]) == set(Support.model_fields)
    assert schema["$defs"]["GoldenQuery"]["additionalProperties"] is False


def _validator(schema: dict):
    jsonschema = pytest.importorskip(
        "jsonschema", reason="jsonschema is not installed in /work/venv: schema validation not checked"
    )
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def _query_schema() -> dict:
    schema = json_schema()
    return {"$schema": schema["$schema"], "$ref": "#/$defs/GoldenQuery", "$defs": schema["$defs"]}


@pytest.mark.parametrize("suffix", SUFFIXES)
@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_json_schema_accepts_every_rendered_document(name: str, suffix: str):
    golden = load_golden(FIXTURES / name).golden
    text = render_canonical(golden, suffix)
    if suffix == ".jsonl":
        validator = _validator(_query_schema())
        for line in text.splitlines():
            validator.validate(json.loads(line))
    else:
        doc = yaml.safe_load(text) if suffix == ".yaml" else json.loads(text)
        _validator(json_schema()).validate(doc)


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d["queries"][0].update(id=["not", "a", "string"]),
        lambda d: d["queries"][0].update(answerable="perhaps"),
        lambda d: d["queries"][0].update(tags="bread"),
        lambda d: d["queries"][0]["supports"][0].update(line_start="fourteen"),
        lambda d: d["queries"][0].update(required_support_groups=[[0, "one"]]),
        lambda d: d["queries"][0].update(recency_rule="cite_oldest"),
        lambda d: d.update(queries={"q1": {}}),
    ],
    ids=["id-list", "answerable-str", "tags-str", "line-str", "group-str", "recency-rule", "queries-map"],
)
def test_json_schema_rejects_bad_types(tmp_path: Path, mutate):
    golden = load_golden(FIXTURES / "canonical.yaml").golden
    doc = json.loads(render_canonical(golden, ".json"))
    mutate(doc)
    with pytest.raises(InputError):  # the loader refuses the same document
        load_golden(write(tmp_path / "bad.json", json.dumps(doc)))
    assert not _validator(json_schema()).is_valid(doc)


def test_json_schema_and_loader_both_reject_unknown_query_fields(tmp_path: Path):
    golden = load_golden(FIXTURES / "canonical.yaml").golden
    doc = json.loads(render_canonical(golden, ".json"))
    doc["queries"][0]["answerabel"] = True
    with pytest.raises(InputError, match="unknown key 'answerabel'"):
        load_golden(write(tmp_path / "typo.json", json.dumps(doc)))
    assert not _validator(json_schema()).is_valid(doc)
