"""Start a system-under-test command so that it, and everything it spawns, dies with kebab-eval.

A command runs under a small supervisor, this file run as a script (``python -I -S guard.py``,
standard library only, about 12 ms to start):

* the supervisor is the leader of a new session and process group; the command is its child in
  that group, so :func:`~.command.kill_group` still kills the command with its own children;
* on Linux it asks for a death signal (``prctl(PR_SET_PDEATHSIG)``) when the kebab-eval thread
  that started it ends — a ``SIGKILL`` of kebab-eval included — and then SIGKILLs its whole
  group: the command and every descendant that stayed in the group (one that moved itself to a
  new session or group escapes, as it escapes any group kill);
* it reports whether ``exec`` succeeded over a status pipe (so a missing program is an
  ``OSError`` in kebab-eval, as with a plain ``Popen``), lets go of the stdio pipes (only the
  command holds them), and exits as the command did (its exit code, or the same signal), so
  ``Popen.returncode`` means what it would without the supervisor.

The death signal belongs to the *thread* that forked the supervisor, so every supervisor is
started from one long-lived thread of this process (:func:`spawn`); a worker thread that ends
does not take the commands it started with it. Elsewhere than Linux there is no death signal:
commands are still killed with their group at the end of a query or run, but not after a
``SIGKILL`` of kebab-eval.
"""

from __future__ import annotations

import os
import signal
import sys

GUARD_SIGNAL = signal.SIGUSR2  # delivered to the supervisor when kebab-eval's spawning thread dies
_PR_SET_PDEATHSIG = 1


def _kill_group(*_: object) -> None:
    os.killpg(0, signal.SIGKILL)  # the supervisor's own group: itself, the command, its children


def _set_death_signal(sig: int) -> None:
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: no death signal (see the module docstring)
        pass


def _main(argv: list[str]) -> None:
    parent, status_fd, command = int(argv[1]), int(argv[2]), argv[3:]
    os.set_inheritable(status_fd, False)  # the command must not hold it: kebab-eval reads to EOF
    signal.signal(GUARD_SIGNAL, _kill_group)
    _set_death_signal(GUARD_SIGNAL)
    if os.getppid() != parent:  # kebab-eval died before the death signal was armed
        _kill_group()
    read_end, write_end = os.pipe()  # close-on-exec: EOF with no data means exec succeeded
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        signal.signal(GUARD_SIGNAL, signal.SIG_DFL)
        # kebab-eval's run thread blocks SIGINT (cli/interrupt.py) and a signal mask is inherited:
        # the system's command starts with none blocked, as from a shell
        signal.pthread_sigmask(signal.SIG_SETMASK, set())
        try:
            os.execvp(command[0], command)
        except OSError as exc:
            os.write(write_end, str(exc.errno or 0).encode())
        os._exit(127)
    os.close(write_end)
    error = b""
    while chunk := os.read(read_end, 32):
        error += chunk
    os.close(read_end)
    os.write(status_fd, b"E" + error if error else b"R")
    os.close(status_fd)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # let go of the pipes: EOF on stdout must depend on the command alone
        os.dup2(null, fd)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            import resource

            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # re-raising SIGSEGV must not dump core
        except (ImportError, ValueError, OSError):
            pass
        if sig not in (signal.SIGKILL, signal.SIGSTOP):  # these two have no handler to reset
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


if __name__ == "__main__":
    _main(sys.argv)
