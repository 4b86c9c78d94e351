"""Baseline selection and pins, on a real RunStore with run_metrics written as the chain writes them."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from kebab_eval_pipeline.chain.artifacts import RunMetricsArtifact
from kebab_eval_pipeline.chain.settings import settings_from_dict
from kebab_eval_pipeline.compare.baseline import (
    Skipped,
    flag_baseline,
    previous_run,
    resolve_baseline,
)
from kebab_eval_pipeline.compare.outcome import RunOutcome, metrics_outcome, run_outcome
from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.foundation.run_roles import role_of
from kebab_eval_pipeline.store.layout import PINS_FILE
from kebab_eval_pipeline.store.pins import pin_baseline, read_pins, unpin_baseline
from kebab_eval_pipeline.store.runs import RunStore
from kebab_eval_pipeline.systems.identity import make_identity

SHA_V1 = "a1" * 32
SHA_V2 = "b2" * 32
SHA_OTHER = "c3" * 32


def golden(name: str = "demo-fermentation", sha: str = SHA_V1) -> dict:
    return {"name": name, "path": f"/data/{name}.yaml", "sha256": sha, "queries": 3, "format": "kebab"}


#: The demo reference system's identity, as the run_metrics asset records it.
ON_V1 = f"on golden set 'demo-fermentation' at sha256 {SHA_V1[:12]}…"
ON_V2 = f"on golden set 'demo-fermentation' at sha256 {SHA_V2[:12]}…"
DEMO = make_identity("reference", "demo corpus", "lexical")
DEMO_LABEL = "reference demo corpus (lexical)"


def put(
    store: RunStore,
    run_id: str,
    created_at: str,
    name: str = "demo-fermentation",
    sha: str = SHA_V1,
    system: dict | None = None,
    compared: bool = True,
    **extra,
):
    """Store run_metrics for ``run_id`` the way the run_metrics asset does; returns its info.
    ``system`` is its ``info["system"]`` (default: the demo reference system with its identity);
    ``extra`` more info entries (``role``, ``gates``, ``system_health``…); ``compared``: also a
    comparison_report (without gates), as a run whose chain finished has."""
    info = {
        "run_id": run_id,
        "created_at": created_at,
        "pipeline_version": "0.1.0",
        "versions": {"chunker_version": "md-heading-2:size=800:overlap=0", "index_version": "idx-1"},
        "system": system or {"kind": "reference", "mode": "lexical", "identity": DEMO},
        "golden": golden(name, sha),
        "k": [1, 3, 5, 10],
        **extra,
    }
    breakdowns = pd.DataFrame(
        {"dimension": ["lang"], "value": ["en"], "metric": ["mrr"], "score": [0.5], "n": [3]}
    )
    artifact = RunMetricsArtifact({"mrr": 0.5, "hit@1": None}, {"mrr": 3, "hit@1": 0}, breakdowns, info)
    store.write("run_metrics", run_id, *artifact.to_tables())
    if compared:
        store.write("comparison_report", run_id, {}, {"run_b": run_id, "gates": []})
    return info


def t(minute: int, second: int = 0) -> str:
    return f"2025-03-01T10:{minute:02d}:{second:02d}.000000+00:00"


@pytest.fixture
def store(tmp_path: Path) -> RunStore:
    return RunStore(tmp_path / "artifacts")


def choose(store, run_id, mode, info):
    choice = resolve_baseline(store, run_id, mode, info["golden"], info["created_at"], system=info["system"])
    return choice.run_id, choice.note


# --- none / explicit ----------------------------------------------------------------------------


def test_none_disables_the_comparison_even_with_earlier_runs(store):
    put(store, "r1", t(1))
    me = put(store, "r2", t(2))
    chosen, note = choose(store, "r2", "none", me)
    assert chosen is None and note.startswith("no baseline: comparison disabled")


def test_explicit_run_id_used_missing_or_self_is_a_note(store):
    put(store, "old", t(1))
    me = put(store, "new", t(2))
    assert choose(store, "new", "old", me) == ("old", "baseline 'old' (configured explicitly)")
    assert choose(store, "new", "ghost", me) == (
        None,
        "no baseline: configured baseline run 'ghost' has no stored metrics",
    )
    chosen, note = choose(store, "new", "new", me)
    assert chosen is None and "is this run itself" in note and note.startswith("no baseline: ")
    chosen, note = choose(store, "new", "../etc", me)  # settings refuse it; resolution never raises
    assert chosen is None and "not a valid run id" in note


def test_explicit_baseline_on_another_golden_version_is_used_and_the_note_says_so(store):
    put(store, "v1-run", t(1), sha=SHA_V1)
    put(store, "other-set", t(2), name="other", sha=SHA_OTHER)
    me = put(store, "v2-run", t(3), sha=SHA_V2)
    chosen, note = choose(store, "v2-run", "v1-run", me)
    assert chosen == "v1-run"
    assert "golden set versions differ" in note and SHA_V1[:12] in note and SHA_V2[:12] in note
    chosen, note = choose(store, "v2-run", "other-set", me)
    assert chosen == "other-set" and "golden set 'other'" in note  # a different set is named


# --- previous -----------------------------------------------------------------------------------


def test_previous_is_the_most_recent_strictly_earlier_run_on_the_same_sha(store):
    put(store, "oldest", t(1))
    put(store, "older", t(2))
    put(store, "other-version", t(3), sha=SHA_V2)  # newer, same name, other content: skipped
    put(store, "other-set", t(4), name="other", sha=SHA_OTHER)
    put(store, "later", t(9))  # after this run: never a baseline
    me = put(store, "me", t(5))
    chosen, note = choose(store, "me", "previous", me)
    assert chosen == "older"
    rule = f"the most recent earlier run of {DEMO_LABEL} {ON_V1}"
    assert note == f"baseline 'older' ({rule})"


def test_previous_orders_by_created_at_not_by_storage_order_and_parses_offsets(store):
    # Written out of order; "b" is later than "a" although its time is spelled in another offset.
    put(store, "b", "2025-03-01T12:30:00+02:00")  # 10:30 UTC
    put(store, "a", "2025-03-01T10:20:00+00:00")
    me = put(store, "me", "2025-03-01T10:40:00+00:00")
    assert choose(store, "me", "previous", me)[0] == "b"


def test_previous_ties_are_broken_by_run_id_and_equal_times_are_not_earlier(store):
    put(store, "tie-a", t(1))
    put(store, "tie-c", t(1))
    put(store, "tie-b", t(1))
    put(store, "same-instant", t(2))  # created at the same instant as this run: not earlier
    me = put(store, "me", t(2))
    assert choose(store, "me", "previous", me)[0] == "tie-c"
    assert choose(store, "me", "previous", me)[0] == "tie-c"  # stable across calls


def test_previous_sha_mismatch_note_counts_earlier_runs_on_other_versions(store):
    put(store, "v1-a", t(1), sha=SHA_V1)
    put(store, "v1-b", t(2), sha=SHA_V1)
    put(store, "elsewhere", t(2), name="other", sha=SHA_OTHER)  # another set: not counted
    me = put(store, "v2", t(3), sha=SHA_V2)
    chosen, note = choose(store, "v2", "previous", me)
    assert chosen is None
    assert note == (
        f"no baseline: no earlier run of {DEMO_LABEL} {ON_V2} "
        "(2 earlier runs used other versions of the set; pin one or pass its id to compare across versions)"
    )


def test_previous_with_no_earlier_run_at_all(store):
    me = put(store, "first", t(1))
    chosen, note = choose(store, "first", "previous", me)
    assert chosen is None
    assert note == f"no baseline: no earlier run of {DEMO_LABEL} {ON_V1}"


# --- pinned / auto ------------------------------------------------------------------------------


def test_pinned_without_a_pin_is_a_note(store):
    put(store, "r1", t(1))
    me = put(store, "r2", t(2))
    assert choose(store, "r2", "pinned", me) == (
        None,
        "no baseline: no pinned baseline for golden set 'demo-fermentation' (kebab-eval baseline set ID)",
    )


def test_pinned_and_auto_use_the_pin_over_a_more_recent_run(store):
    put(store, "release", t(1))
    put(store, "nightly", t(2))
    me = put(store, "candidate", t(3))
    pin = pin_baseline(store, "release")
    for mode in ("pinned", "auto"):
        chosen, note = choose(store, "candidate", mode, me)
        assert chosen == "release", mode
        assert f"pinned for golden set 'demo-fermentation' at {pin['pinned_at']}" in note
    assert choose(store, "candidate", "auto", me)[1].startswith("baseline 'release' (auto: pinned")
    assert choose(store, "candidate", "previous", me)[0] == "nightly"  # previous ignores pins


def test_auto_without_a_pin_behaves_as_previous_and_says_so(store):
    put(store, "r1", t(1))
    me = put(store, "r2", t(2))
    chosen, note = choose(store, "r2", "auto", me)
    assert chosen == "r1"
    assert note.startswith("baseline 'r1' (auto: no pinned baseline for golden set 'demo-fermentation', so ")
    assert "the most recent earlier run" in note
    first = put(store, "r0", t(0))
    chosen, note = choose(store, "r0", "auto", first)
    assert chosen is None and note.startswith("no baseline: no pinned baseline") and "no earlier run" in note


def test_a_pin_on_another_golden_version_is_used_with_a_note(store):
    put(store, "v1-release", t(1), sha=SHA_V1)
    pin_baseline(store, "v1-release")
    me = put(store, "v2-run", t(2), sha=SHA_V2)
    chosen, note = choose(store, "v2-run", "auto", me)
    assert chosen == "v1-release" and "golden set versions differ" in note


def test_pin_of_this_run_or_of_a_vanished_run(store, tmp_path):
    put(store, "r1", t(1))
    me = put(store, "r2", t(2))
    pin_baseline(store, "r2")
    chosen, note = choose(store, "r2", "pinned", me)
    assert chosen is None and "is this run itself" in note
    assert choose(store, "r2", "auto", me)[0] == "r1"  # auto falls back to previous

    pin_baseline(store, "r1")
    manifest = tmp_path / "artifacts" / "run_metrics" / "r1" / "_manifest.json"
    manifest.unlink()  # the pinned run's metrics are gone
    chosen, note = choose(store, "r2", "pinned", me)
    assert chosen is None and "run 'r1', has no stored metrics" in note and "baseline set ID" in note
    chosen, note = choose(store, "r2", "auto", me)
    assert chosen is None and "has no stored metrics" in note and "no earlier run" in note


def test_pins_are_per_golden_name(store):
    put(store, "other-release", t(1), name="other", sha=SHA_OTHER)
    put(store, "r1", t(2))
    pin_baseline(store, "other-release")
    me = put(store, "r2", t(3))
    assert choose(store, "r2", "auto", me)[0] == "r1"
    assert choose(store, "r2", "pinned", me)[0] is None


# --- pin storage --------------------------------------------------------------------------------


def test_pin_is_read_back_by_a_new_store_and_overwritten(store, tmp_path):
    put(store, "r1", t(1))
    put(store, "r2", t(2))
    first = pin_baseline(store, "r1")
    assert first["golden"] == "demo-fermentation" and first["replaced"] is None
    assert first["golden_sha256"] == SHA_V1 and first["pinned_at"].endswith("+00:00")

    fresh = RunStore(tmp_path / "artifacts")
    assert read_pins(fresh) == {
        "demo-fermentation": {"run_id": "r1", "golden_sha256": SHA_V1, "pinned_at": first["pinned_at"]}
    }
    second = pin_baseline(fresh, "r2")
    assert second["replaced"] == "r1"
    assert read_pins(store)["demo-fermentation"]["run_id"] == "r2"
    doc = json.loads((tmp_path / "artifacts" / PINS_FILE).read_text())
    assert set(doc) == {"demo-fermentation"}
    # the atomic write leaves no temporary file behind (only the hidden lock file)
    assert sorted(p.name for p in (tmp_path / "artifacts").iterdir()) == [
        f".{PINS_FILE}.lock",
        PINS_FILE,
        "comparison_report",
        "run_metrics",
    ]


def test_no_pin_file_means_no_pins(store):
    assert read_pins(store) == {}
    assert unpin_baseline(store, None) == []


def test_pins_work_on_an_fsspec_store_without_local_rename():
    remote = RunStore("memory://kebab-eval-baseline-test/artifacts")
    put(remote, "r1", t(1))
    pin_baseline(remote, "r1")
    again = RunStore("memory://kebab-eval-baseline-test/artifacts")
    assert read_pins(again)["demo-fermentation"]["run_id"] == "r1"
    me = put(again, "r2", t(2))
    assert choose(again, "r2", "auto", me)[0] == "r1"
    assert unpin_baseline(again, "demo-fermentation") == ["demo-fermentation"]
    assert read_pins(remote) == {}


def test_pin_of_a_run_without_metrics_names_the_run(store):
    with pytest.raises(InputError) as caught:
        pin_baseline(store, "never-ran")
    assert caught.value.offenders[0].file == "run never-ran"
    assert "no stored run_metrics" in caught.value.offenders[0].reason
    with pytest.raises(InputError, match="invalid run id"):
        pin_baseline(store, "../escape")
    assert read_pins(store) == {}


def test_clear_by_name_only_pin_and_ambiguity(store):
    put(store, "r1", t(1))
    put(store, "o1", t(1), name="other", sha=SHA_OTHER)
    pin_baseline(store, "r1")
    pin_baseline(store, "o1")
    with pytest.raises(InputError) as caught:
        unpin_baseline(store, None)
    assert "'demo-fermentation', 'other'" in str(caught.value)
    with pytest.raises(InputError, match="'typo' has no pin"):
        unpin_baseline(store, "typo")
    assert unpin_baseline(store, "other") == ["other"]
    assert set(read_pins(store)) == {"demo-fermentation"}
    assert unpin_baseline(store, None) == ["demo-fermentation"]  # the only pin left
    assert read_pins(store) == {}


@pytest.mark.parametrize(
    "content",
    ["{not json", "[1, 2]", '{"demo-fermentation": {"run_id": "r1"}}', '{"x": "r1"}', b"\xff\xfe"],
)
def test_corrupt_pin_file_is_an_input_error_naming_it(store, tmp_path, content):
    put(store, "r1", t(1))
    me = put(store, "r2", t(2))
    path = tmp_path / "artifacts" / PINS_FILE
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    for action in (
        lambda: read_pins(store),
        lambda: pin_baseline(store, "r1"),
        lambda: choose(store, "r2", "auto", me),
    ):
        with pytest.raises(InputError) as caught:
            action()
        assert str(path) in str(caught.value) and "corrupt" in str(caught.value)
    assert choose(store, "r2", "previous", me)[0] == "r1"  # previous never reads pins


# --- settings -----------------------------------------------------------------------------------


def test_settings_default_is_auto_and_explicit_ids_are_checked_at_load():
    assert settings_from_dict({}).baseline == "auto"
    for value in ("auto", "previous", "pinned", "none", "nightly-2025-03-01", "run-20250301T101500"):
        assert settings_from_dict({"baseline": value}).baseline == value
    with pytest.raises(InputError) as caught:
        settings_from_dict({"baseline": "../other"})
    assert caught.value.offenders[0].field == "baseline"
    assert "nor a valid run id" in str(caught.value)


# --- system identity ----------------------------------------------------------------------------

COMMAND = make_identity("command", "python my_search.py '{query}'", None)
DEAD_HTTP = make_identity("http", "http://127.0.0.1:9/search", None)


def test_previous_and_auto_choose_only_runs_of_the_same_system(store):
    """The issue's mix: the demo, a user's command system and a dead http server on one golden set.
    Each run is compared with an earlier run of its own system, or with nothing, and says why."""
    put(store, "demo-1", t(1))
    put(store, "old-ref", t(2), system={"kind": "reference", "mode": "lexical"})  # stored pre-identity
    put(store, "cmd-1", t(3), system={"kind": "command", "identity": COMMAND})
    put(store, "dead", t(4), system={"kind": "http", "identity": DEAD_HTTP})
    demo = put(store, "demo-2", t(5))
    cmd = put(store, "cmd-2", t(6), system={"kind": "command", "identity": COMMAND})
    http = put(store, "http-1", t(7), system={"kind": "http", "identity": DEAD_HTTP})

    for mode in ("previous", "auto"):
        assert choose(store, "demo-2", mode, demo)[0] == "demo-1"  # not the later command/http runs
        assert choose(store, "cmd-2", mode, cmd)[0] == "cmd-1"
        assert choose(store, "http-1", mode, http)[0] == "dead"
    first_cmd = store.manifest("run_metrics", "cmd-1")["info"]
    chosen, note = choose(store, "cmd-1", "auto", first_cmd)
    assert chosen is None
    assert note == (
        "no baseline: no pinned baseline for golden set 'demo-fermentation', and no earlier run of "
        f"command `python my_search.py '{{query}}'` {ON_V1}; 1 earlier run(s) of other systems on this "
        "set skipped, 1 earlier run(s) stored without a system identity skipped (made before identities "
        "were recorded) (pin one or pass its id to compare two systems)"
    )


def test_a_run_recording_no_identity_gets_no_automatic_baseline(store):
    put(store, "r1", t(1))
    me = put(store, "r2", t(2), system={"kind": "reference", "mode": "lexical"})
    chosen, note = choose(store, "r2", "previous", me)
    assert (
        chosen is None and note == "no baseline: this run records no system identity to match earlier runs on"
    )


def test_old_runs_whose_details_name_the_system_still_chain(store):
    # A command run stored before identities: its argv detail derives the identity a new run records.
    put(store, "old-cmd", t(1), system={"kind": "command", "search_argv": COMMAND["target"]})
    me = put(store, "new-cmd", t(2), system={"kind": "command", "identity": COMMAND})
    assert choose(store, "new-cmd", "previous", me)[0] == "old-cmd"


def test_failed_runs_of_other_systems_are_other_systems_and_of_this_one_are_skipped(store):
    failed = {"failed": 88, "healthy": False, "blocking": True, "message": "88 of 88 queries failed"}
    put(store, "ok", t(1), system={"kind": "http", "identity": DEAD_HTTP})
    for run_id, minute, system in (
        ("down", 2, {"kind": "http", "identity": DEAD_HTTP}),
        ("cmd-down", 3, {"kind": "command", "identity": COMMAND}),
    ):
        info = {**put(store, run_id, t(minute), system=system), "system_health": failed}
        store.write("run_metrics", run_id, *RunMetricsArtifact({}, {}, pd.DataFrame(), info).to_tables())
    me = put(store, "me", t(4), system={"kind": "http", "identity": DEAD_HTTP})
    chosen, note = choose(store, "me", "previous", me)
    assert chosen == "ok" and note.endswith(
        "; skipped 1 later run(s): 'down' failed system_health (its system under test failed))"
    )
    # The dead server's run gets no baseline from the demo: "regression 88" was a wrong answer.
    put(store, "demo", t(5))
    dead = put(
        store, "dead-first", t(6), system={"kind": "http", "identity": make_identity("http", "x", None)}
    )
    chosen, note = choose(store, "dead-first", "auto", dead)
    assert chosen is None and "5 earlier run(s) of other systems on this set skipped" in note


def test_explicit_and_pinned_baselines_of_another_system_are_used(store):
    put(store, "demo-1", t(1))
    pin_baseline(store, "demo-1")
    me = put(store, "cmd-1", t(2), system={"kind": "command", "identity": COMMAND})
    assert choose(store, "cmd-1", "demo-1", me)[0] == "demo-1"
    assert choose(store, "cmd-1", "pinned", me)[0] == "demo-1"
    assert choose(store, "cmd-1", "auto", me)[0] == "demo-1"  # the pin is a deliberate choice
    assert choose(store, "cmd-1", "previous", me)[0] is None


# --- outcome and role family (run_roles, compare.outcome) ----------------------------------------


def gate(name: str, passed: bool, blocking: bool = True, skipped: bool = False) -> dict:
    return {"name": name, "passed": passed, "blocking": blocking, "skipped": skipped}


MISSED_MIN = [gate("gate_mrr_min", False)]
DOWN = {"failed": 3, "healthy": False, "blocking": True, "message": "3 of 3 queries failed"}


def role(name: str, sweep: str | None = None) -> dict:
    return {"role": name, "source": "test", "sweep": sweep}


def comparison(store, run_id: str, gates: list[dict]) -> None:
    store.write("comparison_report", run_id, {}, {"run_b": run_id, "gates": gates})


def test_run_outcome_is_judged_from_the_stored_verdicts_and_gates():
    ok = {"system_health": {"healthy": True, "blocking": True}, "gates": [gate("gate_mrr_min", True)]}
    assert run_outcome(ok, {"gates": []}) == RunOutcome("passed", (), True, "")
    # a non-blocking miss, a skipped gate and an unhealthy system that does not block: all pass
    lenient = {
        "system_health": {"healthy": False, "blocking": False},
        "gates": [gate("gate_chr_min", False, blocking=False), gate("gate_hit_at_1_min", True, skipped=True)],
    }
    assert run_outcome(lenient, {"gates": [gate("gate_mrr_max_drop", True, skipped=True)]}).passed
    failed = run_outcome(
        {"system_health": DOWN, "gates": MISSED_MIN}, {"gates": [gate("gate_mrr_max_p", False)]}
    )
    assert failed.failed == ("system_health", "gate_mrr_min", "gate_mrr_max_p")
    assert failed.reason() == (
        "failed system_health (its system under test failed), gate_mrr_min, gate_mrr_max_p"
    )
    assert failed.label() == "failed (system_health, gate_mrr_min, gate_mrr_max_p)"
    # no comparison stored: judged on the metrics alone, and it says so
    alone = run_outcome(ok)
    assert alone.passed and not alone.compared and "comparison never ran" in alone.note
    assert metrics_outcome({"gates": MISSED_MIN}) == {
        "outcome": "failed",
        "system_healthy": None,  # not recorded (a run stored before system-health checks)
        "failed": ["gate_mrr_min"],
        "covers": "system health and absolute gates (the regression gates: comparison_report)",
    }


def test_previous_skips_a_run_that_failed_a_blocking_gate_and_names_it(store):
    """The issue's max_drop false pass: the run after a failed one was compared with it."""
    put(store, "good", t(1))
    put(store, "bad", t(2), compared=False, gates=MISSED_MIN)  # a failed gate stops the chain
    put(store, "regressed", t(3), gates=[gate("gate_mrr_min", True)])
    comparison(store, "regressed", [gate("gate_mrr_max_drop", False)])  # failed against 'good'
    me = put(store, "me", t(4), compared=False)
    for mode in ("previous", "auto"):
        choice = resolve_baseline(store, "me", mode, me["golden"], me["created_at"], me["system"])
        assert choice.run_id == "good"
        assert choice.note.endswith(
            "; skipped 2 later run(s): 'regressed' failed gate_mrr_max_drop; 'bad' failed gate_mrr_min)"
        )
        assert [s.as_dict() for s in choice.skipped] == [
            {"run_id": "regressed", "reason": "failed gate_mrr_max_drop"},
            {"run_id": "bad", "reason": "failed gate_mrr_min"},
        ]


