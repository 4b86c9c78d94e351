"""``kebab-eval`` processes forked from a process that has imported the CLI's libraries already.

A test's CLI command is a real process of its own — its own pid, its own standard streams (pipes
the test reads to the end), its own environment, working folder and exit code — but it does not
pay the interpreter's start and the third-party imports (Dagster, pandas, pyarrow, SciPy,
SQLAlchemy: ~1 s of CPU a command, more on a loaded machine) that every one of the suite's ~1,000
CLI commands paid again. What it runs is what ``python -m kebab_eval_pipeline.cli`` runs: the
package itself is imported in the forked process (nothing of kebab-eval is imported before the
fork, so its import-time state — consoles, caches, the run context — is the command's own), and
``sys.argv``, ``sys.path[0]`` and ``os.environ`` are what that command line would have given it.

A command whose environment differs from the forking process's in what the interpreter or those
libraries read when they start (``PYTHON*``, locale, time zone, thread counts, ...) runs as a
plain subprocess instead: only then could the two differ. (When the test process's own environment
changes so, the commands that inherit it get a zygote started with it.) Tests about a process as
such — signals, Ctrl-C, what a fresh process imports, resource limits — start their own processes,
not this.

The forking process (the *zygote*) starts on the first command of a test process and ends with it
(its stdin is a pipe from the test process: EOF ends it). It serves one request at a time on a
Unix socket: the argv, environment and folder, with the caller's three standard-stream file
descriptors passed along (SCM_RIGHTS); it answers with the child's pid, and later with its exit
status (it watches each child through a pidfd, single-threaded: nothing runs in it when it forks).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import locale
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

#: Imported once in the zygote, so not by each command: the CLI's heaviest third-party imports
#: (a demo run's). Not kebab_eval_pipeline's own modules, nor rich/typer (consoles read the
#: terminal and the environment when made).
PRELOAD = (
    "numpy",
    "pandas",
    "pyarrow",
    "pyarrow.parquet",
    "scipy.special",
    "scipy.stats",
    "sqlalchemy",
    "alembic.command",
    "pydantic",
    "yaml",
    "jinja2",
    "dagster",
    # the artifact store's upath/fsspec
    "upath",
)

#: Preloaded when they can be: what opening the instance imports (Dagster's storages pull in its
#: daemon, backfill and workspace modules, SQLAlchemy's MySQL dialect, structlog, watchdog: ~0.12 s
#: a command). A private module of Dagster's: another release may move it, and then each command
#: imports it itself, as it would anyway.
OPTIONAL_PRELOAD = ("dagster._core.storage.sqlite_storage",)

#: Environment variables read when the interpreter or a preloaded library starts: a command whose
#: environment differs from the zygote's in one of them is started as a plain subprocess.
STARTUP_VARIABLES = (
    "PYTHON",
    "LANG",
    "LC_",
    "LANGUAGE",
    "TZ",
    "OMP_",
    "OPENBLAS_",
    "MKL_",
    "NUMEXPR_",
    "NPY_",
    "NUMPY_",
    "ARROW_",
    "PYARROW_",
    "PANDAS_",
    "SCIPY_",
    "SQLALCHEMY_",
    "ALEMBIC_",
    "DAGSTER_DISABLE",
    "DAGSTER_LOG",
    "LD_",
    "MALLOC_",
    # read when those preloads are imported
    "FSSPEC_",
    "NO_COLOR",
    "FORCE_COLOR",
    "FRESHNESS_DAEMON_",
    "DAGSTER_BACKFILL_",
    "DAGSTER_DEV_",
    "DAGSTER_EVENT_LOG_CONSUMER_",
    "DAGSTER_RUN_QUEUE_",
)

MODULE = "kebab_eval_pipeline.cli"

#: The zygote watches its children through pidfds (Linux 5.3+); elsewhere every command is a
#: plain subprocess.
FORKABLE = hasattr(os, "pidfd_open") and sys.platform.startswith("linux")

#: Signals whose "ignored" survives exec into a new process (subprocess resets SIGPIPE and SIGXFSZ
#: to their defaults before exec; SIGKILL and SIGSTOP cannot be ignored).
_INHERITED_IGNORES = [
    s
    for s in signal.valid_signals()
    if s not in (signal.SIGKILL, signal.SIGSTOP, signal.SIGPIPE, signal.SIGXFSZ)
]


def _startup_part(env: dict[str, str]) -> dict[str, str]:
    """What a process's start reads of ``env`` (``PYTHONPATH`` apart: the child sets its sys.path)."""
    return {k: v for k, v in env.items() if k.startswith(STARTUP_VARIABLES) and k != "PYTHONPATH"}


