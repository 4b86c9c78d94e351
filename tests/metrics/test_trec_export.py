"""trec_eval on the TREC export reproduces the run's own scores, under every match criterion.

Random golden supports and hits (paths, heading paths, line spans, chunk and doc ids, grades
including 0 and negative) are scored with the metric kernels and stored-rounded to 4 decimals,
exported with :func:`trec_tables` to real files, read back with pytrec_eval's own parsers and
evaluated: ``success_k`` = ``hit@k``, ``recip_rank`` on the run cut at the MRR cutoff = ``mrr``,
``P_k`` = ``precision@k``, ``ndcg_cut_k`` = ``ndcg@k``, ``recall_k`` = ``recall@k``, ``map`` =
``map``, ``map_cut_k`` = ``map@k``, ``Rprec`` = ``rprec`` and ``bpref`` = ``bpref`` per query, at the
run's relevance level (pytrec_eval ``relevance_level``, trec_eval ``-l``).
"""

from __future__ import annotations

import itertools
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.golden.model import GoldenQuery, Support
from kebab_eval_pipeline.metrics.aggregate import round_scores
from kebab_eval_pipeline.metrics.matching import match_hits
from kebab_eval_pipeline.metrics.retrieval import retrieval_scores
from kebab_eval_pipeline.reporting.export import DOCNO_COLUMNS, trec_tables
from tests.metrics.conftest import Tables

pytrec_eval = pytest.importorskip("pytrec_eval")

CRITERIA = ("chunk", "doc", "anchor", "span", "auto")
KS = (1, 3, 5, 10)
PATHS = ("a.md", "b.md", "docs/c.md")
HEADINGS = (None, ["A"], ["A", "x"], ["B"], ["A", "y", "z"])
CHUNKS = tuple(f"c{i}" for i in range(6))


def _lines():
    return st.one_of(
        st.tuples(st.none(), st.none()),
        st.integers(1, 30).flatmap(lambda a: st.tuples(st.just(a), st.integers(a, a + 8))),
    )


_supports = st.builds(
    lambda chunk, doc, path, heading, lines, grade: Support(
        chunk_id=chunk,
        doc_id=doc,
        rel_path=path,
        heading_path=heading,
        line_start=lines[0],
        line_end=lines[1],
        grade=grade,
    ),
    st.one_of(st.none(), st.sampled_from(CHUNKS)),
    st.one_of(st.none(), st.sampled_from(["D-a", "D-b"])),
    st.one_of(st.none(), st.sampled_from(PATHS)),
    st.sampled_from(HEADINGS),
    _lines(),
    st.integers(-1, 3),
)

_hits = st.builds(
    lambda chunk, path, heading, lines: {
        "chunk_id": chunk,
        "doc_id": None if path is None else f"D-{path[0]}",
        "doc_path": path,
        "heading_path": heading,
        "line_start": lines[0],
        "line_end": lines[1],
    },
    st.one_of(st.none(), st.sampled_from(CHUNKS)),
    st.one_of(st.none(), st.sampled_from((*PATHS, "./a.md"))),
    st.sampled_from(HEADINGS),
    _lines(),
)

_query = st.tuples(
    st.booleans().map(lambda b: b or None), st.lists(_supports, max_size=5), st.lists(_hits, max_size=12)
)


def _build(spec):
    golden, hit_frames = [], []
    for i, (answerable, supports, hits) in enumerate(spec):
        qid = f"q{i}"
        golden.append(GoldenQuery(id=qid, query="?", answerable=bool(answerable), supports=supports))
        if hits:
            hit_frames.append(Tables.hits(qid, *hits))
    queries, supports = Tables.golden(*golden)
    hits = Tables.concat(*hit_frames) if hit_frames else Tables.hits("q0")
    return queries, supports, hits


