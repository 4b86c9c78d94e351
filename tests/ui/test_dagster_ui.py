"""What a person sees of two evaluation runs in the Dagster UI, in headless Chromium (issue 9).

A real webserver over a real instance (see conftest.py): the run_metrics asset shows both run
partitions, the second run's MRR and chunker version, and its gates as checks (a blocking one
passed, a warning failed); comparison_report shows the Markdown report and the path of the HTML
report, whose charts render; the evaluation group's graph holds the inputs and the chain, the
system under test is a resource with its effective kind and mode, run_metrics leads with the
summary table (gates beside their metrics) and query_scores with its worst queries. No page
logs a console error, throws, or gets an HTTP error, and the webserver logs no error while
serving them. Every page is saved as a screenshot
($KEBAB_EVAL_UI_SCREENSHOTS: stable names for docs/ui/).
"""

from __future__ import annotations

from pathlib import Path

from kebab_eval_pipeline.compare.html import CHART_IDS
from kebab_eval_pipeline.orchestration.assets import headline_columns
from kebab_eval_pipeline.reporting.per_query import worst_scores_first
from tests.browser import open_in_chromium
from tests.ui.conftest import CHUNKERS, FAILING_WARNING, FIRST_RUN, PASSING_BLOCKING, SECOND_RUN
from tests.ui.dagster_ui import (
    VIEWPORT,
    assert_clean,
    center,
    check_status,
    detail_value,
    expect_metadata,
    expect_text,
    expect_visible,
    js_number,
    metadata_row,
    metadata_value,
    open_dagster,
    open_tab,
    partition_list,
    screenshot,
)

ASSETS = (
    "golden_file",
    "system_under_test",
    "golden_set",
    "retrieval_results",
    "judge",
    "query_scores",
    "run_metrics",
    "comparison_report",
)


def test_run_metrics_shows_partitions_mrr_chunker_version_and_gate_checks(eval_runs, webserver, tmp_path):
    mark = webserver.log_mark()
    metrics = {run_id: eval_runs.metrics(run_id)[0] for run_id in (FIRST_RUN, SECOND_RUN)}
    assert metrics[FIRST_RUN]["mrr"] != metrics[SECOND_RUN]["mrr"]  # so the UI shows each partition's own

    with open_dagster(webserver.url("/assets/run_metrics", partition=SECOND_RUN)) as visit:
        page = visit.page
        # Overview: the latest materialization, the second run's.
        expect_metadata(page, "chunker_version", CHUNKERS[SECOND_RUN])
        expect_metadata(page, "metric/mrr", js_number(metrics[SECOND_RUN]["mrr"]))
        # The UI prints float metadata as JavaScript's String(number); js_number is that, here checked
        # against this browser for every stored metric.
        values = [v for v in metrics[SECOND_RUN].values() if v is not None]
        assert page.evaluate("xs => xs.map(String)", values) == [js_number(v) for v in values]
        screenshot(visit, "run_metrics", tmp_path)  # the top: status, latest checks, first metadata

        # Partitions: both runs listed, oldest first; the deep link selects the second, a click the first.
        page.goto(webserver.url("/assets/run_metrics", view="partitions", partition=SECOND_RUN))
        expect_text(partition_list(page), [FIRST_RUN, SECOND_RUN], "the partition list")
        expect_metadata(page, "chunker_version", CHUNKERS[SECOND_RUN])
        expect_metadata(page, "metric/mrr", js_number(metrics[SECOND_RUN]["mrr"]))
        screenshot(visit, "run_metrics_partitions", tmp_path)
        partition_list(page).filter(has_text=FIRST_RUN).click()
        expect_metadata(page, "chunker_version", CHUNKERS[FIRST_RUN])
        expect_metadata(page, "metric/mrr", js_number(metrics[FIRST_RUN]["mrr"]))

        # Checks: every gate of the config, each with its latest result and, on a click, its details.
        open_tab(page, "Checks")
        assert check_status(page, PASSING_BLOCKING) == ("Succeeded", "check_circle")
        assert check_status(page, FAILING_WARNING) == ("Failed", "warning_outline")
        for check, kind, result, icon in (
            (PASSING_BLOCKING, "blocking", "Passed", "check_circle"),
            (FAILING_WARNING, "non-blocking", "Failed", "warning_outline"),
        ):
            gate = eval_runs.gate(SECOND_RUN, check)
            assert (gate["blocking"], gate["passed"]) == (kind == "blocking", result == "Passed"), gate
            page.locator(f'[title="{check}"]').first.click()
            # The reason names the check's own metric and value: the detail pane now shows this check.
            expect_visible(page.get_by_text(gate["reason"], exact=True).first, f"{check}: its reason")
            expect_visible(page.get_by_text(f"This is a {kind} asset check."), f"{check}: {kind}")
            expect_text(detail_value(page, "Evaluation result"), result, f"{check}: evaluation result")
            assert (
                detail_value(page, "Evaluation result").get_by_role("img").get_attribute("aria-label") == icon
            )
            expect_text(detail_value(page, "Partition"), SECOND_RUN, f"{check}: partition")
            # A warning says so in the latest execution's description and metadata (the CLI's word);
            # the icon beside "Failed" is Dagster's yellow warning, not the red failure cross.
            outcome = "pass" if result == "Passed" else "warn"
            expect_metadata(page, "outcome", outcome)
            if outcome == "warn":
                said = f"warning (non-blocking, the run goes on): {gate['reason']}"
                expect_visible(page.get_by_text(said, exact=True), f"{check}: described as a warning")
            expect_metadata(page, "value", js_number(gate["value"]))
            expect_metadata(page, "threshold", js_number(gate["threshold"]))
        screenshot(visit, "run_metrics_checks", tmp_path)
        assert_clean(visit, webserver.base_url)
    webserver.assert_no_errors_since(mark)


