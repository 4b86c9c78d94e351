"""A gold support given twice for one query is refused, as a qrels judgment given twice is.

Each support is one relevant item (R; a gain in the ideal DCG) that one hit is credited with, so
``supports: [{doc_id: d1}, {doc_id: d1}]`` with d1 at rank 1 stored map, R-precision, recall@1 and
bpref 0.5 and ndcg@2 0.6131 on main, with no warning — pytrec_eval on the exported run agreed,
since the export carried the two supports as two judged items. Counting it once instead would
hide what is most often a slip (``d1`` written where ``d2`` was meant) that only the author can
resolve; so the loader refuses it, naming the file, query, field and both positions."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.golden.load import load_golden
from kebab_eval_pipeline.store.runs import RunStore
from tests.test_cli import cli, env, no_traceback  # noqa: F401 (env: the fixture)

pytrec_eval = pytest.importorskip("pytrec_eval")

TWICE = "support given twice for this query (first at supports[0]"


def refused(path: Path) -> list:
    with pytest.raises(InputError) as err:
        load_golden(path)
    return err.value.offenders


@pytest.mark.parametrize(
    ("name", "text", "shown"),
    [
        (
            "c.yaml",
            "queries:\n- id: q1\n  query: x\n  supports: [{doc_id: d1}, {doc_id: d1}]\n",
            "doc_id 'd1'",
        ),
        ("k.yaml", "- id: q1\n  query: x\n  expected_doc_ids: [d1, d1]\n", "doc_id 'd1'"),
        ("k2.yaml", "- id: q1\n  query: x\n  expected_chunk_ids: [c1, c1]\n", "chunk_id 'c1'"),
        (
            "a.yaml",
            "- id: q1\n  question: x\n  gold_supports:\n  - {rel_path: a.md, heading_path: [A]}\n"
            "  - {rel_path: a.md, heading_path: [A]}\n",
            "rel_path 'a.md', heading_path ['A']",
        ),
        (
            "w.jsonl",
            '{"qid": "q1", "question": "x", "gold_citations": ["p1#2", "p1#2"]}\n',
            "chunk_id 'p1#2'",
        ),
        (
            "c.jsonl",
            '{"id": "q1", "query": "x", "supports": [{"doc_id": "d1", "grade": 2}, {"doc_id": "d1"}]}\n',
            "doc_id 'd1') (grades 2 and 1)",
        ),
    ],
)
def test_a_support_given_twice_is_refused_in_every_format(tmp_path: Path, name: str, text: str, shown: str):
    path = tmp_path / name
    path.write_text(text)
    (offender,) = refused(path)
    assert (offender.file, offender.query_id, offender.field) == (str(path), "q1", "supports[1]")
    assert offender.position == "line 1" or offender.position == "line 2"
    assert offender.reason.startswith(f"{TWICE}: {shown}"), offender.reason
    assert offender.reason.endswith("remove one")


def test_every_repeat_is_listed_at_once(tmp_path: Path):
    path = tmp_path / "g.yaml"
    path.write_text(
        "queries:\n- id: q1\n  query: x\n"
        "  supports: [{doc_id: d1}, {doc_id: d2}, {doc_id: d1}, {doc_id: d1}]\n"
        "- id: q2\n  query: y\n  supports: [{rel_path: a.md, line_start: 3, line_end: 9}, "
        "{rel_path: a.md, line_start: 3, line_end: 9, symbol: f}]\n"
    )
    found = [(o.query_id, o.field, o.reason.split(":")[0]) for o in refused(path)]
    assert found == [
        ("q1", "supports[2]", "support given twice for this query (first at supports[0]"),
        ("q1", "supports[3]", "support given twice for this query (first at supports[0]"),
        # symbol is never matched on: the same evidence to every criterion
        ("q2", "supports[1]", "support given twice for this query (first at supports[0]"),
    ]


def test_supports_that_differ_in_what_is_matched_are_not_repeats(tmp_path: Path):
    path = tmp_path / "g.yaml"
    path.write_text(
        "queries:\n- id: q1\n  query: x\n  supports:\n"
        "  - {doc_id: d1, chunk_id: c1}\n  - {doc_id: d1, chunk_id: c2}\n"  # two chunks of one document
        "  - {rel_path: a.md, heading_path: [A]}\n  - {rel_path: a.md, heading_path: [A, B]}\n"
        "  - {rel_path: a.md, line_start: 1, line_end: 4}\n  - {rel_path: a.md, line_start: 5, line_end: 9}\n"
        "  - {rel_path: a.md, snippet: one}\n  - {rel_path: a.md, snippet: two}\n"
    )
    assert len(load_golden(path).golden.queries[0].supports) == 8


GOLDEN = (
    "schema_version: '1'\nname: dup\nqueries:\n- id: q1\n  query: what is d1\n"
    "  supports: [{doc_id: d1}{again}]\n"
)
TRACE = [
    {
        "query_id": "q1",
        "hits": [{"rank": 1, "doc_id": "d1", "score": 2.0}, {"rank": 2, "doc_id": "d2", "score": 1.0}],
    },
    {
        "query_id": "q2",
        "hits": [{"rank": 1, "doc_id": "d4", "score": 2.0}, {"rank": 2, "doc_id": "d3", "score": 1.0}],
    },
]
MEASURES = {"map": "map", "Rprec": "rprec", "recall_1": "recall@1", "bpref": "bpref", "ndcg_cut_2": "ndcg@2"}


def test_the_issue_case_through_the_cli_cross_checked_by_pytrec_eval(env, tmp_path: Path):  # noqa: F811
    trace = tmp_path / "trace.jsonl"
    trace.write_text("".join(json.dumps(row) + "\n" for row in TRACE))
    configs = {}
    for name, again in (("dup", ", {doc_id: d1}"), ("once", "")):
        golden = tmp_path / f"{name}.yaml"
        golden.write_text(
            GOLDEN.replace("{again}", again) + "- id: q2\n  query: what is d3\n  supports: [{doc_id: d3}]\n"
        )
        configs[name] = tmp_path / f"{name}-run.yaml"
        configs[name].write_text(
            f"golden: {golden}\nsystem: {{kind: replay, path: {trace}, format: kebab}}\nk: [1, 2, 5]\n"
            "answers: false\nbaseline: none\ndefault_gates: false\nsystem_health: null\n"
        )
    # the repeat: exit 2 before anything runs, naming file, line, query and both positions
    proc = cli(env, "run", "--run-id", "dup", "--config", str(configs["dup"]))
    no_traceback(proc)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert (
        f"{tmp_path / 'dup.yaml'}:line 4 — query 'q1' — field 'supports[1]': {TWICE}: doc_id 'd1')"
        in proc.stderr
    )
    # the same set with d1 once: d1 at rank 1 scores 1 everywhere, as pytrec_eval says
    proc = cli(env, "run", "--run-id", "once", "--config", str(configs["once"]))
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "once.trec"
    exported = cli(env, "export", "once", "--format", "trec", "--out", str(out))
    assert exported.returncode == 0, exported.stderr
    with out.with_name(out.name + ".qrels").open() as f:
        qrels = pytrec_eval.parse_qrel(f)
    with out.open() as f:
        run = pytrec_eval.parse_run(f)
    rescored = pytrec_eval.RelevanceEvaluator(qrels, set(MEASURES)).evaluate(run)
    # ... and on the documents themselves (qrels by doc id, the trace as a run)
    originals = pytrec_eval.RelevanceEvaluator({"q1": {"d1": 1}, "q2": {"d3": 1}}, set(MEASURES)).evaluate(
        {row["query_id"]: {h["doc_id"]: h["score"] for h in row["hits"]} for row in TRACE}
    )
    tables, _ = RunStore(Path(env["DAGSTER_HOME"]) / "kebab-eval" / "artifacts").read("query_scores", "once")
    stored = tables["query_scores"].set_index("query_id")
    for qid in ("q1", "q2"):
        for theirs, ours in MEASURES.items():
            assert math.isclose(stored.loc[qid, ours], rescored[qid][theirs], abs_tol=1e-4), (
                qid,
                ours,
            )  # stored to 4 places
            assert math.isclose(stored.loc[qid, ours], originals[qid][theirs], abs_tol=1e-4), (
                qid,
                ours,
            )  # stored to 4 places
    assert [stored.loc["q1", m] for m in MEASURES.values()] == [1.0] * 5  # main stored 0.5 ×4 and 0.6131
