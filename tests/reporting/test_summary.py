"""The compact run summary the Dagster UI shows first on ``run_metrics`` (issue 9): real gate results
(``evaluate_gates`` on the demo run's metrics and breakdowns, as the asset calls it) beside the
headline metrics, and the Markdown parsed the way a renderer does — so the UI shows a table."""

from __future__ import annotations

import pytest
from markdown_it import MarkdownIt

from kebab_eval_pipeline.chain import pipeline
from kebab_eval_pipeline.chain.settings import settings_from_dict
from kebab_eval_pipeline.gates.evaluate import check_gate_names, evaluate_gates
from kebab_eval_pipeline.reporting.summary import gate_tally, render_run_summary
from tests.reporting.conftest import RUN_ID

# Bounds far from the demo's values (MRR 0.6985, hit@1 0.5543, hit@5 0.913, nDCG@10 0.736, MRR over
# the Korean queries 0.6632, recall@10 0.9493), so each gate's outcome is what its comment says.
GATES = {
    "mrr": {"min": 0.3},  # blocking, passes
    "hit@5": {"min": 0.99, "blocking": False},  # non-blocking, fails: a warning
    "hit@1": {"min": 0.9},  # blocking, fails
    "mrr[lang=ko]": {"min": 0.4},  # a slice: its own row
    "recall@10": {"min": 0.5},  # not a headline metric: its own row
    "hallucination_rate": {"max": 0.05, "skip_if_null": True},  # null: no source_root
    "ndcg@10": {"min": 0.5, "max": 0.6},  # two bounds on one metric
    "error_rate": {"max": 0},
}
# The gate cell of each headline metric; the WFGY answer gates (non-blocking) come by default.
GATE_CELLS = {
    "hit@1": "≥0.9 FAIL",
    "hit@5": "≥0.99 warn",
    "mrr": "≥0.3 pass",
    "ndcg@10": "≥0.5 pass; ≤0.6 FAIL",
    "over_refusal_rate": "≤0.1 warn",
    "under_refusal_rate": "≤0.05 warn",
    "answer_precision": "≥0.8 warn",
    "chr": "≥0.75 warn",
    "hallucination_rate": "≤0.05 skipped",
    "error_rate": "≤0 pass",
}
# every headline metric the demo has a value for: all 14 but the judge's (the demo is not judged)
HEADLINE = [m for m in pipeline.HEADLINE if not m.startswith("judge_")]


def table_rows(markdown: str) -> list[list[str]]:
    """The rows (header first) of the one table in ``markdown``, as a CommonMark + GFM-tables
    renderer parses them: each row is its cells' text."""
    tokens = MarkdownIt("commonmark").enable("table").parse(markdown)
    assert [t.type for t in tokens].count("table_open") == 1
    rows: list[list[str]] = []
    cell = False
    for token in tokens:
        if token.type == "tr_open":
            rows.append([])
        elif token.type in ("th_open", "td_open"):
            rows[-1].append("")
            cell = True
        elif token.type in ("th_close", "td_close"):
            cell = False
        elif token.type == "inline" and cell:
            rows[-1][-1] = "".join(child.content for child in token.children or [])  # as displayed
    return rows


@pytest.fixture(scope="module")
def run(demo_run):
    """The demo run's summary inputs, with the gate results exactly as ``run_metrics`` builds them."""
    settings = settings_from_dict({"gates": GATES})
    check_gate_names(settings)  # the config is one a user could run
    art = demo_run.metrics
    gates = [g.as_dict() for g in evaluate_gates(settings, art.metrics, art.breakdowns)]
    headline = pipeline.headline(art.metrics, settings.k)
    return art, headline, gates


def test_the_demo_values_keep_the_gates_where_the_comments_say(run):
    art, _, _ = run
    m = art.metrics
    assert m["mrr"] > 0.4 and m["hit@5"] < 0.95 and m["hit@1"] < 0.8 and m["ndcg@10"] > 0.65
    assert m["hallucination_rate"] is None and m["error_rate"] == 0.0 and m["recall@10"] > 0.6
    assert m["answer_precision"] < 0.7 and m["chr"] < 0.72
    assert m["under_refusal_rate"] > 0.1 and m["over_refusal_rate"] > 0.15


