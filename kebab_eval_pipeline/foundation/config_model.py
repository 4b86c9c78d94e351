"""What every layer's settings model is built from: one strictness rule, one bound on counts and
seeds, and the error that points at one key of a mapping.

Each layer owns the model of its own config block (``systems.settings`` the ``system:`` block,
``judge.config`` the ``judge:`` block, ``gates`` the gates …); ``settings.RunSettings`` composes
them into the run config and reports every offender with its file, line and key."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

#: Upper bound of the count settings (query counts): every int setting is bounded, so none can
#: overflow a 64-bit column or JSON writer after the run (an unbounded int failed only when stored).
MAX_COUNT = 1_000_000_000
#: Seeds are unsigned 32-bit: numpy, torch and OpenAI-compatible servers all take that range, and a
#: larger one (``1e40`` as an integer) would fail only when the run is stored, after every query.
SEED_MAX = 2**32 - 1
Seed = Annotated[int, Field(ge=0, le=SEED_MAX)]
#: An environment variable's name (secrets are named in configs, never written there).
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class StrictSettings(BaseModel):
    """A settings block: unknown keys are errors, values are frozen, and NaN/inf are refused (a NaN
    gate never passes)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class AtKey(ValueError):
    """A validator's error about one key of a mapping field: the offender's field (and line) is
    that key's, e.g. ``system.headers.X-Trace`` rather than ``system.headers``."""

    def __init__(self, key: str, reason: str):
        super().__init__(reason)
        self.key = key


class Price(BaseModel):
    """A model's price, US dollars per million tokens (the judge's and the system under test's)."""

    model_config = ConfigDict(extra="forbid")

    input_per_mtok: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 0.0
    output_per_mtok: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 0.0
