"""Render a comparison as Markdown (shown in the Dagster UI and written by the CLI)."""

from __future__ import annotations

import math

import pandas as pd

VERSION_KEYS = (
    "chunker_version",
    "embedding_model",
    "embedding_version",
    "prompt_template_version",
    "index_version",
    "parser_version",
)


def _fmt(x) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)) or x is pd.NA:
        return "null"
    if isinstance(x, float):
        return f"{x:.4f}"
    return str(x)


def _signed(x) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "null"
    return f"{x:+.4f}"


def render_markdown(info: dict, per_metric: pd.DataFrame, verdicts: pd.DataFrame, max_rows: int = 25) -> str:
    """A self-contained Markdown report: versions, metric deltas, verdict counts, notable queries."""
    a, b = info["run_a"], info["run_b"]
    lines = [f"# Comparison: `{b}` vs baseline `{a}`", "", info.get("baseline_note", ""), ""]
    lines += ["## Versions", "", f"| | `{a}` | `{b}` |", "|---|---|---|"]
    va, vb = info.get("versions_a", {}), info.get("versions_b", {})
    for key in VERSION_KEYS:
        marker = "" if va.get(key) == vb.get(key) else " ⚠"
        lines.append(f"| {key}{marker} | {_fmt(va.get(key))} | {_fmt(vb.get(key))} |")
    sa, sb = info.get("system_a", {}), info.get("system_b", {})
    lines.append(f"| system | {sa.get('kind')} / {sa.get('mode')} | {sb.get('kind')} / {sb.get('mode')} |")
    ga, gb = info.get("golden_a", {}), info.get("golden_b", {})
    lines.append(f"| golden sha256 | {str(ga.get('sha256'))[:12]} | {str(gb.get('sha256'))[:12]} |")
    lines += [
        "",
        f"**chunker_version_match:** `{info['chunker_version_match']}` "
        f"(per-query matching criterion: `{info.get('matching_criterion')}`)",
        "",
    ]
    counts = info["verdict_counts"]
    lines += [
        "## Per-query verdicts",
        "",
        " · ".join(
            f"**{k}** {v}" for k, v in counts.items() if v or k in ("win", "loss", "regression", "draw")
        ),
        "",
    ]
    paired = "p_value" in per_metric.columns
    lines += [
        "## Metrics (delta = b − a)",
        "",
        "| metric | a | b | delta | relative |" + (" p (paired) | test |" if paired else ""),
        "|---|---:|---:|---:|---:|" + ("---:|---|" if paired else ""),
    ]
    for row in per_metric.itertuples(index=False):
        cells = [row.metric, _fmt(row.a), _fmt(row.b), _signed(row.delta), _signed(row.rel_change)]
        if paired:
            p = row.p_value
            cells += ["–" if pd.isna(p) else f"{p:.4g}", "–" if pd.isna(row.test) else str(row.test)]
        lines.append("| " + " | ".join(cells) + " |")
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
                f"| {row.query_id} | {row.verdict} | {_fmt(row.a_rank)} | {_fmt(row.b_rank)} | {row.note} |"
            )
        if len(notable) > max_rows:
            lines.append(f"| … | {len(notable) - max_rows} more in the per-query table | | | |")
    drift_a, drift_b = info.get("only_in_a", []), info.get("only_in_b", [])
    if drift_a or drift_b:
        lines += ["", "## Golden-set drift", ""]
        if drift_a:
            lines.append(f"- only in `{a}`: {', '.join(drift_a)}")
        if drift_b:
            lines.append(f"- only in `{b}`: {', '.join(drift_b)}")
    return "\n".join(lines) + "\n"


def render_run_markdown(
    run_id: str, info: dict, metrics: dict, breakdowns: pd.DataFrame, gates: list[dict]
) -> str:
    """The per-run report: versions, metrics, gates and the category breakdown."""
    lines = [f"# Evaluation run `{run_id}`", ""]
    system, golden = info.get("system", {}), info.get("golden", {})
    lines += [
        f"System **{system.get('kind')}** ({system.get('mode')}), golden set **{golden.get('name')}** "
        f"({golden.get('queries')} queries, sha256 `{str(golden.get('sha256'))[:12]}`).",
        "",
    ]
    lines += ["| version | value |", "|---|---|"]
    lines += [f"| {k} | {_fmt(v)} |" for k, v in info.get("versions", {}).items()]
    lines += ["", "## Metrics", "", "| metric | value |", "|---|---:|"]
    lines += [
        f"| {k} | {_fmt(int(v) if k.startswith('n_') and v is not None else v)} |" for k, v in metrics.items()
    ]
    if gates:
        lines += [
            "",
            "## Gates",
            "",
            "| gate | result | value | threshold | reason |",
            "|---|---|---:|---:|---|",
        ]
        for g in gates:
            result = (
                "skipped"
                if g["skipped"]
                else ("pass" if g["passed"] else ("FAIL" if g["blocking"] else "warn"))
            )
            lines.append(
                f"| {g['name']} | {result} | {_fmt(g['value'])} | {g['threshold']} | {g['reason']} |"
            )
    if len(breakdowns):
        cat = breakdowns[breakdowns["dimension"] == "category"]
        if len(cat):
            pivot = cat.pivot_table(index="value", columns="metric", values="score", aggfunc="first")
            keep = [c for c in ("hit@5", "mrr", "recall@5", "refusal_correctness") if c in pivot.columns]
            if keep:
                lines += [
                    "",
                    "## By category",
                    "",
                    "| category | " + " | ".join(keep) + " |",
                    "|---|" + "---:|" * len(keep),
                ]
                for value, row in pivot[keep].iterrows():
                    lines.append(f"| {value} | " + " | ".join(_fmt(row[c]) for c in keep) + " |")
    return "\n".join(lines) + "\n"
