"""Ship gates (SPEC §7) as pure functions: thresholds in, verdicts with their numbers out.

An absolute gate bounds one metric of the run — or one breakdown slice of it, keyed
``metric[dimension=value]`` (``mrr[lang=ko]``, ``hit@5[tag=critical]``). A regression gate bounds
the change against the baseline run: by how much a metric may drop (``max_drop``) and/or whether
it may drop with a paired-test p-value below ``max_p``. A gate whose value is null fails with the
reason unless ``skip_if_null``. The Dagster layer turns each bound into an asset check; the CLI
and exports use the same :class:`GateResult`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, replace
from typing import Protocol

import numpy as np
import pandas as pd

from kebab_eval_pipeline.compare.corrected import corrected_gate_verdict
from kebab_eval_pipeline.compare.judge_drift import is_judged_metric
from kebab_eval_pipeline.compare.margins import margin_verdict
from kebab_eval_pipeline.compare.settings import CompareSettings
from kebab_eval_pipeline.foundation.errors import InputError, Offender
from kebab_eval_pipeline.foundation.number_text import is_null as _is_null
from kebab_eval_pipeline.gates.settings import (
    GATED_VERDICTS,
    GateSettings,
    RegressionGateSettings,
    VerdictGateSettings,
)
from kebab_eval_pipeline.metrics import catalogue
from kebab_eval_pipeline.metrics.aggregate import BREAKDOWN_DIMENSIONS, NO_VALUE, metric_names


class GatedRun(Protocol):
    """What gate evaluation reads of a run's settings (``settings.RunSettings`` is one)."""

    k: list[int]
    compare: CompareSettings
    gates: Mapping[str, GateSettings]
    regression_gates: Mapping[str, RegressionGateSettings]
    verdict_gates: Mapping[str, VerdictGateSettings]

    def effective_gates(self, lacks: Mapping[str, str] | None = None) -> dict[str, GateSettings]: ...

    def run_lacks(self) -> dict[str, str]: ...


def worsening(metric: str, delta: float) -> float:
    """How much worse a change of ``delta`` (b − a) makes ``metric``: positive = worse (the
    catalogue's direction; a rise is worse for lower-is-better metrics)."""
    return delta if catalogue.lower_is_better(metric) else -delta


@dataclass(frozen=True)
class GateTarget:
    """What a gate key names: a metric, optionally restricted to one breakdown slice."""

    metric: str
    dimension: str | None = None
    value: str | None = None

    @property
    def label(self) -> str:
        return self.metric if self.dimension is None else f"{self.metric}[{self.dimension}={self.value}]"


def parse_gate_key(key: str) -> GateTarget:
    """``mrr`` → the run's mrr; ``mrr[lang=ko]`` → mrr over the ``lang = ko`` slice.

    The queries without a value — the slice the breakdowns name ``(none)`` — are selected by
    ``mrr[lang=(none)]`` or, the same slice, an empty value ``mrr[lang=]`` (the target's value is
    :data:`~kebab_eval_pipeline.metrics.aggregate.NO_VALUE` for both).

    Raises ValueError for a malformed key, an unknown breakdown dimension (the catalogue's
    parser: the one place metric names are parsed), or a ``tag`` slice without a tag (a query
    without tags is in no ``tag`` slice)."""
    try:
        name = catalogue.parse(key, dimensions=BREAKDOWN_DIMENSIONS)
    except catalogue.MetricNameError as exc:
        if "unknown breakdown dimension" in str(exc):
            raise
        raise ValueError(f"malformed gate key {key!r}: {str(exc).split(': ', 1)[-1]}") from None
    value = name.value
    if name.dimension is not None and value in ("", NO_VALUE):
        if name.dimension == "tag":
            raise ValueError(
                f"{key!r} names no tag: a query counts in the slice of each of its tags, and a query "
                f"without tags is in none; name one tag ({name.metric}[tag=critical])"
            )
        value = NO_VALUE
    return GateTarget(name.metric, name.dimension, value)


def known_metric(name: str, ks: list[int]) -> bool:
    """True when a run with these ``ks`` computes ``name`` (the metric catalogue is the single source)."""
    return name in metric_names(ks)


