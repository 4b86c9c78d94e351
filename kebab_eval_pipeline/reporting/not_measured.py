"""What a run did not measure, as every output says it: the metrics its system could not carry the
inputs of (``info["not_measured"]``: metric → reason, :mod:`kebab_eval_pipeline.metrics.measurable`),
grouped by reason — one line per reason, the metrics it leaves null after it.

Read by the run report, the UI summary, the CLI, the CI outputs and the export, so each says the
same words: ``not measured (OpenInference traces carry no citations): citation_coverage, chr, …``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kebab_eval_pipeline.metrics import catalogue

#: What a value cell shows for a metric the run did not measure (not "null": nothing was computed).
NOT_MEASURED = "not measured"


def not_measured(info: Mapping[str, Any]) -> dict[str, str]:
    """``{metric: reason}`` a run (its run_metrics ``info``) recorded, in report order (the
    catalogue's); empty for a run that measured everything or was stored before this was recorded."""
    stored = info.get("not_measured")
    if not isinstance(stored, Mapping):
        return {}
    rank = {(m.name, m.at_k): i for i, m in enumerate(catalogue.measures())}

    def order(name: str) -> tuple[int, str]:
        parsed = catalogue.parse(name)
        return rank.get((parsed.stem, parsed.k is not None), len(rank)), name

    return {str(k): str(stored[k]) for k in sorted(stored, key=order)}


def by_reason(info: Mapping[str, Any]) -> list[tuple[str, list[str]]]:
    """``[(reason, [metric, …]), …]`` in the order the metrics were listed."""
    groups: dict[str, list[str]] = {}
    for metric, reason in not_measured(info).items():
        groups.setdefault(reason, []).append(metric)
    return list(groups.items())


def not_measured_lines(info: Mapping[str, Any]) -> list[str]:
    """One plain-text line per reason: ``not measured (REASON): m1, m2``."""
    return [f"{NOT_MEASURED} ({reason}): {', '.join(metrics)}" for reason, metrics in by_reason(info)]
