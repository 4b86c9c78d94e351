"""Metrics across stored runs, read from the Parquet artifacts (never a shared database file)."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from kebab_eval_pipeline.artifacts import RunMetricsArtifact
from kebab_eval_pipeline.metrics import catalogue
from kebab_eval_pipeline.store.artifact_store import ArtifactStore

#: The columns shown by default: the metric catalogue's summary list.
DEFAULT_METRICS: tuple[str, ...] = tuple(catalogue.summary_names())


def metric_history(store: ArtifactStore, metrics: Sequence[str] | None = None) -> pd.DataFrame:
    """One row per stored run (oldest first): run id, time, chunker version, golden name, metrics.

    Metrics a run did not compute (or computed as null) are NaN.
    """
    wanted = list(metrics or DEFAULT_METRICS)
    rows = []
    for manifest in store.runs("run_metrics"):
        info = manifest["info"]
        # through the artifact, so a run stored under older metric names is read with today's names
        values = RunMetricsArtifact.from_tables(*store.read("run_metrics", manifest["run_id"])).metrics
        rows.append(
            {
                "run_id": manifest["run_id"],
                "created_at": (info.get("created_at") or "")[:19],
                "chunker_version": info.get("versions", {}).get("chunker_version"),
                "golden": info.get("golden", {}).get("name"),
                **{
                    m: float("nan") if values.get(m) is None or pd.isna(values[m]) else float(values[m])
                    for m in wanted
                },
            }
        )
    return pd.DataFrame(rows, columns=["run_id", "created_at", "chunker_version", "golden", *wanted])
