"""The leaderboard of a sweep: the ranking's rows in its order with each variant's swept settings,
on hand-made per-query scores whose means are worked out by hand."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from kebab_eval_pipeline.compare.ranking import rank_scores
from kebab_eval_pipeline.compare.ranking_report import render_markdown as render_ranking
from kebab_eval_pipeline.sweep.grid import expand
from kebab_eval_pipeline.sweep.leaderboard import (
    LEADERBOARD_COLUMNS,
    build_leaderboard,
    render_json,
    render_markdown,
    render_text,
)

# Reciprocal ranks of four queries; means by hand: 0.625, 1.0, 0.125.
KEY = "system.chunk_size"
MRR = {200: [1.0, 0.5, 1.0, 0.0], 400: [1.0, 1.0, 1.0, 1.0], 800: [0.0, 0.0, 0.5, 0.0]}


@pytest.fixture(scope="module")
def board():
    variants = expand("sizes", {"system.chunk_size": [200, 400, 800], "answers": [False]})
    scores = {
        v.run_id: pd.DataFrame(
            {"query_id": ["q1", "q2", "q3", "q4"], "mrr": MRR[v.overrides["system.chunk_size"]]}
        )
        for v in variants
    }
    ranking = rank_scores(scores, ["mrr"], n_resamples=200)
    ranking.markdown = render_ranking(ranking)
    standing = {
        v.run_id: ("sweep-variant (sizes)", "failed (gate_mrr_min)" if i == 2 else "passed")
        for i, v in enumerate(variants)
    }
    board = build_leaderboard(
        "sizes", "mrr", ranking, variants, missing=["gone-123456"], standing=standing,
        left_out=["big-123456: failed (system_health)"],
    )  # fmt: skip
    return board, variants


def test_rows_in_rank_order_with_settings_columns(board):
    board, variants = board
    table = board.table
    assert list(table.columns) == [
        "row", "rank", "letters", "variant", "run_id", "system.chunk_size", "answers",
        "mean", "ci_low", "ci_high", "n", "better_than", "role", "outcome",
    ]  # fmt: skip
    assert {c: str(table[c].dtype) for c in LEADERBOARD_COLUMNS} == LEADERBOARD_COLUMNS
    assert list(table["system.chunk_size"]) == ["400", "200", "800"] and set(table["answers"]) == {"false"}
    assert list(table["run_id"]) == [variants[1].run_id, variants[0].run_id, variants[2].run_id]
    assert list(table["mean"]) == [1.0, 0.625, 0.125] and list(table["rank"]) == [1, 2, 3]
    assert list(table["n"]) == [4, 4, 4]
    assert set(table["role"]) == {"sweep-variant (sizes)"}
    assert list(table["outcome"]) == ["passed", "passed", "failed (gate_mrr_min)"]  # 800 ranks last
    # Four queries: no pair is significant, so one group and nobody better than anybody.
    assert list(table["letters"]) == ["a", "a", "a"] and [list(b) for b in table["better_than"]] == [
        [],
        [],
        [],
    ]
    assert board.best() == [variants[1].slug]
    assert len(board.pairs()) == 3 and set(board.pairs()["metric"]) == {"mrr"}


def test_text_markdown_and_json(board):
    board, variants = board
    lines = render_text(board).splitlines()
    assert lines[0] == "sweep sizes: leaderboard"
    assert lines[1].startswith("3 variants ranked on mrr (higher is better) over 4 queries common to all")
    assert lines[3].split() == ["#", "rank", "group", "system.chunk_size", "answers", "mrr", "95%", "CI",
                                "better", "than", "role", "outcome"]  # fmt: skip
    assert lines[4].split()[:6] == ["1", "1", "a", "400", "false", "1.0000"]
    assert lines[4].split()[-3:] == ["sweep-variant", "(sizes)", "passed"]
    assert lines[6].split()[:6] == ["3", "3", "a", "800", "false", "0.1250"]
    assert lines[6].split()[-2:] == ["failed", "(gate_mrr_min)"]
    assert lines[8] == "not stored (not ranked): gone-123456"
    assert lines[10] == "left out by --outcome (not ranked): big-123456: failed (system_health)"

    md = render_markdown(board)
    assert md.startswith("# Sweep `sizes`: leaderboard on `mrr`\n")
    assert "| 2 | 2 | a | 200 | false | 0.6250 | " in md and f"`{variants[0].run_id}` |" in md
    assert "| – | sweep-variant (sizes) | failed (gate_mrr_min) | " in md
    assert "Not stored, not ranked: `gone-123456`" in md and "# Ranking of 3 runs" in md

    doc = json.loads(render_json(board))
    assert doc["best"] == [variants[1].slug] and doc["missing"] == ["gone-123456"]
    assert [(v["role"], v["outcome"]) for v in doc["variants"]][2] == (
        "sweep-variant (sizes)",
        "failed (gate_mrr_min)",
    )
    assert doc["left_out"] == ["big-123456: failed (system_health)"]
    assert [v["settings"] for v in doc["variants"]] == [
        {"system.chunk_size": "400", "answers": "false"},
        {"system.chunk_size": "200", "answers": "false"},
        {"system.chunk_size": "800", "answers": "false"},
    ]
    assert [v["mean"] for v in doc["variants"]] == [1.0, 0.625, 0.125]
    assert [(p["run_a"], p["run_b"]) for p in doc["pairs"]] == [
        (variants[0].run_id, variants[1].run_id),
        (variants[0].run_id, variants[2].run_id),
        (variants[1].run_id, variants[2].run_id),
    ]


def test_a_run_that_is_no_variant_is_refused(board):
    board, variants = board
    with pytest.raises(ValueError, match="not variants of sweep 'sizes'"):
        build_leaderboard("sizes", "mrr", board.ranking, variants[:2])
