"""The command adapter: an external CLI run once per query (SPEC §4 "command").

(``protocol: jsonl`` — one long-lived process per worker speaking JSON lines — is
:mod:`.command_jsonl`, built on this class.)

``search_argv`` (and ``ask_argv`` for answers) is an argv list run without a shell.
``{query}``, ``{query_id}``, ``{k}`` and ``{mode}`` are substituted inside each item in
a single pass, so a query is always exactly one argument, byte for byte — shell
metacharacters, quotes and even a literal ``{k}`` inside the query stay as they are.

Per query: a timeout (the whole process group is killed, so a child the command
spawned cannot keep it alive), stdout parsed as ``search_hit.v1``-style JSON (see
:mod:`.wire`), and a non-zero exit, a timeout or unreadable output as that query's
error with the tail of stderr. Queries run ``concurrency`` at a time.

With answers on, a query runs ``search_argv`` and then ``ask_argv`` (two processes); with
``ask_returns_hits`` it runs ``ask_argv`` alone and reads the hits from the same output, so the
hits scored are the ones the answer was built from.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kebab_eval_pipeline.settings import PLACEHOLDER_RE, CommandSystemSettings
from kebab_eval_pipeline.systems.base import Answer, Hit, OpaqueSystem, SystemInfo
from kebab_eval_pipeline.systems.outcome import (
    BAD_JSON,
    EXCEPTION,
    EXIT_CODE,
    TIMEOUT,
    QueryFailure,
    QueryOutcome,
    QueryRequest,
)
from kebab_eval_pipeline.systems.per_query import PerQueryAdapter, SearchReply, timed_call
from kebab_eval_pipeline.systems.versions import apply_version_report
from kebab_eval_pipeline.systems.wire import parse_answer, parse_hits, parse_scope

STDERR_TAIL_CHARS = 400
KILL_GRACE_S = 5.0  # after SIGKILL, how long to wait for the pipes to close


def substitute(argv: Sequence[str], values: dict[str, str]) -> list[str]:
    """``argv`` with ``{query}``, ``{query_id}``, ``{k}``, ``{mode}`` replaced inside each item.

    One regex pass per item, so substituted text is never substituted again (a query
    containing ``{k}`` stays literal). Other braces are left alone.
    """
    return [PLACEHOLDER_RE.sub(lambda m: values[m.group(1)], item) for item in argv]


def tail(text: str, limit: int = STDERR_TAIL_CHARS) -> str:
    """The last ``limit`` characters of ``text`` on one line (whitespace collapsed)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else "…" + flat[-limit:]


def resolve_executable(argv0: str, cwd: str | None) -> str:
    """The program ``argv0`` names: a path (relative to ``cwd``) or a name on PATH.

    Raises ValueError when it cannot be found or run, so a misconfigured command fails the
    run before any query instead of turning every row into the same error.
    """
    if os.sep in argv0 or (os.altsep and os.altsep in argv0):
        path = Path(argv0)
        if not path.is_absolute() and cwd:
            path = Path(cwd) / path
        if not path.is_file() or not os.access(path, os.X_OK):
            raise ValueError(f"command {argv0!r} is not an executable file")
        return str(path)
    found = shutil.which(argv0)
    if found is None:
        raise ValueError(f"command {argv0!r} not found on PATH")
    return found


