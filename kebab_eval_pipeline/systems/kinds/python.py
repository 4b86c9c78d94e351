"""The ``python`` system kind: a system written in Python, loaded from ``package.module:attribute``
(:mod:`kebab_eval_pipeline.systems.python_adapter`), in a supervised worker process of its own or
in kebab-eval's process.

Identity: the callable with its ``args`` (as sorted JSON: a factory's arguments are what argv flags
are to a command), and ``mode``; the folders put on ``sys.path`` are left out (where the code is
found, like a command's ``cwd``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, field_validator

from kebab_eval_pipeline.foundation.config_model import StrictSettings
from kebab_eval_pipeline.systems.capabilities import Capabilities
from kebab_eval_pipeline.systems.kind import PathFixer, SystemKind, SystemName, adapter, register
from kebab_eval_pipeline.systems.wire import ResponseMap

if TYPE_CHECKING:
    from kebab_eval_pipeline.contract import SystemInfo
    from kebab_eval_pipeline.systems.protocol import SystemUnderTest


# An args key naming a credential: api_key, openai_api_key, auth_token, password (not max_tokens).
_CREDENTIAL_ARG_RE = re.compile(
    r"(^|[-_])(api[-_]?key|secret|password|passwd|token|access[-_]?key|credentials?|auth)([-_]|$)", re.I
)

#: ``system.callable``: ``package.module:attribute`` (the attribute may be dotted: ``mod:obj.attr``).
CALLABLE_RE = re.compile(r"[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*")


class PythonSystemSettings(StrictSettings):
    """A system written in Python (systems/python_adapter.py): ``callable`` names a factory (called
    once per worker process, with ``args`` as keyword arguments) or the system object / search
    function itself. Its results — dicts or framework objects, converted to plain data — are read
    with the same ``response`` mapping as a command's or a service's JSON. ``isolation``: where it
    runs — ``process`` (the default), a supervised worker process of its own, so a system that ends
    its process (``os._exit``, a crash in a native library, the OOM killer) gives error rows and a
    failed ``system_health`` (systems/python_worker.py); ``in_process``, in kebab-eval's own process
    (no start-up cost; a system that ends the process ends the run with it)."""

    kind: Literal["python"]
    name: SystemName | None = None  # who this system is, for baselines (systems/identity.py)
    callable: Annotated[str, Field(max_length=500)]  # "package.module:attribute"
    args: dict[str, Any] = Field(default_factory=dict)  # keyword arguments of the factory
    path: tuple[str, ...] = ()  # folders put in front of sys.path (relative to the config file)
    mode: str | None = None  # passed as mode= to search/ask (which must then accept it)
    timeout_s: Annotated[float, Field(gt=0, le=3600)] = 30.0  # per call; a late call is abandoned
    concurrency: Annotated[int, Field(ge=1, le=64)] = 1  # calls at once (threads): needs a thread-safe system
    response: ResponseMap = Field(default_factory=ResponseMap)
    isolation: Literal["process", "in_process"] = "process"  # a worker process of its own, or ours

    def capabilities(self) -> Capabilities:
        """What its runs can carry before the object is built: hits, and answers with citations and
        token counts (when ``ask`` returns them). Whether it has ``ask``, ``catalogue()`` and
        ``versions()`` is known once built (``PythonSystem.capabilities``)."""
        return Capabilities()

    @field_validator("callable")
    @classmethod
    def _module_colon_attribute(cls, value: str) -> str:
        if not CALLABLE_RE.fullmatch(value.strip()):
            raise ValueError(
                f"{value!r}: expected 'package.module:attribute' (a module to import, a colon, "
                "then the factory, object or function in it)"
            )
        return value.strip()

    @field_validator("args")
    @classmethod
    def _no_credentials_inline(cls, args: dict[str, Any]) -> dict[str, Any]:
        # args are stored in the run's system info: a credential is read from the environment by
        # the factory instead (the rule http headers follow).
        named = [a for a in args if _CREDENTIAL_ARG_RE.search(a)]
        if named:
            raise ValueError(
                f"{', '.join(named)}: credentials cannot be written in the config file (args are "
                "stored with the run); let the factory read them from the environment"
            )
        return args


def build(settings: PythonSystemSettings) -> SystemUnderTest:
    """The python system, built (its factory called) once per process and configuration."""
    return adapter("kebab_eval_pipeline.systems.python_adapter:python_system")(settings)


def python_target(spec: str, args_json: str | None) -> str:
    """A python system's target: its callable, and its args (sorted JSON) when it has any."""
    return spec if not args_json or args_json == "{}" else f"{spec} {args_json}"


def identity(settings: PythonSystemSettings) -> str:
    """The callable and its args."""
    return python_target(settings.callable, json.dumps(settings.args, sort_keys=True, default=str))


def stored_target(details: Mapping[str, Any]) -> str | None:
    """The callable (and args) a run stored."""
    return python_target(str(details["callable"]), details.get("args")) if details.get("callable") else None


def label(details: Mapping[str, Any]) -> str:
    """The callable: ``python: my_rag.eval:build``."""
    return str(details["callable"]) if details.get("callable") else ""


def resolve_paths(settings: PythonSystemSettings, fix: PathFixer) -> PythonSystemSettings:
    """The folders put on ``sys.path``, against the config file's folder."""
    folders = tuple(fix(p, "system", "path", str(i)) for i, p in enumerate(settings.path))
    return settings.model_copy(update={"path": folders})


def live_info(settings: PythonSystemSettings) -> SystemInfo:
    """Its versions now: built afresh in a process of its own (:mod:`.python_versions`), so the
    object a run in this process uses is left alone and nothing the reading loads stays here."""
    return adapter("kebab_eval_pipeline.systems.python_versions:live_python_info")(settings)


KIND = register(
    SystemKind(
        name="python",
        settings=PythonSystemSettings,
        build=build,
        identity=identity,
        label=label,
        capabilities=PythonSystemSettings.capabilities,
        stored_target=stored_target,
        resolve_paths=resolve_paths,
        live_info=live_info,
        code_target=True,
        probed=True,
        version_source="versions()",
    )
)
