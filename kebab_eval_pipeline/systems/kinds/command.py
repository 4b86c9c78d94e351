"""The ``command`` system kind: an external CLI run per query (``protocol: per_query``,
:mod:`kebab_eval_pipeline.systems.command`) or one long-lived process speaking JSON lines
(``protocol: jsonl``, :mod:`kebab_eval_pipeline.systems.command_jsonl`).

Identity: the argv the pipeline runs (``search_argv``, or ``argv`` for protocol jsonl) as
configured — relative program paths already resolved against the config file — and ``mode``.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, model_validator

from kebab_eval_pipeline.foundation.config_model import StrictSettings
from kebab_eval_pipeline.systems.capabilities import Capabilities
from kebab_eval_pipeline.systems.kind import PathFixer, SystemKind, SystemName, adapter, register
from kebab_eval_pipeline.systems.templates import DEFAULT_MAX_RESPONSE_MB, PLACEHOLDER_RE, templates_need_mode
from kebab_eval_pipeline.systems.wire import ResponseMap

if TYPE_CHECKING:
    from kebab_eval_pipeline.systems.protocol import SystemUnderTest


#: The settings that hold a command line (each run with its program resolved the same way).
ARGV_FIELDS = ("search_argv", "ask_argv", "argv", "version_argv")


class CommandSystemSettings(StrictSettings):
    """An external CLI (SPEC §4 "command"). Arguments are an argv list — never a shell.

    ``protocol: per_query`` (the default) runs ``search_argv`` (and ``ask_argv``) once per query;
    ``{query}``, ``{query_id}``, ``{k}`` and ``{mode}`` are substituted inside each item, so the
    query is always exactly one argument, unchanged. ``ask_returns_hits`` says the ask command's
    JSON carries the hits too: with answers on, one ask process per query, no search process.
    ``protocol: jsonl`` starts ``argv`` once per worker (``concurrency``) and speaks JSON lines
    over its stdin/stdout (systems/command_jsonl.py): ``{mode}`` is the only placeholder there.
    """

    kind: Literal["command"]
    name: SystemName | None = None  # who this system is, for baselines (systems/identity.py)
    protocol: Literal["per_query", "jsonl"] = "per_query"
    search_argv: Annotated[list[str], Field(min_length=1)] | None = None  # per_query: required
    ask_argv: Annotated[list[str], Field(min_length=1)] | None = None  # per_query: needed for answers
    ask_returns_hits: bool = False  # per_query: the ask output carries the hits; no search call then
    argv: Annotated[list[str], Field(min_length=1)] | None = None  # jsonl: the long-lived process
    version_argv: Annotated[list[str], Field(min_length=1)] | None = None  # prints versions (JSON or text)
    mode: str | None = None  # substituted for {mode}; sent as "mode" in jsonl requests
    timeout_s: Annotated[float, Field(gt=0, le=3600)] = 30.0  # per query
    # Default 2 per-query processes, 1 long-lived process (filled in by _protocol_defaults).
    concurrency: Annotated[int, Field(ge=1, le=64)] = 2
    startup_timeout_s: Annotated[float, Field(gt=0, le=3600)] = 120.0  # jsonl: start to first reply
    max_restarts: Annotated[int, Field(ge=0, le=1000)] = 3  # jsonl: consecutive crashes restarted
    cwd: str | None = None
    # One response (per_query: a process's stdout; jsonl: one reply line), checked while reading.
    max_response_mb: Annotated[float, Field(gt=0, le=4096)] = DEFAULT_MAX_RESPONSE_MB
    response: ResponseMap = Field(default_factory=ResponseMap)

    def capabilities(self) -> Capabilities:
        """What its runs can carry: hits; answers (with citations and token counts, when its JSON
        has them) with ``ask_argv`` or protocol jsonl; versions read live from ``version_argv`` or
        the jsonl process's version line. A command cannot list its index."""
        jsonl = self.protocol == "jsonl"
        return Capabilities({"index_catalogue": "a command system cannot list what its index holds"}).lacking(
            answers=None if jsonl or self.ask_argv else "the command system has no ask_argv",
            live_versions=None
            if jsonl or self.version_argv
            else "the command system has no version_argv to read its versions from",
        )

    @model_validator(mode="before")
    @classmethod
    def _protocol_defaults(cls, data: Any) -> Any:
        if isinstance(data, dict) and "concurrency" not in data and data.get("protocol") == "jsonl":
            return {**data, "concurrency": 1}  # one long-lived process unless asked for more
        return data

    @model_validator(mode="after")
    def _argvs_fit_the_protocol(self) -> CommandSystemSettings:
        if self.protocol == "per_query":
            if self.search_argv is None:
                raise ValueError("system.search_argv is required (protocol per_query runs it once per query)")
            if self.argv is not None:
                raise ValueError("system.argv is for protocol: jsonl; per_query uses search_argv / ask_argv")
            if self.ask_returns_hits and self.ask_argv is None:
                raise ValueError("system.ask_returns_hits needs ask_argv")
            jsonl_only = sorted({"startup_timeout_s", "max_restarts"} & self.model_fields_set)
            if jsonl_only:  # set but without effect: say so rather than ignore it
                raise ValueError(
                    f"{', '.join('system.' + n for n in jsonl_only)}: only used by protocol jsonl "
                    "(per_query starts a new process for every call)"
                )
        else:
            if self.argv is None:
                raise ValueError(
                    "system.argv is required (protocol jsonl starts it once and talks JSON lines)"
                )
            unused = [n for n in ("search_argv", "ask_argv") if getattr(self, n) is not None]
            if self.ask_returns_hits:
                unused.append("ask_returns_hits")
            if unused:
                raise ValueError(
                    f"{', '.join('system.' + n for n in unused)}: not used by protocol jsonl "
                    "(one argv; each reply carries the hits and, when asked, the answer)"
                )
            per_query = sorted(
                {m.group(1) for item in self.argv for m in PLACEHOLDER_RE.finditer(item)} - {"mode"}
            )
            if per_query:
                raise ValueError(
                    f"system.argv: {', '.join('{' + p + '}' for p in per_query)} cannot be substituted in a "
                    "process that serves every query; they are fields of each JSON request"
                )
        if self.mode is None and templates_need_mode(
            self.search_argv, self.ask_argv, self.version_argv, self.argv
        ):
            raise ValueError("an argv uses {mode}; set system.mode")
        return self


