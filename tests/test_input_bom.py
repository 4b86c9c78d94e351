"""A UTF-8 byte-order mark at the start of a file (Notepad, Excel's "CSV UTF-8", PowerShell) is
dropped by the one text reader every format goes through (``yaml_io.decode_text``): each format
reads a file with a BOM exactly as without one — never refused, never a BOM inside the first id.

Before (main): JSON, JSONL, BEIR, TREC SGML, ranx and kebab traces with a BOM were refused; TREC
TSV topics were accepted with the first query id "\\ufeff301"."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from kebab_eval_pipeline.chain.settings import load_settings
from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.foundation.yaml_io import decode_text, read_text_and_sha256
from kebab_eval_pipeline.golden.load import load_golden
from kebab_eval_pipeline.systems.replay import read_trace

BOM = "\ufeff"
SGML = "<top>\n<num> Number: 301\n<title> Crime\n</top>\n<top>\n<num> Number: 302\n<title> Polio\n</top>\n"
QRELS = "301 0 D1 1\n302 0 D2 2\n"

#: format → files (name → text); the golden set read from them holds 301 → D1 and 302 → D2.
GOLDEN = {
    "yaml": {
        "g.yaml": "- id: '301'\n  query: a\n  expected_doc_ids: [D1]\n- id: '302'\n  query: b\n"
        "  expected_doc_ids: [D2]\n"
    },
    "json": {
        "g.json": json.dumps(
            [
                {"id": "301", "query": "a", "expected_doc_ids": ["D1"]},
                {"id": "302", "query": "b", "expected_doc_ids": ["D2"]},
            ]
        )
    },
    "jsonl": {
        "g.jsonl": '{"id": "301", "query": "a", "supports": [{"doc_id": "D1"}]}\n'
        '{"id": "302", "query": "b", "supports": [{"doc_id": "D2"}]}\n'
    },
    "beir": {
        "beir/queries.jsonl": '{"_id": "301", "text": "a"}\n{"_id": "302", "text": "b"}\n',
        "beir/qrels/test.tsv": "query-id\tcorpus-id\tscore\n301\tD1\t1\n302\tD2\t2\n",
    },
    "trec-sgml": {"topics.txt": SGML, "qrels.txt": QRELS},
    "trec-tsv": {"topics.tsv": "301\tCrime\n302\tPolio\n", "qrels.txt": QRELS},
    "ranx": {"qrels.json": '{"301": {"D1": 1}, "302": {"D2": 2}}', "q.tsv": "301\tCrime\n302\tPolio\n"},
}


def _write(folder: Path, files: dict[str, str], bom_in: str | None) -> list[Path]:
    paths = []
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(((BOM if name == bom_in or bom_in == "*" else "") + text).encode("utf-8"))
        paths.append(path)
    return [folder / "beir"] if any(name.startswith("beir/") for name in files) else paths


def _pairs(folder: Path, files: dict[str, str], bom_in: str | None) -> list[tuple[str, str | None]]:
    golden = load_golden(_write(folder, files, bom_in)).golden
    return [(q.id, s.doc_id) for q in golden.queries for s in q.supports]


@pytest.mark.parametrize("fmt", sorted(GOLDEN))
def test_every_golden_format_reads_a_file_with_a_bom_as_without(tmp_path: Path, fmt: str):
    files = GOLDEN[fmt]
    expected = [("301", "D1"), ("302", "D2")]
    assert _pairs(tmp_path / "plain", files, None) == expected
    # a BOM in every file, then in each file alone (a qrels file from Excel, topics from Notepad)
    for i, where in enumerate(["*", *files]):
        assert _pairs(tmp_path / f"bom{i}", files, where) == expected, where


@pytest.mark.parametrize(
    "text",
    [
        json.dumps({"query_id": "301", "hits": [{"rank": 1, "doc_id": "D1"}]}) + "\n",  # kebab
        "301 Q0 D1 1 2.5 sys\n",  # TREC run
        json.dumps({"301": {"D1": 2.5}}),  # ranx run
    ],
    ids=["kebab", "trec", "ranx"],
)
def test_replay_traces_with_a_bom_read_as_without(tmp_path: Path, text: str):
    plain, marked = tmp_path / "plain.jsonl", tmp_path / "bom.jsonl"
    plain.write_text(text, encoding="utf-8")
    marked.write_bytes((BOM + text).encode("utf-8"))
    records, fmt, *_ = read_trace(plain)
    again, fmt_again, *_ = read_trace(marked)
    assert list(again) == list(records) == ["301"] and fmt_again == fmt


def test_run_config_with_a_bom(tmp_path: Path):
    path = tmp_path / "run.yaml"
    path.write_bytes((BOM + "baseline: none\nk: [1, 5]\n").encode("utf-8"))
    settings = load_settings(path)
    assert (settings.baseline, settings.k) == ("none", [1, 5])


def test_the_hash_is_of_the_bytes_and_errors_count_from_the_file_start(tmp_path: Path):
    path = tmp_path / "g.yaml"
    data = (BOM + "a: 1\n").encode("utf-8")
    path.write_bytes(data)
    text, digest = read_text_and_sha256(path, "golden set")
    assert text == "a: 1\n"
    assert digest == hashlib.sha256(data).hexdigest()
    assert decode_text(b"plain") == "plain" and decode_text(BOM.encode() * 2) == BOM  # only the first
    with pytest.raises(UnicodeDecodeError) as err:
        decode_text(BOM.encode() + b"ok\n\xff")
    assert err.value.start == 6  # the byte's offset in the file, BOM included
    path.write_bytes(BOM.encode() + b"ok\n\xff\n")
    with pytest.raises(InputError) as refused:
        load_golden(path)
    (offender,) = refused.value.offenders
    assert (offender.position, offender.reason) == ("line 2", "not valid UTF-8 (byte 6)")
