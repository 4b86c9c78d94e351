"""The ``golden_health:`` block of the run config: how the golden-set health check looks and warns.

Every key is optional; the defaults are documented on each field and in the generated configuration reference.
"""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import Field, field_validator

from kebab_eval_pipeline.foundation.config_model import MAX_COUNT, StrictSettings

#: The slice dimensions a health check counts (those of the run breakdowns).
SliceDimension = Literal["category", "difficulty", "lang", "tag", "answerable"]
SLICE_DIMENSIONS: tuple[str, ...] = get_args(SliceDimension)

Share = Annotated[float, Field(gt=0.0, le=1.0)]
Count = Annotated[int, Field(ge=0, le=MAX_COUNT)]


class HealthLimits(StrictSettings):
    """How many findings of each warning kind are tolerated before its check warns (default 0:
    any finding warns)."""

    near_duplicates: Count = 0
    leakage: Count = 0
    stale_supports: Count = 0
    small_slices: Count = 0
    suspect_gold_queue: Count = 0


class GoldenHealthSettings(StrictSettings):
    """Thresholds of the golden-set health check.

    - ``near_duplicate_jaccard`` (0.8): two questions whose character ``shingle_chars``-grams (3)
      of the normalised text have a Jaccard similarity at least this are near duplicates;
    - ``semantic_duplicates`` (auto): also compare sentence embeddings (the ``vectors`` extra's
      all-MiniLM-L6-v2) — ``auto`` when the extra is installed, ``on`` (an error without it),
      ``off``; ``semantic_cosine`` (0.9) is the cosine from which two questions are duplicates;
      ``semantic_languages`` (``[en, ""]``): the ``lang`` values (primary subtag; ``""`` = no
      language given) compared so — the bundled model is English-only, and scores any two short
      questions in another script as near-identical;
    - ``leakage_ngram`` (4) word n-grams; a question whose n-grams are found verbatim in one corpus
      document for at least ``leakage_share`` (0.6) of them quotes the corpus;
    - ``corpus``: the folder read for leakage (default: the reference system's corpus or index);
    - ``min_slice_queries``: a slice with fewer queries is too small (default: the comparison's
      ``compare.slice_min_queries``, below which a slice is never tested); ``slice_dimensions``:
      the breakdown dimensions counted (all by default);
    - ``unsupported_answerable``: ``fail`` (default: the check blocks, the CLI exits 1) or ``warn``;
    - ``max_findings``: findings tolerated per warning kind (0); ``max_shown`` (50): offenders
      listed in each check's metadata."""

    near_duplicate_jaccard: Share = 0.8
    shingle_chars: Annotated[int, Field(ge=2, le=10)] = 3
    semantic_duplicates: Literal["auto", "on", "off"] = "auto"
    semantic_cosine: Share = 0.9
    semantic_languages: list[str] = Field(default_factory=lambda: ["en", ""])
    leakage_ngram: Annotated[int, Field(ge=2, le=20)] = 4
    leakage_share: Share = 0.6
    corpus: str | None = None
    min_slice_queries: Annotated[int, Field(ge=1, le=MAX_COUNT)] | None = None
    slice_dimensions: list[SliceDimension] = Field(default_factory=lambda: list(SLICE_DIMENSIONS))
    unsupported_answerable: Literal["fail", "warn"] = "fail"
    max_findings: HealthLimits = Field(default_factory=HealthLimits)
    max_shown: Annotated[int, Field(ge=1, le=1000)] = 50

    @field_validator("semantic_duplicates", mode="before")
    @classmethod
    def _yaml_switch(cls, value: object) -> object:
        # YAML 1.1 reads a bare `off` / `on` as a boolean: the words the user wrote.
        if isinstance(value, bool):
            return "on" if value else "off"
        return value