def check_gate_names(settings: GatedRun, source: str = "<config>") -> None:
    """Reject gates the run can never evaluate (a typo would otherwise always fail or skip)."""
    offenders: list[Offender] = []

    def bad(field: str, reason: str) -> None:
        offenders.append(Offender(source, reason, field=field))

    def targets(keys: Iterable[str], where: str) -> Iterator[tuple[str, GateTarget]]:
        """Each key that parses, with its target; a key that does not, or that gates a slice another
        key of ``where`` gates (one slice written two ways: lang= and lang=(none)), is an offender."""
        seen: dict[GateTarget, str] = {}
        for key in keys:
            try:
                target = parse_gate_key(key)
            except ValueError as exc:
                bad(f"{where}.{key}", str(exc))
                continue
            if target in seen:
                again = f"gates the same slice as {where}.{seen[target]} ({target.label}); keep one"
                bad(f"{where}.{key}", again)
            seen.setdefault(target, key)
            yield key, target

    for key, target in targets(settings.gates, "gates"):
        if not known_metric(target.metric, settings.k):
            bad(f"gates.{key}", f"unknown metric {target.metric!r} (k values: {settings.k})")
        elif target.dimension is not None and not catalogue.is_sliceable(target.metric):
            bad(f"gates.{key}", f"{target.metric} is a run-level number: it has no breakdown slices")
    for key, gate in settings.regression_gates.items():
        if not known_metric(key, settings.k):
            bad(f"gates.regression.{key}", f"unknown metric {key!r} (k values: {settings.k})")
        else:
            for bound in ("max_p", "non_inferior", "equivalent"):
                if getattr(gate, bound) is not None and catalogue.test_kind(key) is None:
                    bad(
                        f"gates.regression.{key}.{bound}",
                        f"{key} is not a mean of per-query scores, so it has no paired test or "
                        "confidence bound; use max_drop",
                    )
    for key, target in targets(settings.verdict_gates, "gates.regression"):
        if target.metric not in GATED_VERDICTS:
            bad(f"gates.regression.{key}", f"unknown verdict {target.metric!r}; expected {GATED_VERDICTS}")
    if offenders:
        raise InputError("run config is invalid", offenders)
    check_gate_capabilities(settings, settings.run_lacks(), source)


def unmeasurable_gates(settings: GatedRun, lacks: Mapping[str, str]) -> list[tuple[str, str]]:
    """``(field, reason)`` of every gate the user wrote (``gates.<key>``, ``gates.regression.<key>``)
    on a metric a run lacking ``lacks`` cannot measure (``metrics.catalogue.not_measured``)."""
    found = []
    for key in settings.gates:
        try:
            metric = parse_gate_key(key).metric
        except ValueError:
            continue  # check_gate_names reports it
        for name, why in catalogue.not_measured([metric], lacks).items():
            found.append((f"gates.{key}", f"{name} cannot be measured: {why}"))
    for key in settings.regression_gates:
        for name, why in catalogue.not_measured([key], lacks).items():
            found.append((f"gates.regression.{key}", f"{name} cannot be measured: {why}"))
    return found


def check_gate_capabilities(settings: GatedRun, lacks: Mapping[str, str], source: str = "<config>") -> None:
    """Refuse (InputError naming every field) the gates the user wrote on metrics a run lacking
    ``lacks`` cannot measure — a gate that could never pass or fail is a mistake in the config.
    Called at load with what the system's kind declares (:func:`check_gate_names`), and again once
    the system is built with what it refines (a python object without ``ask``, a replay file whose
    format was read). The default gates are never refused: they are left out."""
    offenders = [
        Offender(source, reason + " (remove the gate, or evaluate a system that carries it)", field=field)
        for field, reason in unmeasurable_gates(settings, lacks)
    ]
    if offenders:
        raise InputError("run config gates metrics this system cannot measure", offenders)


@dataclass(frozen=True)
class GateResult:
    name: str  # check name, e.g. "gate_mrr_min", "gate_mrr_lang_ko_min", "gate_mrr_max_p"
    metric: str  # the gate key: a metric, or metric[dimension=value]
    kind: str  # min | max | max_drop | max_p | non_inferior | equivalent
    passed: bool
    skipped: bool
    blocking: bool
    value: float | None  # the metric (absolute, max_drop), the p-value (max_p) or the bound (margins)
    threshold: float  # the bound as configured: min, max, max_drop, max_p, δ (non_inferior, equivalent)
    delta: float | None  # value − threshold (absolute gates) or b − a (regression gates)
    reason: str
    p_value: float | None = None  # regression gates: the p-value the gate read (adjusted, unless raw)
    p_raw: float | None = None  # regression gates: the unadjusted paired-test p-value
    verdict: str | None = None  # margins: non-inferior | equivalent | inconclusive | worse | not equivalent

    def as_dict(self) -> dict:
        return asdict(self)


