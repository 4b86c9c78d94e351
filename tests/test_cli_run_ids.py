"""Generated run ids through the real CLI: `runs add` without an id, `run`'s default id and trigger tag,
and `runs list` in time order. CI machines set CI=true, so every environment here sets or removes it."""

from __future__ import annotations

import re
from pathlib import Path

import dagster as dg

from kebab_eval_pipeline.foundation.run_ids import TRIGGER_TAG
from kebab_eval_pipeline.store.runs import RunStore
from tests.test_cli import cli, env, no_traceback  # noqa: F401  (env is a fixture)


def in_ci(base: dict[str, str], sha: str) -> dict[str, str]:
    return {**base, "CI": "true", "GITHUB_SHA": sha}


def local(base: dict[str, str], user: str) -> dict[str, str]:
    """Outside CI, as a given login name (LOGNAME is read before USER, as getpass does)."""
    return {**{k: v for k, v in base.items() if k != "CI"}, "LOGNAME": user, "USER": user}


def test_generated_ids_registered_run_tagged_and_listed_in_time_order(env):  # noqa: F811
    # registered first, out of time order: a hand-chosen id never materialized, then two dated ones
    with dg.DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
        instance.add_dynamic_partitions(
            "eval_runs", ["release-1", "alice-20250302-000000", "bob-20250301-000000"]
        )

    # `runs add` without an id: in CI a ci- id with the short commit, printed alone with --quiet
    added = cli(in_ci(env, "0123456789abcdef0123456789abcdef01234567"), "runs", "add", "--quiet")
    assert added.returncode == 0, added.stderr
    no_traceback(added)
    ci_added = added.stdout.strip()
    assert added.stdout == f"{ci_added}\n"  # only the id: RUN_ID=$(kebab-eval runs add -q)
    assert re.fullmatch(r"ci-\d{8}-\d{6}-0123456", ci_added), ci_added

    # ...and elsewhere the login name, made safe
    user = cli(local(env, "Kim Min-su 김민수"), "runs", "add")
    assert user.returncode == 0, user.stderr
    [user_added] = re.findall(r"^registered run (\S+) ", user.stdout, flags=re.MULTILINE)
    assert re.fullmatch(r"kim-min-su-\d{8}-\d{6}", user_added), user_added
    # an id given again: already registered, not an error, and --quiet still prints just the id
    again = cli(local(env, "x"), "runs", "add", "-q", ci_added)
    assert (again.returncode, again.stdout) == (0, f"{ci_added}\n")

    # `run` without --run-id in CI: a ci- id, and the Dagster run tagged as triggered by CI
    ran = cli(in_ci(env, "fedcba9876543210fedcba9876543210fedcba98"), "run")
    assert ran.returncode == 0, ran.stderr
    [ci_run] = re.findall(r"run (ci-\d{8}-\d{6}-fedcba9) —", ran.stdout)
    # a hand-chosen id is placed by its run's created_at, later than every id generated above
    manual = cli(local(env, "x"), "run", "--run-id", "manual")
    assert manual.returncode == 0, manual.stderr

    listed = cli(env, "runs", "list")
    assert listed.returncode == 0, listed.stderr
    rows = re.findall(r"^│ (\S+)\s+│ ([\d: -]*?)\s*│ (yes|no)\s+│$", listed.stdout, flags=re.MULTILINE)
    assert [run_id for run_id, _, _ in rows] == [
        "bob-20250301-000000",
        "alice-20250302-000000",
        ci_added,
        user_added,
        ci_run,
        "manual",
        "release-1",  # no time in the id, no metrics: last
    ], listed.stdout
    started = {run_id: (when, stored) for run_id, when, stored in rows}
    assert started["bob-20250301-000000"] == ("2025-03-01 00:00:00", "no")
    stamp = re.fullmatch(r"ci-(\d{4})(\d\d)(\d\d)-(\d\d)(\d\d)(\d\d)-fedcba9", ci_run).groups()
    assert started[ci_run] == ("{}-{}-{} {}:{}:{}".format(*stamp), "yes")
    assert started["manual"][1] == "yes" and re.fullmatch(
        r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", started["manual"][0]
    )
    assert started["release-1"] == ("", "no")

    with dg.DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
        triggers = {r.tags.get("dagster/partition"): r.tags.get(TRIGGER_TAG) for r in instance.get_runs()}
    assert triggers == {ci_run: "ci", "manual": "cli"}
    # what each run records it is: its trigger decides, unless --role says otherwise (CI or not)
    store = RunStore(Path(env["DAGSTER_HOME"]) / "kebab-eval" / "artifacts")
    assert store.manifest("run_metrics", ci_run)["info"]["role"]["role"] == "ci"
    assert store.manifest("run_metrics", "manual")["info"]["role"] == {
        "role": "manual",
        "source": "run tag kebab-eval/trigger=cli",
        "sweep": None,
    }
    tried = cli(in_ci(env, "ab" * 20), "run", "--run-id", "tried", "--role", "experiment")
    assert tried.returncode == 0, tried.stderr
    assert store.manifest("run_metrics", "tried")["info"]["role"]["role"] == "experiment"
    assert (
        "comparison: no baseline: no pinned baseline for golden set 'demo-fermentation', and no earlier "
        in (" ".join(tried.stdout.split()))
        and "experiment of reference demo corpus" in " ".join(tried.stdout.split())
    )
    typo = cli(env, "run", "--run-id", "typo", "--role", "nighty")
    assert typo.returncode == 2 and "--role: 'nighty': expected one of ci, nightly" in " ".join(
        typo.stderr.split()
    )
    no_traceback(typo)
    assert not store.exists("run_metrics", "typo")


def test_a_run_id_with_a_trailing_newline_is_refused_not_trimmed(env, tmp_path):  # noqa: F811
    # `$` matches before a final newline: "nl\n" used to register "nl" and create folders "nl\n"
    for bad in ("nl\n", "nl\r", " nl", "nl "):
        added = cli(env, "runs", "add", bad)
        assert added.returncode == 2, (bad, added.stdout, added.stderr)
        no_traceback(added)
        assert "invalid run id" in added.stderr and repr(bad) in added.stderr
    with dg.DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
        assert instance.get_dynamic_partitions("eval_runs") == []
    ran = cli(env, "run", "--run-id", "nl\n", "--golden", str(tmp_path / "none.yaml"))
    assert ran.returncode == 2 and "invalid run id" in ran.stderr, ran.stderr
    assert not any("\n" in p.name for p in tmp_path.rglob("*"))
