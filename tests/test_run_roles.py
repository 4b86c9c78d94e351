"""A run's role (run_roles.py): decided from how it was started, read back from what it stored."""

from __future__ import annotations

import pytest

from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.foundation.run_ids import (
    TRIGGER_TAG,
    golden_change_run_id,
    new_run_id,
    nightly_run_id,
    system_change_run_id,
)
from kebab_eval_pipeline.foundation.run_roles import (
    ROLE_TAG,
    ROLES,
    SETTABLE_ROLES,
    RunRole,
    check_role,
    check_role_filter,
    decide_role,
    matches_role,
    role_of,
)


@pytest.mark.parametrize(
    ("trigger", "role"),
    [
        ("nightly", "nightly"),
        ("system-change", "system-change"),
        ("golden-change", "golden-change"),
        ("ci", "ci"),
        ("cli", "manual"),
    ],
)
def test_the_trigger_tag_of_each_launcher_decides_the_role(trigger, role):
    decided = decide_role({TRIGGER_TAG: trigger})
    assert decided == RunRole(role, f"run tag {TRIGGER_TAG}={trigger}")
    assert decided.family == "regular"


def test_without_tags_the_launchers_default_and_its_reason():
    assert decide_role({}).role == "manual"
    assert "no kebab-eval/role or kebab-eval/trigger tag" in decide_role({}).source
    assert decide_role({}, default="team-check").role == "team-check"
    # a trigger the package does not know (rejudge of a legacy run): the default, saying which tag
    rejudged = decide_role({TRIGGER_TAG: "rejudge"})
    assert rejudged.role == "manual" and "kebab-eval/trigger=rejudge" in rejudged.source


def test_the_role_tag_wins_over_the_trigger_and_a_bad_one_is_refused_naming_the_tag():
    assert decide_role({TRIGGER_TAG: "nightly", ROLE_TAG: "experiment"}) == RunRole(
        "experiment", "run tag kebab-eval/role=experiment"
    )
    assert decide_role({ROLE_TAG: "experiment"}).family == "experiment"
    with pytest.raises(InputError) as caught:
        decide_role({ROLE_TAG: "nighty"})
    assert caught.value.offenders[0].file == "run tag kebab-eval/role"
    assert "'nighty': expected one of ci, nightly" in caught.value.offenders[0].reason
    with pytest.raises(InputError, match="kebab-eval sweep"):  # told by its run id, never set
        check_role("sweep-variant")


def test_a_sweep_variant_is_a_variant_whatever_its_tags_say():
    variant = decide_role({TRIGGER_TAG: "ci", ROLE_TAG: "nightly"}, sweep="sizes")
    assert (variant.role, variant.sweep, variant.family) == ("sweep-variant", "sizes", "sweep sizes")
    assert "does not apply to a variant" in variant.source
    assert variant.label == "sweep-variant (sizes)" and variant.described() == "a variant of sweep 'sizes'"
    # one sweep's variants are one family; another sweep's are another
    assert decide_role({}, sweep="other").family != variant.family


def test_role_of_reads_the_recorded_role_and_derives_one_for_older_runs():
    recorded = {"role": {"role": "nightly", "source": "run tag kebab-eval/trigger=nightly", "sweep": None}}
    assert role_of("anything", recorded) == RunRole("nightly", "run tag kebab-eval/trigger=nightly")
    # stored before roles: its sweep entry, then an id the package generated, else unknown (regular)
    assert role_of("x", {"sweep": {"name": "sizes", "variant": "a"}}).family == "sweep sizes"
    assert role_of(nightly_run_id(), {}).role == "nightly"
    assert role_of("nightly-2025-03-01", {}).role == "nightly"  # an earlier version's nightly id
    assert role_of(new_run_id(environ={"CI": "true", "GITHUB_SHA": "ab" * 20}), {}).role == "ci"
    assert role_of(golden_change_run_id(None, "9f" * 32), {}).role == "golden-change"
    assert role_of(system_change_run_id(None, {"index": "v2"}), {}).role == "system-change"
    for run_id in ("alice-20250301-101500", "release-1", "nightly-build", "ci-tests"):
        unknown = role_of(run_id, {})
        assert (unknown.role, unknown.family) == ("unknown", "regular"), run_id
    # a recorded role the package does not know (written by hand): derived instead, never trusted
    assert role_of("release-1", {"role": {"role": "bogus"}}).role == "unknown"


def test_filters_accept_roles_the_regular_family_and_one_sweep():
    nightly, variant = RunRole("nightly", ""), RunRole("sweep-variant", "", "sizes")
    experiment = RunRole("experiment", "")
    assert matches_role(nightly, "nightly") and not matches_role(nightly, "ci")
    assert matches_role(nightly, "regular") and not matches_role(variant, "regular")
    assert not matches_role(experiment, "regular") and matches_role(experiment, "experiment")
    assert matches_role(variant, "sweep-variant") and matches_role(variant, "sweep:sizes")
    assert not matches_role(variant, "sweep:other")
    assert check_role_filter(["regular", "sweep:sizes", *ROLES]) == ["regular", "sweep:sizes", *ROLES]
    with pytest.raises(InputError) as caught:
        check_role_filter(["nighty", "sweep:", "ci"])
    assert [o.reason.split(":")[0] for o in caught.value.offenders] == ["'nighty'", "'sweep"]
    assert set(SETTABLE_ROLES) < set(ROLES)
