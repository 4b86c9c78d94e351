"""Hostile configs and command lines (issue 22, items 4, 9, 10, 14): every one is refused when the
config loads — or, for what only a run can see, before the first query — with exit 2 and a message
naming the option or key; an unexpected failure exits 3, never 1 (a failed gate's code)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from kebab_eval_pipeline.chain.settings import load_settings
from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.foundation.net.checks import header_name_problem, header_value_problem, url_problem
from tests.forked_cli import run_cli
from tests.test_cli import CLI, cli_env, no_traceback

FRAMES = 'File "'  # a Python stack frame in the output


@pytest.fixture
def env(tmp_path):
    """A fresh DAGSTER_HOME, no KEBAB_EVAL_* settings (as tests/test_cli.py), and a wide terminal
    so no message is wrapped mid-assertion."""
    return {**cli_env(tmp_path), "COLUMNS": "400"}


def cli(env: dict, *args: str) -> subprocess.CompletedProcess:
    return run_cli(args, env=env, timeout=300)


def no_frames(proc: subprocess.CompletedProcess) -> None:
    no_traceback(proc)
    assert FRAMES not in proc.stderr and FRAMES not in proc.stdout, proc.stderr


def config(tmp_path: Path, doc: dict, name: str = "eval.yaml") -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return str(path)


def together(env: dict, argvs: list[list[str]]) -> list[subprocess.CompletedProcess]:
    """Start every `kebab-eval` at once (each only loads a config and exits), then collect them."""
    procs = [
        subprocess.Popen([*CLI, *a], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for a in argvs
    ]
    done = []
    for argv, proc in zip(argvs, procs, strict=True):
        out, err = proc.communicate(timeout=300)
        done.append(subprocess.CompletedProcess(argv, proc.returncode, out, err))
    return done


def with_index_cache(env: dict) -> dict:
    return {**env, "KEBAB_EVAL_INDEX_CACHE": os.environ["KEBAB_EVAL_INDEX_CACHE"]}  # the session's index


# ---------------------------------------------------------------------------------------------
# item 4: empty or vanishing destinations
# ---------------------------------------------------------------------------------------------


def test_empty_option_values_exit_2_naming_the_option_instead_of_running_the_demo(env, tmp_path):
    cases = {
        "--golden": ["run", "--golden", "", "--run-id", "e1"],
        "--config": ["run", "--config", "", "--run-id", "e2"],
        "--run-id": ["run", "--run-id", ""],
        "--baseline": ["run", "--baseline=", "--run-id", "e3"],
        "--out": ["export", "x", "--out", " "],
    }
    for (option, argv), proc in zip(cases.items(), together(env, list(cases.values())), strict=True):
        assert proc.returncode == 2, (argv, proc.stdout, proc.stderr)
        no_frames(proc)
        assert f"{option}: empty value" in proc.stderr, proc.stderr
        assert "mrr" not in proc.stdout  # nothing was evaluated
    assert not (tmp_path / "dagster_home" / "kebab-eval").exists()  # no artifact was written


def test_keys_written_with_no_value_are_refused_not_read_as_the_default(env, tmp_path):
    cfg = tmp_path / "eval.yaml"
    cfg.write_text("golden:\nstorage:   # ${ARTIFACTS} was empty\nsource_root: null\n", encoding="utf-8")
    proc = cli(env, "run", "--config", str(cfg), "--run-id", "blank")
    assert proc.returncode == 2, proc.stderr  # it evaluated the bundled demo into the default folder
    no_frames(proc)
    assert "eval.yaml:line 1 — field 'golden': no value" in proc.stderr
    assert "eval.yaml:line 2 — field 'storage': no value" in proc.stderr
    assert "source_root" not in proc.stderr  # an explicit null is the default, as documented
    with pytest.raises(InputError) as info:
        load_settings(config(tmp_path, {"golden": " "}, "g.yaml"))
    assert [o.field for o in info.value.offenders] == ["golden"]


STORAGE = {
    "memory://kebab/artifacts": "vanish when the process exits",
    "/dev/null": "/dev file system, not storage",
    "/proc/kebab-eval": "/proc file system, not storage",
    "/sys/kebab-eval": "/sys file system, not storage",
    "http://127.0.0.1:9/artifacts": "read-only over fsspec",
    "https://example.invalid/artifacts": "read-only over fsspec",
    "foo://bucket/artifacts": "unknown storage protocol 'foo://'",
    # a protocol whose library no extra installs (s3fs comes with the celery and k8s extras)
    "abfs://container/artifacts": "Install adlfs",
    "": "empty",
}


@pytest.mark.parametrize("value", [*STORAGE, "<a file>", "<below a file>"])
def test_unusable_storage_is_refused_at_load_naming_storage(tmp_path, value):
    assert not _installed("adlfs"), "this test needs an abfs:// whose library is missing"
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder")
    reason = STORAGE.get(value)
    if value == "<a file>":
        value, reason = str(a_file), "is a file; storage must be a folder"
    elif value == "<below a file>":
        value, reason = str(a_file / "below"), f"is below {a_file}, which is a file"
    path = config(tmp_path, {"baseline": "none", "storage": value})
    with pytest.raises(InputError) as info:
        load_settings(path)
    (offender,) = info.value.offenders
    assert (offender.file, offender.field, offender.position) == (path, "storage", "line 2")
    assert reason in offender.reason


@pytest.mark.skipif(not os.access("/dev/shm", os.W_OK), reason="no writable /dev/shm here")
def test_a_folder_in_the_dev_shm_tmpfs_is_storage(tmp_path):
    """/dev/shm is a tmpfs (POSIX shared memory), not a kernel file system: a folder there holds
    runs as one in /tmp does; the rest of /dev stays refused."""
    folder = Path(tempfile.mkdtemp(dir="/dev/shm"))
    try:
        loaded = load_settings(config(tmp_path, {"baseline": "none", "storage": str(folder / "runs")}))
        assert loaded.storage == str(folder / "runs")
    finally:
        shutil.rmtree(folder)
    with pytest.raises(InputError) as info:
        load_settings(config(tmp_path, {"baseline": "none", "storage": "/dev/kebab-eval"}))
    assert "/dev file system, not storage" in info.value.offenders[0].reason


def test_unusable_storage_exits_2_before_any_query(env, tmp_path):
    memory = config(tmp_path, {"storage": "memory://kebab/artifacts"}, "memory.yaml")
    abfs = config(tmp_path, {"storage": "abfs://container/artifacts"}, "abfs.yaml")
    vanishing, missing_library = together(
        env, [["run", "--config", memory, "--run-id", "s1"], ["run", "--config", abfs, "--run-id", "s2"]]
    )
    for proc in (vanishing, missing_library):
        assert proc.returncode == 2, proc.stderr  # memory:// used to exit 0 with every artifact gone
        no_frames(proc)
        assert "field 'storage'" in proc.stderr and "mrr" not in proc.stdout
    assert "every artifact would vanish when the process exits" in vanishing.stderr
    assert "abfs:// needs a package that is not installed: Install adlfs" in missing_library.stderr


def test_storage_that_cannot_be_reached_exits_2_before_the_run_without_its_credentials(env, tmp_path):
    # found by the CLI fuzz harness: an ftp:// store on an unknown host passed the load-time checks
    # (fsspec knows ftp) and then failed inside the first writing step, exit 3
    unreachable = config(tmp_path, {"storage": "ftp://bob:s3cret@host.invalid/artifacts"})
    proc = cli(env, "run", "--config", unreachable, "--run-id", "far")
    assert proc.returncode == 2, proc.stderr
    no_frames(proc)
    assert "storage cannot be reached or written" in proc.stderr and "field 'storage'" in proc.stderr
    assert "ftp://***@host.invalid/artifacts" in proc.stderr and "s3cret" not in proc.stderr + proc.stdout
    assert "checked before the run started" in proc.stderr and "mrr" not in proc.stdout


def test_a_storage_path_past_the_os_name_limit_is_refused_not_a_crash(tmp_path):
    # found by tests/test_input_fuzz.py: stat() of a 4,000-character name raised ENAMETOOLONG
    # (OSError) out of the storage check, so load_settings crashed instead of naming the key
    with pytest.raises(InputError) as info:
        load_settings(config(tmp_path, {"storage": "x" * 4000}))
    [offender] = info.value.offenders
    assert offender.field == "storage" and offender.reason == "not a usable path: File name too long"


def test_real_storage_locations_stay_allowed(tmp_path):
    for value in (str(tmp_path / "runs"), (tmp_path / "runs").as_uri(), "relative/runs", "~/kebab-runs"):
        assert load_settings(config(tmp_path, {"storage": value})).storage is not None


def test_storage_from_the_environment_is_checked_too(env, tmp_path):
    bad = cli({**env, "KEBAB_EVAL_STORAGE": "memory://x"}, "history")
    assert bad.returncode == 2
    no_frames(bad)
    assert "$KEBAB_EVAL_STORAGE" in bad.stderr and "'KEBAB_EVAL_STORAGE'" in bad.stderr
    assert "vanish" in bad.stderr
    # a real folder (and a file:// URL of one) still works
    for value in (str(tmp_path / "runs"), (tmp_path / "runs2").as_uri()):
        ok = cli({**env, "KEBAB_EVAL_STORAGE": value}, "history")
        assert ok.returncode == 0, ok.stderr
        assert "no stored runs" in ok.stdout


def test_source_root_must_be_a_local_folder(env, tmp_path):
    memory, missing = (
        config(tmp_path, {"source_root": "memory://corpus"}, "memory.yaml"),
        config(tmp_path, {"source_root": str(tmp_path / "nope")}, "missing.yaml"),
    )
    loaded, checked = together(
        env, [["run", "--config", memory, "--run-id", "m1"], ["run", "--config", missing, "--run-id", "m2"]]
    )
    assert loaded.returncode == 2 and "field 'source_root'" in loaded.stderr
    assert "memory:// is not supported" in loaded.stderr
    # a missing folder: found before the run starts (it used to fail inside the retrieval step)
    assert checked.returncode == 2 and "field 'source_root'" in checked.stderr
    assert "missing or not a directory" in checked.stderr
    for proc in (loaded, checked):
        no_frames(proc)
        assert "mrr" not in proc.stdout


# ---------------------------------------------------------------------------------------------
# item 9: overflowing numbers and broken URLs, at load
# ---------------------------------------------------------------------------------------------


def test_ints_past_their_range_exit_2_at_load_naming_each_field(env, tmp_path):
    cfg = config(
        tmp_path,
        {
            "compare": {"seed": 10**40, "min_queries": 2**70},
            "mrr_cutoff": 10**30,
            "verdict_gates": {"regression": {"max": 2**64}},
            "judge": {"seed": 2**40, "spot_check_seed": 1e40},
        },
    )
    proc = cli(env, "run", "--config", cfg, "--run-id", "big")
    assert proc.returncode == 2, proc.stderr  # it used to run every query, then fail storing the seed
    no_frames(proc)
    for field in (
        "compare.seed",
        "compare.min_queries",
        "mrr_cutoff",
        "verdict_gates.regression.max",
        "judge.seed",
        "judge.spot_check_seed",
    ):
        assert f"field '{field}'" in proc.stderr, (field, proc.stderr)
    assert "mrr" not in proc.stdout


def test_broken_urls_exit_2_at_load_naming_each_key(env, tmp_path):
    http = {"kind": "http", "search_url": "http://127.0.0.1:99999/search"}
    first = config(
        tmp_path,
        {
            "system": {**http, "ask_url": "http://[::1/ask", "version_url": "http:///version"},
            "judge": {"backend": "openai_compatible", "model": "m", "base_url": "http://127.0.0.1:0/v1"},
        },
        "a.yaml",
    )
    a = cli(env, "run", "--config", first)
    assert a.returncode == 2, a.stderr  # port 99999 used to be accepted, then fail every query
    no_frames(a)
    expected = {
        "system.search_url": "Port out of range",
        "system.ask_url": "Invalid IPv6 URL",
        "system.version_url": "no host",
        "judge.base_url": "port 0",
    }
    for field, reason in expected.items():
        line = next((x for x in a.stderr.splitlines() if f"'{field}'" in x), "")
        assert reason in line, (field, a.stderr)
    with pytest.raises(InputError) as info:
        load_settings(config(tmp_path, {"system": {**http, "search_url": "ftp://127.0.0.1/s"}}, "b.yaml"))
    assert [(o.field, o.reason) for o in info.value.offenders] == [
        ("system.search_url", "expected an http:// or https:// URL")
    ]


# ---------------------------------------------------------------------------------------------
# item 14: header names and values
# ---------------------------------------------------------------------------------------------


def test_bad_header_names_and_values_exit_2_at_load_naming_the_header(env, tmp_path):
    http = {"kind": "http", "search_url": "http://127.0.0.1:9/search"}
    cfg = config(
        tmp_path,
        {
            "system": {
                **http,
                "headers": {"X-Trace": "a\r\nX-Injected: 1"},
                "headers_from_env": {"X-Key\r\nEvil": "KEY"},
            }
        },
    )
    proc = cli(env, "run", "--config", cfg)
    assert proc.returncode == 2, proc.stderr  # both used to fail every query as `connection`
    no_frames(proc)
    assert "field 'system.headers.X-Trace': the value contains a line break" in proc.stderr
    assert "X-Injected" not in proc.stderr  # the value is never echoed
    assert "field 'system.headers_from_env.X-Key\\r\\nEvil': not a valid header name" in proc.stderr
    with pytest.raises(InputError) as info:
        load_settings(config(tmp_path, {"system": {**http, "headers": {"X Tenant": "a"}}}, "n.yaml"))
    assert [o.field for o in info.value.offenders] == ["system.headers.X Tenant"]
    assert info.value.offenders[0].position == "line 3"  # the header's own line


def test_header_and_api_key_values_from_the_environment_are_checked_before_the_first_query(env, tmp_path):
    secret = "s3cr3t-token\r\nX-Injected: 1"
    http = config(
        tmp_path,
        {
            "system": {
                "kind": "http",
                "search_url": "http://127.0.0.1:9/search",
                "headers_from_env": {"Authorization": "Bearer ${KEBAB_TEST_TOKEN}"},
            }
        },
        "http.yaml",
    )
    judge = config(
        tmp_path,
        {
            "judge": {
                "backend": "openai_compatible",
                "model": "m",
                "base_url": "http://127.0.0.1:9/v1",
                "api_key_env": "KEBAB_TEST_TOKEN",
            }
        },
        "judge.yaml",
    )
    a, b = together(
        {**with_index_cache(env), "KEBAB_TEST_TOKEN": secret},
        [["run", "--config", http, "--run-id", "h1"], ["run", "--config", judge, "--run-id", "h2"]],
    )
    for proc in (a, b):
        assert proc.returncode == 2, proc.stderr
        no_frames(proc)
        assert "s3cr3t" not in proc.stderr + proc.stdout and "mrr" not in proc.stdout
    assert "field 'system.headers_from_env.Authorization'" in a.stderr and "$KEBAB_TEST_TOKEN" in a.stderr
    assert "line break" in a.stderr
    assert "field 'judge.api_key_env'" in b.stderr and "line break" in b.stderr


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40))
def test_an_accepted_header_value_is_one_httpx_sends_unchanged(value: str):
    if header_value_problem(value) is None:
        request = httpx.Request("GET", "http://127.0.0.1/", headers={"X-Test": value})
        assert request.headers["X-Test"] == value.strip(" \t") or request.headers["X-Test"] == value
        assert "\r" not in value and "\n" not in value and "\x00" not in value
    else:
        assert any(c in value for c in "\r\n\x00") or not value.isascii() or not value.isprintable()


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.text(max_size=30),
        st.builds(
            lambda scheme, host, port, path: f"{scheme}://{host}{port}{path}",
            st.sampled_from(["http", "https", "ftp", "HTTP"]),
            st.sampled_from(["127.0.0.1", "[::1]", "[::1", "example.org", "", "a b", "{mode}", "bücher.de"]),
            st.one_of(st.just(""), st.integers(-5, 200_000).map(lambda p: f":{p}"), st.just(":x")),
            st.sampled_from(["", "/", "/search", "/a?b=c"]),
        ),
    )
)
def test_an_accepted_url_has_a_host_and_a_port_httpx_can_connect_to(url: str):
    if url_problem(url) is None:
        parsed = httpx.URL(url)
        assert parsed.scheme in ("http", "https") and parsed.host
        assert parsed.port is None or 1 <= parsed.port <= 65535


def test_header_names_are_tokens():
    assert header_name_problem("X-Api-Key") is None and header_name_problem("x_b.c~1") is None
    for bad in ("", "X Key", "X-Key\r\n", "X:Key", "Ключ", "X\x00"):
        assert header_name_problem(bad) is not None, bad


# ---------------------------------------------------------------------------------------------
# item 10: bad input found inside a Dagster step prints the load-time message, not frames
# ---------------------------------------------------------------------------------------------


def test_a_judge_model_that_is_not_a_model_exits_2_without_frames(env, tmp_path):
    not_a_model = tmp_path / "not-a-model"
    not_a_model.mkdir()
    file_cfg = config(tmp_path, {"judge": {"model": "/etc/passwd"}}, "file.yaml")
    folder_cfg = config(tmp_path, {"judge": {"model": str(not_a_model)}, "baseline": "none"}, "dir.yaml")
    file_run, folder_run = together(
        with_index_cache(env),
        [["run", "--config", file_cfg, "--run-id", "j1"], ["run", "--config", folder_cfg, "--run-id", "j2"]],
    )
    # a file: refused before the run starts
    assert file_run.returncode == 2, file_run.stderr
    no_frames(file_run)
    assert "/etc/passwd — field 'judge.model'" in file_run.stderr
    # a folder: only loading it tells, inside the judge step — same kind of message, exit 2, no frames
    assert folder_run.returncode == 2, folder_run.stderr
    no_frames(folder_run)
    assert "STEP_FAILURE" not in folder_run.stderr and "Dependencies for step" not in folder_run.stderr
    assert f"{not_a_model} — field 'judge.model'" in folder_run.stderr


def test_step_failure_records_are_dropped_unless_kebab_eval_debug(monkeypatch):
    """The console records the CLI states itself; ``KEBAB_EVAL_DEBUG=1`` keeps Dagster's (with frames)."""
    import logging

    import dagster as dg
    from dagster._core.events import JobFailureData
    from dagster._core.execution.plan.objects import StepFailureData

    from kebab_eval_pipeline.cli.driver import StatedFailureRecords

    def record(message: str, event_type: dg.DagsterEventType | None = None, data=None) -> logging.LogRecord:
        rec = logging.LogRecord("dagster", logging.ERROR, __file__, 1, message, None, None)
        if event_type is not None:  # what Dagster's log manager attaches to an event's record
            rec.dagster_event = dg.DagsterEvent(
                event_type.value, job_name="evaluation_run", event_specific_data=data
            )
        return rec

    failure = record(
        "judge - STEP_FAILURE - Execution failed",
        dg.DagsterEventType.STEP_FAILURE,
        StepFailureData(error=None, user_failure_data=None),
    )
    run_failure = record(
        "RUN_FAILURE - Execution of run failed", dg.DagsterEventType.RUN_FAILURE, JobFailureData(error=None)
    )
    skipped = record("query_scores - Dependencies for step query_scores failed: ['judge']. Not executing.")
    warning = record("stale golden reference: ...")
    monkeypatch.delenv("KEBAB_EVAL_DEBUG", raising=False)
    keep = StatedFailureRecords().filter
    assert [keep(r) for r in (failure, run_failure, skipped, warning)] == [False, False, False, True]
    monkeypatch.setenv("KEBAB_EVAL_DEBUG", "1")
    assert [keep(r) for r in (failure, run_failure, skipped, warning)] == [True, True, True, True]


