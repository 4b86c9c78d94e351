"""The run store: one owner for everything a run keeps under the storage base.

:class:`RunStore` is the artifact store (each asset's tables per run) plus what lives beside the
artifacts (:mod:`.layout`): a run's typed artifacts (:meth:`RunStore.stored_run`), the CLI's report
copies, the judge cache's place. :class:`StoredRun` is one run's artifacts, each read on first use:
an exact comparison never reads a run's hits (the largest table by far: 10M rows at 100k queries ×
100 hits), so it never pays for them.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from kebab_eval_pipeline.chain.artifacts import (
    STAGES,
    ComparisonArtifact,
    GoldenArtifact,
    QueryScoresArtifact,
    RetrievalArtifact,
    RunMetricsArtifact,
)
from kebab_eval_pipeline.foundation import atomic
from kebab_eval_pipeline.store import layout
from kebab_eval_pipeline.store.artifact_store import ArtifactStore
from kebab_eval_pipeline.store.repeat_rows import read_rows

#: The assets a stored run is read from, in the order a missing one is reported (``stored_run`` in
#: the chain's declaration, :data:`~kebab_eval_pipeline.chain.artifacts.STAGES`).
RUN_ASSETS = tuple(s.asset for s in STAGES if s.stored_run)


class StoredRun:
    """One run's artifacts: its golden set, retrieval results, per-query scores and run metrics
    (and its comparison, when one was stored). Built from a store (:meth:`RunStore.stored_run`: each
    part read on first use) or from artifacts already in memory (tests, benchmarks)."""

    def __init__(
        self,
        run_id: str,
        golden: GoldenArtifact | None = None,
        retrieval: RetrievalArtifact | None = None,
        scores: QueryScoresArtifact | None = None,
        metrics: RunMetricsArtifact | None = None,
        *,
        store: ArtifactStore | None = None,
    ) -> None:
        self.run_id = run_id
        self._store = store
        self._golden, self._retrieval, self._scores, self._metrics = golden, retrieval, scores, metrics

    def __repr__(self) -> str:
        return f"StoredRun({self.run_id!r})"

    def hits_of(self, query_ids: Sequence[str]) -> pd.DataFrame:
        """The run's stored hits of ``query_ids`` only (every column, stored order). Read with a
        Parquet filter while the retrieval results are not loaded: a comparison's suspect-gold
        queue needs the hits of its few losses, not the run's millions of hit rows."""
        if self._retrieval is not None or self._store is None:
            hits = self.retrieval.results.hits
            return hits[hits["query_id"].astype(str).isin(set(query_ids))]
        return read_rows(self._store, "retrieval_results", self.run_id, "hits", "query_id", list(query_ids))

    def renamed(self, run_id: str) -> StoredRun:
        """The same artifacts (all read now) under another run id: what a copy of the run would be."""
        return StoredRun(run_id, self.golden, self.retrieval, self.scores, self.metrics)

    def _read(self, asset: str) -> tuple:
        if self._store is None:
            raise ValueError(f"run {self.run_id!r} was built without a store and has no {asset}")
        return self._store.read(asset, self.run_id)

    @property
    def golden(self) -> GoldenArtifact:
        if self._golden is None:
            self._golden = GoldenArtifact.from_tables(*self._read("golden_set"))
        return self._golden

    @property
    def retrieval(self) -> RetrievalArtifact:
        if self._retrieval is None:
            self._retrieval = RetrievalArtifact.from_tables(*self._read("retrieval_results"))
        return self._retrieval

    @property
    def scores(self) -> QueryScoresArtifact:
        if self._scores is None:
            self._scores = QueryScoresArtifact.from_tables(*self._read("query_scores"))
        return self._scores

    @property
    def metrics(self) -> RunMetricsArtifact:
        if self._metrics is None:
            self._metrics = RunMetricsArtifact.from_tables(*self._read("run_metrics"))
        return self._metrics

    def comparison(self) -> ComparisonArtifact | None:
        """The run's stored comparison with its baseline (None when none was stored)."""
        if self._store is None or not self._store.exists("comparison_report", self.run_id):
            return None
        return ComparisonArtifact.from_tables(*self._read("comparison_report"))


class RunStore(ArtifactStore):
    """The artifact store of one storage base, and everything else that lives under it (see
    :mod:`.layout`)."""

    def stored_run(self, run_id: str) -> StoredRun:
        """``run_id``'s artifacts, read on first use. InputError (naming the first missing asset and
        where it was looked for) when the run lacks one: a stored run is checked whole up front, so
        a comparison never fails half way."""
        for asset in RUN_ASSETS:
            if not self.exists(asset, run_id):
                self.read(asset, run_id)  # raises the InputError naming what is missing
        return StoredRun(run_id, store=self)

    def judge_cache_path(self, cache_dir: str | os.PathLike | None = None) -> Path:
        """The judge cache file: in ``cache_dir`` when one is configured (``judge.cache_dir``), else
        beside the artifacts (a local base) or in the user cache folder (:func:`.layout.judge_cache_path`)."""
        if cache_dir:
            return Path(cache_dir) / layout.JUDGE_CACHE_FILE
        return layout.judge_cache_path(str(self.base))

    def write_artifact(
        self, asset: str, run_id: str, artifact, dagster_run_id: str | None = None
    ) -> tuple[str, list[str], list[str]]:
        """Write one of the chain's artifacts (its ``to_tables()``, and its ``to_files()`` when it
        has report files) as ``asset`` of ``run_id``. Returns the attempt written, its table names
        and its file names. The one way the artifact IO manager and an evaluation outside the
        chain (:mod:`kebab_eval_pipeline.evaluation`) store an artifact."""
        tables, info = artifact.to_tables()
        files = artifact.to_files() if hasattr(artifact, "to_files") else {}
        attempt = self.write(asset, run_id, tables, info, files=files, dagster_run_id=dagster_run_id)
        return attempt, sorted(tables), sorted(files)

    def write_reports(self, run_id: str, reports: dict[str, str]) -> Path | None:
        """Copy a run's reports (name → Markdown) to ``reports/<run_id>/`` of a local base, where a
        person opens them; returns that folder (None for a remote base, where the stored report files
        are the reports)."""
        folder = layout.reports_folder(str(self.base), run_id)
        if folder is None:
            return None
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in reports.items():
            atomic.write_text(folder / name, text)
        return folder
