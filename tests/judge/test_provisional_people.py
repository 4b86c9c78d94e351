"""People's relevance labels on a comparison's pooled unjudged hits: labelled by hand with
``kebab-eval judge label --criterion relevance`` (a real subprocess, typed input), then the
comparison's provisional metrics corrected by them (prediction-powered, over queries) — re-derived
here from the per-query scores with the reference PPI implementation (ppi_py) where it is installed,
and the interval's coverage of the truth simulated over 1,000 synthetic comparisons."""

from __future__ import annotations

import importlib.util
import json
import shlex

import numpy as np
import pandas as pd
import pytest
import yaml
from statsmodels.stats.inter_rater import cohens_kappa

from kebab_eval_pipeline.compare.fallback import plan_matching
from kebab_eval_pipeline.compare.provisional import provisional_scores, provisional_supports
from kebab_eval_pipeline.compare.provisional_corrected import corrected_mean
from kebab_eval_pipeline.compare.provisional_sample import people_sample
from kebab_eval_pipeline.judge.labels import read_labels, reference_labels
from kebab_eval_pipeline.judge.relevance import RelevanceInput
from kebab_eval_pipeline.store.runs import RunStore
from tests import docs_pages
from tests.conftest import extra_or_skip
from tests.judge.scripted import scripted_endpoint
from tests.judge.test_calibration import label_session
from tests.judge.test_judge_assets import KEY_ENV, SECRET, judge_config, key
from tests.test_cli import cli, env, no_traceback

assert env and key  # the fixtures, imported for this module's tests

DEPTH, QUERIES = 10, 30  # the guide's command: the default depth, 30 queries
TRUE_DELTA = 0.6 - 0.5  # the coverage simulation's hit@1 of b and a


def person_label(hit_input: str, gold_docs: set[str]) -> int:
    """The test's labeller: a passage from a document the golden set cites for the query is
    relevant (4), any other is not (1) — a rule of its own, not the scripted judge's."""
    return 4 if RelevanceInput.from_json(hit_input).doc_path in gold_docs else 1


