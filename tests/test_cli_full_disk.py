"""A full disk, a read-only filesystem: the user's condition, named with its path and remedy (exit
2), never an internal failure (exit 3) — and nothing stored before lost, nothing half-written shown.

Issue 44: a storage folder or DAGSTER_HOME filling up mid-run exited 3 with ``OSError: [Errno 28]``
or SQLite's "disk I/O error" and no path. These tests fill real small filesystems: a tmpfs mounted
for the test (root only — CI runs as root; elsewhere the tests skip, saying why).
"""

from __future__ import annotations

import contextlib
import errno
import json
import random
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from kebab_eval_pipeline.cli.write_failures import WriteFailure, cannot_write, is_write_failure, write_failure
from tests.forked_cli import run_cli
from tests.replay_case import clean_env, write_case


def cli(folder: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 300):
    """``kebab-eval ARGS`` run in ``folder`` (as :func:`tests.replay_case.cli`: a private
    DAGSTER_HOME unless ``env`` names one), a process of its own forked ready-imported."""
    if env is None or "DAGSTER_HOME" not in env:
        home = folder / "dagster_home"
        home.mkdir(parents=True, exist_ok=True)
        env = {**(env if env is not None else clean_env()), "DAGSTER_HOME": str(home)}
    return run_cli(args, env=env, cwd=folder, timeout=timeout)


