"""The evaluation inside a team's own Dagster project, as a person sees it in the UI (issue 28).

A real webserver over the team project of docs/examples/dagster-project (``-m
team_search.definitions``), after tests/ui/team_runs.py materialized a good and a headingless
index (the blocking ``index_quality`` check passed, then failed and kept ``deploy_index`` from
running), two runs of the ``staging`` chain, its ``regression_bisect``, its chunking sweep and
leaderboard, ``golden_health`` on two golden versions and a freshness tick. Each
page is checked for what matters and saved as a screenshot ($KEBAB_EVAL_UI_SCREENSHOTS).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kebab_eval_pipeline.chain.artifacts import metrics_from_table
from kebab_eval_pipeline.store.runs import RunStore
from tests.browser import require_browser
from tests.conftest import REPO
from tests.ui.dagster_ui import (
    Webserver,
    assert_clean,
    center,
    check_status,
    dagster_webserver,
    expect_visible,
    metadata_value,
    open_dagster,
    open_tab,
    screenshot,
)

PROJECT = REPO / "docs" / "examples" / "dagster-project"
LOCATION = "team_search.definitions"


@dataclass
class TeamInstance:
    home: Path
    facts: dict
    server: Webserver
    storage: Path


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TeamInstance]:
    require_browser()
    root = tmp_path_factory.mktemp("team-ui")
    home = root / "dagster_home"
    home.mkdir()
    # no "join the community" dialog, as the dagster.yaml `kebab-eval` writes
    (home / "dagster.yaml").write_text("nux:\n  enabled: false\ntelemetry:\n  enabled: false\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KEBAB_EVAL_", "DAGSTER_"))}
    env |= {
        "DAGSTER_HOME": str(home),
        "TEAM_INDEX_ROOT": str(root / "index"),
        "KEBAB_EVAL_STORAGE": str(root / "artifacts"),
        "PYTHONPATH": os.pathsep.join([str(PROJECT), str(REPO)]),
    }
    if os.environ.get("KEBAB_EVAL_INDEX_CACHE"):  # the session's (tests/conftest.py): indexes reused
        env["KEBAB_EVAL_INDEX_CACHE"] = os.environ["KEBAB_EVAL_INDEX_CACHE"]
    facts_file = root / "facts.json"
    done = subprocess.run(
        [sys.executable, "-m", "tests.ui.team_runs", str(facts_file)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    facts = json.loads(facts_file.read_text())
    with dagster_webserver(home, env, root / "webserver.log", module=LOCATION) as server:
        server.assert_no_errors_since(0)
        yield TeamInstance(home, facts, server, root / "artifacts")


def test_the_blocking_check_on_the_teams_index_and_the_run_it_stopped(team, tmp_path):
    good, bad = team.facts["good"], team.facts["bad"]
    assert (good["passed"], good["success"], bad["passed"], bad["success"]) == (True, True, False, False)
    server = team.server
    mark = server.log_mark()
    with open_dagster(server.url(f"/locations/{LOCATION}/asset-groups/search/lineage")) as visit:
        page = visit.page
        for asset in ("search_index", "deploy_index"):
            expect_visible(page.get_by_text(asset, exact=True).first, f"{asset} in the team's graph")
        screenshot(visit, "team_search_graph", tmp_path)

        # search_index → Checks: index_quality, failed on the latest (headingless) build
        page.goto(server.url("/assets/search_index"))
        open_tab(page, "Checks")
        status, _ = check_status(page, "index_quality")
        assert status == "Failed"
        page.get_by_title("index_quality").first.click()
        expect_visible(page.get_by_text("gate_mrr_min", exact=False).first, "the failed gate")
        assert metadata_value(page, "missed_by") == "0.5"
        assert metadata_value(page, "threshold") == "0.5"
        screenshot(visit, "team_index_check_failed", tmp_path)

        # the run of the bad build: the check failed, deploy_index never ran
        page.goto(server.url(f"/runs/{bad['dagster_run']}"))
        expect_visible(page.get_by_text("search_index_index_quality", exact=True).first, "the check's step")
        expect_visible(page.get_by_text("Failure", exact=True).first, "the run's status")
        expect_visible(
            page.get_by_text("Dependencies for step deploy_index failed", exact=False).first,
            "deploy_index not executed",
        )
        screenshot(visit, "team_run_blocked", tmp_path)
        assert_clean(visit, server.base_url)
    server.assert_no_errors_since(mark)


def test_two_chains_their_schedules_sensors_bisect_and_freshness(team, tmp_path):
    server = team.server
    mark = server.log_mark()
    with open_dagster(server.url(f"/locations/{LOCATION}/asset-groups/staging_evaluation/lineage")) as visit:
        page = visit.page
        for asset in ("golden_set", "run_metrics", "comparison_report", "regression_bisect"):
            expect_visible(page.get_by_text(asset, exact=True).first, f"staging {asset}")
        screenshot(visit, "team_staging_chain", tmp_path)

        page.goto(server.url("/automation"))
        for chain in ("staging", "production"):
            for name in ("nightly_eval_schedule", "system_version_sensor", "freshness_check_sensor"):
                expect_visible(page.get_by_text(f"{chain}__{name}", exact=True).first, f"{chain} {name}")
        screenshot(visit, "team_automation", tmp_path)

        page.goto(server.url(f"/locations/{LOCATION}/schedules/staging__nightly_eval_schedule"))
        expect_visible(page.get_by_text("Europe/Berlin", exact=True).first, "the schedule's timezone")
        expect_visible(page.get_by_text("0 2 * * *", exact=False).first, "the schedule's cron")
        screenshot(visit, "team_nightly_schedule", tmp_path)

        page.goto(server.url("/assets/staging/regression_bisect"))
        assert metadata_value(page, "changes") in ("0", "1")
        expect_visible(page.get_by_text("r1", exact=False).first, "the runs bisected")
        screenshot(visit, "team_regression_bisect", tmp_path)

        page.goto(server.url("/assets/staging/system_under_test"))
        open_tab(page, "Checks")
        status, _ = check_status(page, "fresh_passing_evaluation")
        assert status == ("Succeeded" if team.facts["freshness"] == [True] else "Failed")
        screenshot(visit, "team_freshness_check", tmp_path)
        assert_clean(visit, server.base_url)
    server.assert_no_errors_since(mark)


def test_sweep_leaderboard_and_golden_health_trend(team, tmp_path):
    server = team.server
    mark = server.log_mark()
    store = RunStore(str(team.storage / "staging"))
    mrr = {
        run_id: metrics_from_table(store.read("run_metrics", run_id)[0]["metrics"])[0]["mrr"]
        for run_id in team.facts["sweep_variants"]
    }
    assert len(mrr) == 2 and len(set(mrr.values())) == 2  # 200- and 800-character chunks differ
    best = max(mrr, key=mrr.get)
    with open_dagster(server.url("/assets/staging/sweep_leaderboard")) as visit:
        page = visit.page
        assert metadata_value(page, "best_run_id") == best
        expect_visible(
            page.get_by_text(best.removeprefix("sweep-chunking-"), exact=False).first, "best variant"
        )
        screenshot(visit, "team_sweep_leaderboard", tmp_path)

        # golden_health: the second version asks one question twice; the Plots view draws the trend
        page.goto(server.url("/assets/staging/golden_health"))
        assert metadata_value(page, "health/near_duplicates") == "1"
        assert metadata_value(page, "queries") == "106"
        page.get_by_role("button", name="Plots").click()
        expect_visible(page.get_by_text("health/near_duplicates", exact=True).first, "the duplicates plot")
        center(page.get_by_text("health/near_duplicates", exact=True).first)
        screenshot(visit, "team_golden_health_plots", tmp_path)
        page.goto(server.url("/assets/staging/golden_health"))
        open_tab(page, "Checks")
        status, _ = check_status(page, "near_duplicates")
        assert status == "Failed"  # a warning: Dagster labels every failed check "Failed"
        status, _ = check_status(page, "unsupported_answerable")
        assert status == "Succeeded"
        screenshot(visit, "team_golden_health_checks", tmp_path)
        assert_clean(visit, server.base_url)
    server.assert_no_errors_since(mark)
