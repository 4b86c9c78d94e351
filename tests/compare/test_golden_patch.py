"""The suggested-supports patch of ``golden suggest``, rendered from a suspect-gold queue directly:
what each support's evidence comment says for every state of the judge's columns."""

from __future__ import annotations

import pandas as pd
import yaml

from kebab_eval_pipeline.compare.golden_patch import render_patch
from kebab_eval_pipeline.compare.suspect_gold import SUSPECT_COLUMNS

INFO = {"run_a": "base", "run_b": "cand", "golden_b": {"name": "demo", "sha256": "ab" * 32, "path": "g.yaml"}}


def queue(**judge) -> pd.DataFrame:
    row = {
        "query_id": "q-1", "question": "how much salt?", "verdict": "loss", "a_rank": 1, "b_rank": 3,
        "rank_drop": 2, "hit_rank": 1, "chunk_id": "c9", "doc_id": None, "doc_path": "salt.md",
        "heading_path": ["Salt", "Ratio"], "line_start": 3, "line_end": 9, "snippet": "2% by weight",
        "judge_relevant": None, "judge_score": None, "judge_reasoning": None,
    }  # fmt: skip
    row.update(judge)
    return pd.DataFrame([row])[list(SUSPECT_COLUMNS)].astype(SUSPECT_COLUMNS)


def evidence(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip().startswith("# judge:")]


def test_a_verdict_given_without_a_reason_is_written_without_one():
    """A judge whose reply carried no reasoning left it null (NA): the patch says the verdict and the
    score, and is valid YAML with the suggested support (it was an internal error)."""
    text = render_patch(queue(judge_relevant=True, judge_score=4.0, judge_reasoning=None), INFO)
    assert evidence(text) == ["# judge: relevant (4/5)"]
    [query] = yaml.safe_load(text)["queries"]
    assert query["supports"] == [
        {
            "chunk_id": "c9",
            "rel_path": "salt.md",
            "heading_path": ["Salt", "Ratio"],
            "line_start": 3,
            "line_end": 9,
        }
    ]


def test_the_reason_is_quoted_and_an_unjudged_hit_says_so():
    judged = render_patch(
        queue(judge_relevant=False, judge_score=1.0, judge_reasoning="off topic\nentirely"), INFO
    )
    assert evidence(judged) == ['# judge: NOT relevant (1/5): "off topic entirely"']
    assert evidence(render_patch(queue(), INFO)) == ["# judge: not judged"]