@contextlib.contextmanager
def tmpfs(where: Path, size: str, read_only: bool = False) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``where`` for the block (skips the test when mounting is not
    permitted: not root, or no mount namespace rights)."""
    where.mkdir(parents=True, exist_ok=True)
    options = f"size={size}" + (",ro" if read_only else "")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(
            f"cannot mount a tmpfs to fill (needs root): {mounted.stderr.strip() or mounted.returncode}"
        )
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def big_case(folder: Path, queries: int = 1000) -> None:
    """A replay of ``queries`` queries with 10 hits of 300 random hex digits each (about 3.5 MB of
    trace; the run stores some 5 MB): enough to fill a few megabytes mid-run."""
    rng = random.Random(7)
    folder.mkdir(parents=True, exist_ok=True)
    with (
        open(folder / "gold.jsonl", "w", encoding="utf-8") as gold,
        open(folder / "trace.jsonl", "w") as trace,
    ):
        for i in range(queries):
            gold.write(
                json.dumps({"id": f"Q{i}", "query": f"question {i}", "supports": [{"chunk_id": f"c{i}"}]})
            )
            hits = [
                {
                    "rank": r + 1,
                    "chunk_id": f"c{rng.randrange(queries * 2)}",
                    "snippet": rng.randbytes(150).hex(),
                }
                for r in range(10)
            ]
            trace.write(json.dumps({"query_id": f"Q{i}", "hits": hits}) + "\n")
            gold.write("\n")
    (folder / "cfg.yaml").write_text(
        "golden: gold.jsonl\nsystem: {kind: replay, path: trace.jsonl}\nbaseline: none\n", encoding="utf-8"
    )


def _clean(stderr: str) -> None:
    assert "Traceback" not in stderr and "internal failure" not in stderr


def test_storage_filling_up_mid_run_is_exit_2_naming_the_path_and_nothing_stored_is_lost(tmp_path):
    small, big = tmp_path / "small", tmp_path / "big"
    write_case(small)
    big_case(big)
    with tmpfs(tmp_path / "disk", "1500k") as disk:
        store = disk / "store"
        env = clean_env(DAGSTER_HOME=str(tmp_path / "home"), KEBAB_EVAL_STORAGE=str(store))
        (tmp_path / "home").mkdir()
        kept = cli(small, "run", "--config", "cfg.yaml", "--run-id", "kept", env=env)
        assert kept.returncode == 0, kept.stderr
        before = cli(
            small, "export", "kept", "--format", "json", "--out", str(tmp_path / "before.json"), env=env
        )
        assert before.returncode == 0, before.stderr

        full = cli(big, "run", "--config", "cfg.yaml", "--run-id", "full", env=env)
        assert full.returncode == 2, full.stderr  # was 3: "OSError: [Errno 28] No space left on device"
        _clean(full.stderr)
        assert (
            f"error: cannot write {store}/" in full.stderr
            and "(the run's storage): no space left on device" in full.stderr
        )
        remedy = (
            "remedy: free space on that filesystem, or point KEBAB_EVAL_STORAGE (or the config's storage:)"
        )
        assert f"{remedy} at a folder that can be written" in full.stderr
        assert (
            "run full stopped in step " in full.stderr
            and "what was stored before is unchanged" in full.stderr
        )

        listed = cli(small, "runs", "list", env=env)
        assert listed.returncode == 0, listed.stderr
        rows = {
            line.split()[1]: line for line in listed.stdout.splitlines() if "kept" in line or "full" in line
        }
        assert rows["kept"].rstrip(" │").endswith("yes") and rows["full"].rstrip(" │").endswith("no")
        after = cli(
            small, "export", "kept", "--format", "json", "--out", str(tmp_path / "after.json"), env=env
        )
        assert after.returncode == 0, after.stderr
        was, now = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("before", "after"))
        assert now["metrics"] == was["metrics"] and now["per_query"] == was["per_query"]
        # the failed run is not readable as a run, and left no half-written file behind
        assert (
            cli(
                small, "export", "full", "--format", "json", "--out", str(tmp_path / "f.json"), env=env
            ).returncode
            == 2
        )
        assert not [p for p in store.rglob("*.tmp")]


def test_dagster_home_filling_up_is_exit_2_naming_dagster_home(tmp_path):
    big = tmp_path / "big"
    big_case(big)
    with tmpfs(tmp_path / "home", "3m") as home:
        env = clean_env(DAGSTER_HOME=str(home), KEBAB_EVAL_STORAGE=str(tmp_path / "store"))
        proc = cli(big, "run", "--config", "cfg.yaml", "--run-id", "full", env=env)
        assert proc.returncode == 2, proc.stderr  # was 3: "OperationalError: database or disk is full"
        _clean(proc.stderr)
        assert f"error: cannot write {home} (the Dagster instance): no space left on device" in proc.stderr
        assert (
            "remedy: free space on that filesystem, or point DAGSTER_HOME at a folder that can be written"
            in proc.stderr
        )
        # not stored as a complete run: no run_metrics published for it
        assert not (tmp_path / "store" / "run_metrics" / "full" / "_manifest.json").exists()


def test_read_only_storage_and_dagster_home_are_exit_2_with_the_remedy(tmp_path):
    write_case(tmp_path)
    with tmpfs(tmp_path / "ro-store", "1m", read_only=True) as store:
        env = clean_env(DAGSTER_HOME=str(tmp_path / "home"), KEBAB_EVAL_STORAGE=str(store / "runs"))
        (tmp_path / "home").mkdir()
        proc = cli(tmp_path, "run", "--config", "cfg.yaml", "--run-id", "r1", env=env)
        assert proc.returncode == 2, proc.stderr
        _clean(proc.stderr)
        assert (
            f"{store} cannot be written (read-only file system); use a folder that can be written"
            in proc.stderr
        )
        assert "field 'KEBAB_EVAL_STORAGE'" in proc.stderr
    with tmpfs(tmp_path / "ro-home", "1m", read_only=True) as home:
        env = clean_env(DAGSTER_HOME=str(home), KEBAB_EVAL_STORAGE=str(tmp_path / "store"))
        proc = cli(tmp_path, "run", "--config", "cfg.yaml", "--run-id", "r1", env=env)
        assert proc.returncode == 2, proc.stderr
        _clean(proc.stderr)
        assert (
            f"error: cannot write {home}/" in proc.stderr
            and "(the Dagster instance): read-only file system" in proc.stderr
        )
        assert (
            "remedy: make it writable, or point DAGSTER_HOME at a folder that can be written" in proc.stderr
        )


def test_permission_denied_names_the_file_and_the_setting(tmp_path, monkeypatch):
    """EACCES cannot be provoked as root (the suite's CI user): the classification of a real
    OSError the kernel would raise, for a file under DAGSTER_HOME."""
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KEBAB_EVAL_STORAGE", str(tmp_path / "store"))
    target = tmp_path / "home" / "history" / "runs.db"
    assert write_failure(RuntimeError("step failed")) is None
    try:
        raise PermissionError(errno.EACCES, "Permission denied", str(target))
    except PermissionError as exc:
        failure = write_failure(exc)
    assert failure == WriteFailure(errno.EACCES, f"[Errno 13] Permission denied: '{target}'", str(target))
    text = str(cannot_write(failure, run_id="r1"))
    assert text.startswith(f"cannot write {target} (the Dagster instance): permission denied")
    assert "remedy: give this user write permission there, or point DAGSTER_HOME at a folder" in text
    assert "run r1 stopped: what was stored before is unchanged" in text
    assert is_write_failure(failure)
    # a file elsewhere refused for permission may be one the command was reading: not called a write
    elsewhere = write_failure(PermissionError(errno.EACCES, "Permission denied", str(tmp_path / "gold.yaml")))
    assert elsewhere is not None and not is_write_failure(elsewhere)
    full = write_failure(OSError(errno.ENOSPC, "No space left on device", "/dev/full"))
    assert full is not None and is_write_failure(full)
