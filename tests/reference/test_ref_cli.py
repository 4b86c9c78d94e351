from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kebab_eval_pipeline.reference.cli import ref_app

runner = CliRunner()


@pytest.fixture
def index_dir(corpus_dir: Path, tmp_path: Path) -> Path:
    out = tmp_path / "idx"
    result = runner.invoke(ref_app, ["index", str(corpus_dir), "--out", str(out), "--chunk-size", "800"])
    assert result.exit_code == 0, result.output
    assert "indexed 6 documents into 14 chunks" in result.stdout
    return out


def test_search_json_shape(index_dir: Path) -> None:
    query = "How long should I bake the sourdough loaf?"
    result = runner.invoke(ref_app, ["search", str(index_dir), query, "--k", "2", "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["schema"] == "search_hit.v1"
    assert payload["query"] == query
    assert len(payload["hits"]) == 2
    top = payload["hits"][0]
    assert top["rank"] == 1 and top["score_kind"] == "bm25"
    assert (top["doc_path"], top["heading_path"], top["line_start"], top["line_end"]) == (
        "english/sourdough.md",
        ["Sourdough", "Baking"],
        19,
        22,
    )
    assert set(top) >= {"chunk_id", "doc_id", "snippet", "score", "lexical_rank", "index_version"}


def test_search_human_output_and_no_hits(index_dir: Path) -> None:
    result = runner.invoke(ref_app, ["search", str(index_dir), "kombucha"])
    assert result.exit_code == 0 and "kombucha.md" in result.stdout
    result = runner.invoke(ref_app, ["search", str(index_dir), "capital of France"])
    assert result.exit_code == 0 and result.stdout.strip() == "no hits"


def test_ask_json_shape(index_dir: Path) -> None:
    result = runner.invoke(ref_app, ["ask", str(index_dir), "소금물 농도는 얼마인가요?", "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert set(payload) == {"query", "mode", "answer", "hits"}
    assert payload["mode"] == "lexical"
    answer = payload["answer"]
    assert answer["refused"] is False and answer["grounded"] is True
    assert "[#1]" in answer["text"]
    assert answer["citations"][0]["chunk_id"] == payload["hits"][0]["chunk_id"]
    assert len(payload["hits"]) <= 5


def test_ask_refusal_human(index_dir: Path) -> None:
    result = runner.invoke(ref_app, ["ask", str(index_dir), "Which football team lost the sourdough cup?"])
    assert result.exit_code == 0
    assert result.stdout.startswith("refused (score_gate: ")


@pytest.mark.parametrize(
    "args",
    [
        ["search", "{missing}", "q"],
        ["ask", "{missing}", "q"],
        ["search", "{empty}", "q"],
        ["index", "{missing}", "--out", "{out}"],
        ["search", "{index}", "q", "--mode", "vector"],
        ["search", "{index}", "q", "--k", "0"],
    ],
)
def test_bad_input_exits_2_with_one_line_error(index_dir: Path, tmp_path: Path, args: list[str]) -> None:
    (tmp_path / "empty").mkdir()
    paths = {
        "missing": str(tmp_path / "missing"),
        "empty": str(tmp_path / "empty"),
        "out": str(tmp_path / "out"),
        "index": str(index_dir),
    }
    result = runner.invoke(ref_app, [a.format(**paths) for a in args])
    assert result.exit_code == 2
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    assert "Traceback" not in result.output


def test_ask_gate_feature_option(index_dir: Path) -> None:
    query = "Which football team lost the sourdough cup?"
    # the top hit covers "sourdough" only: refused by top_hit at 0.35, and its reason says which feature
    refused = runner.invoke(ref_app, ["ask", str(index_dir), query, "--gate-feature", "top_hit", "--json"])
    assert refused.exit_code == 0, refused.output
    reason = json.loads(refused.stdout)["answer"]["refusal_reason"]
    assert reason.startswith("score_gate: top hit covers ")
    union = runner.invoke(
        ref_app,
        ["ask", str(index_dir), query, "--gate-feature", "top3_union", "--gate-threshold", "1.0", "--json"],
    )
    assert json.loads(union.stdout)["answer"]["refusal_reason"].startswith(
        "score_gate: top 3 hits together cover "
    )
    bad = runner.invoke(ref_app, ["ask", str(index_dir), query, "--gate-feature", "best"])
    assert (
        bad.exit_code == 2
        and "--gate-feature: 'best' is not one of top_hit, best_of_top3, top3_union" in bad.output
    )


def test_index_prints_corpus_paths_as_text(tmp_path: Path) -> None:
    """A corpus path that reads as rich markup ("x[/b]y.md": a closing tag) is printed as written,
    never parsed (it crashed the command after the index was written)."""
    corpus = tmp_path / "corpus"
    (corpus / "x[").mkdir(parents=True)
    (corpus / "ok.md").write_text("# T\n\nhello world text here\n", encoding="utf-8")
    (corpus / "x[" / "b]y.md").write_text("", encoding="utf-8")  # no chunk: listed by its path
    result = runner.invoke(ref_app, ["index", str(corpus), "--out", str(tmp_path / "idx")])
    assert result.exit_code == 0, result.output
    assert "no chunks: x[/b]y.md" in result.output
