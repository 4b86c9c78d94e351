"""A comparison as files: the JSON document, Markdown and standalone HTML (SPEC §8 outputs).

The same three files are stored with the ``comparison_report`` partition and written by
``kebab-eval compare``, so a report looks the same wherever it was made.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kebab_eval_pipeline.compare.deltas import slice_deltas
from kebab_eval_pipeline.foundation.json_records import json_records, json_text

if TYPE_CHECKING:
    from kebab_eval_pipeline.chain.artifacts import ComparisonArtifact


def comparison_document(report: ComparisonArtifact, gates: list[dict] | None = None) -> dict[str, Any]:
    """The comparison as one JSON-ready mapping: ``info``'s keys (run ids, versions, match mode,
    counts, drift, warnings, both runs' metrics), then ``per_metric``, ``per_query``,
    ``per_slice`` and ``suspect_gold`` (the suspect-gold queue, worst first; [] when none or stored
    before it existed) as lists of records (nulls as None), and ``gates`` when given."""
    doc = {
        **report.info,
        "per_metric": json_records(report.per_metric),
        "per_query": json_records(report.per_query),
        "per_slice": json_records(_slices(report)),
        "suspect_gold": json_records(report.suspect_gold) if report.suspect_gold is not None else [],
    }
    if gates is not None:
        doc["gates"] = gates
    return doc


def render_json(report: ComparisonArtifact, gates: list[dict] | None = None) -> str:
    """:func:`comparison_document` as indented JSON text (strict: no NaN, which is null already)."""
    return json_text(comparison_document(report, gates))


def render_report_html(report: ComparisonArtifact) -> str:
    """The standalone HTML report (charts inline; see :mod:`.html`)."""
    from kebab_eval_pipeline.compare.html import render_html

    return render_html(
        report.info, report.per_metric, report.per_query, _slices(report), suspect_gold=report.suspect_gold
    )


def report_files(report: ComparisonArtifact) -> dict[str, bytes]:
    """``comparison.md``, ``comparison.html`` and ``comparison.json`` → content."""
    return {
        "comparison.md": report.markdown.encode("utf-8"),
        "comparison.html": render_report_html(report).encode("utf-8"),
        "comparison.json": render_json(report).encode("utf-8"),
    }


def _slices(report: ComparisonArtifact):
    return report.per_slice if report.per_slice is not None else slice_deltas(None, None)