def check_name(key: str, kind: str) -> str:
    """A Dagster-safe, unique check name: ``hit@5`` + ``min`` → ``gate_hit_at_5_min``;
    ``mrr[lang=ko]`` → ``gate_mrr_lang_ko_min``. When a slice value loses characters to the
    sanitising (``lang=한국어``), a short hash of the key keeps names apart."""
    parse_gate_key(key)  # a key no gate accepts has no check name
    # the key as written (mrr[lang=] and mrr[lang=(none)], one slice, keep the names they had)
    target = catalogue.parse(key, dimensions=BREAKDOWN_DIMENSIONS)
    parts = [target.metric.replace("@", "_at_")]
    if target.dimension is not None:
        parts += [target.dimension, target.value or "none"]
    base = re.sub(r"[^A-Za-z0-9_]", "_", "_".join(parts))
    if target.value is not None and not re.fullmatch(r"[A-Za-z0-9_]*", target.value):
        base += "_" + hashlib.sha1(key.encode("utf-8")).hexdigest()[:6]
    return f"gate_{base}_{kind}"


def gate_value(
    target: GateTarget, metrics: Mapping[str, float | None], breakdowns: pd.DataFrame | None
) -> tuple[float | None, str]:
    """The value a gate reads, or None with the reason it is null."""
    if target.dimension is None:
        value = metrics.get(target.metric)
        return (None, f"{target.metric} is null (empty denominator)") if _is_null(value) else (value, "")
    if breakdowns is None or len(breakdowns) == 0:
        return None, f"{target.label}: the run has no breakdowns"
    rows = breakdowns[
        (breakdowns["dimension"] == target.dimension)
        & (breakdowns["value"] == target.value)
        & (breakdowns["metric"] == target.metric)
    ]
    if len(rows) == 0 and target.value == NO_VALUE:
        return None, f"{target.label}: every query has a {target.dimension} (no query is in the (none) slice)"
    if len(rows) == 0:
        return None, f"{target.label}: no query has {target.dimension} = {target.value!r}"
    score = rows["score"].iloc[0]
    if _is_null(None if pd.isna(score) else float(score)):
        return None, f"{target.label} is null (no query of the slice is in its denominator)"
    return float(score), ""


def evaluate_gate(
    key: str,
    gate: GateSettings,
    metrics: Mapping[str, float | None],
    breakdowns: pd.DataFrame | None = None,
    lacks: Mapping[str, str] | None = None,
) -> list[GateResult]:
    """One result per configured bound (``min`` and/or ``max``) of the gate keyed ``key``. A
    metric the run could not measure (``lacks``: what it could not carry) is null with that reason."""
    target = parse_gate_key(key)
    value, null_reason = gate_value(target, metrics, breakdowns)
    unmeasured = catalogue.not_measured([target.metric], lacks or {})
    if unmeasured:
        value, null_reason = None, f"{target.label} not measured: {unmeasured[target.metric]}"
    results = []
    for kind, threshold in (("min", gate.min), ("max", gate.max)):
        if threshold is None:
            continue
        name = check_name(key, kind)
        if value is None:
            skipped = gate.skip_if_null
            reason = f"{null_reason}: " + (
                "skipped as configured" if skipped else "a gate on a null metric fails"
            )
            results.append(
                GateResult(name, key, kind, skipped, skipped, gate.blocking, None, threshold, None, reason)
            )
            continue
        passed = value >= threshold if kind == "min" else value <= threshold
        op = "≥" if kind == "min" else "≤"
        reason = f"{target.label} = {value:.4f} {'meets' if passed else 'misses'} {op} {threshold}"
        results.append(
            GateResult(
                name,
                key,
                kind,
                passed,
                False,
                gate.blocking,
                value,
                threshold,
                round(value - threshold, 4),
                reason,
            )
        )
    return results