def _pythonpath(env: dict[str, str], cwd: str) -> list[str]:
    """``$PYTHONPATH``'s folders as the interpreter puts them on sys.path in working folder
    ``cwd``: relative ones made absolute, an empty one the working folder."""
    value = env.get("PYTHONPATH", "")
    return [os.path.normpath(os.path.join(cwd, p)) for p in value.split(os.pathsep)] if value else []


def _unique(paths: list[str]) -> list[str]:
    return list(dict.fromkeys(paths))


#: The zygote's sys.path without its own first folder and its $PYTHONPATH's: the interpreter's
#: (standard library, site-packages and their .pth entries), as every command starts with.
_BASE_PATH: list[str] = []


# --- the zygote ----------------------------------------------------------------------------------


def _child(request: dict, fds: list[int], listener: socket.socket) -> None:
    """In the forked process: become ``python -m module *argv`` as the caller would have started it
    now, and run it."""
    module, argv, env, cwd = request["module"], request["argv"], request["env"], request["cwd"]
    try:
        listener.close()
        # Signals as a process the caller starts now has them: what the caller ignores stays
        # ignored across exec, the rest as a new interpreter sets them; the caller's thread's mask.
        ignored = set(request["ignored"])
        for number in _INHERITED_IGNORES:
            if number in ignored:
                signal.signal(number, signal.SIG_IGN)
            elif signal.getsignal(number) is signal.SIG_IGN:  # ignored when the zygote started
                default = signal.default_int_handler if number == signal.SIGINT else signal.SIG_DFL
                signal.signal(number, default)
        signal.pthread_sigmask(signal.SIG_SETMASK, request["blocked"])
        if request.get("session"):  # as Popen(start_new_session=True): its own session and group
            os.setsid()
        if request.get("rlimit_as"):  # its address space capped, before the command imports a thing
            import resource

            resource.setrlimit(resource.RLIMIT_AS, (request["rlimit_as"], request["rlimit_as"]))
        for target, fd in enumerate(fds):
            os.dup2(fd, target)  # dup2 makes the copy inheritable, as a new process's 0-2 are
        # nothing else of the zygote's (its pipe to the test process, other requests' sockets and
        # pidfds) reaches the command: a new process has only its three streams
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        # `python -m`: the working folder first, then $PYTHONPATH's folders, then the interpreter's
        sys.path[:] = [os.getcwd(), *_unique([*_pythonpath(env, os.getcwd()), *_BASE_PATH])]
        sys.argv = [module, *argv]
        import runpy

        runpy.run_module(module, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:  # (the console script ends with os._exit: this is a fallback)
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, int | None):
            print(exc.code, file=sys.stderr)
    except BaseException:  # KEBAB_EVAL_DEBUG=1 lets an error escape: as the interpreter reports it
        sys.excepthook(*sys.exc_info())
        code = 1
    try:  # then the interpreter's exit: atexit functions, the streams flushed
        import atexit as exits

        exits._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def serve(path: str) -> None:
    """The zygote's loop: preload, say "ready" on stdout, then fork a command per request."""
    import importlib
    import io

    # the preloads must be silent: what they would print belongs in each command's output
    captured = io.StringIO()
    real_out, real_err = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = captured
    try:
        for name in PRELOAD:
            importlib.import_module(name)
        for name in OPTIONAL_PRELOAD:
            with contextlib.suppress(ImportError):
                importlib.import_module(name)
    finally:
        sys.stdout, sys.stderr = real_out, real_err
    if captured.getvalue():
        raise SystemExit(f"preloading printed something (not forkable): {captured.getvalue()!r}")
    # No Python thread may run while it forks. (OpenBLAS's and Arrow's native pools exist after
    # their import; both re-make their threads in a forked child, as multiprocessing's fork and
    # Dagster's own forkserver, which preloads these libraries, rely on.)
    if threading.active_count() != 1:
        raise SystemExit("preloading started a Python thread: forking would be unsafe")

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(16)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "accept")
    selector.register(sys.stdin, selectors.EVENT_READ, "stdin")
    print("ready", flush=True)
    while True:
        for key, _ in selector.select():
            if key.data == "stdin":
                if not os.read(sys.stdin.fileno(), 4096):
                    return  # the test process has ended
            elif key.data == "accept":
                conn, _ = listener.accept()
                msg, fds, _, _ = socket.recv_fds(conn, 1 << 16, 3)
                while more := conn.recv(1 << 16):  # to EOF: the caller shut its side down
                    msg += more
                request = json.loads(msg)
                pid = os.fork()
                if pid == 0:
                    selector.close()
                    _child(request, fds, listener)
                for fd in fds:
                    os.close(fd)
                conn.sendall(f"{pid}\n".encode())
                pidfd = os.pidfd_open(pid)
                selector.register(pidfd, selectors.EVENT_READ, (pid, conn))
            else:
                pid, conn = key.data
                selector.unregister(key.fileobj)
                os.close(key.fileobj)
                _, status = os.waitpid(pid, 0)
                with contextlib.suppress(OSError):  # the caller gave up (a timeout) and killed it
                    conn.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())
                conn.close()


