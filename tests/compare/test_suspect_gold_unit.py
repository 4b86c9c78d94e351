"""The suspect-gold queue in-process: "unjudged" is exactly judged@k's complement, the queue follows
the comparison's matching criterion across chunkers, and it survives storage (older reports too)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from kebab_eval_pipeline.chain.artifacts import ComparisonArtifact
from kebab_eval_pipeline.compare.document import comparison_document, render_report_html
from kebab_eval_pipeline.compare.runs import compare_runs
from kebab_eval_pipeline.compare.suspect_gold import SUSPECT_COLUMNS, _match_setup
from kebab_eval_pipeline.metrics.matching import judged_hits, match_hits
from kebab_eval_pipeline.store.artifact_store import ArtifactStore
from tests.compare.conftest import hit, replay_bundle, write_golden

GOLDEN = [
    # span-matched supports (path + lines); one graded 0 (judged non-relevant)
    {
        "id": "q1",
        "query": "one?",
        "supports": [
            {"rel_path": "a.md", "line_start": 1, "line_end": 10},
            {"rel_path": "z.md", "line_start": 1, "line_end": 4, "grade": 0},
        ],
    },
    {"id": "q2", "query": "two?", "supports": [{"rel_path": "b.md", "line_start": 20, "line_end": 30}]},
    {"id": "q3", "query": "three?", "supports": [{"rel_path": "c.md", "line_start": 5, "line_end": 6}]},
]


def trace(rows: dict[str, list[dict]]) -> list[dict]:
    return [{"query_id": q, "hits": h} for q, h in rows.items()]


def test_unjudged_is_the_complement_of_judged_at_k(tmp_path):
    golden = write_golden(tmp_path / "g.yaml", GOLDEN)
    rows = {
        # Span: a hit matches when it covers ≥ 50% of the gold lines. Rank 1 relevant (8 of 10
        # lines), 2 a repeat of the same support (judged, not credited), 3 the grade-0 support (3 of
        # 4 lines: judged), 4 nothing (unjudged), 5 relevant again.
        "q1": [
            hit(1, "a.md", (1, 8)),
            hit(2, "a.md", (2, 9)),
            hit(3, "z.md", (1, 3)),
            hit(4, "y.md", (1, 2)),
            hit(5, "a.md", (1, 10)),
        ],
        # rank 2 covers 9 of the 11 gold lines, rank 3 only 2 (unjudged)
        "q2": [hit(1, "x.md", (1, 2)), hit(2, "b.md", (20, 28)), hit(3, "b.md", (29, 30))],
        "q3": [],  # no hits: judged@k is 0 by definition, nothing to list
    }
    run = replay_bundle(tmp_path, "r", golden, trace(rows))
    crit, resolved = _match_setup(run, None)
    hits = run.retrieval.results.hits
    hits = hits[hits["rank"] <= 3].reset_index(drop=True)  # judged@3
    judged = judged_hits(hits, match_hits(hits, run.golden.supports, crit, resolved=resolved))
    per_query = pd.Series(judged).groupby(hits["query_id"].astype(str).to_numpy()).mean()
    stored = run.scores.scores.set_index(run.scores.scores["query_id"].astype(str))["judged@3"]
    assert per_query.to_dict() == {"q1": 1.0, "q2": pytest.approx(1 / 3)}  # worked by hand above
    assert stored["q1"] == 1.0 and stored["q2"] == round(1 / 3, 4) and stored["q3"] == 0.0
    # at k = 5: q1 has one unjudged hit (rank 4) of 5
    hits5 = run.retrieval.results.hits
    judged5 = judged_hits(hits5, match_hits(hits5, run.golden.supports, crit, resolved=resolved))
    assert hits5.loc[~judged5, ["query_id", "rank"]].astype(str).values.tolist() == [
        ["q1", "4"],
        ["q2", "1"],
        ["q2", "3"],
    ]
    assert run.scores.scores.set_index("query_id").loc["q1", "judged@5"] == pytest.approx(0.8)


def test_across_chunkers_the_queue_uses_the_fallback_criterion(tmp_path):
    golden = write_golden(tmp_path / "g.yaml", GOLDEN)
    a = replay_bundle(
        tmp_path / "a",
        "a",
        golden,
        trace({"q1": [hit(1, "a.md", (1, 10), "c1")], "q2": [hit(1, "b.md", (20, 30), "c1")], "q3": []}),
    )
    # Chunker c2: q1's gold at rank 3, under a 1-line chunk of a.md (covers < 50% of the gold span:
    # unjudged under span) and a c2 chunk of z.md (grade 0: judged); q2 missed.
    b = replay_bundle(
        tmp_path / "b",
        "b",
        golden,
        trace(
            {
                "q1": [
                    hit(1, "a.md", (30, 31), "c2"),
                    hit(2, "z.md", (1, 3), "c2"),
                    hit(3, "a.md", (1, 9), "c2"),
                ],
                "q2": [hit(1, "x.md", (1, 2), "c2"), hit(2, "b.md", (1, 3), "c2")],
                "q3": [],
            }
        ),
    )
    report = compare_runs(a, b)
    assert report.info["chunker_version_match"] == "fallback_span"
    queue = report.suspect_gold
    assert queue[["query_id", "verdict", "hit_rank", "doc_path", "rank_drop"]].astype(
        str
    ).values.tolist() == [
        ["q2", "regression", "1", "x.md", "10"],
        ["q2", "regression", "2", "b.md", "10"],
        ["q1", "loss", "1", "a.md", "2"],
    ]
    assert report.info["suspect_gold"] == {
        "hits": 3,
        "queries": 2,
        "regression": 2,
        "loss": 1,
        "judged_relevant": 0,
    }
    assert "## Suspect gold (3 unjudged hits in 2 queries)" in report.markdown


def test_the_queue_round_trips_through_storage_and_older_reports_still_load(tmp_path):
    golden = write_golden(tmp_path / "g.yaml", GOLDEN)
    a = replay_bundle(tmp_path / "a", "a", golden, trace({"q2": [hit(1, "b.md", (20, 30))]}))
    b = replay_bundle(
        tmp_path / "b", "b", golden, trace({"q2": [hit(1, "x.md", (1, 2), heading_path=["X", "Y"])]})
    )
    report = compare_runs(a, b)
    store = ArtifactStore(str(tmp_path / "store"))
    store.write("comparison_report", "b", *report.to_tables())
    back = ComparisonArtifact.from_tables(*store.read("comparison_report", "b"))
    assert back.suspect_gold is not None and len(back.suspect_gold) == 1
    pd.testing.assert_frame_equal(
        back.suspect_gold.astype(SUSPECT_COLUMNS), report.suspect_gold, check_dtype=False
    )
    assert list(back.suspect_gold.loc[0, "heading_path"]) == ["X", "Y"]
    doc = json.loads(json.dumps(comparison_document(back)))
    assert doc["suspect_gold"][0]["heading_path"] == ["X", "Y"] and doc["suspect_gold"][0]["rank_drop"] == 10
    # A comparison stored before the queue: no table; it loads, the JSON lists none, the HTML says so.
    tables, info = report.to_tables()
    del tables["suspect_gold"]
    store.write("comparison_report", "old", tables, info)
    old = ComparisonArtifact.from_tables(*store.read("comparison_report", "old"))
    assert old.suspect_gold is None and comparison_document(old)["suspect_gold"] == []
    assert "stored before the suspect-gold queue existed" in render_report_html(old)
    assert "unjudged hit" in render_report_html(back) and "x.md" in render_report_html(back)
    assert np.array_equal(report.per_query["query_id"].to_numpy(), back.per_query["query_id"].to_numpy())
