"""A recognisable secret, given only through environment variables, used by the http adapter in
real processes — ``kebab-eval run`` twice (so a comparison report is written), ``dagster asset
materialize`` with Dagster's DEBUG console log, ``compare``, ``export`` and ``runs list`` — appears
in none of their output, nor in any byte under DAGSTER_HOME (instance database, event logs,
compute logs, Parquet, manifests, Markdown/HTML/JSON reports) or the files the CLI wrote (SPEC §11)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from kebab_eval_pipeline.chain.settings import settings_from_dict
from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.store.runs import RunStore
from tests.forked_cli import run_cli
from tests.systems.adapters.fault_server import FaultServer
from tests.systems.adapters.test_http_adapter import (
    API_KEY,
    SECRET_QUERIES,
    SECRETS,
    TOKEN,
    _guarded,
    secret_config,
)
from tests.test_cli import cli, env, no_traceback

assert env  # the fixture, imported for this module's tests

#: `python -m dagster ...` (forked ready-imported: tests.forked_cli)
DAGSTER = ["asset", "materialize", "-m", "kebab_eval_pipeline.definitions", "--select", "*"]


def test_secret_reaches_no_process_output_log_report_or_file(env, tmp_path: Path) -> None:
    env = {**env, "KEBAB_TEST_TOKEN": TOKEN, "KEBAB_TEST_KEY": API_KEY}
    outputs: dict[str, subprocess.CompletedProcess] = {}
    with FaultServer(_guarded) as server:
        cfg = secret_config(tmp_path / "cfg", server.url)
        outputs["run s1"] = cli(env, "run", "--config", str(cfg), "--run-id", "s1")
        outputs["run s2"] = cli(env, "run", "--config", str(cfg), "--run-id", "s2", "--baseline", "s1")
        outputs["runs add s3"] = cli(env, "runs", "add", "s3")
        outputs["dagster materialize s3"] = run_cli(
            [*DAGSTER, "--partition", "s3"],
            env={**env, "KEBAB_EVAL_CONFIG": str(cfg)},
            timeout=300,
            module="dagster",
        )
        authorized = [r.headers.get("authorization") == f"Bearer {TOKEN}" for r in server.received]
    html = tmp_path / "out" / "comparison.html"
    trec = tmp_path / "out" / "s2.trec"
    outputs["compare"] = cli(env, "compare", "s1", "s2", "--json", "--html", str(html))
    outputs["export json"] = cli(env, "export", "s2", "--format", "json")
    outputs["export trec"] = cli(env, "export", "s2", "--format", "trec", "--out", str(trec))
    outputs["runs list"] = cli(env, "runs", "list")

    # the secrets were really used: every request carried them, and every run scored its queries
    assert authorized and all(authorized)
    for name, proc in outputs.items():
        no_traceback(proc)
        # a run whose gates fail exits 1; nothing here is bad input (2) or a crash
        assert proc.returncode in (0, 1), (name, proc.stderr)
    assert "s-500" in outputs["export json"].stdout and "http_5xx" in outputs["export json"].stdout
    assert "RUN_SUCCESS" in outputs["dagster materialize s3"].stderr  # Dagster's DEBUG event stream
    store = RunStore(Path(env["DAGSTER_HOME"]) / "kebab-eval" / "artifacts")
    for run_id in ("s1", "s2", "s3"):
        scores, _ = store.read("query_scores", run_id)
        assert sorted(scores["query_scores"]["query_id"]) == sorted(SECRET_QUERIES)
    assert store.file_path("comparison_report", "s2", "comparison.html") is not None
    assert html.is_file() and trec.is_file()

    for name, proc in outputs.items():
        for secret in SECRETS:
            assert secret not in proc.stdout and secret not in proc.stderr, (name, secret)
    written = [p for p in Path(env["DAGSTER_HOME"]).rglob("*") if p.is_file()] + [html, trec]
    assert any(p.name == "comparison.html" for p in written)
    assert any(p.suffix == ".parquet" for p in written)
    for path in written:
        data = path.read_bytes()
        for secret in SECRETS:
            assert secret.encode() not in data, (path, secret)


@pytest.mark.parametrize(
    "header", ["Authorization", "X-Api-Key", "Cookie", "X-Auth-Token", "Proxy-Authorization"]
)
def test_a_credential_written_in_the_config_is_refused(header: str) -> None:
    """Literal headers are stored in config snapshots and shown in the UI: credential-looking ones
    must come from the environment (``headers_from_env``) instead."""
    with pytest.raises(InputError) as err:
        settings_from_dict(
            {"system": {"kind": "http", "search_url": "http://127.0.0.1:9/s", "headers": {header: "x"}}},
            source="cfg.yaml",
        )
    message = str(err.value)
    assert "cfg.yaml" in message and header in message and "headers_from_env" in message
    assert settings_from_dict(
        {"system": {"kind": "http", "search_url": "http://127.0.0.1:9/s", "headers": {"X-Client": "k"}}}
    ).system.headers == {"X-Client": "k"}
