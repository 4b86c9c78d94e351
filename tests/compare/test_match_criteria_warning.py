"""Comparing runs matched by the same criterion, however each chose it, says nothing; runs matched
by different criteria are warned about, with what each used.

Golden set: two queries whose supports name a document and a heading path. Hits carry heading paths
and no line ranges, so ``match: auto`` resolves every query to anchor — the same matching as a run
forced to ``match: anchor``. A run forced to ``match: doc`` really was matched differently.
"""

from __future__ import annotations

from kebab_eval_pipeline.compare.ranking import rank_runs
from kebab_eval_pipeline.compare.runs import compare_runs
from kebab_eval_pipeline.metrics.matching_diagnostics import match_line
from tests.compare.conftest import hit, replay_bundle, write_golden

QUERIES = [
    {"id": "q1", "query": "one?", "supports": [{"rel_path": "docs/a.md", "heading_path": ["A", "Setup"]}]},
    {"id": "q2", "query": "two?", "supports": [{"rel_path": "docs/b.md", "heading_path": ["B"]}]},
]
TRACE = [
    {"query_id": "q1", "hits": [hit(1, "docs/a.md", None, heading_path=["A"]),
                                hit(2, "docs/a.md", None, heading_path=["A", "Setup"])]},
    {"query_id": "q2", "hits": [hit(1, "docs/b.md", None, heading_path=["B", "Usage"])]},
]  # fmt: skip


def _criteria_warnings(warnings: list[str]) -> list[str]:
    return [w for w in warnings if "criteria" in w]


def test_auto_resolved_to_anchor_is_anchor_and_a_real_difference_is_named(tmp_path):
    golden = write_golden(tmp_path / "golden.yaml", QUERIES)
    auto = replay_bundle(tmp_path, "auto", golden, TRACE)
    anchor = replay_bundle(tmp_path, "anchor", golden, TRACE, match="anchor")
    doc = replay_bundle(tmp_path, "doc", golden, TRACE, match="doc")
    # the label names a forced criterion once (it read "anchor (anchor (2 queries))")
    assert match_line(auto.scores.info) == "auto → anchor (2 queries)"
    assert match_line(anchor.scores.info) == "anchor (2 queries)"
    assert match_line(doc.scores.info) == "doc (2 queries)"
    assert auto.metrics.metrics["mrr"] == anchor.metrics.metrics["mrr"] == 0.75  # q1 at rank 2, q2 at 1
    assert doc.metrics.metrics["mrr"] == 1.0

    assert _criteria_warnings(compare_runs(auto, anchor).info["warnings"]) == []
    assert _criteria_warnings(compare_runs(anchor, auto).info["warnings"]) == []
    assert _criteria_warnings(compare_runs(auto, doc).info["warnings"]) == [
        "the runs were scored with different match criteria "
        "(a: auto → anchor (2 queries); b: doc (2 queries))"
    ]
    assert _criteria_warnings(rank_runs([auto, anchor], ["mrr"]).info["warnings"]) == []
    assert _criteria_warnings(rank_runs([auto, anchor, doc], ["mrr"]).info["warnings"]) == [
        "the runs were scored with different match criteria (auto: auto → anchor (2 queries); "
        "anchor: anchor (2 queries); doc: doc (2 queries))"
    ]
