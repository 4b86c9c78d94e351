"""Limits on the files a run reads (SPEC §11): sizes checked before parsing, and YAML alias bombs.

* Size: golden sets and replay traces larger than ``KEBAB_EVAL_MAX_INPUT_MB`` (default 1024 MiB),
  and run configs larger than ``KEBAB_EVAL_MAX_CONFIG_MB`` (default 4 MiB), are refused before
  a byte is parsed, with an :class:`InputError` naming the file, its size, the limit and the
  variable that raises it.
* Aliases: YAML anchors and aliases let a 1 KB document describe billions of nodes ("billion
  laughs"). PyYAML builds aliases as shared references, so loading one is cheap, but everything
  that walks the result afterwards (validation, JSON snapshots) is not — and merge keys
  (``<<: [*a, *a, ...]``) are copied during loading itself: an 8-level merge bomb of ~500 bytes
  did not finish loading within a minute. The loaders here count, before anything is
  constructed, how many nodes the composed document expands to, and refuse documents whose
  aliases expand it more than :data:`ALIAS_EXPANSION` times over (beyond a floor of
  :data:`ALIAS_FLOOR` nodes), or that refer to themselves. ``!!binary`` is refused too: golden
  sets and configs are text, and bytes would be quietly decoded into it.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any

import yaml

from kebab_eval_pipeline.errors import InputError, Offender

MIB = 1024 * 1024
INPUT_ENV = "KEBAB_EVAL_MAX_INPUT_MB"  # golden sets and replay traces
CONFIG_ENV = "KEBAB_EVAL_MAX_CONFIG_MB"  # run config files
DEFAULT_INPUT_MB = 1024.0
DEFAULT_CONFIG_MB = 4.0
_DEFAULTS = {INPUT_ENV: DEFAULT_INPUT_MB, CONFIG_ENV: DEFAULT_CONFIG_MB}

ALIAS_FLOOR = 100_000  # expanded nodes always allowed (a small config sharing a block of gates)
ALIAS_EXPANSION = 10  # ... and beyond it, at most this many times the nodes written
# An alias is "*name" and needs an "&name" anchor, names being ASCII letters, digits, "-" and
# "_"; neither can follow such a character (it would be inside a plain scalar or a tag). A
# document without both cannot expand and skips the walk; false positives only cost the walk.
_MAY_ALIAS = re.compile(r"(?<![0-9A-Za-z_*-])[*][0-9A-Za-z_-]").search
_MAY_ANCHOR = re.compile(r"(?<![0-9A-Za-z_&-])[&][0-9A-Za-z_-]").search


def max_bytes(env: str) -> int:
    """The size limit in bytes set by ``env`` (a number of MiB), or its default."""
    raw = os.environ.get(env, "").strip()
    if not raw:
        return int(_DEFAULTS[env] * MIB)
    try:
        mib = float(raw)
    except ValueError:
        mib = -1.0
    if not 0 < mib < float("inf"):
        raise InputError(
            f"{env} is invalid",
            [Offender(env, f"expected a positive number of MiB, got {raw[:50]!r}", field=env)],
        )
    return int(mib * MIB)


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1024 * MIB), ("MiB", MIB), ("KiB", 1024)):
        if n >= scale:
            return f"{n / scale:.1f} {unit} ({n:,} bytes)"
    return f"{n:,} bytes"


def check_size(path: Path, what: str, env: str = INPUT_ENV) -> None:
    """Refuse ``path`` before it is read when it is larger than the limit ``env`` sets.

    A file that does not exist or cannot be inspected is left to the reader, which reports it.
    """
    try:
        info = path.stat()
    except (OSError, ValueError):  # missing, permissions, a NUL in the name: the reader says so
        return
    if not stat.S_ISREG(info.st_mode):
        return
    limit = max_bytes(env)
    if info.st_size > limit:
        raise InputError(
            f"{what} is too large",
            [
                Offender(
                    str(path),
                    f"{_size(info.st_size)} is over the {_size(limit)} limit for a {what}; "
                    f"to read it, raise the limit with the environment variable {env}=<MiB>",
                    position="top level",
                )
            ],
        )


def _collections(node: yaml.Node) -> list[yaml.Node]:
    """The sequence/mapping nodes directly inside ``node`` (keys included): scalars cannot expand."""
    value = node.value
    if type(node) is yaml.SequenceNode:
        return [c for c in value if type(c) is not yaml.ScalarNode]
    kids = [v for _, v in value if type(v) is not yaml.ScalarNode]
    kids += [k for k, _ in value if type(k) is not yaml.ScalarNode]  # complex keys: rare
    return kids


def _expanded_sizes(root: yaml.Node) -> tuple[dict[yaml.Node, int], int]:
    """(nodes each collection expands to, itself included; nodes written in the document).

    Iterative post-order walk over collections (documents nest up to ~1000 levels); shared nodes
    — what aliases produce — are sized once, so the walk is linear in the nodes written. Nodes
    hash by identity. About 2 s for the 100k-query benchmark YAML (its construction: ~25 s).
    """
    sizes: dict[yaml.Node, int] = {}  # -1 while a node's children are being sized
    written = 0
    stack: list[Any] = [root]
    while stack:
        node = stack.pop()
        if node is None:  # the marker after which a node's children are all sized
            node, n_children, kids = stack.pop()
            total = 1 + n_children - len(kids)
            for kid in kids:
                total += sizes[kid]
            sizes[node] = total
            continue
        state = sizes.get(node)
        if state is not None:
            if state < 0:  # met again while its own children are being sized: a cycle
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    "an alias refers to a node that contains it (a recursive document)",
                    node.start_mark,
                )
            continue
        sizes[node] = -1
        n_children = len(node.value) * (1 if type(node) is yaml.SequenceNode else 2)
        kids = _collections(node)
        written += 1 + n_children - len(kids)  # collections are counted when opened themselves
        stack.append((node, n_children, kids))
        stack.append(None)
        stack += [kid for kid in kids if sizes.get(kid, -1) < 0]  # new, or open: a cycle
    return sizes, written


def check_alias_expansion(root: yaml.Node) -> None:
    """Raise ``yaml.constructor.ConstructorError`` (marked at the offending node) when aliases
    expand the document rooted at ``root`` past the limit, or make it refer to itself."""
    if type(root) is yaml.ScalarNode:
        return
    sizes, written = _expanded_sizes(root)
    limit = max(ALIAS_FLOOR, ALIAS_EXPANSION * written)
    if sizes[root] <= limit:
        return
    # Point at the smallest node past the limit: the level where the repetition blows up.
    worst = min(
        (n for n, size in sizes.items() if size > limit), key=lambda n: (sizes[n], n.start_mark.index)
    )
    raise yaml.constructor.ConstructorError(
        None,
        None,
        f"anchors and aliases expand this document from {written:,} nodes to {sizes[root]:,}, "
        f"over the limit of {limit:,} (an alias bomb?); write the repeated parts out instead",
        worst.start_mark,
    )


def _refuse_binary(loader: yaml.BaseLoader, node: yaml.Node) -> None:
    # SafeLoader builds !!binary as bytes, which pydantic then quietly decodes as text: a value
    # nobody can read in the file. Golden sets and configs are text; say so instead.
    raise yaml.constructor.ConstructorError(
        None, None, "binary data (!!binary) is not accepted: write the value as text", node.start_mark
    )


class _AliasGuard:
    """Loader mix-in: compose, check the alias expansion, then construct."""

    def get_single_data(self):  # overrides yaml.constructor.BaseConstructor.get_single_data
        node = self.get_single_node()  # type: ignore[attr-defined]
        if node is None:
            return None
        check_alias_expansion(node)
        return self.construct_document(node)  # type: ignore[attr-defined]


class StrictSafeLoader(yaml.SafeLoader):
    """PyYAML's pure-Python safe loader (no Python object tags), refusing ``!!binary``."""


