"""The suspect-gold queue, end to end as a user meets it: two replayed runs where the candidate finds
relevant chunks the golden set never labelled, the comparison's queue, `golden suggest`, the
reviewer's accept step, and the runs again on the new golden set — real CLI subprocesses.

The data (chunk criterion: every support names a chunk, every hit carries one; MRR cutoff 10):

* ``q-loss``: a finds the gold ``keys#rotate`` at rank 1; b returns the unlabelled
  ``keys#rotate-v2`` first, the gold at rank 2 → a loss, one suspect hit (rank 1).
* ``q-reg``: a finds ``billing#invoices`` at rank 1; b returns ``billing#archive`` and
  ``misc#2`` (neither labelled) → a regression, two suspect hits.
* ``q-judged``: b returns ``x#bad`` (a grade-0 support: judged non-relevant) above the gold →
  a loss with no suspect hit (the hit was judged).
* ``q-draw``: both find ``faq#1`` at rank 1 → a draw.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.conftest import clean_cli_env, write
from tests.test_cli import cli, no_traceback


def hit(rank: int, chunk: str, doc: str, heading: str, start: int, end: int) -> dict:
    return {
        "rank": rank,
        "chunk_id": chunk,
        "doc_id": doc,
        "doc_path": f"docs/{doc}.md",
        "heading_path": [doc.capitalize(), heading],
        "line_start": start,
        "line_end": end,
        "snippet": f"{heading}: text of {chunk}",
        "score": 1.0 / rank,
        "chunker_version": "chunks-1",
        "index_version": "idx-1",
    }


ROTATE = hit(1, "keys#rotate", "keys", "Rotate", 10, 20)
ROTATE_V2 = hit(1, "keys#rotate-v2", "keys", "Rotating keys", 40, 52)
INVOICES = hit(1, "billing#invoices", "billing", "Invoices", 1, 9)
ARCHIVE = hit(1, "billing#archive", "billing", "Archive", 30, 44)
MISC1 = hit(2, "misc#1", "misc", "Other", 1, 5)
MISC2 = hit(2, "misc#2", "misc", "Unrelated", 6, 9)
GOLD_X = hit(1, "x#gold", "x", "Gold", 1, 3)
BAD_X = hit(1, "x#bad", "x", "Bad", 4, 6)
FAQ = hit(1, "faq#1", "faq", "FAQ", 1, 2)

QUERIES = [
    {"id": "q-loss", "query": "How do I rotate an API key?", "supports": [{"chunk_id": "keys#rotate"}]},
    {"id": "q-reg", "query": "Where are old invoices kept?", "supports": [{"chunk_id": "billing#invoices"}]},
    {
        "id": "q-judged",
        "query": "What does x do?",
        "supports": [{"chunk_id": "x#gold"}, {"chunk_id": "x#bad", "grade": 0}],
    },
    {"id": "q-draw", "query": "Is there an FAQ?", "supports": [{"chunk_id": "faq#1"}]},
]


def ranked(*hits: dict) -> list[dict]:
    return [{**h, "rank": i, "score": 1.0 / i} for i, h in enumerate(hits, start=1)]


TRACES = {
    "a": {
        "q-loss": ranked(ROTATE, MISC1),
        "q-reg": ranked(INVOICES),
        "q-judged": ranked(GOLD_X),
        "q-draw": ranked(FAQ),
    },
    "b": {
        "q-loss": ranked(ROTATE_V2, ROTATE),
        "q-reg": ranked(ARCHIVE, MISC2),
        "q-judged": ranked(BAD_X, GOLD_X),
        "q-draw": ranked(FAQ),
    },
}


def write_trace(path, hits: dict[str, list[dict]]):
    rows = [{"query_id": q, "hits": h, "latency_ms": 5, "error": None} for q, h in hits.items()]
    return write(path, "".join(json.dumps(r) + "\n" for r in rows))


def run_config(folder, golden, system: str, baseline: str, **extra):
    trace = write_trace(folder / f"{system}.jsonl", TRACES[system])
    doc = {
        "golden": str(golden),
        "system": {"kind": "replay", "path": str(trace), "format": "kebab"},
        "answers": False,
        "baseline": baseline,
        "compare": {"min_judged": 0.7},
        **extra,
    }
    return write(folder / f"{system}-{baseline}.yaml", yaml.safe_dump(doc))


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    return clean_cli_env(tmp_path_factory, "suspect-cli")


@pytest.fixture(scope="module")
def stored(env, tmp_path_factory):
    """Runs ``a`` (no baseline) and ``b`` (baseline ``a``) on the original golden set."""
    folder = tmp_path_factory.mktemp("suspect-data")
    golden = write(
        folder / "golden.yaml", yaml.safe_dump({"schema_version": "1", "name": "keys", "queries": QUERIES})
    )
    outputs, configs = {}, {}
    for run_id, baseline in (("a", "none"), ("b", "a")):
        configs[run_id] = run_config(folder, golden, run_id, baseline)
        proc = cli(env, "run", "--run-id", run_id, "--config", str(configs[run_id]))
        assert proc.returncode == 0, proc.stderr
        no_traceback(proc)
        outputs[run_id] = proc.stdout
    return folder, golden, configs, outputs


def test_comparison_queues_the_unjudged_hits_above_the_first_relevant_one(env, stored):
    _, _, configs, _ = stored
    proc = cli(env, "compare", "a", "b", "--json", "--config", str(configs["b"]))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    verdicts = {q["query_id"]: q["verdict"] for q in doc["per_query"]}
    assert verdicts == {"q-loss": "loss", "q-reg": "regression", "q-judged": "loss", "q-draw": "draw"}
    queue = doc["suspect_gold"]
    # Worst first: the regression (fell from rank 1 out of the top 10: drop 10) before the loss
    # (rank 1 → 2: drop 1); a query's hits by rank. x#bad is judged (grade 0): not queued.
    assert [(r["query_id"], r["verdict"], r["hit_rank"], r["chunk_id"]) for r in queue] == [
        ("q-reg", "regression", 1, "billing#archive"),
        ("q-reg", "regression", 2, "misc#2"),
        ("q-loss", "loss", 1, "keys#rotate-v2"),
    ]
    assert [(r["a_rank"], r["b_rank"], r["rank_drop"]) for r in queue] == [
        (1, None, 10),
        (1, None, 10),
        (1, 2, 1),
    ]
    first = queue[0]
    assert first["question"] == "Where are old invoices kept?"
    assert (first["doc_id"], first["doc_path"], first["heading_path"]) == (
        "billing",
        "docs/billing.md",
        ["Billing", "Archive"],
    )
    assert (first["line_start"], first["line_end"]) == (30, 44)
    assert first["snippet"] == "Archive: text of billing#archive"
    assert first["judge_relevant"] is None and first["judge_reasoning"] is None
    assert doc["suspect_gold"] == queue and doc["suspect_gold"] is not None
    # The warning reads judged@1 (the smallest k): the top hit of b is unjudged for q-loss (rotate-v2)
    # and q-reg (archive), judged for q-judged (x#bad, grade 0) and q-draw → 0.5; a's top hits are
    # all gold → 1.0. Threshold 0.7 (compare.min_judged): b warns.
    assert doc["judged_coverage"]["b"]["k"] == 1
    assert doc["judged_coverage"]["b"]["judged"] == pytest.approx(0.5)
    assert doc["judged_coverage"]["a"]["judged"] == pytest.approx(1.0)
    warned = [w for w in doc["warnings"] if "never judged" in w]
    assert warned == [
        "50% of the top hits of run b (b) were never judged by the golden set (judged@1 0.5000 < 0.7, "
        "mean over queries): wins and losses may reflect gaps in the gold, see the suspect-gold queue"
    ]


def flat(text: str) -> str:
    return " ".join(text.split())


def test_the_run_summary_and_stored_report_show_the_queue_and_the_warning(env, stored):
    _, _, _, outputs = stored
    out = flat(outputs["b"])
    assert "warning 50% of the top hits of run b (b) were never judged by the golden set" in out
    # the run's own judged@1 line (the run_metrics summary, not only the comparison)
    assert "warning judgement coverage: 50% of the top hits of this run were never judged" in out
    report = next(line for line in outputs["b"].splitlines() if line.startswith("report:"))
    folder = Path(report.split("report:", 1)[1].strip()).parent
    markdown = (folder / "comparison.md").read_text(encoding="utf-8")
    assert "## Suspect gold (3 unjudged hits in 2 queries)" in markdown
    rows = [line for line in markdown.splitlines() if line.startswith("| q-")]
    # The UI: the comparison_report materialization's table, worst first, and the count.
    import dagster as dg

    with dg.DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
        records = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=dg.AssetKey("comparison_report"), asset_partitions=["b"]), limit=1
        ).records
        meta = records[0].asset_materialization.metadata
    assert meta["suspect_gold/hits"].value == 3
    assert [
        (r.data["query_id"], r.data["hit_rank"], r.data["rank_drop"], r.data["heading_path"])
        for r in meta["suspect_gold"].value.records
    ] == [
        ("q-reg", 1, 10, "Billing, Archive"),
        ("q-reg", 2, 10, "Misc, Unrelated"),
        ("q-loss", 1, 1, "Keys, Rotating keys"),
    ]
    # Markdown-escaped cells (md_cell): "#" and ">" render as themselves. The two replayed runs are two
    # systems, so the verdicts read as the comparison names them ("b missed", "b ranked lower").
    assert rows[-3:] == [
        r"| q-reg | b missed | 1 | – | 1 | billing\#archive | docs/billing.md:30-44 | Billing \> Archive "
        r"| Archive: text of billing\#archive | – |",
        r"| q-reg | b missed | 1 | – | 2 | misc\#2 | docs/misc.md:6-9 | Misc \> Unrelated "
        r"| Unrelated: text of misc\#2 | – |",
        r"| q-loss | b ranked lower | 1 | 2 | 1 | keys\#rotate-v2 | docs/keys.md:40-52 "
        r"| Keys \> Rotating keys | Rotating keys: text of keys\#rotate-v2 | – |",
    ]


def test_suggest_accept_and_run_again_turns_the_loss_and_regression_into_draws(env, stored):
    folder, golden, _, _ = stored
    patch = folder / "patch.yaml"
    proc = cli(env, "golden", "suggest", "b", "--out", str(patch))
    assert proc.returncode == 0, proc.stderr
    no_traceback(proc)
    assert "3 suggested supports for 2 queries (run b vs a): wrote" in flat(proc.stderr)
    text = patch.read_text(encoding="utf-8")
    assert "#   kebab-eval golden convert GOLDEN --accept THIS_FILE --to canonical --out NEW_GOLDEN" in text
    assert (
        "    # SUGGESTED (loss: a found the first relevant hit at rank 1, b rank 2); "
        "b's unjudged hit at rank 1\n"
        '    # snippet: "Rotating keys: text of keys#rotate-v2"\n'
        "    # judge: not judged\n"
        "    - chunk_id: keys#rotate-v2\n"
    ) in text
    # The patch is a canonical golden file: validate reads it as any other.
    proc = cli(env, "golden", "validate", str(patch))
    assert proc.returncode == 0, proc.stderr
    doc = yaml.safe_load(text)
    assert [(q["id"], [s["chunk_id"] for s in q["supports"]]) for q in doc["queries"]] == [
        ("q-reg", ["billing#archive", "misc#2"]),
        ("q-loss", ["keys#rotate-v2"]),
    ]
    assert doc["queries"][1]["supports"][0] == {
        "chunk_id": "keys#rotate-v2",
        "doc_id": "keys",
        "rel_path": "docs/keys.md",
        "heading_path": ["Keys", "Rotating keys"],
        "line_start": 40,
        "line_end": 52,
    }
    # The reviewer rejects misc#2 (not about invoices) and accepts the rest.
    doc["queries"][0]["supports"] = doc["queries"][0]["supports"][:1]
    reviewed = write(folder / "reviewed.yaml", yaml.safe_dump(doc, sort_keys=False))
    new_golden = folder / "golden-2.yaml"
    proc = cli(
        env,
        "golden",
        "convert",
        str(golden),
        "--accept",
        str(reviewed),
        "--to",
        "canonical",
        "--out",
        str(new_golden),
    )
    assert proc.returncode == 0, proc.stderr
    assert "accepted 2 supports into 2 queries" in flat(proc.stderr)
    merged = {q["id"]: q for q in yaml.safe_load(new_golden.read_text(encoding="utf-8"))["queries"]}
    assert [s.get("chunk_id") for s in merged["q-reg"]["supports"]] == ["billing#invoices", "billing#archive"]
    assert [s.get("chunk_id") for s in merged["q-loss"]["supports"]] == ["keys#rotate", "keys#rotate-v2"]
    assert merged["q-draw"]["supports"] == [{"chunk_id": "faq#1"}]
    # Accepting the same patch again adds nothing.
    proc = cli(env, "golden", "convert", str(new_golden), "--accept", str(reviewed), "--to", "canonical")
    assert (
        proc.returncode == 0
        and "accepted 0 supports into 0 queries (2 already in the golden set)" in flat(proc.stderr)
    )
    # Both systems again on the new golden set: the loss and the regression were gaps in the gold.
    for run_id, system, baseline in (("a2", "a", "none"), ("b2", "b", "a2")):
        proc = cli(
            env, "run", "--run-id", run_id, "--config", str(run_config(folder, new_golden, system, baseline))
        )
        assert proc.returncode == 0, proc.stderr
    proc = cli(env, "compare", "a2", "b2", "--json")
    assert proc.returncode == 0, proc.stderr
    after = json.loads(proc.stdout)
    verdicts = {q["query_id"]: (q["verdict"], q["a_rank"], q["b_rank"]) for q in after["per_query"]}
    assert verdicts == {
        "q-loss": ("draw", 1, 1),
        "q-reg": ("draw", 1, 1),
        "q-judged": ("loss", 1, 2),
        "q-draw": ("draw", 1, 1),
    }
    assert after["suspect_gold"] == []


def test_bad_input_is_exit_2_with_a_clear_message(env, stored):
    folder, golden, _, _ = stored
    proc = cli(env, "golden", "suggest", "nope")
    assert proc.returncode == 2 and "nope" in proc.stderr
    no_traceback(proc)
    proc = cli(env, "golden", "suggest", "a")
    assert proc.returncode == 2
    assert "no baseline to compare with" in flat(proc.stderr) and "pass --baseline RUN_ID" in flat(
        proc.stderr
    )
    proc = cli(env, "golden", "suggest", "b", "--only-judged-relevant")
    assert proc.returncode == 2 and "the suspect-gold queue was not judged" in flat(proc.stderr)
    broken = write(folder / "broken.yaml", "queries: [\n  - {id: q-loss\n")
    proc = cli(env, "golden", "convert", str(golden), "--accept", str(broken))
    assert proc.returncode == 2 and "broken.yaml" in proc.stderr
    no_traceback(proc)
    stranger = write(
        folder / "stranger.yaml",
        yaml.safe_dump(
            {
                "schema_version": "1",
                "queries": [{"id": "q-unknown", "query": "?", "supports": [{"chunk_id": "c"}]}],
            }
        ),
    )
    proc = cli(env, "golden", "convert", str(golden), "--accept", str(stranger))
    assert proc.returncode == 2
    assert "query 'q-unknown'" in proc.stderr and "not in the golden set" in flat(proc.stderr)
    proc = cli(env, "golden", "suggest", "b", "--out", str(folder / "patch.txt"))
    assert proc.returncode == 2 and "use .yaml or .yml" in proc.stderr


class RelevanceJudge:
    """A deterministic judge behind a real OpenAI-compatible endpoint: a passage about rotating keys
    or the invoice archive is relevant (5), anything else is not (1). Counts its calls."""

    backend = "scripted"
    model = "scripted-relevance"

    def __init__(self) -> None:
        self.calls = 0
        self.prompts: list[str] = []

    def digest(self) -> str:
        return "sha256:" + "ab" * 32

    def describe(self) -> dict:
        return {"backend": self.backend, "model": self.model, "digest": self.digest(), "pinned": True}

    def complete(self, messages, decoding):
        from kebab_eval_pipeline.judge.completion import Completion

        self.calls += 1
        self.prompts.append(messages[0]["content"])
        passage = messages[-1]["content"]
        score = 5 if ("Rotating keys" in passage or "Archive" in passage) else 1
        why = "it answers the question" if score == 5 else "it is about something else"
        return Completion(
            text=json.dumps({"score": score, "reasoning": why}),
            prompt_tokens=10,
            completion_tokens=5,
            finish_reason="stop",
            model=self.model,
            latency_ms=1.0,
        )


def test_the_judge_rates_each_suspect_hit_and_suggest_keeps_the_relevant_ones(env, stored):
    from kebab_eval_pipeline.judge.relevance import RELEVANCE_PROMPT_VERSION
    from kebab_eval_pipeline.judge.serve import create_app
    from tests.judge.servers import app_server

    folder, golden, _, _ = stored
    judge = RelevanceJudge()
    with app_server(create_app(judge)) as url:
        cache_dir = folder / "judge-cache"
        config = run_config(
            folder,
            golden,
            "b",
            "a",
            judge={
                "backend": "openai_compatible",
                "base_url": f"{url}/v1",
                "model": judge.model,
                "cache_dir": str(cache_dir),
                "prompt_version": "v1",  # the JSON prompts: a reasoning per suspect hit
            },
        )
        proc = cli(env, "compare", "a", "b", "--json", "--config", str(config))
        assert proc.returncode == 0, proc.stderr
        doc = json.loads(proc.stdout)
        assert judge.calls == 3  # one per suspect hit
        got = [
            (r["chunk_id"], r["judge_relevant"], r["judge_score"], r["judge_reasoning"])
            for r in doc["suspect_gold"]
        ]
        assert got == [
            ("billing#archive", True, 5.0, "it answers the question"),
            ("misc#2", False, 1.0, "it is about something else"),
            ("keys#rotate-v2", True, 5.0, "it answers the question"),
        ]
        judged = doc["suspect_judge"]
        assert judged["judge"]["prompt_version"] == RELEVANCE_PROMPT_VERSION
        assert judged["judge"]["model"] == judge.model and judged["judge"]["digest"] == judge.digest()
        assert (judged["model_calls"], judged["cache_hits"], judged["no_verdict"]) == (3, 0, 0)
        assert (
            doc["suspect_gold"]
            and "relevant (5/5)" in cli(env, "compare", "a", "b", "--config", str(config)).stdout
        )
        assert judge.calls == 3  # the second comparison was answered from the cache
        patch = folder / "judged-patch.yaml"
        proc = cli(
            env, "golden", "suggest", "b", "--baseline", "a", "--config", str(config),
            "--only-judged-relevant", "--out", str(patch),
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
    assert judge.calls == 3
    text = patch.read_text(encoding="utf-8")
    assert "misc#2" not in text and '# judge: relevant (5/5): "it answers the question"' in text
    doc = yaml.safe_load(text)
    assert [(q["id"], [s["chunk_id"] for s in q["supports"]]) for q in doc["queries"]] == [
        ("q-reg", ["billing#archive"]),
        ("q-loss", ["keys#rotate-v2"]),
    ]