def test_summary_table_has_one_row_per_headline_metric_then_the_other_gates(run):
    art, headline, gates = run
    assert list(headline) == HEADLINE
    markdown = render_run_summary(RUN_ID, art.info, headline, art.denominators, gates)
    rows = table_rows(markdown)
    assert rows[0] == ["metric", "value", "n", "gate"]
    body = rows[1:]
    assert [r[0] for r in body] == [*HEADLINE, "mrr[lang=ko]", "recall@10"]
    assert all(len(r) == 4 for r in body)

    for metric, value, n, gate in body[: len(HEADLINE)]:
        expected = art.metrics[metric]
        assert value == ("null" if expected is None else f"{expected:.4f}"), metric
        assert n == str(art.denominators[metric]), metric
        assert gate == GATE_CELLS.get(metric, ""), metric
    by_metric = {r[0]: r[1:] for r in body}
    assert by_metric["mrr"] == [f"{art.metrics['mrr']:.4f}", str(art.denominators["mrr"]), "≥0.3 pass"]
    assert by_metric["hit@5"][0] == f"{art.metrics['hit@5']:.4f}" and len(by_metric["hit@5"][0]) == 6
    assert by_metric["error_rate"][0] == "0.0000"
    assert by_metric["hallucination_rate"] == ["null", "0", "≤0.05 skipped"]  # null value: n = 0

    b = art.breakdowns
    ko = b[(b["dimension"] == "lang") & (b["value"] == "ko") & (b["metric"] == "mrr")]["score"].iloc[0]
    assert by_metric["mrr[lang=ko]"] == [f"{ko:.4f}", "", "≥0.4 pass"]
    assert by_metric["recall@10"] == [f"{art.metrics['recall@10']:.4f}", "", "≥0.5 pass"]

    # the words every CI output counts checks in: 13 gates and the system-health verdict
    assert markdown.endswith(
        "\n\nChecks: 14 checks (13 gates + system health): 6 passed · 2 failed · 5 warned · 1 skipped\n"
    )


def test_summary_header_names_the_run_system_golden_set_and_versions(run):
    art, headline, gates = run
    markdown = render_run_summary(RUN_ID, art.info, headline, art.denominators, gates)
    lines = markdown.splitlines()
    assert lines[0] == f"**`{RUN_ID}`** · reference (lexical)"
    golden = art.info["golden"]
    sha = golden["sha256"][:12]
    assert lines[2] == f"golden **{golden['name']}** · {golden['queries']} queries · `{sha}`"
    assert lines[4] == "role **manual**"  # summarized without run tags: made by hand
    sweep = {**art.info, "role": {"role": "sweep-variant", "source": "its run id", "sweep": "sizes"}}
    assert render_run_summary(RUN_ID, sweep, headline, {}, []).splitlines()[4] == (
        "role **sweep-variant (sizes)**"
    )
    versions = art.info["versions"]
    assert lines[6:10] == [
        f"chunker `{versions['chunker_version']}`  ",
        "embedding_model `none`  ",  # the lexical reference system embeds nothing
        f"prompt_template `{versions['prompt_template_version']}`  ",
        f"index `{versions['index_version']}`  ",
    ]
    html = MarkdownIt("commonmark").enable("table").render(markdown)
    assert f"<code>{versions['chunker_version']}</code><br />" in html  # one fact per line in the UI


def test_gate_tally_counts_each_outcome(run):
    _, _, gates = run
    assert gate_tally(gates) == {"passed": 5, "failed": 2, "warned": 5, "skipped": 1}
    assert gate_tally([]) == {"passed": 0, "failed": 0, "warned": 0, "skipped": 0}
    failing_null = evaluate_gates(
        settings_from_dict({"gates": {"hallucination_rate": {"max": 0.1}}, "default_gates": False}),
        {"hallucination_rate": None},
    )
    assert gate_tally([g.as_dict() for g in failing_null]) == {
        "passed": 0,
        "failed": 1,
        "warned": 0,
        "skipped": 0,
    }