@dataclass(frozen=True)
class PairedEvidence:
    """A paired test of one metric between the baseline (a) and this run (b), from the comparison."""

    delta: float | None  # mean b − mean a over the queries both runs scored
    p_value: float | None  # raw
    n: int
    test: str | None  # e.g. mcnemar_exact | randomization
    note: str = ""
    p_adjusted: float | None = None  # Holm over the gated metrics (or BH), when the comparison has it
    adjusted_by: str | None = None
    se: float | None = None
    bound_low: float | None = None  # one-sided (1 − alpha) score bounds of b − a (compare/paired_score)
    bound_high: float | None = None
    # Σ max(d, 0), Σ max(−d, 0), Σ d² of the differences: the score test's margin p-value
    sums: tuple[float, float, float] | None = None
    noise_floor: float | None = None  # repeated runs: the standard error of the delta from the repeats
    within_noise: bool | None = None  # |delta| ≤ noise_floor and not significant


def regression_bound(gate: RegressionGateSettings, kind: str) -> float:
    """A regression gate's bound ``kind`` as the user wrote it — the ``threshold`` every result and
    output carries: ``max_drop: 0.02`` is 0.02 (the largest drop allowed; the direction is the
    bound's name), never −0.02 beside a reason saying 0.02. (Results stored before this convention
    hold −max_drop and −δ; readers show them through :func:`abs`, see ``reporting.gate_text``.)"""
    return float(getattr(gate, kind))


def regression_kinds(gate: RegressionGateSettings) -> list[str]:
    """The bounds a regression gate sets, in check order."""
    bounds = (
        ("max_drop", gate.max_drop),
        ("max_p", gate.max_p),
        ("non_inferior", gate.non_inferior),
        ("equivalent", gate.equivalent),
    )
    return [k for k, v in bounds if v is not None]


def evaluate_regression_gate(
    metric: str,
    gate: RegressionGateSettings,
    metrics: Mapping[str, float | None],
    baseline: Mapping[str, float | None] | None,
    evidence: PairedEvidence | None = None,
    compare: CompareSettings | None = None,
) -> list[GateResult]:
    """One result per configured bound of a regression gate (see :func:`regression_kinds`).

    "Worse" means lower, except for the catalogue's lower-is-better metrics (error and refusal
    rates, latencies, …) where it means higher.

    - ``max_drop`` fails when the run's metric is worse than the baseline's by more than
      ``max_drop`` (the delta is of the stored, rounded aggregates: what the reports show) —
      unless the runs were repeated and the delta lies within their noise floor
      (``evidence.within_noise``).
    - ``max_p`` fails when the metric got worse (paired delta) with p < ``max_p``; ``evidence`` is
      the comparison's paired test of that metric, and p is its adjusted p-value unless
      ``compare.significance`` is ``raw`` (or the comparison has none).
    - ``non_inferior`` / ``equivalent`` pass only when the one-sided ``1 − compare.alpha`` bounds of
      the paired delta show it (:func:`~kebab_eval_pipeline.compare.margins.margin_verdict`); the
      result's ``verdict`` says "non-inferior", "inconclusive" or "worse" (equivalence: "equivalent",
      "inconclusive", "not equivalent").

    No baseline: every bound passes as skipped. A null value (either run's metric, or no paired
    test) fails with the reason unless ``skip_if_null``.
    """
    compare = compare or CompareSettings()
    value, before = metrics.get(metric), (baseline or {}).get(metric)
    results = []
    for kind in regression_kinds(gate):
        label = None
        p_raw = evidence.p_value if evidence is not None and kind == "max_p" else None
        if baseline is None:
            verdict = (True, True, value, None, "no baseline run: nothing to regress against", None)
        elif kind == "max_drop":
            verdict = _within_noise(_max_drop_verdict(metric, gate, value, before), evidence)
        elif kind == "max_p":
            verdict = _max_p_verdict(metric, gate, evidence, compare.significance == "adjusted")
        else:
            verdict, label = _margin_gate_verdict(metric, kind, gate, evidence, compare.alpha)
        passed, skipped, shown, delta, reason, p = verdict
        threshold = regression_bound(gate, kind)
        name = check_name(metric, kind)
        results.append(
            GateResult(
                name,
                metric,
                kind,
                passed,
                skipped,
                gate.blocking,
                shown,
                threshold,
                delta,
                reason,
                p,
                p_raw,
                label,
            )
        )
    return results


# (passed, skipped, value shown, delta, reason, p-value) of one regression bound.
_Verdict = tuple[bool, bool, float | None, float | None, str, float | None]