def _trec_eval(run_path: Path, qrels_path: Path, cutoff: int, level: int = 1):
    with qrels_path.open() as f:
        qrels = pytrec_eval.parse_qrel(f)
    with run_path.open() as f:
        run = pytrec_eval.parse_run(f)
    cuts = ",".join(map(str, KS))
    full = pytrec_eval.RelevanceEvaluator(
        qrels,
        {f"success.{cuts}", f"recall.{cuts}", f"P.{cuts}", f"ndcg_cut.{cuts}", f"map_cut.{cuts}"}
        | {"map", "Rprec", "bpref"},
        relevance_level=level,
    )
    ranks = {}  # the run file's own rank column, to cut the run at the MRR cutoff
    for line in run_path.read_text().splitlines():
        q, _, docno, rank, *_ = line.split()
        ranks[(q, docno)] = int(rank)
    cut = {q: {d: s for d, s in docs.items() if ranks[(q, d)] <= cutoff} for q, docs in run.items()}
    mrr = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}, relevance_level=level).evaluate(cut)
    return qrels, full.evaluate(run), mrr


def check_export_reproduces(
    queries, supports, hits, criterion: str, cutoff: int, out: Path, level: int = 1
) -> int:
    """Assert trec_eval (``-l level``) on the export equals the stored (rounded) scores; returns
    queries compared."""
    ours = retrieval_scores(
        queries,
        supports,
        hits,
        match_hits(hits, supports, criterion),
        ks=KS,
        mrr_cutoff=cutoff,
        relevance_level=level,
    )
    ours = round_scores(ours).set_index("query_id")
    export = trec_tables(queries, supports, hits, criterion, relevance_level=level)
    run_path, qrels_path, docnos_path = export.write(out, "t")
    qrels_lines = qrels_path.read_text().splitlines()
    assert len(qrels_lines) == len(set(qrels_lines))  # no duplicate qrels lines
    run_lines = [line.split() for line in run_path.read_text().splitlines()]
    assert len(run_lines) == len(hits)
    by_query: dict[str, list[list[str]]] = {}
    for fields in run_lines:
        assert len(fields) == 6 and fields[1] == "Q0" and fields[5] == "t"
        by_query.setdefault(fields[0], []).append(fields)
    for rows in by_query.values():
        assert [int(r[3]) for r in rows] == sorted(int(r[3]) for r in rows)  # rank order
        scores = [float(r[4]) for r in rows]
        assert all(a > b for a, b in itertools.pairwise(scores))  # strictly decreasing
        assert len({r[2] for r in rows}) == len(rows)  # docnos unique within a query
    legend = docnos_path.read_text().splitlines()
    assert legend[0].split("\t") == list(DOCNO_COLUMNS) and len(legend) == len(hits) + 1

    qrels, full, mrr = _trec_eval(run_path, qrels_path, cutoff, level)
    compared = 0
    for qid, row in ours.iterrows():
        assert bool(row["applicable"]) == (qid in qrels), qid
        if not row["applicable"]:
            continue
        assert abs(row["mrr"] - (mrr[qid]["recip_rank"] if qid in mrr else 0.0)) <= 1e-4, (qid, "mrr")
        t = full.get(qid)
        for metric, measure in (("map", "map"), ("rprec", "Rprec"), ("bpref", "bpref")):
            theirs = t[measure] if t is not None else 0.0
            assert abs(row[metric] - theirs) <= 1e-4, (qid, criterion, level, metric, row[metric], theirs)
        for k in KS:
            pairs = {"hit": "success", "precision": "P", "ndcg": "ndcg_cut", "recall": "recall"}
            pairs["map"] = "map_cut"
            for metric, measure in pairs.items():
                theirs = t[f"{measure}_{k}"] if t is not None else 0.0  # no hits: trec_eval needs -c
                assert abs(row[f"{metric}@{k}"] - theirs) <= 1e-4, (
                    qid,
                    criterion,
                    metric,
                    k,
                    row[f"{metric}@{k}"],
                    theirs,
                )
        compared += 1
    return compared


@pytest.mark.parametrize("criterion", CRITERIA)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    spec=st.lists(_query, min_size=1, max_size=6),
    cutoff=st.sampled_from([1, 3, 10]),
    level=st.sampled_from([1, 2]),
)
def test_trec_eval_on_the_export_reproduces_the_scores(criterion, spec, cutoff, level) -> None:
    queries, supports, hits = _build(spec)
    with tempfile.TemporaryDirectory() as tmp:
        check_export_reproduces(queries, supports, hits, criterion, cutoff, Path(tmp) / "run.trec", level)