def test_people_label_pooled_hits_and_the_comparison_corrects_its_provisional_metrics(
    env, tmp_path, monkeypatch
):
    env = {**env, KEY_ENV: SECRET, "COLUMNS": "400"}
    labels = tmp_path / "labels" / "relevance.jsonl"
    with scripted_endpoint() as endpoint:
        cfg = judge_config(tmp_path / "cfg", endpoint.base_url)
        doc = yaml.safe_load(cfg.read_text())
        doc["compare"] = {"provisional_depth": DEPTH}
        doc["judge"]["calibration"] = {"labels": "../labels/relevance.jsonl"}  # relative to the config
        cfg.write_text(yaml.safe_dump(doc))
        for run_id, size in (("p1", "400"), ("p2", "800")):
            ran = cli(env, "run", "--config", str(cfg), "--run-id", run_id, "--chunk-size", size)
            assert ran.returncode == 0, ran.stderr
            # the scripted judge answers some items in prose: `kebab-eval run` says so
            assert "warning judge: " in ran.stdout and "judge replies did not parse" in ran.stdout

        store = RunStore(tmp_path / "dagster_home" / "kebab-eval" / "artifacts")
        a, b = store.stored_run("p1"), store.stored_run("p2")
        criterion = plan_matching(a, b).criterion
        sample = people_sample((a, b), DEPTH, criterion, 600, seed=0, limit=QUERIES)
        assert sample["query_id"].nunique() == QUERIES
        supports = b.golden.supports
        gold_docs = supports.groupby("query_id")["rel_path"].agg(lambda s: set(s.dropna().astype(str)))
        wanted = [
            person_label(i, gold_docs.get(q, set()))
            for q, i in zip(sample["query_id"], sample["judge_input"], strict=True)
        ]
        assert 1 in wanted and 4 in wanted  # both verdicts among the labels

        # the guide's command as written, in a folder of its own (its labels file relative to it)
        block = docs_pages.snippet("bash", "kebab-eval judge label p2 --against p1")
        line = shlex.split(block.text.strip())[1:]
        # a typo first (asked again), the first hit's label, then stop: its query is not labelled whole
        assert sample["query_id"].iloc[0] == sample["query_id"].iloc[1]  # a query of several hits
        session = label_session(env, line, f"maybe\n{wanted[0]}\nq\n", tmp_path)
        partial = cli(env, "compare", "p1", "p2", "--json", "--config", str(cfg))
        assert partial.returncode == 0, partial.stderr
        record = json.loads(partial.stdout)["provisional"]
        assert "people" not in record and record["people_note"].startswith(
            "people labelled 1 pooled hit(s), but no query has all its pooled hits labelled"
        )
        # resumed: every other hit's label; end of input ends the session
        rest = label_session(env, line, "".join(f"{w}\n" for w in wanted[1:]), tmp_path)
        assert rest.returncode == 0 and f"{len(sample) - 1} of the {len(sample)} pooled hit(s)" in rest.stdout
        assert session.returncode == 0, session.stderr
        no_traceback(session)
        assert "'maybe' is not a score" in session.stdout
        assert (
            "labelling relevance of run p2 and p1 into labels/relevance.jsonl: "
            f"{len(sample)} of the {len(sample)} pooled hit(s) of a sample of {QUERIES} quer(ies) "
            "(seed 0; 0 already labelled by ana)"
        ) in session.stdout
        assert session.stdout.rstrip().endswith(
            f"labelled 1, skipped 0, left {len(sample) - 1}: written to labels/relevance.jsonl"
        )
        first = RelevanceInput.from_json(sample["judge_input"].iloc[0])
        assert (
            f"QUESTION: {first.question}" in session.stdout
            and "4 = it holds most of the answer" in session.stdout
        )
        written = read_labels(labels)
        assert list(written["item_hash"]) == list(sample["item_hash"])
        assert list(written["label"]) == wanted and set(written["criterion"]) == {"relevance"}
        # resumed: nothing left to show
        again = label_session(env, line, "", tmp_path)
        assert again.returncode == 0 and f"0 of the {len(sample)} pooled hit(s)" in again.stdout

        compared = cli(env, "compare", "p1", "p2", "--json", "--config", str(cfg))
    assert compared.returncode == 0, compared.stderr
    no_traceback(compared)
    report = json.loads(compared.stdout)
    record = report["provisional"]
    people = record["people"]
    assert people["labelled_queries"] == QUERIES and people["labelled_hits"] == len(sample)
    assert people["relevant_by_people"] == wanted.count(4)
    assert people["note"].startswith(f"only {QUERIES} labelled queries")

    # Re-derived: the judge's provisional supports (from the comparison's pool, judged again
    # through the cache) and the people's, each run re-scored per query, then PPI by hand.
    from kebab_eval_pipeline.chain.pipeline import suspect_judge
    from kebab_eval_pipeline.chain.settings import load_settings
    from kebab_eval_pipeline.compare.provisional import pooled_unjudged

    monkeypatch.setenv(KEY_ENV, SECRET)
    with scripted_endpoint() as endpoint:
        settings = load_settings(cfg)
        settings = settings.model_copy(
            update={"judge": settings.judge.model_copy(update={"base_url": endpoint.base_url})}
        )
        judged, _ = suspect_judge(settings, store)(pooled_unjudged((a, b), DEPTH, criterion))
    refs = reference_labels(written).set_index("item_hash")["label"]
    person = judged["item_hash"].map(refs)
    labelled = set(judged.loc[person.notna(), "query_id"]) - set(judged.loc[person.isna(), "query_id"])
    assert labelled == set(sample["query_id"])
    # the relevance judge against people (statsmodels' κ), on the hits both gave a verdict
    both = person.notna() & judged["judge_relevant"].notna()
    truth, said = (person[both] >= 3).astype(int), judged["judge_relevant"][both].astype(int)
    table = np.array([[((truth == i) & (said == j)).sum() for j in (0, 1)] for i in (0, 1)])
    agreed = people["agreement"]
    assert agreed["n"] == int(both.sum()) and agreed["confusion"] == table.tolist()
    assert people["judge_agrees"] == int(np.trace(table))
    if agreed["kappa"] is not None:
        assert agreed["kappa"] == pytest.approx(cohens_kappa(table, return_results=False))
        assert agreed["ci_low"] <= agreed["kappa"] <= agreed["ci_high"]
    as_people = judged.assign(judge_relevant=person >= 3)[judged["query_id"].isin(labelled)]
    f = [provisional_scores(r, provisional_supports(judged), criterion) for r in (a, b)]
    y = [provisional_scores(r, provisional_supports(as_people), criterion) for r in (a, b)]
    pooled = set(judged["query_id"])
    rows = {r["metric"]: r for r in record["metrics"]}
    checked = 0
    for name, row in rows.items():
        fa, fb, ya, yb = (s.set_index("query_id")[name].astype(float).dropna() for s in (*f, *y))
        fd, yd = (fb - fa).dropna(), (yb - ya).dropna()
        expected = _by_hand(fd, yd, pooled, labelled)
        got = row["corrected"]["delta"]
        assert got["estimate"] == pytest.approx(expected[0], abs=1e-9), name
        assert (got["ci_low"], got["ci_high"]) == (
            pytest.approx(expected[1], abs=1e-9),
            pytest.approx(expected[2], abs=1e-9),
        ), name
        checked += 1
    assert checked == len(rows) >= 4
    assert any(
        r["corrected"]["delta"]["ci_low"] < r["corrected"]["delta"]["ci_high"] for r in rows.values()
    ), (
        people,
        {n: r["corrected"] for n, r in rows.items()},
    )
    text = cli(env, "compare", "p1", "p2", "--config", str(cfg))
    assert text.returncode == 0, text.stderr
    assert "Δ corrected by people's labels" in text.stdout
    assert f"People labelled every pooled hit of {QUERIES} of the {len(pooled)} queries" in text.stdout