def test_a_non_blocking_miss_or_a_skipped_gate_does_not_make_a_run_skipped(store):
    put(store, "warned", t(1), gates=[gate("gate_chr_min", False, blocking=False)])
    me = put(store, "me", t(2))
    assert choose(store, "me", "previous", me) == (
        "warned",
        f"baseline 'warned' (the most recent earlier run of {DEMO_LABEL} {ON_V1})",
    )


def test_no_passing_run_is_a_note_naming_every_skipped_run(store):
    put(store, "down", t(1), system_health=DOWN)
    put(store, "bad", t(2), gates=MISSED_MIN)
    put(store, "variant", t(3), role=role("sweep-variant", "sizes"))
    me = put(store, "me", t(4))
    chosen, note = choose(store, "me", "previous", me)
    assert chosen is None
    assert note == (
        f"no baseline: no earlier run of {DEMO_LABEL} {ON_V1} that passed its blocking gates; "
        "skipped 2 earlier run(s): 'bad' failed gate_mrr_min; "
        "'down' failed system_health (its system under test failed); "
        "1 earlier run(s) of other role families skipped (1 variant(s) of sweep 'sizes': "
        "regular runs are compared with each other)"
    )


def test_a_long_list_of_skipped_runs_is_cut_and_counted(store):
    put(store, "good", t(0))
    for minute in range(1, 9):
        put(store, f"bad-{minute}", t(minute), gates=MISSED_MIN)
    me = put(store, "me", t(10))
    choice = resolve_baseline(store, "me", "previous", me["golden"], me["created_at"], me["system"])
    assert choice.run_id == "good" and len(choice.skipped) == 8
    assert "skipped 8 later run(s): 'bad-8' failed gate_mrr_min; 'bad-7'" in choice.note
    assert choice.note.endswith("'bad-4' failed gate_mrr_min; and 3 more)")