# --- the test's side -----------------------------------------------------------------------------


class _Zygote:
    def __init__(self, python: str, env: dict[str, str]) -> None:
        self.owner = os.getpid()  # a forked test process that exits must not end it
        self.folder = folder = tempfile.mkdtemp(prefix="kebab-cli-zygote-")
        self.path = os.path.join(folder, "socket")
        self.env = env
        self.proc = subprocess.Popen(
            [python, __file__, self.path],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=self.env,
            cwd=folder,
        )
        line = self.proc.stdout.readline()
        if line != b"ready\n":
            self.proc.kill()
            raise RuntimeError(f"the CLI zygote did not start (said {line!r}, exit {self.proc.wait()})")
        atexit.register(self.close)

    def close(self) -> None:
        if os.getpid() != self.owner:
            return
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        shutil.rmtree(self.folder, ignore_errors=True)


#: (interpreter, what a start reads of its environment) → (the test process that started that
#: zygote: a forked test must not reuse it, the zygote)
_ZYGOTES: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[int, _Zygote]] = {}


_ZYGOTE_LOCK = threading.Lock()  # commands started from several threads share one zygote


def _zygote(python: str | None = None, env: dict[str, str] | None = None) -> _Zygote | None:
    """This test process's zygote of interpreter ``python`` (this one by default, started with this
    process's environment as it is now; another, such as a new venv's, is started with the commands'
    environment ``env``), started on first use; None (with a warning) when it cannot start: then
    every command is a plain subprocess, only slower.

    A zygote serves the environment it started with. When this process's own environment changes
    in what a start reads (a library loaded in a test sets ``OMP_WAIT_POLICY``, say), the commands
    that inherit it get a zygote of their own rather than all becoming plain subprocesses."""
    with _ZYGOTE_LOCK:
        return _zygote_locked(python, env)


def _zygote_locked(python: str | None, env: dict[str, str] | None) -> _Zygote | None:
    global FORKABLE
    python = python or sys.executable
    start_env = dict(os.environ if env is None or python == sys.executable else env)
    key = (python, tuple(sorted(_startup_part(start_env).items())))
    started = _ZYGOTES.get(key)
    if started is None or started[0] != os.getpid() or started[1].proc.poll() is not None:
        try:
            zygote = _Zygote(python, start_env)
        except (OSError, RuntimeError) as exc:
            import warnings

            if python == sys.executable:
                FORKABLE = False
            warnings.warn(f"{python}'s commands run as plain subprocesses: {exc}", stacklevel=3)
            return None
        _ZYGOTES[key] = started = (os.getpid(), zygote)
    return started[1]


