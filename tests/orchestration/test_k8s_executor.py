"""docs/site/recipes/kubernetes.md holds: with ``KEBAB_EVAL_EXECUTOR=k8s`` the definitions load with
dagster-k8s's ``k8s_job_executor`` (wrapped by the run lock), the page's run config is valid for
the evaluation job, and its ``run_launcher`` block is valid ``K8sRunLauncher`` config. No cluster
is needed (nor started): these are the checks Dagster makes when a run is launched.

Skipped without the ``k8s`` extra, unless ``KEBAB_EVAL_REQUIRE_K8S=1`` (CI), where it fails.
"""

from __future__ import annotations

import os
import re

import dagster as dg
import pytest
import yaml
from dagster._config import process_config

from kebab_eval_pipeline.definitions import JOB_NAME, build_definitions
from tests.conftest import REPO

PAGE = REPO / "docs" / "site" / "recipes" / "kubernetes.md"


@pytest.fixture(autouse=True)
def _dagster_k8s():
    try:
        import dagster_k8s  # noqa: F401
    except ImportError:
        if os.environ.get("KEBAB_EVAL_REQUIRE_K8S") == "1":
            pytest.fail('KEBAB_EVAL_REQUIRE_K8S=1 but dagster-k8s is not installed (pip install -e ".[k8s]")')
        pytest.skip('dagster-k8s is not installed (pip install -e ".[k8s]")')


def documented_block(marker: str) -> dict:
    """The YAML block after ``<!-- marker -->`` in docs/site/recipes/kubernetes.md."""
    found = re.search(rf"<!-- {marker} -->\n```yaml\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S)
    assert found, f"{PAGE.name}: no yaml block after <!-- {marker} -->"
    return yaml.safe_load(found.group(1))


def test_definitions_load_with_the_k8s_executor_and_the_documented_run_config(monkeypatch) -> None:
    monkeypatch.setenv("KEBAB_EVAL_EXECUTOR", "k8s")
    monkeypatch.delenv("KEBAB_EVAL_MAX_CONCURRENT", raising=False)
    defs = build_definitions()
    job = defs.resolve_job_def(JOB_NAME)
    assert job.executor_def.name == "k8s"
    # the lock wrapper keeps dagster-k8s's own config schema: what the page documents is accepted
    run_config = documented_block("k8s-run-config")
    resolved = dg.validate_run_config(job, run_config)["execution"]["k8s"]
    assert resolved["job_namespace"] == "kebab-eval" and resolved["max_concurrent"] == 4
    with pytest.raises(dg.DagsterInvalidConfigError, match="job_namespace"):
        dg.validate_run_config(job, {"execution": {"config": {"job_namespace": 3}}})


def test_max_concurrent_from_the_environment_fills_in_the_pod_limit(monkeypatch) -> None:
    monkeypatch.setenv("KEBAB_EVAL_EXECUTOR", "k8s")
    monkeypatch.setenv("KEBAB_EVAL_MAX_CONCURRENT", "3")
    job = build_definitions().resolve_job_def(JOB_NAME)

    def resolved(config: dict) -> dict:
        return dg.validate_run_config(job, {"execution": {"config": config}})["execution"]["k8s"]

    assert resolved({"job_namespace": "kebab-eval"})["max_concurrent"] == 3
    assert resolved({"max_concurrent": 7})["max_concurrent"] == 7  # a run's own limit wins


def test_documented_run_launcher_is_valid_k8s_run_launcher_config() -> None:
    from dagster_k8s import K8sRunLauncher

    block = documented_block("k8s-run-launcher")["run_launcher"]
    assert (block["module"], block["class"]) == ("dagster_k8s", "K8sRunLauncher")
    result = process_config(K8sRunLauncher.config_type(), block["config"])
    assert result.success, result.errors
    env_vars = dict(v.split("=", 1) for v in result.value["env_vars"])
    assert env_vars["KEBAB_EVAL_EXECUTOR"] == "k8s" and env_vars["KEBAB_EVAL_STORAGE"].startswith("s3://")
    # credentials only through secrets: no key, password or token written in the block
    assert not re.search(r"(?i)(secret_access_key|password|token)\s*[:=]", yaml.safe_dump(block))
