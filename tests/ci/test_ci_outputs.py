"""`kebab-eval run` / `compare` with `--junit`, `--pr-comment` and `$GITHUB_STEP_SUMMARY`, as CI
runs them: real subprocesses on the demo golden set, real exit codes.

Two stored runs, made once for the module: `base` (the example CI config: chunk size 800) and
`cand` (chunk size 300) run with a config whose gates give every outcome at once — a passing
gate, a failing blocking regression gate (mrr may drop 0.001; it drops 0.0084), a passing
non-inferiority gate, a failing non-blocking gate and skipped gates (a null metric, and a slice named
with XML-special characters and Korean that no query has). The JUnit XML is validated against Jenkins' xunit
`junit-10.xsd` (the `junit_xsd` fixture, tests/ci/conftest.py) with xmlschema and read back with
junitparser.
"""

from __future__ import annotations

import json
import math
import re
import shlex
import shutil

import numpy as np
import pytest
from statsmodels.stats.power import TTestPower

from kebab_eval_pipeline.reporting.ci_markdown import MARKER
from tests import docs_pages
from tests.compare.margin_simulation import exact_mcnemar_power
from tests.conftest import clean_cli_env, write
from tests.test_cli import cli, no_traceback
from tests.test_cli_compare import strict_json

xmlschema = pytest.importorskip("xmlschema")
junitparser = pytest.importorskip("junitparser")

from pathlib import Path  # noqa: E402

EXAMPLE = Path(__file__).parents[2] / "docs" / "examples" / "ci" / "eval.yaml"
SLICE = 'hit@5[category=발효 <&> "x"]'  # no demo query has this category: a null slice
SECRET = "s3cr3t-token-value-4821"
GATES = f"""\
k: [1, 3, 5, 10]
answers: true
baseline: auto
default_gates: false
gates:
  mrr: {{min: 0.6}}
  chr: {{min: 0.9, blocking: false}}
  hallucination_rate: {{max: 0.1, skip_if_null: true}}
  '{SLICE}': {{min: 0.5, skip_if_null: true}}
  regression:
    mrr: {{max_drop: 0.001}}
    hit@5: {{non_inferior: 0.05}}
"""


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    environment = clean_cli_env(tmp_path_factory, "ci-outputs")
    environment["KEBAB_TEST_SECRET"] = SECRET  # a secret in the environment must reach no output
    environment["GITHUB_TOKEN"] = SECRET
    for key in list(environment):
        if key.startswith(("GITHUB_", "CI_", "GITLAB")) and key != "GITHUB_TOKEN":
            del environment[key]
    return environment


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    return tmp_path_factory.mktemp("ci-files")


@pytest.fixture(scope="module")
def gates_config(out):
    return write(out / "gates.yaml", GATES)


@pytest.fixture(scope="module")
def cand(env, out, gates_config):
    """`run` of base (example config), then of cand with every CI output; the cand process."""
    proc = cli(
        env, "run", "--run-id", "base", "--config", str(EXAMPLE), "--junit", str(out / "junit-base.xml")
    )
    assert proc.returncode == 0, proc.stderr
    summary = write(out / "step_summary.md", "earlier step's summary\n")
    run_env = env | {
        "GITHUB_STEP_SUMMARY": str(summary),
        "GITHUB_SERVER_URL": "https://github.example",
        "GITHUB_REPOSITORY": "team/search",
        "GITHUB_RUN_ID": "99",
    }
    proc = cli(
        run_env,
        "run",
        "--run-id",
        "cand",
        "--config",
        str(gates_config),
        "--chunk-size",
        "300",
        "--junit",
        str(out / "new" / "junit-run.xml"),
        "--pr-comment",
        str(out / "comment.md"),
    )
    return proc


def suite_of(path: Path, schema: Path):
    xmlschema.XMLSchema(str(schema)).validate(str(path))  # raises, naming the element, when invalid
    xml = junitparser.JUnitXml.fromfile(str(path))
    suites = list(xml)
    assert len(suites) == 1
    return xml, suites[0]


