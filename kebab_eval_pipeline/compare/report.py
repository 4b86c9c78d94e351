"""Render a comparison as Markdown (shown in the Dagster UI and written by the CLI)."""

from __future__ import annotations

import pandas as pd

from kebab_eval_pipeline.compare.drift import restriction_text
from kebab_eval_pipeline.compare.systems import verdict_label
from kebab_eval_pipeline.contract import VERSION_KEYS
from kebab_eval_pipeline.foundation.markdown_text import md_cell, md_code, md_text
from kebab_eval_pipeline.foundation.number_text import ci_text, p_text, signed, value_text
from kebab_eval_pipeline.metrics import catalogue
from kebab_eval_pipeline.systems.identity import label as system_label

_ARROWS = {"better": "▲", "worse": "▼", "same": "="}
#: A delta's leaning where the test does not find it significant (or there is no test).
_HOLLOW = {"better": "△", "worse": "▽"}


def arrow_text(row) -> str:
    """▲/▼ for a significant change, △/▽ for one that is not (or untested), = for none."""
    direction, leaning = getattr(row, "direction", None), getattr(row, "leaning", None)
    if direction is not None and not pd.isna(direction):
        return _ARROWS.get(str(direction), "")
    if leaning is None or pd.isna(leaning):
        return ""
    return _HOLLOW.get(str(leaning), "")


def _rescored(info: dict) -> str:
    """Which runs' numbers below were re-scored, and which are their own reports' (fallbacks only)."""
    rescored = info.get("rescored")
    if rescored is None or info.get("chunker_version_match") in (None, "exact"):
        return ""
    if not rescored:
        return "; both runs' own stored scores"
    kept = [r for r in ("a", "b") if r not in rescored]
    text = "; re-scored: " + ", ".join(f"run {r}" for r in rescored)
    return text + (f"; run {kept[0]}'s own stored scores" if kept else "")


