"""The standalone HTML comparison report: structure and escaping on synthetic inputs, then the real
page in headless Chromium (no console or page errors, no request but the file, charts visible)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from kebab_eval_pipeline.compare.html import CHART_IDS, _bytecode_cache, render_html
from tests.browser import open_in_chromium
from tests.conftest import REPO

XSS = '<script>alert(1)</script> id="x"'  # a query id, category and version an attacker chose
KOREAN = "발효 식품"


def _per_metric() -> pd.DataFrame:
    rows = [
        # metric, a, b, n, paired_delta, p, ci_low, ci_high, test, note, sig, direction
        ("hit@1", 0.50, 0.60, 40, 0.10, 0.0312, 0.02, 0.18, "mcnemar_exact", None, "*", "better"),
        ("hit@5", 0.80, 0.78, 40, -0.02, 1.0, -0.08, 0.04, "mcnemar_exact", None, "", "worse"),
        ("mrr", 0.61, 0.70, 40, 0.09, 0.0004, 0.05, 0.13, "randomization", None, "***", "better"),
        ("recall@5", 0.70, 0.70, 40, 0.0, 1.0, 0.0, 0.0, "randomization", "no discordant pairs", "", "same"),
        ("ndcg@10", 0.66, 0.71, 40, 0.05, 0.008, 0.015, 0.085, "randomization", None, "**", "better"),
        ("refusal_correctness", 0.8, 0.6, 10, -0.2, 0.25, -0.5, 0.1, "mcnemar_exact", None, "", "worse"),
        ("error_rate", 0.0, 0.05, None, None, None, None, None, None, "no per-query test", "", "worse"),
        ("retrieval_ms_p95", 12.5, 11.0, None, None, None, None, None, None, None, "", "better"),
        ("citation_coverage", None, None, None, None, None, None, None, None, None, "", None),
    ]
    frame = pd.DataFrame(
        rows,
        columns=[
            "metric",
            "a",
            "b",
            "n_paired",
            "paired_delta",
            "p_value",
            "ci_low",
            "ci_high",
            "test",
            "test_note",
            "significance",
            "direction",
        ],
    )
    frame["delta"] = (frame["b"] - frame["a"]).round(4)
    frame["rel_change"] = ((frame["b"] - frame["a"]) / frame["a"].abs()).replace([np.inf, -np.inf], np.nan)
    return frame.astype(
        {
            "metric": "string",
            "n_paired": "Int64",
            "test": "string",
            "test_note": "string",
            "direction": "string",
            **{c: "float64" for c in ("a", "b", "paired_delta", "p_value", "ci_low", "ci_high")},
        }
    )


def _per_query() -> pd.DataFrame:
    rows = [
        (XSS, "regression", 1, None, "a found, b missed", True, None, None, KOREAN, ["x"], True),
        ("q-loss", "loss", 1, 3, "both found, b ranked lower", False, None, None, "dairy", [], True),
        ("q-win", "win", None, 2, "b found", False, "refused→answered", None, KOREAN, [], True),
        (
            "q-draw",
            "draw",
            2,
            2,
            "same rank",
            False,
            "answered→refused",
            "grounded→ungrounded",
            "dairy",
            [],
            True,
        ),
        ("q-only-b", "only_b", None, 1, "only in b", False, None, None, "dairy", [], False),
    ]
    frame = pd.DataFrame(
        rows,
        columns=[
            "query_id",
            "verdict",
            "a_rank",
            "b_rank",
            "note",
            "gold_changed",
            "refusal_flip",
            "groundedness_flip",
            "category",
            "tags",
            "answerable",
        ],
    )
    frame["difficulty"] = "easy"
    frame["lang"] = "ko"
    return frame.astype(
        {"a_rank": "Int64", "b_rank": "Int64", "refusal_flip": "string", "groundedness_flip": "string"}
    )


def _per_slice() -> pd.DataFrame:
    rows = []
    for category, base in ((KOREAN, 0.5), ("dairy", 0.7), (XSS, 0.4)):
        for i, metric in enumerate(("mrr", "hit@1", "hit@5", "recall@5", "refusal_correctness", "ndcg@10")):
            a, b = base, base + 0.05 * (i - 2)
            rows.append(("category", category, metric, a, b, round(b - a, 4), 12, 13))
    rows.append(("lang", "ko", "mrr", 0.5, 0.6, 0.1, 20, 20))
    return pd.DataFrame(
        rows, columns=["dimension", "value", "metric", "a", "b", "delta", "n_a", "n_b"]
    ).astype({"n_a": "Int64", "n_b": "Int64"})


def _info(**overrides) -> dict:
    info = {
        "run_a": "run-2024-01",
        "run_b": "run-2024-02",
        "baseline_note": "baseline 'run-2024-01': the most recent earlier run on the same golden set",
        "versions_a": {"chunker_version": "c1", "embedding_model": "minilm", "index_version": "i1"},
        "versions_b": {"chunker_version": "c2", "embedding_model": "minilm", "index_version": XSS},
        "system_a": {"kind": "reference", "mode": "lexical"},
        "system_b": {"kind": "reference", "mode": "hybrid"},
        "golden_a": {"name": "demo", "sha256": "a" * 64, "queries": 41},
        "golden_b": {"name": "demo", "sha256": "b" * 64, "queries": 41},
        "chunker_version_match": "fallback_span",
        "matching_criterion": "span",
        "fallback_note": "chunk ids differ; matched by path and line overlap",
        "verdict_counts": {
            "win": 7,
            "loss": 3,
            "regression": 2,
            "draw": 25,
            "not_scored": 0,
            "only_a": 1,
            "only_b": 1,
        },
        "flip_counts": {
            "answered→refused": 1,
            "refused→answered": 1,
            "grounded→ungrounded": 1,
            "ungrounded→grounded": 0,
        },
        "only_in_a": ["q-only-a"],
        "only_in_b": ["q-only-b"],
        "gold_changed": [{"query_id": XSS, "fields": ["supports", "must_contain"]}],
        "warnings": [
            "only 38 queries in common (< min_queries 50): differences between these runs are not conclusive",
            "fallback_span: chunker_version differs: both runs re-scored by document + line overlap",
        ],
        "min_queries": 50,
        "seed": 0,
        "created_at_a": "2024-01-05T10:00:00+00:00",
        "created_at_b": "2024-02-05T10:00:00+00:00",
    }
    return {**info, **overrides}


def _render(**overrides) -> str:
    return render_html(_info(**overrides), _per_metric(), _per_query(), _per_slice())


def _no_baseline() -> str:
    per_metric = _per_metric()
    for column in ("a", "delta", "rel_change", "paired_delta", "p_value", "ci_low", "ci_high"):
        per_metric[column] = np.nan
    per_metric["n_paired"] = pd.NA
    per_metric["direction"] = pd.NA
    per_slice = _per_slice()
    per_slice[["a", "delta"]] = np.nan
    info = _info(
        run_a=None,
        baseline_note="no baseline: first run on this golden set",
        versions_a={},
        system_a={},
        golden_a={},
        chunker_version_match=None,
        fallback_note="",
        verdict_counts={},
        flip_counts={},
        only_in_a=[],
        only_in_b=[],
        gold_changed=[],
        warnings=[],
        created_at_a=None,
    )
    return render_html(info, per_metric, _per_query().iloc[0:0], per_slice)


@pytest.fixture(scope="module")
def rendered() -> tuple[str, list[str]]:
    """The synthetic report, rendered once per module, and the warnings rendering raised."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = _render()
    return out, [str(w.message) for w in caught]