# ---------------------------------------------------------------------------------------------
# exit codes 3 and 4 from the console script's entry point
# ---------------------------------------------------------------------------------------------

RAISING = """
import sys
from kebab_eval_pipeline import cli
from kebab_eval_pipeline.foundation import errors
@cli.app.command("boom")
def boom(kind: str) -> None:
    if kind == "bug":
        {}["missing"]
    raise errors.RunInProgress("run r1 is already in progress (pid 123); wait for it or use another run id")


sys.argv = ["kebab-eval", "boom", sys.argv[1]]
cli.main()
"""


def test_an_internal_failure_exits_3_in_one_paragraph_and_run_in_progress_exits_4(env):
    def entry(kind: str, **extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-c", RAISING, kind],
            env={**env, **extra},
            capture_output=True,
            text=True,
            timeout=120,
        )

    bug = entry("bug")
    assert bug.returncode == 3, bug.stderr  # it was 1, the code of a failed gate
    no_frames(bug)
    assert bug.stderr.startswith("error: KeyError: 'missing'") and "KEBAB_EVAL_DEBUG=1" in bug.stderr
    debug = entry("bug", KEBAB_EVAL_DEBUG="1")
    assert debug.returncode == 1 and "Traceback" in debug.stderr  # Python's own exit for a raise
    busy = entry("busy")
    assert busy.returncode == 4, busy.stderr
    no_frames(busy)
    assert "run r1 is already in progress" in busy.stderr


def _installed(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None
