"""An evaluation's gates as JUnit XML, the test-report format CI systems read (GitLab's test
reports, Jenkins, GitHub test-reporter actions).

One ``<testsuites>`` with one ``<testsuite>`` (the command: ``kebab-eval run r2``), one
``<testcase>`` per gate result: ``classname`` ``run.<kind>`` (absolute gates) or
``comparison.<kind>`` (regression and verdict gates), ``name`` :func:`.gate_text.gate_title`.

- a failed blocking gate has ``<failure>`` (message: the gate's reason);
- a skipped gate (no baseline, a null metric skipped as configured) has ``<skipped>``;
- a failed non-blocking gate passes, its ``<system-out>`` starting ``WARNING``;
- a failing system-health verdict is an ``<error>`` (the system under test broke: not a gate).

``tests``, ``failures``, ``errors`` and ``skipped`` are :func:`.gate_text.tally` of the gates and the
system-health verdict: the counts the Markdown outputs and ``kebab-eval run`` print. A bound is
written as configured everywhere (``max_drop: 0.001`` is ``0.001``, also as the suite property).

Every testcase's ``<system-out>`` carries its numbers in the report's formats; the suite's
``<properties>`` carry them exactly (``<check name>.value`` = the stored float's shortest text),
beside the run, baseline and golden set, and ``not_measured.<metric>`` = the reason for each metric
the run could not measure. Per-testcase ``<properties>`` are not in the Jenkins
xunit ``junit-10.xsd`` schema (pytest's ``xunit2`` leaves them out for the same reason), so the
numbers are suite properties keyed by check name. Valid against that schema.

No environment variable, host name or path is written: only what the reports already show.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from datetime import datetime
from typing import Any

from kebab_eval_pipeline.foundation.number_text import p_text, shown, signed
from kebab_eval_pipeline.reporting.ci_view import CiView
from kebab_eval_pipeline.reporting.gate_text import (
    configured_bound,
    exact,
    gate_title,
    health_outcome,
    health_title,
    outcome,
    tally,
)

# Characters XML 1.0 cannot carry at all (control characters but tab, LF, CR; lone surrogates;
# U+FFFE/U+FFFF): a system's error text may hold them, and one would make the whole file unreadable.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
#: Numbers of a gate result written as suite properties, in this order.
GATE_NUMBERS = ("value", "threshold", "delta", "p_value", "p_raw")


def _clean(text: Any) -> str:
    return _NOT_XML.sub("\ufffd", "" if text is None else str(text))


def _element(parent: ET.Element, tag: str, text: str | None = None, **attrs: str) -> ET.Element:
    node = ET.SubElement(parent, tag, {k: _clean(v) for k, v in attrs.items()})
    if text is not None:
        node.text = _clean(text)
    return node


def gate_lines(gate: dict[str, Any]) -> list[str]:
    """The gate's outcome and numbers as the reports print them, one ``key: value`` line each."""
    state = outcome(gate)
    head = {
        "pass": "pass",
        "skipped": "skipped",
        "FAIL": "FAIL (blocking gate)",
        "warn": "WARNING (non-blocking gate missed; the run goes on)",
    }[state]
    lines = [
        f"outcome: {head}",
        f"check: {gate['name']}",
        f"value: {shown(gate.get('value'))}",
        f"threshold: {exact(configured_bound(gate))} ({gate['kind']})",
        f"delta: {signed(gate.get('delta'))}",
    ]
    if gate.get("p_value") is not None or gate.get("p_raw") is not None:
        lines.append(f"p: {p_text(gate.get('p_value'))} (raw {p_text(gate.get('p_raw'))})")
    if gate.get("verdict"):
        lines.append(f"verdict: {gate['verdict']}")
    lines.append(f"reason: {gate['reason']}")
    return lines