@pytest.fixture(scope="module")
def page(rendered) -> str:
    return rendered[0]


def _figure(page: str, chart_id: str) -> str:
    match = re.search(rf'<figure class="chart[^"]*" id="{chart_id}">(.*?)</figure>', page, re.S)
    assert match, chart_id
    return match.group(1)


def test_document_shell(page):
    assert page.startswith("<!DOCTYPE html>")
    assert '<html lang="en">' in page and '<meta charset="utf-8">' in page
    assert "<title>kebab-eval comparison: run-2024-02 vs run-2024-01</title>" in page
    assert "<script" not in page.replace("&lt;script", "")  # no JavaScript, and the XSS id is escaped


def test_three_inline_svg_charts(page):
    for chart_id in CHART_IDS:
        figure = _figure(page, chart_id)
        assert figure.count("<svg ") == 1 and "</svg>" in figure, chart_id
    assert page.count("<svg ") == 3
    # Ids stay unique across the page; each chart is an image named by its caption (its <title>).
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert len(ids) == len(set(ids))
    for chart_id in CHART_IDS:
        figure = _figure(page, chart_id)
        caption = re.search(r"<figcaption>(.*?)(?: <span|</figcaption>)", figure).group(1)
        assert f'<svg role="img" aria-labelledby="{chart_id}-title"' in figure
        assert f'<title id="{chart_id}-title">{caption}</title>' in figure


