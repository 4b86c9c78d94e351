"""An optional progress sink for in-process runs (the CLI's progress display).

Assets report stages and per-query progress here; with no sink installed
(``dagster dev``, ``dagster asset materialize``) reporting is a no-op.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

StageSink = Callable[[str], None]
QuerySink = Callable[[int, int], None]

_stage_sink: StageSink | None = None
_query_sink: QuerySink | None = None


@contextmanager
def reporting_to(stage: StageSink, queries: QuerySink) -> Iterator[None]:
    global _stage_sink, _query_sink
    previous = (_stage_sink, _query_sink)
    _stage_sink, _query_sink = stage, queries
    try:
        yield
    finally:
        _stage_sink, _query_sink = previous


def stage(name: str) -> None:
    if _stage_sink is not None:
        _stage_sink(name)


def query_progress() -> QuerySink | None:
    return _query_sink