def _by_hand(f: pd.Series, y: pd.Series, pooled: set, labelled: set) -> tuple[float, float, float]:
    """The corrected mean by its formula: queries without a pooled hit exact, the pooled ones' mean
    by PPI++ (ppi_py where installed, else the package's own, which test_ppi.py checks against it)."""
    exact = f[~f.index.isin(list(pooled))]
    inner = f[f.index.isin(list(pooled))]
    lab = [q for q in inner.index if q in labelled and q in y.index]
    unl = [q for q in inner.index if q not in set(lab)]
    yl, fl, fu = y.reindex(lab).to_numpy(), inner.reindex(lab).to_numpy(), inner.reindex(unl).to_numpy()
    if importlib.util.find_spec("ppi_py") is not None:
        import ppi_py

        # ppi_py's tuned λ divides by the judge's variance: none (a metric no label moved) is λ = 0
        lam = 0.0 if np.var(np.concatenate([fl, fu])) == 0 else None
        theta = float(np.squeeze(ppi_py.ppi_mean_pointestimate(yl, fl, fu, lam=lam)))
        _, high = (float(np.squeeze(v)) for v in ppi_py.ppi_mean_ci(yl, fl, fu, alpha=0.05, lam=lam))
    else:
        from kebab_eval_pipeline.judge.ppi import ppi_mean

        p = ppi_mean(yl, fl, fu)
        theta, high = p.estimate, p.ci_high
    n, n0, n1 = len(f), len(exact), len(inner)
    # two strata: the queries without a pooled hit (their mean's sampling error) and the pooled (PPI)
    se0 = exact.std(ddof=1) / np.sqrt(n0) if n0 > 1 else 0.0  # one such query: no spread to measure
    se1 = (high - theta) / 1.959963984540054
    estimate = (exact.sum() + n1 * theta) / n
    half = 1.959963984540054 * np.sqrt((n0 / n * se0) ** 2 + (n1 / n * se1) ** 2)
    return estimate, estimate - half, estimate + half


