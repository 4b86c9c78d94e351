"""What the CI outputs (JUnit XML, the GitHub job summary, the PR comment) read of one evaluation:
the headline metrics (with the comparison's deltas and adjusted significance), every gate result,
the system-health verdict and the queries that got worse — taken from what the run or the
comparison stored, never computed again, so CI shows the numbers the reports show.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from kebab_eval_pipeline.gates.evaluate import check_name, regression_bound, regression_kinds
from kebab_eval_pipeline.metrics import catalogue
from kebab_eval_pipeline.reporting.not_measured import not_measured

if TYPE_CHECKING:
    from kebab_eval_pipeline.chain.artifacts import ComparisonArtifact, RunMetricsArtifact

#: One row per headline metric. ``a``/``delta``/``p_adjusted``… are null without a comparison.
METRIC_COLUMNS: dict[str, str] = {
    "metric": "string",
    "a": "float64",
    "b": "float64",
    "delta": "float64",
    "p_value": "float64",
    "p_adjusted": "float64",
    "adjusted_by": "string",
    "significance": "string",
    "direction": "string",  # better/worse where significant (compare/deltas.py), same, else null
    "leaning": "string",  # the delta's sense whatever the test
    "mde": "float64",  # minimum detectable effect at 80% power (compare/power.py)
    "n": "Int64",
}
#: The queries that got worse, worst first: regressions (b lost the hit), then losses by rank drop.
REGRESSION_COLUMNS: dict[str, str] = {
    "query_id": "string",
    "verdict": "string",
    "a_rank": "Int64",
    "b_rank": "Int64",
    "note": "string",
}
_WORSE = ("regression", "loss")
#: The comparison's warnings shown (a chunker fallback, too few queries, …); the report has all.
MAX_NOTES = 3


@dataclass(frozen=True)
class CiView:
    """One evaluation as CI shows it.

    ``command`` is ``run`` or ``compare``; ``run_id`` is the evaluated run (b), ``baseline`` its
    baseline (a; None without one). ``gates`` are ``GateResult.as_dict()`` records, each with
    ``suite`` — ``run`` (absolute gates, on the run's metrics) or ``comparison`` (regression and
    verdict gates). ``health`` is the stored system-health verdict (None for ``compare``).
    ``not_measured``: the metrics run b could not measure, with the reason (null, never 0)."""

    command: str
    run_id: str
    baseline: str | None
    metrics: pd.DataFrame
    gates: list[dict[str, Any]]
    regressions: pd.DataFrame
    n_regressions: int = 0
    health: dict[str, Any] | None = None
    verdict_counts: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    golden: str | None = None
    not_measured: dict[str, str] = field(default_factory=dict)


def _typed(frame: pd.DataFrame, columns: dict[str, str]) -> pd.DataFrame:
    """``frame``'s ``columns`` in their declared dtypes; a column it lacks is all null."""
    out = pd.DataFrame(index=frame.index)
    for column, dtype in columns.items():
        if column in frame.columns:
            out[column] = frame[column].astype(dtype)
        else:
            out[column] = pd.Series(np.nan if dtype == "float64" else pd.NA, index=frame.index).astype(dtype)
    return out.reset_index(drop=True)