def test_no_external_resource(page):
    assert "http://" not in page and "https://" not in page
    assert "data:" not in page  # not even inline rasters: the charts are vector SVG
    for ref in re.findall(r'\b(?:src|href)="([^"]*)"', page):
        assert ref.startswith("#"), ref


def test_metric_rows_and_significance(page):
    metrics = re.search(r'<table class="metrics">(.*?)</table>', page, re.S).group(1)
    for name in ("hit@1", "hit@5", "mrr", "recall@5", "ndcg@10", "error_rate", "retrieval_ms_p95"):
        assert f"<th scope=row>{name}</th>" in metrics
    mrr = re.search(r"<tr><th scope=row>mrr</th>(.*?)</tr>", metrics).group(1)
    assert '<td class="sig better">***</td>' in mrr and "0.0004" in mrr and "[+0.0500, +0.1300]" in mrr
    assert '<td class="num better">+0.0900</td>' in mrr and "randomization" in mrr
    recall = re.search(r"<tr><th scope=row>recall@5</th>(.*?)</tr>", metrics).group(1)
    assert "<summary>randomization</summary>no discordant pairs</details>" in recall  # folds out, no JS
    error_rate = re.search(r"<tr><th scope=row>error_rate</th>(.*?)</tr>", metrics).group(1)
    assert "<summary>not tested</summary>no per-query test</details>" in error_rate
    assert error_rate.count(">–<") == 6  # relative (a = 0), p, adjusted p, CI, MDE, n
    # Null in both runs: named in a fold under the table, not a row of nulls.
    assert "citation_coverage" not in metrics
    assert re.search(r"1 metric null in both runs.*<code>citation_coverage</code>", page)
    # Significance marks sit beside the labels in the forest plot; untestable metrics are left out.
    deltas = _figure(page, "chart-deltas")
    assert ">mrr  ***</text>" in deltas and ">ndcg@10  **</text>" in deltas and ">hit@1  *</text>" in deltas
    assert "error_rate" not in deltas and "citation_coverage" not in deltas
    # Headline order: hit@k, mrr, recall@k, ndcg@k, then answer metrics.
    order = [
        m for m in ("hit@1", "hit@5", "mrr", "recall@5", "ndcg@10", "refusal_correctness") if m in deltas
    ]
    assert sorted(order, key=deltas.index) == order


def test_user_strings_are_escaped(page):
    assert "<script>alert(1)</script>" not in page
    escaped = "&lt;script&gt;alert(1)&lt;/script&gt; id=&quot;x&quot;"
    assert f"<code>{escaped}</code>" in page  # query id in the notable queries and the versions table
    # In the SVG too: the chart's labels are escaped by the template, as every other text.
    label = "&lt;script&gt;alert(1)&lt;/script&gt; id=&quot;x&quot;  (n=13)</text>"
    assert label in _figure(page, "chart-categories")


def test_korean_category_is_real_text(page):
    categories = _figure(page, "chart-categories")
    assert f">{KOREAN}  (n=13)</text>" in categories
    assert f"<td>{KOREAN}</td>" in page  # the notable-queries table


def test_versions_side_by_side_with_differences(page):
    versions = re.search(r'<table class="versions">(.*?)</table>', page, re.S).group(1)
    assert re.search(r'<tr class="diff"><th scope=row>chunker_version</th><td><code>c1</code>', versions)
    assert "<tr><th scope=row>embedding_model</th><td><code>minilm</code>" in versions
    assert '<tr class="diff"><th scope=row>system mode</th>' in versions


def test_warnings_box(page):
    warnings = re.search(r'<aside class="warnings"[^>]*>(.*?)</aside>', page, re.S).group(1)
    assert "min_queries 50" in warnings
    assert "fallback_span" in warnings and "re-scored by document + line overlap" in warnings
    assert warnings.count("fallback_span") == 1  # the info's warnings are the single source
    assert "1 query only in a, 1 only in b, 1 with changed gold" in warnings


