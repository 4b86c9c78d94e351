"""A comparison of two systems is not a regression check: every output says "comparing two
systems" and shows verdicts in neutral words; two runs of one system keep the regression words.
Real replayed runs: a trace file is the replay system's identity (kebab_eval_pipeline/systems/identity.py)."""

from __future__ import annotations

import json

import pytest

from kebab_eval_pipeline.chain.settings import settings_from_dict
from kebab_eval_pipeline.compare.document import comparison_document, render_report_html
from kebab_eval_pipeline.compare.runs import compare_runs
from kebab_eval_pipeline.gates.evaluate import evaluate_comparison_gates
from tests.compare.conftest import hit, replay_bundle, write_golden

N = 6


def _trace(found: set[int]) -> list[dict]:
    """Query i finds its gold document at rank 1 when ``i in found``, else only a filler."""
    return [
        {"query_id": f"q{i}", "hits": [hit(1, f"doc{i}.md" if i in found else "filler.md", (1, 5))]}
        for i in range(N)
    ]


@pytest.fixture(scope="module")
def golden(tmp_path_factory):
    queries = [
        {"id": f"q{i}", "query": f"question {i}?", "supports": [{"rel_path": f"doc{i}.md"}]} for i in range(N)
    ]
    return write_golden(tmp_path_factory.mktemp("golden") / "golden.yaml", queries)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, golden):
    """(a, b on another trace file = another system, b again from a's trace file = a's system)."""
    folder = tmp_path_factory.mktemp("traces")
    a = replay_bundle(folder / "system-a", "a", golden, _trace(set(range(N))))
    b = replay_bundle(folder / "system-b", "b", golden, _trace({0, 1, 2}))  # misses q3..q5
    # The same trace file re-recorded: a new version of system a.
    again = replay_bundle(folder / "system-a", "a", golden, _trace({0, 1, 2}))
    return a, b, again.renamed("a-v2")


GATES = {"regression": {"mrr": {"max_drop": 0.0}, "regression": {"max": 0}}}


def test_two_systems_say_so_everywhere_and_never_call_a_difference_a_regression(runs):
    a, b, _ = runs
    report = compare_runs(a, b, baseline_note="baseline 'a' (configured explicitly)")
    info = report.info
    label_a = f"replay {a.metrics.info['system']['trace']}"
    label_b = f"replay {b.metrics.info['system']['trace']}"
    assert info["cross_system"] is True
    assert info["systems_note"] == f"comparing two systems: {label_a} vs {label_b}"
    assert (
        info["baseline_note"]
        == f"baseline 'a' (configured explicitly); comparing two systems: {label_a} vs {label_b}"
    )
    assert info["verdict_counts"]["regression"] == 3  # the stored vocabulary is unchanged (verdict gates)

    md = report.markdown
    assert md.startswith("# Comparison of two systems: `b` vs `a`\n")
    assert f"comparing two systems: {label_a} vs {label_b}" in md.lower()
    assert "**b missed** 3" in md and "**regression**" not in md and "| regression |" not in md
    assert "| q3 | b missed |" in md

    page = render_report_html(report)
    assert "Comparison of two systems" in page and 'class="badge regression">b missed<' in page
    assert ">regression<" not in page and "3 regressions" not in page

    doc = json.loads(json.dumps(comparison_document(report), default=str))
    assert doc["cross_system"] is True and doc["systems_note"] == info["systems_note"]
    assert doc["verdict_labels"]["regression"] == "b missed"
    assert doc["system_identity_a"]["target"] == a.metrics.info["system"]["trace"]

    # Gates still decide (a bound against another system is a fair check), labelled as such.
    gates = evaluate_comparison_gates(settings_from_dict({"gates": GATES}), report)
    assert {g.name: g.passed for g in gates} == {"gate_mrr_max_drop": False, "gate_regression_max": False}
    assert all(g.reason.endswith("(comparing two systems)") for g in gates)


def test_two_runs_of_one_system_keep_the_regression_words(runs):
    a, _, again = runs
    report = compare_runs(a, again)
    assert report.info["cross_system"] is False
    assert report.info["systems_note"] == f"one system: replay {a.metrics.info['system']['trace']}"
    assert "comparing two systems" not in report.info["baseline_note"]
    assert report.markdown.startswith("# Comparison: `a-v2` vs baseline `a`\n")
    assert "**regression** 3" in report.markdown
    gates = evaluate_comparison_gates(settings_from_dict({"gates": GATES}), report)
    assert not any("comparing two systems" in g.reason for g in gates)
