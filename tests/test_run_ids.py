"""Run ids: valid for any time and environment, sortable by time, their time readable back."""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kebab_eval_pipeline.foundation.run_ids import (
    COMMIT_ENV,
    USER_ENV,
    check_run_id,
    golden_change_run_id,
    in_ci,
    login_name,
    new_run_id,
    nightly_run_id,
    nightly_run_of_day,
    run_id_time,
    sort_run_ids,
    system_change_run_id,
    user_slug,
    versions_digest,
)
from tests.golden.test_properties import SETTINGS

NOW = datetime(2025, 3, 1, 10, 15, 0, 987654, tzinfo=UTC)
SHA = "0123456789abcdef0123456789abcdef01234567"

OFFSETS = st.timedeltas(min_value=-timedelta(hours=23, minutes=59), max_value=timedelta(hours=23, minutes=59))
# Aware (any offset) and naive (= UTC) times whose UTC value stays within datetime's years.
TIMES = st.datetimes(
    min_value=datetime(1, 1, 2),
    max_value=datetime(9999, 12, 30),
    timezones=st.none() | st.builds(timezone, OFFSETS),
)
NAMES = st.text() | st.sampled_from(
    ["", " ", "김치", "Jean Luc", "..", "CORP\\bob", "-x-", "root", "a" * 200]
)
VALUES = (
    st.text()
    | st.from_regex(r"[0-9a-fA-F]{0,70}", fullmatch=True)
    | st.sampled_from(["true", "TRUE ", "1", "false", "0", "no", "off", "", "woodpecker", "$GITHUB_SHA"])
)
ENVS = st.dictionaries(st.sampled_from(["CI", *COMMIT_ENV, *USER_ENV, "HOME"]), VALUES | NAMES)


def utc_second(now: datetime) -> datetime:
    """What an id keeps of ``now``: its UTC value to the second."""
    now = now if now.tzinfo else now.replace(tzinfo=UTC)
    return now.astimezone(UTC).replace(microsecond=0)


@settings(max_examples=300, **SETTINGS)
@given(now=TIMES, environ=ENVS)
@example(now=datetime(5, 1, 1), environ={})  # %Y is not zero-padded below year 1000 on glibc
def test_any_time_and_environment_gives_a_valid_id_with_its_time(now, environ):
    run_id = new_run_id(now, environ)
    assert check_run_id(run_id) == run_id and len(run_id) <= 64
    assert run_id_time(run_id) == utc_second(now)
    assert run_id.startswith("ci-") if in_ci(environ) else run_id.startswith(user_slug(login_name(environ)))
    for generated in (nightly_run_id(now), golden_change_run_id(now, SHA)):
        assert check_run_id(generated) == generated
        assert run_id_time(generated) == utc_second(now)


@settings(max_examples=200, **SETTINGS)
@given(times=st.lists(TIMES, min_size=2, max_size=8), environ=ENVS)
def test_ids_of_one_origin_sort_lexically_in_time_order(times, environ):
    for make in (
        lambda t: new_run_id(t, environ),
        nightly_run_id,
        lambda t: golden_change_run_id(t, SHA),
    ):
        pairs = [(make(t), utc_second(t)) for t in times]
        assert sorted(run_id for run_id, _ in pairs) == [
            run_id for run_id, _ in sorted(pairs, key=lambda p: p[1])
        ]
        # and the reverse: sorting by what run_id_time reads agrees with the lexical order
        assert sort_run_ids(run_id for run_id, _ in pairs) == sorted(run_id for run_id, _ in pairs)


@settings(max_examples=300, **SETTINGS)
@given(name=NAMES | st.none())
def test_user_slug_is_always_usable(name):
    slug = user_slug(name)
    assert re.fullmatch(r"[a-z0-9]([a-z0-9._-]{0,30}[a-z0-9])?", slug), slug
    assert ".." not in slug
    check_run_id(f"{slug}-20250301-101500")


@pytest.mark.parametrize(
    ("name", "slug"),
    [
        ("alice", "alice"),
        ("Alice.Smith", "alice.smith"),
        ("Jean Luc", "jean-luc"),
        ("José", "jose"),
        ("CORP\\bob", "corp-bob"),
        ("김치", "local"),  # nothing ASCII survives
        ("김민수 Kim", "kim"),
        ("  ..evil../..  ", "evil"),
        ("a..b", "a.b"),
        ("", "local"),
        (None, "local"),
        ("x" * 100, "x" * 32),
        ("a" * 31 + " b", "a" * 31),  # cut at 32 characters, then the trailing '-' trimmed
    ],
)
def test_user_slug_examples(name, slug):
    assert user_slug(name) == slug