class CommandSystem(OpaqueSystem, PerQueryAdapter):
    """Runs ``settings.search_argv`` / ``ask_argv`` per query (see the module docstring)."""

    def __init__(self, settings: CommandSystemSettings) -> None:
        if settings.cwd and not Path(settings.cwd).is_dir():
            raise ValueError(f"cwd {settings.cwd!r} is not a folder")
        for name in ("search_argv", "ask_argv", "argv", "version_argv"):
            argv = getattr(settings, name)
            if argv:
                try:
                    resolve_executable(argv[0], settings.cwd)
                except ValueError as exc:
                    raise ValueError(f"system.{name}: {exc}") from None
        self.settings = settings
        self.concurrency = settings.concurrency
        self.can_answer = settings.ask_argv is not None
        self._info: SystemInfo | None = None
        self._info_lock = threading.Lock()

    # -- one process -------------------------------------------------------------------------

    def _values(self, request: QueryRequest, k: int) -> dict[str, str]:
        return {
            "query": request.query,
            "query_id": request.query_id,
            "k": str(k),
            "mode": self.settings.mode or "",
        }

    def run_process(self, argv: list[str]) -> str:
        """Run ``argv`` (no shell) and return its stdout; QueryFailure on timeout / exit code."""
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=self.settings.cwd,
                start_new_session=True,  # its own process group, killed whole on timeout
            )
        except OSError as exc:
            raise QueryFailure(EXCEPTION, f"cannot start {argv[0]!r}: {exc.strerror or exc}") from None
        try:
            stdout, stderr = proc.communicate(timeout=self.settings.timeout_s)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            try:
                _, stderr = proc.communicate(timeout=KILL_GRACE_S)
            except subprocess.TimeoutExpired:  # a grandchild escaped the group and holds the pipes
                stderr = b""
            message = f"no result within {self.settings.timeout_s:g} s; process killed"
            if stderr:
                message += f"; stderr: {tail(stderr.decode('utf-8', 'replace'))}"
            raise QueryFailure(TIMEOUT, message, timed_out=True) from None
        if proc.returncode != 0:
            code = proc.returncode
            what = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
            err = tail(stderr.decode("utf-8", "replace"))
            raise QueryFailure(EXIT_CODE, f"{what}" + (f"; stderr: {err}" if err else "; no stderr"))
        try:
            return stdout.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise QueryFailure(BAD_JSON, f"output is not UTF-8 (byte {exc.start})") from None

    def _json(self, argv_template: list[str], request: QueryRequest, k: int) -> Any:
        stdout = self.run_process(substitute(argv_template, self._values(request, k)))
        return parse_json_output(stdout)

    # -- the adapter -------------------------------------------------------------------------

    def search_one(self, request: QueryRequest, k: int) -> SearchReply:
        assert self.settings.search_argv is not None
        payload = self._json(self.settings.search_argv, request, k)
        hits, warnings = parse_hits(payload, k, self.settings.response)
        return SearchReply(hits, warnings, 1, parse_scope(payload, self.settings.response))

    def ask_one(self, request: QueryRequest, k: int, hits: list[Hit]) -> tuple[Answer, int]:
        assert self.settings.ask_argv is not None
        return parse_answer(self._json(self.settings.ask_argv, request, k), self.settings.response), 1

    def run_one(self, request: QueryRequest, k: int, answers: bool) -> QueryOutcome:
        """Search and ask as two processes, or — ``ask_returns_hits`` with answers on — one ask
        process whose output gives both (then ``retrieval_ms`` and ``answer_ms`` are both its time)."""
        if not (answers and self.settings.ask_returns_hits):
            return super().run_one(request, k, answers)
        assert self.settings.ask_argv is not None
        outcome = QueryOutcome(query_id=request.query_id)

        def both() -> int:
            payload = self._json(self.settings.ask_argv, request, k)
            outcome.hits, outcome.warnings = parse_hits(payload, k, self.settings.response)
            outcome.scope = parse_scope(payload, self.settings.response)
            outcome.answer = parse_answer(payload, self.settings.response)
            return 1

        outcome.retrieval_ms = outcome.answer_ms = timed_call(outcome, both)
        return outcome

    def _details(self) -> dict[str, str]:
        s = self.settings
        details = {"search_argv": shlex.join(s.search_argv or []), "timeout_s": f"{s.timeout_s:g}"}
        details["concurrency"] = str(s.concurrency)
        if s.ask_argv:
            details["ask_argv"] = shlex.join(s.ask_argv)
        if s.ask_returns_hits:
            details["ask_returns_hits"] = "true"
        return details

    def _version_report(self) -> Any:
        """What ``version_argv`` prints (JSON, else the text); QueryFailure when it fails."""
        s = self.settings
        assert s.version_argv is not None
        values = {"query": "", "query_id": "", "k": "0", "mode": s.mode or ""}
        stdout = self.run_process(substitute(s.version_argv, values))
        try:
            return json.loads(stdout)
        except ValueError:
            return stdout

    def info(self) -> SystemInfo:
        """Kind, mode, the argv templates and, when ``version_argv`` is set, what it reports
        (run once; a failure is recorded in ``details["version_error"]``, never raised)."""
        with self._info_lock:
            if self._info is None:
                s = self.settings
                info = SystemInfo(kind="command", mode=s.mode, details=self._details())
                if s.version_argv:
                    try:
                        info = apply_version_report(info, self._version_report())
                    except QueryFailure as failure:
                        info.details["version_error"] = str(failure)
                self._info = info
            return self._info.model_copy(deep=True)


def parse_json_output(stdout: str) -> Any:
    """JSON from a process's stdout; QueryFailure(``bad_json``) with position and a preview."""
    if not stdout.strip():
        raise QueryFailure(BAD_JSON, "no output on stdout")
    try:
        return json.loads(stdout)
    except json.JSONDecodeError as exc:
        preview = " ".join(stdout.split())[:120]
        raise QueryFailure(
            BAD_JSON, f"{exc.msg} at line {exc.lineno} column {exc.colno}: {preview!r}"
        ) from None
    except (ValueError, RecursionError) as exc:  # an integer past Python's digit limit, deep nesting
        raise QueryFailure(BAD_JSON, f"unreadable JSON: {str(exc)[:120]}") from None


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the process's whole group (it runs in a session of its own), else the process."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):  # it may have gone meanwhile
            proc.kill()
