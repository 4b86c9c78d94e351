"""The ``sweep:`` block of the run config: a name, a grid of settings to try, the leaderboard's metric.

Only the block's shape is checked here (a run-id-safe name, a rankable metric). The grid's keys and
values are checked against the run settings when the config loads
(:func:`kebab_eval_pipeline.chain.settings.settings_from_dict`), every problem at once, because only there
is the system kind's settings model known.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, field_validator

from kebab_eval_pipeline.foundation.config_model import StrictSettings

#: A sweep's name becomes part of every variant's run id (``sweep-<name>-<variant>``), so it is
#: bounded well below the run id's 128 characters.
NAME_MAX = 40
NAME_PATTERN = rf"^[A-Za-z0-9][A-Za-z0-9._-]{{0,{NAME_MAX - 1}}}$"


class SweepSettings(StrictSettings):
    """``sweep: {name, grid, metric}``: ``grid`` maps a run setting (``k``, ``answers``…) or a
    system setting (``system.chunk_size``) to the list of values to try; every combination is a
    variant. ``metric`` ranks the leaderboard (None: the first headline metric)."""

    name: Annotated[str, Field(pattern=NAME_PATTERN)]
    grid: dict[str, Any]
    metric: str | None = None

    @field_validator("name")
    @classmethod
    def _no_double_dot(cls, name: str) -> str:
        if ".." in name:  # run ids may not contain '..' (they become folder names)
            raise ValueError(f"{name!r}: '..' is not allowed (the name is part of run ids)")
        return name

    @field_validator("metric")
    @classmethod
    def _rankable(cls, metric: str | None) -> str | None:
        if metric is not None:
            # imported here: the ranking module brings pandas, which `kebab-eval run` refusing a bad
            # config must not import (tests/test_cli_fast_paths.py)
            from kebab_eval_pipeline.compare.ranking import metric_name_offenders

            problems = metric_name_offenders([metric])
            if problems:
                raise ValueError(problems[0].reason)
        return metric