def test_notable_queries_order_and_markers(page):
    table = re.search(r'<table class="queries">(.*?)</table>', page, re.S).group(1)
    verdicts = re.findall(r'<span class="badge (regression|loss|win)">', table)
    assert verdicts == ["regression", "loss", "win"]
    assert 'title="gold changed: supports, must_contain"' in table
    assert "refused→answered" in table and "q-draw" not in table


def test_notable_queries_are_capped():
    per_query = pd.concat([_per_query()] * 30, ignore_index=True)
    per_query["query_id"] = [f"q{i:03d}" for i in range(len(per_query))]
    out = render_html(_info(), _per_metric(), per_query, _per_slice(), max_query_rows=10)
    table = re.search(r'<table class="queries">(.*?)</table>', out, re.S).group(1)
    assert len(re.findall(r'<span class="badge (?:regression|loss|win)">', table)) == 10
    assert "… 80 more notable queries" in table  # 30 × (regression, loss, win) − 10


def test_flips_and_drift(page):
    flips = re.search(r'<table class="flips">(.*?)</table>', page, re.S).group(1)
    assert re.search(r"answered→refused</th><td class=num>1</td><td><code>q-draw</code>", flips)
    assert "ungrounded→grounded</th><td class=num>0</td>" in flips
    drift = re.search(r'<section id="drift">(.*?)</section>', page, re.S).group(1)
    assert "<code>q-only-a</code>" in drift and "<code>q-only-b</code>" in drift
    assert "<code>supports</code>, <code>must_contain</code>" in drift


def test_no_baseline_still_renders():
    out = _no_baseline()
    assert "no baseline: first run on this golden set" in out
    assert out.count("<svg") == 0 and out.count('class="nodata"') >= 3
    for chart_id in CHART_IDS:
        assert "No baseline" in _figure(out, chart_id)
    versions = re.search(r'<table class="versions">(.*?)</table>', out, re.S).group(1)
    assert "<th>b</th>" in versions and 'class="diff"' not in versions and "<code>c2</code>" in versions
    assert '<aside class="warnings"' not in out
    metrics = re.search(r'<table class="metrics-b">(.*?)</table>', out, re.S).group(1)
    assert "<th scope=row>mrr</th><td class=num>0.7000</td>" in metrics


def test_charts_without_data_show_a_note():
    empty_slices = _per_slice().query("dimension != 'category'")
    out = render_html(_info(verdict_counts={}), _per_metric(), _per_query(), empty_slices)
    assert "No per-category deltas" in _figure(out, "chart-categories")
    assert "No per-query verdicts" in _figure(out, "chart-verdicts")
    assert "<svg " in _figure(out, "chart-deltas")


def test_category_chart_keeps_the_largest_categories():
    rows = [("category", f"cat-{i:02d}", "mrr", 0.5, 0.6, 0.1, i, pd.NA if i == 29 else i) for i in range(30)]
    per_slice = pd.DataFrame(
        rows, columns=["dimension", "value", "metric", "a", "b", "delta", "n_a", "n_b"]
    ).astype({"n_a": "Int64", "n_b": "Int64"})
    figure = _figure(render_html(_info(), _per_metric(), _per_query(), per_slice), "chart-categories")
    assert "5 smaller categories not shown" in figure
    assert ">cat-29  (n=29)</text>" in figure  # n from a where b has none
    assert "cat-04" not in figure and ">cat-05  (n=5)</text>" in figure


def test_korean_labels_raise_no_warning(rendered):
    """Chart labels are SVG text the browser lays out in its own fonts: nothing measures Hangul
    glyphs at render time, so nothing warns of missing ones (matplotlib's bundled font had none)."""
    assert rendered[1] == []


def test_deterministic(page):
    assert _render() == page


def test_in_headless_chromium(tmp_path, page):
    path = tmp_path / "comparison.html"
    path.write_text(page, encoding="utf-8")
    with open_in_chromium(path) as visit:
        assert visit.console_errors == [] and visit.page_errors == [] and visit.failed_requests == []
        assert visit.requests == [path.resolve().as_uri()] and visit.blocked_requests == []
        for chart_id in CHART_IDS:
            box = visit.page.locator(f"#{chart_id} svg").bounding_box()
            assert box and box["width"] > 600 and box["height"] > 150, (chart_id, box)
            assert visit.page.locator(f"#{chart_id} svg").is_visible()
        # The Korean label is laid out by the browser, not missing: it has a real width.
        label = visit.page.locator("#chart-categories text", has_text=KOREAN)
        assert label.bounding_box()["width"] > 20
        shot = visit.screenshot(tmp_path / "comparison.png")
    data = shot.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 50_000
    print(f"screenshot: {shot}")


