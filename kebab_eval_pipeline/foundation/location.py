"""Where things are stored: local or remote, and whether a place can hold a run's artifacts.

The one answer to "is this path local?" for every part that stores or reads runs — the artifact
store, atomic writes and locks, the run lock, baseline pins, the judge cache, run reports: a plain
path, or a ``file://`` / ``local://`` URL, is local; anything else (``s3://``, ``gs://`` …) goes
through fsspec/UPath. Answered without importing fsspec for plain paths (a tenth of a second idle,
seconds on a loaded machine, for every command), and without pandas: the run config checks its
``storage`` key with :func:`storage_problem` when it loads.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Sequence
from pathlib import Path, PurePath
from urllib.parse import unquote, urlsplit

from kebab_eval_pipeline.foundation.errors import InputError, Offender


def _plain(path: str | os.PathLike) -> bool:
    """A plain local path — a string without ``://`` or a pathlib path (not a UPath) — which
    UPath would read as a local path with no protocol: answered without importing fsspec (a
    tenth of a second idle, seconds on a loaded machine, for every command)."""
    if isinstance(path, str):
        return "://" not in path
    return isinstance(path, PurePath) and type(path).__module__ == "pathlib"


def as_upath(path: str | os.PathLike):
    from upath import UPath

    return UPath(path)


def is_local(path: str | os.PathLike) -> bool:
    """True for plain paths and ``file://`` / ``local://`` URLs."""
    if _plain(path):
        return True
    if isinstance(path, str):  # by the scheme alone: no fsspec implementation needed to answer
        return path.split("://", 1)[0].lower() in ("file", "local")
    return as_upath(path).protocol in ("", "file", "local")


def local_path(path: str | os.PathLike) -> Path:
    """The filesystem path of a local path or a ``file://`` / ``local://`` URL (RFC 8089: an empty
    or ``localhost`` host, the path percent-decoded — ``file:///srv/my%20runs`` is ``/srv/my runs``)."""
    if _plain(path):
        return Path(path)
    if isinstance(path, str):
        parts = urlsplit(path)
        if parts.scheme.lower() in ("file", "local") and parts.netloc in ("", "localhost"):
            return Path(unquote(parts.path))
    return Path(as_upath(path).path)


#: fsspec protocols that cannot hold artifacts: read-only ones, and ``memory`` (gone with the process).
_REFUSED_PROTOCOLS = {
    "memory": "an in-memory store: every artifact would vanish when the process exits",
    "http": "read-only over fsspec (http:// cannot be written); use a folder or an object store",
    "https": "read-only over fsspec (https:// cannot be written); use a folder or an object store",
    "github": "read-only (github://); use a folder or an object store",
    "git": "read-only (git://); use a folder or an object store",
    "zip": "an archive, not a store; use a folder or an object store",
    "tar": "read-only (tar://); use a folder or an object store",
    "libarchive": "read-only (libarchive://); use a folder or an object store",
    "reference": "read-only (reference://); use a folder or an object store",
    "data": "read-only (data:); use a folder or an object store",
}


#: Kernel file systems: writing runs there fails mid-run (or writes into the kernel).
_VIRTUAL_ROOTS = (Path("/proc"), Path("/sys"), Path("/dev"))
#: Under those, the POSIX shared-memory tmpfs: ordinary (volatile) folders, as /tmp is on many hosts.
_TMPFS_UNDER_DEV = Path("/dev/shm")


def storage_problem(value: str, *, check_local: bool = True) -> str | None:
    """Why ``value`` cannot be an artifact base (``storage`` / ``$KEBAB_EVAL_STORAGE``), or None.

    Refused: an empty value; ``memory://`` (artifacts vanish with the process); read-only fsspec
    protocols (``http(s)://`` …); a protocol fsspec does not know; a known one whose library is
    not installed (the message names the package). For a local path or ``file://`` URL (when
    ``check_local``; a relative path is only checked once made absolute): a place under
    ``/proc``, ``/sys`` or ``/dev`` (but for the ``/dev/shm`` tmpfs), an existing path
    that is not a folder (``/dev/null``, a file),
    a path below a file, or a folder that cannot be written.
    """
    if not value or not value.strip():
        return "empty: give a folder or a storage URL (or leave the key out for the default)"
    if "\x00" in value:
        return "not a usable path: embedded null byte"
    protocol = value.split("://", 1)[0].lower() if "://" in value else ""
    if protocol in ("", "file", "local"):
        if not check_local:
            return None
        path = local_path(value) if protocol else Path(value)
        if not path.is_absolute():
            return None if not protocol else f"{value!r}: a file:// URL needs an absolute path"
        return _local_storage_problem(path)
    import fsspec
    from fsspec.registry import known_implementations, registry

    if protocol in _REFUSED_PROTOCOLS:
        return _REFUSED_PROTOCOLS[protocol]
    known = known_implementations.get(protocol)
    if known is None and protocol not in registry:
        return f"unknown storage protocol {protocol + '://'!r} (use a folder, file://, s3://, gs:// …)"
    try:
        fsspec.get_filesystem_class(protocol)
    except ImportError:
        hint = (known or {}).get("err") or f"install the fsspec implementation of {protocol}://"
        return f"{protocol}:// needs a package that is not installed: {hint}"
    except ValueError as exc:
        return f"{protocol}:// cannot be used: {exc}"
    return None