def test_a_named_systems_sweep_variant_is_never_a_regular_runs_baseline(store):
    """The issue: with ``system.name`` every variant is 'the same system' as production runs."""
    named = {"kind": "command", "identity": make_identity("command", None, None, name="search")}
    put(store, "prod-1", t(1), system=named, role=role("nightly"))
    put(store, "sweep-sizes-a", t(2), system=named, role=role("sweep-variant", "sizes"))
    put(store, "sweep-other-a", t(3), system=named, role=role("sweep-variant", "other"))
    prod = put(store, "prod-2", t(4), system=named, role=role("ci"))
    chosen, note = choose(store, "prod-2", "previous", prod)
    assert chosen == "prod-1"  # a nightly run baselines a CI run: one family
    assert note.endswith(
        "; skipped 2 later run(s): 'sweep-other-a' is a variant of sweep 'other'; "
        "'sweep-sizes-a' is a variant of sweep 'sizes')"
    )
    # a sweep's variants are compared with each other: never with production, nor another sweep
    variant = put(store, "sweep-sizes-b", t(5), system=named, role=role("sweep-variant", "sizes"))
    got = resolve_baseline(
        store, "sweep-sizes-b", "previous", variant["golden"], variant["created_at"], variant["system"],
        role_of("sweep-sizes-b", variant),
    )  # fmt: skip
    assert got.run_id == "sweep-sizes-a" and got.skipped == ()
    assert got.note == (
        "baseline 'sweep-sizes-a' (the most recent earlier variant of sweep 'sizes' on golden set "
        f"'demo-fermentation' at sha256 {SHA_V1[:12]}…)"
    )