def test_headline_cards_are_the_catalogues_card_metrics_in_order(page):
    # mrr, hit@5, recall@5, ndcg@10, refusal_correctness (answer_precision is absent from this run)
    cards = re.findall(r'<div class="card"><div class="name">([^<]+)</div>', page)
    assert cards == ["mrr", "hit@5", "recall@5", "ndcg@10", "refusal_correctness"]


# A string that breaks markup wherever it lands unescaped: in text, and in a quoted attribute either way.
HOSTILE = "<b>\"x\"&'y'</b><script>alert(1)</script>"
HOSTILE_ESCAPED = "&lt;b&gt;&quot;x&quot;&amp;&#x27;y&#x27;&lt;/b&gt;&lt;script&gt;alert(1)&lt;/script&gt;"


def _hostile_report() -> str:
    """Every user-provided string of every section hostile: run ids, notes, warnings, versions,
    system and golden labels, metric and test names, test notes, significance marks, margins,
    slices, categories, per-query notes and flips, the suspect-gold queue's question, chunk,
    location, heading, snippet and judge reasoning, drift ids and fields, seed and min_queries."""
    h = HOSTILE
    per_metric = _per_metric()
    per_metric["metric"] = per_metric["metric"].astype(object)
    per_metric.loc[len(per_metric)] = per_metric.iloc[0]
    per_metric.loc[len(per_metric) - 1, "metric"] = h
    per_metric["test"] = per_metric["test"].astype(object)
    per_metric.loc[0, "test"] = h
    per_metric.loc[1, "test_note"] = h
    per_metric.loc[2, "significance"] = h
    per_query = _per_query()
    per_query["note"] = h
    per_query["category"] = h
    per_query["refusal_flip"] = pd.array([h, None, None, "answered→refused", None], dtype="string")
    per_slice = _per_slice()
    per_slice.loc[0, "dimension"] = h
    per_slice["p_value"], per_slice["p_bh"], per_slice["n_paired"] = 0.001, 0.01, 12
    info = _info(
        run_a=h + "a",
        run_b=h + "b",
        baseline_note=h,
        warnings=[h],
        versions_a={"chunker_version": h, h: "k"},
        system_a={"kind": h, "mode": h},
        golden_a={"name": h, "sha256": h, "queries": 3},
        chunker_version_match=h,
        matching_criterion=h,
        created_at_a=h,
        only_in_a=[h],
        gold_changed=[{"query_id": XSS, "fields": [h]}],  # XSS: the regression row
        flip_counts={h: 2},
        seed=h,
        min_queries=h,
        margins=[
            {
                "metric": h,
                "kind": "non_inferior",
                "margin": 0.05,
                "verdict": h,
                "passed": True,
                "bound_low": -0.01,
                "bound_high": None,
                "p_value": 0.01,
                "text": h,
            }
        ],
    )
    suspect = pd.DataFrame(
        [
            {
                "query_id": h,
                "question": h,
                "verdict": "loss",
                "a_rank": 1,
                "b_rank": 3,
                "hit_rank": 1,
                "chunk_id": h,
                "doc_path": h,
                "doc_id": "d",
                "line_start": 3,
                "line_end": 9,
                "heading_path": [h, "Y"],
                "snippet": h,
                "judge_relevant": True,
                "judge_score": 4.0,
                "judge_reasoning": h,
            }
        ]
    )
    return render_html(info, per_metric, per_query, per_slice, suspect_gold=suspect)