def cases_by_name(suite) -> dict:
    return {case.name: case for case in suite}


def test_run_exits_1_on_the_blocking_regression_gate_and_still_writes_everything(cand, out):
    assert cand.returncode == 1, cand.stderr
    no_traceback(cand)
    assert "gate failed:" in cand.stderr
    assert (out / "new" / "junit-run.xml").is_file() and (out / "comment.md").is_file()


def test_run_junit_validates_and_reads_back_with_every_outcome(cand, out, env, junit_xsd):
    xml, suite = suite_of(out / "new" / "junit-run.xml", junit_xsd)
    cases = cases_by_name(suite)
    assert list(cases) == [
        "mrr min 0.6",
        "chr min 0.9",
        "hallucination_rate max 0.1",
        f"{SLICE} min 0.5",
        "regression: mrr max_drop 0.001",
        "regression: hit@5 non_inferior 0.05",
        "system_health max_error_rate 0.1",
    ]
    # Counts: 7 tests, 1 failure (the blocking regression gate), 2 skipped, 0 errors; a missed
    # non-blocking gate passes.
    assert (suite.tests, suite.failures, suite.errors, suite.skipped) == (7, 1, 0, 2)
    assert (xml.tests, xml.failures, xml.errors) == (7, 1, 0)
    assert suite.name == "kebab-eval run cand"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", suite.timestamp)
    assert 0 < float(suite.time) < 300

    # Hand-worked from the two demo runs (chunk 800 vs 300): mrr 0.6985 → 0.6901.
    regression = cases["regression: mrr max_drop 0.001"]
    assert regression.classname == "comparison.max_drop"
    [failure] = regression.result
    assert isinstance(failure, junitparser.Failure)
    # The bound is far finer than 92 queries resolve (the paired MDE; test_gate_resolution_is_flagged
    # re-derives it): the reason says so.
    assert re.fullmatch(
        r"mrr moved -0\.0084 \(0\.6985 → 0\.6901\); allowed drop 0\.001 "
        r"\(finer than 92 queries resolve: ±0\.0\d{3}\)",
        failure.message,
    ), failure.message
    assert (
        "delta: -0.0084" in regression.system_out and "threshold: 0.001 (max_drop)" in regression.system_out
    )

    passing = cases["mrr min 0.6"]
    assert passing.classname == "run.min" and passing.is_passed and not passing.result
    assert "value: 0.6901" in passing.system_out and "delta: +0.0901" in passing.system_out

    warned = cases["chr min 0.9"]
    assert warned.is_passed and not warned.result
    assert warned.system_out.startswith("outcome: WARNING (non-blocking gate missed")

    skipped = cases["hallucination_rate max 0.1"]
    [skip] = skipped.result
    assert isinstance(skip, junitparser.Skipped)
    assert skip.message == "hallucination_rate is null (empty denominator): skipped as configured"

    # XML-special characters and Korean round-trip, in the name and in the message.
    [slice_skip] = cases[f"{SLICE} min 0.5"].result
    assert slice_skip.message == (f"{SLICE}: no query has category = '발효 <&> \"x\"': skipped as configured")
    health = cases["system_health max_error_rate 0.1"]
    assert health.classname == "run.system_health" and health.is_passed

    # The exact numbers, as suite properties keyed by check name, re-derive the deltas.
    props = {p.name: p.value for p in suite.properties()}
    assert props["run_id"] == "cand" and props["baseline"] == "base"
    assert props["golden"] == "demo-fermentation"
    value, threshold = float(props["gate_mrr_min.value"]), float(props["gate_mrr_min.threshold"])
    assert (value, threshold) == (0.6901, 0.6)
    assert float(props["gate_mrr_min.delta"]) == round(value - threshold, 4) == 0.0901
    # A bound is the number configured, as in the testcase's name and output and the reason.
    assert props["gate_mrr_max_drop.threshold"] == "0.001" and props["gate_mrr_max_drop.delta"] == "-0.0084"
    assert props["gate_hit_at_5_non_inferior.threshold"] == "0.05"
    assert props["gate_hallucination_rate_max.value"] == "null"

    # The same values as the stored run: `kebab-eval export` reads them independently.
    exported = strict_json(cli(env, "export", "cand", "--format", "json").stdout)
    stored = {g["name"]: g for g in exported["gates"]}
    for name, gate in stored.items():
        if gate["value"] is not None:
            assert float(props[f"{name}.value"]) == gate["value"]
        assert math.isclose(float(props[f"{name}.threshold"]), gate["threshold"])


