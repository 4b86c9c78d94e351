"""``python -m tests.process_probe CODE``: prints, as JSON, what a process started so can see of
how it was started (for tests/test_forked_cli.py), writes a line to stderr, and exits with CODE."""

from __future__ import annotations

import json
import locale
import os
import resource
import signal
import stat
import sys


def _stream(fd: int) -> str:
    mode = os.fstat(fd).st_mode
    return (
        "fifo"
        if stat.S_ISFIFO(mode)
        else "tty"
        if os.isatty(fd)
        else "file"
        if stat.S_ISREG(mode)
        else "other"
    )


def main() -> None:
    fds = sorted(int(fd) for fd in os.listdir("/proc/self/fd"))
    report = {
        "argv": sys.argv,
        "path": sys.path,
        "cwd": os.getcwd(),
        "environ": dict(os.environ),
        "open_fds": fds[:3] + [fd for fd in fds[3:] if os.path.exists(f"/proc/self/fd/{fd}")],
        "streams": [_stream(fd) for fd in (0, 1, 2)],
        "signals": {
            s.name: str(signal.getsignal(s))
            for s in signal.Signals
            if s not in (signal.SIGKILL, signal.SIGSTOP)
        },
        "blocked": sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])),
        "process_group_is_parents": os.getpgrp() == int(sys.argv[2]),
        "session_is_parents": os.getsid(0) == int(sys.argv[3]),
        "umask": os.umask(0o022),
        "limits": [
            resource.getrlimit(r) for r in (resource.RLIMIT_AS, resource.RLIMIT_NOFILE, resource.RLIMIT_CPU)
        ],
        "encoding": [sys.stdout.encoding, sys.stderr.encoding, locale.getpreferredencoding(False)],
        "line_buffering": [sys.stdout.line_buffering, sys.stderr.line_buffering],
        "flags": list(sys.flags),
        "hash_randomization": sys.flags.hash_randomization,
        "name": __name__,
        "spec": __spec__.name if __spec__ else None,
        "kebab_modules_loaded": sorted(m for m in sys.modules if m.startswith("kebab_eval_pipeline")),
        "main_file": getattr(sys.modules["__main__"], "__file__", None),
    }
    print(json.dumps(report))
    print("probe: done\r\nsecond line", file=sys.stderr)
    raise SystemExit(int(sys.argv[1]))


if __name__ == "__main__":
    main()
