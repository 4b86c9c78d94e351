"""An output option that cannot be written — ``--pr-comment /dev/full``, a full or read-only
filesystem — is exit 2 naming the option, the path and the remedy, never exit 3.

Issue 44: ``--pr-comment`` to a full device exited 3 ("OSError: [Errno 28]") after the results
were stored. Now what can be known before the run (a read-only or full filesystem) refuses it
before anything runs; what fails while writing (a device that takes no bytes) is reported after
the results are stored, saying so and how to write the output again (``kebab-eval runs outputs``).
"""

from __future__ import annotations

import json
import subprocess

from tests.replay_case import clean_env, write_case
from tests.test_cli_full_disk import cli, tmpfs


def _clean(stderr: str) -> None:
    assert "Traceback" not in stderr and "internal failure" not in stderr


def test_pr_comment_to_a_full_device_is_exit_2_and_runs_outputs_writes_it_again(tmp_path):
    write_case(tmp_path)
    run = cli(tmp_path, "run", "--config", "cfg.yaml", "--run-id", "r1", "--pr-comment", "/dev/full")
    assert run.returncode == 2, run.stderr  # was 3, after the results were stored
    _clean(run.stderr)
    assert "error: cannot write --pr-comment /dev/full: no space left on device" in run.stderr
    assert "remedy: free space on that filesystem, or give --pr-comment another path" in run.stderr
    again = "kebab-eval runs outputs r1 --config cfg.yaml --pr-comment PATH"
    assert f"the results of run r1 are stored; write its CI outputs again with `{again}`" in run.stderr
    listed = cli(tmp_path, "runs", "list")
    assert next(line for line in listed.stdout.splitlines() if " r1 " in line).rstrip(" │").endswith("yes")

    rewritten = cli(tmp_path, "runs", "outputs", "r1", "--config", "cfg.yaml", "--pr-comment", "comment.md")
    assert rewritten.returncode == 0, rewritten.stderr
    # the same comment a run writes: compare with a second run of the same inputs
    second = cli(tmp_path, "run", "--config", "cfg.yaml", "--run-id", "r2", "--pr-comment", "r2.md")
    assert second.returncode == 0, second.stderr
    comment = (tmp_path / "comment.md").read_text(encoding="utf-8")
    assert comment.startswith("<!-- kebab-eval -->") and "r1" in comment
    assert comment.replace("r1", "RUN") == (tmp_path / "r2.md").read_text(encoding="utf-8").replace(
        "r2", "RUN"
    )


def test_junit_and_the_job_summary_failing_are_all_named_and_the_others_written(tmp_path):
    write_case(tmp_path)
    env = clean_env(GITHUB_STEP_SUMMARY="/dev/full")
    proc = cli(
        tmp_path,
        "run",
        "--config",
        "cfg.yaml",
        "--run-id",
        "r1",
        "--junit",
        "/dev/full",
        "--pr-comment",
        "c.md",
        env=env,
    )
    assert proc.returncode == 2, proc.stderr
    _clean(proc.stderr)
    assert "cannot write --junit /dev/full: no space left on device" in proc.stderr
    assert "cannot write $GITHUB_STEP_SUMMARY /dev/full: no space left on device" in proc.stderr
    assert "or leave it out (--no-github-summary)" in proc.stderr
    assert (tmp_path / "c.md").read_text(encoding="utf-8").startswith("<!-- kebab-eval -->")  # still written
    assert "wrote c.md" in proc.stderr


def test_a_read_only_or_full_filesystem_is_refused_before_the_run(tmp_path):
    write_case(tmp_path)
    with tmpfs(tmp_path / "ro", "64k", read_only=True) as ro:
        proc = cli(tmp_path, "run", "--config", "cfg.yaml", "--run-id", "r1", "--junit", str(ro / "j.xml"))
        assert proc.returncode == 2, proc.stderr
        _clean(proc.stderr)
        assert f"{ro}/j.xml — field '--junit': cannot be written:" in proc.stderr
    with tmpfs(tmp_path / "full", "64k") as full:
        subprocess.run(["dd", "if=/dev/zero", f"of={full}/filler", "bs=4k"], capture_output=True)
        proc = cli(
            tmp_path, "run", "--config", "cfg.yaml", "--run-id", "r1", "--pr-comment", str(full / "c.md")
        )
        assert proc.returncode == 2, proc.stderr
        _clean(proc.stderr)
        assert (
            f"{full}/c.md — field '--pr-comment': cannot be written: no space left on the file system"
            in proc.stderr
        )
    # refused before the run: nothing stored
    assert not (tmp_path / "dagster_home" / "kebab-eval" / "artifacts" / "run_metrics").exists()


def test_export_to_a_full_device_names_the_option(tmp_path):
    write_case(tmp_path)
    assert cli(tmp_path, "run", "--config", "cfg.yaml", "--run-id", "r1").returncode == 0
    for fmt in ("json", "trec"):
        proc = cli(tmp_path, "export", "r1", "--format", fmt, "--out", "/dev/full")
        assert proc.returncode == 2, proc.stderr  # was 3
        _clean(proc.stderr)
        assert "cannot write --out /dev/full: no space left on device" in proc.stderr
        assert "run r1 is stored and unchanged" in proc.stderr
    ok = cli(tmp_path, "export", "r1", "--out", "r1.json")
    assert ok.returncode == 0 and json.loads((tmp_path / "r1.json").read_text())["run_id"] == "r1"