def test_comparison_report_shows_markdown_and_html_report_with_charts(eval_runs, webserver, tmp_path):
    mark = webserver.log_mark()
    _, info = eval_runs.store.read("comparison_report", SECOND_RUN)
    headings = [
        line.lstrip("#").strip().replace("`", "")
        for line in info["markdown"].splitlines()
        if line.startswith("#")
    ]
    assert headings[0] == f"Comparison: {SECOND_RUN} vs baseline {FIRST_RUN}"

    with open_dagster(webserver.url("/assets/comparison_report", partition=SECOND_RUN)) as visit:
        page = visit.page
        expect_metadata(page, "baseline_run", FIRST_RUN)
        expect_metadata(page, "chunker_version_match", str(info["chunker_version_match"]))
        html = metadata_value(page, "report_html")
        assert html == eval_runs.store.file_path("comparison_report", SECOND_RUN, "comparison.html")
        center(metadata_row(page, "report_html"))
        screenshot(visit, "comparison_report", tmp_path)

        # Markdown metadata sits behind a link that opens it, rendered, in a dialog.
        metadata_row(page, "report").get_by_text("[Show Markdown]").click()
        dialog = page.get_by_role("dialog")
        for heading in headings:
            expect_visible(dialog.get_by_role("heading", name=heading, exact=True), f"heading {heading!r}")
        for chunker in CHUNKERS.values():  # the versions table: both runs' chunker side by side
            expect_visible(dialog.get_by_role("cell", name=chunker, exact=True).first, chunker)
        center(dialog.get_by_role("heading", level=1))
        screenshot(visit, "comparison_report_markdown", tmp_path)
        dialog.get_by_role("button", name="Close").click()
        assert_clean(visit, webserver.base_url)

    # The HTML report at the path the UI shows: its charts are drawn, it needs nothing but itself.
    with open_in_chromium(Path(html), viewport=VIEWPORT) as report:
        for chart_id in CHART_IDS:
            chart = report.page.locator(f"#{chart_id} svg")
            box = chart.bounding_box()
            assert chart.is_visible() and box and box["width"] > 300 and box["height"] > 100, (chart_id, box)
        assert report.requests == [Path(html).as_uri()] and report.blocked_requests == []
        assert_clean(report)
        report.page.locator(f"#{CHART_IDS[0]}").evaluate("e => e.scrollIntoView({block: 'start'})")
        screenshot(report, "comparison_html", tmp_path)  # the charts
    webserver.assert_no_errors_since(mark)