def test_variants_of_one_sweep_are_compared_whatever_they_vary_and_the_first_gets_none(store):
    # an unnamed system: a swept mode changes the identity, yet the variants are one sweep's
    lexical = {"kind": "reference", "identity": make_identity("reference", "demo corpus", "lexical")}
    hybrid = {"kind": "reference", "identity": make_identity("reference", "demo corpus", "hybrid")}
    put(store, "prod", t(1), system=lexical)
    first = put(store, "v-lexical", t(2), system=lexical, role=role("sweep-variant", "modes"))
    second = put(store, "v-hybrid", t(3), system=hybrid, role=role("sweep-variant", "modes"))

    def pick(run_id, info):
        return resolve_baseline(
            store, run_id, "auto", info["golden"], info["created_at"], info["system"], role_of(run_id, info)
        )

    assert pick("v-hybrid", second).run_id == "v-lexical"
    none = pick("v-lexical", first)
    assert none.run_id is None and none.note.endswith(
        "no earlier variant of sweep 'modes' on golden set 'demo-fermentation' at sha256 "
        f"{SHA_V1[:12]}…; 1 earlier run(s) on this set that are not variants of the sweep skipped "
        "(a variant is compared with the sweep's other variants)"
    )


def test_experiments_are_compared_with_experiments_only(store):
    put(store, "prod-1", t(1))
    exp_1 = put(store, "exp-1", t(2), role=role("experiment"))
    prod = put(store, "prod-2", t(3))
    exp_2 = put(store, "exp-2", t(4), role=role("experiment"))
    assert choose(store, "prod-2", "previous", prod)[0] == "prod-1"
    got = resolve_baseline(
        store,
        "exp-2",
        "previous",
        exp_2["golden"],
        exp_2["created_at"],
        exp_2["system"],
        role_of("exp-2", exp_2),
    )
    assert got.run_id == "exp-1" and "the most recent earlier experiment of " in got.note
    assert got.skipped == (Skipped("prod-2", "is a regular run (unknown)"),)
    first = resolve_baseline(
        store,
        "exp-1",
        "previous",
        exp_1["golden"],
        exp_1["created_at"],
        exp_1["system"],
        role_of("exp-1", exp_1),
    )
    assert first.run_id is None and first.note.endswith(
        "; 1 earlier run(s) of other role families skipped (1 regular run(s): experiments are compared "
        "with each other)"
    )
    assert first.skipped == (Skipped("prod-1", "is a regular run (unknown)"),)  # every one, for the JSON


