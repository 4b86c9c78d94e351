"""The adapter protocol every system under test implements (reference, command, http, replay, python)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from kebab_eval_pipeline.contract import SystemInfo
from kebab_eval_pipeline.systems.capabilities import Capabilities
from kebab_eval_pipeline.systems.outcome import Progress, QueryOutcome, QueryRequest

if TYPE_CHECKING:  # annotations only: `kebab-eval ref search` must start without pandas
    import pandas as pd


@runtime_checkable
class SystemUnderTest(Protocol):
    """The adapter protocol (reference, command, http, replay, python).

    ``run_queries`` returns exactly one :class:`~.outcome.QueryOutcome` per request, in
    request order, and never raises for a failing query: failures are outcomes with an
    error class. Construction is where misconfiguration fails (InputError / ValueError).
    An adapter may also expose ``run_warnings: list[str]`` about the run as a whole, and
    ``run_level_warnings(query_ids, queries)``: those warnings for a run asking ``query_ids``
    (texts ``queries``), when they depend on the whole set (replay) — a sharded run's plan asks
    once for the whole run.
    """

    def info(self) -> SystemInfo: ...

    def run_queries(
        self,
        requests: Sequence[QueryRequest],
        k: int,
        answers: bool,
        progress: Progress | None = None,
    ) -> list[QueryOutcome]: ...

    def known_chunk_ids(self) -> frozenset[str] | None:
        """Chunk ids the system holds, for citation resolution; None when unknown."""
        ...

    def catalogue(self) -> pd.DataFrame | None:
        """What the index holds (CATALOGUE_COLUMNS, one row per chunk), for stale-golden checks;
        None when the system cannot tell."""
        ...

    # Every adapter of the package also has ``capabilities() -> Capabilities``: what its runs can
    # carry (:mod:`.capabilities`), its kind's declaration refined by what only the built system
    # knows (a replayed file's format, a python object's methods). Not part of the protocol: a
    # system without it is read by :func:`system_capabilities` as carrying everything.


def system_capabilities(system: object) -> Capabilities | None:
    """``system.capabilities()``, or None for an adapter that declares none (a test's own system
    under test): every metric is then taken as measurable, as before capabilities existed."""
    declared = getattr(system, "capabilities", None)
    return declared() if callable(declared) else None


class OpaqueSystem:
    """Mixin for systems that cannot list what they hold (external services, CLIs, traces):
    citation resolution and stale-golden checks are then skipped with the reason, not guessed."""

    def known_chunk_ids(self) -> None:
        return None

    def catalogue(self) -> None:
        return None
