"""Errors users can act on.

``InputError`` carries every offender at once (file, position, query id, field,
reason) so a curator fixes a whole file in one pass. The CLI prints it and
exits 2; the Dagster layer raises it as a step failure with the same text.

CLI exit codes (:class:`ExitCode`, each explained in :data:`EXIT_CODES`): 0 success; 1
``GateFailure`` / ``SystemHealthFailure``; 2 ``InputError`` (and usage errors); 3 anything
unexpected (an internal failure); 4 ``RunInProgress``; 130 ``Interrupted`` (Ctrl-C).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum


class ExitCode(IntEnum):
    """The exit codes of ``kebab-eval`` (an ``int``: ``sys.exit(ExitCode.INPUT)`` exits 2)."""

    SUCCESS = 0
    FAILED = 1
    INPUT = 2
    INTERNAL = 3
    IN_PROGRESS = 4
    INTERRUPTED = 130  # the shell's code for SIGINT


#: What each exit code means, for people: the CLI reference of the documentation site is generated
#: from it (docs/reference_pages.py), so the table there cannot drift from the codes the CLI uses.
EXIT_CODES: Mapping[ExitCode, str] = {
    ExitCode.SUCCESS: "success",
    ExitCode.FAILED: (
        "a blocking gate failed (including a regression or verdict gate of `compare --config`), the "
        "system under test failed its `system_health` check, or a check the command runs failed "
        "(`golden health`'s blocking findings, the probe of `golden validate --config`)"
    ),
    ExitCode.INPUT: (
        "bad input or usage: one line per offender (file, line, query id, field, reason), no "
        "traceback — also when the bad input is only found inside a Dagster step (a judge model that "
        "does not load)"
    ),
    ExitCode.INTERNAL: (
        "an unexpected internal failure: one paragraph; `KEBAB_EVAL_DEBUG=1` shows the traceback "
        "(and Dagster's step records)"
    ),
    ExitCode.IN_PROGRESS: (
        "refused: another run of the same run id is in progress, or replaced this run's stored "
        "results while it ran (the message names it: Dagster run id, pid, host, start time)"
    ),
    ExitCode.INTERRUPTED: "interrupted (Ctrl-C): one line saying what was stored, no traceback",
}


@dataclass(frozen=True)
class Offender:
    """One problem in one input: where it is and why it is wrong."""

    file: str
    reason: str
    position: str | None = None  # "line 12, column 3" or "queries[4]"
    query_id: str | None = None
    field: str | None = None

    def render(self) -> str:
        where = self.file
        if self.position:
            where += f":{self.position}"
        parts = [where]
        if self.query_id is not None:
            parts.append(f"query {self.query_id!r}")
        if self.field:
            parts.append(f"field {self.field!r}")
        return " — ".join(parts) + f": {self.reason}"


class FieldValueError(ValueError):
    """A bad value of one config field, raised where the field is known (e.g. an adapter checking
    ``system.search_argv[0]``): whoever turns it into an :class:`Offender` names ``field``."""

    def __init__(self, field: str, reason: str):
        super().__init__(reason)
        self.field = field


class InputError(Exception):
    """Bad input from a user: a config, a golden set, a CLI argument.

    ``offenders`` lists every problem found; ``str(error)`` renders them all.
    """

    def __init__(self, summary: str, offenders: list[Offender] | None = None):
        self.summary = summary
        self.offenders = list(offenders or [])
        super().__init__(self.render())

    def render(self) -> str:
        if not self.offenders:
            return self.summary
        lines = [f"{self.summary} ({len(self.offenders)} problem{'s' if len(self.offenders) != 1 else ''}):"]
        lines += [f"  - {o.render()}" for o in self.offenders]
        return "\n".join(lines)


class GateFailure(Exception):
    """A blocking ship gate failed (CLI exit code 1, :attr:`ExitCode.FAILED`)."""


class SystemHealthFailure(GateFailure):
    """The system under test failed: every query, or more than ``system_health.max_error_rate`` of
    them, errored (CLI exit code 1, like a gate)."""


class Interrupted(Exception):
    """The work was interrupted (Ctrl-C; :mod:`kebab_eval_pipeline.foundation.cancellation`): raised where a
    run stops handing out queries or publishing results, and by the CLI with a message saying what
    was (not) stored (exit code 130, the shell's code for SIGINT)."""


class RunInProgress(Exception):
    """Another run of the same run id (partition) is in progress, or replaced this run's results
    while it ran (CLI exit code 4)."""