def test_without_gates_the_gate_column_is_empty_and_there_is_no_tally(run):
    art, headline, _ = run
    info = {**art.info, "system": {**art.info["system"], "mode": None}}
    values = {**headline, "mrr": float("nan"), "chr": None}
    denominators = {k: v for k, v in art.denominators.items() if k != "hit@1"}
    markdown = render_run_summary(RUN_ID, info, values, denominators, [])
    assert markdown.splitlines()[0] == f"**`{RUN_ID}`** · reference (default mode)"
    rows = {r[0]: r[1:] for r in table_rows(markdown)[1:]}
    assert list(rows) == HEADLINE and all(r[2] == "" for r in rows.values())
    assert rows["mrr"][0] == "null" and rows["chr"][0] == "null"
    assert rows["hit@1"][1] == ""  # no denominator known
    assert "Gates:" not in markdown


def test_a_pipe_in_a_slice_value_stays_inside_its_cell(run):
    """``mrr[tag=a|b]`` is a valid gate key (a tag may hold '|'): unescaped, its '|' split the
    row — the value landed in the n column and the gate's bound was lost."""
    art, headline, _ = run
    settings = settings_from_dict({"gates": {"mrr[tag=a|b]": {"min": 0.1}}, "default_gates": False})
    check_gate_names(settings)
    gates = [g.as_dict() for g in evaluate_gates(settings, art.metrics, art.breakdowns)]
    rows = table_rows(render_run_summary(RUN_ID, art.info, headline, art.denominators, gates))
    assert rows[-1] == ["mrr[tag=a|b]", "null", "", "≥0.1 FAIL"]  # no query has the tag: null, fails
    assert all(len(r) == 4 for r in rows)


def test_summary_says_which_criterion_matched_and_why_it_may_score_zero(run):
    art, headline, gates = run
    lines = render_run_summary(RUN_ID, art.info, headline, art.denominators, gates).splitlines()
    n = len(pipeline.load_golden_artifact(settings_from_dict({})).queries)
    # The demo anchors by path + heading path and its hits carry heading paths: auto → anchor.
    assert art.info["match_by_query"] == {"anchor": 92} and n > 92  # unanswerable queries: no supports
    assert lines[10] == "match `auto → anchor (92 queries)`  "
    warned = {
        **art.info,
        "matching_warnings": [
            {"field": "doc_path", "message": "no hit's doc_path matches any gold rel_path"}
        ],
    }
    lines = render_run_summary(RUN_ID, warned, headline, art.denominators, gates).splitlines()
    assert lines[11] == "⚠ matching (doc_path): no hit's doc_path matches any gold rel_path  "
    # A run stored before the criterion was recorded shows no match line.
    old = {k: v for k, v in art.info.items() if k != "match_by_query"}
    assert not any(
        line.startswith("match ") for line in render_run_summary(RUN_ID, old, headline, {}, []).splitlines()
    )


# The Dagster UI shows a Markdown metadata entry inline only below this many characters; above it,
# a "[Show Markdown]" button hides the table (dagster-webserver's MetadataEntry).
UI_INLINE_LIMIT = 1000


def test_the_summary_stays_inline_in_the_ui_and_says_what_was_not_measured(demo_run):
    # the UI test's gates (tests/ui): two of the user's and the default answer gates
    settings = settings_from_dict({"gates": {"mrr": {"min": 0.3}, "hit@1": {"min": 0.99, "blocking": False}}})
    art = demo_run.metrics
    gates = [g.as_dict() for g in evaluate_gates(settings, art.metrics, art.breakdowns)]
    headline = pipeline.headline(art.metrics, settings.k)
    markdown = render_run_summary(RUN_ID, art.info, headline, art.denominators, gates)
    assert len(markdown) < UI_INLINE_LIMIT, len(markdown)
    # the reference system counts no tokens: not in the table, so only counted here
    assert art.info["not_measured"].keys() >= {"system_prompt_tokens", "system_completion_tokens"}
    assert "not measured: 2 more (see report)  " in markdown.splitlines()

    # a headline metric the run cannot measure: "not measured" in its cell, and why above the table
    reason = "OpenInference traces carry no citations"
    info = {**art.info, "not_measured": {"chr": reason, "citation_coverage": reason}}
    markdown = render_run_summary(RUN_ID, info, headline, art.denominators, gates)
    assert f"not measured ({reason}): chr  " in markdown.splitlines()
    assert "not measured: 1 more (see report)  " in markdown.splitlines()
    assert dict((r[0], r[1]) for r in table_rows(markdown)[1:])["chr"] == "not measured"
    assert len(markdown) < UI_INLINE_LIMIT, len(markdown)
