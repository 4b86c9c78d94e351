"""Comparison inputs made from real runs: replayed kebab traces scored by the real pipeline.

A replay run is the cheapest *real* run: every stored artifact (golden set, hits, scores,
metrics) comes from the same functions the Dagster assets call, and the hits are exactly what a
test writes — ranks, documents, line spans and the chunker version each hit reports.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from kebab_eval_pipeline.chain import pipeline
from kebab_eval_pipeline.chain.settings import settings_from_dict
from kebab_eval_pipeline.store.runs import StoredRun


def hit(rank: int, path: str, lines: tuple[int, int] | None, chunker: str = "c1", **extra) -> dict:
    """A kebab-style hit on ``path`` (lines inclusive, or none), reporting ``chunker``."""
    row: dict[str, Any] = {
        "rank": rank,
        "chunk_id": f"{path}#{rank}:{chunker}",
        "doc_path": path,
        "snippet": f"text of {path}",
        "chunker_version": chunker,
        "index_version": f"idx-{chunker}",
        **extra,
    }
    if lines is not None:
        row["line_start"], row["line_end"] = lines
    return row


def write_golden(path: Path, queries: list[dict], name: str = "cmp") -> Path:
    path.write_text(
        yaml.safe_dump({"schema_version": "1", "name": name, "queries": queries}, allow_unicode=True),
        encoding="utf-8",
    )
    return path


def replay_bundle(
    folder: Path,
    run_id: str,
    golden: Path,
    trace: list[dict],
    answers: bool = False,
    **settings: Any,
) -> StoredRun:
    """Score ``trace`` (one kebab per-query record per row) against ``golden`` as run ``run_id``."""
    folder.mkdir(parents=True, exist_ok=True)
    trace_path = folder / f"{run_id}.jsonl"
    trace_path.write_text("".join(json.dumps(r) + "\n" for r in trace), encoding="utf-8")
    s = settings_from_dict(
        {
            "baseline": "none",
            "golden": str(golden),
            "system": {"kind": "replay", "path": str(trace_path), "format": "kebab"},
            "answers": answers,
            **settings,
        }
    )
    g = pipeline.load_golden_artifact(s)
    r = pipeline.retrieve(s, g)
    scores = pipeline.score(s, g, r)
    metrics = pipeline.summarize(run_id, s, g, r, scores)
    return StoredRun(run_id, g, r, scores, metrics)
