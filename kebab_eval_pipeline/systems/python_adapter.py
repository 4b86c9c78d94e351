"""The python adapter: a system written in Python (``kind: python``).

``system.callable`` is imported and built by :mod:`.python_load` — once per process and
configuration for runs (:func:`python_system`), so a sharded run's steps and the checks before it
share one built system; the factory is never called per query. Where it is built is
``system.isolation``: by default in a supervised worker process of its own
(:mod:`.python_worker`: a system that ends its process gives ``process_ended`` rows, not a dead
run), or, opted in, in this process (:mod:`.python_calls`). Either answers the same calls:
``search(query, k)`` (and, for answers, ``ask(query, k)``), what they return — dicts, or framework
objects turned into plain data by :mod:`.plain_data` — read here by the same code and ``response``
mapping as a command's or a service's JSON (:mod:`.wire`). Reading the live versions builds it
afresh in a process of its own each time (:mod:`.python_versions`).

Per call: at most ``timeout_s``, in a thread of its own (:mod:`.thread_calls`): a late call becomes a
``timeout`` row and the run moves on, the call left running and its result discarded; an
exception is an ``exception`` row with its type and first line (no traceback). ``retrieval_ms`` and
``answer_ms`` time each call, conversion and parsing included. Queries run ``concurrency`` at a time.

System info: ``callable``, ``args``, the installed packages the system is made of
(:mod:`.package_versions`) and what its ``versions()`` reports (read like a version command's).
An object with ``catalogue()`` lists its index (returned like ``search``'s hits, read with the same
``response`` mapping): the stale-golden checks and citation resolution then use it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kebab_eval_pipeline.contract import Answer, Hit, SystemInfo
from kebab_eval_pipeline.foundation.errors import InputError, Offender
from kebab_eval_pipeline.systems.base import CATALOGUE_COLUMNS
from kebab_eval_pipeline.systems.capabilities import Capabilities
from kebab_eval_pipeline.systems.kinds.python import PythonSystemSettings
from kebab_eval_pipeline.systems.outcome import (
    EXCEPTION,
    PROCESS_ENDED,
    TIMEOUT,
    Progress,
    QueryFailure,
    QueryOutcome,
    QueryRequest,
)
from kebab_eval_pipeline.systems.per_query import PerQueryAdapter, SearchReply
from kebab_eval_pipeline.systems.plain_data import find_usage
from kebab_eval_pipeline.systems.protocol import OpaqueSystem
from kebab_eval_pipeline.systems.python_calls import LocalCalls, PythonCalls, QueryMethod
from kebab_eval_pipeline.systems.python_worker import WorkerCalls
from kebab_eval_pipeline.systems.versions import apply_version_report
from kebab_eval_pipeline.systems.wire import parse_answer, parse_hit_block, parse_scope

if TYPE_CHECKING:
    import pandas as pd

_ARGS_SHOWN = 500  # characters of system.args kept in the system info
#: The most chunks a ``catalogue()`` is read for (far above any index this tool evaluates).
MAX_CATALOGUE = 50_000_000


class PythonSystem(OpaqueSystem, PerQueryAdapter):
    """Calls a Python system per query (see the module docstring), in its worker process or, with
    ``isolation: in_process``, in this one."""

    def __init__(self, settings: PythonSystemSettings, calls: PythonCalls | None = None) -> None:
        self.settings = settings
        if calls is None:
            calls = LocalCalls(settings) if settings.isolation == "in_process" else WorkerCalls(settings)
        self.backend = calls
        self.concurrency = settings.concurrency
        self.can_answer = "ask" in calls.has
        self._info: SystemInfo | None = None
        self._info_lock = threading.Lock()

    def run_queries(
        self,
        requests: Sequence[QueryRequest],
        k: int,
        answers: bool,
        progress: Progress | None = None,
    ) -> list[QueryOutcome]:
        """One outcome per request (:class:`~.per_query.PerQueryAdapter`); a worker process that
        ended is restarted at most :data:`~.python_worker.MAX_RESTARTS` times per call."""
        self.backend.begin()
        return super().run_queries(requests, k, answers, progress)

    def _payload(self, method: QueryMethod, request: QueryRequest, k: int) -> Any:
        """What ``method`` returned for ``request``, as plain data (QueryFailure when it cannot be)."""
        return self.backend.query(method, request.query, k, request.query_id)

    def search_one(self, request: QueryRequest, k: int) -> SearchReply:
        payload = self._payload("search", request, k)
        response = self.settings.response
        hits, warnings = parse_hit_block(payload, k, response)
        return SearchReply(hits, warnings, 1, parse_scope(payload, response))

    def ask_one(self, request: QueryRequest, k: int, hits: Sequence[Hit]) -> tuple[Answer, int]:
        payload = self._payload("ask", request, k)
        if isinstance(payload, dict) and not isinstance(payload.get("usage"), dict):
            usage = find_usage(payload)  # a framework's own report (LangChain usage_metadata, …)
            if usage:
                payload = {**payload, "usage": usage}
        return parse_answer(payload, self.settings.response), 1

    def capabilities(self) -> Capabilities:
        """The declared capabilities (``PythonSystemSettings.capabilities``), refined by what the
        built object has: no ``ask``, no answers; no ``catalogue()``, no index catalogue; no
        ``versions()``, no live versions."""
        what = f"the python system {self.settings.callable}"
        has = self.backend.has
        return self.settings.capabilities().lacking(
            answers=None if "ask" in has else f"{what} has no ask method",
            index_catalogue=None
            if "catalogue" in has
            else f"{what} has no catalogue() method to list its index",
            live_versions=None if "versions" in has else f"{what} has no versions() method",
        )

    def catalogue(self) -> pd.DataFrame | None:
        """What the object's ``catalogue()`` returns, read like ``search``'s hits with the
        ``response`` mapping, as ``CATALOGUE_COLUMNS`` (one row per chunk); None without the
        method. Called each time (the index may have changed). InputError (``system.callable``)
        when it raises or returns something that is not hits."""
        if "catalogue" not in self.backend.has:
            return None
        from kebab_eval_pipeline.golden.tables import typed_frame

        where = f"{self.settings.callable}: catalogue()"
        try:
            payload = self.backend.catalogue()
            block, _ = parse_hit_block(payload, MAX_CATALOGUE, self.settings.response)
        except QueryFailure as failure:
            if failure.error_class == EXCEPTION:  # it raised, in its worker process
                reason = f"raised {failure.message[:300]}"
            elif failure.error_class in (PROCESS_ENDED, TIMEOUT):
                reason = failure.message
            else:
                reason = f"returned what cannot be read as hits: {failure.message}"
        except Exception as exc:  # the user's code
            reason = f"raised {type(exc).__name__}: {str(exc).strip()[:300]}"
        else:
            return typed_frame({name: block.column(name) for name in CATALOGUE_COLUMNS}, CATALOGUE_COLUMNS)
        raise InputError(
            "cannot read the python system's catalogue", [Offender(where, reason, field="system.callable")]
        )

    def known_chunk_ids(self) -> frozenset[str] | None:
        """The chunk ids ``catalogue()`` lists; None without the method."""
        catalogue = self.catalogue()
        if catalogue is None:
            return None
        return frozenset(catalogue["chunk_id"].dropna().astype(str))

    def info(self) -> SystemInfo:
        """Kind, mode, the callable and its args, the packages the system comes from and what its
        ``versions()`` reports (called once, within ``timeout_s``; a failure is recorded in
        ``details["version_error"]``, never raised)."""
        with self._info_lock:
            if self._info is None:
                s = self.settings
                details = {
                    "callable": s.callable,
                    "timeout_s": f"{s.timeout_s:g}",
                    "concurrency": str(s.concurrency),
                }
                if s.args:
                    details["args"] = json.dumps(s.args, sort_keys=True, default=str)[:_ARGS_SHOWN]
                packages = self.backend.packages()
                if packages:
                    details["packages"] = ", ".join(f"{n}=={v}" for n, v in packages.items())
                info = SystemInfo(kind="python", mode=s.mode, details=details)
                if "versions" in self.backend.has:
                    try:
                        report = self.backend.versions()
                        info = apply_version_report(info, report)
                    except QueryFailure as failure:  # late, ended; or raised in its worker process
                        raised = failure.error_class == EXCEPTION
                        info.details["version_error"] = (failure.message if raised else str(failure))[:300]
                    except Exception as exc:
                        info.details["version_error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
                self._info = info
            return self._info.model_copy(deep=True)


# -- one built system per process and configuration ---------------------------------------------

_BUILT: dict[str, PythonSystem] = {}
_BUILD_LOCK = threading.Lock()


def python_system(settings: PythonSystemSettings) -> PythonSystem:
    """The system for ``settings``, built on first use and kept for the life of the process: the
    CLI's checks, the plan and every shard step of a run share it (a step in a process of its own
    builds it once there). A version reading does not use it: it imports and builds the system in
    a process of its own (:mod:`.python_versions`), so a rebuilt index or edited code is seen."""
    key = settings.model_dump_json()
    with _BUILD_LOCK:  # two steps building at once must not call the factory twice
        system = _BUILT.get(key)
        if system is None:
            system = _BUILT[key] = PythonSystem(settings)
        return system
