"""Run ids: how evaluation runs (the ``eval_runs`` partition keys) are named, and ordered in time.

Every id this package generates is ``<origin>-YYYYMMDD-HHMMSS[-<suffix>]`` with the time in UTC:

- ``ci-20250301-101500-1a2b3c4`` — ``kebab-eval run`` / ``runs add`` in CI (suffix: short commit);
- ``alice-20250301-101500`` — the same outside CI (origin: the login name);
- ``nightly-20250301-020512`` — the nightly schedule (at most one per day of its time zone;
  the time is the scheduled time, in UTC);
- ``golden-20250301-101500-9f8e7d6c`` — the golden-change sensor (suffix: the new golden sha256);
- ``system-change-20250301-101500-3c4d5e6f`` — the system-version sensor (suffix: the hash of the
  system's new versions).

The time is fixed-width, so ids of one origin sort lexically in time order (``ls``, the Dagster
UI's partition list) and :func:`run_id_time` reads it back to order ids of different origins.
Ids chosen by hand (``--run-id release-1``) are kept as they are.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import unicodedata
from collections.abc import Iterable, Mapping
from datetime import UTC, date, datetime, tzinfo

from kebab_eval_pipeline.foundation.errors import InputError, Offender

#: Run ids become folder names and partition keys (checked here, without importing storage).
RUN_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def check_run_id(run_id: str) -> str:
    """Run ids become folder names and partition keys: letters, digits, ``._-``; ≤128 chars."""
    if not RUN_ID_PATTERN.fullmatch(run_id or "") or ".." in run_id:
        raise InputError(
            "invalid run id",
            [Offender("<run id>", f"{run_id!r}: use letters, digits, '.', '_' or '-' (max 128, no '..')")],
        )
    return run_id


TRIGGER_TAG = "kebab-eval/trigger"  # Dagster run tag: ci | cli | nightly | golden-change | system-change

CI_ORIGIN = "ci"
NIGHTLY_ORIGIN = "nightly"
GOLDEN_ORIGIN = "golden"
SYSTEM_CHANGE_ORIGIN = "system-change"
FALLBACK_USER = "local"
USER_MAX = 32  # keeps every generated id far below check_run_id's 128 characters
SHORT_COMMIT = 7

# Commit variables of common CI services, tried in this order (GitHub Actions, GitLab/Woodpecker,
# Buildkite, CircleCI, Travis, Bitbucket, Drone, Azure Pipelines, Jenkins' git plugin).
COMMIT_ENV = (
    "GITHUB_SHA",
    "CI_COMMIT_SHA",
    "BUILDKITE_COMMIT",
    "CIRCLE_SHA1",
    "TRAVIS_COMMIT",
    "BITBUCKET_COMMIT",
    "DRONE_COMMIT_SHA",
    "BUILD_SOURCEVERSION",
    "GIT_COMMIT",
)
USER_ENV = ("LOGNAME", "USER", "LNAME", "USERNAME")  # getpass.getuser()'s order
_NOT_CI = {"", "0", "false", "no", "off"}
_COMMIT = re.compile(r"[0-9a-f]{7,64}")

# The suffix holds no '-', so the timestamp read is the last one (a login name may contain one).
_GENERATED = re.compile(r"(?P<origin>.+)-(?P<date>\d{8})-(?P<time>\d{6})(?:-[A-Za-z0-9._]+)?")
# Ids of earlier versions: run-YYYYMMDDTHHMMSS, golden-YYYYMMDDTHHMMSS-<sha8>, nightly-YYYY-MM-DD.
_LEGACY_STAMP = re.compile(r"(?P<origin>.+)-(?P<date>\d{8})T(?P<time>\d{6})(?:-[A-Za-z0-9._]+)?")
_LEGACY_NIGHTLY = re.compile(r"nightly-(?P<date>\d{4}-\d{2}-\d{2})")


def _utc(now: datetime | None) -> datetime:
    """``now`` in UTC (naive = already UTC, as ``datetime.utcnow()`` gives); the current time if None."""
    if now is None:
        return datetime.now(UTC)
    if now.tzinfo is None:
        return now.replace(tzinfo=UTC)
    try:
        return now.astimezone(UTC)
    except OverflowError:
        raise ValueError(f"{now.isoformat()} is outside the years 1-9999 in UTC") from None


def _stamp(now: datetime | None) -> str:
    t = _utc(now)
    # Written out rather than strftime: %Y is not zero-padded below year 1000 on glibc.
    return f"{t.year:04d}{t.month:02d}{t.day:02d}-{t.hour:02d}{t.minute:02d}{t.second:02d}"


def in_ci(environ: Mapping[str, str] = os.environ) -> bool:
    """True when ``CI`` is set to anything but empty/``0``/``false``/``no``/``off`` (any case).

    GitHub Actions, GitLab, CircleCI, Travis, Buildkite and Drone set ``CI=true``; Woodpecker sets
    ``CI=woodpecker``. A CI service that sets no ``CI`` (Jenkins, Azure Pipelines) counts as local
    unless the job exports ``CI=true``.
    """
    return environ.get("CI", "").strip().lower() not in _NOT_CI


def short_commit(environ: Mapping[str, str] = os.environ) -> str | None:
    """The first 7 hex digits of the first valid commit in :data:`COMMIT_ENV`, lowercased.

    A value that is not 7-64 hex digits (empty, a branch name, ``$GITHUB_SHA`` left unexpanded) is
    skipped and the next variable tried; None when there is none.
    """
    for name in COMMIT_ENV:
        value = environ.get(name, "").strip().lower()
        if _COMMIT.fullmatch(value):
            return value[:SHORT_COMMIT]
    return None


def user_slug(name: str | None) -> str:
    """A login name made safe for a run id: ASCII, lowercase, ``[a-z0-9._-]``, at most 32 chars.

    Accents are dropped (``José`` → ``jose``), other characters become ``-`` (``Jean Luc`` →
    ``jean-luc``, ``CORP\\bob`` → ``corp-bob``), runs of dots shrink to one (``..`` is not allowed
    in ids) and separators are trimmed from both ends. A name with nothing left (None, empty,
    ``김치``, ``@@``) gives ``local``.
    """
    ascii_name = unicodedata.normalize("NFKD", name or "").encode("ascii", "ignore").decode().lower()
    slug = re.sub(r"[^a-z0-9._]+", "-", ascii_name)
    slug = re.sub(r"\.{2,}", ".", slug)
    return slug[:USER_MAX].strip("-._") or FALLBACK_USER


def login_name(environ: Mapping[str, str] = os.environ) -> str:
    """The login name as ``getpass.getuser()`` finds it, but reading ``environ``.

    ``LOGNAME``, ``USER``, ``LNAME``, ``USERNAME`` (first non-empty), else the password database;
    "" when neither knows (a container running as a uid with no passwd entry, or no ``pwd``).
    """
    for name in USER_ENV:
        if environ.get(name):
            return environ[name]
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_name
    except (ImportError, KeyError, OSError):
        return ""


def new_run_id(now: datetime | None = None, environ: Mapping[str, str] = os.environ) -> str:
    """The default id of ``kebab-eval run`` and ``kebab-eval runs add``.

    In CI (:func:`in_ci`): ``ci-YYYYMMDD-HHMMSS-<commit7>``, or ``ci-YYYYMMDD-HHMMSS`` when no
    valid commit variable is set (:func:`short_commit`). Elsewhere: ``<user>-YYYYMMDD-HHMMSS`` with
    ``<user>`` from :func:`login_name` through :func:`user_slug` (``local`` when unknown).

    ``now`` defaults to the current time; a naive ``now`` is taken as UTC, an aware one converted
    (ValueError if that leaves the years 1-9999). The resolution is one second: two ids made in
    the same second by the same origin are equal, and the caller's registration treats the second
    as the same run (``runs add`` says it is already registered).
    """
    stamp = _stamp(now)
    if in_ci(environ):
        commit = short_commit(environ)
        return f"{CI_ORIGIN}-{stamp}" + (f"-{commit}" if commit else "")
    return f"{user_slug(login_name(environ))}-{stamp}"


def nightly_run_id(now: datetime | None = None) -> str:
    """``nightly-YYYYMMDD-HHMMSS`` (UTC); see :func:`nightly_run_of_day` for once-a-day."""
    return f"{NIGHTLY_ORIGIN}-{_stamp(now)}"


def nightly_run_of_day(run_ids: Iterable[str], day: date, tz: tzinfo = UTC) -> str | None:
    """The first nightly id among ``run_ids`` whose time falls on ``day`` in time zone ``tz``
    (default UTC; including the ``nightly-YYYY-MM-DD`` ids of earlier versions, read as midnight
    UTC), or None: the nightly schedule's once-a-day test."""
    for run_id in run_ids:
        if run_id.startswith(f"{NIGHTLY_ORIGIN}-"):
            t = run_id_time(run_id)
            if t is not None and t.astimezone(tz).date() == day:
                return run_id
    return None


