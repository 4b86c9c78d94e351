"""Golden sets from standard IR layouts (BEIR folders, TREC topics + qrels, ranx JSON qrels):
parsers round-trip what they are given (hypothesis), the layouts are told apart, options pick the
split and the query field, and bad input lists every offender with file, line, field and reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kebab_eval_pipeline.chain.settings import settings_from_dict
from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.golden.datasets import DatasetOptions, role_of
from kebab_eval_pipeline.golden.load import golden_content_sha256, load_golden
from kebab_eval_pipeline.golden.readers.qrels import read_beir_qrels, read_ranx_qrels, read_trec_qrels
from kebab_eval_pipeline.golden.readers.topics import read_sgml_topics, read_tsv_topics
from tests.test_cli import cli, cli_env, no_traceback

P = Path("x")
ids = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123456789-_.:/#", min_size=1, max_size=12)
grades = st.integers(min_value=-2, max_value=2**31 - 1) | st.sampled_from([0, 1, 2, 3])
qrels_lists = st.lists(st.tuples(ids, ids, grades), max_size=40, unique_by=lambda t: (t[0], t[1]))
words = st.text(alphabet="abcdefghij klmnop", min_size=1, max_size=30).filter(lambda s: s.strip())


@given(qrels_lists, st.sampled_from([" ", "\t", "  ", " \t "]), st.booleans())
def test_trec_qrels_read_back_as_written(rows, sep, blank_lines):
    text = "".join(f"{q}{sep}0{sep}{d}{sep}{r}\n" + ("\n" if blank_lines else "") for q, d, r in rows)
    judgments, offenders = read_trec_qrels(P, text)
    assert offenders == []
    assert [(j.qid, j.docno, j.rel) for j in judgments] == rows


@given(qrels_lists, st.booleans())
def test_beir_qrels_read_back_as_written(rows, crlf):
    end = "\r\n" if crlf else "\n"
    text = f"query-id\tcorpus-id\tscore{end}" + "".join(f"{q}\t{d}\t{r}{end}" for q, d, r in rows)
    judgments, offenders = read_beir_qrels(P, text)
    assert offenders == []
    assert [(j.qid, j.docno, j.rel) for j in judgments] == rows


@given(qrels_lists)
def test_ranx_qrels_read_back_as_written(rows):
    doc: dict = {}
    for q, d, r in rows:
        doc.setdefault(q, {})[d] = r
    judgments, offenders = read_ranx_qrels(P, doc, json.dumps(doc))
    assert offenders == []
    assert sorted((j.qid, j.docno, j.rel) for j in judgments) == sorted(rows)


topic_lists = st.lists(st.tuples(ids, words, words), max_size=15, unique_by=lambda t: t[0])


@given(topic_lists, st.booleans(), st.booleans())
def test_sgml_topics_read_back_as_written(topics, labels, closing):
    def block(qid, title, desc):
        num = f"<num> {'Number: ' if labels else ''}{qid}"
        title_line = f"<title> {title}" + (" </title>" if closing else "")
        # a description spread over two lines, as TREC topics write them
        half = len(desc) // 2
        desc_lines = f"<desc> {'Description:' if labels else ''}\n{desc[:half]}\n{desc[half:]}"
        return f"<top>\n\n{num}\n{title_line}\n\n{desc_lines}\n\n<narr> Narrative:\nwhatever\n</top>\n\n"

    text = "".join(block(*t) for t in topics)
    read, offenders = read_sgml_topics(P, text)
    assert offenders == []
    assert [t.qid for t in read] == [q for q, _, _ in topics]
    for topic, (_, title, desc) in zip(read, topics, strict=True):
        assert topic.fields["title"] == " ".join(title.split())
        half = len(desc) // 2
        assert topic.fields["description"] == " ".join(f"{desc[:half]}\n{desc[half:]}".split())
        assert topic.fields["narrative"] == "whatever"


def test_truncated_sgml_topics_are_refused():
    text = "<top>\n<num> Number: 1\n<title> one\n</top>\n<top>\n<num> Number: 2\n<top>\n<num> 3\n<title> x\n"
    topics, offenders = read_sgml_topics(P, text)
    assert [t.qid for t in topics] == ["1"]
    assert [(o.position, o.reason) for o in offenders] == [
        ("line 5", "a <top> without its </top> (a truncated file?)"),
        ("line 7", "a <top> without its </top> (a truncated file?)"),
    ]


@given(topic_lists)
def test_tsv_topics_read_back_as_written(topics):
    text = "".join(f"{q}\t{t.strip()}\t{d.strip()}\n" for q, t, d in topics)
    read, offenders = read_tsv_topics(P, text)
    assert offenders == []
    assert [(t.qid, t.fields["title"], t.fields["description"]) for t in read] == [
        (q, t.strip(), d.strip()) for q, t, d in topics
    ]


def test_layouts_are_told_apart_by_content():
    assert role_of(Path("qrels.txt"), "301 0 FBIS3-10082 1\n") == ("qrels", "trec")
    assert role_of(Path("qrels"), "301\t0\tFBIS3-10082\t1\n") == ("qrels", "trec")
    assert role_of(Path("test.tsv"), "query-id\tcorpus-id\tscore\nq1\td1\t1\n") == ("qrels", "beir")
    assert role_of(Path("topics.301-350"), "\n<top>\n<num> Number: 301\n") == ("queries", "sgml")
    # two columns, or a multi-word text, is a topics TSV even when the last word is a number
    assert role_of(Path("queries.tsv"), "q1\tfoo bar 12\n") == ("queries", "tsv")
    assert role_of(Path("queries.jsonl"), '{"_id": "q1", "text": "x"}\n') == ("queries", "beir")
    assert role_of(Path("qrels.json"), '{"q1": {"d1": 1}}') == ("qrels", "ranx")
    # the project's own formats are not standard-dataset files
    assert role_of(Path("golden.json"), '{"schema_version": "1", "queries": []}') is None
    assert role_of(Path("golden.jsonl"), '{"id": "q1", "query": "x"}\n') is None
    assert role_of(Path("golden.yaml"), "queries: []\n") is None


def _trec(tmp_path: Path, qrels: str, topics: str, name: str = "topics.txt") -> list[Path]:
    (tmp_path / "qrels.txt").write_text(qrels)
    (tmp_path / name).write_text(topics)
    return [tmp_path / name, tmp_path / "qrels.txt"]


SGML = """<top>
<num> Number: 301
<title> International Organized Crime
<desc> Description:
Identify organizations that participate in
international criminal activity.
</top>
<top>
<num> Number: 302
<title> Poliomyelitis and Post-Polio
<desc> Description:
Is the disease of Poliomyelitis under control?
</top>
<top>
<num> Number: 303
<title> Hubble Telescope Achievements
</top>
"""


def test_trec_topics_and_qrels_become_document_supports(tmp_path):
    files = _trec(tmp_path, "301 0 FBIS3-1 2\n301 0 FBIS3-2 0\n302 0 LA-7 1\n", SGML)
    loaded = load_golden(files)
    assert loaded.format == "trec" and loaded.name == "qrels"
    first, second = loaded.golden.queries
    assert (first.id, first.query) == ("301", "International Organized Crime")
    # grade 0 stays a judged (non-relevant) support
    assert [(s.doc_id, s.grade) for s in first.supports] == [("FBIS3-1", 2), ("FBIS3-2", 0)]
    assert second.supports[0].doc_id == "LA-7" and second.answerable
    assert loaded.warnings == [
        f"{files[0]}: 1 query has no judgments in qrels.txt: left out of the golden set (as BEIR does)"
    ]
    described = load_golden(files, options=DatasetOptions(query_field="description"))
    assert described.golden.queries[0].query == (
        "Identify organizations that participate in international criminal activity."
    )
    assert load_golden(files).sha256 == golden_content_sha256(files)


def test_ranx_qrels_with_tsv_queries(tmp_path):
    (tmp_path / "qrels.json").write_text(json.dumps({"q1": {"d1": 1, "d2": 0}, "q2": {"d3": 3}}))
    (tmp_path / "queries.tsv").write_text("q1\twhat is bm25\nq2\tranking fusion\n")
    loaded = load_golden([tmp_path / "queries.tsv", tmp_path / "qrels.json"])
    assert loaded.format == "ranx"
    assert [(q.id, q.query, [(s.doc_id, s.grade) for s in q.supports]) for q in loaded.golden.queries] == [
        ("q1", "what is bm25", [("d1", 1), ("d2", 0)]),
        ("q2", "ranking fusion", [("d3", 3)]),
    ]


def test_bad_trec_input_lists_every_offender(tmp_path):
    qrels = (
        "301 0 FBIS3-1 2\n"
        "301 0 FBIS3-2 high\n"  # not an integer
        "301 0 FBIS3-3\n"  # a missing column
        "999 0 FBIS3-4 1\n"  # an unknown query
        "301 0 FBIS3-1 1\n"  # judged twice
        "302 0 LA-1 1.5\n"  # not an integer either
        "302 0 LA-2 9999999999\n"  # past a 32-bit int
    )
    files = _trec(tmp_path, qrels, SGML)
    with pytest.raises(InputError) as exc:
        load_golden(files)
    got = [(Path(o.file).name, o.position, o.query_id, o.field) for o in exc.value.offenders]
    assert got == [
        ("qrels.txt", "line 2", "301", "rel"),
        ("qrels.txt", "line 3", "301", "rel"),
        ("qrels.txt", "line 5", "301", "docno"),
        ("qrels.txt", "line 6", "302", "rel"),
        ("qrels.txt", "line 7", "302", "rel"),
        ("qrels.txt", "line 4", "999", "qid"),
    ]
    reasons = [o.reason for o in exc.value.offenders]
    assert reasons[0] == "relevance must be an integer, got 'high'"
    assert reasons[1] == "expected 4 columns (qid iter docno rel), got 3"
    assert reasons[2] == "judged twice for this query (first at line 1)"
    assert "9999999999 is not between -2147483647 and 2147483647" in reasons[4]
    assert reasons[5] == "a judgment for query '999', which topics.txt does not hold"


def test_bad_beir_and_ranx_input(tmp_path):
    beir = tmp_path / "beir"
    (beir / "qrels").mkdir(parents=True)
    (beir / "queries.jsonl").write_text(
        '{"_id": "q1", "text": "x"}\n{"_id": "q1", "text": "again"}\n{"text": "no id"}\n'
    )
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\nq1\td2\tyes\n")
    with pytest.raises(InputError) as exc:
        load_golden(beir)
    got = [(Path(o.file).name, o.position, o.field, o.reason) for o in exc.value.offenders]
    assert got == [
        ("test.tsv", "line 2", "score", "expected 3 tab-separated columns (query-id corpus-id score), got 2"),
        ("test.tsv", "line 3", "score", "relevance must be an integer, got 'yes'"),
        ("queries.jsonl", "line 3", "_id", "missing or not a string: the query id"),
        ("queries.jsonl", "line 2", "id", "query id given twice (first at line 1)"),
    ]
    (tmp_path / "qrels.json").write_text('{\n  "q1": {\n    "d1": 1.0,\n    "d2": true\n  }\n}\n')
    (tmp_path / "q.tsv").write_text("q1\tx\n")
    with pytest.raises(InputError) as exc:
        load_golden([tmp_path / "q.tsv", tmp_path / "qrels.json"])
    assert [(o.position, o.field, o.reason) for o in exc.value.offenders] == [
        ("line 3", "rel", "relevance must be an integer, got 1.0"),
        ("line 4", "rel", "relevance must be an integer, got True"),
    ]


def test_query_field_and_split_problems(tmp_path):
    files = _trec(tmp_path, "301 0 d 1\n303 0 d 1\n", SGML)
    with pytest.raises(InputError) as exc:
        load_golden(files, options=DatasetOptions(query_field="description"))
    (offender,) = exc.value.offenders
    assert (offender.query_id, offender.field, offender.reason) == (
        "303",
        "description",
        "no description to use as the query",
    )
    tsv = _trec(tmp_path, "q1 0 d 1\n", "q1\tonly a title\n", name="q.tsv")
    with pytest.raises(InputError) as exc:
        load_golden(tsv, options=DatasetOptions(query_field="description"))
    assert "the file has no description column" in exc.value.offenders[0].reason
    with pytest.raises(InputError) as exc:
        load_golden(files[:1])  # topics without qrels
    assert "got 1 queries and 0 qrels files" in exc.value.offenders[0].reason


def test_run_config_golden_mapping(tmp_path):
    settings = settings_from_dict(
        {"golden": {"queries": "t.txt", "qrels": "q.txt", "query_field": "description"}}
    )
    paths, fmt, options = settings.golden_input()
    assert [p.name for p in paths] == ["t.txt", "q.txt"] and fmt == "auto"
    assert options == DatasetOptions(query_field="description")
    assert settings.golden_path().name == "q.txt"
    for bad, reason in (
        ({"path": "a", "qrels": "b"}, "give either 'path' or 'queries' + 'qrels', not both"),
        ({"queries": "a"}, "give 'path' (a file or folder), or both 'queries' and 'qrels'"),
        ({"path": "a", "split": "../x"}, "'../x' is not a split name"),
    ):
        with pytest.raises(InputError) as exc:
            settings_from_dict({"golden": bad})
        assert reason in str(exc.value), exc.value


def test_cli_convert_and_exit_2_on_bad_qrels(tmp_path):
    files = _trec(tmp_path, "301 0 FBIS3-1 2\n302 0 LA-7 x\n", SGML)
    env = cli_env(tmp_path)
    bad = cli(env, "golden", "validate", *map(str, files))
    assert bad.returncode == 2
    no_traceback(bad)
    assert "qrels.txt:line 2 — query '302' — field 'rel': relevance must be an integer, got 'x'" in bad.stderr
    files[1].write_text("301 0 FBIS3-1 2\n302 0 LA-7 0\n")
    out = tmp_path / "golden.yaml"
    converted = cli(
        env, "golden", "convert", *map(str, files), "--query-field", "description", "--out", str(out)
    )
    assert converted.returncode == 0, converted.stderr
    again = load_golden(out)
    assert [(q.id, q.query, [(s.doc_id, s.grade) for s in q.supports]) for q in again.golden.queries] == [
        (
            "301",
            "Identify organizations that participate in international criminal activity.",
            [("FBIS3-1", 2)],
        ),
        ("302", "Is the disease of Poliomyelitis under control?", [("LA-7", 0)]),
    ]
