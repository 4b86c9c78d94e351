"""A sweep's leaderboard: its variants' stored runs as ranked by the multi-run ranking
(:mod:`kebab_eval_pipeline.compare.ranking`: means over the queries common to all, every pairwise
paired test Holm-adjusted, letters of the variants not significantly different), one row per
variant with its swept settings as columns; rendered as text (the terminal), Markdown (the
Dagster UI) and JSON.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from kebab_eval_pipeline.compare.ranking import Ranking, direction_word
from kebab_eval_pipeline.compare.ranking_report import superscript
from kebab_eval_pipeline.foundation.json_records import json_records, json_text
from kebab_eval_pipeline.foundation.markdown_text import md_cell, md_code, md_text
from kebab_eval_pipeline.foundation.number_text import shown as _num
from kebab_eval_pipeline.sweep.grid import Variant, value_text

#: One row per ranked variant, best first (the ranking's report order). The swept settings'
#: columns (``system.chunk_size``… as strings, :func:`~.grid.value_text`) follow ``variant``.
LEADERBOARD_COLUMNS: dict[str, str] = {
    "row": "Int64",  # 1-based; what ``better_than`` superscripts refer to
    "rank": "Int64",  # 1 = best on the metric; ties share the better rank; null without a mean
    "letters": "string",  # variants sharing a letter are not significantly different
    "variant": "string",  # the variant's slug
    "run_id": "string",
    "mean": "float64",  # NaN when no query common to all is scored by every run
    "ci_low": "float64",
    "ci_high": "float64",
    "n": "Int64",  # queries common to all variants where every one defines the metric
    "better_than": "object",  # rows of the variants this one is significantly better than
    "role": "string",  # what the run is (run_roles): sweep-variant (<name>); null when not given
    "outcome": "string",  # passed | failed (<checks>) (compare.outcome); null when not given
}


@dataclass
class Leaderboard:
    """``table`` (:data:`LEADERBOARD_COLUMNS` + one column per swept setting), the ``ranking`` it
    comes from (its pairs, warnings, matching), the variants with no stored run (``missing``:
    slugs; they are not ranked) and those stored but left out by an outcome filter (``left_out``:
    ``<slug>: <outcome>``)."""

    name: str
    metric: str
    settings: list[str]
    table: pd.DataFrame
    ranking: Ranking
    missing: list[str] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)

    def best(self) -> list[str]:
        """The slugs of the variants ranked 1 (several on a tie; empty when nothing was ranked)."""
        return list(self.table.loc[self.table["rank"] == 1, "variant"])

    def pairs(self) -> pd.DataFrame:
        """The ranking's pairwise tests on the leaderboard's metric (``PAIR_COLUMNS``)."""
        pairs = self.ranking.pairs
        return pairs[pairs["metric"] == self.metric].reset_index(drop=True)


def build_leaderboard(
    name: str,
    metric: str,
    ranking: Ranking,
    variants: Sequence[Variant],
    missing: Sequence[str] = (),
    standing: Mapping[str, tuple[str, str]] | None = None,
    left_out: Sequence[str] = (),
) -> Leaderboard:
    """The leaderboard of ``ranking`` (over the runs of ``variants``, ranked on ``metric`` among
    others) — its rows in the ranking's report order (by rank on its first metric, so give
    ``metric`` first), the swept settings of each variant as columns, and each run's role and
    outcome from ``standing`` (run id → (role, outcome) labels; null when absent). ValueError when
    a ranked run is not one of ``variants`` or ``metric`` was not ranked."""
    standing = standing or {}
    by_run = {v.run_id: v for v in variants}
    per_run = ranking.per_run[ranking.per_run["metric"] == metric].sort_values("row", kind="stable")
    if per_run.empty:
        raise ValueError(f"{metric!r} was not ranked")
    unknown = sorted(set(per_run["run_id"]) - set(by_run))
    if unknown:
        raise ValueError(f"runs that are not variants of sweep {name!r}: {unknown}")
    keys = list(dict.fromkeys(k for v in variants for k in v.overrides))
    ranked = [by_run[r] for r in per_run["run_id"]]
    table = pd.DataFrame(
        {
            "row": per_run["row"].to_numpy(),
            "rank": per_run["rank"].to_numpy(),
            "letters": per_run["letters"].to_numpy(),
            "variant": [v.slug for v in ranked],
            "run_id": per_run["run_id"].to_numpy(),
            **{key: [value_text(v.overrides.get(key)) for v in ranked] for key in keys},
            "mean": per_run["mean"].to_numpy(),
            "ci_low": per_run["ci_low"].to_numpy(),
            "ci_high": per_run["ci_high"].to_numpy(),
            "n": per_run["n"].to_numpy(),
            "better_than": per_run["better_than_rows"].to_numpy(),
            "role": [standing.get(r, (None, None))[0] for r in per_run["run_id"]],
            "outcome": [standing.get(r, (None, None))[1] for r in per_run["run_id"]],
        }
    ).astype({**LEADERBOARD_COLUMNS, **dict.fromkeys(keys, "string")})
    return Leaderboard(name, metric, keys, table, ranking, list(missing), list(left_out))


def _cells(board: Leaderboard) -> tuple[list[str], list[list[str]]]:
    """The table as a person reads it: header and rows of text."""
    header = ["#", "rank", "group", *board.settings, board.metric, "95% CI", "better than", "role", "outcome"]
    rows = [
        [
            str(r["row"]),
            "–" if r["rank"] is pd.NA else str(r["rank"]),
            r["letters"] or "–",
            *[r[k] for k in board.settings],
            _num(r["mean"]),
            f"[{_num(r['ci_low'])}, {_num(r['ci_high'])}]",
            superscript(list(r["better_than"])) or "–",
            "–" if pd.isna(r["role"]) else r["role"],
            "–" if pd.isna(r["outcome"]) else r["outcome"],
        ]
        for r in board.table.to_dict("records")
    ]
    return header, rows


def _summary(board: Leaderboard) -> str:
    info = board.ranking.info
    n = int(board.table["n"].iloc[0]) if len(board.table) and board.table["n"].iloc[0] is not pd.NA else 0
    return (
        f"{len(board.table)} variants ranked on {board.metric} ({direction_word(board.metric)}) over "
        f"{n} queries common to all; pairwise paired tests, Holm-adjusted (α = {info['alpha']}): "
        "variants sharing a group letter are not significantly different"
    )


def render_text(board: Leaderboard) -> str:
    """The leaderboard as an aligned plain-text table, with the summary line, the variants not
    stored and the ranking's warnings."""
    header, rows = _cells(board)
    widths = [max(len(c) for c in column) for column in zip(header, *rows, strict=True)]
    line = "  ".join
    lines = [
        f"sweep {board.name}: leaderboard",
        _summary(board),
        "",
        line(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip(),
        *(line(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows),
    ]
    if board.missing:
        lines += ["", "not stored (not ranked): " + ", ".join(board.missing)]
    if board.left_out:
        lines += ["", "left out by --outcome (not ranked): " + "; ".join(board.left_out)]
    lines += [f"warning: {w}" for w in board.ranking.info.get("warnings", [])]
    return "\n".join(lines) + "\n"


def render_markdown(board: Leaderboard) -> str:
    """The leaderboard as Markdown (the Dagster UI): title, summary, the table (the swept values
    escaped, the run ids in code), the variants not stored, then the ranking's own report (its
    warnings and every pairwise test)."""
    header, rows = _cells(board)
    n = len(board.settings)
    run_ids = list(board.table["run_id"])
    # Only the swept names and values come from the config: the rest are this module's own words
    # and numbers, written as they are.
    header = [*header[:3], *(md_cell(h) for h in header[3 : 3 + n]), *header[3 + n :], "run"]
    # the role and outcome cells name user-chosen sweep names and gate names: escaped
    rows = [[*row[:-2], md_cell(row[-2]), md_cell(row[-1])] for row in rows]
    lines = [
        f"# Sweep {md_code(board.name)}: leaderboard on {md_code(board.metric)}",
        "",
        md_text(_summary(board)),
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *(
            "| "
            + " | ".join([*row[:3], *(md_cell(c) for c in row[3 : 3 + n]), *row[3 + n :]])
            + f" | {md_code(run_id, in_table=True)} |"
            for row, run_id in zip(rows, run_ids, strict=True)
        ),
        "",
    ]
    if board.missing:
        lines += [f"Not stored, not ranked: {', '.join(md_code(m) for m in board.missing)}", ""]
    if board.left_out:
        lines += [f"Left out by the outcome filter, not ranked: {md_text('; '.join(board.left_out))}", ""]
    return "\n".join(lines) + "\n" + board.ranking.markdown


def leaderboard_document(board: Leaderboard) -> dict[str, Any]:
    """The JSON document: the sweep, metric and direction, ``variants`` (the table's rows, each
    with its ``settings``), the metric's pairwise ``pairs``, ``best``, ``missing``, ``warnings``
    and the ranking's alpha, seed and queries in common."""
    info = board.ranking.info
    variants = []
    for record in json_records(board.table):
        record["settings"] = {k: record.pop(k) for k in board.settings}
        variants.append(record)
    return {
        "sweep": board.name,
        "metric": board.metric,
        "direction": direction_word(board.metric),
        "alpha": info["alpha"],
        "seed": info["seed"],
        "queries_in_common": info["n_common"],
        "best": board.best(),
        "variants": variants,
        "pairs": json_records(board.pairs()),
        "missing": board.missing,
        "left_out": board.left_out,
        "warnings": list(info.get("warnings", [])),
    }


def render_json(board: Leaderboard) -> str:
    return json_text(leaderboard_document(board))
