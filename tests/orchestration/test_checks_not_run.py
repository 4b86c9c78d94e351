"""A check that could not run is skipped in Dagster — never passed — and says why.

Real materializations in a temporary Dagster instance; each check's status is read from the
instance's own event log and resolved the way the UI resolves it (a check planned in a run that
succeeded without evaluating it is SKIPPED).

* ``golden_health`` of a python system (a user's plain-Python "library", :data:`LIBRARY`): without
  ``catalogue()`` and without ``source_root`` the ``stale_supports`` check is SKIPPED, the run's log
  and the ``skipped_checks`` metadata saying why; with ``source_root`` a support whose document is
  missing is flagged; with ``catalogue()`` a support whose chunk the index no longer holds is.
* a run partition of a search-only python system: a gate skipped on a null metric
  (``skip_if_null``), a regression gate without a baseline, and the default answer gates (left out
  once the built system shows it has no ``ask``) are SKIPPED; the gates that ran passed.
"""

from __future__ import annotations

import asyncio

import dagster as dg
import yaml
from dagster._core.loader import LoadingContextForTest
from dagster._core.storage.asset_check_execution_record import AssetCheckExecutionResolvedStatus

from kebab_eval_pipeline.chain.pipeline import check_golden_against_system, load_golden_artifact
from kebab_eval_pipeline.chain.settings import load_settings
from kebab_eval_pipeline.definitions import build_definitions
from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.store.runs import RunStore
from kebab_eval_pipeline.systems.factory import build_system
from tests.conftest import write
from tests.orchestration.test_chain import run_partition

HEALTH = dg.AssetKey("golden_health")

#: What a user writes: documents in a folder, searched by shared words; one chunk per document.
#: ``Listed`` can also list its index.
LIBRARY = """
from pathlib import Path


class Library:
    def __init__(self, folder):
        files = sorted(Path(folder).rglob("*.md"))
        self.docs = {p.relative_to(folder).as_posix(): p.read_text() for p in files}

    def search(self, query, k):
        words = set(query.lower().split())
        scored = sorted(
            ((len(words & set(text.lower().split())), path) for path, text in self.docs.items()),
            key=lambda x: (-x[0], x[1]),
        )
        return {"hits": [{"chunk_id": f"{p}#0", "doc_path": p, "score": s} for s, p in scored[:k] if s]}


class Listed(Library):
    def catalogue(self):
        return {"hits": [{"chunk_id": f"{p}#0", "doc_path": p} for p in self.docs]}
"""


def setup(tmp_path, factory: str, **extra) -> str:
    corpus = tmp_path / "corpus"
    write(corpus / "salt.md", "# Salt\n\nsalt the cabbage two percent by weight\n")
    write(corpus / "jars.md", "# Jars\n\nuse glass jars with an airlock\n")
    write(tmp_path / "app" / "library.py", LIBRARY)
    jars = {"rel_path": "jars.md", "chunk_id": "jars.md#0"}
    brine = {"rel_path": "brine.md", "chunk_id": "brine.md#0"}  # deleted from the corpus and the index
    queries = [
        {"id": "q-salt", "query": "how much salt for cabbage", "supports": [{"rel_path": "salt.md"}]},
        {"id": "q-jars", "query": "which jars", "supports": [jars]},
        {"id": "q-brine", "query": "brine strength", "supports": [brine]},
    ]
    write(
        tmp_path / "golden.yaml",
        yaml.safe_dump({"schema_version": "1", "name": "ferment", "queries": queries}),
    )
    config = {
        "golden": str(tmp_path / "golden.yaml"),
        "system": {"kind": "python", "callable": f"library:{factory}", "args": {"folder": str(corpus)}},
        "storage": str(tmp_path / "artifacts"),
        "golden_health": {"semantic_duplicates": "off"},
        **extra,
    }
    config["system"]["path"] = [str(tmp_path / "app")]
    return str(write(tmp_path / "eval.yaml", yaml.safe_dump(config)))


def status(instance, asset: dg.AssetKey, check: str, partition: str | None = None):
    """The check's latest execution status as Dagster resolves it (the UI's status)."""
    key = dg.AssetCheckKey(asset, check)
    record = instance.event_log_storage.get_latest_asset_check_execution_by_key([key])[key]
    if partition is not None:
        assert record.partition == partition
    return asyncio.run(record.resolve_status(LoadingContextForTest(instance)))


def evaluations(result) -> dict[str, dg.AssetCheckEvaluation]:
    return {e.check_name: e for e in result.get_asset_check_evaluations()}


def run_logs(instance, result) -> str:
    return "\n".join(
        r.user_message for r in instance.all_logs(result.run_id) if r.dagster_event is None and r.user_message
    )


def materialize_health(config: str, instance):
    defs = build_definitions(config)
    result = defs.resolve_implicit_global_asset_job_def().execute_in_process(
        asset_selection=[HEALTH], instance=instance, raise_on_error=False
    )
    assert result.success
    (event,) = result.get_asset_materialization_events()
    return result, event.step_materialization_data.materialization


