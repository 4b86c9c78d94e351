"""``golden validate --config`` against a command, http or python system: what can be checked
without a run.

Such a system usually cannot list what its index holds (a python object can, with
``catalogue()``: its gold references are then looked up like the reference system's). What can be
checked, and is: the system's own version report (``version_url`` / ``version_argv`` / a python
object's ``versions()``: versions and indexing coverage), and one probe
query — the golden set's first — whose hits show which fields the system fills (document paths,
heading paths, line ranges, chunk ids), whether any hit names a gold document, what ``match:
auto`` would resolve to on such hits, and the matching warnings a run would give. What could not
be checked is said as plainly.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow.compute as pc

from kebab_eval_pipeline.chain.artifacts import GoldenArtifact
from kebab_eval_pipeline.chain.settings import RunSettings
from kebab_eval_pipeline.contract import SystemInfo
from kebab_eval_pipeline.metrics.columns import string_column
from kebab_eval_pipeline.metrics.matching import hits_carry, normalise_paths, resolve_auto
from kebab_eval_pipeline.metrics.matching_diagnostics import matching_warnings, summarize_criteria
from kebab_eval_pipeline.systems.protocol import SystemUnderTest, system_capabilities
from kebab_eval_pipeline.systems.runner import run_golden
from kebab_eval_pipeline.systems.settings import kind_of

__all__ = ["ProbeReport", "probe_system"]

#: Hit fields reported by the probe, with how a person reads them.
_FIELDS = (
    ("doc_path", "doc paths"),
    ("heading_path", "heading paths"),
    ("lines", "line ranges"),
    ("chunk_id", "chunk ids"),
    ("doc_id", "doc ids"),
)


@dataclass
class ProbeReport:
    """What was checked (``checked``), what a run would warn about (``warnings``), what could not
    be checked (``not_checked``) and, when the system could not be reached or the probe failed,
    ``error`` (then nothing about the hits was checked)."""

    checked: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    not_checked: list[str] = field(default_factory=list)
    error: str | None = None


def probe_system(settings: RunSettings, golden: GoldenArtifact, system: SystemUnderTest) -> ProbeReport:
    """Check ``system`` (a command, http or python adapter) against ``golden`` with one probe query.

    Inputs: the run settings (``match``, ``k``, ``mrr_cutoff``, the system block), the loaded
    golden set and the built adapter. Never raises for a failing system: an unreachable server, a
    command that exits non-zero or a response that is not hits becomes ``error`` (naming the error
    class and message). A golden set without queries probes nothing (``error`` says so).
    """
    report = ProbeReport()
    kind = settings.system.kind
    queries = golden.queries
    if len(queries) == 0:
        _version_check(report, settings, system.info(), system)
        report.error = "the golden set has no query to probe with"
        return report
    first = queries.iloc[:1]
    qid = str(first["query_id"].iloc[0])
    k = max(max(settings.k), settings.mrr_cutoff)
    # The probe first: a persistent (jsonl) system reports its versions from the process this
    # starts, so asking for them before would start (and pay for) a process of its own.
    results = run_golden(system, first, k=k, answers=False)
    _version_check(report, settings, results.system, system)
    outcome = results.outcomes.iloc[0]
    if isinstance(outcome["error"], str):
        report.error = f"probe query {qid!r} failed: {outcome['error']}"
        return report
    hits = results.hits
    n = len(hits)
    carry = hits_carry(hits, tuple(f for f, _ in _FIELDS))
    fields = ", ".join(f"{label} {carry[f][0]}/{n}" for f, label in _FIELDS)
    report.checked.append(f"probe query {qid!r}: {n} hit(s); hits carry {fields}")
    if n:
        gold = pc.unique(normalise_paths(string_column(golden.supports, "rel_path")).drop_null())
        named = pc.is_in(normalise_paths(string_column(hits, "doc_path")), value_set=gold)
        count = int(pc.sum(pc.fill_null(named, False)).as_py() or 0)
        report.checked.append(
            f"{count} of {n} probe hit(s) name a document of the golden set (doc_path = a gold rel_path)"
            if len(gold)
            else "the golden set names no document by rel_path: paths not compared"
        )
        if settings.match == "auto":
            _, by_query = summarize_criteria(resolve_auto(hits, golden.supports))
            counts = ", ".join(f"{c} ({m} quer{'y' if m == 1 else 'ies'})" for c, m in by_query.items())
            report.checked.append(f"match: auto on hits like these → {counts or 'nothing to match'}")
        for w in matching_warnings(hits, golden.supports, settings.match):
            if w["field"] == "matches":  # one query's hits against every query's gold says little
                continue
            report.warnings.append(f"matching ({w['field']}): {w['message']}")
    else:
        report.warnings.append(f"probe query {qid!r} returned no hits: the fields a run needs were not seen")
    capabilities = system_capabilities(system)
    no_index = capabilities.reason("index_catalogue") if capabilities is not None else None
    if capabilities is None or no_index:
        report.not_checked.append(
            "that the gold references (paths, heading paths, chunk ids, lines) exist in the system's "
            f"index: {no_index or f'a {kind} system does not list what it holds'}"
            + (" (gold documents were looked for under source_root)" if settings.source_root else "")
        )
    else:
        report.checked.append("the gold references against the system's catalogue (its index's chunks)")
    report.not_checked.append(
        f"the other {len(queries) - 1} quer{'y' if len(queries) == 2 else 'ies'} and the answers (ask): "
        "a run does that"
    )
    if capabilities is not None:
        report.not_checked += [
            f"{name.replace('_', ' ')}: {why}"
            for name, why in capabilities.lacks.items()
            if name in ("answers", "citations", "token_counts")
        ]
    return report


def _version_check(
    report: ProbeReport, settings: RunSettings, info: SystemInfo, system: SystemUnderTest | None = None
) -> None:
    """What the system's version report said (or why it could not be read), into ``report``."""
    capabilities = system_capabilities(system) if system is not None else None
    # where the kind reads its versions (SystemKind.version_source): a setting, or the built system
    declared = kind_of(settings.system.kind)
    version_source = (declared.version_source if declared is not None else None) or "version report"
    a_setting = version_source in type(settings.system).model_fields
    if getattr(settings.system, "protocol", None) == "jsonl" and not settings.system.version_argv:
        version_source, configured = "version line", True  # the process answers it at start
    elif a_setting:
        configured = bool(getattr(settings.system, version_source, None))
    else:  # the built system knows (a python object with or without versions())
        configured = capabilities is None or capabilities.carries("live_versions")
    if configured:
        if info.details.get("version_error"):
            report.warnings.append(
                f"the version report ({version_source}) failed: {info.details['version_error']}"
            )
        else:
            versions = ", ".join(f"{k}={v}" for k, v in info.versions().items() if v) or "no versions"
            coverage = (
                ", ".join(f"{k}={v:g}" for k, v in info.coverage.items()) if info.coverage else "no coverage"
            )
            report.checked.append(f"version report ({version_source}): {versions}; {coverage}")
    else:
        why = capabilities.reason("live_versions") if capabilities is not None and not a_setting else None
        report.not_checked.append(
            f"the system's versions and indexing coverage ({why or f'no {version_source} configured'})"
        )
