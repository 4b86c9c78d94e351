"""Builders for the typed tables the metric kernels read (golden, hits, outcomes, citations)."""

from __future__ import annotations

import pandas as pd
import pytest

from kebab_eval_pipeline.golden.model import GoldenQuery, GoldenSet
from kebab_eval_pipeline.golden.tables import queries_table, supports_table, typed_frame
from kebab_eval_pipeline.systems.base import CITATION_COLUMNS, HIT_COLUMNS, OUTCOME_COLUMNS


class Tables:
    """Small, explicit table builders: every test states the rows it cares about."""

    @staticmethod
    def golden(*queries: GoldenQuery) -> tuple[pd.DataFrame, pd.DataFrame]:
        g = GoldenSet(queries=list(queries))
        return queries_table(g), supports_table(g)

    @staticmethod
    def hits(qid: str, *rows: dict) -> pd.DataFrame:
        """Hits of one query in rank order (rank = position + 1 unless given)."""
        return typed_frame(
            [{"query_id": qid, "rank": i + 1, **row} for i, row in enumerate(rows)], HIT_COLUMNS
        )

    @staticmethod
    def concat(*frames: pd.DataFrame) -> pd.DataFrame:
        return pd.concat(frames, ignore_index=True)

    @staticmethod
    def outcomes(*rows: dict) -> pd.DataFrame:
        defaults = {"n_hits": 0, "timed_out": False, "answered": False}
        return typed_frame([{**defaults, **row} for row in rows], OUTCOME_COLUMNS)

    @staticmethod
    def citations(*rows: dict) -> pd.DataFrame:
        return typed_frame([{"position": i, **row} for i, row in enumerate(rows)], CITATION_COLUMNS)


@pytest.fixture
def tables() -> type[Tables]:
    return Tables
