"""Golden readers forgive the obvious and never drop data silently.

The support-anchor format reads ``query:`` as well as ``question:``; the canonical format refuses
a query or support key it does not know (naming key, line and query id, and the format the key
belongs to) instead of dropping it; top-level unknown keys stay warnings, printed by the CLI.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.golden.load import load_golden
from kebab_eval_pipeline.golden.model import GoldenQuery, Support
from tests.conftest import REPO, write
from tests.forked_cli import run_cli

SETTINGS = {"deadline": None, "max_examples": 60}


def anchor_entries(n: int, key: str = "query") -> list[dict]:
    """The issue's golden set: n support-anchor queries (path + heading anchors), text under ``key``."""
    return [
        {
            "id": f"kd-{i:03d}",
            key: f"How do I configure part {i}?",
            "answerable": True,
            "category": "factual",
            "gold_supports": [{"rel_path": f"docs/part-{i}.md", "heading_path": ["Guide", f"Part {i}"]}],
        }
        for i in range(n)
    ]


# ---------------------------------------------------------------------------------------------
# support-anchor: query as well as question


@pytest.mark.parametrize("suffix", [".yaml", ".jsonl"])
def test_issue_sixty_anchor_queries_spelled_query_load_cleanly(tmp_path: Path, suffix: str):
    """Regression: 60 × "field 'query': Input should be a valid string"; now one clean read."""
    entries = anchor_entries(60)
    if suffix == ".yaml":
        text = yaml.safe_dump(entries, sort_keys=False)
    else:
        text = "".join(json.dumps(e) + "\n" for e in entries)
    loaded = load_golden(write(tmp_path / f"kd{suffix}", text))
    assert loaded.warnings == []
    assert loaded.golden.format == "supports"
    queries = loaded.golden.queries
    assert [q.query for q in queries] == [e["query"] for e in entries]
    assert [q.supports for q in queries] == [
        [Support(rel_path=f"docs/part-{i}.md", heading_path=["Guide", f"Part {i}"])] for i in range(60)
    ]


@settings(**SETTINGS)
@given(
    texts=st.lists(st.text(min_size=1, max_size=30).filter(str.strip), min_size=1, max_size=6),
    spelled=st.lists(st.sampled_from(["query", "question", "both"]), min_size=6, max_size=6),
)
def test_query_and_question_read_the_same(tmp_path_factory, texts, spelled):
    """Whichever spelling each entry uses (or both, agreeing), the loaded set is the same."""
    folder = tmp_path_factory.mktemp("spell")
    reference, mixed = [], []
    for i, text in enumerate(texts):
        base = {"id": f"q{i}", "gold_supports": [{"rel_path": "a.md"}]}
        reference.append({**base, "question": text})
        how = spelled[i]
        names = ["query", "question"] if how == "both" else [how]
        mixed.append({**base, **{name: text for name in names}})
    want = load_golden(write(folder / "ref.jsonl", "".join(json.dumps(e) + "\n" for e in reference)))
    got = load_golden(write(folder / "mixed.jsonl", "".join(json.dumps(e) + "\n" for e in mixed)))
    assert got.golden.queries == want.golden.queries and got.warnings == []


def test_query_and_question_that_differ_or_are_both_missing_are_errors(tmp_path: Path):
    path = write(
        tmp_path / "s.yaml",
        """queries:
  - id: a
    question: How hot?
    query: How cold?
    gold_supports: [{rel_path: a.md}]
  - id: b
    gold_supports: [{rel_path: b.md}]
  - id: c
    question: Fine
    query: Fine
    gold_supports: [{rel_path: c.md}]
""",
    )
    with pytest.raises(InputError) as exc:
        load_golden(path)
    got = [(o.position, o.query_id, o.field, o.reason) for o in exc.value.offenders]
    assert got == [
        ("line 2", "a", "query", "'question' and 'query' are both set and differ: keep one"),
        ("line 6", "b", "question", "missing: the query text (as 'question' or 'query')"),
    ]


def test_anchor_file_with_query_and_unanswerable_entries_is_sniffed_as_supports(tmp_path: Path):
    """Unanswerable entries carry no gold_supports; the file is still recognised as support-anchor."""
    entries = [*anchor_entries(2), {"id": "none", "query": "What is the moon made of?", "answerable": False}]
    loaded = load_golden(write(tmp_path / "s.yaml", yaml.safe_dump({"queries": entries}, sort_keys=False)))
    assert loaded.golden.format == "supports" and loaded.warnings == []
    assert [q.answerable for q in loaded.golden.queries] == [True, True, False]


def test_a_kebab_file_forced_as_supports_names_the_key_and_the_format(tmp_path: Path):
    path = write(tmp_path / "k.yaml", "- id: a\n  query: x\n  expected_doc_ids: [d1]\n")
    with pytest.raises(InputError) as exc:
        load_golden(path, fmt="supports")
    (offender,) = exc.value.offenders
    assert (offender.position, offender.query_id, offender.field) == ("line 1", "a", "expected_doc_ids")
    assert "belongs to the kebab format" in offender.reason and "--format kebab" in offender.reason


# ---------------------------------------------------------------------------------------------
# canonical: an unknown query or support key is an error, never a silent drop