def build(settings: CommandSystemSettings) -> SystemUnderTest:
    """A per-query command adapter, or the jsonl one (a ValueError for a program not found)."""
    if settings.protocol == "jsonl":
        return adapter("kebab_eval_pipeline.systems.command_jsonl:JsonlCommandSystem")(settings)
    return adapter("kebab_eval_pipeline.systems.command:CommandSystem")(settings)


def identity(settings: CommandSystemSettings) -> str:
    """The argv it runs, shell-joined."""
    return shlex.join(settings.argv if settings.protocol == "jsonl" else settings.search_argv or [])


def stored_target(details: Mapping[str, Any]) -> str | None:
    """The argv a run stored before identities were recorded (already shell-joined)."""
    return details.get("argv") if details.get("protocol") == "jsonl" else details.get("search_argv")


#: Executables that run a script named by their next argument (then that argument is shown too).
_INTERPRETERS = re.compile(r"(python|pypy|node|deno|bun|ruby|perl|php|bash|sh|zsh|uv|java)[\d.]*(\.exe)?")


def _command(argv_text: str) -> str:
    """The executable of a shell-joined argv (its base name when an absolute path), and the script
    after an interpreter: ``/usr/bin/python3 tools/sys.py {query}`` → ``python3 tools/sys.py``."""
    try:
        argv = shlex.split(argv_text)
    except ValueError:  # not shell-quoted after all: the first word is still the executable
        argv = argv_text.split()
    if not argv:
        return ""
    first = PurePath(argv[0]).name if PurePath(argv[0]).is_absolute() else argv[0]
    if _INTERPRETERS.fullmatch(PurePath(first).name) and len(argv) > 1 and not argv[1].startswith("-"):
        return f"{first} {argv[1]}"
    return first


def label(details: Mapping[str, Any]) -> str:
    """The executable (and the script after an interpreter): ``command: python3 tools/sys.py``."""
    argv = details.get("search_argv") or details.get("argv")  # argv: the jsonl protocol's one process
    return _command(str(argv)) if argv else ""


def _is_absolute(program: str) -> bool:
    try:
        return Path(program).expanduser().is_absolute()
    except RuntimeError:  # "~nobody/bin": fix() reports it
        return False


def resolve_paths(settings: CommandSystemSettings, fix: PathFixer) -> CommandSystemSettings:
    """A program given as a relative path ("./bin/search") is relative to the config file, like
    every other path in it — unless ``cwd`` is set, where the process then starts."""
    if settings.cwd:
        return settings.model_copy(update={"cwd": fix(settings.cwd, "system", "cwd")})
    argvs = {}
    for name in ARGV_FIELDS:
        argv = getattr(settings, name)
        if argv and "/" in argv[0] and not _is_absolute(argv[0]):
            argvs[name] = [fix(argv[0], "system", name), *argv[1:]]
    return settings.model_copy(update=argvs)


KIND = register(
    SystemKind(
        name="command",
        settings=CommandSystemSettings,
        build=build,
        identity=identity,
        label=label,
        capabilities=CommandSystemSettings.capabilities,
        stored_target=stored_target,
        resolve_paths=resolve_paths,
        code_target=True,
        probed=True,
        version_source="version_argv",
    )
)