def golden_change_run_id(now: datetime | None, sha256: str) -> str:
    """``golden-YYYYMMDD-HHMMSS-<sha8>``: the first 8 hex digits of the golden file's new sha256.

    ValueError when ``sha256`` is not at least 8 hex digits (it always comes from
    ``golden_content_sha256``, so that would be a bug, not user input).
    """
    sha = sha256.strip().lower()
    if not re.fullmatch(r"[0-9a-f]{8,}", sha):
        raise ValueError(f"not a sha256: {sha256!r}")
    return f"{GOLDEN_ORIGIN}-{_stamp(now)}-{sha[:8]}"


def versions_digest(versions: Mapping[str, str | None]) -> str:
    """The sha256 (hex) of ``versions`` as sorted, compact JSON: equal mappings, equal digests."""
    text = json.dumps(dict(versions), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def system_change_run_id(now: datetime | None, versions: Mapping[str, str | None]) -> str:
    """``system-change-YYYYMMDD-HHMMSS-<hash8>``: the first 8 hex digits of
    :func:`versions_digest` of the system's new versions (so two changes in one second to
    different versions get different ids)."""
    return f"{SYSTEM_CHANGE_ORIGIN}-{_stamp(now)}-{versions_digest(versions)[:8]}"


def run_id_time(run_id: str) -> datetime | None:
    """The UTC time embedded in a generated id, or None for an id without one (``release-1``).

    Recognised: ``<origin>-YYYYMMDD-HHMMSS[-<suffix>]`` (this module's form; the last such
    timestamp counts), and the forms of earlier versions, ``<origin>-YYYYMMDDTHHMMSS[-<suffix>]``
    and ``nightly-YYYY-MM-DD`` (midnight UTC). A hand-chosen id of the same shape
    (``release-20250301-000000``) is read the same way; an impossible date (month 13) gives None.
    """
    for pattern in (_GENERATED, _LEGACY_STAMP, _LEGACY_NIGHTLY):
        match = pattern.fullmatch(run_id)
        if match is None:
            continue
        # Slices, not strptime: its variable-width fields would read month "13" as 1 and shift.
        digits = match["date"].replace("-", "") + (match.groupdict().get("time") or "000000")
        fields = [int(digits[a:b]) for a, b in ((0, 4), (4, 6), (6, 8), (8, 10), (10, 12), (12, 14))]
        try:
            return datetime(*fields, tzinfo=UTC)
        except ValueError:
            return None
    return None


def _as_utc(value: datetime | str | None) -> datetime | None:
    """A ``created_at`` (ISO string or datetime; naive = UTC) as an aware datetime; None if unusable."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return None
    if not isinstance(value, datetime):
        return None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def run_started(run_id: str, created_at: datetime | str | None = None) -> datetime | None:
    """When a run started: the id's embedded time (:func:`run_id_time`), else ``created_at`` (its
    artifacts' ISO time, naive = UTC), else None."""
    return run_id_time(run_id) or _as_utc(created_at)


def sort_run_ids(
    run_ids: Iterable[str], created_at: Mapping[str, datetime | str | None] | None = None
) -> list[str]:
    """``run_ids`` (in registration order) in time order, oldest first.

    Each id's time is :func:`run_started`: the time embedded in a generated id, else
    ``created_at[id]`` when known and parseable. Ids with a time come first, by time; ids without
    one follow in their given (registration) order. The sort is stable: equal times keep their
    given order, and duplicates are kept.
    """
    created_at = created_at or {}
    timed: list[tuple[datetime, str]] = []
    untimed: list[str] = []
    for run_id in run_ids:
        t = run_started(run_id, created_at.get(run_id))
        if t is None:
            untimed.append(run_id)
        else:
            timed.append((t, run_id))
    timed.sort(key=lambda pair: pair[0])  # list.sort is stable
    return [run_id for _, run_id in timed] + untimed


def asset_check_run_id(check: str, now: datetime | None, dagster_run_id: str) -> str:
    """``<check>-YYYYMMDD-HHMMSS-<run8>``: a run made by the evaluation check a team attaches to its
    own asset, named by the check and the Dagster run that materialized the asset (first 8
    characters of its id). ValueError when ``check`` has characters a run id cannot hold."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", check).strip("-.") or "check"
    return check_run_id(f"{slug[:64]}-{_stamp(now)}-{re.sub(r'[^A-Za-z0-9]', '', dagster_run_id)[:8]}")