def _null_verdict(gate: RegressionGateSettings, why: str, value: float | None) -> _Verdict:
    skipped = gate.skip_if_null
    return skipped, skipped, value, None, f"{why}: " + ("skipped as configured" if skipped else "fails"), None


def _max_drop_verdict(
    metric: str, gate: RegressionGateSettings, value: float | None, before: float | None
) -> _Verdict:
    if _is_null(value) or _is_null(before):
        where = "this run" if _is_null(value) else "the baseline"
        return _null_verdict(gate, f"{metric} is null in {where}", value)
    delta = round(value - before, 4)
    passed = worsening(metric, delta) <= gate.max_drop + 1e-12
    allowed = "rise" if catalogue.lower_is_better(metric) else "drop"
    reason = f"{metric} moved {delta:+.4f} ({before:.4f} → {value:.4f}); allowed {allowed} {gate.max_drop}"
    return passed, False, value, delta, reason, None


def _within_noise(verdict: _Verdict, evidence: PairedEvidence | None) -> _Verdict:
    """A drop past ``max_drop`` that repeated runs show to be inside their noise floor (the delta
    one system showed against itself across its repeats) is not a regression: it passes, saying so."""
    passed, skipped, shown, delta, reason, p = verdict
    if passed or evidence is None or not evidence.within_noise or evidence.noise_floor is None:
        return verdict
    reason += f", but within the repeats' noise floor {evidence.noise_floor:.4f}: not a regression"
    return True, skipped, shown, delta, reason, p


def _max_p_verdict(
    metric: str, gate: RegressionGateSettings, evidence: PairedEvidence | None, adjusted: bool = True
) -> _Verdict:
    if evidence is None or evidence.p_value is None or evidence.delta is None:
        why = evidence.note if evidence is not None and evidence.note else "the comparison has no paired test"
        return _null_verdict(gate, f"{metric}: no p-value ({why})", None)
    use_adjusted = adjusted and evidence.p_adjusted is not None
    p = evidence.p_adjusted if use_adjusted else evidence.p_value
    worse = worsening(metric, evidence.delta) > 0
    passed = not (worse and p < gate.max_p)
    verdict = "significantly worse" if not passed else ("not significant" if worse else "not worse")
    how = (
        f"{_ADJUSTED_NAMES.get(evidence.adjusted_by or '', evidence.adjusted_by)}-adjusted p = {p:.4g}, "
        f"raw p = {evidence.p_value:.4g}"
        if use_adjusted
        else f"p = {p:.4g}" + (" (unadjusted, as configured)" if adjusted is False else "")
    )
    reason = (
        f"{metric} moved {evidence.delta:+.4f} over {evidence.n} paired queries, "
        f"{how} ({evidence.test}): {verdict} at p < {gate.max_p}"
    )
    return passed, False, p, round(evidence.delta, 4), reason, p


_ADJUSTED_NAMES = {"holm": "Holm", "bh": "Benjamini–Hochberg"}


def _margin_gate_verdict(
    metric: str, kind: str, gate: RegressionGateSettings, evidence: PairedEvidence | None, alpha: float
) -> tuple[_Verdict, str | None]:
    """A ``non_inferior``/``equivalent`` bound from the comparison's one-sided bounds."""
    margin = float(gate.non_inferior if kind == "non_inferior" else gate.equivalent)
    if (
        evidence is None
        or evidence.bound_low is None
        or evidence.bound_high is None
        or evidence.delta is None
    ):
        why = evidence.note if evidence is not None and evidence.note else "the comparison has no paired test"
        return _null_verdict(gate, f"{metric}: no confidence bound ({why})", None), None
    decided = margin_verdict(
        metric,
        kind,
        margin,
        alpha,
        evidence.delta,
        evidence.bound_low,
        evidence.bound_high,
        se=evidence.se,
        n=evidence.n,
        sums=evidence.sums,
    )
    if kind == "non_inferior":
        shown = evidence.bound_high if catalogue.lower_is_better(metric) else evidence.bound_low
    else:
        shown = max(abs(evidence.bound_low), abs(evidence.bound_high))
    reason = f"{metric} over {evidence.n} paired queries: {decided.text}"
    verdict = (decided.passed, False, shown, round(evidence.delta, 4), reason, decided.p_value)
    return verdict, decided.verdict


