"""Containment of paths in a root directory, symlinks resolved (SPEC §11: no reads outside roots).

One rule for every tree the tool reads on a user's behalf — the reference system's corpus and the
``source_root`` that snippet verification opens: a path is inside the root when its real path
(``os.path.realpath``: every symlink followed, directories included) lies inside the root's own
real path, compared by whole path components (``os.path.commonpath``), never by string prefix —
``/root2`` is not inside ``/root``.
"""

from __future__ import annotations

import os

__all__ = ["real_inside", "real_root"]


def real_root(root: str | os.PathLike[str]) -> str:
    """The real path of ``root`` (symlinks resolved), the boundary :func:`real_inside` checks against.

    No file-system check beyond resolving: the caller decides what a missing root means.
    """
    return os.path.realpath(os.fspath(root))


def real_inside(root: str, path: str | os.PathLike[str]) -> str | None:
    """The real path of ``path`` when it lies inside ``root`` (itself a real path), else None.

    Inputs: ``root`` from :func:`real_root`; ``path`` absolute, or relative to the current
    directory (join it to the root first to mean "under the root").

    Output: the resolved path (``root`` itself counts as inside), or None when it resolves outside.

    Edge cases: ``realpath`` only ``lstat``s and ``readlink``s, it never opens a file, so checking a
    hostile path reads nothing. On a symlink loop it stops resolving and returns the rest of the
    path as is; the result is then still judged by where that lands (a loop inside the root stays
    inside — the caller sees a path that is not a file). A path the OS cannot represent (NUL, a lone
    surrogate) raises ``ValueError`` for the caller to classify.
    """
    full = os.path.realpath(os.fspath(path))
    if os.path.commonpath([root, full]) != root:
        return None
    return full
