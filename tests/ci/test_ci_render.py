"""The CI renderers on inputs no demo run produces: text XML cannot carry, and a comparison so
large that only the caps keep the job summary and the PR comment small."""

from __future__ import annotations

from datetime import UTC, datetime

import pandas as pd
import pytest

from kebab_eval_pipeline.reporting.ci_markdown import COMMENT, SUMMARY, render_ci_markdown
from kebab_eval_pipeline.reporting.ci_view import METRIC_COLUMNS, CiView, worse_queries
from kebab_eval_pipeline.reporting.junit import render_junit
from kebab_eval_pipeline.reporting.report_link import clean_url, report_link

xmlschema = pytest.importorskip("xmlschema")
junitparser = pytest.importorskip("junitparser")


def gate(i: int, reason: str, passed: bool = False) -> dict:
    return {
        "name": f"gate_m{i}_min",
        "metric": f"m{i}",
        "kind": "min",
        "passed": passed,
        "skipped": False,
        "blocking": True,
        "value": 0.1,
        "threshold": 0.5,
        "delta": -0.4,
        "reason": reason,
        "p_value": None,
        "p_raw": None,
        "verdict": None,
        "suite": "run",
    }


def view(gates: list[dict], per_query: pd.DataFrame | None = None, note: str = "") -> CiView:
    regressions = (
        worse_queries(per_query)
        if per_query is not None
        else worse_queries(pd.DataFrame(columns=["query_id", "verdict", "a_rank", "b_rank", "note"]))
    )
    metrics = pd.DataFrame({c: pd.Series(dtype=d) for c, d in METRIC_COLUMNS.items()})
    return CiView("run", "r1", "r0" if per_query is not None else None, metrics, gates, regressions,
                  n_regressions=len(regressions), notes=[note] if note else [])  # fmt: skip


def test_text_xml_cannot_carry_is_replaced_and_the_rest_round_trips(tmp_path, junit_xsd):
    reason = 'bad\x00 \x1b[31m 발효 <&> "q" \ufffe end'
    path = tmp_path / "j.xml"
    path.write_bytes(render_junit(view([gate(1, reason)]), datetime(2025, 3, 1, 10, 15, tzinfo=UTC), 1.23456))
    xmlschema.XMLSchema(str(junit_xsd)).validate(str(path))
    suite = next(iter(junitparser.JUnitXml.fromfile(str(path))))
    assert (suite.timestamp, suite.time) == ("2025-03-01T10:15:00", 1.235)
    [failure] = next(iter(suite)).result
    assert failure.message == 'bad\ufffd \ufffd[31m 발효 <&> "q" \ufffd end'


def test_the_caps_keep_both_markdown_sizes_small():
    n = 20_000
    per_query = pd.DataFrame(
        {
            "query_id": [f"q{i:05d}-" + "x" * 500 for i in range(n)],
            "verdict": ["loss"] * (n // 2) + ["regression"] * (n // 2),
            "a_rank": [1] * n,
            "b_rank": [2] * (n // 2) + [None] * (n // 2),
            "note": ["y" * 5000] * n,
        }
    )
    gates = [gate(i, "z" * 5000) for i in range(500)]
    big = view(gates, per_query, note="w" * 100_000)
    summary = render_ci_markdown(big, SUMMARY, "https://ci.example/1")
    comment = render_ci_markdown(big, COMMENT, "https://ci.example/1")
    assert len(summary.encode()) < 40_000 and len(comment.encode()) < 12_000
    assert "| … 440 more in the JUnit report |" in summary
    assert f"#### Queries that got worse ({n})" in comment
    # Regressions (b lost the hit) come before losses, then by query id.
    assert "| q10000-" in comment.split("#### Queries that got worse")[1].splitlines()[4]


def test_report_links():
    assert clean_url("https://u:p@host.example:8443/a b/(x)?q=<1>#f", "--report-url") == (
        "https://host.example:8443/a%20b/%28x%29?q=%3C1%3E#f"
    )
    env = {"GITHUB_SERVER_URL": "https://github.com/", "GITHUB_REPOSITORY": "o/r", "GITHUB_RUN_ID": "5"}
    assert report_link(None, env) == "https://github.com/o/r/actions/runs/5"
    assert (
        report_link(None, {"CI_JOB_URL": "https://gl.example/g/p/-/jobs/9"})
        == "https://gl.example/g/p/-/jobs/9"
    )
    assert report_link(None, {}) is None
    from kebab_eval_pipeline.foundation.errors import InputError

    with pytest.raises(InputError, match="--report-url"):
        report_link("javascript:alert(1)", env)
