"""TREC run files and ranx JSON runs replayed: trec_eval's order (score descending, ties by docno
descending, the rank column ignored) checked against pytrec_eval itself on random runs full of
ties (hypothesis), auto-detection, the disagreeing-ranks warning, missing queries, and bad files
listed offender by offender."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kebab_eval_pipeline.chain.settings import settings_from_dict
from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.systems.factory import build_system
from kebab_eval_pipeline.systems.outcome import QueryRequest
from kebab_eval_pipeline.systems.replay import detect_format, read_trace
from kebab_eval_pipeline.systems.trec_run import _fast_trec_run, rankings, read_trec_run

pytrec_eval = pytest.importorskip("pytrec_eval")

docnos = st.text(alphabet="abAB09-_.é", min_size=1, max_size=6)
runs = st.dictionaries(
    st.sampled_from(["q1", "q2", "q3"]),
    st.dictionaries(docnos, st.sampled_from([0.0, 0.5, 1.0, 1.5, -2.0, 3.25]), min_size=1, max_size=12),
    min_size=1,
)


@settings(max_examples=60, deadline=None)
@given(runs, st.randoms())
def test_order_is_pytrec_evals(run, rnd):
    """Each document in turn is the only relevant one: pytrec_eval's recip_rank is 1 / its position
    in our ranking, so both order every query identically (ties included)."""
    lines = [(q, d, s) for q, docs in run.items() for d, s in docs.items()]
    rnd.shuffle(lines)  # file order and ranks mean nothing to trec_eval
    text = "".join(f"{q} Q0 {d} {rnd.randint(1, 99)} {s} tag\n" for q, d, s in lines)
    table, offenders = read_trec_run(Path("r"), text)
    assert offenders == []
    slow, _ = read_trec_run(Path("r"), text, fast=False)  # the line-by-line reader: the same table
    assert slow.drop(columns="where").equals(table.drop(columns="where"))
    if text.isascii():
        assert _fast_trec_run(text) is not None  # the column-by-column reader took it
    ordered, _ = rankings(table)
    qrels, probes = {}, {}
    for q, docs in run.items():
        for d in docs:
            probe = f"{q}|{d}"
            qrels[probe] = {d: 1}
            probes[probe] = docs
    measured = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(probes)
    for probe, values in measured.items():
        q, d = probe.split("|", 1)
        assert values["recip_rank"] == pytest.approx(1 / (ordered[q].docnos.index(d) + 1)), probe


def _system(tmp_path: Path, text: str, name: str, fmt: str = "auto"):
    path = tmp_path / name
    path.write_text(text)
    return build_system(settings_from_dict({"system": {"kind": "replay", "path": str(path), "format": fmt}}))


def test_trec_run_replayed_in_trec_eval_order(tmp_path):
    text = (
        "q1 Q0 d1 1 2.0 run\n"
        "q1 Q0 d3 2 2.0 run\n"  # a tie: d3 before d1 (docno descending)
        "q1 Q0 d2 3 5 run\n"  # the highest score, though ranked 3rd in the file
        "q2 Q0 x 1 1.0e-1 run\n"
    )
    system = _system(tmp_path, text, "run.trec")
    assert system.format == "trec"
    q1, q2, q3 = system.run_queries(
        [QueryRequest("q1", "a"), QueryRequest("q2", "b"), QueryRequest("q9", "c")], k=2, answers=True
    )
    assert [h.doc_id for h in q1.hits] == ["d2", "d3"] and [h.score for h in q1.hits] == [5.0, 2.0]
    assert [h.rank for h in q1.hits] == [1, 2]
    assert q1.warnings == ["returned 3 hits for k=2; kept the first 2"]
    assert [h.doc_id for h in q2.hits] == ["x"] and q2.error_class is None and q2.answer is None
    assert q3.error_class == "missing_in_trace"
    (warning,) = system.run_level_warnings({"q1", "q2", "q9"})
    assert warning.startswith("run.trec: 1 query lists ranks that disagree with trec_eval's order")
    assert warning.endswith(": q1")


def test_ranx_run_replayed_and_detected(tmp_path):
    doc = {"q1": {"d1": 0.5, "d2": 0.5, "d0": 0.9}, "q2": {"z": 1}}
    system = _system(tmp_path, json.dumps(doc, indent=2), "run.json")
    assert system.format == "ranx"
    (q1,) = system.run_queries([QueryRequest("q1", "a")], k=10, answers=False)
    assert [h.doc_id for h in q1.hits] == ["d0", "d2", "d1"]
    assert system.run_level_warnings({"q1", "q2"}) == []


def test_detection():
    assert detect_format(Path("r"), "301 Q0 FBIS3-1 1 12.5 myrun\n") == "trec"
    assert detect_format(Path("r"), '{"q1": {"d1": 1.5}}') == "ranx"
    assert detect_format(Path("r"), '{"query_id": "q1", "hits": []}\n') == "kebab"
    with pytest.raises(ValueError, match="a TREC run or a ranx JSON run"):
        detect_format(Path("r"), "301 Q0 FBIS3-1 12.5 myrun\n")  # five columns: not a run
    # objects of empty objects score nothing: not a ranx run (the input fuzz found `{"": {}}`, a
    # broken export, read as one)
    for not_a_run in ('{"": {}}', '{"q1": {}, "q2": {}}', '{"q1": {"d1": true}}'):
        with pytest.raises(ValueError, match="cannot tell the trace format"):
            detect_format(Path("r"), not_a_run)


def test_bad_trec_run_lists_every_offender(tmp_path):
    path = tmp_path / "run.trec"
    path.write_text(
        "q1 Q0 d1 1 2.0 run\n"
        "q1 Q0 d2 2 run\n"  # five columns
        "q1 Q0 d3 x 1.0 run\n"  # rank not an integer
        "q1 Q0 d4 4 nan run\n"  # not a finite number
        "q1 Q0 d5 5 1_0 run\n"  # Python reads it; trec_eval does not
        "q1 Q0 d1 6 0.5 run\n"  # listed twice
    )
    with pytest.raises(InputError) as exc:
        read_trace(path, "trec")
    got = [(o.position, o.query_id, o.field, o.reason) for o in exc.value.offenders]
    assert got == [
        ("line 2", "q1", None, "expected 6 columns (qid Q0 docno rank score tag), got 5"),
        ("line 3", "q1", "rank", "rank must be an integer, got 'x'"),
        ("line 4", "q1", "score", "score must be a finite number, got 'nan'"),
        ("line 5", "q1", "score", "score must be a finite number, got '1_0'"),
        ("line 6", "q1", "docno", "document 'd1' listed twice for this query (first at line 1)"),
    ]


def test_bad_ranx_run(tmp_path):
    path = tmp_path / "run.json"
    path.write_text('{\n  "q1": {\n    "d1": "high",\n    "d2": 1\n  },\n  "q2": []\n}\n')
    with pytest.raises(InputError) as exc:
        read_trace(path, "ranx")
    assert [(o.position, o.query_id, o.field, o.reason) for o in exc.value.offenders] == [
        ("line 3", "q1", "score", "score must be a finite number, got 'high'"),
        ("line 6", "q2", None, "expected an object {docid: score}"),
    ]
