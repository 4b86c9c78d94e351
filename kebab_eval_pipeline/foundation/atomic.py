"""Atomic file writes and inter-process locks for everything this project stores.

A reader must never see half a file: a run killed mid-write (SIGKILL, OOM, a lost
machine) leaves either the old file or the new one. Locally a write goes to a
hidden temporary name in the same folder, is flushed to disk, and is renamed over
the target (``os.replace`` is atomic on POSIX and Windows). On object stores
(s3://, gs://, … through UPath) a single PUT is already all-or-nothing, so the
bytes are written in one call.

Locks serialise read-modify-write of shared documents (baseline pins) and the
publishing of a run's manifest when several processes share one storage folder.
They are advisory file locks (``filelock``) on local paths; object stores have
no portable lock, so there a document's writers race as last-writer-wins
(documented in the scale-out guide, docs/site/guides/scale-out.md).
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

from filelock import FileLock, Timeout

from kebab_eval_pipeline.foundation.location import as_upath, is_local, local_path
from kebab_eval_pipeline.foundation.net.secrets import mask_bytes

LOCK_TIMEOUT_S = 120.0  # a writer holds a lock for milliseconds; minutes means a stuck process


#: Written as given: binary tables, never text to mask.
_BINARY_SUFFIXES = frozenset({".parquet", ".arrow", ".gguf", ".npy", ".db"})


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old content or all of the new.

    Text (every file but :data:`_BINARY_SUFFIXES`, when it is UTF-8) is masked of the secrets of
    the run configs this process loaded (:func:`~kebab_eval_pipeline.foundation.net.secrets.mask_bytes`): the
    last-line pass over reports, JUnit, PR comments, exports and manifests."""
    if Path(str(path)).suffix not in _BINARY_SUFFIXES:
        data = mask_bytes(data)
    if not is_local(path):
        as_upath(path).write_bytes(data)
        return
    target = local_path(path)
    if target.exists() and not target.is_file():
        # /dev/stdout, a FIFO: nothing to rename over, and a reader there sees a stream anyway
        with open(target, "wb") as fh:
            fh.write(data)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(exc, OSError) and exc.filename is None and exc.errno is not None:
            # write() and fsync() name no file (a full disk: "[Errno 28] No space left on device"):
            # the error names the file it could not write, so the user knows which place is full.
            raise OSError(exc.errno, exc.strerror, str(target)) from exc
        raise


def write_text(path: str | os.PathLike, text: str) -> None:
    """:func:`write_bytes` of UTF-8 ``text``."""
    write_bytes(path, text.encode("utf-8"))


@contextlib.contextmanager
def locked(path: str | os.PathLike, timeout_s: float = LOCK_TIMEOUT_S) -> Iterator[None]:
    """Hold an exclusive inter-process lock named ``path`` (a hidden ``.NAME.lock`` file beside it,
    left in place: deleting a lock file while another process waits on it would break the lock).

    A no-op on object stores (see the module docstring). Raises ``filelock.Timeout``
    after ``timeout_s`` seconds.
    """
    if not is_local(path):
        yield
        return
    target = local_path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(lock_file(target)), timeout=timeout_s):
        yield


@contextlib.contextmanager
def held_elsewhere(path: str | os.PathLike) -> Iterator[bool]:
    """Whether another process holds :func:`locked` on ``path``; while the block runs with False,
    this process holds it (so the holder cannot start meanwhile).

    A process killed with SIGKILL releases its locks with it, so this tells a live writer from a
    dead one. Always False on object stores (no locks there).
    """
    if not is_local(path):
        yield False
        return
    lock = FileLock(str(lock_file(path)), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        yield True
        return
    try:
        yield False
    finally:
        lock.release()


def lock_file(path: str | os.PathLike) -> Path:
    """The file :func:`locked` uses for ``path`` (local paths only)."""
    target = local_path(path)
    return target.with_name(f".{target.name}.lock")
