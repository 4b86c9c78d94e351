"""hallucination_rate through the chain: hits verified against `source_root` (SPEC §6, §11).

The reference system quotes its chunks verbatim, so over the demo corpus nothing is hallucinated.
A replayed trace with hand-made hits — true quotes, a fabricated quote, a wrong line range, a
missing file, path escapes — gives a rate computed by hand, and never reads outside the root.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from kebab_eval_pipeline.chain import pipeline
from kebab_eval_pipeline.chain.settings import settings_from_dict
from kebab_eval_pipeline.foundation.demo import DEMO_CORPUS
from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.reporting.export import export_json
from tests.conftest import write
from tests.orchestration.test_chain import materializations, run_partition

BRINE = "basics/salt-and-brine-math.md"
BRINE_LINES = (DEMO_CORPUS / BRINE).read_text(encoding="utf-8").split("\n")


def _scored(doc: dict):
    settings = settings_from_dict(doc)
    golden = pipeline.load_golden_artifact(settings)
    retrieval = pipeline.retrieve(settings, golden)
    scores = pipeline.score(settings, golden, retrieval)
    return scores, pipeline.summarize("t", settings, golden, retrieval, scores).metrics


def test_the_reference_system_never_hallucinates_over_its_own_corpus():
    scores, metrics = _scored({"baseline": "none", "source_root": str(DEMO_CORPUS)})
    verdicts = scores.info["hit_verdicts"]
    assert verdicts["verified"] == verdicts["hits"] > 500  # every demo hit quotes a snippet
    assert verdicts["ok"] == verdicts["hits"] and verdicts["hallucinated"] == 0
    assert metrics["hallucination_rate"] == 0.0
    assert int(scores.scores["verified_hits"].sum()) == verdicts["verified"]


def test_without_a_source_root_the_rate_is_null():
    scores, metrics = _scored({"baseline": "none"})
    assert metrics["hallucination_rate"] is None
    assert scores.verification is None and scores.scores["verified_hits"].isna().all()


def test_a_missing_source_root_fails_before_any_query(tmp_path):
    with pytest.raises(InputError) as info:
        _scored({"baseline": "none", "source_root": str(tmp_path / "nope")})
    assert info.value.offenders[0].field == "source_root"


def _hit(rank: int, path: str, snippet: str | None, start: int | None = None, end: int | None = None):
    hit = {"rank": rank, "chunk_id": f"c{rank}", "doc_path": path, "snippet": snippet}
    if start is not None:
        hit.update(line_start=start, line_end=end)
    return hit


def test_replayed_hits_are_verified_and_escapes_are_never_read(tmp_path):
    # Lines 13-16 of the brine chapter hold "Dry salting by weight of produce" and its paragraph.
    quote = "Two percent of\n1,500 g of cabbage is 30 g of salt."
    assert quote.split("\n")[0] in BRINE_LINES[15] and "30 g of salt" in BRINE_LINES[16]
    secret = tmp_path / "secret.txt"
    secret.write_text("the key is 42", encoding="utf-8")
    root = tmp_path / "root"
    root.mkdir()
    (root / "notes.md").write_text("alpha\nbeta gamma\n", encoding="utf-8")
    (root / "link.md").symlink_to(secret)
    hits = [
        _hit(1, BRINE, quote, 16, 17),  # ok: across two lines
        _hit(2, BRINE, "Two percent of 1,500 g …", 16, 17),  # ok: re-wrapped and cut off
        _hit(3, BRINE, "Three percent of 1,500 g of cabbage", 16, 17),  # snippet_not_found
        _hit(4, BRINE, quote, 900, 901),  # out_of_range
        _hit(5, "basics/no-such-chapter.md", quote),  # file_missing
        _hit(6, "../secret.txt", "the key is 42"),  # outside_root
        _hit(7, str(secret), "the key is 42"),  # outside_root (absolute)
        _hit(8, "link.md", "the key is 42"),  # outside_root (symlink leaving the root)
        _hit(9, BRINE, None),  # unverifiable: nothing quoted
        _hit(10, "inside.md", "beta gamma", 2, 2),  # ok: a symlink that stays inside the root
    ]
    trace = tmp_path / "trace.jsonl"
    trace.write_text(json.dumps({"query_id": "q1", "hits": hits}) + "\n", encoding="utf-8")
    golden = write(tmp_path / "gold.yaml", "- id: q1\n  query: how much salt?\n  expected_doc_ids: [x]\n")
    # The root holds a copy of the brine chapter (a symlinked folder pointing at the demo corpus
    # would itself leave the root) and a symlink inside the root that stays inside it.
    (root / "basics").mkdir()
    shutil.copy(DEMO_CORPUS / BRINE, root / BRINE)
    (root / "inside.md").symlink_to(root / "notes.md")

    opened: list[str] = []

    def audit(event: str, args: tuple) -> None:
        if event == "open" and args and isinstance(args[0], str | bytes | Path):
            opened.append(str(args[0]))

    sys.addaudithook(audit)  # cannot be removed; harmless after the test (it only appends)
    scores, metrics = _scored(
        {
            "baseline": "none",
            "golden": str(golden),
            "system": {"kind": "replay", "path": str(trace)},
            "source_root": str(root),
            "stale_golden": "off",
        }
    )
    verdicts = scores.verification.set_index("rank")["verdict"].to_dict()
    assert verdicts == {
        1: "ok",
        2: "ok",
        3: "snippet_not_found",
        4: "out_of_range",
        5: "file_missing",
        6: "outside_root",
        7: "outside_root",
        8: "outside_root",
        9: "unverifiable",
        10: "ok",
    }
    # 9 verified hits, 6 of them hallucinated.
    assert metrics["hallucination_rate"] == pytest.approx(round(6 / 9, 4))
    assert scores.scores.loc[0, "verified_hits"] == 9 and scores.scores.loc[0, "hallucinated_hits"] == 6
    assert not [p for p in opened if "secret" in p], opened


def test_verdicts_reach_the_dagster_metadata_and_the_export(instance, tmp_path):
    cfg = write(tmp_path / "eval.yaml", f"source_root: {DEMO_CORPUS}\nbaseline: none\n")
    defs, result = run_partition(instance, "verified", config=cfg)
    assert result.success
    meta = materializations(result)
    verdicts = meta["query_scores"].metadata["hit_verdicts"].value
    assert verdicts["ok"] == verdicts["hits"] > 0
    assert meta["run_metrics"].metadata["metric/hallucination_rate"].value == 0.0
    from kebab_eval_pipeline.store.runs import RunStore

    exported = export_json(RunStore(defs.resources["artifact_storage"].base), "verified")
    assert exported["metrics"]["hallucination_rate"] == 0.0
    assert {h["verification"] for q in exported["per_query"] for h in q["hits"]} == {"ok"}


def test_relative_source_root_resolves_against_the_config_file(tmp_path):
    cfg = write(tmp_path / "conf" / "eval.yaml", "source_root: ../corpus\n")
    from kebab_eval_pipeline.chain.settings import load_settings

    assert Path(load_settings(cfg).source_root) == (tmp_path / "corpus").resolve()