def _shadows_a_preload(env: dict[str, str], cwd) -> bool:
    """Whether a folder the command's sys.path would hold first (its working folder, its
    $PYTHONPATH) has a module of a preloaded library's name: the command would import that one;
    or its $PYTHONPATH has a ``sitecustomize``/``usercustomize``, which only a starting
    interpreter imports (a test's hook, e.g. fake_systems/pause_hook)."""
    tops = {name.partition(".")[0] for name in PRELOAD}
    folders = [cwd, *_pythonpath(env, cwd)]
    hooks = ("sitecustomize", "usercustomize")
    return any(
        os.path.exists(os.path.join(folder, top)) or os.path.exists(os.path.join(folder, top + ".py"))
        for folder in folders
        for top in tops
    ) or any(
        os.path.exists(os.path.join(folder, hook + ".py")) or os.path.isdir(os.path.join(folder, hook))
        for folder in _pythonpath(env, cwd)
        for hook in hooks
    )


def _text(data: bytes) -> str:
    """As ``subprocess.run(..., text=True)`` decodes: locale encoding, universal newlines."""
    text = data.decode(locale.getpreferredencoding(False))
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _plain(command, env, cwd, timeout, started) -> subprocess.CompletedProcess:
    """``subprocess.run(command, ..., capture_output=True, text=True)``; ``started(pid)`` first."""
    if started is None:
        return subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    with subprocess.Popen(
        command, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as proc:
        started(proc.pid)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise
    return subprocess.CompletedProcess(command, proc.returncode, out, err)


def _request(
    zygote: _Zygote,
    module: str,
    args: list[str],
    env: dict,
    cwd: str,
    fds: list[int],
    session: bool = False,
    rlimit_as: int | None = None,
    sigint: bool = False,
) -> socket.socket:
    """Ask ``zygote`` to fork ``python -m module *args`` with standard streams ``fds`` (in a new
    session when ``session``; its address space capped at ``rlimit_as`` bytes; ``sigint``: SIGINT at
    Python's default handler even where this process ignores it, as a shell starts a foreground
    job); the connection on which it answers the child's pid, then (when it ends) its exit status."""
    ignored = [int(s) for s in _INHERITED_IGNORES if signal.getsignal(s) is signal.SIG_IGN]
    if sigint:
        ignored = [s for s in ignored if s != signal.SIGINT]
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(zygote.path)
    request = {
        "module": module,
        "argv": args,
        "env": env,
        "cwd": cwd,
        "ignored": ignored,
        "blocked": sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])),
        "session": session,
        "rlimit_as": rlimit_as,
    }
    try:
        socket.send_fds(conn, [json.dumps(request).encode()], fds)
        conn.shutdown(socket.SHUT_WR)
    except BaseException:
        conn.close()
        raise
    return conn