def test_asset_graph_system_resource_summary_and_worst_first_query_table(eval_runs, webserver, tmp_path):
    mark = webserver.log_mark()
    location = "kebab_eval_pipeline"  # -m kebab_eval_pipeline: the name workspace.yaml gives it too
    with open_dagster(webserver.url(f"/locations/{location}/asset-groups/evaluation/lineage")) as visit:
        page = visit.page
        # One group holds the two observed inputs and the whole chain.
        for asset in ASSETS:
            expect_visible(page.get_by_text(asset, exact=True).first, f"asset {asset} in the graph")
        screenshot(visit, "asset_graph", tmp_path)

        # The system under test is a resource: its class, description and effective settings.
        page.goto(webserver.url(f"/locations/{location}/resources/system_under_test"))
        expect_visible(page.get_by_text("SystemUnderTestResource", exact=True).first, "the resource type")
        expect_visible(page.get_by_text("The system under test:", exact=False).first, "its description")
        expect_metadata(page, "kind", '"reference"')
        expect_metadata(page, "mode", '"lexical"')
        expect_metadata(page, "chunk_size", "800")  # the code location's config: the default chunker
        screenshot(visit, "system_under_test_resource", tmp_path)

        # run_metrics: owners, kinds and the stage tag beside it; the summary table first.
        page.goto(webserver.url("/assets/run_metrics", partition=SECOND_RUN))
        for text in ("evaluation", "pandas", "Parquet", "stage: metrics"):
            expect_visible(page.get_by_text(text, exact=True).first, f"definition: {text}")
        summary = metadata_row(page, "summary")
        mrr = eval_runs.metrics(SECOND_RUN)[0]["mrr"]
        for cells in (["mrr", f"{mrr:.4f}", "≥0.3 pass"], ["hit@1", "≥0.99 warn"]):
            row = summary.locator("tr").filter(has=page.get_by_role("cell", name=cells[0], exact=True))
            for cell in cells:
                expect_visible(row.get_by_role("cell", name=cell, exact=True), f"summary: {cells[0]} {cell}")
        expect_visible(summary.get_by_text(CHUNKERS[SECOND_RUN]).first, "summary: the chunker version")

        # query_scores: the per-query table, worst first, and the path of the whole Parquet file.
        page.goto(webserver.url("/assets/query_scores", partition=SECOND_RUN))
        tables, _ = eval_runs.store.read("query_scores", SECOND_RUN)
        golden = eval_runs.store.read("golden_set", SECOND_RUN)[0]["queries"]
        worst = worst_scores_first(tables["query_scores"], headline_columns([1, 3, 5, 10]), golden)
        rows = metadata_row(page, "per_query").locator("tr")
        for i in range(5):
            cells = rows.nth(i + 1).locator("td")  # row 0: the column headers
            expect_text(cells.nth(0), worst["query_id"][i], f"per_query row {i}: query id")
            expect_text(cells.nth(1), worst["issue"][i], f"per_query row {i}: issue")
        assert worst["issue"][0] != "ok"
        path = eval_runs.store.table_path("query_scores", SECOND_RUN, "query_scores")
        assert metadata_value(page, "file/query_scores") == path
        screenshot(visit, "query_scores", tmp_path)
        assert_clean(visit, webserver.base_url)
    webserver.assert_no_errors_since(mark)


def test_no_community_dialog_over_the_asset_graph_on_a_first_visit(eval_runs, webserver, tmp_path):
    """The dagster.yaml `kebab-eval` created switches Dagster's "Join the Dagster community" dialog
    off: a browser that never dismissed it (no localStorage flag, no click) does not get it."""
    import json
    import urllib.request

    assert "nux:\n  enabled: false" in (eval_runs.home / "dagster.yaml").read_text()
    request = urllib.request.Request(
        webserver.url("/graphql"),
        data=json.dumps({"query": "{ shouldShowNux }"}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as resp:  # what the dialog asks the server
        assert json.load(resp) == {"data": {"shouldShowNux": False}}
    location = "kebab_eval_pipeline"  # -m kebab_eval_pipeline: the name workspace.yaml gives it too
    url = webserver.url(f"/locations/{location}/asset-groups/evaluation/lineage")
    with open_in_chromium(url, viewport=VIEWPORT, timeout_ms=60_000) as visit:
        page = visit.page
        expect_visible(page.get_by_text("run_metrics", exact=True).first, "the asset graph")
        page.wait_for_timeout(3_000)  # the dialog opens 1 s after the page asked the server
        assert page.get_by_text("Join the Dagster community").count() == 0
        assert page.get_by_role("dialog").count() == 0
        screenshot(visit, "asset_graph_first_visit", tmp_path)
