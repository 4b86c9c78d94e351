"""The example CI jobs run as written: `docs/examples/ci/run_steps.py` copies the checkout into a
temporary workspace, makes a new venv, and runs the job's own shell steps in order with the
variables a runner sets — `pip install -e .` included — then checks what the job uploads.

Twice: the GitLab job with the stored runs of an earlier pipeline restored (its cache) and a
release baseline set, so `run` compares with it and `compare` runs too — every gate passes, exit
0; and the GitHub workflow after a commit that raises a blocking gate above what the demo
reaches — the job fails on `kebab-eval run`'s exit 1, its reports are still uploaded.

The venv sees this interpreter's packages (``--venv-site-packages``) so the install resolves
without downloading; run by hand, the script uses a plain fresh venv.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import clean_cli_env, write
from tests.test_cli import cli

pytest.importorskip("xmlschema")
junitparser = pytest.importorskip("junitparser")

REPO = Path(__file__).parents[2]
SCRIPT = REPO / "docs" / "examples" / "ci" / "run_steps.py"
EXAMPLE = REPO / "docs" / "examples" / "ci" / "eval.yaml"


def run_steps(env: dict, xsd: Path, *args: str) -> dict:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--venv-site-packages", "--xsd", str(xsd), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.stdout.strip().startswith("{"), proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    assert proc.returncode == 0 and report["ok"], json.dumps(report, indent=2)
    return report


def steps(report: dict) -> dict:
    return {s["name"]: s for s in report["steps"]}


def test_gitlab_job_passes_with_a_restored_baseline(tmp_path_factory, junit_xsd):
    env = clean_cli_env(tmp_path_factory, "ci-gitlab")
    # The cache of an earlier pipeline: one stored run, `release-1`, of the example config.
    seeded = cli(env, "run", "--run-id", "release-1", "--config", str(EXAMPLE))
    assert seeded.returncode == 0, seeded.stderr
    work = tmp_path_factory.mktemp("gitlab-job")
    report = run_steps(
        env,
        junit_xsd,
        "--ci",
        "gitlab",
        "--workdir",
        str(work),
        "--seed-storage",
        env["DAGSTER_HOME"],
        "--var",
        "EVAL_BASELINE=release-1",
        "--expect",
        "pass",
    )
    assert [s["exit"] for s in report["steps"]] == [0, 0]
    assert report["checks"]["junit_files"] == ["eval-reports/junit-compare.xml", "eval-reports/junit-run.xml"]
    reports = work / "workspace" / "eval-reports"
    run_suite = next(iter(junitparser.JUnitXml.fromfile(str(reports / "junit-run.xml"))))
    # baseline: auto found the restored run, so the regression gate was evaluated, not skipped.
    cases = {c.name: c for c in run_suite}
    assert cases["regression: mrr max_drop 0.02"].is_passed
    assert "reason: mrr moved +0.0000 (0.6985 → 0.6985); allowed drop 0.02" in (
        cases["regression: mrr max_drop 0.02"].system_out
    )
    assert (run_suite.tests, run_suite.failures, run_suite.skipped) == (9, 0, 0)
    compare_suite = next(iter(junitparser.JUnitXml.fromfile(str(reports / "junit-compare.xml"))))
    assert compare_suite.name == "kebab-eval compare ci-777-4242 vs release-1"
    comment = (reports / "pr-comment.md").read_text(encoding="utf-8")
    assert "vs baseline `release-1`" in comment
    # No --report-url: the link is GitLab's job page, from $CI_JOB_URL.
    assert comment.rstrip().endswith("[Full report](https://gitlab.example.com/group/project/-/jobs/4242)")
    assert {p.name for p in (reports / "compare").iterdir()} == {
        "comparison.md",
        "comparison.html",
        "comparison.json",
    }


def test_github_workflow_fails_on_a_blocking_gate_and_still_uploads(tmp_path_factory, junit_xsd):
    env = clean_cli_env(tmp_path_factory, "ci-github")
    work = tmp_path_factory.mktemp("github-job")
    raised = EXAMPLE.read_text(encoding="utf-8").replace("mrr: {min: 0.6}", "mrr: {min: 0.99}")
    assert "mrr: {min: 0.99}" in raised
    config = write(work.parent / "raised.yaml", raised)
    report = run_steps(
        env, junit_xsd, "--ci", "github", "--workdir", str(work), "--config", str(config), "--expect", "fail"
    )
    ran = steps(report)
    assert ran["Install"]["exit"] == 0
    assert ran["Evaluate"]["exit"] == 1  # a failed gate, not bad input (2) or a crash (3)
    assert not ran["Compare with the release baseline"]["ran"]  # no EVAL_BASELINE
    assert not ran["Comment on the pull request"]["ran"]  # a push, not a pull request
    assert ran["Keep the reports"]["exit"] == 0  # if: always()
    suite = next(
        iter(junitparser.JUnitXml.fromfile(str(work / "workspace" / "eval-reports" / "junit-run.xml")))
    )
    cases = {c.name: c for c in suite}
    [failure] = cases["mrr min 0.99"].result
    assert failure.message == "mrr = 0.6985 misses ≥ 0.99"
    # The blocking check stopped the chain before the comparison: the regression gate says so.
    [skip] = cases["regression: mrr max_drop 0.02"].result
    assert skip.message.startswith("not evaluated: the comparison with the baseline did not run")
    assert (suite.tests, suite.failures, suite.errors, suite.skipped) == (9, 1, 0, 1)
    summary = "".join(p.read_text(encoding="utf-8") for p in sorted(work.glob("step_summary_*.md")))
    assert summary.startswith("### kebab-eval run: ❌ 1 blocking gate(s) failed")
