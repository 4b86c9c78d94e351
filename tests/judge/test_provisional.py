"""Provisional labels for one comparison: both runs' unjudged top hits pooled, labelled by the judge
(a scripted endpoint on 127.0.0.1), the headline retrieval metrics reported with and without them —
never written into the golden set. Two real runs of the demo with different chunkers, so the
comparison re-scores them under one criterion and the provisional scoring must follow it."""

from __future__ import annotations

import json

import numpy as np
import yaml

from kebab_eval_pipeline.golden.load import load_golden
from kebab_eval_pipeline.metrics.matching import judged_hits, match_hits
from kebab_eval_pipeline.store.runs import RunStore
from tests.conftest import REPO
from tests.judge.scripted import scripted_endpoint
from tests.judge.test_judge_assets import KEY_ENV, SECRET, judge_config
from tests.test_cli import cli, env, no_traceback

assert env  # the fixture, imported for this module's tests


def test_provisional_labels_fill_the_gaps_of_one_comparison(env, tmp_path):
    env = {**env, KEY_ENV: SECRET, "COLUMNS": "400"}
    with scripted_endpoint() as endpoint:
        cfg = judge_config(tmp_path / "cfg", endpoint.base_url)
        doc = yaml.safe_load(cfg.read_text())
        doc["compare"] = {"provisional_depth": 3}
        cfg.write_text(yaml.safe_dump(doc))
        for run_id, size in (("p1", "400"), ("p2", "800")):
            ran = cli(env, "run", "--config", str(cfg), "--run-id", run_id, "--chunk-size", size)
            assert ran.returncode == 0, ran.stderr
        calls = endpoint.judge.calls
        compared = cli(env, "compare", "p1", "p2", "--json", "--config", str(cfg))
        pooled_calls = endpoint.judge.calls - calls
        again = cli(env, "compare", "p1", "p2", "--config", str(cfg))
        assert endpoint.judge.calls - calls == pooled_calls  # the second time, all from the cache
    for proc in (compared, again):
        assert proc.returncode == 0, proc.stderr
        no_traceback(proc)
    report = json.loads(compared.stdout)
    record = report["provisional"]

    # the pool: every answerable query's hits at rank ≤ 3 of either run that match no support
    store = RunStore(tmp_path / "dagster_home" / "kebab-eval" / "artifacts")
    golden = store.read("golden_set", "p2")[0]
    answerable = set(golden["queries"].loc[golden["queries"]["answerable"], "query_id"])
    passages = set()
    for run_id in ("p1", "p2"):
        hits = store.read("retrieval_results", run_id)[0]["hits"]
        hits = hits[(hits["rank"] <= 3) & hits["query_id"].isin(answerable)]
        matches = match_hits(hits, golden["supports"], report["matching_criterion"])
        unjudged = hits[~judged_hits(hits, matches)]
        passages |= {
            (q, d, tuple(h) if h is not None else (), s, e)
            for q, d, h, s, e in zip(
                unjudged["query_id"],
                unjudged["doc_path"],
                unjudged["heading_path"],
                unjudged["line_start"],
                unjudged["line_end"],
                strict=True,
            )
        }
    assert record["pooled"] == len(passages) > 0
    assert record["relevant"] + record["not_relevant"] + record["no_verdict"] == record["pooled"]
    assert 0 < record["relevant"] < record["pooled"] and pooled_calls <= record["pooled"]

    # "as judged": the comparison's own deltas (same re-scoring, no extra supports)
    per_metric = {row["metric"]: row for row in report["per_metric"]}
    rows = {r["metric"]: r for r in record["metrics"]}
    assert {"mrr", "hit@5"} <= set(rows)
    for name, row in rows.items():
        assert row["delta"] == per_metric[name]["delta"], name
        assert row["rests_on_unjudged"] == (np.sign(row["delta"]) != np.sign(row["delta_provisional"]))
    # an added relevant hit can only bring the first relevant hit closer, or find one
    for name in ("mrr", "hit@1", "hit@5"):
        if name in rows:
            assert (
                rows[name]["a_provisional"] >= rows[name]["a"]
                and rows[name]["b_provisional"] >= rows[name]["b"]
            )
    assert any(rows[n]["b_provisional"] > rows[n]["b"] for n in rows)  # the labels changed something
    flagged = record["rests_on_unjudged"]
    assert flagged == [n for n, r in rows.items() if r["rests_on_unjudged"]]
    if flagged:
        assert any("rest on hits the golden set never judged" in w for w in report["warnings"])
    assert "## With provisional labels" in again.stdout

    # never into the golden set: the file is as it was
    assert len(load_golden(golden_path(store)).golden.queries) == len(golden["queries"])
    stored_sha = store.read("golden_set", "p2")[1]["sha256"]
    assert load_golden(golden_path(store)).sha256 == stored_sha


def golden_path(store):
    info = store.read("golden_set", "p2")[1]
    return info["source"] if "://" not in str(info["source"]) else info["files"][0]


def test_across_two_golden_versions_provisional_figures_keep_to_the_unchanged_queries(env, tmp_path):
    """A comparison across two golden versions is restricted to the queries whose gold did not
    change; the provisional figures are too, so their "as judged" deltas are the comparison's own."""
    env = {**env, KEY_ENV: SECRET, "COLUMNS": "400"}
    demo = yaml.safe_load((REPO / "kebab_eval_pipeline" / "data" / "demo" / "golden.yaml").read_text())
    with_gold = [q for q in demo["queries"] if q.get("supports")]
    changed, other = with_gold[0], with_gold[-1]
    # the query's gold moved to another query's document: v2 scores it against other evidence, so
    # a comparison over every query would move with the golden change alone
    changed["supports"] = [
        {k: v for k, v in s.items() if k in ("rel_path", "heading_path")} for s in other["supports"]
    ]
    second = tmp_path / "golden-v2.yaml"
    second.write_text(yaml.safe_dump(demo, allow_unicode=True))
    with scripted_endpoint() as endpoint:
        cfg = judge_config(tmp_path / "cfg", endpoint.base_url)
        doc = yaml.safe_load(cfg.read_text())
        doc["compare"] = {"provisional_depth": 3}
        cfg.write_text(yaml.safe_dump(doc))
        first = cli(env, "run", "--config", str(cfg), "--run-id", "v1", "--chunk-size", "400")
        assert first.returncode == 0, first.stderr
        again = cli(env, "run", "--config", str(cfg), "--run-id", "v2", "--golden", str(second))
        assert again.returncode == 0, again.stderr
        compared = cli(env, "compare", "v1", "v2", "--json", "--config", str(cfg))
    assert compared.returncode == 0, compared.stderr
    report = json.loads(compared.stdout)
    assert report["golden_restriction"]["n_compared"] < len(demo["queries"])
    per_metric = {row["metric"]: row for row in report["per_metric"]}
    rows = report["provisional"]["metrics"]
    assert rows
    for row in rows:  # over the same unchanged queries as the comparison, not every query
        assert row["delta"] == per_metric[row["metric"]]["delta"], row["metric"]
