"""Judged metrics compared through their corrected estimates, when both runs have them.

A run calibrated against a person's labels (``judge.calibration``) carries, per criterion, the
prediction-powered (PPI++) estimate of the mean the labellers would have given every judged item,
with its interval. That estimate does not depend on the judge being right, so two runs' corrected
estimates can be compared even when different judges scored them.

The difference ``b − a`` gets the interval ``Δ ± z·(se_a + se_b)``, each ``se`` read back from the
run's stored interval. Adding the standard errors (instead of their squares) makes it valid whatever
the correlation between the two estimates. The two runs share queries, and often labelled items, so
their estimates are not independent, and this sum bounds the standard error of the difference
under any correlation: the interval is conservative, never too narrow. A direction (better or
worse) is given only when the interval excludes 0.

Regression gates on a judged metric decide on these rows when they exist (``max_drop`` on the
corrected Δ, ``non_inferior``/``equivalent`` on its interval) and say so in their reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: What one row of :func:`corrected_deltas` holds.
CORRECTED_FIELDS = ("metric", "a", "b", "delta", "ci_low", "ci_high", "direction", "labelled_a", "labelled_b")


def _by_criterion(info: Mapping[str, Any]) -> dict[str, dict]:
    record = info.get("judge_calibration") or {}
    return {c["criterion"]: c for c in record.get("criteria", []) if c.get("corrected")}


def _se(corrected: Mapping[str, Any]) -> float:
    from scipy.special import ndtri

    z = float(ndtri(1 - float(corrected["alpha"]) / 2))
    return (float(corrected["ci_high"]) - float(corrected["ci_low"])) / (2 * z)


def corrected_deltas(info_a: Mapping[str, Any], info_b: Mapping[str, Any], alpha: float) -> list[dict]:
    """One row per judged criterion both runs' ``run_metrics`` infos have a corrected estimate of
    (:data:`CORRECTED_FIELDS`): ``metric`` (``judge_<criterion>``), each run's estimate, the
    difference b − a with its conservative ``1 − alpha`` interval (module doc), ``direction``
    (better / worse when the interval excludes 0, else None) and how many items each run had
    labelled. [] when either run has none."""
    from scipy.special import ndtri

    rows = []
    a_side, b_side = _by_criterion(info_a), _by_criterion(info_b)
    z = float(ndtri(1 - alpha / 2))
    for criterion, cb in b_side.items():
        ca = a_side.get(criterion)
        if ca is None:
            continue
        pa, pb = ca["corrected"], cb["corrected"]
        delta = float(pb["estimate"]) - float(pa["estimate"])
        half = z * (_se(pa) + _se(pb))
        low, high = delta - half, delta + half
        rows.append(
            {
                "metric": f"judge_{criterion}",
                "a": float(pa["estimate"]),
                "b": float(pb["estimate"]),
                "delta": round(delta, 4),
                "ci_low": low,
                "ci_high": high,
                "direction": "better" if low > 0 else "worse" if high < 0 else None,
                "labelled_a": int(ca["labelled"]),
                "labelled_b": int(cb["labelled"]),
            }
        )
    return rows


def corrected_markdown(rows: list[dict], alpha: float) -> str:
    """The comparison report's section on corrected judged metrics ("" without rows)."""
    if not rows:
        return ""
    level = f"{100 * (1 - alpha):g}%"
    lines = [
        "",
        "## Judged metrics corrected by labels",
        "",
        f"| metric | a | b | Δ corrected | {level} CI | verdict | labelled a / b |",
        "|---|---:|---:|---:|---:|---|---:|",
    ]
    for r in rows:
        verdict = {"better": "▲ better", "worse": "▼ worse"}.get(r["direction"] or "", "no difference shown")
        lines.append(
            f"| `{r['metric']}` | {r['a']:.3f} | {r['b']:.3f} | {r['delta']:+.3f} "
            f"| [{r['ci_low']:+.3f}, {r['ci_high']:+.3f}] | {verdict} "
            f"| {r['labelled_a']} / {r['labelled_b']} |"
        )
    lines += [
        "",
        "Prediction-powered estimates of the labellers' means; the interval adds the two runs' standard "
        "errors, so it holds whatever the runs share, and it does not depend on the judges agreeing.",
        "",
    ]
    return "\n".join(lines) + "\n"


def corrected_gate_verdict(
    row: Mapping[str, Any], kind: str, bound: float
) -> tuple[bool, float, str, str | None]:
    """A regression bound ``kind`` (``max_drop``, ``non_inferior`` or ``equivalent``, of ``bound``)
    decided on a corrected row (judged metrics are higher-is-better): (passed, the value shown, the
    reason, the verdict label of a margin bound)."""
    delta, low, high = float(row["delta"]), float(row["ci_low"]), float(row["ci_high"])
    said = (
        f"{row['metric']} corrected by labels ({row['labelled_a']} / {row['labelled_b']} labelled): "
        f"{row['a']:.4f} → {row['b']:.4f}, Δ {delta:+.4f} [{low:+.4f}, {high:+.4f}]"
    )
    if kind == "max_drop":
        return -delta <= bound + 1e-12, delta, f"{said}; allowed drop {bound}", None
    if kind == "non_inferior":
        label = "non-inferior" if low > -bound else "worse" if high < -bound else "inconclusive"
        return label == "non-inferior", low, f"{said}: {label} at margin {bound}", label
    inside = -bound < low and high < bound
    label = "equivalent" if inside else "not equivalent" if (high < -bound or low > bound) else "inconclusive"
    return inside, max(abs(low), abs(high)), f"{said}: {label} within ±{bound}", label


def judged_margins(margins: list[dict], drift: dict | None, rows: list[dict]) -> list[dict]:
    """A comparison's margin decisions (``margins.MarginVerdict`` dicts) with those on judged
    metrics decided as their gates decide them: on the corrected row when both runs are
    calibrated (:func:`corrected_gate_verdict`), else — the runs judged by different judges — no
    verdict, saying why. The report's non-inferiority section then never claims what the gate
    refused or decided otherwise."""
    from kebab_eval_pipeline.compare.judge_drift import is_judged_metric

    by_metric = {r["metric"]: r for r in rows}
    out = []
    for m in margins:
        if not is_judged_metric(m["metric"]):
            out.append(m)
        elif m["metric"] in by_metric:
            row = by_metric[m["metric"]]
            passed, _, reason, label = corrected_gate_verdict(row, m["kind"], float(m["margin"]))
            out.append(
                {
                    **m,
                    "delta": row["delta"],
                    "bound_low": row["ci_low"],
                    "bound_high": row["ci_high"],
                    "p_value": None,
                    "verdict": label,
                    "passed": passed,
                    "text": reason,
                }
            )
        elif drift is not None:
            why = (
                "not decided: the runs were judged by different judges; "
                "re-judge one run with the other's judge"
            )
            out.append({**m, "verdict": None, "passed": False, "p_value": None, "text": why})
        else:
            out.append(m)
    return out
