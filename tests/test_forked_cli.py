"""tests/forked_cli.py: a CLI command forked from the zygote starts as ``python -m`` would start it.

Each case runs the probe (tests/process_probe.py) both ways — forked by :func:`run_cli` and by
``subprocess.run`` — and compares everything a process can see of its start: arguments, sys.path,
working folder, environment, open descriptors, standard streams, signal dispositions and mask,
process group and session, umask, limits, encodings, interpreter flags, ``__main__``; its exit
code and output come back as subprocess.run returns them; a timeout kills it as subprocess.run does.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO, write
from tests.forked_cli import FORKABLE, ForkedProcess, _zygote, run_cli, start_cli

PROBE = "tests.process_probe"

pytestmark = pytest.mark.skipif(not FORKABLE, reason="commands are plain subprocesses here (no pidfd)")


def both_ways(env: dict[str, str], cwd, code: int = 0):
    args = [str(code), str(os.getpgrp()), str(os.getsid(0))]
    forked = run_cli(args, env=env, cwd=cwd, timeout=120, module=PROBE)
    plain = subprocess.run(
        [sys.executable, "-m", PROBE, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=120
    )
    return forked, plain


def test_a_forked_command_sees_what_a_started_one_sees(tmp_path):
    # $PYTHONPATH other than the zygote's, with a relative and an empty folder; a non-ASCII value
    pythonpath = os.pathsep.join([str(REPO), "relative", "", os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": pythonpath, "KEBAB_PROBE": "é"}
    forked, plain = both_ways(env, REPO)
    assert (
        (forked.returncode, forked.stderr)
        == (plain.returncode, plain.stderr)
        == (0, "probe: done\nsecond line\n")
    )
    seen, expected = json.loads(forked.stdout), json.loads(plain.stdout)
    assert seen == expected
    # what the comparison covered holds what it should
    assert seen["kebab_modules_loaded"] == [] and seen["streams"][1:] == ["fifo", "fifo"]
    assert seen["open_fds"] == [0, 1, 2] and seen["environ"]["KEBAB_PROBE"] == "é"
    assert seen["process_group_is_parents"] and seen["session_is_parents"]
    assert seen["argv"][0] == str(REPO / "tests" / "process_probe.py") and seen["argv"][1:2] == ["0"]
    assert seen["path"][:3] == [str(REPO), str(REPO), str(REPO / "relative")]


def test_a_forked_command_keeps_its_exit_code_and_its_folder(tmp_path):
    forked, plain = both_ways(dict(os.environ, PYTHONPATH=str(REPO)), tmp_path, code=3)
    assert forked.returncode == plain.returncode == 3
    assert json.loads(forked.stdout) == json.loads(plain.stdout)
    assert json.loads(forked.stdout)["cwd"] == str(tmp_path)


def test_an_environment_the_interpreter_reads_at_start_is_started_plainly(tmp_path):
    """PYTHONHASHSEED (like LANG, TZ, OMP_NUM_THREADS) acts at the start: no fork can give it."""
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONHASHSEED="0")  # 0: hash randomization off
    forked, plain = both_ways(env, tmp_path)
    assert json.loads(forked.stdout) == json.loads(plain.stdout)
    assert json.loads(forked.stdout)["hash_randomization"] == 0


def test_this_process_s_start_up_environment_changed_gets_a_zygote_of_its_own(tmp_path, monkeypatch):
    """A library a test loads may set a variable a start reads (the multilingual model sets
    OMP_WAIT_POLICY in the worker): the commands that inherit it are still forked, from a zygote
    started with it, and see what a plain start sees. (They were all plain subprocesses once.)"""
    before = _zygote()
    monkeypatch.setenv("TZ", "Asia/Seoul" if os.environ.get("TZ") != "Asia/Seoul" else "UTC")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    args = ["0", str(os.getpgrp()), str(os.getsid(0))]
    with (tmp_path / "err").open("w") as err:
        proc = start_cli(args, env, tmp_path, subprocess.PIPE, err, True, False, PROBE)
    assert isinstance(proc, ForkedProcess) and _zygote() is not before
    out, _ = proc.communicate(timeout=120)
    forked, plain = json.loads(out), json.loads(both_ways(env, tmp_path)[1].stdout)
    assert forked.pop("streams") == ["other", "fifo", "file"] and plain.pop("streams")[2] == "fifo"
    assert forked == plain and forked["environ"]["TZ"] == os.environ["TZ"]
    monkeypatch.undo()
    assert _zygote() is before  # and the first one serves the environment it started with again


def test_a_module_of_a_preloaded_library_s_name_in_the_folder_wins_as_it_would(tmp_path):
    write(tmp_path / "yaml.py", "SHADOW = True\n")
    write(tmp_path / "probe_yaml.py", "import yaml\nprint(getattr(yaml, 'SHADOW', False))\n")
    forked = run_cli([], env=dict(os.environ), cwd=tmp_path, timeout=120, module="probe_yaml")
    assert (forked.returncode, forked.stdout) == (0, "True\n"), forked.stderr


def test_a_command_past_its_timeout_is_killed(tmp_path):
    write(tmp_path / "sleeper.py", "import time\nprint('started', flush=True)\ntime.sleep(60)\n")
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired) as timed_out:
        run_cli([], env=dict(os.environ), cwd=tmp_path, timeout=2, module="sleeper")
    assert time.monotonic() - started < 20
    assert timed_out.value.output == b"started\n"
    # and the zygote serves the next command
    assert run_cli(["--help"], env=dict(os.environ), timeout=120).returncode == 0
    assert _zygote().proc.poll() is None


def test_signals_are_as_the_caller_has_them_now(tmp_path):
    """An ignored signal survives exec, a blocked one too: a forked command gets the caller's
    current ones (the zygote's are from when it started), the rest as a new interpreter sets them."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    _zygote()  # started before the change, with neither
    previous = signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    try:
        forked, plain = both_ways(env, tmp_path)
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR1})
        signal.signal(signal.SIGUSR2, previous)
    seen = json.loads(forked.stdout)
    assert seen == json.loads(plain.stdout)
    assert seen["signals"]["SIGUSR2"] == str(signal.SIG_IGN) and int(signal.SIGUSR1) in seen["blocked"]
    # and back: the next command has neither
    seen = json.loads(both_ways(env, tmp_path)[0].stdout)
    assert seen["signals"]["SIGUSR2"] == str(signal.SIG_DFL) and seen["blocked"] == []