def run_cli(
    args,
    env: dict[str, str] | None = None,
    cwd=None,
    timeout: float | None = None,
    module: str = MODULE,
    started=None,
    python: str | None = None,
) -> subprocess.CompletedProcess:
    """``subprocess.run([python, -m, kebab_eval_pipeline.cli, *args], env=env, cwd=cwd,
    capture_output=True, text=True, timeout=timeout)``, the process forked from the zygote.
    ``module``: another module to run so (the fidelity test's probe). ``started``: called with the
    command's pid once it runs (a test that asserts what ran in which process). ``python``: another
    interpreter (a new venv's python; its own zygote)."""
    args = [str(a) for a in args]
    env = dict(os.environ if env is None else env)
    command = [python or sys.executable, "-m", module, *args]
    cwd = os.path.abspath(cwd if cwd is not None else os.getcwd())
    if not FORKABLE:
        return _plain(command, env, cwd, timeout, started)
    zygote = _zygote(python, env)
    if zygote is None or _startup_part(env) != _startup_part(zygote.env) or _shadows_a_preload(env, cwd):
        return _plain(command, env, cwd, timeout, started)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    conn = _request(zygote, module, args, env, cwd, [0, out_w, err_w])
    os.close(out_w)
    os.close(err_w)
    with conn:
        answers = conn.makefile("rb")
        pid = int(answers.readline())
        if started is not None:
            started(pid)
        chunks: dict[int, list[bytes]] = {out_r: [], err_r: []}

        def drain(fd: int) -> None:
            while data := os.read(fd, 65536):
                chunks[fd].append(data)

        readers = [threading.Thread(target=drain, args=(fd,), daemon=True) for fd in chunks]
        for reader in readers:
            reader.start()
        deadline = None if timeout is None else time.monotonic() + timeout
        conn.settimeout(timeout)
        try:
            status = answers.readline()
        except TimeoutError:
            status = b""
        if not status:  # timed out: killed, as subprocess.run does
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            for reader in readers:
                reader.join(timeout=5)
            for fd in chunks:
                os.close(fd)
            raise subprocess.TimeoutExpired(
                command, timeout, b"".join(chunks[out_r]), b"".join(chunks[err_r])
            )
        for reader in readers:  # to EOF: every holder of the pipes (the command's children) is done
            reader.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        for fd in chunks:
            os.close(fd)
    return subprocess.CompletedProcess(
        command, int(status), _text(b"".join(chunks[out_r])), _text(b"".join(chunks[err_r]))
    )