def test_a_pinned_or_explicit_failed_run_is_used_and_flagged(store):
    put(store, "release", t(1), gates=MISSED_MIN)
    pin_baseline(store, "release")
    put(store, "variant", t(2), role=role("sweep-variant", "sizes"))
    me = put(store, "me", t(3))
    for mode in ("auto", "pinned"):
        choice = resolve_baseline(store, "me", mode, me["golden"], me["created_at"], me["system"])
        assert choice.run_id == "release"
        assert choice.note.endswith("; pinned baseline 'release' failed its blocking checks: gate_mrr_min)")
        assert choice.warnings == ("pinned baseline 'release' failed its blocking checks: gate_mrr_min",)
    explicit = resolve_baseline(store, "me", "variant", me["golden"], me["created_at"], me["system"])
    assert explicit.run_id == "variant" and explicit.warnings == (
        "configured baseline 'variant' is a variant of sweep 'sizes'; this run is a regular run (manual)",
    )
    assert explicit.note == f"baseline 'variant' (configured explicitly; {explicit.warnings[0]})"
    # a passing pin of the same family: nothing to say
    unpin_baseline(store, None)
    put(store, "good", t(0))
    assert resolve_baseline(store, "me", "good", me["golden"], me["created_at"], me["system"]).warnings == ()