def test_export_hand_worked(tmp_path) -> None:
    """Three chunks of one gold document, a second gold document never found, a grade-0 support."""
    queries, supports = Tables.golden(
        GoldenQuery(
            id="q1",
            query="?",
            supports=[
                Support(rel_path="a.md", grade=2),
                Support(rel_path="b.md"),
                Support(rel_path="z.md", grade=0),
            ],
        ),
        GoldenQuery(id="q2", query="?", answerable=False, supports=[Support(rel_path="a.md")]),
        GoldenQuery(id="q3", query="?", supports=[Support(rel_path="a.md")]),  # no hits
    )
    hits = Tables.concat(
        Tables.hits(
            "q1",
            {"doc_path": "a.md", "chunk_id": "k1", "heading_path": ["T", "U"]},
            {"doc_path": "x.md", "chunk_id": "k2"},
            {"doc_path": "a.md", "chunk_id": "k3"},
            {"doc_path": "z.md", "chunk_id": "k4"},
        ),
        Tables.hits("q2", {"doc_path": "a.md"}),
    )
    run, qrels, legend = trec_tables(queries, supports, hits, "doc").write(tmp_path / "r.trec", "demo-1")
    assert run.read_text().splitlines() == [
        "q1 Q0 gold:0 1 4 demo-1",
        "q1 Q0 hit:2 2 3 demo-1",
        "q1 Q0 hit:3 3 2 demo-1",  # repeats a.md, already credited to rank 1
        "q1 Q0 gold:2 4 1 demo-1",  # matches only a grade-0 support: judged non-relevant (bpref)
        "q2 Q0 gold:0 1 4 demo-1",  # unanswerable: in the run, not in the qrels
    ]
    assert qrels.read_text().splitlines() == [
        "q1 0 gold:0 2",
        "q1 0 gold:1 1",
        "q1 0 gold:2 0",
        "q3 0 gold:0 1",  # applicable without hits: trec_eval counts it with -c
    ]
    assert legend.read_text().splitlines() == [
        "qid\trank\tdocno\tchunk_id\tdoc_path\theading_path\tsupport_idx",
        "q1\t1\tgold:0\tk1\ta.md\tT > U\t0",
        "q1\t2\thit:2\tk2\tx.md\t\t",
        "q1\t3\thit:3\tk3\ta.md\t\t",
        "q1\t4\tgold:2\tk4\tz.md\t\t2",
        "q2\t1\tgold:0\t\ta.md\t\t0",
    ]
    assert check_export_reproduces(queries, supports, hits, "doc", 10, tmp_path / "again.trec") == 2
    # Relevance level 2: q3's only support (grade 1) is no longer relevant, so q3 leaves the qrels;
    # in q1, b.md (grade 1) joins z.md among the judged non-relevant supports.
    level2 = trec_tables(queries, supports, hits, "doc", relevance_level=2).qrels
    assert level2["qid"].tolist() == ["q1"] * 3
    assert check_export_reproduces(queries, supports, hits, "doc", 10, tmp_path / "l2.trec", level=2) == 1


def test_query_ids_with_whitespace_are_refused(tmp_path) -> None:
    queries, supports = Tables.golden(
        GoldenQuery(id="what is x", query="?", supports=[Support(chunk_id="c")])
    )
    hits = Tables.hits("what is x", {"chunk_id": "c"})
    with pytest.raises(InputError, match="what is x") as err:
        trec_tables(queries, supports, hits, "chunk", source="run r1")
    assert "whitespace" in str(err.value) and "run r1" in str(err.value)


def test_many_hits_on_few_supports_random(tmp_path) -> None:
    """A larger deterministic case: 200 queries, 30 hits each over 4 documents (heavy repetition)."""
    rng = np.random.default_rng(3)
    spec = []
    for _ in range(200):
        sup = [
            Support(rel_path=str(rng.choice(PATHS)), grade=int(rng.integers(0, 4)))
            for _ in range(int(rng.integers(0, 5)))
        ]
        hits = [{"doc_path": str(rng.choice((*PATHS, "d.md")))} for _ in range(30)]
        spec.append((True, sup, hits))
    queries, supports, hits = _build(spec)
    for criterion in ("doc", "auto"):
        assert (
            check_export_reproduces(queries, supports, hits, criterion, 10, tmp_path / f"{criterion}.trec")
            > 100
        )
