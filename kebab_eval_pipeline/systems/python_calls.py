"""A python system's calls, made in this process: the built object, each call within its time limit.

What :class:`~.python_adapter.PythonSystem` asks of a python system — ``search`` / ``ask`` as plain
data, ``versions()``, ``catalogue()``, the packages it is made of — answered by the object
:mod:`.python_load` built here. Used as it is with ``isolation: in_process``, and inside the worker
process that serves the default ``isolation: process`` (:mod:`.python_worker`), whose parent side
answers the same questions over a pipe.

Per call: at most ``timeout_s``, in a thread of its own (:mod:`.thread_calls`): a late call is a
``timeout`` failure, left running with its result discarded. What the method returned is turned
into plain data (:mod:`.plain_data`) in that thread, within the time limit: it runs the framework's
own code (``to_dict``, a generator of hits).
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

from kebab_eval_pipeline.systems.kinds.python import PythonSystemSettings
from kebab_eval_pipeline.systems.outcome import BAD_RESPONSE, QueryFailure
from kebab_eval_pipeline.systems.package_versions import object_packages
from kebab_eval_pipeline.systems.plain_data import PlainDataError, as_response, plain
from kebab_eval_pipeline.systems.python_load import load_system
from kebab_eval_pipeline.systems.thread_calls import CallLimiter

#: The query methods: ``search`` always, ``ask`` when the system has it.
QueryMethod = Literal["search", "ask"]


class PythonCalls(Protocol):
    """What the adapter asks of a built python system, wherever it runs."""

    #: which of the optional methods ``ask``, ``versions``, ``catalogue`` the built object has
    has: frozenset[str]

    def packages(self) -> dict[str, str]:
        """The installed distributions the system is made of (name → version)."""
        ...

    def query(self, method: QueryMethod, query: str, k: int, query_id: str) -> Any:
        """What ``method(query, k, …)`` returned, as plain data; QueryFailure for a failed call."""
        ...

    def versions(self) -> Any:
        """``versions()`` as plain data, within ``timeout_s``; raises what it raised (or QueryFailure)."""
        ...

    def catalogue(self) -> Any:
        """``catalogue()`` as plain data (no time limit); raises what it raised (or QueryFailure)."""
        ...

    def begin(self) -> None:
        """A new batch of queries starts (a worker's restart budget is per batch)."""
        ...


class LocalCalls:
    """The python system built and called in this process (see the module docstring). Raises
    FieldValueError (:func:`~.python_load.load_system`) when it cannot be built."""

    def __init__(self, settings: PythonSystemSettings) -> None:
        self.settings = settings
        self.loaded = load_system(settings.callable, dict(settings.args), settings.path, settings.mode)
        self.calls = CallLimiter(settings.concurrency)
        loaded = self.loaded
        found = {"ask": loaded.ask, "versions": loaded.versions, "catalogue": loaded.catalogue}
        self.has = frozenset(name for name, fn in found.items() if fn is not None)

    def packages(self) -> dict[str, str]:
        return object_packages(self.loaded.target)

    def query(self, method: QueryMethod, query: str, k: int, query_id: str) -> Any:
        chosen = self.loaded.search if method == "search" else self.loaded.ask
        assert chosen is not None, method
        keywords = chosen.keywords(self.settings.mode, query_id)

        def call() -> Any:
            value = chosen.fn(query, k, **keywords)
            try:
                return as_response(value)
            except PlainDataError as exc:  # nested too deep, a cycle
                raise QueryFailure(BAD_RESPONSE, f"the returned {type(value).__name__}: {exc}") from None

        return self.calls.call(call, self.settings.timeout_s)

    def versions(self) -> Any:
        versions = self.loaded.versions
        assert versions is not None
        return self.calls.call(lambda: plain(versions()), self.settings.timeout_s)

    def catalogue(self) -> Any:
        catalogue = self.loaded.catalogue
        assert catalogue is not None
        return as_response(catalogue())

    def begin(self) -> None:
        return None