def test_runs_stored_before_roles_and_outcomes_still_chain_by_their_stored_gates(store):
    # no role, no outcome recorded: regular runs, judged on the gates and verdict they stored
    put(store, "old-good", t(1))
    put(store, "old-bad", t(2), gates=MISSED_MIN)
    put(store, "sweep-sizes-x", t(3), sweep={"name": "sizes", "variant": "x"})  # an old variant
    me = put(store, "me", t(4), role=role("ci"))
    choice = resolve_baseline(
        store, "me", "previous", me["golden"], me["created_at"], me["system"], role_of("me", me)
    )
    assert choice.run_id == "old-good"
    assert [s.run_id for s in choice.skipped] == ["sweep-sizes-x", "old-bad"]


def test_a_run_whose_comparison_never_ran_is_judged_on_its_metrics_and_the_note_says_so(store):
    put(store, "crashed", t(1), compared=False)
    me = put(store, "me", t(2))
    chosen, note = choose(store, "me", "previous", me)
    assert chosen == "crashed" and note.endswith(
        "; 'crashed': its comparison never ran: judged on its system health and absolute gates only)"
    )


def test_previous_run_is_pure_and_reads_a_comparison_only_for_a_run_that_could_be_chosen():
    def manifest(run_id, minute, **extra):
        info = {"created_at": t(minute), "golden": golden(), "system": {"identity": DEMO}, **extra}
        return {"run_id": run_id, "written_at": t(minute), "info": info}

    runs = [manifest("a", 1), manifest("b", 2), manifest("c", 3, gates=MISSED_MIN)]
    comparisons = {"a": {"gates": []}, "b": {"gates": [gate("gate_mrr_max_drop", False)]}}
    asked = []

    def comparison_of(run_id):
        asked.append(run_id)
        return comparisons.get(run_id)

    chosen, why, skipped = previous_run(
        "me", golden(), t(5), {"identity": DEMO}, role_of("me", {}), runs, comparison_of
    )
    assert chosen == "a" and [s.run_id for s in skipped] == ["c", "b"]
    assert why.endswith("; skipped 2 later run(s): 'c' failed gate_mrr_min; 'b' failed gate_mrr_max_drop")
    assert asked == ["b", "a"]  # 'c' failed on its metrics: its comparison was never read
    assert flag_baseline("c", "pinned", runs[2]["info"], None, role_of("me", {})) == [
        "pinned baseline 'c' failed its blocking checks: gate_mrr_min"
    ]
