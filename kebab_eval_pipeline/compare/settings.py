"""The ``compare:`` block of the run config: how comparisons test and warn."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from kebab_eval_pipeline.config_model import MAX_COUNT, Seed, StrictSettings


class CompareSettings(StrictSettings):
    """How comparisons (SPEC §8) test and warn: the paired tests' ``seed`` and ``resamples``,
    ``min_queries`` below which the report warns that nothing can be concluded,
    ``strict_chunker_version`` to refuse comparing runs whose chunkers differ, and ``min_judged``:
    the judged@k (largest k) below which a run's reports and comparisons warn that much of its
    ranking was never judged by the golden set."""

    seed: Seed = 0
    resamples: Annotated[int, Field(ge=100, le=1_000_000)] = 10_000
    min_queries: Annotated[int, Field(ge=1, le=MAX_COUNT)] = 30
    strict_chunker_version: bool = False
    min_judged: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] = 0.5