def test_every_pooled_query_labelled_gives_the_peoples_value_and_too_few_say_why():
    f = pd.Series([1.0, 0.0, 1.0, 0.0, 1.0], index=list("abcde"))
    y = pd.Series([1.0, 1.0, 0.0], index=list("bcd"))
    # b, c, d pooled and all labelled: a and e as judged (1, 1), people's b, c, d (1, 1, 0): 4 / 5,
    # its interval over the 5 queries' values (1, 1, 1, 1, 0): sd 0.4472 ⇒ ± 1.96 · 0.4472 / √5
    whole = corrected_mean(f, y, {"b", "c", "d"}, {"b", "c", "d"}, 0.05)
    assert whole["estimate"] == pytest.approx(0.8)
    assert (whole["ci_low"], whole["ci_high"]) == (
        pytest.approx(0.8 - 1.959964 * 0.2, abs=1e-6),
        pytest.approx(0.8 + 1.959964 * 0.2, abs=1e-6),
    )
    assert whole["note"] == "every pooled query labelled" and whole["pooled"] == 3
    few = corrected_mean(f, y, {"b", "c", "d"}, {"b"}, 0.05)
    assert few["estimate"] is None and few["note"] == "1 of 3 pooled queries labelled: at least 2 are needed"
    none = corrected_mean(pd.Series([], dtype=float), y, set(), set(), 0.05)
    assert none["estimate"] is None and none["note"] == "no query measures it"


def test_the_corrected_difference_covers_the_truth_at_its_nominal_rate():
    """1,000 synthetic comparisons of 400 queries, 300 with pooled hits. The truth per query: a
    hit@1-like 0/1 for each run (b better than a on 10 points); the judge's provisional labels make
    b's value 1 on 35% of the pooled queries where people say 0 (a biased judge favouring b).
    People label 60 pooled queries at random. The corrected Δ's 95% interval covers the true Δ (0.1)
    in 93–97% of comparisons (Monte Carlo error ±0.7 points at 1,000: 942 at this seed) and each
    comparison's own Δ at least as often (992); the judge's Δ with a naive interval covers it in
    about one comparison in eight (126)."""
    extra_or_skip("judge", True)  # numpy only: always runs
    rng = np.random.default_rng(7)
    n, n_pooled, n_labelled = 400, 300, 60
    ids = np.array([f"q{i}" for i in range(n)])
    pooled = set(ids[:n_pooled])
    covered = own_covered = naive_covered = 0
    for _ in range(1000):
        ya = rng.binomial(1, 0.5, n).astype(float)
        yb = rng.binomial(1, 0.6, n).astype(float)
        fb = yb.copy()
        bias = (np.arange(n) < n_pooled) & (yb == 0) & (rng.random(n) < 0.35)
        fb[bias] = 1.0
        f = pd.Series(fb - ya, index=ids)
        y = pd.Series(yb - ya, index=ids)
        labelled = set(rng.choice(ids[:n_pooled], n_labelled, replace=False))
        result = corrected_mean(f, y, pooled, labelled, 0.05)
        covered += result["ci_low"] <= TRUE_DELTA <= result["ci_high"]
        # this comparison's own Δ as people would label it all (these 400 queries): covered at least
        # as often, the interval also allowing for the queries' own sampling
        own_covered += result["ci_low"] <= float(y.mean()) <= result["ci_high"]
        half = 1.959964 * f.std(ddof=1) / np.sqrt(n)
        naive_covered += f.mean() - half <= TRUE_DELTA <= f.mean() + half
    assert 930 <= covered <= 970, covered
    assert own_covered >= 930, own_covered
    assert naive_covered < 300, naive_covered  # 126 at this seed


