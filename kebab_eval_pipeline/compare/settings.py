"""The ``compare:`` block of the run config: how comparisons test and warn."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from kebab_eval_pipeline.foundation.config_model import MAX_COUNT, Seed, StrictSettings


class CompareSettings(StrictSettings):
    """How comparisons (SPEC §8) test and warn: the paired tests' ``seed`` and ``resamples``,
    ``min_queries`` below which the report warns that nothing can be concluded,
    ``strict_chunker_version`` to refuse comparing runs whose chunkers differ, and ``min_judged``:
    the judged@k (smallest k: the top hits) below which a run's reports and comparisons warn that much of its
    ranking was never judged by the golden set.

    Multiple testing: ``significance`` — whether the marks and ``max_p`` gates read the adjusted
    p-values (Holm over the gated metrics, Benjamini–Hochberg over the table; the default) or the
    raw ones; ``slice_tests`` — whether the breakdown slices are tested too (the summary quality
    metrics over slices of at least ``slice_min_queries`` paired queries; counted in the BH
    family). ``alpha`` — the level of the non-inferiority/equivalence bounds
    (one-sided ``1 − alpha``) and of the families' error rates stated in the report.
    ``strict_resolution`` — refuse (exit 2) instead of warn when a regression gate's bound is finer
    than the golden set resolves from the baseline's variance."""

    seed: Seed = 0
    resamples: Annotated[int, Field(ge=100, le=1_000_000)] = 10_000
    min_queries: Annotated[int, Field(ge=1, le=MAX_COUNT)] = 30
    strict_chunker_version: bool = False
    min_judged: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] = 0.5
    significance: Literal["adjusted", "raw"] = "adjusted"
    slice_tests: bool = True
    slice_min_queries: Annotated[int, Field(ge=1, le=MAX_COUNT)] = 10
    alpha: Annotated[float, Field(gt=0.0, lt=0.5)] = 0.05
    strict_resolution: bool = False
    # Pool both runs' unjudged hits at rank ≤ this, have the judge label them provisionally, and
    # report the headline retrieval metrics with and without those labels (compare/provisional.py);
    # 0: off. Needs a judge.
    provisional_depth: Annotated[int, Field(ge=0, le=1000)] = 0
