"""Versions a system reports while it runs, and where they disagree (``systems/versions.py``).

Unit tests for ``reported_versions`` / ``with_reported_versions`` / ``apply_version_report``, then
the runner and the metrics with a test double of a system under test whose hits report two index
versions and whose answers report two prompt templates, and the same recorded results replayed
through a real Dagster run.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
import yaml

from kebab_eval_pipeline.chain import pipeline
from kebab_eval_pipeline.chain.artifacts import RetrievalArtifact
from kebab_eval_pipeline.chain.settings import settings_from_dict
from kebab_eval_pipeline.contract import Hit, SystemInfo
from kebab_eval_pipeline.golden.tables import typed_frame
from kebab_eval_pipeline.systems.base import HIT_COLUMNS, OUTCOME_COLUMNS
from kebab_eval_pipeline.systems.outcome import Progress, QueryOutcome, QueryRequest
from kebab_eval_pipeline.systems.runner import run_golden
from kebab_eval_pipeline.systems.versions import (
    apply_version_report,
    mixed_versions,
    reported_versions,
    with_reported_versions,
)
from kebab_eval_pipeline.systems.wire import parse_answer
from tests.systems.adapters.conftest import run_config, stored_metrics

WFGY_GOLD = Path(__file__).parent / "data" / "wfgy_gold.jsonl"


def hits_frame(rows: list[dict]) -> object:
    return typed_frame([{"query_id": "q", "rank": i + 1, **r} for i, r in enumerate(rows)], HIT_COLUMNS)


def outcomes_frame(rows: list[dict]) -> object:
    base = {"n_hits": 0, "timed_out": False, "answered": True}
    return typed_frame([{"query_id": f"q{i}", **base, **r} for i, r in enumerate(rows)], OUTCOME_COLUMNS)


# ---------------------------------------------------------------------------------------------
# reported_versions
# ---------------------------------------------------------------------------------------------


def test_reported_versions_counts_hits_and_answers():
    hits = hits_frame(
        [
            {"index_version": "v1", "chunker_version": "c1"},
            {"index_version": "v2", "chunker_version": "c1"},
            {"index_version": "v1"},
            {"index_version": "v0"},
            {"index_version": "v2"},
            {"index_version": "v1", "embedding_model": None},
        ]
    )
    outcomes = outcomes_frame(
        [
            {"prompt_template_version": "rag-v2", "model": "m"},
            {"prompt_template_version": "rag-v1"},
            {"prompt_template_version": "rag-v2"},
            {},
        ]
    )
    versions = reported_versions(hits, outcomes)
    assert versions == {
        "index_version": {"v1": 3, "v2": 2, "v0": 1},
        "chunker_version": {"c1": 2},
        "prompt_template_version": {"rag-v2": 2, "rag-v1": 1},
        "model": {"m": 1},
    }
    # descending count, then value
    assert list(versions["index_version"]) == ["v1", "v2", "v0"]
    assert "embedding_model" not in versions  # nobody reported it


def test_reported_versions_ties_break_by_value_and_empty_tables_report_nothing():
    hits = hits_frame([{"index_version": v} for v in ("b", "a", "c", "a", "b")])
    assert list(reported_versions(hits, outcomes_frame([]))["index_version"].items()) == [
        ("a", 2),
        ("b", 2),
        ("c", 1),
    ]
    assert reported_versions(hits_frame([]), outcomes_frame([])) == {}
    assert reported_versions(hits_frame([{}]), outcomes_frame([{}])) == {}
    # frames without the version columns (e.g. runs stored before they existed)
    assert reported_versions(hits_frame([]).drop(columns=["index_version"]), outcomes_frame([])) == {}


# ---------------------------------------------------------------------------------------------
# with_reported_versions / mixed_versions
# ---------------------------------------------------------------------------------------------


def test_unknown_versions_take_the_most_common_reported_value():
    info = SystemInfo(kind="command", details={"argv": "kebab search"})
    out = with_reported_versions(
        info,
        {
            "index_version": {"v1": 1},
            "embedding_model": {"minilm": 4},
            "chunker_version": {"md-2": 3},
            "prompt_template_version": {"rag-v2": 2},
            "model": {"qwen": 2},
        },
    )
    assert (out.index_version, out.embedding_model, out.chunker_version, out.prompt_template_version) == (
        "v1",
        "minilm",
        "md-2",
        "rag-v2",
    )
    assert out.details == {"argv": "kebab search", "answer_model": "qwen"}  # the generator, not embeddings
    assert mixed_versions(out) == {}
    assert info.index_version is None and info.details == {"argv": "kebab search"}  # not mutated


def test_disagreements_are_named_with_counts():
    out = with_reported_versions(
        SystemInfo(kind="command"),
        {
            "index_version": {"v1": 4, "v2": 3},
            "prompt_template_version": {"rag-v1": 2, "rag-v2": 1},
            "model": {"a": 1, "b": 1},
        },
    )
    assert out.index_version == "v1" and out.prompt_template_version == "rag-v1"
    assert out.details["answer_model"] == "a"
    assert mixed_versions(out) == {
        "mixed_index_version": "v1 (4), v2 (3)",
        "mixed_prompt_template_version": "rag-v1 (2), rag-v2 (1)",
        "mixed_model": "a (1), b (1)",
    }


def test_a_system_value_differing_from_its_hits_is_named():
    info = SystemInfo(kind="http", index_version="v0", details={"answer_model": "m0"})
    # one reported value, not the system's own
    out = with_reported_versions(info, {"index_version": {"v1": 5}, "model": {"m0": 2}})
    assert out.index_version == "v0"  # the system's own report is kept ...
    assert mixed_versions(out) == {"mixed_index_version": "v0 (system), v1 (5)"}  # ... and the clash named
    # several reported values, none of them the system's
    out = with_reported_versions(info, {"index_version": {"v1": 5, "v2": 1}})
    assert out.index_version == "v0"
    assert mixed_versions(out) == {"mixed_index_version": "v0 (system), v1 (5), v2 (1)"}
    # the system's value among several reported ones: named with its count
    out = with_reported_versions(info, {"index_version": {"v1": 5, "v0": 1}})
    assert mixed_versions(out) == {"mixed_index_version": "v1 (5), v0 (1)"}
    # agreement: nothing to name
    assert mixed_versions(with_reported_versions(info, {"index_version": {"v0": 7}})) == {}
    assert with_reported_versions(info, {}) == info


# ---------------------------------------------------------------------------------------------
# apply_version_report
# ---------------------------------------------------------------------------------------------


def test_version_report_as_a_json_object():
    info = SystemInfo(kind="http", details={"search_url": "http://127.0.0.1:1/search"})
    out = apply_version_report(
        info,
        {
            "index_version": "idx-9",
            "chunker_version": 3,
            "embedding_model": "minilm",
            "mode": "hybrid",
            "build": "abc123",
            "long": "x" * 500,
            "nested": {"a": 1},
            "list": [1, 2],
            "absent": None,
            "kind": "not-a-kind-change",
        },
    )
    assert (out.kind, out.index_version, out.chunker_version, out.embedding_model, out.mode) == (
        "http",
        "idx-9",
        "3",
        "minilm",
        "hybrid",
    )
    assert out.details == {
        "search_url": "http://127.0.0.1:1/search",
        "reported_build": "abc123",
        "reported_long": "x" * 200,
        "reported_kind": "not-a-kind-change",
    }
    # a mode the adapter already knows is not overwritten: the report is kept beside it
    known = apply_version_report(SystemInfo(kind="http", mode="lexical"), {"mode": "hybrid"})
    assert known.mode == "lexical" and known.details == {"reported_mode": "hybrid"}


def test_version_report_as_plain_text():
    out = apply_version_report(SystemInfo(kind="command"), "  kebab 0.9.1 (abc123)\nbuilt 2026-05-10\n")
    assert out.details == {"reported_version": "kebab 0.9.1 (abc123)"}
    assert apply_version_report(SystemInfo(kind="command"), "v" * 300).details == {
        "reported_version": "v" * 200
    }
    assert apply_version_report(SystemInfo(kind="command"), "  \n ").details == {}


@pytest.mark.parametrize("junk", [None, 42, 3.5, True, [1, "v2"], ["index_version", "x"]])
def test_version_report_junk_is_ignored(junk):
    info = SystemInfo(kind="command", index_version="v1", details={"a": "b"})
    assert apply_version_report(info, junk) == info


# ---------------------------------------------------------------------------------------------
# through the runner and the metrics: a system under test whose versions do not hold still
# ---------------------------------------------------------------------------------------------

# Hit versions per query: index v1 ×4, v2 ×3; chunker md-2 ×6, md-3 ×1 (on a hit already off in
# its index version); embedding model reported once. The run's most common values are v1 / md-2,
# so three hits disagree: A0002's p2#1 and both of A0003's.
HITS = {
    "A0001": [("p1#1", "v1", "md-2", "minilm"), ("p1#2", "v1", "md-2", None), ("p2#1", "v1", "md-2", None)],
    "A0002": [("p1#1", "v1", "md-2", None), ("p2#1", "v2", "md-2", None)],
    "A0003": [("pB#1", "v2", "md-3", None), ("p1#2", "v2", "md-2", None)],
}
ANSWERS = {
    "A0001": {"text": "X rejects null keys.", "citations": ["p1#2"], "prompt_template_version": "rag-v1"},
    "A0002": {"text": "not in context", "prompt_template_version": "rag-v1"},
    "A0003": {"text": "Only domain example.com.", "citations": ["pB#1"], "prompt_template_version": "rag-v2"},
}
MIXED = {
    "mixed_index_version": "v1 (4), v2 (3)",
    "mixed_chunker_version": "md-2 (6), md-3 (1)",
    "mixed_prompt_template_version": "rag-v1 (2), rag-v2 (1)",
}


def raw_hits(query_id: str) -> list[dict]:
    return [
        {"chunk_id": c, "index_version": iv, "chunker_version": cv, "embedding_model": em}
        for c, iv, cv, em in HITS[query_id]
    ]


class DriftingSystem:
    """A test double of a system under test, in-process: its index was rebuilt mid-run."""

    def __init__(self, info: SystemInfo | None = None) -> None:
        self._info = info or SystemInfo(kind="drifting", mode="hybrid")

    def info(self) -> SystemInfo:
        return self._info

    def run_queries(
        self, requests: Sequence[QueryRequest], k: int, answers: bool, progress: Progress | None = None
    ) -> list[QueryOutcome]:
        out = []
        for r in requests:
            hits = [Hit(rank=i + 1, **h) for i, h in enumerate(raw_hits(r.query_id))][:k]
            answer = parse_answer(ANSWERS[r.query_id]) if answers else None
            out.append(QueryOutcome(query_id=r.query_id, hits=hits, answer=answer, attempts=1))
        return out

    def known_chunk_ids(self) -> None:
        return None

    def catalogue(self) -> None:
        return None


def scored(system) -> tuple[RetrievalArtifact, dict, object]:
    settings = settings_from_dict({"golden": str(WFGY_GOLD), "answers": True})
    golden = pipeline.load_golden_artifact(settings)
    results = run_golden(system, golden.queries, k=10, answers=True)
    retrieval = RetrievalArtifact(results, {"versions_reported": results.versions_reported})
    scores = pipeline.score(settings, golden, retrieval)
    return retrieval, pipeline.summarize("drift", settings, golden, retrieval, scores).metrics, scores


def test_mixed_versions_through_the_runner_and_metrics():
    retrieval, metrics, scores = scored(DriftingSystem())
    r = retrieval.results
    assert r.versions_reported == {
        "index_version": {"v1": 4, "v2": 3},
        "embedding_model": {"minilm": 1},
        "chunker_version": {"md-2": 6, "md-3": 1},
        "prompt_template_version": {"rag-v1": 2, "rag-v2": 1},
    }
    assert (r.system.kind, r.system.mode) == ("drifting", "hybrid")
    assert (r.system.index_version, r.system.chunker_version, r.system.embedding_model) == (
        "v1",
        "md-2",
        "minilm",
    )
    assert r.system.prompt_template_version == "rag-v1"
    assert mixed_versions(r.system) == MIXED
    per_query = scores.scores.set_index("query_id")["mixed_version_hits"].to_dict()
    assert per_query == {"A0001": 0, "A0002": 1, "A0003": 2}
    assert metrics["mixed_version_rate"] == round(3 / 7, 4)
    # the answers themselves are scored as usual (WFGY sample semantics)
    assert metrics["answer_precision"] == 1.0 and metrics["refusal_correctness"] == 1.0


def test_a_version_endpoint_disagreeing_with_the_hits_is_named():
    system = DriftingSystem(SystemInfo(kind="drifting", index_version="v9", prompt_template_version="rag-v1"))
    retrieval, metrics, _ = scored(system)
    info = retrieval.results.system
    assert info.index_version == "v9" and info.prompt_template_version == "rag-v1"
    assert mixed_versions(info) == {**MIXED, "mixed_index_version": "v9 (system), v1 (4), v2 (3)"}
    assert metrics["mixed_version_rate"] == round(3 / 7, 4)  # counted among the hits, by their majority


def test_steady_versions_give_a_zero_rate():
    class Steady(DriftingSystem):
        def run_queries(self, requests, k, answers, progress=None):
            out = super().run_queries(requests, k, answers, progress)
            for o in out:
                o.hits = [
                    h.model_copy(update={"index_version": "v1", "chunker_version": "md-2"}) for h in o.hits
                ]
                if o.answer:
                    o.answer = o.answer.model_copy(update={"prompt_template_version": "rag-v1"})
            return out

    retrieval, metrics, _ = scored(Steady())
    assert mixed_versions(retrieval.results.system) == {}
    assert metrics["mixed_version_rate"] == 0.0


def test_mixed_versions_through_a_dagster_run(instance, tmp_path):
    """No plugin point takes an in-process adapter into a Dagster run, so the same recorded results
    go in as a kebab per_query.jsonl trace through the replay adapter."""
    trace = tmp_path / "per_query.jsonl"
    trace.write_text(
        "".join(
            json.dumps({"query_id": qid, "hits": raw_hits(qid), "answer": ANSWERS[qid]}) + "\n"
            for qid in HITS
        ),
        encoding="utf-8",
    )
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {"golden": str(WFGY_GOLD), "baseline": "none", "system": {"kind": "replay", "path": str(trace)}}
        )
    )
    result, store = run_config(instance, cfg, "drift-1")
    assert result.success

    stored = stored_metrics(store, "drift-1")
    assert stored.metrics["mixed_version_rate"] == round(3 / 7, 4)
    assert stored.denominators["mixed_version_rate"] == 7  # hits
    assert stored.info["versions"]["index_version"] == "v1"

    mats = {
        e.asset_key.path[-1]: e.step_materialization_data.materialization
        for e in result.get_asset_materialization_events()
    }
    meta = mats["retrieval_results"].metadata
    assert meta["mixed_versions"].value == MIXED
    assert meta["versions_reported"].value["index_version"] == {"v1": 4, "v2": 3}
    assert meta["index_version"].value == "v1"
    assert meta["system_details"].value["mixed_index_version"] == "v1 (4), v2 (3)"
    assert mats["run_metrics"].metadata["metrics"].value["mixed_version_rate"] == round(3 / 7, 4)
