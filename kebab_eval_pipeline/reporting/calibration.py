"""A judge's calibration against a person's labels, as text lines (``kebab-eval judge calibrate``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kebab_eval_pipeline.judge.calibration import CriterionCalibration


def _num(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}".replace("-", "−")


def _kappa(agreement: dict | None) -> str:
    if agreement is None:
        return "—"
    if agreement["kappa"] is None:
        return f"null ({agreement['note']})"
    return (
        f"{_num(agreement['kappa'])} [{_num(agreement['ci_low'])}, {_num(agreement['ci_high'])}] "
        f"over {agreement['n']}"
    )


def calibration_lines(report: Sequence[CriterionCalibration]) -> list[str]:
    """Per criterion: the judge, how many items were judged and labelled (by whom), κ on the 0–5
    scale and on the verdict with 95% intervals, the labels' pass rate, the verdict confusion, the
    verdict κ per slice, the judged mean with its naive interval and the corrected mean with its."""
    if not report:
        return ["the run's judge scored no item: nothing to calibrate"]
    lines: list[str] = []
    for c in report:
        judge = c.judge
        lines.append(
            f"{c.criterion} — judge {judge.get('model', '?')} ({judge.get('digest', '?')[:19]}…, prompt "
            f"{judge.get('prompt_version', '?')}): {c.items} judged item(s), {c.labelled} labelled"
            + (f" by {', '.join(c.labellers)}" if c.labellers else "")
        )
        if not c.labelled:
            lines.append(
                "  no label matches this run's items (labels attach to the exact answer and context)"
            )
        else:
            binary = c.binary or {}
            lines.append(f"  κ on the 0–5 scale (quadratic weights): {_kappa(c.graded)}")
            lines.append(f"  κ on the verdict (pass ≥ {c.pass_score:g}): {_kappa(c.binary)}")
            base = binary.get("base_rate", {}).get("pass")
            table = binary.get("confusion") or [[0, 0], [0, 0]]
            lines.append(
                f"  labels passing: {_num(None if base is None else 100 * base, 0)}%; person→judge "
                f"fail→fail {table[0][0]}, fail→pass {table[0][1]}, pass→fail {table[1][0]}, "
                f"pass→pass {table[1][1]}"
            )
            for s in c.slices:
                shown = (
                    "null"
                    if s["kappa"] is None
                    else f"{_num(s['kappa'])} [{_num(s['ci_low'])}, {_num(s['ci_high'])}]"
                )
                lines.append(f"    slice {s['slice'] or '(none)'}: verdict κ {shown} over {s['n']}")
        ci = c.judged_ci
        lines.append(
            f"  judged mean {_num(c.judged_mean)}"
            + (f" [{_num(ci[0])}, {_num(ci[1])}]" if ci else "")
            + " — the judge taken as right"
        )
        if c.corrected is not None:
            p = c.corrected
            lines.append(
                f"  corrected mean {_num(p['estimate'])} [{_num(p['ci_low'])}, {_num(p['ci_high'])}] — "
                f"prediction-powered (PPI++, λ {_num(p['lam'])}), {p['n']} labelled + "
                f"{p['n_unlabelled']} judged only"
            )
            if c.corrected_note:
                lines.append(f"    warning: {c.corrected_note}")
        else:
            lines.append(f"  corrected mean — ({c.corrected_note})")
    return lines


def _interval(value: float | None, low: float | None, high: float | None) -> str:
    if value is None:
        return "—"
    return f"{_num(value)} [{_num(low)}, {_num(high)}]"


def calibration_markdown(record: Mapping[str, Any] | None) -> list[str]:
    """The run report's "Judge calibration" section from a run's ``judge_calibration`` record
    (``judge.calibration.run_calibration``): the labels file, one row per criterion (labelled items,
    κ on the 0–5 scale and on the verdict, the labels' pass rate, the judged and the corrected mean,
    each with its 95% interval) and the check's verdict. [] when the run was not calibrated."""
    from kebab_eval_pipeline.foundation.markdown_text import md_cell, md_code, md_text

    if not record:
        return []
    digest = record.get("labels_sha256")
    lines = [
        "",
        "## Judge calibration",
        "",
        f"Against the labels in {md_code(record['labels'])}"
        + (f" (sha256 {md_code(digest[:12])}…)" if digest else " (not there yet)")
        + f": {record['labels_read']} label(s) read.",
        "",
        "| criterion | judge | labelled | κ 0–5 | κ verdict | labels passing | judged mean "
        "| corrected mean |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for c in record["criteria"]:
        graded, binary, corrected = c.get("graded") or {}, c.get("binary") or {}, c.get("corrected")
        base = (binary.get("base_rate") or {}).get("pass")
        ci = c.get("judged_ci") or [None, None]
        fixed = (
            (None, None, None)
            if corrected is None
            else (corrected["estimate"], corrected["ci_low"], corrected["ci_high"])
        )
        judge = c.get("judge") or {}
        lines.append(
            f"| {md_cell(c['criterion'])} | {md_cell(judge.get('model', ''))} "
            f"{md_cell(judge.get('prompt_version', ''))} | {c['labelled']} "
            f"| {_interval(graded.get('kappa'), graded.get('ci_low'), graded.get('ci_high'))} "
            f"| {_interval(binary.get('kappa'), binary.get('ci_low'), binary.get('ci_high'))} "
            f"| {'—' if base is None else f'{100 * base:.0f}%'} "
            f"| {_interval(c.get('judged_mean'), ci[0], ci[1])} "
            f"| {_interval(*fixed)} |"
        )
    check = record.get("check") or {}
    lines += [
        "",
        f"Check `judge_calibration`: **{md_text(check.get('status', '?'))}** — "
        f"{md_text(check.get('reason', ''))}",
        "",
        "κ: Cohen's kappa of the judge against the labels (0–5 with quadratic weights; verdict: pass at "
        f"{record.get('pass_score', 3):g}), 95% bootstrap interval. Corrected mean: the prediction-powered "
        "(PPI++) estimate of the labellers' mean over every judged item, 95% interval; the judged mean's "
        "interval takes the judge as right.",
    ]
    return lines


def relevance_text(record: Mapping[str, Any]) -> str:
    """One sentence on the relevance judge against the golden set's verdicts (a run's
    ``judge_relevance_calibration`` record)."""
    table = record.get("confusion") or [[0, 0], [0, 0]]
    base = (record.get("base_rate") or {}).get("relevant")
    kappa = (
        f"κ {_num(record['kappa'])} [{_num(record['ci_low'])}, {_num(record['ci_high'])}]"
        if record.get("kappa") is not None
        else f"κ null ({record.get('note', '')})"
    )
    return (
        f"relevance judge against the golden set: {kappa} over {record['n']} of {record['asked']} sampled "
        f"hits it judged ({record['no_verdict']} without a verdict); golden relevant "
        f"{'—' if base is None else f'{100 * base:.0f}%'}; "
        f"sensitivity {_num(record.get('sensitivity'))}, specificity {_num(record.get('specificity'))}; "
        f"golden→judge: not→not {table[0][0]}, "
        f"not→relevant {table[0][1]}, relevant→not {table[1][0]}, relevant→relevant {table[1][1]}"
    )


def relevance_markdown(record: Mapping[str, Any] | None) -> list[str]:
    """The run report's section on the relevance judge against the golden set ([] without one)."""
    from kebab_eval_pipeline.foundation.markdown_text import md_text

    if not record:
        return []
    lines = ["", "## Relevance judge against the golden set", "", md_text(relevance_text(record)) + "."]
    shown = [s for s in record.get("slices") or [] if s["n"]]
    if shown:
        lines += ["", "| slice | hits | κ [95% CI] |", "|---|---:|---:|"]
        lines += [
            f"| {md_text(s['slice'] or '(none)')} | {s['n']} | "
            + (
                "—"
                if s["kappa"] is None
                else f"{_num(s['kappa'])} [{_num(s['ci_low'])}, {_num(s['ci_high'])}]"
            )
            + " |"
            for s in shown
        ]
    return lines


def self_consistency_text(record: Mapping[str, Any]) -> str:
    """One sentence on the self-consistency check (a run's ``judge_self_consistency`` record)."""
    parts = []
    for criterion, d in record.items():
        if not d["n"]:
            parts.append(f"{criterion}: no item judged twice")
            continue
        parts.append(
            f"{criterion} flips {d['flips']} of {d['n']} ({100 * d['flips'] / d['n']:.1f}%), "
            f"mean |score change| {d['mean_abs_change']:.2f}"
        )
    return "judge self-consistency (the same evidence in another order): " + "; ".join(parts)


def calibration_check(record: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The ``judge_calibration`` check of a run's record as one gate-shaped result (suite ``run``,
    ``check: True``) — so JUnit, the job summary, the PR comment and ``kebab-eval run`` count and
    show it with the gates: a blocking failure is a JUnit ``<failure>`` beside the exit code 1, a
    check that could not run is ``<skipped>``. [] when the run was not calibrated."""
    from kebab_eval_pipeline.gates.evaluate import GateResult

    if not record:
        return []
    check = record["check"]
    result = GateResult(
        name="judge_calibration",
        metric="judge_calibration",
        kind=f"min_kappa_{record.get('kappa', 'graded')}",
        passed=check["status"] != "failed",
        skipped=check["status"] == "skipped",
        blocking=bool(record.get("blocking")),
        value=check.get("value"),
        threshold=float(record["min_kappa"]),
        delta=None,
        reason=check["reason"],
    )
    return [{**result.as_dict(), "suite": "run", "check": True}]
