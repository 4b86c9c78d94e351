"""The replay adapter (SPEC §4 "replay"): traces recorded elsewhere, scored as if the system ran now.

WFGY's sample gold + trace (seeds/wfgy-precision-refusal-scorer.txt, copied to ``data/``) is the
acceptance case: it must score exactly what WFGY's page says, through a real Dagster run and the
CLI. Around it: perturbed traces moving each answer metric by hand-computed amounts, golden
queries missing from the trace, kebab ``per_query.jsonl``, the round trip through this project's
own JSON export, and traces that cannot be read.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from kebab_eval_pipeline.chain import pipeline
from kebab_eval_pipeline.chain.artifacts import QueryScoresArtifact, RetrievalArtifact
from kebab_eval_pipeline.chain.settings import settings_from_dict
from kebab_eval_pipeline.cli import main as cli_main
from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.reporting.export import export_json
from kebab_eval_pipeline.systems.factory import build_system
from kebab_eval_pipeline.systems.replay import detect_format
from tests.forked_cli import run_cli
from tests.systems.adapters.conftest import run_config, stored_metrics, timing_free

DATA = Path(__file__).parent / "data"
WFGY_GOLD = DATA / "wfgy_gold.jsonl"
WFGY_TRACE = DATA / "wfgy_trace.jsonl"
ANSWER_METRICS = ("answer_precision", "chr", "under_refusal_rate", "over_refusal_rate", "refusal_correctness")


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text(
        "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8"
    )
    return path


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def write_config(path: Path, system: dict, golden: Path | None = WFGY_GOLD, **extra) -> Path:
    doc: dict[str, Any] = {"system": system, "baseline": "none", **extra}
    if golden is not None:
        doc["golden"] = str(golden)
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


class Scored:
    """The chain run with the plain pipeline functions (what the assets call), for fast variations."""

    def __init__(self, doc: dict) -> None:
        settings = settings_from_dict(doc)
        golden = pipeline.load_golden_artifact(settings)
        self.retrieval: RetrievalArtifact = pipeline.retrieve(settings, golden)
        self.scores: QueryScoresArtifact = pipeline.score(settings, golden, self.retrieval)
        self.metrics = pipeline.summarize("replayed", settings, golden, self.retrieval, self.scores).metrics

    @property
    def outcomes(self) -> pd.DataFrame:
        return self.retrieval.results.outcomes.set_index("query_id")

    @property
    def per_query(self) -> pd.DataFrame:
        return self.scores.scores.set_index("query_id")

    def hits(self, query_id: str) -> pd.DataFrame:
        h = self.retrieval.results.hits
        return h[h["query_id"] == query_id].reset_index(drop=True)


def replay(trace: Path, golden: Path = WFGY_GOLD, **settings) -> Scored:
    system = {"kind": "replay", "path": str(trace), **settings.pop("system", {})}
    return Scored({"golden": str(golden), "system": system, **settings})


def answer_metrics(metrics: dict) -> dict:
    return {name: metrics[name] for name in ANSWER_METRICS}


# ---------------------------------------------------------------------------------------------
# 1. acceptance: the WFGY sample through Dagster and through the CLI
# ---------------------------------------------------------------------------------------------


def test_wfgy_sample_scores_as_the_seed_says_through_dagster(instance, tmp_path):
    cfg = write_config(tmp_path / "cfg.yaml", {"kind": "replay", "path": str(WFGY_TRACE)})
    result, store = run_config(instance, cfg, "wfgy-1")
    assert result.success

    stored = stored_metrics(store, "wfgy-1")
    m = stored.metrics
    # WFGY §3 worked example: precision 2/2, CHR 2/2, under-refusal 0/1, over-refusal 0/2
    assert answer_metrics(m) == {
        "answer_precision": 1.0,
        "chr": 1.0,
        "under_refusal_rate": 0.0,
        "over_refusal_rate": 0.0,
        "refusal_correctness": 1.0,
    }
    assert stored.denominators["answer_precision"] == 2  # |S|: the two shipped answers
    assert stored.denominators["under_refusal_rate"] == 1  # |U|
    assert stored.denominators["over_refusal_rate"] == 2  # |A|
    # WFGY's recall@k (all gold citations within top-k) is recall_all@k; gold sits at ranks 2 and 1
    assert m["recall_all@5"] == 1.0 and m["hit@1"] == 0.5 and m["mrr"] == 0.75
    assert m["citation_coverage"] == 1.0 and m["attribution_hit_rate"] == 1.0
    assert m["n_queries"] == 3 and m["error_rate"] == 0.0
    assert {g["name"]: g["passed"] for g in stored.info["gates"]} == {
        "gate_answer_precision_min": True,
        "gate_chr_min": True,
        "gate_under_refusal_rate_max": True,
        "gate_over_refusal_rate_max": True,
    }

    retrieval = RetrievalArtifact.from_tables(*store.read("retrieval_results", "wfgy-1"))
    outcomes = retrieval.results.outcomes.set_index("query_id")
    assert bool(outcomes.loc["A0002", "refused"]) is True
    assert outcomes.loc["A0002", "answer_text"] == "not in context"
    assert not outcomes.loc["A0001", "refused"] and not outcomes.loc["A0003", "refused"]
    assert outcomes["error"].isna().all() and outcomes["retrieval_ms"].isna().all()  # none recorded
    hits = retrieval.results.hits
    assert hits[hits["query_id"] == "A0001"]["chunk_id"].tolist() == ["p1#1", "p1#2", "p2#1"]
    assert hits["rank"].tolist() == [1, 2, 3, 1, 2, 1, 2]
    cites = retrieval.results.citations
    assert cites[["query_id", "chunk_id"]].values.tolist() == [["A0001", "p1#2"], ["A0003", "pB#1"]]
    system = retrieval.results.system
    assert system.kind == "replay"
    assert system.details["trace_format"] == "wfgy"
    assert system.details["trace"] == str(WFGY_TRACE)
    assert len(system.details["trace_sha256"]) == 64
    scores = QueryScoresArtifact.from_tables(*store.read("query_scores", "wfgy-1")).scores.set_index(
        "query_id"
    )
    assert scores.loc["A0002", "refusal_correct"] == 1.0
    assert scores.loc["A0001", "answer_precision"] == 1.0 and scores.loc["A0003", "chr"] == 1.0


def test_wfgy_sample_through_the_cli(tmp_path):
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KEBAB_EVAL_", "DAGSTER_"))}
    env["DAGSTER_HOME"] = str(home)
    cfg = write_config(tmp_path / "cfg.yaml", {"kind": "replay", "path": str(WFGY_TRACE)})
    # kebab-eval as a process of its own, forked ready-imported
    proc = run_cli(["run", "--config", str(cfg), "--run-id", "wfgy-cli"], env=env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "gate pass gate_answer_precision_min: answer_precision = 1.0000" in proc.stdout
    assert "gate pass gate_chr_min: chr = 1.0000" in proc.stdout
    assert "gate pass gate_under_refusal_rate_max: under_refusal_rate = 0.0000" in proc.stdout
    assert "gate pass gate_over_refusal_rate_max: over_refusal_rate = 0.0000" in proc.stdout
    assert (home / "kebab-eval" / "artifacts").is_dir()  # artifacts beside the instance


# ---------------------------------------------------------------------------------------------
# 2. perturbed WFGY traces: each answer metric moves as WFGY §2 defines it
# ---------------------------------------------------------------------------------------------


def _claim(qid: str, claim: str, citations: list[str] | None = None):
    def edit(rows: dict[str, dict]) -> None:
        rows[qid]["answer_json"]["claim"] = claim
        if citations is not None:
            rows[qid]["answer_json"]["citations"] = citations

    return edit


def _cite(qid: str, citations: list[str]):
    def edit(rows: dict[str, dict]) -> None:
        rows[qid]["answer_json"]["citations"] = citations

    return edit


NO_SUBSTRING = _claim("A0001", "X accepts null values.")  # shipped, cites p1#2, but misses the gold claim
UNRETRIEVED_CITATION = _cite("A0003", ["pB#1", "p9#9"])  # p9#9 is not among retrieved_ids
ANSWERS_UNANSWERABLE = _claim("A0002", "Z is a zebra.", ["p1#1"])
REFUSES_ANSWERABLE = _claim("A0003", "not in context", [])


@pytest.mark.parametrize(
    ("edits", "expected", "also"),
    [
        pytest.param(
            [],
            {"answer_precision": 1.0, "chr": 1.0, "under_refusal_rate": 0.0, "over_refusal_rate": 0.0},
            {"refusal_correctness": 1.0, "citation_coverage": 1.0},
            id="sample",
        ),
        # S = {A1, A3}; A1 fails containment (C) but still hits its citation (H)
        pytest.param(
            [NO_SUBSTRING],
            {"answer_precision": 1 / 2, "chr": 2 / 2, "under_refusal_rate": 0.0, "over_refusal_rate": 0.0},
            {"refusal_correctness": 1.0, "attribution_hit_rate": 1.0},
            id="claim-without-gold-substring",
        ),
        # S = {A1, A3}; A3's citations are not ⊆ retrieved_ids, so H fails (precision and CHR);
        # it still cites gold (attribution) and p9#9 resolves to nothing the system returned
        pytest.param(
            [UNRETRIEVED_CITATION],
            {"answer_precision": 1 / 2, "chr": 1 / 2, "under_refusal_rate": 0.0, "over_refusal_rate": 0.0},
            {"attribution_hit_rate": 1.0, "citation_coverage": 1 / 2},
            id="citation-not-retrieved",
        ),
        # S = {A1, A2, A3}; A2 is unanswerable: counted in |S| but never correct; U answered 1/1
        pytest.param(
            [ANSWERS_UNANSWERABLE],
            {"answer_precision": 2 / 3, "chr": 2 / 3, "under_refusal_rate": 1 / 1, "over_refusal_rate": 0.0},
            {"refusal_correctness": 0.0, "attribution_hit_rate": 1.0},
            id="answers-the-unanswerable",
        ),
        # S = {A1}; R ∩ A = {A3}: over-refusal 1/2
        pytest.param(
            [REFUSES_ANSWERABLE],
            {"answer_precision": 1 / 1, "chr": 1 / 1, "under_refusal_rate": 0.0, "over_refusal_rate": 1 / 2},
            {"refusal_correctness": 1.0},
            id="refuses-the-answerable",
        ),
        # S = {A1, A2}: A1 has H only, A2 neither; A3 refused; A2 answered
        pytest.param(
            [NO_SUBSTRING, ANSWERS_UNANSWERABLE, REFUSES_ANSWERABLE],
            {
                "answer_precision": 0 / 2,
                "chr": 1 / 2,
                "under_refusal_rate": 1 / 1,
                "over_refusal_rate": 1 / 2,
            },
            {"refusal_correctness": 0.0},
            id="all-at-once",
        ),
    ],
)
def test_perturbed_trace_moves_each_metric(tmp_path, edits, expected, also):
    rows = {r["qid"]: r for r in read_jsonl(WFGY_TRACE)}
    for edit in edits:
        edit(rows)
    run = replay(write_jsonl(tmp_path / "trace.jsonl", list(rows.values())))
    want = {k: round(v, 4) for k, v in {**expected, **also}.items()}
    assert {k: run.metrics[k] for k in want} == want
    assert run.metrics["error_rate"] == 0.0


def test_short_gold_claims_do_not_count(tmp_path):
    """WFGY: gold claim substrings shorter than 5 characters are ignored (A0001 then has none usable)."""
    gold = read_jsonl(WFGY_GOLD)
    gold[0]["gold_claim_substr"] = ["null"]
    run = replay(WFGY_TRACE, golden=write_jsonl(tmp_path / "gold.jsonl", gold))
    assert run.per_query.loc["A0001", "answer_precision"] == 0.0
    assert run.per_query.loc["A0001", "chr"] == 1.0
    assert run.metrics["answer_precision"] == 0.5


# ---------------------------------------------------------------------------------------------
# 3. queries missing from the trace, unknown queries, duplicates
# ---------------------------------------------------------------------------------------------


def test_missing_unknown_and_duplicate_queries(tmp_path):
    sample = {r["qid"]: r for r in read_jsonl(WFGY_TRACE)}
    stale = {**sample["A0001"], "answer_json": {"claim": "X allows null keys.", "citations": ["p2#1"]}}
    unknown = {"qid": "Z9999", "q": "?", "retrieved_ids": ["p1#1"], "answer_json": {"claim": "x"}}
    trace = write_jsonl(tmp_path / "trace.jsonl", [stale, sample["A0003"], unknown, sample["A0001"]])
    run = replay(trace)

    out = run.outcomes
    assert out.index.tolist() == ["A0001", "A0002", "A0003"]  # a row per golden query, in golden order
    assert out.loc["A0002", "error_class"] == "missing_in_trace"
    assert out.loc["A0002", "error"] == "missing_in_trace: trace.jsonl has no record of this query"
    assert out.loc["A0002", "n_hits"] == 0 and out.loc["A0002", "attempts"] == 0
    assert not out.loc["A0002", "answered"]
    assert out["error_class"].isna().sum() == 2
    assert run.retrieval.info["error_classes"] == {"missing_in_trace": 1}
    assert run.metrics["n_queries"] == 3
    assert run.metrics["error_rate"] == round(1 / 3, 4)
    # the only unanswerable query failed: its refusal metrics have no denominator (null, not 0 or 1)
    assert run.metrics["refusal_correctness"] is None and run.metrics["under_refusal_rate"] is None
    # the last A0001 record won (the stale first one would fail containment and citation)
    assert out.loc["A0001", "answer_text"] == "X rejects null keys."
    assert run.metrics["answer_precision"] == 1.0 and run.metrics["chr"] == 1.0
    assert "Z9999" not in set(run.retrieval.results.hits["query_id"])

    warnings = run.retrieval.results.warnings
    assert warnings == run.retrieval.info["adapter_warnings"]
    assert len(warnings) == 2
    assert any("A0001: recorded more than once (line 1, line 4); kept the last" in w for w in warnings)
    assert any("the trace has 1 query not in the golden set (ignored): Z9999" in w for w in warnings)


def test_many_unknown_queries_are_summarised(tmp_path):
    rows = read_jsonl(WFGY_TRACE) + [{"qid": f"X{i}", "retrieved_ids": []} for i in range(7)]
    run = replay(write_jsonl(tmp_path / "trace.jsonl", rows))
    (warning,) = run.retrieval.results.warnings
    assert warning.endswith("the trace has 7 queries not in the golden set (ignored): X0, X1, X2, X3, X4, …")
    assert run.metrics["error_rate"] == 0.0


def test_empty_trace_leaves_every_query_missing(tmp_path):
    run = replay(write_jsonl(tmp_path / "trace.jsonl", []), system={"format": "wfgy"})
    assert run.outcomes["error_class"].tolist() == ["missing_in_trace"] * 3
    assert run.metrics["error_rate"] == 1.0
    assert run.metrics["answer_precision"] is None and run.metrics["mrr"] == 0.0


# ---------------------------------------------------------------------------------------------
# 4. kebab per_query.jsonl
# ---------------------------------------------------------------------------------------------

KEBAB_GOLD = [
    {"qid": f"Q{i}", "question": f"question {i}?", "answerable": True, "gold_citations": [f"c{i}"]}
    for i in range(1, 7)
]


def kebab_hit(rank: int, chunk_id: str, **extra) -> dict:
    """A hit as kebab prints it: search_hit.v1 with nested citation and retrieval objects."""
    return {
        "schema_version": "search_hit.v1",
        "rank": rank,
        "chunk_id": chunk_id,
        "doc_id": f"doc-{chunk_id}",
        "heading_path": "Guide > Install",
        "section_label": None,
        "snippet": f"text of {chunk_id}",
        "citation": {"kind": "line", "path": f"docs/{chunk_id}.md", "start": 3, "end": 9, "section": None},
        "retrieval": {
            "method": "hybrid",
            "fusion_score": 0.75,
            "lexical_score": 4.5,
            "vector_score": 0.6,
            "lexical_rank": 2,
            "vector_rank": 1,
        },
        "index_version": "idx-7",
        "embedding_model": "minilm",
        "chunker_version": "md-2",
        "indexed_at": "2026-05-10T12:00:00Z",
        "stale": False,
        **extra,
    }


KEBAB_TRACE = [
    {  # hits with kebab's nesting, an answer object, latency as a number (+ answer_ms)
        "query_id": "Q1",
        "hits": [kebab_hit(1, "c1"), kebab_hit(2, "x1")],
        "answer": {
            "text": "Install it with -j [#1].",
            "citations": [
                {"chunk_id": "c1", "marker": 1, "citation": {"path": "docs/c1.md", "start": 3, "end": 9}}
            ],
            "grounded": True,
            "prompt_template_version": "rag-v2",
            "model": "qwen2.5:7b",
            "usage": {"prompt_tokens": 812, "completion_tokens": 41},
        },
        "latency_ms": 12.5,
        "answer_ms": 30,
        "error": None,
        "timed_out": False,
    },
    {  # "id" for the query id, hits_top_k, latency as {retrieval, answer}, a refusal
        "id": "Q2",
        "hits_top_k": [kebab_hit(1, "x2")],
        "answer": {"text": "", "refused": True, "refusal_reason": "weak evidence", "grounded": False},
        "latency_ms": {"retrieval": 3, "answer": 40},
    },
    {  # a recorded error naming a known class: the class is kept; the hits it lists are not scored
        "query_id": "Q3",
        "hits": [kebab_hit(1, "c3")],
        "answer": None,
        "latency_ms": {"retrieval": 30000},
        "error": "timeout: slow",
    },
    {"query_id": "Q4", "hits": [], "error": "ranker crashed: segfault", "timed_out": True},
    {"query_id": "Q5", "hits": [], "error": {"class": "http_5xx", "message": "502 bad gateway"}},
    {  # an answer as a bare string; more hits than k (chunk-id strings)
        "query_id": "Q6",
        "hits": ["c6", *[f"y{i}" for i in range(11)]],
        "answer": "Only c6 says so.",
        "retrieval_ms": 4,
    },
]


@pytest.fixture(scope="module")
def kebab_run(tmp_path_factory) -> Scored:
    folder = tmp_path_factory.mktemp("kebab-trace")
    gold = write_jsonl(folder / "gold.jsonl", KEBAB_GOLD)
    trace = write_jsonl(folder / "per_query.jsonl", KEBAB_TRACE)
    assert detect_format(trace, trace.read_text()) == "kebab"
    return replay(trace, golden=gold)


def test_kebab_hits_with_nested_retrieval_and_citation(kebab_run):
    hits = kebab_run.hits("Q1")
    assert hits["chunk_id"].tolist() == ["c1", "x1"] and hits["rank"].tolist() == [1, 2]
    first = hits.iloc[0]
    assert first["doc_id"] == "doc-c1" and first["doc_path"] == "docs/c1.md"
    assert (first["line_start"], first["line_end"]) == (3, 9)
    assert list(first["heading_path"]) == ["Guide", "Install"]
    assert first["snippet"] == "text of c1"
    assert (first["score"], first["score_kind"]) == (0.75, "rrf")
    assert (first["lexical_score"], first["vector_score"]) == (4.5, 0.6)
    assert (first["lexical_rank"], first["vector_rank"]) == (2, 1)
    assert (first["index_version"], first["embedding_model"], first["chunker_version"]) == (
        "idx-7",
        "minilm",
        "md-2",
    )
    assert kebab_run.hits("Q2")["chunk_id"].tolist() == ["x2"]  # hits_top_k
    # versions reported on every hit complete the run's system info
    system = kebab_run.retrieval.results.system
    assert (system.index_version, system.embedding_model, system.chunker_version) == (
        "idx-7",
        "minilm",
        "md-2",
    )
    assert system.prompt_template_version == "rag-v2" and system.details["answer_model"] == "qwen2.5:7b"
    assert system.details["trace_format"] == "kebab"


def test_kebab_answers(kebab_run):
    out = kebab_run.outcomes
    q1 = out.loc["Q1"]
    assert q1["answered"] and q1["answer_text"] == "Install it with -j [#1]."
    assert not q1["refused"] and q1["grounded"]
    assert (q1["prompt_template_version"], q1["model"]) == ("rag-v2", "qwen2.5:7b")
    assert (q1["prompt_tokens"], q1["completion_tokens"]) == (812, 41)
    cites = kebab_run.retrieval.results.citations
    assert cites[cites["query_id"] == "Q1"][
        ["chunk_id", "doc_path", "line_start", "line_end", "marker"]
    ].values.tolist() == [["c1", "docs/c1.md", 3, 9, "[#1]"]]
    q2 = out.loc["Q2"]
    assert q2["refused"] and not q2["grounded"] and q2["refusal_reason"] == "weak evidence"
    q6 = out.loc["Q6"]
    assert q6["answered"] and q6["answer_text"] == "Only c6 says so." and not q6["refused"]
    m = kebab_run.metrics
    # answers over the three error-free queries: Q1 and Q6 shipped, Q2 refused (over-refusal 1/3)
    assert m["over_refusal_rate"] == round(1 / 3, 4)
    assert m["chr"] == 0.5  # Q1 cites gold c1 among its hits; Q6 cites nothing
    assert m["answer_precision"] == 0.5  # no claim substrings: containment holds; Q1 hits gold


def test_kebab_latencies(kebab_run):
    out = kebab_run.outcomes
    assert (out.loc["Q1", "retrieval_ms"], out.loc["Q1", "answer_ms"]) == (12.5, 30.0)
    assert (out.loc["Q2", "retrieval_ms"], out.loc["Q2", "answer_ms"]) == (3.0, 40.0)
    assert out.loc["Q3", "retrieval_ms"] == 30000.0 and pd.isna(out.loc["Q3", "answer_ms"])
    assert pd.isna(out.loc["Q4", "retrieval_ms"])
    assert out.loc["Q6", "retrieval_ms"] == 4.0
    assert kebab_run.metrics["retrieval_ms_max"] == 30000.0
    assert kebab_run.metrics["answer_ms_max"] == 40.0


def test_kebab_recorded_errors_keep_known_classes(kebab_run):
    out = kebab_run.outcomes
    assert out.loc["Q3", "error_class"] == "timeout" and out.loc["Q3", "error"] == "timeout: slow"
    assert out.loc["Q3", "timed_out"]  # a timeout is a timeout even when timed_out was not recorded
    # a failed query is an error row as a live one is: its recorded hit (gold c3 at rank 1) is
    # neither stored nor scored, so the query scores 0 (it scored 1.0 from its hits before)
    assert kebab_run.hits("Q3").empty and out.loc["Q3", "n_hits"] == 0
    assert kebab_run.per_query.loc["Q3", "mrr"] == 0.0 and kebab_run.per_query.loc["Q3", "hit@1"] == 0.0
    assert not out.loc["Q3", "answered"]
    assert out.loc["Q4", "error_class"] == "recorded_error"
    assert out.loc["Q4", "error"] == "recorded_error: ranker crashed: segfault"
    assert out.loc["Q4", "timed_out"]  # recorded timed_out
    assert (
        out.loc["Q5", "error_class"] == "http_5xx" and out.loc["Q5", "error"] == "http_5xx: 502 bad gateway"
    )
    assert not out.loc["Q5", "timed_out"]
    assert out["error_class"].isna().tolist() == [True, True, False, False, False, True]
    assert kebab_run.retrieval.info["error_classes"] == {"timeout": 1, "recorded_error": 1, "http_5xx": 1}
    assert kebab_run.metrics["error_rate"] == 0.5
    assert kebab_run.metrics["timeout_rate"] == round(2 / 6, 4)


def test_kebab_hits_beyond_k_are_cut_with_a_warning(kebab_run):
    k = kebab_run.retrieval.info["k_requested"]
    assert k == 10
    assert kebab_run.hits("Q6")["chunk_id"].tolist() == ["c6", *[f"y{i}" for i in range(9)]]
    assert kebab_run.retrieval.results.warnings == [
        "Q3: the trace records this query as failed; 1 recorded hit not scored "
        "(a failed query scores 0, as in a live run)",
        "Q6: returned 12 hits for k=10; kept the first 10",
    ]


def test_kebab_without_answers(tmp_path):
    gold = write_jsonl(tmp_path / "gold.jsonl", KEBAB_GOLD)
    run = replay(write_jsonl(tmp_path / "per_query.jsonl", KEBAB_TRACE), golden=gold, answers=False)
    assert not run.outcomes["answered"].any()
    assert len(run.retrieval.results.citations) == 0
    assert run.metrics["chr"] is None and run.metrics["over_refusal_rate"] is None
    assert run.metrics["error_rate"] == 0.5  # recorded errors stay errors


def test_unreadable_hits_or_answer_fail_only_that_query(tmp_path):
    gold = write_jsonl(tmp_path / "gold.jsonl", KEBAB_GOLD[:3])
    trace = write_jsonl(
        tmp_path / "per_query.jsonl",
        [
            {"query_id": "Q1", "hits": [{"chunk_id": "c1", "rank": "first"}]},
            {"query_id": "Q2", "hits": ["c2"], "answer": {"text": "t", "citations": "c2"}},
            {"query_id": "Q3", "hits": ["c3"], "answer": {"text": "fine", "citations": ["c3"]}},
        ],
    )
    run = replay(trace, golden=gold)
    out = run.outcomes
    assert out.loc["Q1", "error"] == "bad_response: hits[0].rank: expected a number, got 'first'"
    assert out.loc["Q2", "error"] == "bad_response: answer.citations: expected a list, got str"
    assert run.hits("Q2")["chunk_id"].tolist() == ["c2"]  # read before the answer failed
    assert pd.isna(out.loc["Q3", "error"]) and run.per_query.loc["Q3", "answer_precision"] == 1.0


# ---------------------------------------------------------------------------------------------
# 5. round trip through this project's own export
# ---------------------------------------------------------------------------------------------

EXPORTED_VERSIONS = ("chunker_version", "index_version", "parser_version")


def test_export_round_trip(instance, tmp_path, demo_index_dir):
    ref_cfg = write_config(
        tmp_path / "ref.yaml", {"kind": "reference", "index": str(demo_index_dir)}, golden=None, answers=True
    )
    result, store = run_config(instance, ref_cfg, "ref-1")
    assert result.success
    exported = export_json(store, "ref-1")
    path = tmp_path / "ref-1.json"
    path.write_text(json.dumps(exported), encoding="utf-8")
    assert detect_format(path, path.read_text()) == "export"

    rep_cfg = write_config(
        tmp_path / "rep.yaml", {"kind": "replay", "path": str(path), "format": "export"}, golden=None
    )
    result, store = run_config(instance, rep_cfg, "rep-1")
    assert result.success

    original, replayed = stored_metrics(store, "ref-1"), stored_metrics(store, "rep-1")
    assert original.metrics["answer_precision"] is not None  # answers were on and scored
    assert timing_free(replayed.metrics) == timing_free(original.metrics)
    assert replayed.info["versions"] == original.info["versions"]
    for name in EXPORTED_VERSIONS:
        assert replayed.info["versions"][name] == exported["versions"][name] is not None
    system = replayed.info["system"]
    assert system["kind"] == "replay" and system["mode"] == "lexical"
    assert system["reported_exported_run_id"] == "ref-1" and system["trace_format"] == "export"

    # per query: the same hits, answers and scores (latencies aside)
    def frame(run_id: str, asset: str, table: str) -> pd.DataFrame:
        f = store.read(asset, run_id)[0][table]
        return f.drop(columns=[c for c in f.columns if c.endswith("_ms") or c == "attempts"])

    pd.testing.assert_frame_equal(
        frame("rep-1", "retrieval_results", "hits"), frame("ref-1", "retrieval_results", "hits")
    )
    pd.testing.assert_frame_equal(
        frame("rep-1", "retrieval_results", "citations"), frame("ref-1", "retrieval_results", "citations")
    )
    pd.testing.assert_frame_equal(
        frame("rep-1", "query_scores", "query_scores"), frame("ref-1", "query_scores", "query_scores")
    )

    # format auto reads the same document the same way
    auto = Scored({"system": {"kind": "replay", "path": str(path)}})
    assert auto.retrieval.results.system.details["trace_format"] == "export"
    assert timing_free(auto.metrics) == timing_free(original.metrics)


# ---------------------------------------------------------------------------------------------
# 6. traces that cannot be read
# ---------------------------------------------------------------------------------------------


def _replay_settings(path: Path, fmt: str = "auto"):
    return settings_from_dict(
        {"golden": str(WFGY_GOLD), "system": {"kind": "replay", "path": str(path), "format": fmt}}
    )


def test_every_bad_wfgy_line_is_listed(tmp_path):
    good = read_jsonl(WFGY_TRACE)
    trace = write_jsonl(
        tmp_path / "trace.jsonl",
        [
            good[0],
            '{"qid": "A0002", "retrieved_ids": [',  # line 2: not JSON
            {"q": "no id here", "retrieved_ids": []},  # line 3: no qid
            {"qid": "A0003", "retrieved_ids": "pB#1"},  # line 4: not a list
            "",  # blank lines are skipped (and still counted)
            [1, 2],  # line 6: not an object
            {"qid": "A0003", "retrieved_ids": ["a", 3]},  # line 7: not id strings
            {"qid": "A0003", "answer_json": "not in context"},  # line 8: not an object
            '{"qid": "A0003", "retrieved_ids": [' + "7" * 5000 + "]}",  # line 9: beyond Python's int limit
            "[" * 100_000,  # line 10: nested past the recursion limit
            good[2],
        ],
    )
    with pytest.raises(InputError) as info:
        build_system(_replay_settings(trace))
    exc = info.value
    assert exc.summary == "replay trace trace.jsonl (wfgy) cannot be read"
    assert all(o.file == str(trace) for o in exc.offenders)
    where = [(o.position, o.query_id, o.reason) for o in exc.offenders]
    assert [w[0].split(",")[0] for w in where] == [f"line {n}" for n in (2, 9, 10, 3, 4, 6, 7, 8)]
    assert where[0][0].startswith("line 2, column ") and where[0][2].startswith("not JSON: ")
    assert where[1][2].startswith("not JSON: Exceeds the limit (4300 digits)")
    assert where[2][2].startswith("not JSON: maximum recursion depth exceeded")
    assert where[3:] == [
        ("line 3", None, "no qid / q_id"),
        ("line 4", "A0003", "retrieved_ids: expected a list of id strings"),
        ("line 6", None, "expected an object with qid / q_id"),
        ("line 7", "A0003", "retrieved_ids: expected a list of id strings"),
        ("line 8", "A0003", "answer_json: expected an object"),
    ]
    text = str(exc)
    for n in (2, 3, 4, 6, 7, 8, 9, 10):
        assert f"{trace}:line {n}" in text


def test_every_bad_kebab_line_is_listed(tmp_path):
    trace = write_jsonl(
        tmp_path / "per_query.jsonl",
        [
            {"query_id": "A0001", "hits": []},
            {"query_id": "A0002", "hits": {"0": "p1#1"}},
            {"query_id": "A0003", "answer": 5},
            {"query_id": "A0003", "error": ["boom"]},
            {"query_id": "", "hits": []},
            {"query_id": True, "hits": []},
        ],
    )
    with pytest.raises(InputError) as info:
        build_system(_replay_settings(trace, "kebab"))
    assert [(o.position, o.query_id, o.reason) for o in info.value.offenders] == [
        ("line 2", "A0002", "hits: expected a list"),
        ("line 3", "A0003", "answer: expected an object, a string or null"),
        ("line 4", "A0003", "error: expected a string, an object or null"),
        ("line 5", None, "no query_id / id / qid"),
        ("line 6", None, "no query_id / id / qid"),
    ]


def test_bad_trace_cli_exits_2_listing_every_line(tmp_path, monkeypatch, capsys):
    """``kebab-eval run`` (the console script's entry, in-process): exit 2, every offender, no traceback."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.delenv("KEBAB_EVAL_STORAGE", raising=False)
    rows = read_jsonl(WFGY_TRACE)
    trace = write_jsonl(tmp_path / "trace.jsonl", [rows[0], "{oops", {"qid": "A0002", "retrieved_ids": 5}])
    cfg = write_config(tmp_path / "cfg.yaml", {"kind": "replay", "path": str(trace)})
    monkeypatch.setattr("sys.argv", ["kebab-eval", "run", "--config", str(cfg), "--run-id", "bad-1"])
    with pytest.raises(SystemExit) as exit_info:
        cli_main()
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out, captured.err
    assert captured.err.startswith("error: replay trace trace.jsonl (wfgy) cannot be read (2 problems):")
    flat = " ".join(captured.err.split())  # the console wraps long lines
    assert "line 2, column 2: not JSON: " in flat
    assert "line 3 — query 'A0002': retrieved_ids: expected a list of id strings" in flat
    assert not (home / "kebab-eval" / "artifacts" / "golden_set").exists()  # no run was started


def test_missing_trace_file(tmp_path):
    missing = tmp_path / "nope.jsonl"
    with pytest.raises(InputError) as info:
        build_system(_replay_settings(missing))
    assert info.value.summary == "replay trace not found"
    (offender,) = info.value.offenders
    assert (offender.file, offender.field, offender.reason) == (str(missing), "system.path", "no such file")


@pytest.mark.parametrize(
    "text",
    ['{"foo": 1}\n', "\n\n", "not json at all\n", '["a", "b"]\n', '{"per_query": 3}'],
    ids=["unknown-keys", "blank", "not-json", "not-an-object", "export-without-list"],
)
def test_undetectable_format_asks_for_system_format(tmp_path, text):
    path = tmp_path / "trace.jsonl"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as info:
        build_system(_replay_settings(path))
    assert info.value.summary == "unknown replay trace format"
    (offender,) = info.value.offenders
    assert offender.field == "system.format" and "set system.format" in offender.reason


def test_forced_export_format_on_other_files(tmp_path):
    with pytest.raises(InputError) as info:
        build_system(_replay_settings(WFGY_TRACE, "export"))
    assert info.value.summary == "replay trace is not JSON"
    assert info.value.offenders[0].position == "line 2, column 1"
    doc = tmp_path / "doc.json"
    doc.write_text('{"run_id": "x"}', encoding="utf-8")
    with pytest.raises(InputError) as info:
        build_system(_replay_settings(doc, "export"))
    assert info.value.summary == "not a kebab-eval export"


def test_forced_format_reads_ids_of_that_format(tmp_path):
    """A WFGY trace forced as kebab has no hits / answer keys: it replays as empty results, by id."""
    run = replay(WFGY_TRACE, system={"format": "kebab"})
    assert run.retrieval.results.system.details["trace_format"] == "kebab"
    assert run.outcomes["n_hits"].tolist() == [0, 0, 0]
    assert run.outcomes["error"].isna().all()
    assert run.metrics["empty_result_rate"] == 1.0


def test_recorded_scopes_give_scope_miss_rate_and_survive_the_export(tmp_path):
    """Folder-scoped searches: kebab records the folders it searched as ``scope``."""
    gold = [
        {"id": "in", "question": "q?", "gold_supports": [{"rel_path": "work/plan.md"}]},
        {"id": "out", "question": "q?", "gold_supports": [{"rel_path": "work/plan.md"}]},
        {"id": "unscoped", "question": "q?", "gold_supports": [{"rel_path": "work/plan.md"}]},
    ]
    trace = [
        {"query_id": "in", "hits": [], "scope": ["work", "home"]},
        {"query_id": "out", "hits": [], "scope": "home"},  # one folder as a string
        {"query_id": "unscoped", "hits": []},
    ]
    run = replay(
        write_jsonl(tmp_path / "trace.jsonl", trace),
        golden=write_jsonl(tmp_path / "gold.jsonl", gold),
    )
    assert run.outcomes["scope"].tolist() == [["work", "home"], ["home"], None]
    assert run.per_query["scope_miss"].tolist()[:2] == [0.0, 1.0]
    assert pd.isna(run.per_query.loc["unscoped", "scope_miss"])
    assert run.metrics["scope_miss_rate"] == 0.5

    bad = replay_error(tmp_path, [{"query_id": "in", "hits": [], "scope": [1, 2]}], gold)
    assert "scope: expected a folder or a list of folders" in bad


def replay_error(tmp_path: Path, trace: list, gold: list) -> str:
    with pytest.raises(InputError) as info:
        replay(
            write_jsonl(tmp_path / "bad.jsonl", trace),
            golden=write_jsonl(tmp_path / "gold2.jsonl", gold),
        )
    return str(info.value.render() if hasattr(info.value, "render") else info.value)


# ---------------------------------------------------------------------------------------------
# a trace recorded in a framework's own shape, read through system.response
# ---------------------------------------------------------------------------------------------


def test_replay_reads_framework_shaped_hits_and_answers_through_the_mapping(tmp_path):
    from kebab_eval_pipeline.systems.outcome import QueryRequest

    hay = {"id": "h1", "content": "### Windows\n", "file_path": "/srv/corpus/guide/install.md", "score": 2.5}
    trace = write_jsonl(
        tmp_path / "trace.jsonl",
        [
            {
                "query_id": "q1",
                "hits": [{**hay, "parent_headers": ["Install", "From source"], "header": "Windows"}],
                "answer": {"reply": "Use WSL.", "docs": [{"id": "h1"}]},
            },
            {"query_id": "q2", "hits": [{**hay, "parent_headers": "Install"}]},
        ],
    )
    response = {
        "hit_fields": {
            "chunk_id": "id",
            "doc_path": {"path": "file_path", "relative_to": "/srv/corpus"},
            "heading_path": {"concat": ["parent_headers", "header"]},
            "snippet": "content",
            "score_kind": {"const": "bm25"},
        },
        "answer_fields": {"text": "reply", "citations": "docs"},
        "citation_fields": {"chunk_id": "id"},
    }
    settings = settings_from_dict(
        {"golden": str(WFGY_GOLD), "system": {"kind": "replay", "path": str(trace), "response": response}}
    )
    q1, q2 = build_system(settings).run_queries([QueryRequest("q1", "x"), QueryRequest("q2", "y")], 10, True)
    (hit,) = q1.hits
    assert (hit.chunk_id, hit.doc_path, hit.heading_path, hit.snippet, hit.score, hit.score_kind) == (
        "h1",
        "guide/install.md",
        ["Install", "From source", "Windows"],
        "### Windows\n",
        2.5,
        "bm25",
    )
    assert (q1.answer.text, [c.chunk_id for c in q1.answer.citations]) == ("Use WSL.", ["h1"])
    assert q2.hits[0].heading_path == ["Install"] and q2.error_class is None  # a string part is appended
    with pytest.raises(InputError) as info:
        settings_from_dict({"system": {"kind": "replay", "path": "t.jsonl", "response": {"hits": "docs"}}})
    assert "hits: a trace line keeps them under its own keys" in str(info.value)
