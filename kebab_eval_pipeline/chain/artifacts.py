"""The typed values the assets pass along, and their table form for storage.

Each artifact turns into ``(tables, info)`` — Parquet tables plus a JSON
mapping — and back, so :class:`~kebab_eval_pipeline.store.artifact_store.ArtifactStore`
stays ignorant of what it stores.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import pandas as pd

from kebab_eval_pipeline.contract import SystemInfo
from kebab_eval_pipeline.foundation.gc_pause import gc_paused
from kebab_eval_pipeline.golden.load import LoadedGolden
from kebab_eval_pipeline.golden.model import GoldenSet
from kebab_eval_pipeline.golden.tables import golden_from_tables
from kebab_eval_pipeline.metrics import legacy
from kebab_eval_pipeline.metrics.aggregate import ScoreSummary
from kebab_eval_pipeline.systems.repeats import RepeatTables
from kebab_eval_pipeline.systems.runner import RetrievalResults

Tables = dict[str, pd.DataFrame]
#: The run report's file name in a stored run_metrics attempt.
REPORT_FILE = "run.md"


@dataclass
class GoldenArtifact:
    """A validated golden set as tables, plus where it came from (``info``).

    Downstream steps need only the tables; the pydantic model is rebuilt on demand.
    """

    queries: pd.DataFrame
    supports: pd.DataFrame
    info: dict[str, Any]  # name, source, format, sha256, schema_version, files, warnings

    @classmethod
    def from_loaded(cls, loaded: LoadedGolden) -> GoldenArtifact:
        info = {
            "name": loaded.name,
            "source": loaded.source,
            "format": loaded.format,
            "sha256": loaded.sha256,
            "schema_version": loaded.schema_version,
            "files": list(loaded.files),
            "warnings": list(loaded.warnings),
        }
        # The tables are built once per parse (LoadedGolden.tables, cached with the parse); each
        # artifact gets its own copy-on-write view (pandas 3): a step that changes one changes its own.
        with gc_paused():  # a list per query and support, no cycles (seconds at 20k queries otherwise)
            queries, supports = loaded.tables()
        return cls(queries.copy(deep=False), supports.copy(deep=False), info)

    @property
    def sha256(self) -> str:
        return self.info["sha256"]

    @property
    def name(self) -> str:
        return self.info["name"]

    @cached_property
    def golden(self) -> GoldenSet:
        i = self.info
        return golden_from_tables(
            self.queries,
            self.supports,
            name=i["name"],
            source=i["source"],
            format=i["format"],
            sha256=i["sha256"],
            schema_version=i["schema_version"],
        )

    def to_tables(self) -> tuple[Tables, dict[str, Any]]:
        return {"queries": self.queries, "supports": self.supports}, self.info

    @classmethod
    def from_tables(cls, tables: Tables, info: dict[str, Any]) -> GoldenArtifact:
        return cls(tables["queries"], tables["supports"], info)


@dataclass
class RetrievalArtifact:
    """What the system under test returned for every golden query — outcomes, hits and citations,
    one row per query even when it failed — and what produced them (``info``)."""

    results: RetrievalResults  # repeat 1: the whole run when each query was asked once
    info: dict[str, Any]  # k requested, answers on/off, golden sha: what produced these rows
    # Repeats 2..N when the run asked each query N > 1 times (``info["repeat"]`` = N), else None.
    repeats: RepeatTables | None = None

    @property
    def repeat_count(self) -> int:
        """How many times each query was asked (1 for runs stored before repeats existed)."""
        return int(self.info.get("repeat") or 1)

    def to_tables(self) -> tuple[Tables, dict[str, Any]]:
        r = self.results
        tables = {
            "outcomes": r.outcomes,
            "hits": r.hits,
            "citations": r.citations,
            "known_chunks": r.known_chunks,
        }
        if self.repeats is not None:  # a run of one repeat stores exactly what it always did
            tables.update(self.repeats.tables())
        return tables, {**self.info, "system": r.system.model_dump()}

    @classmethod
    def from_tables(cls, tables: Tables, info: dict[str, Any]) -> RetrievalArtifact:
        info = dict(info)
        system = SystemInfo.model_validate(info.pop("system"))
        results = RetrievalResults(
            outcomes=tables["outcomes"],
            hits=tables["hits"],
            citations=tables["citations"],
            known_chunks=tables["known_chunks"],
            system=system,
        )
        return cls(results, info, RepeatTables.from_tables(tables, int(info.get("repeat") or 1)))


@dataclass
class JudgeArtifact:
    """The LLM judge's judgements of a run (one row per query × criterion × role, see
    ``judge.run.JUDGEMENT_COLUMNS``) and ``info``: whether the judge was on, both judges pinned
    (model, digest, prompt version, decoding), the spot-check sample, calls and cache hits."""

    judgements: pd.DataFrame
    info: dict[str, Any]

    @property
    def enabled(self) -> bool:
        return bool(self.info.get("enabled"))

    @classmethod
    def disabled(cls) -> JudgeArtifact:
        from kebab_eval_pipeline.judge.run import empty_judgements

        return cls(empty_judgements(), {"enabled": False})

    def to_tables(self) -> tuple[Tables, dict[str, Any]]:
        return {"judgements": self.judgements}, self.info

    @classmethod
    def from_tables(cls, tables: Tables, info: dict[str, Any]) -> JudgeArtifact:
        return cls(tables["judgements"], info)


@dataclass
class QueryScoresArtifact:
    """The ``query_scores`` table (one row per golden query, floats rounded to 4 decimals) and,
    when it was computed with them, the run-level numbers taken from the unrounded scores."""

    scores: pd.DataFrame
    info: dict[str, Any]
    summary: ScoreSummary | None = None
    verification: pd.DataFrame | None = None  # per hit, when a source root was configured
    # A repeated run's run metrics per repeat (metrics/repeats.py: repeat, metric, value), else None.
    repeat_metrics: pd.DataFrame | None = None

    def to_tables(self) -> tuple[Tables, dict[str, Any]]:
        tables = {"query_scores": self.scores}
        if self.verification is not None:
            tables["hit_verification"] = self.verification
        if self.repeat_metrics is not None:
            tables["repeat_metrics"] = self.repeat_metrics
        if self.summary is not None:
            tables["summary_metrics"] = metrics_table(self.summary.metrics, self.summary.denominators)
            tables["summary_breakdowns"] = self.summary.breakdowns
        return tables, self.info

    @classmethod
    def from_tables(cls, tables: Tables, info: dict[str, Any]) -> QueryScoresArtifact:
        """Read a stored artifact; one stored under scoring version 1 is upgraded on the way
        (document recall renamed ``doc_recall@k``, see :mod:`kebab_eval_pipeline.metrics.legacy`)."""
        old = not legacy.is_current(info)
        summary = None
        if "summary_metrics" in tables:  # absent from runs stored before exact summaries
            metrics, denominators = metrics_from_table(tables["summary_metrics"])
            breakdowns = tables["summary_breakdowns"]
            if old:
                metrics, denominators = legacy.upgrade_metrics(metrics), legacy.upgrade_metrics(denominators)
                breakdowns = legacy.upgrade_breakdowns(breakdowns)
            summary = ScoreSummary(metrics, denominators, breakdowns)
        scores = legacy.upgrade_columns(tables["query_scores"]) if old else tables["query_scores"]
        return cls(scores, info, summary, tables.get("hit_verification"), tables.get("repeat_metrics"))


def metrics_table(metrics: dict[str, float | None], denominators: dict[str, int]) -> pd.DataFrame:
    """Metrics as a table: ``metric``, ``value`` (null for None), ``n`` (denominator, null if unknown)."""
    names = list(metrics)
    return pd.DataFrame(
        {
            "metric": pd.array(names, dtype="string"),
            "value": pd.array([metrics[n] for n in names], dtype="Float64"),
            "n": pd.array([denominators.get(n) for n in names], dtype="Int64"),
        }
    )


def metrics_from_table(frame: pd.DataFrame) -> tuple[dict[str, float | None], dict[str, int]]:
    """The inverse of :func:`metrics_table`."""
    metrics = {
        m: (None if pd.isna(v) else float(v)) for m, v in zip(frame["metric"], frame["value"], strict=True)
    }
    denominators = {m: int(n) for m, n in zip(frame["metric"], frame["n"], strict=True) if not pd.isna(n)}
    return metrics, denominators


@dataclass
class RunMetricsArtifact:
    """Aggregate metrics of one run plus everything that makes it comparable."""

    metrics: dict[str, float | None]
    denominators: dict[str, int]
    breakdowns: pd.DataFrame  # dimension, value, metric, score, n
    info: dict[str, Any] = field(default_factory=dict)  # run_id, created_at, versions, system, golden, k
    # The run report (run.md), stored as a file beside the tables; None when read back from the store
    # (read the stored file instead: ``ArtifactStore.read_file("run_metrics", run_id, REPORT_FILE)``).
    report: str | None = None

    def to_tables(self) -> tuple[Tables, dict[str, Any]]:
        return {
            "metrics": metrics_table(self.metrics, self.denominators),
            "breakdowns": self.breakdowns,
        }, self.info

    def to_files(self) -> dict[str, bytes]:
        """The run report as a file of the stored attempt (:data:`REPORT_FILE`)."""
        return {} if self.report is None else {REPORT_FILE: self.report.encode("utf-8")}

    @classmethod
    def from_tables(cls, tables: Tables, info: dict[str, Any]) -> RunMetricsArtifact:
        """Read a stored artifact, upgrading one stored under scoring version 1 (as
        :meth:`QueryScoresArtifact.from_tables` does)."""
        metrics, denominators = metrics_from_table(tables["metrics"])
        breakdowns = tables["breakdowns"]
        if not legacy.is_current(info):
            metrics, denominators = legacy.upgrade_metrics(metrics), legacy.upgrade_metrics(denominators)
            breakdowns = legacy.upgrade_breakdowns(breakdowns)
        return cls(metrics, denominators, breakdowns, info)


@dataclass
class ComparisonArtifact:
    """The comparison of a run (b) with its baseline (a); ``info["run_a"]`` None means there was none.

    Stored as tables plus three report files beside them in the same attempt (``files``):
    ``comparison.md``, ``comparison.html`` (standalone, with charts) and ``comparison.json``."""

    per_metric: pd.DataFrame  # metric, a, b, delta, rel_change, paired test, significance, direction
    per_query: pd.DataFrame  # query_id, verdict, ranks, note, flips, gold_changed, query labels
    markdown: str
    info: dict[str, Any]  # run ids, versions side by side, chunker_version_match, counts, drift, warnings
    per_slice: pd.DataFrame | None = None  # dimension, value, metric, a, b, delta, n_a, n_b
    files: dict[str, bytes] = field(default_factory=dict)  # comparison.md/.html/.json (compare.document)
    # b's unjudged hits above its first relevant hit in losses and regressions (compare.suspect_gold);
    # None for comparisons stored before the queue existed, and when there was no baseline.
    suspect_gold: pd.DataFrame | None = None

    def to_tables(self) -> tuple[Tables, dict[str, Any]]:
        tables = {"per_metric": self.per_metric, "per_query": self.per_query}
        if self.per_slice is not None:
            tables["per_slice"] = self.per_slice
        if self.suspect_gold is not None:
            tables["suspect_gold"] = self.suspect_gold
        return tables, {**self.info, "markdown": self.markdown}

    def to_files(self) -> dict[str, bytes]:
        """The report files stored with the partition (``files``: set by whoever made the comparison,
        see :mod:`kebab_eval_pipeline.compare.document`)."""
        return self.files

    @classmethod
    def from_tables(cls, tables: Tables, info: dict[str, Any]) -> ComparisonArtifact:
        info = dict(info)
        markdown = info.pop("markdown")
        return cls(
            tables["per_metric"],
            tables["per_query"],
            markdown,
            info,
            tables.get("per_slice"),
            suspect_gold=tables.get("suspect_gold"),
        )


@dataclass(frozen=True)
class Stage:
    """One asset of the evaluation chain, declared once (:data:`STAGES`): what the store, the
    artifact IO manager, a stored run, the asset checks, the chain's job and ``rejudge`` know of
    it is read from here. A new asset of the chain is its entry here (with its artifact type) and
    its definition in ``orchestration/assets.py`` (``build_chain_assets``): nothing else lists it.

    ``asset``: the asset's name (its key under a chain's prefix, its folder in the store);
    ``artifact``: its typed value (``to_tables``/``from_tables``); ``tag``: its ``stage`` tag in the
    asset catalog; ``stored_run``: part of what a stored run is read from (a comparison, a listing,
    a sweep's ranking need it; a run lacking it is incomplete); ``read_once``: read back by several
    steps of a run (kept for the run's later readers in a process, not read again); ``checks``:
    the asset checks on it, by name (``orchestration.checks.CHECKS``)."""

    asset: str
    artifact: type
    tag: str
    stored_run: bool = False
    read_once: bool = False
    checks: tuple[str, ...] = ()


#: The chain's assets, in the order the chain makes them (and a missing one is reported).
STAGES: tuple[Stage, ...] = (
    Stage("golden_set", GoldenArtifact, "golden", stored_run=True, read_once=True),
    Stage("retrieval_results", RetrievalArtifact, "retrieval", stored_run=True, read_once=True),
    Stage("judge", JudgeArtifact, "judging", checks=("judge_spot_check",)),
    Stage("query_scores", QueryScoresArtifact, "scoring", stored_run=True, checks=("matching_coverage",)),
    Stage(
        "run_metrics",
        RunMetricsArtifact,
        "metrics",
        stored_run=True,
        checks=("gates", "system_health", "judge_calibration"),
    ),
    Stage("comparison_report", ComparisonArtifact, "comparison", checks=("regression_gates",)),
)
#: Every asset of the chain, in chain order (what a run writes, or an interrupted one may have written).
CHAIN_ASSETS: tuple[str, ...] = tuple(s.asset for s in STAGES)
#: What judging a stored run again materializes (``kebab-eval rejudge``): the judge and every asset
#: after it in the chain (each reads the judge's artifact or an artifact made from it).
JUDGED_ASSETS: tuple[str, ...] = CHAIN_ASSETS[CHAIN_ASSETS.index("judge") :]

ARTIFACT_TYPES: dict[str, type] = {s.asset: s.artifact for s in STAGES}
