"""The documentation is whole: every snippet on every page has a test that runs it, and every section
of the README as it was before the documentation site (2,934 lines, 23 sections) has a page that holds it now.

**Snippets.** :data:`RUN_BY` says, for each fenced block of the README and of docs/site/**/*.md,
which test runs it — found by the block's language and what it holds. A block no entry matches
(a new snippet nobody runs), a block two entries match, an entry no block matches (a snippet gone or
changed) and an entry naming a test that does not exist all fail. A ``text`` block (and the JUnit
and PR-comment samples) is output shown to the reader — a transcript, a diagram — never run; its
entry says what shows it. Every ``yaml`` block is loaded by tests/test_docs_snippets.py, which
names each block it cannot place.

**Sections.** :data:`README_SECTIONS` is the old README's table of contents — every heading, and
every paragraph that opened with a bold lead-in — with the page that holds it now.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest

from tests import docs_pages
from tests.conftest import REPO


@dataclass(frozen=True)
class Runs:
    """Blocks of language ``lang`` that hold ``holds`` are run by ``test`` (``path::name``), or,
    for output shown to the reader, ``test`` is None and ``shown`` says what it is."""

    lang: str
    holds: str
    test: str | None = None
    shown: str = ""


_COMPONENT = "tests/orchestration/test_component.py::"
_TEAM = "tests/orchestration/test_team_project_installed.py::"

_CALIBRATION = "tests/judge/test_calibration.py::"

RUN_BY: tuple[Runs, ...] = (
    # getting started and the README
    Runs("bash", "kebab-eval judge label j1", _CALIBRATION + "test_label_then_calibrate_a_stored_judged_run"),
    Runs(
        "bash",
        "kebab-eval judge label p2 --against p1",
        "tests/judge/test_provisional_people.py::"
        "test_people_label_pooled_hits_and_the_comparison_corrects_its_provisional_metrics",
    ),
    Runs(
        "json",
        '{"criterion": "groundedness", "query_id": "fact-028"',
        _CALIBRATION + "test_the_documented_label_line",
    ),
    Runs(
        "bash",
        "pip install -e . && kebab-eval run",
        "tests/test_docs_commands.py::test_the_readme_set_up_commands_are_what_ci_runs",
    ),
    Runs(
        "bash",
        "dagster dev -h 127.0.0.1 -m kebab_eval_pipeline ",
        "tests/test_docs_commands.py::test_open_the_ui_starts_dagster_dev_with_the_code_location_loaded",
    ),
    Runs(
        "bash",
        "KEBAB_EVAL_CONFIG=docs/examples/ci/eval.yaml",
        "tests/test_docs.py::test_the_ci_snippet_runs_as_written_on_a_clone",
    ),
    Runs(
        "bash",
        "mkdocs build -f docs/mkdocs.yml",
        "tests/test_docs_site.py::test_the_readme_commands_build_serve_and_search_the_site_as_written",
    ),
    Runs(
        "bash",
        "kebab-eval run --run-id chunks-300",
        "tests/test_docs_commands.py::test_a_first_comparison_runs_as_written_and_says_what_the_page_says",
    ),
    # guides and explanations
    Runs(
        "bash",
        "kebab-eval history --role regular",
        "tests/orchestration/test_run_roles.py::test_the_documented_role_and_outcome_commands_run_as_written",
    ),
    Runs(
        "bash",
        "trec_eval -c -q -l 1",
        "tests/test_docs_commands.py::test_the_trec_eval_commands_reproduce_the_stored_per_query_scores",
    ),
    Runs(
        "bash",
        "kebab-eval golden suggest cand --out patch.yaml",
        "tests/test_docs_commands.py::test_the_suspect_gold_review_runs_as_written",
    ),
    Runs(
        "bash",
        "kebab-eval bisect hit@5 --since nightly-0412",
        "tests/test_docs_commands.py::test_the_bisect_examples_run_as_written",
    ),
    Runs(
        "bash",
        "cp docs/deploy/dagster.yaml",
        "tests/test_docs_commands.py::test_the_postgres_storage_commands_set_what_the_instance_file_reads",
    ),
    # recipes
    Runs(
        "python",
        "def search(query, k):  # your retriever",
        "tests/systems/adapters/test_command_jsonl.py::test_the_documented_example_wrapper_works_and_is_quoted_verbatim",
    ),
    Runs(
        "python",
        'evaluation_chain("staging", config="eval/staging.yaml")',
        "tests/test_docs_commands.py::test_two_chains_side_by_side_as_the_recipe_writes_them",
    ),
    Runs(
        "python",
        "index_quality = evaluation_check(",
        "tests/test_docs_commands.py::test_the_gate_on_the_teams_asset_as_the_recipe_writes_it",
    ),
    Runs(
        "bash",
        "kebab-eval runs list --chain staging",
        "tests/orchestration/test_team_project_installed.py::test_an_installed_team_project_and_the_cli_share_one_address_for_its_runs",
    ),
    Runs(
        "python",
        "# my_rag/",
        "tests/frameworks/test_heading_recipes.py::test_every_chunk_of_a_documented_recipe_has_its_section",
    ),
    Runs("python", "OTLPJsonFile", "tests/frameworks/test_otlp_recipe.py::test_the_recipe_is_complete_code"),
    Runs(
        "sh",
        'pip install -e ".[postgres,celery]"',
        "tests/test_docs_commands.py::test_the_celery_install_lines_name_real_extras_and_packages",
    ),
    Runs(
        "sh",
        "celery -A kebab_eval_pipeline.celery_worker worker",
        "tests/orchestration/test_celery.py::test_demo_run_on_celery_workers_equals_the_in_process_run",
    ),
    Runs(
        "sh",
        "dagster asset materialize",
        "tests/orchestration/test_celery.py::test_the_documented_run_commands_are_what_the_tests_run",
    ),
    Runs("bash", "gh api", "tests/test_docs_commands.py::test_the_pr_comment_script_passes_shellcheck"),
    Runs(
        "dockerfile",
        "FROM python:3.11-slim",
        "tests/test_docs_commands.py::test_the_kubernetes_image_names_what_the_repository_and_its_extras_hold",
    ),
    Runs(
        "text",
        "run first — demo-fermentation",
        "tests/test_docs_commands.py::test_the_first_runs_output_is_what_the_page_shows",
    ),
    # the examples' own READMEs
    Runs(
        "bash",
        "dg check defs",
        " + ".join(
            [
                _COMPONENT + "test_the_team_example_passes_dg_check_defs_as_its_readme_says",
                _TEAM + "test_an_installed_team_project_and_the_cli_share_one_address_for_its_runs",
                _TEAM + "test_the_example_readme_opens_the_teams_ui_with_dagster_dev",
            ]
        ),
    ),
    Runs(
        "bash",
        "kebab-eval golden size cand --against base --metric mrr --change 0.02",
        "tests/ci/test_ci_outputs.py::test_golden_size_answers_from_the_two_runs",
    ),
    Runs(
        "text",
        "golden-set sizing from cand (paired with base)",
        "tests/ci/test_ci_outputs.py::test_golden_size_answers_from_the_two_runs",
    ),
    Runs(
        "bash",
        "kebab-eval golden diff golden-v1.yaml golden-v2.yaml",
        "tests/golden/test_cli_diff.py::test_the_documented_commands_run_as_written",
    ),
    Runs(
        "bash",
        "kebab-eval golden validate docs/examples/kebab-docs/",
        "tests/test_docs_commands.py::test_the_kebab_docs_example_runs_as_its_readme_says",
    ),
    # output shown to the reader
    Runs("text", "golden_file ─┐", shown="the chain, as the asset graph draws it"),
    Runs("text", "retrieval_results: 40/105 queries", shown="progress lines of a run in a CI log"),
    Runs("text", "question (empty line to finish)>", shown="a `golden record` session"),
    Runs(
        "text",
        "$ kebab-eval golden health",
        "tests/test_docs_commands.py::test_a_first_comparison_runs_as_written_and_says_what_the_page_says",
    ),
    Runs("text", "1 change:", shown="`bisect` output"),
    Runs("text", "retrieval_results.plan_retrieval", shown="the steps of a sharded run"),
    Runs("xml", "<testcase", shown="a JUnit testcase of a failed regression gate"),
    Runs("markdown", "<!-- kebab-eval -->", shown="a PR comment"),
)


def claims(snippet: docs_pages.Snippet) -> list[Runs]:
    return [r for r in RUN_BY if r.lang == snippet.lang and r.holds in snippet.text]


def test_every_snippet_of_every_page_has_a_test_that_runs_it():
    unclaimed, twice = [], []
    for snippet in docs_pages.snippets():
        if snippet.lang == "yaml":
            continue  # tests/test_docs_snippets.py runs every one
        found = claims(snippet)
        if not found:
            unclaimed.append(f"{snippet.where} ```{snippet.lang}: {snippet.text[:60]!r}")
        elif len(found) > 1:
            twice.append(f"{snippet.where}: {[r.holds for r in found]}")
    assert not unclaimed, "blocks no test runs (add a test, and an entry to RUN_BY):\n" + "\n".join(unclaimed)
    assert not twice, twice


def test_every_entry_matches_a_block_and_names_a_real_test():
    blocks = [s for s in docs_pages.snippets() if s.lang != "yaml"]
    for entry in RUN_BY:
        assert any(entry in claims(s) for s in blocks), f"no block holds {entry.holds!r} any more"
        if entry.test is None:
            assert entry.lang in ("text", "xml", "markdown") and entry.shown, entry
            continue
        for test in entry.test.split(" + "):  # a block some of whose lines other tests run
            path, name = test.split("::")
            source = (REPO / path).read_text(encoding="utf-8")
            assert re.search(rf"^def {re.escape(name)}\(", source, re.M), f"{test} does not exist"


def test_every_block_says_its_language():
    """A fence without a language would be neither run nor shown as anything: each says what it is."""
    bare = [s.where for s in docs_pages.snippets("")]
    assert not bare, bare


# -- the README's sections, where they are now ----------------------------------------------------

#: (section, the heading it stood under or None for a heading, the page that holds it now), in the
#: old README's order: every heading and every bold lead-in paragraph. A heading moved to a page of
#: its own is that page's title (its first line), so only the page is checked for it.
README_SECTIONS: tuple[tuple[str, str | None, str], ...] = (
    ("Documentation site", None, "README.md"),
    ("Set-up: two commands", None, "README.md"),
    ("Open the UI", None, "getting-started/ui-tour.md"),
    ("In your own Dagster project", None, "recipes/dagster-project.md"),
    ("A whole chain, under a name.", "In your own Dagster project", "recipes/dagster-project.md"),
    ("Gate your own asset.", "In your own Dagster project", "recipes/dagster-project.md"),
    ("A chain as a Dagster Component.", "In your own Dagster project", "recipes/dagster-project.md"),
    ("Where a chain's runs are", None, "recipes/dagster-project.md"),
    ("CI usage", None, "getting-started/ci-gate.md"),
    ("Reports for CI: JUnit, job summary, PR comment", None, "recipes/ci.md"),
    ("JUnit XML.", "Reports for CI: JUnit, job summary, PR comment", "recipes/ci.md"),
    ("Job summary and PR comment", "Reports for CI: JUnit, job summary, PR comment", "recipes/ci.md"),
    ("Posting the comment.", "Reports for CI: JUnit, job summary, PR comment", "recipes/ci.md"),
    ("Ready-made jobs", "Reports for CI: JUnit, job summary, PR comment", "recipes/ci.md"),
    ("Configuration", None, "guides/configuration.md"),
    ("Why 10%.", "Configuration", "guides/configuration.md"),
    ("Storage", None, "guides/storage.md"),
    ("PostgreSQL instance storage", None, "guides/storage.md"),
    ("Gates", None, "guides/gates.md"),
    ("Automation", None, "guides/automation.md"),
    ("CLI reference", None, "guides/command-line.md"),
    ("What `run` and `rejudge` print while they work", "CLI reference", "guides/command-line.md"),
    ("Tables and width.", "CLI reference", "guides/command-line.md"),
    ("Run ids", None, "guides/command-line.md"),
    ("Golden sets", None, "guides/golden-sets.md"),
    ("Ids are the text you wrote.", "Golden sets", "guides/golden-sets.md"),
    ("Recording a golden set from live search", None, "guides/golden-sets.md"),
    ("Golden-set health", None, "guides/golden-sets.md"),
    ("In Dagster", "Golden-set health", "guides/golden-sets.md"),
    ("Standard IR datasets (BEIR, TREC, ranx)", None, "recipes/ir-datasets.md"),
    ("The round trip, tested", "Standard IR datasets (BEIR, TREC, ranx)", "recipes/ir-datasets.md"),
    ("Metrics", None, "explanations/numbers.md"),
    ("What a run cannot measure", None, "explanations/numbers.md"),
    ("What the system spent.", "What a run cannot measure", "explanations/numbers.md"),
    ("Credited hits.", "What a run cannot measure", "explanations/numbers.md"),
    ("Relevance level.", "What a run cannot measure", "explanations/numbers.md"),
    ("Re-scoring with trec_eval", None, "explanations/numbers.md"),
    ("Runs stored before this definition", "Re-scoring with trec_eval", "explanations/numbers.md"),
    ("Matching", None, "explanations/matching.md"),
    ("Which `k` is sent.", "Matching", "explanations/matching.md"),
    ("Recency rules.", "Matching", "explanations/matching.md"),
    ("Hallucinations.", "Matching", "explanations/matching.md"),
    ("Scopes.", "Matching", "explanations/matching.md"),
    ("Comparison", None, "explanations/statistics.md"),
    ("Reviewing suspect gold.", "Comparison", "explanations/statistics.md"),
    ("Repeated runs", None, "explanations/statistics.md"),
    ("Ranking many runs", None, "guides/many-runs.md"),
    ("In Dagster:", "Ranking many runs", "guides/many-runs.md"),
    ("Finding where a metric changed (bisect)", None, "guides/many-runs.md"),
    ("In Dagster:", "Finding where a metric changed (bisect)", "guides/many-runs.md"),
    ("Configuration sweeps", None, "guides/many-runs.md"),
    ("Variant ids.", "Configuration sweeps", "guides/many-runs.md"),
    ("In Dagster", "Configuration sweeps", "guides/many-runs.md"),
    ("Baselines", None, "explanations/baselines.md"),
    ("What a run is: role and outcome.", "Baselines", "explanations/baselines.md"),
    ("What is one system.", "Baselines", "explanations/baselines.md"),
    ("Settings", None, "explanations/baselines.md"),
    ("LLM judge", None, "guides/judge.md"),
    ("What is judged.", "LLM judge", "guides/judge.md"),
    ("Suspect gold.", "LLM judge", "guides/judge.md"),
    ("Reading a reply.", "LLM judge", "guides/judge.md"),
    ("Pinning and reproducibility.", "LLM judge", "guides/judge.md"),
    ("Spot check.", "LLM judge", "guides/judge.md"),
    ("Metrics", "LLM judge", "guides/judge.md"),
    ("The default local model is weak.", "LLM judge", "guides/judge.md"),
    ("`kebab-eval judge serve`", "LLM judge", "guides/judge.md"),
    ("Cost and speed", "LLM judge", "guides/judge.md"),
    ("The reference system", None, "guides/reference-system.md"),
    ("Evaluating your own system", None, "recipes/your-system.md"),
    ("Hits and answers on the wire.", "Evaluating your own system", "recipes/your-system.md"),
    ("Mapping language.", "Evaluating your own system", "recipes/your-system.md"),
    (
        "Framework output, as each serialises it by default",
        "Evaluating your own system",
        "recipes/frameworks.md",
    ),
    ("command", "Evaluating your own system", "recipes/command.md"),
    ("Processes die with the run.", "Evaluating your own system", "recipes/command.md"),
    ("command, persistent", "Evaluating your own system", "recipes/command.md"),
    ("http", "Evaluating your own system", "recipes/http.md"),
    ("replay", "Evaluating your own system", "recipes/replay.md"),
    ("Traces (OpenInference / OTLP).", "Evaluating your own system", "recipes/openinference.md"),
    ("python", "Evaluating your own system", "recipes/python.md"),
    ("Isolation.", "Evaluating your own system", "recipes/python.md"),
    ("Versions.", "Evaluating your own system", "recipes/your-system.md"),
    ("A real framework, end to end.", "Evaluating your own system", "recipes/your-system.md"),
    ("Adding a system under test", None, "development/adding-a-system.md"),
    ("Layout", None, "development/layout.md"),
    ("Sharding", None, "guides/scale-out.md"),
    ("Reliability, scale-out and security", None, "guides/scale-out.md"),
    ("Dependencies and why", None, "README.md"),
)
#: Old top-level sections that became a whole page, or stayed in the README.
WHOLE_PAGES = {
    "Documentation site", "Set-up: two commands", "Open the UI", "In your own Dagster project", "CI usage",
    "Configuration", "CLI reference", "Golden sets", "Standard IR datasets (BEIR, TREC, ranx)", "Metrics",
    "Matching", "Comparison", "Baselines", "LLM judge", "The reference system", "Evaluating your own system",
    "Adding a system under test", "Layout", "Gates", "Automation",
}  # fmt: skip


@pytest.mark.parametrize(("section", "under", "page"), README_SECTIONS, ids=lambda v: str(v))
def test_each_section_of_the_old_readme_has_its_page(section, under, page):
    text = docs_pages.page(page)
    if under is None and section in WHOLE_PAGES:
        assert text.strip(), page
    elif under is None:
        headings = re.findall(r"^#{1,6} (.+?)\s*$", text, re.M)
        assert section in headings, f"{page} has no heading {section!r}"
    else:
        assert f"**{section}**" in text, f"{page} has no paragraph opening {section!r}"


def test_the_readme_fits_on_a_screen_or_two():
    assert len(docs_pages.page("README.md").splitlines()) <= 200