def verdict_slice(per_query: pd.DataFrame, target: GateTarget) -> np.ndarray:
    """Rows of a comparison's per-query table inside the gate's slice (all rows when unsliced):
    ``tag`` matches any of a query's tags, ``answerable`` the values ``true``/``false``, the
    other dimensions their column."""
    if target.dimension is None:
        return np.ones(len(per_query), dtype=bool)
    if target.dimension == "tag":
        return per_query["tags"].map(lambda tags: target.value in list(tags)).to_numpy(dtype=bool)
    if target.value == NO_VALUE:  # the breakdowns' (none): a null or empty value
        values = per_query[target.dimension].astype("string")
        return (values.isna() | (values == "")).to_numpy(dtype=bool)
    if target.dimension == "answerable":
        wanted = (target.value or "").lower() == "true"
        return (per_query["answerable"].astype("boolean") == wanted).fillna(False).to_numpy(dtype=bool)
    return (per_query[target.dimension].astype("string") == target.value).fillna(False).to_numpy(dtype=bool)


def evaluate_verdict_gate(
    key: str, gate: VerdictGateSettings, per_query: pd.DataFrame, has_baseline: bool
) -> GateResult:
    """How many queries of the slice got the verdict (``regression[tag=critical]``): fails when
    more than ``gate.max``. No baseline passes as skipped; the reason names the offending queries."""
    target = parse_gate_key(key)
    name = check_name(key, "max")
    if not has_baseline:
        reason = "no baseline run: nothing to regress against"
        return GateResult(name, key, "max", True, True, gate.blocking, None, gate.max, None, reason)
    rows = verdict_slice(per_query, target) & (per_query["verdict"] == target.metric).to_numpy(dtype=bool)
    count = int(rows.sum())
    ids = per_query.loc[rows, "query_id"].astype(str).tolist()
    if target.dimension is None:
        where = ""
    elif target.value == NO_VALUE:
        where = f" among queries without a {target.dimension}"
    else:
        where = f" among queries with {target.dimension} = {target.value!r}"
    shown = ", ".join(ids[:10]) + (f", … ({len(ids) - 10} more)" if len(ids) > 10 else "")
    passed = count <= gate.max
    reason = f"{count} {target.metric} verdict(s){where} (allowed {gate.max})" + (f": {shown}" if ids else "")
    reason += _verdict_noise(per_query, verdict_slice(per_query, target), target.metric, count)
    return GateResult(
        name,
        key,
        "max",
        passed,
        False,
        gate.blocking,
        float(count),
        gate.max,
        float(count - gate.max),
        reason,
    )


#: A verdict and its mirror image: what the same flip the other way is called.
_MIRROR_NOTES = {
    "regression": ("win", "b found a relevant hit a missed"),
    "loss": ("win", "b ranks the first relevant hit higher"),
}


def _verdict_noise(per_query: pd.DataFrame, rows: np.ndarray, verdict: str, count: int) -> str:
    """What a verdict count can show: two systems with no real difference flip as many queries one
    way as the other, so of the ``count`` verdicts and their ``mirror`` ones, each is a fair coin.
    Returns ", against N the other way: a pair with no real difference shows this many or more
    with probability p" (one-sided sign test), or "" for a verdict without a mirror."""
    if verdict not in _MIRROR_NOTES or count == 0 or "note" not in per_query.columns:
        return ""
    mirror, note = _MIRROR_NOTES[verdict]
    other = int(
        (
            rows
            & (per_query["verdict"] == mirror).to_numpy(dtype=bool)
            & (per_query["note"] == note).to_numpy(dtype=bool)
        ).sum()
    )
    from scipy.special import bdtrc

    p = float(bdtrc(count - 1, count + other, 0.5))  # P(X ≥ count), X ~ Binomial(count + other, ½)
    return (
        f"; against {other} the other way ({mirror}: {note}), a pair with no real difference shows "
        f"{count} or more with probability {p:.2g}"
    )