def test_every_user_string_is_escaped_in_every_section():
    out = _hostile_report()
    assert "<b>" not in out and "<script" not in out and "alert(1)</script>" not in out
    sections = dict(re.findall(r'<section id="([^"]+)">(.*?)</section>', out, re.S))
    header = re.search(r"<header>(.*?)</header>", out, re.S).group(1)
    warnings_box = re.search(r'<aside class="warnings"[^>]*>(.*?)</aside>', out, re.S).group(1)
    escaped = {
        "title": re.search(r"<title>(.*?)</title>", out).group(1),
        "header": header,
        "warnings": warnings_box,
        "footer": re.search(r"<footer>(.*?)</footer>", out).group(1),
        **{name: sections[name] for name in ("versions", "metrics", "margins", "slices", "queries")},
        **{name: sections[name] for name in ("suspect-gold", "flips", "drift")},
    }
    for where, text in escaped.items():
        assert HOSTILE_ESCAPED in text, where
    # In attributes too: the full sha256 on hover, the judge's reasoning and the gold-changed fields.
    assert f'<code title="{HOSTILE_ESCAPED}">' in sections["versions"]
    assert f'<span title="{HOSTILE_ESCAPED}">relevant (4/5)</span>' in sections["suspect-gold"]
    assert f'title="gold changed: {HOSTILE_ESCAPED}"' in sections["queries"]
    # The heading path's separator is markup-safe text, the parts escaped.
    assert f"<td>{HOSTILE_ESCAPED} &gt; Y</td>" in sections["suspect-gold"]
    # Per field, where it is shown (one escaped copy each, never a second escaping).
    assert f"<th scope=row>{HOSTILE_ESCAPED}</th>" in sections["metrics"]  # metric name
    assert f"<td>{HOSTILE_ESCAPED}</td></tr>" in sections["metrics"]  # test name (the row's last cell)
    assert f"<summary>mcnemar_exact</summary>{HOSTILE_ESCAPED}</details>" in sections["metrics"]  # note
    assert f'<td class="sig better">{HOSTILE_ESCAPED}</td>' in sections["metrics"]  # significance
    assert f"<th scope=row>{HOSTILE_ESCAPED}=" in sections["slices"]  # slice dimension
    assert "&amp;amp;" not in out and "&amp;lt;" not in out


def test_templates_are_package_data_the_build_ships():
    """A non-editable install has the templates only if pyproject's package-data names them."""
    import fnmatch
    import tomllib
    from pathlib import Path

    import kebab_eval_pipeline

    root = Path(kebab_eval_pipeline.__file__).parent
    templates = sorted(p for p in (root / "compare" / "templates").iterdir() if p.is_file())
    assert {p.name for p in templates} >= {
        "page.html.j2",
        "macros.html.j2",
        "comparison.html.j2",
        "report.css",
    }
    pyproject = tomllib.loads((root.parent / "pyproject.toml").read_text(encoding="utf-8"))
    globs = pyproject["tool"]["setuptools"]["package-data"]["kebab_eval_pipeline"]
    for path in templates:
        relative = path.relative_to(root).as_posix()
        assert any(fnmatch.fnmatch(relative, g) for g in globs), relative


def test_compiled_templates_are_cached_per_user_and_a_bad_cache_folder_costs_only_the_compile(tmp_path):
    """Each process renders the same report whether the compiled templates come from the cache
    (written by the first render), are compiled (nothing cached yet), or cannot be cached at all
    (the cache's place is taken by a file)."""
    script = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "from tests.compare.test_html_report import _render\n"
        "sys.stdout.write(_render())\n"
    )

    def render(tmpdir: Path) -> str:
        env = {**os.environ, "TMPDIR": str(tmpdir)}
        proc = subprocess.run(
            [sys.executable, "-c", script, str(REPO)], env=env, capture_output=True, text=True, timeout=120
        )
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    cached = tmp_path / "cached"
    cached.mkdir()
    first, second = render(cached), render(cached)
    folder = cached / f"_jinja2-cache-{os.getuid()}"
    entries = sorted(folder.glob("__jinja2_*.cache"))
    assert len(entries) == len(list((REPO / "kebab_eval_pipeline" / "compare" / "templates").glob("*.j2")))
    assert folder.stat().st_mode & 0o777 == 0o700  # this user's alone: the entries are code
    for entry in entries:  # damaged entries (the magic header kept, the code cut): compiled again
        entry.write_bytes(entry.read_bytes()[:40])
    assert render(cached) == first
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    (blocked / f"_jinja2-cache-{os.getuid()}").write_text("not a folder")
    assert first == second == render(blocked) == _render()
    # the code depends on the environment's options too: other options, other entries
    kept = {"trim_blocks": True, "finalize": _render}
    assert _bytecode_cache(kept).pattern == _bytecode_cache(dict(kept)).pattern
    assert _bytecode_cache(kept).pattern != _bytecode_cache({**kept, "trim_blocks": False}).pattern
    assert _bytecode_cache(kept).pattern != _bytecode_cache({**kept, "finalize": render}).pattern
