"""A run's queries in shards: the values that pass between the steps of a sharded asset.

``retrieval_results`` and ``judge`` call a system (the one under test, the LLM judge) once per
query, so they are split into shards of at most ``shard_queries`` queries (run config), each its own
Dagster step: a plan step slices the run, one step per shard does the calls, a collecting step
merges the pieces in shard order (:func:`kebab_eval_pipeline.chain.pipeline.merge_retrieval`,
:func:`~kebab_eval_pipeline.chain.pipeline.merge_judge`) into exactly the artifact one unsharded step
makes. Every value here turns into ``(tables, info)`` and back, as the artifacts do, so the shard IO
manager (:mod:`kebab_eval_pipeline.orchestration.shard_io`) stores it as Parquet beside the run's
artifacts, where any worker can read it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import pandas as pd

from kebab_eval_pipeline.contract import SystemInfo
from kebab_eval_pipeline.judge.prompts import JudgeInput
from kebab_eval_pipeline.systems.repeats import RepeatTables
from kebab_eval_pipeline.systems.runner import RetrievalPiece

Tables = dict[str, pd.DataFrame]


def shard_bounds(n: int, size: int) -> list[tuple[int, int]]:
    """``[start, stop)`` of each shard of ``n`` items, ``size`` at most each, in order; one empty
    shard when ``n`` is 0 (a run has at least one shard: its first one reports run-level facts)."""
    if size < 1:
        raise ValueError(f"shard size must be ≥ 1, not {size}")
    return [(start, min(start + size, n)) for start in range(0, n, size)] or [(0, 0)]


def shard_key(index: int) -> str:
    """The mapping key of shard ``index`` (the step is ``retrieval_results.retrieve_shard[shard_0003]``);
    zero-padded so the UI lists shards in order."""
    return f"shard_{index:04d}"


@dataclass
class QueryShard:
    """One shard of a run's golden queries (``query_id``, ``query``): the ``index``-th, starting at
    query ``start`` of ``total``, asking for ``k`` hits. The first shard also carries what the plan
    found for the run as a whole (``stale``: the stale-golden warnings), so the collecting step gets
    it from the first piece. ``run_warnings``: the adapter's warnings about the run as a whole (a
    replayed trace's queries no golden query asks), worked out once by the plan over the whole
    run and carried by the first shard (the others carry ``[]``); None when the adapter has none
    to work out that way or the run is one shard (the shard's adapter then reports its own).
    Planning used to send every shard the whole run's query ids instead: a 1M-query run wrote and
    read a million ids per shard."""

    index: int
    start: int
    total: int
    k: int
    queries: pd.DataFrame
    stale: list[str] = field(default_factory=list)
    run_warnings: list[str] | None = None

    def to_tables(self) -> tuple[Tables, dict[str, Any]]:
        tables = {"queries": self.queries}
        info = {
            "index": self.index,
            "start": self.start,
            "total": self.total,
            "k": self.k,
            "stale": self.stale,
            "run_warnings": self.run_warnings,
        }
        return tables, info

    @classmethod
    def from_tables(cls, tables: Tables, info: dict[str, Any]) -> QueryShard:
        given = info.get("run_warnings")
        return cls(
            info["index"],
            info["start"],
            info["total"],
            info["k"],
            tables["queries"],
            list(info["stale"]),
            None if given is None else list(given),
        )


@dataclass
class RetrievalShardResult:
    """The ``index``-th shard's results (:class:`~kebab_eval_pipeline.systems.runner.RetrievalPiece`),
    with the k asked for and, from the first shard, the run's stale-golden warnings. ``repeats``:
    the shard's repeats 2..N when the run asks each query more than once (``piece`` is repeat 1).
    ``auto``: with ``repeat: auto`` (one shard), why the repeats stopped where they did
    (:meth:`kebab_eval_pipeline.chain.auto_repeat.AutoRepeat.info`), else None."""

    index: int
    k: int
    piece: RetrievalPiece
    stale: list[str] = field(default_factory=list)
    repeats: RepeatTables | None = None
    auto: dict[str, Any] | None = None

    #: Read back as the files they are (orchestration/shard_io.py, parquet_parts.py): the
    #: collecting step writes the shards' hits into the run's table one shard at a time (10M rows
    #: at a million queries × 10 hits are never in memory at once).
    PARQUET_PARTS: ClassVar[tuple[str, ...]] = ("hits",)

    def to_tables(self) -> tuple[Tables, dict[str, Any]]:
        p = self.piece
        tables = {
            "outcomes": p.outcomes,
            "hits": p.hits,
            "citations": p.citations,
            "known_chunks": p.known_chunks,
        }
        info = {
            "index": self.index,
            "k": self.k,
            "stale": self.stale,
            "system": p.system.model_dump(),
            "run_warnings": p.run_warnings,
            "warnings": p.warnings,
            "warnings_dropped": p.warnings_dropped,
        }
        if self.repeats is not None:  # absent from a run of one repeat: its shard values unchanged
            tables.update(self.repeats.tables())
            info["repeat"] = self.repeats.count
        if self.auto is not None:
            info["repeat_auto"] = self.auto
        return tables, info

    @classmethod
    def from_tables(cls, tables: Tables, info: dict[str, Any]) -> RetrievalShardResult:
        piece = RetrievalPiece(
            outcomes=tables["outcomes"],
            hits=tables["hits"],
            citations=tables["citations"],
            known_chunks=tables["known_chunks"],
            system=SystemInfo.model_validate(info["system"]),
            run_warnings=list(info["run_warnings"]),
            warnings=list(info["warnings"]),
            warnings_dropped=int(info["warnings_dropped"]),
        )
        repeats = RepeatTables.from_tables(tables, int(info.get("repeat") or 1))
        auto = info.get("repeat_auto")
        return cls(int(info["index"]), int(info["k"]), piece, list(info["stale"]), repeats, auto)


@dataclass
class JudgeShard:
    """One shard of the queries to judge: their judge inputs (query id → input, golden order), which
    of them are in the run's spot-check sample, and where the shard's judge calls start among the
    run's ``total`` (for progress)."""

    index: int
    start: int
    total: int
    items: dict[str, JudgeInput]
    sample: list[str] = field(default_factory=list)
    # the run's relevance sample (judge/relevance_calibration.py), in the first shard only
    relevance: pd.DataFrame | None = None

    def to_tables(self) -> tuple[Tables, dict[str, Any]]:
        ids = list(self.items)
        sampled = set(self.sample)
        table = pd.DataFrame(
            {
                "query_id": pd.array(ids, dtype="string"),
                "judge_input": pd.array([self.items[q].to_json() for q in ids], dtype="string"),
                "spot_check": pd.array([q in sampled for q in ids], dtype="bool"),
            }
        )
        tables = {"items": table} if self.relevance is None else {"items": table, "relevance": self.relevance}
        return tables, {"index": self.index, "start": self.start, "total": self.total}

    @classmethod
    def from_tables(cls, tables: Tables, info: dict[str, Any]) -> JudgeShard:
        t = tables["items"]
        ids = [str(q) for q in t["query_id"]]
        items = {q: JudgeInput.from_json(str(j)) for q, j in zip(ids, t["judge_input"], strict=True)}
        sample = [q for q, s in zip(ids, t["spot_check"], strict=True) if bool(s)]
        return cls(info["index"], info["start"], info["total"], items, sample, tables.get("relevance"))


@dataclass
class JudgePiece:
    """The ``index``-th shard's judgements (primary rows, then its spot-check rows), its judges'
    description and counts (``info``), how many queries it judged, which of them were in the run's
    spot-check sample, and the judge cache it used."""

    index: int
    judgements: pd.DataFrame
    info: dict[str, Any]  # judge / spot_check_judge described (None: not used), model_calls, cache_hits
    judged_queries: int = 0
    sample: list[str] = field(default_factory=list)
    cache: str = ""

    def to_tables(self) -> tuple[Tables, dict[str, Any]]:
        shard = {"index": self.index, "judged_queries": self.judged_queries, "sample": self.sample}
        return {"judgements": self.judgements}, {"piece": self.info, **shard, "cache": self.cache}

    @classmethod
    def from_tables(cls, tables: Tables, info: dict[str, Any]) -> JudgePiece:
        return cls(
            int(info["index"]),
            tables["judgements"],
            dict(info["piece"]),
            int(info["judged_queries"]),
            list(info["sample"]),
            str(info["cache"]),
        )


#: What the shard IO manager stores and reads back, by type name.
SHARD_TYPES: dict[str, type] = {
    cls.__name__: cls for cls in (QueryShard, RetrievalShardResult, JudgeShard, JudgePiece)
}