def evaluate_comparison_gates(settings: GatedRun, report) -> list[GateResult]:
    """Every regression and verdict gate of ``settings`` against one comparison (a
    ``ComparisonArtifact``): what the ``comparison_report`` checks and ``kebab-eval compare`` run."""
    info = report.info
    baseline = info.get("metrics_a") if info.get("run_a") else None
    results: list[GateResult] = []
    compare = getattr(settings, "compare", None)
    drift = info.get("judge_drift")
    corrected = {row["metric"]: row for row in info.get("corrected") or []}
    for metric, gate in settings.regression_gates.items():
        evidence = paired_evidence(report.per_metric, metric)
        gated = evaluate_regression_gate(metric, gate, info.get("metrics_b", {}), baseline, evidence, compare)
        if metric in corrected and baseline is not None:
            # both runs calibrated: the corrected estimates decide (compare/corrected.py), whatever
            # judged them
            gated = [_on_corrected(r, corrected[metric]) for r in gated]
        elif drift is not None and baseline is not None and is_judged_metric(metric):
            # two judges' scores: no verdict either way (compare/judge_drift.py) — skipped, never passed
            why = "skipped: the runs were judged by different judges; re-judge one run with the other's judge"
            gated = [replace(r, passed=True, skipped=True, reason=f"{r.reason}; {why}") for r in gated]
        results += gated
    # A bound finer than the golden set resolves (gates/resolution.py) says so in its own reason.
    finer = {(f["metric"], f["kind"]): f for f in info.get("gate_resolution") or []}
    results = [
        replace(r, reason=f"{r.reason} (finer than {f['n']} queries resolve: ±{f['resolvable']:.4f})")
        if (r.metric, r.kind) in finer and not r.skipped
        else r
        for r in results
        for f in [finer.get((r.metric, r.kind))]
    ]
    for key, gate in settings.verdict_gates.items():
        results.append(evaluate_verdict_gate(key, gate, report.per_query, baseline is not None))
    if info.get("cross_system"):
        # Still evaluated (a bound against another system is a fair non-inferiority check), but a
        # difference between two systems is not a regression of one: every result says so.
        results = [replace(r, reason=f"{r.reason} (comparing two systems)") for r in results]
    return results


def _on_corrected(result: GateResult, row: Mapping) -> GateResult:
    """``result`` decided again on the metric's corrected row, where its kind allows (a ``max_p``
    bound has no p-value to read there: it stays the judge's paired test, and says so)."""
    if result.kind == "max_p":
        return replace(
            result, reason=f"{result.reason} (the judge's scores: corrected estimates have no p-value)"
        )
    passed, shown, reason, label = corrected_gate_verdict(row, result.kind, float(result.threshold))
    return replace(
        result, passed=passed, skipped=False, value=shown, delta=row["delta"], reason=reason, verdict=label
    )


def paired_evidence(per_metric: pd.DataFrame, metric: str) -> PairedEvidence | None:
    """The paired test of ``metric`` from a comparison's per-metric table (None when the table has
    no paired columns — reports stored before p-values — or no row for the metric)."""
    if "p_value" not in per_metric.columns:
        return None
    rows = per_metric[per_metric["metric"] == metric]
    if len(rows) == 0:
        return None
    row = rows.iloc[0]

    def num(column: str) -> float | None:
        value = row.get(column)
        return None if value is None or pd.isna(value) else float(value)

    adjusted_by = row.get("adjusted_by")
    sums = (num("gain_sum"), num("loss_sum"), num("square_sum"))
    return PairedEvidence(
        delta=num("paired_delta"),
        p_value=num("p_value"),
        n=int(num("n_paired") or 0),
        test=None if pd.isna(row.get("test")) else str(row.get("test")),
        note="" if pd.isna(row.get("test_note")) else str(row.get("test_note")),
        p_adjusted=num("p_adjusted"),
        adjusted_by=None if adjusted_by is None or pd.isna(adjusted_by) else str(adjusted_by),
        se=num("paired_se"),
        bound_low=num("bound_low"),
        bound_high=num("bound_high"),
        sums=None if None in sums else sums,
        noise_floor=num("noise_floor"),
        within_noise=None if pd.isna(row.get("within_noise", pd.NA)) else bool(row.get("within_noise")),
    )


def evaluate_gates(
    settings: GatedRun,
    metrics: Mapping[str, float | None],
    breakdowns: pd.DataFrame | None = None,
    lacks: Mapping[str, str] | None = None,
) -> list[GateResult]:
    """Every absolute gate (configured + defaults) against one run's metrics and breakdowns.
    ``lacks``: what the run could not carry (capability → reason; default: what the config's
    system kind declares): a default gate on a metric it cannot measure is left out, a configured
    one is null with the reason (and so fails unless ``skip_if_null``)."""
    lacks = settings.run_lacks() if lacks is None else lacks
    return [
        r
        for key, gate in settings.effective_gates(lacks).items()
        for r in evaluate_gate(key, gate, metrics, breakdowns, lacks)
    ]
