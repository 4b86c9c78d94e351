"""Runs scored at different relevance levels (trec_eval -l): the level is recorded with the scores,
a comparison warns when the two runs' levels differ, and re-scoring keeps each run's own level.

Golden set: q1 has docs/a.md at grade 2 and docs/b.md at grade 1; q2 only docs/c.md at grade 1.
Both runs return b.md then a.md for q1 and c.md for q2.

- level 1: q1 relevant at rank 1 (mrr 1; both supports relevant, bpref 1); q2 mrr 1.
- level 2: q1's first relevant hit is a.md at rank 2 (mrr 1/2); b.md (grade 1) is judged
  non-relevant and ranked above it, so bpref = 1 − min(1, R=1) / min(N=1, R=1) = 0; q2 has no
  relevant support: not applicable (null), so n_applicable is 1.
"""

from __future__ import annotations

import math

from kebab_eval_pipeline.compare.fallback import rescore
from kebab_eval_pipeline.compare.runs import compare_runs
from kebab_eval_pipeline.metrics.matching_diagnostics import match_line
from tests.compare.conftest import hit, replay_bundle, write_golden

QUERIES = [
    {"id": "q1", "query": "one?", "supports": [
        {"rel_path": "docs/a.md", "grade": 2}, {"rel_path": "docs/b.md", "grade": 1}]},
    {"id": "q2", "query": "two?", "supports": [{"rel_path": "docs/c.md", "grade": 1}]},
]  # fmt: skip
TRACE = [
    {"query_id": "q1", "hits": [hit(1, "docs/b.md", None), hit(2, "docs/a.md", None)]},
    {"query_id": "q2", "hits": [hit(1, "docs/c.md", None)]},
]


def test_levels_are_recorded_warned_about_and_kept_when_rescored(tmp_path):
    golden = write_golden(tmp_path / "golden.yaml", QUERIES)
    a = replay_bundle(tmp_path, "a", golden, TRACE)
    b = replay_bundle(tmp_path, "b", golden, TRACE, relevance_level=2)
    assert a.scores.info["relevance_level"] == 1 and b.scores.info["relevance_level"] == 2
    assert b.metrics.info["relevance_level"] == 2
    ma, mb = a.metrics.metrics, b.metrics.metrics
    assert (ma["n_applicable"], ma["mrr"], ma["bpref"]) == (2, 1.0, 1.0)
    assert (mb["n_applicable"], mb["mrr"], mb["bpref"]) == (1, 0.5, 0.0)
    # nDCG keeps the raw grades at any level: q1's DCG 1/log2(2) + 2/log2(3) over the ideal
    # 2/log2(2) + 1/log2(3) is the same at both levels (only the queries averaged differ).
    q1 = (1 + 2 / math.log2(3)) / (2 + 1 / math.log2(3))
    qa = a.scores.scores.set_index("query_id")
    qb = b.scores.scores.set_index("query_id")
    assert qa.loc["q1", "ndcg@10"] == qb.loc["q1", "ndcg@10"] == round(q1, 4)
    assert math.isclose(ma["ndcg@10"], round((q1 + 1) / 2, 4)) and math.isclose(mb["ndcg@10"], round(q1, 4))
    assert match_line(a.scores.info).endswith("(2 queries)")
    assert match_line(b.scores.info).endswith("; relevant: grade ≥ 2")

    report = compare_runs(a, b)
    assert any(
        w.startswith("the runs were scored with different relevance levels (a: grade ≥ 1, b: grade ≥ 2)")
        for w in report.info["warnings"]
    ), report.info["warnings"]
    assert not any("relevance levels" in w for w in compare_runs(b, b).info["warnings"])

    # Re-scored under another criterion, a run keeps its own level.
    scores, summary = rescore(b, "doc")
    assert summary.metrics["n_applicable"] == 1 and summary.metrics["mrr"] == 0.5
    assert scores.set_index("query_id")["applicable"].tolist() == [True, False]