def test_local_id_uses_the_login_name_from_the_environment():
    assert new_run_id(NOW, {"LOGNAME": "", "USER": "Alice Smith"}) == "alice-smith-20250301-101500"
    assert new_run_id(NOW, {"LOGNAME": "김치"}) == "local-20250301-101500"
    assert new_run_id(NOW, {"USERNAME": "WIN\\Bob", "CI": "false"}) == "win-bob-20250301-101500"
    # a commit outside CI does not make a CI id
    assert new_run_id(NOW, {"USER": "alice", "GITHUB_SHA": SHA}) == "alice-20250301-101500"


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({"CI": "true"}, "ci-20250301-101500"),
        ({"CI": "true", "GITHUB_SHA": SHA}, "ci-20250301-101500-0123456"),
        ({"CI": "1", "CI_COMMIT_SHA": SHA.upper()}, "ci-20250301-101500-0123456"),
        ({"CI": "woodpecker", "CIRCLE_SHA1": "fedcba9"}, "ci-20250301-101500-fedcba9"),
        # bad commit values are skipped (the next variable is tried), never put into the id
        ({"CI": "true", "GITHUB_SHA": "$GITHUB_SHA", "CI_COMMIT_SHA": "main"}, "ci-20250301-101500"),
        ({"CI": "true", "GITHUB_SHA": "abc123"}, "ci-20250301-101500"),  # too short
        ({"CI": "true", "GITHUB_SHA": "g" * 40, "GIT_COMMIT": "a" * 40}, "ci-20250301-101500-aaaaaaa"),
        ({"CI": "true", "GITHUB_SHA": "0123456789-abcdef"}, "ci-20250301-101500"),
        ({"CI": "false", "USER": "bob", "GITHUB_SHA": SHA}, "bob-20250301-101500"),
        ({"CI": "0", "USER": "bob"}, "bob-20250301-101500"),
        ({"CI": "", "USER": "bob"}, "bob-20250301-101500"),
        ({"CI": " No ", "USER": "bob"}, "bob-20250301-101500"),
    ],
)
def test_ci_detection_and_commit(environ, expected):
    assert new_run_id(NOW, environ) == expected


def test_time_is_utc_and_naive_means_utc():
    seoul = timezone(timedelta(hours=9))
    assert new_run_id(datetime(2025, 3, 1, 8, 0, tzinfo=seoul), {"CI": "1"}) == "ci-20250228-230000"
    assert new_run_id(datetime(2025, 3, 1, 8, 0), {"CI": "1"}) == "ci-20250301-080000"
    assert re.fullmatch(r"ci-\d{8}-\d{6}", new_run_id(environ={"CI": "1"}))  # now
    with pytest.raises(ValueError, match="outside the years"):
        new_run_id(datetime(1, 1, 1, tzinfo=seoul), {})


def test_nightly_and_golden_change_ids():
    assert nightly_run_id(NOW) == "nightly-20250301-101500"
    assert golden_change_run_id(NOW, SHA.upper()) == "golden-20250301-101500-01234567"
    with pytest.raises(ValueError, match="not a sha256"):
        golden_change_run_id(NOW, "not-hex!")
    ids = ["alice-20250301-030000", "nightly-20250228-230000", "nightly-20250301-020512"]
    assert nightly_run_of_day(ids, date(2025, 3, 1)) == "nightly-20250301-020512"
    assert nightly_run_of_day(ids, date(2025, 3, 2)) is None
    assert nightly_run_of_day(["nightly-2025-03-02"], date(2025, 3, 2)) == "nightly-2025-03-02"  # old form
    # in a time zone: 23:00 UTC on 28 February is 1 March in Berlin (UTC+1), 02:05 UTC still 1 March
    berlin = ZoneInfo("Europe/Berlin")
    assert nightly_run_of_day(ids, date(2025, 3, 1), berlin) == "nightly-20250228-230000"
    assert nightly_run_of_day(ids[1:2], date(2025, 2, 28), berlin) is None


