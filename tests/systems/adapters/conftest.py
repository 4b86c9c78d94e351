"""Shared fixtures for the adapter tests: the demo index on disk, the in-process reference
run to compare against, a real Dagster run of a config, and a free loopback port."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kebab_eval_pipeline.chain import pipeline
from kebab_eval_pipeline.chain.artifacts import RunMetricsArtifact
from kebab_eval_pipeline.chain.settings import settings_from_dict
from kebab_eval_pipeline.definitions import JOB_NAME, build_definitions, run_settings
from kebab_eval_pipeline.foundation.demo import DEMO_CORPUS
from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.orchestration.assets import observe_inputs
from kebab_eval_pipeline.store.runs import RunStore
from tests.conftest import stop_server

# The reference tests' small indexed corpus, for the reference adapter's tests (test_reference_adapter.py).
from tests.reference.conftest import built_index  # noqa: F401

#: The console script the command adapter runs, from the interpreter running the tests.
KEBAB_EVAL = str(Path(sys.executable).with_name("kebab-eval"))


def timing_free(metrics: dict) -> dict:
    """Metrics minus latencies (they differ between any two runs)."""
    return {k: v for k, v in metrics.items() if not (k.endswith("_ms") or "_ms_" in k)}


@pytest.fixture(scope="session")
def demo_index_dir(tmp_path_factory) -> Path:
    """The bundled demo corpus indexed once per session (default chunking, lexical)."""
    from kebab_eval_pipeline.reference.index import ReferenceIndex

    out = tmp_path_factory.mktemp("demo-index") / "index"
    ReferenceIndex.build(DEMO_CORPUS).save(out)
    return out


@pytest.fixture(scope="session")
def reference_results(demo_index_dir):
    """The in-process reference system over ``demo_index_dir`` on the demo golden set, answers on:
    ``(RunMetricsArtifact, RetrievalArtifact)`` computed with the plain pipeline functions."""
    return reference_run(demo_index_dir)


def reference_run(index_dir: Path, golden_file: Path | None = None):
    """The in-process reference system over ``index_dir`` on ``golden_file`` (default: the demo's),
    answers on: ``(RunMetricsArtifact, RetrievalArtifact)`` from the plain pipeline functions."""
    doc = {"system": {"kind": "reference", "index": str(index_dir)}, "answers": True}
    if golden_file is not None:
        doc["golden"] = str(golden_file)
    settings = settings_from_dict(doc)
    golden = pipeline.load_golden_artifact(settings)
    retrieval = pipeline.retrieve(settings, golden)
    scores = pipeline.score(settings, golden, retrieval)
    return pipeline.summarize("reference", settings, golden, retrieval, scores), retrieval


def run_config(instance, config: Path, run_id: str, overrides: dict | None = None):
    """What ``kebab-eval run --config`` does, in-process on ``instance``: returns
    ``(result, store)``; the run's artifacts are read back with ``store.read(asset, run_id)``."""
    defs = build_definitions(config, overrides=overrides)
    instance.add_dynamic_partitions("eval_runs", [run_id])
    with contextlib.suppress(InputError):
        observe_inputs(instance, run_settings(defs))
    result = defs.resolve_job_def(JOB_NAME).execute_in_process(
        partition_key=run_id, instance=instance, raise_on_error=False
    )
    return result, RunStore(defs.resources["artifact_storage"].base)


def stored_metrics(store: RunStore, run_id: str) -> RunMetricsArtifact:
    return RunMetricsArtifact.from_tables(*store.read("run_metrics", run_id))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ref_server(demo_index_dir: Path) -> Iterator[str]:
    """``kebab-eval ref serve DEMO_INDEX --port 0``; yields its base URL, terminated afterwards."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DAGSTER_")}
    proc = subprocess.Popen(
        [KEBAB_EVAL, "ref", "serve", str(demo_index_dir), "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    line = proc.stdout.readline().strip()
    if not line.startswith("serving http://127.0.0.1:"):
        proc.kill()
        raise AssertionError(f"ref serve did not start: {line!r} {proc.stderr.read()}")
    try:
        yield line.removeprefix("serving ")
    finally:
        stop_server(proc)
