"""A path the tool cannot write — a full disk, a read-only filesystem, no permission — as the
user's condition to fix (exit 2, the path named, the remedy), not an internal failure (exit 3).

What fails is a write into the run's storage (``KEBAB_EVAL_STORAGE`` / the config's ``storage``,
default ``$DAGSTER_HOME/kebab-eval/artifacts``) or into the Dagster instance (``DAGSTER_HOME``: its
SQLite databases). The error rarely names the file: ``write()`` on a full disk raises ``[Errno 28]``
without a path, SQLite says ``database or disk is full`` or ``disk I/O error``, and a failure inside
a Dagster step reaches the CLI only as class names and messages. So :func:`write_failure` finds the
cause in the exception chain (or the step's messages), then names the place it concerns: the path
the error carries, else the one place a small probe write shows cannot be written now.

Nothing stored before is at risk: every artifact is written to a fresh attempt folder and
published by replacing its manifest (:mod:`kebab_eval_pipeline.store.artifact_store`), so a write
that fails leaves the previous state readable, and a run whose chain did not finish has no
``run_metrics`` (``kebab-eval runs list``: metrics stored "no"). The message says so.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from kebab_eval_pipeline.foundation.errors import InputError

#: errno values that mean "this place cannot be written", with what to do about each.
_ERRNOS = {
    errno.ENOSPC: ("no space left on device", "free space on that filesystem"),
    errno.EDQUOT: ("disk quota exceeded", "free space within your quota"),
    errno.EFBIG: ("file too large for that filesystem", "use a filesystem that takes larger files"),
    errno.EROFS: ("read-only file system", "make it writable"),
    errno.EACCES: ("permission denied", "give this user write permission there"),
    errno.EPERM: ("operation not permitted", "give this user write permission there"),
}
#: SQLite's words for the same conditions (its errors carry no errno).
_SQLITE = (
    ("database or disk is full", errno.ENOSPC),
    ("disk i/o error", errno.EIO),
    ("attempt to write a readonly database", errno.EROFS),
    ("unable to open database file", errno.EACCES),
)
_ERRNO_TEXT = re.compile(r"\[Errno (\d+)\]")
_FILENAME_TEXT = re.compile(r"\[Errno \d+\] [^:]*: '([^']+)'")
#: A probe write of this size tells a full filesystem from one with room (a 0-byte file fits in
#: a full tmpfs: its inode is free).
_PROBE_BYTES = 64 * 1024


@dataclass(frozen=True)
class WriteFailure:
    """What could not be written and why: ``code`` an errno (``EIO`` for SQLite's "disk I/O
    error"), ``text`` the error as raised, ``path`` the file it names (None when it names none),
    ``sqlite``: raised by SQLite (the Dagster instance's databases, the judge cache)."""

    code: int
    text: str
    path: str | None = None
    sqlite: bool = False


def _from_text(cls_name: str, message: str) -> WriteFailure | None:
    lowered = message.lower()
    for words, code in _SQLITE:
        if words in lowered:
            return WriteFailure(code, message.strip(), None, sqlite=True)
    match = _ERRNO_TEXT.search(message)
    if match and int(match.group(1)) in _ERRNOS and (cls_name.endswith("Error") or "Errno" in message):
        named = _FILENAME_TEXT.search(message)
        return WriteFailure(int(match.group(1)), message.strip(), named.group(1) if named else None)
    return None


def write_failure(exc: BaseException) -> WriteFailure | None:
    """The write failure at the root of ``exc`` (its causes and contexts followed), or None."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in _ERRNOS:
            name = current.filename if isinstance(current.filename, str) else None
            return WriteFailure(current.errno, str(current), name)
        found = _from_text(type(current).__name__, str(current))
        if found is not None and (found.sqlite or isinstance(current, OSError)):
            return found
        current = current.__cause__ or current.__context__
    return None


def step_write_failure(chain: Iterable[tuple[str, str]]) -> WriteFailure | None:
    """The write failure in a failed Dagster step's error chain (``(class name, message)`` pairs,
    as Dagster records them), or None."""
    for cls_name, message in chain:
        found = _from_text(cls_name, message or "")
        if found is not None:
            return found
    return None


@dataclass(frozen=True)
class Place:
    """Somewhere the tool writes: what it is, its folder, and the setting that moves it."""

    what: str
    folder: Path
    setting: str


def places(storage: str | None = None) -> list[Place]:
    """The run's storage (``storage``: the base the run writes, when known) and the Dagster
    instance, when they are local folders."""
    from kebab_eval_pipeline.foundation.location import default_storage_base, is_local, local_path

    found = []
    with contextlib.suppress(Exception):  # an unusable setting is reported where it is read
        base = storage or default_storage_base()
        if is_local(base):
            setting = "KEBAB_EVAL_STORAGE (or the config's storage:)"
            found.append(Place("the run's storage", local_path(base), setting))
    home = os.environ.get("DAGSTER_HOME")
    if home:
        found.append(Place("the Dagster instance", Path(home).expanduser(), "DAGSTER_HOME"))
    return found


def _existing(folder: Path) -> Path:
    """``folder``, or its nearest existing ancestor (a storage folder not made yet)."""
    while not folder.exists() and folder.parent != folder:
        folder = folder.parent
    return folder


def _probe(folder: Path) -> int | None:
    """The errno a small write into ``folder`` (or its nearest existing ancestor) fails with now,
    or None when it succeeds."""
    target = _existing(folder) / f".kebab-eval-probe-{uuid.uuid4().hex[:8]}"
    try:
        with open(target, "wb") as fh:
            fh.write(b"\0" * _PROBE_BYTES)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as exc:
        return exc.errno
    finally:
        with contextlib.suppress(OSError):
            target.unlink()
    return None


def _place_of(path: str, candidates: Sequence[Place]) -> Place | None:
    resolved = Path(path).absolute()
    for place in candidates:
        with contextlib.suppress(ValueError):
            resolved.relative_to(place.folder.absolute())
            return place
    return None


def is_write_failure(failure: WriteFailure, storage: str | None = None) -> bool:
    """Whether ``failure`` is a write the tool could not make: always for a full disk, a read-only
    file system or SQLite's words; permission denied only for a file under the storage or
    DAGSTER_HOME (elsewhere it may be a file the command was reading: reported as it was)."""
    if failure.code not in (errno.EACCES, errno.EPERM) or failure.sqlite:
        return True
    return failure.path is not None and _place_of(failure.path, places(storage)) is not None


def cannot_write(
    failure: WriteFailure, storage: str | None = None, run_id: str | None = None, step: str | None = None
) -> InputError:
    """The InputError (exit 2) for ``failure``: the path that could not be written, why, what to do,
    and what became of the run (``run_id``: the run this process was making; ``step``: the Dagster
    step that failed)."""
    candidates = places(storage)
    place = _place_of(failure.path, candidates) if failure.path else None
    code = failure.code
    if place is None:
        probed = [(p, _probe(p.folder)) for p in candidates]
        failing = [(p, c) for p, c in probed if c is not None]
        if failing:
            place, probed_code = failing[0]
            code = probed_code if code == errno.EIO and probed_code in _ERRNOS else code
        elif failure.sqlite:
            place = next((p for p in candidates if p.setting == "DAGSTER_HOME"), None)
    why, fix = _ERRNOS.get(code, ("disk I/O error (often a full disk)", "free space on that filesystem"))
    path = failure.path or (str(place.folder) if place else None)
    subject = f"{path} ({place.what})" if place and path else (path or "a file")
    lines = [f"cannot write {subject}: {why}"]
    if failure.text and why not in failure.text.lower():
        lines[0] += f" ({failure.text.splitlines()[0][:200]})"
    if failure.path and place is None:  # an output file the command was asked to write
        lines.append(f"remedy: {fix}, or write it to another path")
    else:
        moves = " or ".join(p.setting for p in ([place] if place else candidates)) or "DAGSTER_HOME"
        lines.append(f"remedy: {fix}, or point {moves} at a folder that can be written")
    if run_id is not None:
        where = f" in step {step}" if step else ""
        lines.append(
            f"run {run_id} stopped{where}: what was stored before is unchanged (every artifact is "
            "published whole or not at all); run it again once the path can be written"
        )
    return InputError("\n".join(lines))


def output_failure(option: str, path: Path | str, exc: OSError, stored: str | None = None) -> InputError:
    """An output option's file that could not be written (``--pr-comment /dev/full``) as an
    InputError naming the option, the path, why and the remedy; ``stored``: how to write the output
    again from what the command already stored (the run's results are not lost)."""
    why, fix = _ERRNOS.get(exc.errno or 0, (exc.strerror or str(exc), "check the path"))
    other = "leave it out (--no-github-summary)" if option.startswith("$") else f"give {option} another path"
    lines = [f"cannot write {option} {path}: {why}", f"remedy: {fix}, or {other}"]
    if stored:
        lines.append(stored)
    return InputError("\n".join(lines))


def output_problem(path: Path) -> str | None:
    """Why an output file cannot be written, known before anything runs: the filesystem that would
    hold it is read-only or has no space left (None: it may be written; the write itself can still
    fail, and is then reported by :func:`output_failure`)."""
    try:
        stats = os.statvfs(_existing(path if path.exists() else path.parent))
    except OSError:
        return None
    if stats.f_flag & os.ST_RDONLY:
        return "on a read-only file system"
    if path.exists() and not path.is_file():  # a device or FIFO: its filesystem says nothing
        return None
    if stats.f_bavail == 0 and stats.f_blocks > 0:
        return "no space left on the file system that would hold it"
    return None