class GuardedSafeLoader(_AliasGuard, StrictSafeLoader):
    """:class:`StrictSafeLoader` with the alias guard."""


_STRICT: dict[type, tuple[type, type]] = {yaml.SafeLoader: (StrictSafeLoader, GuardedSafeLoader)}
if hasattr(yaml, "CSafeLoader"):  # PyYAML built with libyaml (the wheels are)

    class StrictCSafeLoader(yaml.CSafeLoader):  # type: ignore[misc]
        """libyaml's safe loader (no Python object tags), refusing ``!!binary``."""

    class GuardedCSafeLoader(_AliasGuard, StrictCSafeLoader):  # type: ignore[misc]
        """:class:`StrictCSafeLoader` with the alias guard."""

    _STRICT[yaml.CSafeLoader] = (StrictCSafeLoader, GuardedCSafeLoader)
else:  # without libyaml, yaml_io uses the pure-Python loader only
    StrictCSafeLoader, GuardedCSafeLoader = StrictSafeLoader, GuardedSafeLoader  # type: ignore[misc]
for _strict, _ in _STRICT.values():
    _strict.add_constructor("tag:yaml.org,2002:binary", _refuse_binary)  # copies the table: ours only


def strict_loader(loader: type, text: str) -> type:
    """The loader to parse ``text`` with, for ``loader`` = ``yaml.SafeLoader`` or ``yaml.CSafeLoader``:
    its strict subclass (no ``!!binary``), with the alias guard when ``text`` may hold aliases
    (skipped — no walk to pay for — when it provably holds none)."""
    strict, guarded = _STRICT[loader]
    return guarded if _MAY_ALIAS(text) and _MAY_ANCHOR(text) else strict
