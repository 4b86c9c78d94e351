"""`match: auto` explains itself and never silently zeroes, as a user sees it: `kebab-eval run` on a
replayed system whose hits carry no line ranges (as Haystack's splitter records none) against a
golden set anchored by path + heading path *and* line spans, and on one that names files by
basename (Haystack's default ``store_full_path=False``). Real subprocesses and a real Dagster run.
"""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import yaml

from kebab_eval_pipeline.store.runs import RunStore
from tests.conftest import write
from tests.orchestration.test_chain import run_partition
from tests.test_cli import cli, env, no_traceback  # noqa: F401  (env is a fixture)

QUERIES = [
    {"id": f"q{i}", "query": f"how does part {i} work?", "supports": [
        {"rel_path": f"docs/guide-{i}.md", "heading_path": ["Guide", f"Part {i}"],
         "line_start": 10, "line_end": 14},
    ]}
    for i in (1, 2, 3)
]  # fmt: skip


def flat(text: str) -> str:
    """Console output with rich's line wrapping undone."""
    return " ".join(text.split())


def trace(path_of) -> list[dict]:
    """Per query: a hit in another file, then the gold section (rank 2) — no line ranges anywhere."""
    rows = []
    for i in (1, 2, 3):
        hits = [
            {"rank": 1, "chunk_id": f"o{i}", "doc_path": path_of("docs/other.md"), "heading_path": ["Other"]},
            {
                "rank": 2,
                "chunk_id": f"g{i}",
                "doc_path": path_of(f"docs/guide-{i}.md"),
                "heading_path": ["Guide", f"Part {i}", "Details"],
            },
        ]
        rows.append({"query_id": f"q{i}", "hits": hits})
    return rows


def setup(tmp_path, path_of=lambda p: p, **extra):
    golden = write(
        tmp_path / "golden.yaml",
        yaml.safe_dump({"schema_version": "1", "name": "anchored", "queries": QUERIES}),
    )
    traces = write(tmp_path / "trace.jsonl", "".join(json.dumps(r) + "\n" for r in trace(path_of)))
    config = {
        "golden": str(golden),
        "system": {"kind": "replay", "path": str(traces), "format": "kebab"},
        "answers": False,
        "baseline": "none",
        **extra,
    }
    return write(tmp_path / "eval.yaml", yaml.safe_dump(config))


def test_hits_without_lines_are_matched_by_anchor_and_the_run_says_so(env, tmp_path):  # noqa: F811
    cfg = setup(tmp_path)
    proc = cli(env, "run", "--run-id", "nolines", "--config", str(cfg))
    assert proc.returncode == 0, proc.stderr
    no_traceback(proc)
    out = flat(proc.stdout)
    assert "match: auto → anchor (3 queries)" in out
    # Every query finds its gold section at rank 2: MRR 0.5, not 0 (span would have scored 0).
    assert "│ mrr │ 0.5000 │ 3 │" in out
    assert (
        "warning matching (lines): 6 of 6 hits carry no line range (line_start/line_end), but 3 gold "
        "supports set line spans: match: auto fell back to anchor (3 queries)" in out
    )
    report = next(line for line in proc.stdout.splitlines() if line.startswith("report:"))
    text = Path(report.split("report:", 1)[1].strip()).read_text(encoding="utf-8")
    assert "## Matching" in text and "Hits matched to the golden set by: `auto → anchor (3 queries)`." in text
    assert "> ⚠ **lines**: 6 of 6 hits carry no line range" in text
    exported = json.loads(cli(env, "export", "nolines", "--config", str(cfg)).stdout)
    assert exported["match"]["configured"] == "auto" and exported["match"]["resolved"] == "anchor"
    assert exported["match"]["by_query"] == {"anchor": 3}
    assert [w["field"] for w in exported["match"]["warnings"]] == ["lines"]
    assert {q["match_criterion"] for q in exported["per_query"]} == {"anchor"}
    assert all("match_criterion" not in q["scores"] for q in exported["per_query"])
    # Forced span: the zero it gives is announced, not silent.
    forced = setup(tmp_path / "span", match="span")
    proc = cli(env, "run", "--run-id", "forced-span", "--config", str(forced))
    assert proc.returncode == 0, proc.stderr
    out = flat(proc.stdout)
    assert "match: span (3 queries)" in out and "│ mrr │ 0.0000 │ 3 │" in out
    assert "span matching cannot match these hits: 6 of 6 hits carry no line range" in out


def basenames(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def test_basenames_warn_in_the_cli(env, tmp_path):  # noqa: F811
    cfg = setup(tmp_path, path_of=basenames)
    proc = cli(env, "run", "--run-id", "basenames", "--config", str(cfg))
    assert proc.returncode == 0, proc.stderr  # a warning, not a failure
    no_traceback(proc)
    out = flat(proc.stdout)
    assert (
        "warning matching (doc_path): no hit's doc_path matches any gold rel_path: 3 of 6 hits carry "
        "basenames (e.g. 'guide-1.md') where the golden set has relative paths (e.g. 'docs/guide-1.md')"
        in out
    )
    assert "│ mrr │ 0.0000 │ 3 │" in out


def test_basenames_fail_the_matching_coverage_check_as_a_warning(instance, tmp_path):
    # The run through Dagster: the matching_coverage check warns; the run still succeeds.
    cfg = setup(tmp_path, path_of=basenames)
    defs, result = run_partition(instance, "basenames", config=cfg)
    assert result.success
    evaluations = {
        e.event_specific_data.check_name: e.event_specific_data
        for e in result.all_events
        if e.event_type_value == "ASSET_CHECK_EVALUATION"
    }
    check = evaluations["matching_coverage"]
    assert not check.passed and check.severity == dg.AssetCheckSeverity.WARN
    warnings = check.metadata["warnings"].value
    # The hits carry no lines either (the anchor fallback), and no path names a gold file.
    assert [(w["field"], w["hits_lacking"], w["hits_total"]) for w in warnings] == [
        ("lines", 6, 6),
        ("doc_path", 6, 6),
    ]
    assert check.metadata["match"].value == "auto → anchor (3 queries)"
    assert "basenames (e.g. 'guide-1.md')" in check.description
    stored = RunStore(defs.resources["artifact_storage"].base).read("run_metrics", "basenames")[1]
    assert stored["matching_warnings"] == warnings and stored["match_resolved"] == "anchor"


def check_of(result, name: str):
    return next(
        e.event_specific_data
        for e in result.all_events
        if e.event_type_value == "ASSET_CHECK_EVALUATION" and e.event_specific_data.check_name == name
    )


def test_matching_coverage_passes_on_good_hits(instance, tmp_path):
    good = setup(tmp_path)
    rows = trace(lambda p: p)  # the same hits, now with line ranges: nothing to warn about
    for row in rows:
        for h in row["hits"]:
            h["line_start"], h["line_end"] = (10, 14) if h["chunk_id"].startswith("g") else (1, 3)
    (tmp_path / "trace.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    _, result = run_partition(instance, "good", config=good)
    assert result.success
    check = check_of(result, "matching_coverage")
    assert check.passed and check.metadata["match"].value == "auto → span (3 queries)"
    assert check.metadata["warnings"].value == []


def test_matching_coverage_fail_blocks_the_run(instance, tmp_path):
    bad = setup(tmp_path, path_of=basenames, matching_coverage="fail")
    _, result = run_partition(instance, "blocked", config=bad)
    assert not result.success
    check = check_of(result, "matching_coverage")
    assert not check.passed and check.severity == dg.AssetCheckSeverity.ERROR