def test_pr_comment_and_job_summary(cand, out):
    comment = (out / "comment.md").read_text(encoding="utf-8")
    assert comment.startswith(MARKER + "\n### kebab-eval run: ❌ 1 blocking gate(s) failed\n")
    assert "run `cand` vs baseline `base` on golden set `demo-fermentation`" in comment
    # mrr's row: a, b, delta leaning worse but not significant (hollow ▽), its Holm-adjusted p
    # (the only gated metric: Holm = raw), the minimum detectable effect, no mark.
    row = re.search(
        r"^\| mrr \| 0\.6985 \| 0\.6901 \| -0\.0084 ▽ \| ([0-9.]+) \(Holm\) \| ±(0\.[0-9]{4}) \|  ?\|$",
        comment,
        re.M,
    )
    assert row and float(row.group(1)) >= 0.05
    # The change that 92 queries can resolve is far larger than the 0.001 the gate asks for.
    assert 0.01 < float(row.group(2)) < 0.5
    assert "| regression: mrr max_drop 0.001 | ❌ FAIL | 0.6901 | 0.001 | -0.0084 |" in comment
    assert "#### Queries that got worse (5)" in comment
    assert "| fact-032 | loss | 3 | 4 |" in comment  # the largest drops first, then by id
    assert comment.rstrip().endswith("[Full report](https://github.example/team/search/actions/runs/99)")
    assert len(comment) < 6000

    summary = (out / "step_summary.md").read_text(encoding="utf-8")
    assert summary.startswith("earlier step's summary\n### kebab-eval run: ❌")  # appended, not replaced
    assert MARKER not in summary
    assert "| mrr min 0.6 | ✅ pass | 0.6901 | 0.6 | +0.0901 |" in summary  # every gate in the summary
    assert "| chr min 0.9 | ⚠️ warn |" in summary
    # The slice's name is escaped: it renders as written, never as HTML.
    assert 'hit@5\\[category=발효 \\<\\&\\> "x"\\] min 0.5' in summary


TALLY = re.compile(r"(\d+) checks? \((\d+) gates?( \+ system health)?\): ((?:\d+ \w+(?: · )?)+)")


def _tally(text: str) -> dict:
    """The tally a Markdown output or the CLI prints, as numbers: total, gates, health, outcomes."""
    [(total, gates, health, parts)] = TALLY.findall(text)
    outcomes = {word: int(n) for n, word in (p.split(" ") for p in parts.split(" · "))}
    return {"total": int(total), "gates": int(gates), "health": bool(health), **outcomes}


