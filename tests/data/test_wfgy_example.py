"""The README's claim about docs/examples/wfgy: WFGY's sample trace replays against its sample
gold set with the figures WFGY's own scorer reports."""

from __future__ import annotations

from pathlib import Path

from kebab_eval_pipeline.chain import pipeline
from kebab_eval_pipeline.chain.settings import load_settings

CONFIG = Path(__file__).resolve().parents[2] / "docs" / "examples" / "wfgy" / "replay.yaml"


def test_wfgy_sample_scores_as_wfgy_reports():
    settings = load_settings(CONFIG)
    golden = pipeline.load_golden_artifact(settings)
    retrieval = pipeline.retrieve(settings, golden)
    scores = pipeline.score(settings, golden, retrieval)
    metrics = pipeline.summarize("wfgy", settings, golden, retrieval, scores).metrics
    assert metrics["answer_precision"] == 1.0
    assert metrics["chr"] == 1.0
    assert metrics["under_refusal_rate"] == 0.0
    assert metrics["over_refusal_rate"] == 0.0
    assert metrics["error_rate"] == 0.0
    outcomes = retrieval.results.outcomes.set_index("query_id")
    assert outcomes.loc["A0002", "refused"] and not outcomes.loc["A0001", "refused"]
    assert retrieval.results.system.details["trace_format"] == "wfgy"