def test_a_started_command_is_a_popen_of_its_own(tmp_path):
    """:func:`start_cli`: the probe forked and the probe started by Popen, each in a new session,
    stdout to a pipe and stderr to a file: both see the same; exit code, streams and ``pid``
    (the session's leader) as Popen gives them."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    args = ["5", str(os.getpgrp()), str(os.getsid(0))]
    seen = {}
    for way in ("forked", "plain"):
        with (tmp_path / f"{way}.err").open("w") as err:
            if way == "forked":
                proc = start_cli(args, env, tmp_path, subprocess.PIPE, err, True, True, PROBE)
                assert isinstance(proc, ForkedProcess)
            else:
                proc = subprocess.Popen(
                    [sys.executable, "-m", PROBE, *args], env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                    stderr=err, text=True, start_new_session=True,
                )  # fmt: skip
        out, _ = proc.communicate(timeout=120)
        seen[way] = json.loads(out)
        assert proc.returncode == proc.poll() == proc.wait() == 5
        assert (tmp_path / f"{way}.err").read_text() == "probe: done\nsecond line\n"
    assert seen["forked"] == seen["plain"]
    assert not seen["forked"]["process_group_is_parents"] and not seen["forked"]["session_is_parents"]
    assert seen["forked"]["streams"][1:] == ["fifo", "file"]


def test_a_started_command_polls_waits_and_dies_as_popen_does(tmp_path):
    """Running: ``poll`` is None, ``wait`` times out; a signal to its group (it leads a new
    session) ends it, and its status says so; a signal after its end is not sent."""
    write(tmp_path / "sleeper.py", "import time\nprint('started', flush=True)\ntime.sleep(60)\n")
    proc = start_cli(
        [], dict(os.environ), tmp_path, subprocess.PIPE, subprocess.STDOUT, start_new_session=True,
        module="sleeper",
    )  # fmt: skip
    assert proc.stdout.readline() == b"started\n" and proc.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(timeout=0.2)
    assert os.getpgid(proc.pid) == proc.pid
    os.killpg(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=30) == -signal.SIGKILL
    proc.kill()  # ended and reaped: nothing is sent (the pid may be another process's by now)
    proc.stdout.close()
    # a command's environment that a starting interpreter reads: a plain Popen, as run_cli does
    hooked = dict(
        os.environ, PYTHONPATH=str(REPO / "tests" / "orchestration" / "fake_systems" / "pause_hook")
    )
    plain = start_cli(["--help"], hooked, tmp_path, subprocess.DEVNULL, subprocess.DEVNULL)
    assert isinstance(plain, subprocess.Popen) and plain.wait(timeout=120) == 0