def test_every_output_counts_the_same_checks(cand, out, junit_xsd):
    """One run with absolute, regression, skipped and failing gates: JUnit's counts, the job
    summary's and the PR comment's tallies and ``kebab-eval run``'s text count the same checks —
    the six gates and the system-health verdict — the same way; the CLI lists each gate, the
    summary lists each check. (Before, this run's Markdown tallied "2 passed · 1 failed · 1 warned ·
    2 skipped" — 6 gates — where JUnit counted 7 tests, the system-health testcase among them; the
    CLI listed only the run's own 4 gates.)"""
    _, suite = suite_of(out / "new" / "junit-run.xml", junit_xsd)
    expected = {"total": 7, "gates": 6, "health": True, "passed": 3, "failed": 1, "warned": 1, "skipped": 2}
    junit = {"total": suite.tests, "failed": suite.failures, "skipped": suite.skipped, "errors": suite.errors}
    assert junit == {"total": 7, "failed": 1, "skipped": 2, "errors": 0}
    summary = (out / "step_summary.md").read_text(encoding="utf-8")
    comment = (out / "comment.md").read_text(encoding="utf-8")
    for text in (summary, comment, cand.stdout):
        assert _tally(text) == expected, text
    assert (
        "  checks: 7 checks (6 gates + system health): 3 passed · 1 failed · 1 warned · 2 skipped\n"
        in cand.stdout
    )
    # Each gate once in the CLI's text; each check once in the summary's table, and as a testcase.
    listed = re.findall(r"^  gate (?:pass|FAIL|warn|skip) (\S+):", cand.stdout, re.M)
    assert len(listed) == len(set(listed)) == 6 and "gate_hit_at_5_non_inferior" in listed
    table = summary.split("#### Checks\n", 1)[1].split("\n#### ", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| check ")]
    titles = [re.sub(r"\\(.)", r"\1", r.split(" | ")[0].removeprefix("| ")) for r in rows]  # unescaped
    assert sorted(titles) == sorted(c.name for c in suite)
    # The comment lists the checks that did not pass; its tally counts the rest.
    assert "#### Checks that did not pass" in comment and "| mrr min 0.6 |" not in comment


def test_every_output_gives_a_bound_as_configured(cand, out, env, junit_xsd):
    """``max_drop: 0.001`` and ``non_inferior: 0.05`` are 0.001 and 0.05 in the JUnit property, the
    testcase's output, the Markdown rows, the reasons, the stored result and the export: never the
    negated number beside the configured one."""
    _, suite = suite_of(out / "new" / "junit-run.xml", junit_xsd)
    props = {p.name: p.value for p in suite.properties()}
    cases = cases_by_name(suite)
    summary = (out / "step_summary.md").read_text(encoding="utf-8")
    for name, title, bound in (
        ("gate_mrr_max_drop", "regression: mrr max_drop 0.001", "0.001"),
        ("gate_hit_at_5_non_inferior", "regression: hit@5 non_inferior 0.05", "0.05"),
    ):
        assert props[f"{name}.threshold"] == bound
        assert f"threshold: {bound} (" in cases[title].system_out
        [row] = [line for line in summary.splitlines() if line.startswith(f"| {title} |")]
        assert row.split(" | ")[3] == bound, row
        [line] = [x for x in cand.stdout.splitlines() if f" {name}: " in x]
        assert bound in line and f"-{bound}" not in line.replace(f"−{bound}", ""), line
    compared = strict_json(
        cli(env, "compare", "base", "cand", "--json", "--config", str(out / "gates.yaml")).stdout
    )
    stored = {g["name"]: g["threshold"] for g in compared["gates"]}
    assert stored == {"gate_mrr_max_drop": 0.001, "gate_hit_at_5_non_inferior": 0.05}


def test_no_secret_reaches_any_output(cand, out):
    for path in out.rglob("*"):
        if path.is_file():
            assert SECRET not in path.read_text(encoding="utf-8", errors="replace"), path
    assert SECRET not in cand.stdout + cand.stderr


def test_compare_writes_junit_and_respects_no_github_summary(cand, env, out, gates_config, junit_xsd):
    summary = write(out / "summary2.md", "kept\n")
    proc = cli(
        env | {"GITHUB_STEP_SUMMARY": str(summary)},
        "compare",
        "base",
        "cand",
        "--config",
        str(gates_config),
        "--junit",
        str(out / "junit-compare.xml"),
        "--pr-comment",
        str(out / "compare-comment.md"),
        "--report-url",
        "https://user:pw@ci.example/runs/7?x=(1)",
        "--no-github-summary",
    )
    assert proc.returncode == 1, proc.stderr
    no_traceback(proc)
    assert summary.read_text() == "kept\n"
    _, suite = suite_of(out / "junit-compare.xml", junit_xsd)
    assert suite.name == "kebab-eval compare cand vs base"
    assert [c.name for c in suite] == [
        "regression: mrr max_drop 0.001",
        "regression: hit@5 non_inferior 0.05",
    ]
    assert (suite.tests, suite.failures, suite.errors, suite.skipped) == (2, 1, 0, 0)
    assert "checks: 2 checks (2 gates): 1 passed · 1 failed" in proc.stderr
    [failure] = next(iter(suite)).result
    # The bound is far finer than 92 queries resolve (the paired MDE; test_gate_resolution_is_flagged
    # re-derives it): the reason says so.
    assert re.fullmatch(
        r"mrr moved -0\.0084 \(0\.6985 → 0\.6901\); allowed drop 0\.001 "
        r"\(finer than 92 queries resolve: ±0\.0\d{3}\)",
        failure.message,
    ), failure.message
    comment = (out / "compare-comment.md").read_text(encoding="utf-8")
    assert comment.startswith(MARKER + "\n### kebab-eval compare: ❌ 1 blocking gate(s) failed")
    # The credential in the URL is dropped; parentheses are encoded so the link stays one link.
    assert comment.rstrip().endswith("[Full report](https://ci.example/runs/7?x=%281%29)")
    assert "pw@" not in comment


@pytest.mark.parametrize("option", ["--junit", "--pr-comment"])
def test_an_unwritable_path_is_exit_2_before_any_run(env, out, option):
    blocker = write(out / "a-file", "x")
    target = blocker / "sub" / "report.out"  # a folder under a file: never writable, even as root
    proc = cli(env, "run", "--run-id", "never", option, str(target))
    assert proc.returncode == 2, proc.stderr
    no_traceback(proc)
    assert str(target) in proc.stderr and option in proc.stderr and "is not a folder" in proc.stderr
    listed = cli(env, "runs", "list")
    assert "never" not in listed.stdout


def test_ci_outputs_of_a_ranking_are_refused(env, cand, out):
    proc = cli(env, "compare", "base", "cand", "base", "--junit", str(out / "r.xml"))
    assert proc.returncode == 2 and "--junit" in proc.stderr
    no_traceback(proc)


def test_a_run_without_baseline_skips_its_regression_gates(cand, out, junit_xsd):
    """base was the first run (nothing to compare with): its regression gate is a skipped testcase."""
    _, suite = suite_of(out / "junit-base.xml", junit_xsd)
    cases = cases_by_name(suite)
    assert list(cases) == [
        "mrr min 0.6",
        "hit@5 min 0.85",
        "empty_result_rate max 0",
        "answer_precision min 0.8",
        "chr min 0.75",
        "under_refusal_rate max 0.05",
        "over_refusal_rate max 0.1",
        "regression: mrr max_drop 0.02",
        "system_health max_error_rate 0.1",
    ]
    [skip] = cases["regression: mrr max_drop 0.02"].result
    assert isinstance(skip, junitparser.Skipped)
    assert skip.message == "no baseline run: nothing to regress against"
    # 4 answer gates warn (non-blocking, passing testcases); nothing fails.
    assert (suite.tests, suite.failures, suite.errors, suite.skipped) == (9, 0, 0, 1)


def test_a_failed_system_is_an_error_testcase(env, tmp_path, junit_xsd):
    """Every query of a real command system (``false``) fails: the system-health testcase is an <error>, the
    gates on its zero scores are failures, and the job summary says the system failed."""
    from tests.test_system_health import N, config

    system = {"kind": "command", "search_argv": [shutil.which("false"), "{query}"]}
    run_config = config(tmp_path, system, gates={"mrr": {"min": 0.5}}, default_gates=False)
    summary = write(tmp_path / "summary.md", "")
    proc = cli(
        env | {"GITHUB_STEP_SUMMARY": str(summary)},
        "run",
        "--run-id",
        "broken",
        "--config",
        str(run_config),
        "--baseline",
        "none",
        "--junit",
        str(tmp_path / "j.xml"),
    )
    assert proc.returncode == 1, proc.stderr[-3000:]
    no_traceback(proc)
    _, suite = suite_of(tmp_path / "j.xml", junit_xsd)
    cases = cases_by_name(suite)
    [error] = cases["system_health max_error_rate 0.1"].result
    assert isinstance(error, junitparser.Error)
    assert error.message == (
        f"system health: {N} of {N} queries failed (error_rate 1.0 > max 0.1): exit_code ×{N}; "
        "first: q00: exit_code: exit code 1; no stderr"
    )
    [failure] = cases["mrr min 0.5"].result
    assert failure.message == "mrr = 0.0000 misses ≥ 0.5"
    assert (suite.tests, suite.failures, suite.errors, suite.skipped) == (2, 1, 1, 0)
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("### kebab-eval run: ❌ 1 blocking gate(s) failed")
    assert f"\n> ❌ system health: {N} of {N} queries failed" in text
    # One tally: the health verdict is the JUnit <error>, the summary's and the CLI's "1 error".
    tally = "2 checks (1 gate + system health): 1 failed · 1 error"
    assert f"— {tally}\n" in text and f"  checks: {tally}\n" in proc.stdout
    assert "| system_health max_error_rate 0.1 | ❌ error | 1.0000 | 0.1 | +0.9000 |" in text


def test_golden_size_answers_from_the_two_runs(cand, env):
    """`golden size cand --against base`: the paired standard deviation of the per-query
    differences (re-read here from both runs' JSON exports), the change 92 queries detect and the
    queries a change of 0.02 needs — equal to statsmodels' power solver on those differences."""
    sized = cli(
        env, "golden", "size", "cand", "--against", "base", "--metric", "mrr", "--metric", "hit@5",
        "--change", "0.02", "--queries", "200", "--format", "json",
    )  # fmt: skip
    assert sized.returncode == 0, sized.stderr
    rows = {r["metric"]: r for r in json.loads(sized.stdout)["rows"] if r["slice"] == "all"}
    exports = {}
    for run in ("base", "cand"):
        doc = json.loads(cli(env, "export", run).stdout)
        exports[run] = {q["query_id"]: q["scores"] for q in doc["per_query"]}
    power = TTestPower()
    for metric in ("mrr", "hit@5"):
        d = np.array(
            [
                exports["cand"][q][metric] - exports["base"][q][metric]
                for q in exports["cand"]
                if exports["cand"][q].get(metric) is not None and exports["base"][q].get(metric) is not None
            ]
        )
        sd = float(np.std(d, ddof=1))
        row = rows[metric]
        assert row["paired"] is True and row["n"] == d.size and row["sd"] == pytest.approx(sd)
        if metric == "hit@5":  # 0/1: sized for exact McNemar, re-derived by a trinomial enumeration
            assert row["note"] == "exact McNemar"
            changed = float(np.mean(d != 0))
            assert exact_mcnemar_power(d.size, changed, row["mde"], 0.05) == pytest.approx(0.8, abs=1e-6)
            continue
        assert row["mde"] == pytest.approx(
            power.solve_power(nobs=d.size, alpha=0.05, power=0.8) * sd, rel=1e-3
        )
        assert row["mde_at"] == pytest.approx(
            power.solve_power(nobs=200, alpha=0.05, power=0.8) * sd, rel=1e-3
        )
        needed = power.solve_power(effect_size=0.02 / sd, alpha=0.05, power=0.8)
        assert row["queries_needed"] == math.ceil(needed - 1e-6)
    # The statistics page's example, run as written: the paired answer for mrr ±0.02.
    documented = shlex.split(docs_pages.snippet("bash", "kebab-eval golden size cand").text.strip())
    page = cli(env, *documented[1:])
    assert page.returncode == 0, page.stderr
    # … and its output, shown on the page, line for line.
    assert page.stdout.strip() == docs_pages.snippet("text", "golden-set sizing from cand").text.strip()
    mrr = rows["mrr"]
    assert re.search(
        rf"^mrr +all +92 +{mrr['sd']:.4f} +{mrr['mde']:.4f} +{mrr['queries_needed']}$",
        page.stdout,
        re.M,
    ), page.stdout
    text = cli(env, "golden", "size", "cand", "--metric", "mrr", "--change", "0.02", "--by", "category")
    assert text.returncode == 0, text.stderr
    assert "one run: sd(b − a) taken as the run's own sd" in text.stdout
    assert re.search(r"^mrr +category=factual +\d+ ", text.stdout, re.M)
    bad = cli(env, "golden", "size", "cand", "--metric", "error_rate", "--change", "2", "--by", "colour")
    assert bad.returncode == 2
    no_traceback(bad)
    assert "--metric: 'error_rate'" in bad.stderr and "--change: 2.0" in bad.stderr


def test_gate_resolution_is_flagged(cand, env, out):
    """`max_drop: 0.001` on mrr over 92 queries: the comparison warns from the paired differences
    (both runs' per-query mrr, re-read from the exports) naming the queries the bound would need;
    with compare.strict_resolution the comparison — and a run whose baseline is known before it
    starts — is refused (exit 2), naming the bound."""
    scores = {
        run: {
            q["query_id"]: q["scores"].get("mrr")
            for q in json.loads(cli(env, "export", run).stdout)["per_query"]
        }
        for run in ("base", "cand")
    }
    d = np.array(
        [
            v - scores["base"][q]
            for q, v in scores["cand"].items()
            if v is not None and scores["base"][q] is not None
        ]
    )
    sd = float(np.std(d, ddof=1))
    power = TTestPower()
    # Two gated metrics (mrr, hit@5): max_drop's level is α/2, the Holm family's — the report's MDE.
    resolvable = power.solve_power(nobs=d.size, alpha=0.025, power=0.8) * sd
    needed = math.ceil(power.solve_power(effect_size=0.001 / sd, alpha=0.025, power=0.8) - 1e-6)
    compared = cli(env, "compare", "base", "cand", "--config", str(out / "gates.yaml"), "--json")
    report = json.loads(compared.stdout)
    [flag] = [f for f in report["gate_resolution"] if f["metric"] == "mrr"]
    assert flag["kind"] == "max_drop" and flag["n"] == d.size == 92
    assert flag["source"] == "the paired differences of this comparison"
    assert flag["resolvable"] == pytest.approx(resolvable, rel=1e-3) and flag["queries"] == needed
    [row] = [r for r in report["per_metric"] if r["metric"] == "mrr"]
    assert row["mde"] == pytest.approx(flag["resolvable"], rel=1e-6)  # one figure, two places
    assert any(
        w.startswith("gates.regression.mrr.max_drop 0.001 is finer than 92 queries")
        for w in report["warnings"]
    )
    strict = write(out / "strict.yaml", GATES + "compare: {strict_resolution: true}\n")
    refused = cli(env, "compare", "base", "cand", "--config", str(strict))
    assert refused.returncode == 2
    no_traceback(refused)
    assert "gates.regression.mrr.max_drop" in refused.stderr and f"about {needed:,} queries" in refused.stderr
    before = write(
        out / "strict-before.yaml",
        GATES.replace("baseline: auto", "baseline: base") + "compare: {strict_resolution: true}\n",
    )
    run = cli(env, "run", "--run-id", "never", "--config", str(before))
    assert run.returncode == 2 and "gates.regression.mrr.max_drop" in run.stderr
    no_traceback(run)
    assert "never" not in cli(env, "runs", "list").stdout  # refused before any run existed