def test_system_change_ids():
    versions = {"index_version": "i2", "chunker_version": "c1"}
    # the digest of the sorted compact JSON, worked out independently
    text = '{"chunker_version":"c1","index_version":"i2"}'
    assert versions_digest(versions) == hashlib.sha256(text.encode()).hexdigest()
    assert versions_digest(dict(reversed(versions.items()))) == versions_digest(versions)
    run_id = system_change_run_id(NOW, versions)
    assert run_id == f"system-change-20250301-101500-{hashlib.sha256(text.encode()).hexdigest()[:8]}"
    assert check_run_id(run_id) == run_id and run_id_time(run_id) == NOW.replace(microsecond=0)
    assert system_change_run_id(NOW, {**versions, "index_version": "i3"}) != run_id


@pytest.mark.parametrize(
    ("run_id", "expected"),
    [
        ("ci-20250301-101500-0123456", datetime(2025, 3, 1, 10, 15, tzinfo=UTC)),
        ("alice-20250301-101500", datetime(2025, 3, 1, 10, 15, tzinfo=UTC)),
        ("jean-luc-20250301-101500", datetime(2025, 3, 1, 10, 15, tzinfo=UTC)),
        # a login name that itself looks like a time: the last timestamp counts
        ("x-20240101-000000-20250301-101500", datetime(2025, 3, 1, 10, 15, tzinfo=UTC)),
        ("golden-20250301-101500-01234567", datetime(2025, 3, 1, 10, 15, tzinfo=UTC)),
        # the forms of earlier versions
        ("run-20250301T101500", datetime(2025, 3, 1, 10, 15, tzinfo=UTC)),
        ("golden-20250301T101500-01234567", datetime(2025, 3, 1, 10, 15, tzinfo=UTC)),
        ("nightly-2025-03-01", datetime(2025, 3, 1, tzinfo=UTC)),
        # hand-chosen ids and impossible dates
        ("release-1", None),
        ("demo-2", None),
        ("20250301", None),
        ("nightly-20250301", None),
        ("a-20251301-101500", None),
        ("a-20250230-101500", None),
        ("a-20250301-246000", None),
        ("a-20250301-101500-bad-suffix", None),
    ],
)
def test_run_id_time(run_id, expected):
    assert run_id_time(run_id) == expected


def test_sort_run_ids_orders_by_time_then_registration():
    registered = [
        "release-1",  # hand-chosen, no artifacts: after every timed id
        "nightly-20250302-020000",
        "alice-20250301-120000",
        "manual",  # hand-chosen, created_at known
        "ci-20250301-090000-0123456",
        "run-20250301T100000",
        "nightly-2025-03-01",
        "zeta",  # hand-chosen, created_at unreadable
        "seoul",  # created_at with an offset: 2025-03-01 10:30 UTC
        "naive",  # created_at without offset: UTC
    ]
    created_at = {
        "manual": "2025-03-01T11:00:00+00:00",
        "alice-20250301-120000": "2020-01-01T00:00:00+00:00",  # the id's own time wins
        "zeta": "yesterday",
        "seoul": "2025-03-01T19:30:00+09:00",
        "naive": datetime(2025, 3, 1, 10, 45),
        "release-1": None,
    }
    assert sort_run_ids(registered, created_at) == [
        "nightly-2025-03-01",
        "ci-20250301-090000-0123456",
        "run-20250301T100000",
        "seoul",
        "naive",
        "manual",
        "alice-20250301-120000",
        "nightly-20250302-020000",
        "release-1",
        "zeta",
    ]
    # without created_at the hand-chosen ids keep registration order at the end
    assert sort_run_ids(registered)[-5:] == ["release-1", "manual", "zeta", "seoul", "naive"]


@settings(max_examples=200, **SETTINGS)
@given(
    ids=st.lists(
        st.builds(lambda t, env: new_run_id(t, env), TIMES, ENVS)
        | st.sampled_from(["a", "b", "demo-1", "x.y"]),
        max_size=12,
    )
)
def test_sort_run_ids_is_a_stable_time_sort(ids):
    ordered = sort_run_ids(ids)
    assert sorted(ordered) == sorted(ids)  # a permutation, duplicates kept
    times = [run_id_time(i) for i in ordered]
    timed = [t for t in times if t is not None]
    assert times[: len(timed)] == timed == sorted(timed)  # timed first, oldest first
    assert ordered[len(timed) :] == [i for i in ids if run_id_time(i) is None]  # registration order
    for t in set(timed):  # equal times keep their given order
        assert [i for i in ordered if run_id_time(i) == t] == [i for i in ids if run_id_time(i) == t]
