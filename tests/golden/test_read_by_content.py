"""Golden files are read by what they hold, not refused for their name (golden/syntax.py): JSON lines
saved as ``gold.txt``, reached through an extension-less symlink, or in a ``.json``; an explicit
``--format`` still chooses the reader. And the BEIR edges: a first query line longer than the
sniffing window is still a query line; a key written twice in ``queries.jsonl`` is refused as the
JSONL reader refuses one (file, line, key).

Before (main): the JSONL files were parsed as YAML ("did not find expected <document start>", or
"cannot tell the format" for one line); the long BEIR line gave "not a queries/topics or qrels
file"; the doubled key was accepted, the last value kept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.golden.load import load_golden
from kebab_eval_pipeline.golden.syntax import syntax_of
from tests.test_cli import cli, env, no_traceback  # noqa: F401 (env: the fixture)

LINES = [
    {"id": "q1", "query": "a", "supports": [{"doc_id": "d1"}]},
    {"id": "q2", "query": "b", "supports": [{"doc_id": "d2"}]},
]
JSONL = "".join(json.dumps(q) + "\n" for q in LINES)


def ids(path: Path | list[Path], fmt: str = "auto") -> list[tuple[str, str | None]]:
    golden = load_golden(path, fmt).golden
    return [(q.id, s.doc_id or s.chunk_id) for q in golden.queries for s in q.supports]


def test_jsonl_is_read_whatever_the_name(tmp_path: Path):
    expected = [("q1", "d1"), ("q2", "d2")]
    for name in ("gold.txt", "gold", "gold.json", "gold.data"):
        (tmp_path / name).write_text(JSONL)
        assert ids(tmp_path / name) == expected, name
    (tmp_path / "one.txt").write_text(json.dumps(LINES[0]) + "\n")  # one query on one line
    assert ids(tmp_path / "one.txt") == expected[:1]
    (tmp_path / "v3.jsonl").write_text(JSONL)
    (tmp_path / "current").symlink_to("v3.jsonl")  # an extension-less symlink
    (tmp_path / "via-txt").symlink_to("gold.txt")
    assert ids(tmp_path / "current") == ids(tmp_path / "via-txt") == expected


def test_documents_in_unnamed_files_are_still_documents(tmp_path: Path):
    doc = {"schema_version": "1", "name": "n", "queries": LINES}
    (tmp_path / "a.txt").write_text(json.dumps(doc))  # one line, but a document with queries
    (tmp_path / "b.txt").write_text(json.dumps(doc, indent=2))
    (tmp_path / "c.txt").write_text("- id: q1\n  query: a\n  expected_doc_ids: [d1]\n")
    # a YAML flow mapping then a comment: YAML, not JSON lines, whatever the name
    flow = '{"schema_version": "1", "queries": [{"id": "q1", "query": "a", "supports": [{"doc_id": "d1"}]}]}'
    for name in ("d.yaml", "d.txt", "d.json"):
        (tmp_path / name).write_text(flow + "\n# reviewed\n")
    assert ids(tmp_path / "d.yaml") == ids(tmp_path / "d.txt") == [("q1", "d1")]
    for name in ("a.txt", "b.txt"):
        assert ids(tmp_path / name) == [("q1", "d1"), ("q2", "d2")]
    assert ids(tmp_path / "c.txt") == [("q1", "d1")]
    assert [syntax_of(tmp_path / n, (tmp_path / n).read_text()) for n in ("a.txt", "b.txt", "c.txt")] == [
        "json-or-yaml",
        "json-or-yaml",
        "yaml",
    ]


def test_an_explicit_format_still_chooses_the_reader(tmp_path: Path):
    wfgy = tmp_path / "wfgy.txt"
    wfgy.write_text(
        '{"qid": "w1", "question": "q", "gold_citations": ["p1#2"]}\n{"qid": "w2", "question": "r"}\n'
    )
    assert ids(wfgy, "wfgy") == [("w1", "p1#2")]
    with pytest.raises(InputError) as err:  # forced to a reader the lines do not fit
        load_golden(wfgy, "kebab")
    assert {o.position for o in err.value.offenders} == {"line 1", "line 2"}


def test_cli_reads_jsonl_named_txt(env, tmp_path: Path):  # noqa: F811
    (tmp_path / "gold.txt").write_text(JSONL)
    proc = cli(env, "golden", "validate", str(tmp_path / "gold.txt"))
    no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    assert "ok: 2 queries" in proc.stdout


def _beir(folder: Path, queries: str) -> Path:
    (folder / "qrels").mkdir(parents=True)
    (folder / "queries.jsonl").write_text(queries)
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\n")
    return folder


def test_a_beir_query_line_longer_than_the_sniffing_window(tmp_path: Path):
    long = "word " * 20_000  # 100 KB: past the 64 KiB window the first line used to be cut at
    folder = _beir(tmp_path / "b", json.dumps({"_id": "q1", "text": long}) + '\n{"_id": "q2", "text": "b"}\n')
    golden = load_golden(folder).golden
    assert [(q.id, len(q.query)) for q in golden.queries] == [("q1", len(long)), ("q2", 1)]
    # ... and as two files given by name, the queries file named .txt
    (folder / "queries.jsonl").rename(folder / "queries.txt")
    golden = load_golden([folder / "queries.txt", folder / "qrels" / "test.tsv"]).golden
    assert [q.id for q in golden.queries] == ["q1", "q2"]


def test_a_key_written_twice_in_beir_queries_is_refused(tmp_path: Path):
    folder = _beir(
        tmp_path / "b", '{"_id": "q1", "text": "first", "text": "second"}\n{"_id": "q2", "text": "b"}\n'
    )
    with pytest.raises(InputError) as err:
        load_golden(folder)
    (offender,) = err.value.offenders  # the judgment for q1 is not reported as a missing query
    assert (offender.file, offender.position, offender.field) == (
        str(folder / "queries.jsonl"),
        "line 1",
        "text",
    )
    assert offender.reason.startswith("duplicate key 'text' at line 1")