def test_stale_supports_of_a_python_system_without_a_catalogue_is_skipped(instance, tmp_path):
    config = setup(tmp_path, "Library")
    result, materialization = materialize_health(config, instance)
    checked = evaluations(result)
    assert "stale_supports" not in checked  # no result: not passed
    assert status(instance, HEALTH, "stale_supports") == AssetCheckExecutionResolvedStatus.SKIPPED
    # the checks that did run are as before
    assert status(instance, HEALTH, "unsupported_answerable") == AssetCheckExecutionResolvedStatus.SUCCEEDED
    why = (
        "stale supports not checked: the python system library:Library has no catalogue() method to "
        "list its index (set source_root to check gold documents on disk, or give the system a catalogue)"
    )
    assert materialization.metadata["skipped_checks"].value["stale_supports"] == why
    assert f"check stale_supports skipped: {why}" in run_logs(instance, result)
    assert "health/stale_supports" not in materialization.metadata


def test_with_source_root_a_missing_support_document_is_flagged(instance, tmp_path):
    config = setup(tmp_path, "Library", source_root=str(tmp_path / "corpus"))
    result, materialization = materialize_health(config, instance)
    stale = evaluations(result)["stale_supports"]
    assert not stale.passed and stale.metadata["count"].value == 1
    assert "brine.md" in stale.metadata["offenders"].value
    assert materialization.metadata["health/stale_supports"].value == 1
    assert status(instance, HEALTH, "stale_supports") == AssetCheckExecutionResolvedStatus.FAILED
    # a run checks the same before any query: stale_golden: fail refuses it, naming the support
    settings = load_settings(config)
    golden = load_golden_artifact(settings)
    try:
        check_golden_against_system(settings, golden, build_system(settings))
    except InputError as exc:
        [offender] = exc.offenders
        assert (offender.query_id, offender.field) == ("q-brine", "supports[0].rel_path")
        assert "no file at this path under source_root" in offender.reason
    else:
        raise AssertionError("a missing gold document must fail the stale-golden check")


def test_a_python_systems_catalogue_is_checked_for_stale_supports(instance, tmp_path):
    config = setup(tmp_path, "Listed")
    result, _ = materialize_health(config, instance)
    stale = evaluations(result)["stale_supports"]
    # brine.md: its chunk id and its path, both absent from what catalogue() lists
    assert stale.metadata["count"].value == 2
    assert status(instance, HEALTH, "stale_supports") == AssetCheckExecutionResolvedStatus.FAILED


def test_gates_that_could_not_run_are_skipped_in_the_run(instance, tmp_path):
    config = setup(
        tmp_path,
        "Library",
        stale_golden="warn",
        gates={
            "mrr": {"min": 0.1},
            "hallucination_rate": {"max": 0.1, "skip_if_null": True},  # null: no source_root
            "regression": {"mrr": {"max_drop": 0.05}},  # the first run has no baseline
        },
    )
    defs, result = run_partition(instance, "r1", config)
    assert result.success
    checked = evaluations(result)
    assert checked["gate_mrr_min"].passed
    assert checked["system_health"].passed
    skipped = [
        (dg.AssetKey("run_metrics"), "gate_hallucination_rate_max"),
        (dg.AssetKey("comparison_report"), "gate_mrr_max_drop"),
        # the default answer gates: the built object has no ask, so they were left out
        *((dg.AssetKey("run_metrics"), f"gate_{m}") for m in ("chr_min", "answer_precision_min")),
        (dg.AssetKey("run_metrics"), "gate_over_refusal_rate_max"),
        (dg.AssetKey("judge"), "judge_spot_check"),  # judge off
    ]
    for asset, name in skipped:
        assert name not in checked, name
        assert status(instance, asset, name, "r1") == AssetCheckExecutionResolvedStatus.SKIPPED, name
    logs = run_logs(instance, result)
    assert (
        "check gate_hallucination_rate_max skipped: hallucination_rate is null (empty denominator): "
        "skipped as configured" in logs
    )
    assert "check gate_mrr_max_drop skipped: no baseline run: nothing to regress against" in logs
    assert (
        "check gate_chr_min skipped: chr not measured: the python system library:Library has no ask method"
        in logs
    )
    # what the CLI and JUnit read still lists the skipped gates with their reasons; the default
    # answer gates are left out of it
    stored = RunStore(defs.resources["artifact_storage"].base).stored_run("r1")
    gates = {g["name"]: g for g in stored.metrics.info["gates"]}
    assert set(gates) == {"gate_mrr_min", "gate_hallucination_rate_max"}
    assert gates["gate_hallucination_rate_max"]["skipped"]
    assert stored.metrics.info["not_measured"]["chr"] == "the python system library:Library has no ask method"