def _local_storage_problem(path: Path) -> str | None:
    try:
        resolved = path.resolve()  # symlinks too: /tmp/x -> /dev/null is /dev/null
    except (OSError, RuntimeError) as exc:
        return f"not a usable path: {exc}"
    for root in _VIRTUAL_ROOTS:
        if resolved == _TMPFS_UNDER_DEV or _TMPFS_UNDER_DEV in resolved.parents:
            break
        if resolved == root or root in resolved.parents:
            return f"{resolved} is on the kernel's {root} file system, not storage; use a folder"
    try:  # stat fails with more than "missing": a name past the OS limit, a loop, permissions
        existing = resolved
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        if not existing.is_dir():
            what = "a file" if existing.is_file() else "not a folder (a device, FIFO or socket)"
            where = "is" if existing == resolved else f"is below {existing}, which is"
            return f"{resolved} {where} {what}; storage must be a folder"
    except OSError as exc:
        return f"not a usable path: {exc.strerror or exc}"
    if not os.access(existing, os.W_OK | os.X_OK):
        try:  # access() says EROFS too: name a read-only file system as one
            read_only = bool(os.statvfs(existing).f_flag & os.ST_RDONLY)
        except OSError:
            read_only = False
        why = "read-only file system" if read_only else "permission denied"
        return f"{existing} cannot be written ({why}); use a folder that can be written"
    return None


def check_storage(value: str, source: str, field: str = "storage") -> str:
    """``value`` when it can hold artifacts (see :func:`storage_problem`), else InputError naming
    ``source`` and ``field``."""
    problem = storage_problem(value)
    if problem is not None:
        raise InputError(f"unusable {field}", [Offender(source, problem, field=field)])
    return value


def check_storage_reachable(base: str) -> None:
    """Create (or reach) the artifact base ``base`` before a run starts, so a store that cannot be
    reached or written (an unknown host, missing credentials, a read-only mount) fails at once with
    its reason — InputError naming ``storage`` — instead of inside the first step that writes.
    Credentials written in the URL (``scheme://user:secret@host``) are not repeated."""
    try:
        as_upath(base).mkdir(parents=True, exist_ok=True)
    except Exception as exc:  # every fsspec backend raises its own: socket, botocore, OSError…
        shown = re.sub(r"//[^/@]*@", "//***@", base)
        reason = re.sub(r"//[^/@\s]*@", "//***@", f"{type(exc).__name__}: {exc}")[:300]
        raise InputError(
            "storage cannot be reached or written",
            [Offender(shown, f"{reason} (checked before the run started)", field="storage")],
        ) from None


def default_storage_base(configured: str | None = None) -> str:
    """Where artifacts live: the config's ``storage`` (checked when the config loaded), else
    ``$KEBAB_EVAL_STORAGE`` (checked here: InputError naming it when unusable), else beside
    the Dagster instance (``$DAGSTER_HOME/kebab-eval/artifacts``), else ``./.kebab-eval/artifacts``.

    Anchoring to ``DAGSTER_HOME`` keeps the CLI, ``dagster dev`` and ``dagster asset materialize``
    reading the same runs whenever they share an instance.
    """
    if configured:
        return configured
    if os.environ.get("KEBAB_EVAL_STORAGE"):  # set but empty counts as unset, like KEBAB_EVAL_CONFIG
        value = probe = os.environ["KEBAB_EVAL_STORAGE"]
        if "://" not in value and value.strip() and "\x00" not in value:
            with contextlib.suppress(RuntimeError):  # "~nobody/x": checked as given
                probe = str(Path(value).expanduser().absolute())  # relative: the working folder's
        check_storage(probe, "$KEBAB_EVAL_STORAGE", field="KEBAB_EVAL_STORAGE")
        return value
    if os.environ.get("DAGSTER_HOME"):
        return str(Path(os.environ["DAGSTER_HOME"]) / "kebab-eval" / "artifacts")
    return str(Path.cwd() / ".kebab-eval" / "artifacts")


#: An evaluation chain's name: it becomes part of asset keys, resource keys, definition names and
#: the chain's storage folder (letters, digits, underscore; a letter first).
CHAIN_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,47}$")


def chain_folder(name: str) -> str:
    """The folder, under the artifact base, of the runs of ``evaluation_chain(name, …)``: ``name``."""
    return name


def gate_folder(asset_path: Sequence[str]) -> str:
    """The folder, under the artifact base, of the runs of ``evaluation_check`` on the asset whose
    key is ``asset_path`` (``["search_index"]`` → ``search_index``; ``["team", "index-v2"]`` →
    ``team__index_v2``: the key as Dagster writes it as a Python identifier)."""
    return "__".join(asset_path).replace("-", "_").replace(".", "_")


def run_storage(
    configured: str | None = None, *, chain: str | None = None, gate: Sequence[str] | None = None
) -> str:
    """Where a set of runs is stored — the one answer for the code that writes them and the CLI that
    reads them:

    - neither ``chain`` nor ``gate``: the package's own code location and ``kebab-eval run``: the
      artifact base (:func:`default_storage_base` of the config's ``storage``);
    - ``chain``: the runs of ``evaluation_chain(chain, config=…)``: the folder ``chain`` under that
      base;
    - ``gate``: the runs of ``evaluation_check(asset, config=…)`` whose asset key is ``gate``: the
      folder :func:`gate_folder` under that base.

    ``configured`` is the config's ``storage`` (None: ``$KEBAB_EVAL_STORAGE``, else beside the
    Dagster instance). A chain or check given ``storage=`` in Python stores exactly there instead.
    """
    base = default_storage_base(configured)
    if chain is None and gate is None:
        return base
    folder = chain_folder(chain) if chain is not None else gate_folder(gate or ())
    return f"{base.rstrip('/')}/{folder}"