def test_one_runs_pool_is_labelled_without_a_judge(env, tmp_path):
    """Without --against the pool is the run's own unjudged hits; the run need not be judged."""
    ran = cli(env, "run", "--run-id", "solo")
    assert ran.returncode == 0, ran.stderr
    store = RunStore(tmp_path / "dagster_home" / "kebab-eval" / "artifacts")
    sample = people_sample((store.stored_run("solo"),), 2, None, 600, seed=3, limit=4)
    assert sample["query_id"].nunique() == 4 and len(sample) > 4
    labels = tmp_path / "solo.jsonl"
    line = ["judge", "label", "solo", "--criterion", "relevance", "--depth", "2", "--n", "4", "--seed", "3"]
    line += ["--labels", str(labels), "--labeller", "bo"]
    # the first two hits, a skip, then stop
    session = label_session(env, line, "5\n0\ns\nq\n", tmp_path)
    assert session.returncode == 0, session.stderr
    no_traceback(session)
    assert f"labelled 2, skipped 1, left {len(sample) - 3}: written to {labels}" in session.stdout
    written = read_labels(labels)
    assert list(written["item_hash"]) == list(sample["item_hash"].iloc[:2])
    assert list(written["label"]) == [5, 0] and list(written["query_id"]) == list(sample["query_id"].iloc[:2])
    # the sample's queries in strata of slice × found/missed, every pooled hit of each query together
    assert set(sample["stratum"].str.split(" / ").str[1]) <= {"found", "missed"}
    runs_of_queries = (sample["query_id"] != sample["query_id"].shift()).sum()
    assert runs_of_queries == sample["query_id"].nunique()


def test_the_comparison_asset_shows_the_people_corrected_record_in_the_ui(instance, tmp_path, key):
    """Through Dagster: the candidate's comparison_report, materialized again once people labelled
    its pool, carries the provisional record (corrected deltas, the judge's κ against people) in
    its metadata, as stored."""
    from tests.orchestration.test_chain import materializations, run_partition

    assert key
    labels = tmp_path / "labels.jsonl"
    with scripted_endpoint() as endpoint:
        cfg = judge_config(tmp_path, endpoint.base_url)
        doc = yaml.safe_load(cfg.read_text())
        doc["compare"] = {"provisional_depth": 5}
        doc["judge"]["calibration"] = {"labels": "labels.jsonl"}
        cfg.write_text(yaml.safe_dump(doc))
        defs, base = run_partition(instance, "base", cfg, overrides={"chunk_size": 400})
        assert base.success
        _, first = run_partition(instance, "cand", cfg, overrides={"chunk_size": 800})
        assert (
            first.success
            and "provisional/people_kappa" not in materializations(first)["comparison_report"].metadata
        )  # nobody labelled yet
        store = RunStore(defs.resources["artifact_storage"].base)
        a, b = store.stored_run("base"), store.stored_run("cand")
        sample = people_sample((a, b), 5, plan_matching(a, b).criterion, 600, seed=0, limit=40)
        gold_docs = b.golden.supports.groupby("query_id")["rel_path"].agg(
            lambda s: set(s.dropna().astype(str))
        )
        from kebab_eval_pipeline.judge.labels import Label, append_label

        for row in sample.itertuples(index=False):
            label = person_label(row.judge_input, gold_docs.get(row.query_id, set()))
            append_label(
                labels,
                Label(
                    criterion="relevance",
                    query_id=row.query_id,
                    item_hash=row.item_hash,
                    label=label,
                    labeller="ana",
                    labelled_at="2026-12-06T15:10:00+00:00",
                ),
            )
        _, again = run_partition(instance, "cand", cfg, overrides={"chunk_size": 800})
    assert again.success
    meta = materializations(again)["comparison_report"].metadata
    shown = meta["provisional"].value
    stored = json.loads(store.read_file("comparison_report", "cand", "comparison.json").decode("utf-8"))
    assert shown == stored["provisional"]
    assert shown["people"]["labelled_queries"] == 40
    assert meta["provisional/people_kappa"].value == pytest.approx(shown["people"]["agreement"]["kappa"])
    assert all(r["corrected"]["delta"]["labelled"] == 40 for r in shown["metrics"])
    assert "Δ corrected by people's labels" in meta["report"].value