def _counts(view: CiView) -> dict[str, int]:
    """The suite's counts from the one tally every CI output prints (:func:`.gate_text.tally`)."""
    counts = tally(view.gates, view.health)
    return {
        "tests": sum(counts.values()),
        "failures": counts["FAIL"],
        "errors": counts["error"],
        "skipped": counts["skipped"],
    }


def render_junit(view: CiView, started: datetime, seconds: float) -> bytes:
    """JUnit XML (UTF-8, with its declaration) of ``view``'s gates and system-health verdict.

    ``started`` (UTC) is the suite's ``timestamp`` (``YYYY-MM-DDTHH:MM:SS``), ``seconds`` its
    ``time`` (the command's wall time; each testcase takes 0: a gate compares stored numbers).
    Counts: ``tests`` every testcase, ``failures`` the failed blocking gates, ``errors`` a failed
    system-health verdict, ``skipped`` the skipped gates; a missed non-blocking gate is a pass."""
    counts = _counts(view)
    name = f"kebab-eval {view.command} {view.run_id}" + (
        f" vs {view.baseline}" if view.command == "compare" and view.baseline else ""
    )
    time = f"{max(seconds, 0.0):.3f}"
    root = ET.Element(
        "testsuites",
        {"name": "kebab-eval", **{k: str(counts[k]) for k in ("tests", "failures", "errors")}, "time": time},
    )
    suite = _element(
        root,
        "testsuite",
        name=name,
        **{k: str(v) for k, v in counts.items()},
        time=time,
        timestamp=started.strftime("%Y-%m-%dT%H:%M:%S"),
    )
    properties = _element(suite, "properties")
    facts = {"run_id": view.run_id, "baseline": view.baseline or "none", "golden": view.golden or ""}
    for key, value in facts.items():
        _element(properties, "property", name=key, value=value)
    for gate in view.gates:
        for key in GATE_NUMBERS:
            value = configured_bound(gate) if key == "threshold" else gate.get(key)
            _element(properties, "property", name=f"{gate['name']}.{key}", value=exact(value))
    for metric, reason in view.not_measured.items():  # null with the reason, never 0
        _element(properties, "property", name=f"not_measured.{metric}", value=reason)
    for gate in view.gates:
        case = _element(suite, "testcase", classname=f"{gate['suite']}.{gate['kind']}", name=gate_title(gate))
        case.set("time", "0")
        state = outcome(gate)
        if state == "FAIL":
            _element(case, "failure", "\n".join(gate_lines(gate)), message=gate["reason"], type="gate")
        elif state == "skipped":
            _element(case, "skipped", message=gate["reason"])
        _element(case, "system-out", "\n".join(gate_lines(gate)) + "\n")
    if health_outcome(view.health) is not None:
        _health_case(suite, view.health)  # type: ignore[arg-type]
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"


def _health_case(suite: ET.Element, health: dict[str, Any]) -> None:
    """The system-health verdict as a testcase: ``<error>`` when it fails the run; a verdict that
    does not block passes, its output starting ``WARNING`` (as a missed non-blocking gate's)."""
    limit = exact(health.get("max_error_rate"))
    case = _element(suite, "testcase", classname="run.system_health", name=health_title(health))
    case.set("time", "0")
    message = health.get("message") or (
        f"{health.get('failed', 0)} of {health.get('queries', 0)} queries failed"
    )
    state = health_outcome(health)
    if state == "error":
        _element(case, "error", message, message=message, type="system_health")
    head = {
        "error": "error (the system under test failed)",
        "warn": "WARNING (not healthy; system_health does not block, the run goes on)",
        "pass": "pass",
    }[state or "pass"]
    lines = [
        f"outcome: {head}",
        f"error_rate: {shown(health.get('error_rate'))}",
        f"max_error_rate: {limit}",
        f"failed queries: {health.get('failed', 0)} of {health.get('queries', 0)}",
    ]
    if health.get("failed"):
        lines.append(f"message: {message}")
    _element(case, "system-out", "\n".join(lines) + "\n")
