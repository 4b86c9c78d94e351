"""Metrics across stored runs, read from the Parquet artifacts (never a shared database file)."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from kebab_eval_pipeline.chain.artifacts import RunMetricsArtifact
from kebab_eval_pipeline.compare.outcome import run_outcome
from kebab_eval_pipeline.foundation.run_roles import matches_role, role_of
from kebab_eval_pipeline.metrics import catalogue
from kebab_eval_pipeline.store.artifact_store import ArtifactStore

#: The columns shown by default: the metric catalogue's summary list.
DEFAULT_METRICS: tuple[str, ...] = tuple(catalogue.summary_names())
#: The columns before the metrics.
RUN_COLUMNS = ("run_id", "created_at", "chunker_version", "golden", "role", "outcome", "failed")


def metric_history(
    store: ArtifactStore,
    metrics: Sequence[str] | None = None,
    roles: Sequence[str] = (),
    outcome: str | None = None,
) -> pd.DataFrame:
    """One row per stored run (oldest first): run id, time, chunker version, golden name, its role
    (:func:`~kebab_eval_pipeline.foundation.run_roles.role_of`'s label: ``nightly``,
    ``sweep-variant (chunks)``), its outcome (``passed`` | ``failed``,
    :func:`~kebab_eval_pipeline.compare.outcome.run_outcome`
    over its metrics and stored comparison) with the checks that failed it (``failed``: comma-separated,
    "" when it passed), then the metrics.

    ``roles``: keep runs matching any of them (:func:`~kebab_eval_pipeline.foundation.run_roles.matches_role`:
    a role, ``regular``, ``sweep:<name>``); ``outcome``: keep runs with that outcome. Metrics a run
    did not compute (or computed as null) are NaN.
    """
    wanted = list(metrics or DEFAULT_METRICS)
    rows = []
    for manifest in store.runs("run_metrics"):
        info = manifest["info"]
        run_id = manifest["run_id"]
        role = role_of(run_id, info)
        if roles and not any(matches_role(role, r) for r in roles):
            continue
        comparison = store.manifest("comparison_report", run_id)
        judged = run_outcome(info, None if comparison is None else comparison.get("info") or {})
        if outcome is not None and judged.outcome != outcome:
            continue
        # through the artifact, so a run stored under older metric names is read with today's names
        values = RunMetricsArtifact.from_tables(*store.read("run_metrics", run_id)).metrics
        rows.append(
            {
                "run_id": run_id,
                "created_at": (info.get("created_at") or "")[:19],
                "chunker_version": info.get("versions", {}).get("chunker_version"),
                "golden": info.get("golden", {}).get("name"),
                "role": role.label,
                "outcome": judged.outcome,
                "failed": ", ".join(judged.failed),
                **{
                    m: float("nan") if values.get(m) is None or pd.isna(values[m]) else float(values[m])
                    for m in wanted
                },
            }
        )
    return pd.DataFrame(rows, columns=[*RUN_COLUMNS, *wanted])