class ForkedProcess:
    """A command :func:`start_cli` forked: what tests use of :class:`subprocess.Popen` — ``pid``,
    ``args``, ``returncode``, ``poll``, ``wait``, ``communicate``, ``send_signal``, ``terminate``,
    ``kill``, and ``stdout``/``stderr`` when they were ``PIPE``. The zygote reaps the process and
    sends its exit status on the connection this object holds."""

    def __init__(self, args: list[str], conn: socket.socket, pipes: dict[str, int], text: bool) -> None:
        self.args = args
        self._conn = conn
        self._answers = b""
        self.returncode: int | None = None
        mode = "r" if text else "rb"
        self.stdout = os.fdopen(pipes["stdout"], mode) if "stdout" in pipes else None
        self.stderr = os.fdopen(pipes["stderr"], mode) if "stderr" in pipes else None
        self.pid = int(self._line(None))

    def _line(self, timeout: float | None) -> str | None:
        """The zygote's next answer line, waiting at most ``timeout`` s (None: until it comes)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._answers:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            self._conn.settimeout(left)
            try:
                data = self._conn.recv(64)
            except (TimeoutError, BlockingIOError):
                return None
            if not data:
                raise RuntimeError(f"the CLI zygote ended before reporting on {self.args}")
            self._answers += data
        line, _, self._answers = self._answers.partition(b"\n")
        return line.decode()

    def poll(self) -> int | None:
        return self.wait(timeout=0, _raise=False)

    def wait(self, timeout: float | None = None, _raise: bool = True) -> int | None:
        if self.returncode is None:
            status = self._line(timeout)
            if status is None:
                if _raise:
                    raise subprocess.TimeoutExpired(self.args, timeout)
                return None
            self.returncode = int(status)
            self._conn.close()
        return self.returncode

    def communicate(self, timeout: float | None = None):
        """Read the ``PIPE`` streams to their end and wait, as Popen.communicate does."""
        streams = [s for s in (self.stdout, self.stderr) if s is not None]
        read: dict[int, object] = {}
        readers = [
            threading.Thread(target=lambda s=s: read.__setitem__(id(s), s.read()), daemon=True)
            for s in streams
        ]
        for reader in readers:
            reader.start()
        deadline = None if timeout is None else time.monotonic() + timeout
        for reader in readers:
            reader.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if reader.is_alive():
                raise subprocess.TimeoutExpired(self.args, timeout)
        self.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        for s in streams:
            s.close()
        return tuple(read.get(id(s)) if s is not None else None for s in (self.stdout, self.stderr))

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:  # as Popen: never a signal to a pid that may have been reused
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def start_cli(
    args,
    env: dict[str, str] | None = None,
    cwd=None,
    stdout=None,
    stderr=None,
    text: bool = False,
    start_new_session: bool = False,
    module: str = MODULE,
    python: str | None = None,
) -> ForkedProcess | subprocess.Popen:
    """``subprocess.Popen([python, -m, module, *args], env=env, cwd=cwd, stdout=stdout,
    stderr=stderr, text=text, start_new_session=start_new_session)``, the process forked from the
    zygote (a plain Popen where :func:`run_cli` would run a plain subprocess). ``stdout`` and
    ``stderr``: None (this process's), ``subprocess.PIPE``, ``DEVNULL``, a file or a descriptor;
    ``stderr`` may be ``subprocess.STDOUT``; ``python``: as for :func:`run_cli`."""
    args = [str(a) for a in args]
    env = dict(os.environ if env is None else env)
    command = [python or sys.executable, "-m", module, *args]
    cwd = os.path.abspath(cwd if cwd is not None else os.getcwd())
    zygote = _zygote(python, env) if FORKABLE else None
    if zygote is None or _startup_part(env) != _startup_part(zygote.env) or _shadows_a_preload(env, cwd):
        return subprocess.Popen(
            command, env=env, cwd=cwd, stdout=stdout, stderr=stderr, text=text,
            start_new_session=start_new_session,
        )  # fmt: skip
    mine: list[int] = []  # descriptors opened here, closed once the zygote has its copies
    pipes: dict[str, int] = {}

    def descriptor(name: str, target, default: int) -> int:
        if target is None:
            return default
        if target == subprocess.PIPE:
            read, write = os.pipe()
            pipes[name] = read
            mine.append(write)
            return write
        if target == subprocess.DEVNULL:
            mine.append(os.open(os.devnull, os.O_WRONLY))
            return mine[-1]
        return target if isinstance(target, int) else target.fileno()

    try:
        out = descriptor("stdout", stdout, 1)
        err = out if stderr == subprocess.STDOUT else descriptor("stderr", stderr, 2)
        conn = _request(zygote, module, args, env, cwd, [0, out, err], session=start_new_session)
        return ForkedProcess(command, conn, pipes, text)
    finally:
        for fd in mine:
            os.close(fd)


def spawn(
    args,
    env: dict[str, str],
    cwd,
    streams: tuple[int, int, int],
    session: bool = False,
    rlimit_as: int | None = None,
    sigint: bool = False,
    module: str = MODULE,
) -> ForkedProcess | None:
    """``Popen([python, -m, module, *args], stdin/stdout/stderr=streams, env, cwd,
    start_new_session=session)`` forked from the zygote, its address space capped at ``rlimit_as``
    bytes when given; ``sigint``: SIGINT at Python's default handler even when this process ignores
    it (as the shell starts a foreground job). Returns at once. None when the command cannot be
    forked (no zygote, or its environment differs in what a start reads, see :func:`run_cli`): the
    caller starts it itself."""
    args = [str(a) for a in args]
    cwd = os.path.abspath(cwd)
    zygote = _zygote() if FORKABLE else None
    if zygote is None or _startup_part(env) != _startup_part(zygote.env) or _shadows_a_preload(env, cwd):
        return None
    conn = _request(zygote, module, args, env, cwd, list(streams), session, rlimit_as, sigint)
    return ForkedProcess([sys.executable, "-m", module, *args], conn, {}, text=False)


if __name__ == "__main__":
    del sys.path[0]  # this file's folder (tests/): the preloads are imported as a command would
    _own = _pythonpath(dict(os.environ), os.getcwd())
    if _unique(sys.path[: len(_own)]) != _unique(_own):
        raise SystemExit(f"unexpected sys.path start {sys.path[:4]} for PYTHONPATH {_own}")
    _BASE_PATH[:] = sys.path[len(_own) :]
    serve(sys.argv[1])
