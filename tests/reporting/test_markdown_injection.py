"""Markdown injection (issue 22 item 12): user- and system-supplied strings never become markup.

A real run pair through the ``kebab-eval`` CLI with a hostile golden set (name, categories, query
ids): ``run.md``, ``comparison.md`` and the ``summary`` / ``report`` metadata Dagster renders are
parsed with markdown-it (CommonMark + GFM tables) and checked token by token.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from markdown_it.token import Token

from kebab_eval_pipeline.foundation.demo import DEMO_GOLDEN
from kebab_eval_pipeline.foundation.markdown_text import md_cell, md_code, md_text
from tests.forked_cli import run_cli

# "[/red]" is also rich markup: the CLI's own console output must print it, not crash on it.
NAME = "<script>alert(1)</script> [/red]\n# Hacked [x](http://evil)"
CATEGORIES = ("a|b|c", "<svg onload=alert(1)>", "*bold* _it_ `code` ![img](http://evil/i.png)")
QUERY_ID = "fact-001|<img/src=x>"
# What each hostile string must still read as once rendered (newlines become one space).
READABLE = (
    "<script>alert(1)</script> [/red] # Hacked [x](http://evil)",
    *CATEGORIES,
    QUERY_ID,
)
# Never in a report. (The reports' own **bold** is markup; a hostile "*bold*" must stay literal text,
# which the READABLE checks prove.)
MARKUP_TOKENS = {"html_inline", "html_block", "link_open", "image", "s_open"}
EMPHASIS = {"em_open", "strong_open"}


def _md() -> MarkdownIt:
    return MarkdownIt("commonmark").enable(["table", "strikethrough"])


def _walk(tokens: list[Token]) -> Iterator[Token]:
    for tok in tokens:
        yield tok
        yield from _walk(tok.children or [])


def _text(tokens: list[Token]) -> str:
    """The rendered text: text and code-span contents, in order."""
    return "".join(t.content for t in _walk(tokens) if t.type in ("text", "code_inline"))


def check_markdown(doc: str, allowed_headings: set[str]) -> str:
    """Parse ``doc``; assert no raw HTML, link, image or strikethrough token, only ``allowed_headings``
    (by prefix), and every table row as wide as its header. Returns the rendered text."""
    tokens = _md().parse(doc)
    types = [t.type for t in _walk(tokens)]
    assert not MARKUP_TOKENS & set(types), sorted(MARKUP_TOKENS & set(types))
    for i, tok in enumerate(tokens):
        if tok.type == "heading_open":
            heading = tokens[i + 1].content
            assert any(heading.startswith(h) for h in allowed_headings), heading
    width = None
    for tok in tokens:
        if tok.type == "thead_open":
            width = None
        elif tok.type == "tr_open":
            width = 0 if width is None else width
            cells = 0
        elif tok.type in ("th_open", "td_open"):
            cells += 1
        elif tok.type == "tr_close":
            if width == 0:
                width = cells
            assert cells == width, (cells, width)
    return _text(tokens)


# --- the helpers --------------------------------------------------------------------------------


@given(st.text(max_size=60))
@settings(max_examples=300, deadline=None)
def test_md_text_renders_back_to_itself_and_never_to_markup(s: str) -> None:
    tokens = _md().parse(md_text(s))
    assert not (MARKUP_TOKENS | EMPHASIS) & {t.type for t in _walk(tokens)}
    assert [t.type for t in tokens if t.type.endswith("_open")] in ([], ["paragraph_open"])
    # Rendered: the same text, line breaks as spaces, leading/trailing blanks trimmed (Markdown does).
    breaks = "\r\n\v\f\x1c\x1d\x1e\x85\u2028\u2029\0"
    expected = " ".join("".join(" " if c in breaks else c for c in s).split())
    got = " ".join(_text(tokens).split())
    assert got == expected


@given(st.text(max_size=40), st.text(max_size=40))
@settings(max_examples=200, deadline=None)
def test_table_cells_keep_the_column_count(a: str, b: str) -> None:
    doc = f"| x | y | z |\n|---|---|---|\n| {md_cell(a)} | {md_code(b, in_table=True)} | end |\n"
    tokens = _md().parse(doc)
    cells = [t for t in tokens if t.type == "td_open"]
    assert len(cells) == 3
    assert not (MARKUP_TOKENS | EMPHASIS) & {t.type for t in _walk(tokens)}


@pytest.mark.parametrize("s", ["a`b", "``", "`x`", " lead", "x|y", "<b>", "a\nb"])
def test_md_code_is_one_literal_span(s: str) -> None:
    tokens = _md().parse(md_code(s))
    spans = [t for t in _walk(tokens) if t.type == "code_inline"]
    assert len(spans) == 1 and spans[0].content == s.replace("\n", " ")


# --- a real run pair through the CLI -------------------------------------------------------------


@pytest.fixture(scope="module")
def hostile_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two `kebab-eval run`s (the second compared with the first) of a hostile 12-query golden set."""
    tmp = tmp_path_factory.mktemp("inject")
    demo = yaml.safe_load(DEMO_GOLDEN.read_text(encoding="utf-8"))
    queries = demo["queries"][:12]
    for i, q in enumerate(queries):
        q["category"] = CATEGORIES[i % len(CATEGORIES)]
    queries[0]["id"] = QUERY_ID
    golden = tmp / "hostile.yaml"
    golden.write_text(yaml.safe_dump({**demo, "name": NAME, "queries": queries}), encoding="utf-8")
    home = tmp / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KEBAB_EVAL_", "DAGSTER_"))}
    env |= {"DAGSTER_HOME": str(home), "KEBAB_EVAL_INDEX_CACHE": str(tmp / "cache")}
    for run_id, chunk in (("inj-1", "800"), ("inj-2", "300")):
        proc = run_cli(
            ["run", "--run-id", run_id, "--golden", str(golden), "--chunk-size", chunk], env=env, timeout=600
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "Traceback" not in proc.stderr
        assert "<script>alert(1)</script> [/red] # Hacked" in " ".join(proc.stdout.split())
    reports = next(home.rglob("reports/inj-2"))
    return reports, home


RUN_HEADINGS = {"Evaluation run", "Matching", "Metrics", "Not measured", "Gates", "By category"}
COMPARISON_HEADINGS = {
    "Comparison", "Versions", "Per-query verdicts", "Metrics (delta", "Delta by category",
    "Notable queries", "Answer flips", "Golden-set drift", "Slices that changed",
    "Non-inferiority and equivalence", "Suspect gold",
}  # fmt: skip


def test_run_md_escapes_every_hostile_string(hostile_runs) -> None:
    reports, _ = hostile_runs
    text = check_markdown((reports / "run.md").read_text(encoding="utf-8"), RUN_HEADINGS)
    assert READABLE[0] in text  # the golden set's name, readable, on its line
    for category in CATEGORIES:
        assert category in text  # the "By category" table's rows


def test_comparison_md_escapes_every_hostile_string(hostile_runs) -> None:
    reports, _ = hostile_runs
    doc = (reports / "comparison.md").read_text(encoding="utf-8")
    text = check_markdown(doc, COMPARISON_HEADINGS)
    assert "## Delta by category" in doc
    for category in CATEGORIES:
        assert category in text


def test_dagster_markdown_metadata_is_escaped(hostile_runs) -> None:
    # What the UI renders: the run_metrics summary and report, and the comparison report.
    _, home = hostile_runs
    with dg.DagsterInstance.from_config(str(home)) as instance:
        metrics = instance.get_latest_materialization_event(dg.AssetKey("run_metrics"))
        comparison = instance.get_latest_materialization_event(dg.AssetKey("comparison_report"))
    meta = metrics.asset_materialization.metadata
    summary = check_markdown(meta["summary"].value, set())
    assert READABLE[0] in summary
    check_markdown(meta["report"].value, RUN_HEADINGS)
    check_markdown(comparison.asset_materialization.metadata["report"].value, COMPARISON_HEADINGS)