CANONICAL_WITH_GOLD_SUPPORTS = """schema_version: "1"
queries:
  - id: kd-001
    query: How do I configure the index?
    gold_supports:
      - rel_path: docs/index.md
        heading_path: [Index, Configure]
"""


def test_issue_canonical_with_gold_supports_names_key_line_and_format(tmp_path: Path):
    """Regression: gold_supports was dropped, then "the query has 0 supports"."""
    path = write(tmp_path / "c.yaml", CANONICAL_WITH_GOLD_SUPPORTS)
    with pytest.raises(InputError) as exc:
        load_golden(path, fmt="canonical")
    (offender,) = exc.value.offenders
    assert (offender.file, offender.position, offender.query_id, offender.field) == (
        str(path),
        "line 5",
        "kd-001",
        "gold_supports",
    )
    assert offender.reason == (
        "unknown key 'gold_supports' in the canonical format (it would be dropped): "
        "'gold_supports' belongs to the supports format: read the file with --format supports"
    )
    # and the suggestion works
    assert load_golden(path, fmt="supports").golden.queries[0].supports == [
        Support(rel_path="docs/index.md", heading_path=["Index", "Configure"])
    ]


def test_canonical_unknown_keys_in_jsonl_and_json_name_the_line_or_path(tmp_path: Path):
    lines = [
        {"id": "a", "query": "x", "supports": [{"doc_id": "d"}]},
        {"id": "b", "question": "y", "supports": [{"doc_id": "d", "snippets": ["s"]}]},
    ]
    jsonl = write(tmp_path / "c.jsonl", "".join(json.dumps(e) + "\n" for e in lines))
    with pytest.raises(InputError) as exc:
        load_golden(jsonl)
    got = [(o.position, o.query_id, o.field) for o in exc.value.offenders]
    assert ("line 2", "b", "question") in got and ("line 2", "b", "supports[0].snippets") in got
    assert all("--format supports" in o.reason for o in exc.value.offenders if o.field != "query")
    doc = {"schema_version": "1", "queries": [{"id": "a", "query": "x", "grade": 2}]}
    with pytest.raises(InputError) as exc:
        load_golden(write(tmp_path / "c.json", json.dumps(doc)))
    (offender,) = exc.value.offenders
    assert (offender.position, offender.query_id, offender.field) == ("queries[0].grade", "a", "grade")


KEYS = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=12
).filter(lambda k: k not in GoldenQuery.model_fields and k not in Support.model_fields and k.strip() == k)


@settings(**SETTINGS)
@given(
    key=KEYS,
    n=st.integers(1, 5),
    where=st.data(),
    suffix=st.sampled_from([".yaml", ".json", ".jsonl"]),
)
def test_any_unknown_canonical_key_is_an_error_naming_it(tmp_path_factory, key, n, where, suffix):
    """A key the canonical model does not know, anywhere in a query or support, never loads
    silently: the error names the key and the query; without the key the file loads."""
    queries = [{"id": f"q{i}", "query": f"text {i}", "supports": [{"doc_id": f"d{i}"}]} for i in range(n)]
    target = where.draw(st.integers(0, n - 1))
    in_support = where.draw(st.booleans())
    clean = json.loads(json.dumps(queries))
    (queries[target]["supports"][0] if in_support else queries[target])[key] = "value"
    folder = tmp_path_factory.mktemp("unknown")

    def dump(items: list[dict]) -> str:
        if suffix == ".jsonl":
            return "".join(json.dumps(q) + "\n" for q in items)
        doc = {"schema_version": "1", "queries": items}
        return json.dumps(doc) if suffix == ".json" else yaml.safe_dump(doc, allow_unicode=True)

    with pytest.raises(InputError) as exc:
        load_golden(write(folder / f"bad{suffix}", dump(queries)), fmt="canonical")
    field = f"supports[0].{key}" if in_support else key
    assert [(o.query_id, o.field) for o in exc.value.offenders] == [(f"q{target}", field)]
    assert f"unknown key {field!r}" in exc.value.offenders[0].reason
    assert len(load_golden(write(folder / f"ok{suffix}", dump(clean)), fmt="canonical").golden.queries) == n


# ---------------------------------------------------------------------------------------------
# the CLI says it


def test_cli_validate_prints_the_error_and_top_level_warnings(tmp_path: Path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KEBAB_EVAL_", "DAGSTER_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    cli = ["golden", "validate"]  # `python -m kebab_eval_pipeline.cli`, forked ready-imported
    bad = write(tmp_path / "c.yaml", CANONICAL_WITH_GOLD_SUPPORTS)
    proc = run_cli([*cli, str(bad), "--format", "canonical"], env=env)
    assert proc.returncode == 2
    message = " ".join(proc.stderr.split())
    assert f"{bad}:line 5 — query 'kd-001' — field 'gold_supports'" in message
    assert "--format supports" in message and "Traceback" not in proc.stderr
    warned = write(tmp_path / "w.yaml", 'schema_version: "1"\nowner: me\nqueries: [{id: a, query: x}]\n')
    proc = run_cli([*cli, str(warned)], env=env)
    assert proc.returncode == 0
    assert "unknown top-level fields ignored: owner" in " ".join(proc.stderr.split())