def worse_queries(per_query: pd.DataFrame, cutoff: int = 10) -> pd.DataFrame:
    """The comparison's ``regression`` and ``loss`` rows (:data:`REGRESSION_COLUMNS`), worst first:
    regressions before losses, then the largest rank drop (b rank − a rank; a regression's missing
    b rank counts as ``cutoff + 1``), then query id. Empty when nothing got worse."""
    worse = per_query[per_query["verdict"].isin(_WORSE)]
    if not len(worse):
        return _typed(worse.iloc[:0], REGRESSION_COLUMNS)
    a = pd.to_numeric(worse["a_rank"], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    b = pd.to_numeric(worse["b_rank"], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    order = pd.DataFrame(
        {
            "first": (worse["verdict"] != "regression").to_numpy(dtype=bool),
            "drop": -(np.where(np.isnan(b), cutoff + 1, b) - np.nan_to_num(a, nan=cutoff + 1)),
            "query_id": worse["query_id"].astype(str).to_numpy(),
        }
    ).sort_values(["first", "drop", "query_id"], kind="stable")
    return _typed(worse.iloc[order.index.to_numpy()], REGRESSION_COLUMNS)


def _headline(metrics: dict[str, float | None]) -> list[str]:
    """The catalogue's headline metrics the run has (its own k values: the names it stored)."""
    return [m for m in catalogue.headline_names() if m in metrics]


def _comparison_metrics(report: ComparisonArtifact, names: list[str]) -> pd.DataFrame:
    rows = report.per_metric.set_index("metric", drop=False)
    rows = rows.loc[[m for m in names if m in rows.index]]
    return _typed(rows.rename(columns={"n_paired": "n"}), METRIC_COLUMNS)


def comparison_view(report: ComparisonArtifact, command: str = "compare") -> CiView:
    """A comparison (``kebab-eval compare A B``) as CI shows it: its stored gates
    (``info["gates"]``, all of suite ``comparison``), the headline metrics of b with a, delta and
    the adjusted p and marks of the report's table, and the queries that got worse."""
    info = report.info
    names = _headline(info.get("metrics_b") or {})
    worse = worse_queries(report.per_query)
    return CiView(
        command=command,
        run_id=str(info["run_b"]),
        baseline=None if not info.get("run_a") else str(info["run_a"]),
        metrics=_comparison_metrics(report, names),
        gates=[{**g, "suite": "comparison"} for g in info.get("gates", [])],
        regressions=worse,
        n_regressions=len(worse),
        verdict_counts=dict(info.get("verdict_counts") or {}),
        notes=([] if info.get("run_a") else [str(info.get("baseline_note") or "")])
        + [str(w) for w in info.get("warnings", [])[:MAX_NOTES]],
        golden=(info.get("golden_b") or {}).get("name"),
        not_measured=not_measured({"not_measured": info.get("not_measured_b")}),
    )


def run_view(
    run_id: str,
    metrics: RunMetricsArtifact,
    comparison: ComparisonArtifact | None,
    settings=None,
) -> CiView:
    """A stored run (``kebab-eval run``) as CI shows it: its absolute gates (suite ``run``), its
    comparison's regression and verdict gates (suite ``comparison``), the headline metrics — with
    the comparison's deltas and adjusted p when it has a baseline — and its system-health verdict.

    ``comparison`` None (a blocking check stopped the chain before the comparison): each regression
    and verdict gate of ``settings`` is listed as skipped, saying it was not evaluated."""
    from kebab_eval_pipeline.reporting.calibration import calibration_check

    names = _headline(metrics.metrics)
    # the absolute gates, and the judge_calibration check counted with them (a blocking one fails the run)
    gates = [{**g, "suite": "run"} for g in metrics.info.get("gates", [])]
    gates += calibration_check(metrics.info.get("judge_calibration"))
    notes: list[str] = []
    if comparison is not None and comparison.info.get("run_a"):
        view = comparison_view(comparison, command="run")
        return CiView(
            **{
                **view.__dict__,
                "gates": gates + view.gates,
                "health": metrics.info.get("system_health"),
                "golden": (metrics.info.get("golden") or {}).get("name"),
                "not_measured": not_measured(metrics.info),
            }
        )
    if comparison is not None:
        gates += [{**g, "suite": "comparison"} for g in comparison.info.get("gates", [])]
        notes.append(str(comparison.info.get("baseline_note") or ""))
    elif settings is not None:
        gates += not_evaluated(settings)
    table = pd.DataFrame(
        {
            "metric": pd.Series(names, dtype="string"),
            "b": pd.Series([metrics.metrics.get(m) for m in names], dtype="float64"),
            "n": pd.Series([metrics.denominators.get(m) for m in names], dtype="Int64"),
        }
    )
    return CiView(
        command="run",
        run_id=run_id,
        baseline=None,
        metrics=_typed(table, METRIC_COLUMNS),
        gates=gates,
        regressions=worse_queries(pd.DataFrame(columns=list(REGRESSION_COLUMNS))),
        health=metrics.info.get("system_health"),
        notes=notes,
        golden=(metrics.info.get("golden") or {}).get("name"),
        not_measured=not_measured(metrics.info),
    )


NOT_EVALUATED = "not evaluated: the comparison with the baseline did not run (a blocking check failed first)"


def not_evaluated(settings) -> list[dict[str, Any]]:
    """Every regression and verdict gate of ``settings`` as a skipped result (suite ``comparison``)
    with the reason :data:`NOT_EVALUATED`: a run stopped before its comparison still lists them."""
    out = []
    for metric, gate in settings.regression_gates.items():
        out += [
            _skipped(check_name(metric, kind), metric, kind, gate.blocking, regression_bound(gate, kind))
            for kind in regression_kinds(gate)
        ]
    for key, gate in settings.verdict_gates.items():
        out.append(_skipped(check_name(key, "max"), key, "max", gate.blocking, gate.max))
    return out


def _skipped(name: str, metric: str, kind: str, blocking: bool, threshold) -> dict[str, Any]:
    return {
        "name": name,
        "metric": metric,
        "kind": kind,
        "passed": True,
        "skipped": True,
        "blocking": blocking,
        "value": None,
        "threshold": threshold,
        "delta": None,
        "reason": NOT_EVALUATED,
        "p_value": None,
        "p_raw": None,
        "verdict": None,
        "suite": "comparison",
    }
