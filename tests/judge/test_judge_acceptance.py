"""The LLM judge with the real SmolLM2-135M-Instruct model, end to end through the CLI (issue 10).

- The demo run judged through the ``local`` backend, and the same run judged through
  ``openai_compatible`` against ``kebab-eval judge serve`` on an ephemeral 127.0.0.1 port (which
  demands the API key): same model, greedy decoding — identical judgements, score for score.
- Re-running a judged run makes zero model calls (every judgement from the cache); judging it
  with another prompt version misses the cache.
- The judge's agreement with the rule-based groundedness is reported, and the API key is in no
  file and no process output.

Each judgement costs the tiny model about 1.2 s on two cores with short replies, 8 s with the
default reply length, and each model load about 11 s, so the tests judge a sample and load the
model twice: in the ``local`` run's process and in one ``judge serve`` shared by every test of the
session that judges through an endpoint (``served_judge``, tests/judge/conftest.py).

- ``DEMO_SAMPLE``, 12 of the demo's 105 queries, judged twice (local and served), with short
  inputs and replies (``CI_JUDGE``): the score is the fifth token of the reply, so it comes from the
  digit log probabilities of a reply cut at 6 tokens. Local = served is a claim about each
  judgement (same file, same input, greedy: same reply), and the sample holds every kind of input
  the demo gives the judge: English and Korean questions, a paraphrase, a multi-hop and a recency
  question, an unanswerable question the system answered anyway (judged), and four it refused or
  left unanswered (not judged) — 8 answered queries × 2 criteria + the 10% spot check (1 query,
  the other prompt wording) = 18 judgements a run. The rest of the demo repeats these paths with
  other text. ``KEBAB_EVAL_JUDGE_FULL=1`` judges the whole demo instead (70 answered queries, 154
  judgements a run, ~4 minutes each with short replies) and the original six-query cache test
  through the local backend; CI does not run it.
- The cache test keeps the default prompt (v2: the score alone, one token read from its log
  probabilities) on ``CACHE_SAMPLE``: two answered demo questions and a refused one.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from kebab_eval_pipeline.chain.artifacts import JudgeArtifact, QueryScoresArtifact, RunMetricsArtifact
from kebab_eval_pipeline.judge.inputs import judged_query_ids
from kebab_eval_pipeline.judge.local import WEAK_JUDGE_NOTE, default_model_path
from kebab_eval_pipeline.judge.run import spot_check_sample
from kebab_eval_pipeline.store.runs import RunStore
from tests.conftest import demo_golden_subset
from tests.forked_cli import run_cli
from tests.judge.conftest import judge_or_skip
from tests.judge.test_judge_assets import KEY_ENV, SECRET, assert_no_secret
from tests.test_cli import no_traceback

FULL = os.environ.get("KEBAB_EVAL_JUDGE_FULL") == "1"
CI_JUDGE = {"context_k": 1, "context_chars": 400, "max_tokens": 6}
# See the module docstring: 8 answered (judged) and 4 refused or unanswered (not judged) queries.
DEMO_SAMPLE = (
    "fact-001",
    "fact-002",
    "fact-003",  # refused
    "ko-fact-001",
    "ko-fact-002",
    "ko-fact-003",  # refused
    "para-kahm-001",
    "multi-001",
    "multi-002",  # refused
    "recency-001",
    "unans-001",  # correctly refused
    "unans-006",  # unanswerable, answered anyway
)
#: answered queries and spot-check sample size of the judged demo: the whole of it, or DEMO_SAMPLE
DEMO_JUDGED = (70, 7) if FULL else (8, 1)
# fact-005 and fact-006 are answered, and the model closes its JSON on their correctness prompts
# within the default 96 tokens; fact-003 is refused. FULL: the original test's first six queries.
CACHE_SAMPLE = (
    ("fact-001", "fact-002", "fact-003", "fact-004", "fact-005", "fact-006")
    if FULL
    else (
        "fact-003",
        "fact-005",
        "fact-006",
    )
)
# Columns that must agree between the in-process and the served judge (the backend name differs).
SAME = [
    "query_id",
    "criterion",
    "role",
    "digest",
    "prompt_version",
    "input_hash",
    "score",
    "method",
    "expected_score",
    "digit_mass",
    "reply",
    "finish_reason",
    "prompt_tokens",
    "completion_tokens",
    "judge_input",
    "messages",
]


def kebab_eval(env: dict, *args: str) -> subprocess.CompletedProcess:
    """The CLI as a process of its own (forked ready-imported: :mod:`tests.forked_cli`); judged
    runs of the demo take minutes, hence the long timeout."""
    proc = run_cli(args, env=env, timeout=1800)
    no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    return proc


def config(path: Path, judge: dict, **top) -> Path:
    path.write_text(yaml.safe_dump({"judge": judge, **top}), encoding="utf-8")
    return path


def stored(home: Path, run_id: str) -> tuple[JudgeArtifact, QueryScoresArtifact, RunMetricsArtifact]:
    store = RunStore(home / "kebab-eval" / "artifacts")
    return (
        JudgeArtifact.from_tables(*store.read("judge", run_id)),
        QueryScoresArtifact.from_tables(*store.read("query_scores", run_id)),
        RunMetricsArtifact.from_tables(*store.read("run_metrics", run_id)),
    )


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> tuple[Path, dict]:
    judge_or_skip()
    root = tmp_path_factory.mktemp("judge-acceptance")
    home = root / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KEBAB_EVAL_", "DAGSTER_"))}
    env["DAGSTER_HOME"] = str(home)
    env.pop(KEY_ENV, None)
    return root, env


@pytest.fixture(scope="module")
def demo(workspace, served_judge):
    """The demo (DEMO_SAMPLE, or all of it under KEBAB_EVAL_JUDGE_FULL=1) judged in-process
    (local) and through `judge serve` (openai_compatible), each with a cache of its own so both
    really call the model; returns what the test reads."""
    root, env = workspace
    sample_golden = demo_golden_subset(root / "sample.yaml", DEMO_SAMPLE, name="demo-judged")
    sample = {} if FULL else {"golden": str(sample_golden)}
    outputs = {}
    cache = str(root / "cache-local")
    local = config(root / "local.yaml", {"backend": "local", "cache_dir": cache, **CI_JUDGE}, **sample)
    outputs["run local"] = kebab_eval(env, "run", "--run-id", "demo-local", "--config", str(local))
    keyed = {**env, KEY_ENV: SECRET}
    url = served_judge  # demands the key: KEY_ENV must hold SECRET
    served = config(
        root / "served.yaml",
        {
            "backend": "openai_compatible",
            "base_url": str(url),
            "model": url.model,
            "api_key_env": KEY_ENV,
            "cache_dir": str(root / "cache-served"),
            **CI_JUDGE,
        },
        **sample,
    )
    outputs["run served"] = kebab_eval(keyed, "run", "--run-id", "demo-served", "--config", str(served))
    home = Path(env["DAGSTER_HOME"])
    outcomes = RunStore(home / "kebab-eval" / "artifacts").read("retrieval_results", "demo-local")[0]
    return {
        "root": root,
        "outputs": outputs,
        "local_config": local,
        "outcomes": outcomes["outcomes"],
        "local": stored(home, "demo-local"),
        "served": stored(home, "demo-served"),
    }


def test_local_and_served_judges_give_identical_scores(demo) -> None:
    (local, local_scores, local_metrics), (served, served_scores, served_metrics) = (
        demo["local"],
        demo["served"],
    )
    a, b = local.judgements, served.judgements
    # every answered query on both criteria, plus the fixed-seed 10% sample judged again
    answered = list(judged_query_ids(demo["outcomes"]))
    sample = spot_check_sample(answered, 0.1, 0)
    assert (len(answered), len(sample)) == DEMO_JUDGED
    assert len(demo["outcomes"]) > len(answered)  # refused and unanswered queries are not judged
    assert len(a) == len(b) == 2 * len(answered) + 2 * len(sample)
    assert set(a["backend"]) == {"local"} and set(b["backend"]) == {"openai_compatible"}
    assert a["error"].isna().all() and b["error"].isna().all()
    pd.testing.assert_frame_equal(a[SAME].reset_index(drop=True), b[SAME].reset_index(drop=True))
    # the judge really scored: digit probabilities at the score token, spread over the scale
    assert a["score"].notna().all() and set(a["method"]) == {"logprobs"}
    assert a["score"].between(0, 5).all() and a["score"].nunique() > 10
    # pinned to the same file: the served model reports the GGUF's sha256
    digest = local.info["judge"]["digest"]
    assert digest == served.info["judge"]["digest"] == local_metrics.info["judge"]["judge"]["digest"]
    assert served.info["judge"]["pinned"] is True
    for column in ("judge_groundedness", "judge_correctness", "judge_rule_agreement"):
        pd.testing.assert_series_equal(local_scores.scores[column], served_scores.scores[column])
    # latency differs; cost too: a local model is free, the endpoint's model has no price configured
    assert local_metrics.metrics["judge_cost_usd"] == 0.0 and served_metrics.metrics["judge_cost_usd"] is None
    same_metrics = [
        m for m in local_metrics.metrics if m.startswith("judge_") and "latency" not in m and "cost" not in m
    ]
    assert {m: local_metrics.metrics[m] for m in same_metrics} == {
        m: served_metrics.metrics[m] for m in same_metrics
    }
    assert local_metrics.metrics["judge_model_calls"] == len(a)  # fresh caches: every judgement a call
    assert local_metrics.metrics["judge_cache_hits"] == 0


def test_pinning_and_meta_evaluation_are_in_the_run_metadata(demo) -> None:
    judged, scores, metrics = demo["local"]
    identity = metrics.info["judge"]
    main = identity["judge"]
    assert main["backend"] == "local" and main["model"] == default_model_path().name
    assert main["prompt_version"] == "v2" and identity["spot_check_judge"]["prompt_version"] == "v2-alt"
    # v2 replies in one token, whatever the config's max_tokens (CI_JUDGE's 6) says
    assert main["decoding"]["temperature"] == 0.0 and main["decoding"]["max_tokens"] == 1
    assert main["note"] == WEAK_JUDGE_NOTE  # the tiny default judge says it is weak
    # the honest number: does judge_groundedness >= 3 agree with the rule-based groundedness?
    qs = scores.scores
    both = qs["judge_groundedness"].notna() & qs["groundedness_rule"].notna()
    expected = ((qs.loc[both, "judge_groundedness"] >= 3) == (qs.loc[both, "groundedness_rule"] >= 1)).mean()
    assert metrics.denominators["judge_groundedness_rule_agreement"] == int(both.sum()) > 0
    assert metrics.metrics["judge_groundedness_rule_agreement"] == pytest.approx(expected, abs=5e-5)
    # the full judge input is stored with every judgement
    first = judged.judgements.iloc[0]
    assert first["judge_input"] and first["messages"].count('"role"') == 6  # v2: two worked examples


def test_the_api_key_is_in_no_artifact_and_no_output(demo) -> None:
    texts = {
        f"{name} {stream}": getattr(p, stream)
        for name, p in demo["outputs"].items()
        for stream in ("stdout", "stderr")
    }
    assert_no_secret(demo["root"], texts=texts)


def test_a_rerun_of_the_local_run_makes_no_model_call(demo, workspace) -> None:
    """The local backend's cache across processes: the demo's local run again, with the same config
    and cache folder, judges everything from the cache (and so never even loads the model)."""
    _, env = workspace
    home = Path(env["DAGSTER_HOME"])
    kebab_eval(env, "run", "--run-id", "demo-local-again", "--config", str(demo["local_config"]))
    first = demo["local"][0]
    again, _, again_metrics = stored(home, "demo-local-again")
    assert again_metrics.metrics["judge_model_calls"] == 0
    assert again_metrics.metrics["judge_cache_hits"] == len(first.judgements)
    assert again.judgements["cached"].all()
    keep = ["query_id", "criterion", "role", "input_hash", "score", "method", "reply"]
    pd.testing.assert_frame_equal(first.judgements[keep], again.judgements[keep])


def test_a_rerun_hits_the_cache_and_another_prompt_version_misses(workspace, served_judge) -> None:
    """CACHE_SAMPLE judged with the default reply length through the session's `judge serve`
    (its model is loaded already); under KEBAB_EVAL_JUDGE_FULL=1 through the local backend."""
    root, env = workspace
    demo_golden_subset(root / "small.yaml", CACHE_SAMPLE, name="demo-small")
    if FULL:
        judge = {"backend": "local"}
    else:
        env = {**env, KEY_ENV: SECRET}
        judge = {
            "backend": "openai_compatible",
            "base_url": str(served_judge),
            "model": served_judge.model,
            "api_key_env": KEY_ENV,
        }
    judge["cache_dir"] = str(root / "cache-small")
    cfg = config(root / "small-judge.yaml", judge, golden="small.yaml")
    home = Path(env["DAGSTER_HOME"])

    kebab_eval(env, "run", "--run-id", "small-1", "--config", str(cfg))
    first, _, first_metrics = stored(home, "small-1")
    n = len(first.judgements)
    assert (
        first_metrics.metrics["judge_model_calls"] == n > 0 and first_metrics.metrics["judge_cache_hits"] == 0
    )
    # the default prompt asks for the score alone: one token, read from its digit log probabilities
    assert set(first.judgements["method"]) == {"logprobs"}
    assert set(first.judgements["completion_tokens"]) == {1}
    assert (first.judgements["digit_mass"] > 0.5).all()

    kebab_eval(env, "run", "--run-id", "small-2", "--config", str(cfg))  # the same judged run again
    again, _, again_metrics = stored(home, "small-2")
    assert again_metrics.metrics["judge_model_calls"] == 0  # zero model calls: all from the cache
    assert again_metrics.metrics["judge_cache_hits"] == n and again.judgements["cached"].all()
    keep = ["query_id", "criterion", "role", "input_hash", "score", "method", "reply"]
    pd.testing.assert_frame_equal(first.judgements[keep], again.judgements[keep])

    kebab_eval(env, "rejudge", "small-2", "--config", str(cfg), "--prompt-version", "v2-alt")
    alt, _, alt_metrics = stored(home, "small-2")
    primary = alt.judgements[alt.judgements["role"] == "primary"]
    assert set(primary["prompt_version"]) == {"v2-alt"}
    # v2-alt misses, except where the first run's spot check (v2-alt) judged the same input; the
    # spot check is now v2, which the first run's main judge cached
    sampled = primary["query_id"].isin(first.info["spot_check_queries"])
    assert (primary["cached"] == sampled).all() and (~sampled).any()
    assert alt_metrics.metrics["judge_model_calls"] == int((~sampled).sum()) > 0
    assert alt_metrics.metrics["judge_cache_hits"] == len(alt.judgements) - int((~sampled).sum())
    assert alt_metrics.info["judge"]["judge"]["prompt_version"] == "v2-alt"
    assert not np.array_equal(
        primary["input_hash"], first.judgements[first.judgements["role"] == "primary"]["input_hash"]
    )