def render_markdown(
    info: dict,
    per_metric: pd.DataFrame,
    verdicts: pd.DataFrame,
    per_slice: pd.DataFrame | None = None,
    max_rows: int = 25,
) -> str:
    """A self-contained Markdown report (rendered in the Dagster UI, written by the CLI):
    warnings, versions side by side, the matching mode, per-query verdicts and answer flips,
    metric deltas with paired p-values, CIs and significance marks, per-category deltas,
    notable queries and golden-set drift."""
    a, b = info["run_a"], info["run_b"]
    # Every value below that a user or a system supplied goes through md_* (reporting/markdown.py).
    if info.get("cross_system"):  # two systems: which did better, not what regressed (compare/systems.py)
        lines = [
            f"# Comparison of two systems: {md_code(b)} vs {md_code(a)}",
            "",
            f"**{md_text(str(info.get('systems_note')).capitalize())}.** The differences below are "
            "between two systems, not regressions of one.",
            "",
        ]
    else:
        lines = [f"# Comparison: {md_code(b)} vs baseline {md_code(a)}", ""]
    lines += [md_text(info.get("baseline_note")), ""]
    for warning in info.get("warnings", []):
        lines.append(f"> ⚠ {md_text(warning)}")
    if info.get("warnings"):
        lines.append("")
    lines += [
        "## Versions",
        "",
        f"| | {md_code(a, in_table=True)} | {md_code(b, in_table=True)} |",
        "|---|---|---|",
    ]
    va, vb = info.get("versions_a", {}), info.get("versions_b", {})
    # then what else the runs recorded (a sweep variant's settings), as the HTML report shows it
    for key in (*VERSION_KEYS, *sorted((set(va) | set(vb)) - set(VERSION_KEYS))):
        marker = "" if va.get(key) == vb.get(key) else " ⚠"
        name = key if key in VERSION_KEYS else md_cell(key)  # a recorded key is escaped like a value
        lines.append(
            f"| {name}{marker} | {md_cell(value_text(va.get(key)))} | {md_cell(value_text(vb.get(key)))} |"
        )
    sa, sb = info.get("system_a", {}), info.get("system_b", {})
    lines.append(
        f"| system{' ⚠' if info.get('cross_system') else ''} | {md_cell(system_label({'system': sa}))} "
        f"| {md_cell(system_label({'system': sb}))} |"
    )
    ga, gb = info.get("golden_a", {}), info.get("golden_b", {})
    lines.append(
        f"| golden sha256 | {md_cell(str(ga.get('sha256'))[:12])} | {md_cell(str(gb.get('sha256'))[:12])} |"
    )
    lines += [
        "",
        f"**chunker_version_match:** {md_code(info['chunker_version_match'])} "
        f"(per-query matching criterion: {md_code(info.get('matching_criterion'))}" + _rescored(info) + ")",
        "",
    ]
    counts = info["verdict_counts"]
    lines += [
        "## Per-query verdicts",
        "",
        " · ".join(
            f"**{verdict_label(k, info)}** {v}"
            for k, v in counts.items()
            if v or k in ("win", "loss", "regression", "draw")
        ),
        "",
    ]
    flips = {k: v for k, v in info.get("flip_counts", {}).items() if v}
    if flips:
        lines += ["Answer flips: " + " · ".join(f"**{k}** {v}" for k, v in flips.items()), ""]
    lines += [
        "## Metrics (delta = b − a)",
        "",
        f"Paired tests over the queries both runs scored (seed {info.get('seed', 0)}{_resamples(info)}): "
        "exact McNemar "
        "for 0/1 scores, sign-flip randomization otherwise; 95% CI by paired bootstrap. "
        + _families_text(info)
        + "Significance: \\* p < 0.05, \\*\\* p < 0.01, \\*\\*\\* p < 0.001"
        + (" (adjusted p)" if _marks_adjusted(info) else " (raw p, as configured)")
        + "; ▲ better / ▼ worse where significant, △ / ▽ the delta's sense where not (or untested); "
        "† fewer paired queries than min_queries.",
        "",
        *_restriction_lines(info),
        "| metric | a | b | delta | relative | p (raw) | p (adjusted) | 95% CI | MDE | sig | test |",
        "|---|---:|---:|---:|---:|---:|---:|---|---:|---|---|",
    ]
    min_queries = info.get("min_queries")
    for row in per_metric.itertuples(index=False):
        arrow = arrow_text(row)
        few = (
            "†"
            if min_queries is not None and not pd.isna(row.n_paired) and row.n_paired < min_queries
            else ""
        )
        sig = str(row.significance).replace("*", "\\*") if not pd.isna(row.significance) else ""
        cells = [
            md_cell(row.metric),
            value_text(row.a),
            value_text(row.b),
            f"{signed(row.delta)} {arrow}".strip(),
            signed(row.rel_change),
            p_text(row.p_value) + few,
            _adjusted(row),
            ci_text(row.ci_low, row.ci_high) + ("‡" if ci_disagrees(row) else ""),
            mde_text(row),
            sig,
            "–" if pd.isna(row.test) else md_cell(row.test),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines += resolution_lines(per_metric)
    lines += _margin_lines(info)
    lines += _category_lines(per_slice)
    lines += _slice_lines(per_slice, info, max_rows)
    notable = verdicts[verdicts["verdict"].isin(["regression", "loss", "win"])]
    order = {"regression": 0, "loss": 1, "win": 2}
    notable = notable.sort_values(
        ["verdict", "query_id"], key=lambda s: s.map(order) if s.name == "verdict" else s
    )
    if len(notable):
        lines += [
            "",
            "## Notable queries",
            "",
            "| query | verdict | a rank | b rank | note |",
            "|---|---|---:|---:|---|",
        ]
        for row in notable.head(max_rows).itertuples(index=False):
            lines.append(
                f"| {md_cell(row.query_id)} | {md_cell(verdict_label(row.verdict, info))} "
                f"| {value_text(row.a_rank)} | {value_text(row.b_rank)} | {md_cell(row.note)} |"
            )
        if len(notable) > max_rows:
            lines.append(f"| … | {len(notable) - max_rows} more in the per-query table | | | |")
    flipped = verdicts[verdicts["refusal_flip"].notna() | verdicts["groundedness_flip"].notna()]
    if len(flipped):
        lines += ["", "## Answer flips", "", "| query | refusal | groundedness |", "|---|---|---|"]
        for row in flipped.head(max_rows).itertuples(index=False):
            lines.append(
                f"| {md_cell(row.query_id)} "
                f"| {'' if pd.isna(row.refusal_flip) else md_cell(row.refusal_flip)} "
                f"| {'' if pd.isna(row.groundedness_flip) else md_cell(row.groundedness_flip)} |"
            )
        if len(flipped) > max_rows:
            lines.append(f"| … | {len(flipped) - max_rows} more in the per-query table | |")
    drift_a, drift_b = info.get("only_in_a", []), info.get("only_in_b", [])
    changed = info.get("gold_changed", [])
    if drift_a or drift_b or changed:
        lines += ["", "## Golden-set drift", ""]
        if drift_a:
            lines.append(f"- only in {md_code(a)} ({len(drift_a)}): {_capped(drift_a, max_rows)}")
        if drift_b:
            lines.append(f"- only in {md_code(b)} ({len(drift_b)}): {_capped(drift_b, max_rows)}")
        if changed:
            lines.append(
                f"- gold changed ({len(changed)}): "
                + _capped(
                    [f"{c['query_id']} ({', '.join(c['fields'])})" for c in changed[: max_rows + 1]],
                    max_rows,
                    total=len(changed),
                )
            )
    return "\n".join(lines) + "\n"


_ADJUSTMENT_NAMES = {"holm": "Holm", "bh": "BH"}


def mde_text(row) -> str:
    """The row's minimum detectable effect as ``±0.0412`` (– where the metric has none)."""
    mde = getattr(row, "mde", None)
    return "–" if mde is None or pd.isna(mde) else f"±{mde:.4f}"


def ci_disagrees(row) -> bool:
    """Whether the row's 95% CI and its raw p tell different stories: the CI excludes 0 while
    p ≥ 0.05, or includes it while p < 0.05 (the bootstrap interval and the exact or
    randomization p are different methods; with few changed queries they can disagree)."""
    low, high, p = getattr(row, "ci_low", None), getattr(row, "ci_high", None), getattr(row, "p_value", None)
    if any(v is None or pd.isna(v) for v in (low, high, p)):
        return False
    excludes = low > 0 or high < 0
    return bool(excludes != (p < 0.05))


def resolution_lines(per_metric: pd.DataFrame) -> list[str]:
    """What the table's columns MDE and ‡ mean, and each not-significant tested metric read as
    what it can show: no change as large as its minimum detectable effect was seen."""
    if "mde" not in per_metric.columns or per_metric["mde"].isna().all():
        return []
    lines = [
        "",
        "MDE: the minimum detectable effect — the smallest true change the paired test would find "
        "with 80% power at the level its correction demands of a lone change (α divided by the "
        "family's size). ‡: the bootstrap CI and the p-value disagree about 0 (few changed queries); "
        "the p-value decides.",
    ]
    quiet = per_metric[
        per_metric["significance"].fillna("").eq("")
        & per_metric["mde"].notna()
        & per_metric["p_value"].notna()
    ]
    if len(quiet):
        shown = quiet.head(8)
        lines += [
            "",
            'Not significant is not "no change": '
            + "; ".join(
                f"{md_cell(r.metric)}: a true change of ±{r.mde:.4f} or more would show as significant "
                "4 times in 5, smaller ones may go unseen"
                for r in shown.itertuples()
            )
            + ("; …" if len(quiet) > len(shown) else "")
            + ". `kebab-eval golden size` says how many queries a smaller change needs.",
        ]
    return lines


def _restriction_lines(info: dict) -> list[str]:
    """A comparison across two golden-set versions: which queries its numbers are over, and what it
    left out and why (nothing for identical golden sets)."""
    restriction = info.get("golden_restriction")
    if not restriction:
        return []
    text = restriction_text(restriction)
    return [f"**Golden-set versions:** {md_text(text[0].upper() + text[1:])}.", ""]


def _adjusted(row) -> str:
    """The adjusted p with its method (older stored reports have none: –)."""
    p = getattr(row, "p_adjusted", None)
    if p is None or pd.isna(p):
        return "–"
    by = getattr(row, "adjusted_by", None)
    return f"{p:.4g}" + ("" if by is None or pd.isna(by) else f" ({_ADJUSTMENT_NAMES.get(by, by)})")


def _marks_adjusted(info: dict) -> bool:
    return (info.get("families") or {}).get("significance", "adjusted") == "adjusted" and "families" in info


def _families_text(info: dict) -> str:
    """Which tests were adjusted together, and for what (the report states its families)."""
    families = info.get("families")
    if not families:
        return ""
    alpha = info.get("alpha", 0.05)
    holm = families["holm"]
    bh = families["bh"]
    names = ", ".join(md_text(m) for m in holm["metrics"]) or "none tested"
    which = (
        "the headline metrics (no regression gate is configured)" if holm["default"] else "the gated metrics"
    )
    slices = f" and {bh['slices']} slice tests" if bh["slices"] else ""
    return (
        f"Multiple testing: Holm over {which} ({holm['size']}: {names}) keeps the chance of any false "
        f"alarm among them ≤ {alpha:g}; Benjamini–Hochberg over the whole table ({bh['size']} tests: "
        f"{bh['metrics']} metrics{slices}) keeps the expected share of false alarms among flagged rows "
        f"≤ {alpha:g}. "
    )


def _margin_lines(info: dict) -> list[str]:
    """Non-inferiority / equivalence decisions (the regression gates' margins), one line each."""
    margins = info.get("margins") or []
    if not margins:
        return []
    lines = ["", "## Non-inferiority and equivalence", ""]
    for m in margins:
        claim = (
            f"no worse than a by more than {m['margin']:g}"
            if m["kind"] == "non_inferior"
            else f"within ±{m['margin']:g} of a"
        )
        p = "" if m.get("p_value") is None else f" (one-sided p = {m['p_value']:.4g})"
        lines.append(f"- **{md_text(m['metric'])}** — b {claim}? **{md_text(m['text'])}**{p}")
    return lines


def _slice_lines(per_slice: pd.DataFrame | None, info: dict, max_rows: int) -> list[str]:
    """The slices whose change is significant after adjustment (BH over the table), most
    significant first; a count of the tests when none is."""
    if per_slice is None or "p_bh" not in per_slice.columns or not per_slice["p_value"].notna().any():
        return []
    alpha = info.get("alpha", 0.05)
    tested = per_slice[per_slice["p_value"].notna()]
    read = "p_bh" if _marks_adjusted(info) else "p_value"
    flagged = tested[tested[read] < alpha].sort_values([read, "dimension", "value", "metric"], kind="stable")
    lines = ["", "## Slices that changed", ""]
    which = "BH-adjusted" if read == "p_bh" else "raw"
    if not len(flagged):
        return [*lines, f"None of the {len(tested)} slice tests is significant ({which} p < {alpha:g})."]
    lines += [
        f"{len(flagged)} of {len(tested)} slice tests significant ({which} p < {alpha:g}):",
        "",
        "| slice | metric | a | b | delta | n | p (raw) | p (BH) |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in flagged.head(max_rows).itertuples(index=False):
        lines.append(
            f"| {md_cell(f'{row.dimension}={row.value}')} | {md_cell(row.metric)} | {value_text(row.a)} "
            f"| {value_text(row.b)} | {signed(row.delta)} | {value_text(row.n_paired)} "
            f"| {p_text(row.p_value)} | {p_text(row.p_bh)} |"
        )
    if len(flagged) > max_rows:
        lines.append(f"| … | {len(flagged) - max_rows} more in the per-slice table | | | | | | |")
    return lines


def _capped(items: list[str], max_rows: int, total: int | None = None) -> str:
    """The first ``max_rows`` of ``items`` (Markdown-escaped), then how many more: a golden-set
    drift of a million queries must not become a million-name line in the UI."""
    total = len(items) if total is None else total
    text = ", ".join(map(md_text, items[:max_rows]))
    return text + (f", … {total - max_rows} more (the JSON report lists all)" if total > max_rows else "")


def _resamples(info: dict) -> str:
    n = info.get("resamples")
    return f", {n:,} resamples for the randomization tests and the bootstrap" if n else ""


#: Metrics shown in the per-category tables, when the runs have them: the catalogue's summary
#: list without operational rates (a category is about the quality of its answers).
CATEGORY_METRICS: tuple[str, ...] = tuple(catalogue.summary_names(families=catalogue.QUALITY_FAMILIES))


def _category_lines(per_slice: pd.DataFrame | None) -> list[str]:
    if per_slice is None or len(per_slice) == 0:
        return []
    cat = per_slice[(per_slice["dimension"] == "category") & per_slice["metric"].isin(CATEGORY_METRICS)]
    if len(cat) == 0:
        return []
    keep = [m for m in CATEGORY_METRICS if m in set(cat["metric"])]
    pivot = cat.pivot_table(index="value", columns="metric", values="delta", aggfunc="first", dropna=False)
    lines = [
        "",
        "## Delta by category",
        "",
        "| category | " + " | ".join(keep) + " |",
        "|---|" + "---:|" * len(keep),
    ]
    for value, row in pivot.iterrows():
        lines.append(f"| {md_cell(value)} | " + " | ".join(signed(row.get(m)) for m in keep) + " |")
    return lines
