"""``repeat: auto``: ask the golden set again until the headline is as steady as its gates need.

A run with ``repeat: auto`` (``kebab-eval run --repeat auto``) asks every query once, then again, a
whole pass at a time, and after each pass scores it like any repeat (the run's matching, the
metrics it cannot measure nulled) to get that pass's run metrics. After at least
:data:`AUTO_MIN_REPEATS` passes it stops:

- **deterministic** — after the minimum, every query's outcome (first relevant rank, refusal,
  answer text: what a repeated run's ``flips`` count) was the same in every pass: more passes
  would tell nothing;
- **reached_target** — the standard error (``std / √n``, ddof 1, over the n passes so far) of
  every watched metric is at most its target: the headline, a mean over the passes, is known
  that closely;
- **hit_max** — ``repeat_max`` passes were made; the metrics still above target are named.

The **watched metrics** are those the run gates (``gates:`` and ``regression_gates:``, the
default answer gates included, a breakdown slice not: a slice is noisier than the headline and
would keep a run repeating for one slice) that every pass measures — the judge's are made once,
after the repeats, and are not watched. A metric's **target** is ``repeat_target`` (default
0.25) times the smallest positive margin of its regression gate (``max_drop``, ``non_inferior``
or ``equivalent``): a noise floor a quarter of the drop a gate allows barely moves the verdict.
Without such a margin (an absolute gate, ``max_p``, ``max_drop: 0``) the target is the fixed
:data:`AUTO_ABSOLUTE_TARGET` (0.01) on a metric that is a share (0 to 1); a latency, token or cost
metric (in ms, tokens, US dollars) is watched only with a margin. A run that gates no metric
watches the catalogue's summary metrics with the absolute target.

:class:`AutoRepeat` keeps, across passes, only each metric's per-pass values (a float per metric
and pass) and one outcome code per query of the first pass: each pass's scores are let go
before the next pass runs. The per-pass values are rounded as the run stores them
(``repeat_metrics``), so the standard errors recorded here re-derive from the stored table.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from kebab_eval_pipeline.chain.settings import RunSettings
from kebab_eval_pipeline.metrics import catalogue
from kebab_eval_pipeline.metrics.aggregate import STORED_DECIMALS, summarize_scores
from kebab_eval_pipeline.metrics.flakiness import combined_codes, flag_codes, rank_codes, text_codes
from kebab_eval_pipeline.metrics.repeats import answer_text

#: The fewest passes ``repeat: auto`` makes: a standard deviation needs two, and two agreeing
#: passes of a flaky system are common; three is the least that tells a steady system.
AUTO_MIN_REPEATS = 3
#: The standard error a watched metric that is a share (0 to 1) must reach when no regression
#: gate gives it a margin.
AUTO_ABSOLUTE_TARGET = 0.01
#: The regression-gate bounds whose value is a margin on the metric's own scale.
MARGINS = ("max_drop", "non_inferior", "equivalent")
#: Why an auto-repeated run stopped.
STOP_REASONS = ("deterministic", "reached_target", "hit_max")


def _is_share(metric: str) -> bool:
    """Whether ``metric`` is on a 0–1 scale (a quality metric or a rate), not in ms, tokens or USD."""
    entry = catalogue.measure(metric)
    if entry is None:
        return False
    return entry.family in catalogue.QUALITY_FAMILIES or metric.endswith("_rate")


def gated_metrics(settings: RunSettings, lacks: Mapping[str, str]) -> list[str]:
    """The run-level metrics ``settings`` gates (regression gates first, then the effective absolute
    gates: configured and default), in order, without breakdown slices."""
    names: list[str] = []
    for key in [*settings.regression_gates, *settings.effective_gates(lacks)]:
        name = catalogue.parse(key)
        if name.dimension is None and name.metric not in names:
            names.append(name.metric)
    return names


def metric_target(settings: RunSettings, metric: str) -> tuple[float, str] | None:
    """``(target, basis)`` of a watched ``metric``: ``repeat_target`` × the smallest positive margin
    of its regression gate, else :data:`AUTO_ABSOLUTE_TARGET` for a share; None for a metric in its
    own unit without a margin (not watched)."""
    # the headline's own gate: a slice's margin is not the headline's
    gate = next(
        (g for key, g in settings.regression_gates.items() if catalogue.parse(key).label == metric), None
    )
    margins = [(getattr(gate, k), k) for k in MARGINS if gate is not None and (getattr(gate, k) or 0) > 0]
    if margins:
        margin, kind = min(margins)
        return settings.repeat_target * margin, f"{settings.repeat_target:g} × {kind} {margin:g}"
    if _is_share(metric):
        return AUTO_ABSOLUTE_TARGET, "absolute"
    return None


class AutoRepeat:
    """The stopping rule of ``repeat: auto`` (module docstring), fed one pass at a time."""

    def __init__(self, settings: RunSettings, lacks: Mapping[str, str]):
        self.settings = settings
        self.lacks = dict(lacks)
        self.maximum = settings.repeat_max
        self.count = 0
        self.values: dict[str, list[float | None]] = {}
        self.targets: dict[str, tuple[float, str]] = {}
        self.not_watched: dict[str, str] = {}
        self.first_codes: np.ndarray | None = None
        self.identical = True
        self.stopped: str | None = None

    def _watch(self, measured: Mapping[str, Any]) -> None:
        """The watched metrics and their targets, from the first pass's metrics."""
        gated = gated_metrics(self.settings, self.lacks)
        candidates = gated or [m for m in catalogue.summary_names(self.settings.k) if m in measured]
        for metric in candidates:
            if metric not in measured:
                self.not_watched[metric] = "not measured in each repeat (judge metrics: after the repeats)"
                continue
            target = metric_target(self.settings, metric) if gated else (AUTO_ABSOLUTE_TARGET, "absolute")
            if target is None:
                self.not_watched[metric] = (
                    "not a share: watched only with a max_drop, non_inferior or equivalent margin"
                )
                continue
            self.targets[metric] = target
            self.values[metric] = []

    def add(self, scores: pd.DataFrame, outcomes: pd.DataFrame) -> str | None:
        """One pass's unrounded ``query_scores`` (in golden order) and ``outcomes``; returns why the run
        stops after it (:data:`STOP_REASONS`), or None to ask again."""
        metrics = summarize_scores(scores, self.settings.k, round_to=None).metrics
        if self.count == 0:
            self._watch(metrics)
        self.count += 1
        for metric, values in self.values.items():
            value = metrics.get(metric)
            values.append(None if value is None else round(float(value), STORED_DECIMALS))
        codes = combined_codes(
            rank_codes(scores["first_relevant_rank"].to_numpy(dtype=np.float64, na_value=np.nan)[None, :]),
            flag_codes([scores["refused"].reset_index(drop=True)]),
            text_codes([answer_text(scores["query_id"], outcomes)]),
        )[0]
        if self.first_codes is None:
            self.first_codes = codes
        else:
            self.identical = self.identical and bool(np.array_equal(codes, self.first_codes))
        self.stopped = self._decide()
        return self.stopped

    def standard_errors(self) -> dict[str, float | None]:
        """Per watched metric: std (ddof 1) / √n over the passes with a value (None below 2)."""
        out: dict[str, float | None] = {}
        for metric, values in self.values.items():
            known = np.array([v for v in values if v is not None], dtype=np.float64)
            out[metric] = float(np.std(known, ddof=1) / np.sqrt(len(known))) if len(known) >= 2 else None
        return out

    def _decide(self) -> str | None:
        if self.count < AUTO_MIN_REPEATS:
            return None
        if self.count == AUTO_MIN_REPEATS and self.identical:
            return "deterministic"
        errors = self.standard_errors()
        if all(se is None or se <= self.targets[m][0] + 1e-12 for m, se in errors.items()):
            return "reached_target"
        if self.count >= self.maximum:
            return "hit_max"
        return None

    def info(self) -> dict[str, Any]:
        """What the run records (``info["repeats"]["auto"]``): why it stopped (``stopped``), after how
        many passes, the rule's settings and, per watched metric, its standard error, target, the
        target's basis and whether it was met; the gated metrics not watched, with the reason."""
        errors = self.standard_errors()
        return {
            "stopped": self.stopped,
            "repeats": self.count,
            "min": AUTO_MIN_REPEATS,
            "max": self.maximum,
            "target_fraction": self.settings.repeat_target,
            "absolute_target": AUTO_ABSOLUTE_TARGET,
            "metrics": {
                m: {
                    "se": None if errors[m] is None else round(errors[m], 6),
                    "target": round(target, 6),
                    "basis": basis,
                    "met": errors[m] is None or errors[m] <= target + 1e-12,
                }
                for m, (target, basis) in self.targets.items()
            },
            "not_watched": dict(self.not_watched),
        }
