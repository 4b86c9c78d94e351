"""Limits on the files a run reads (SPEC §11): sizes checked before parsing, and YAML alias bombs.

* Size: golden sets and replay traces larger than ``KEBAB_EVAL_MAX_INPUT_MB`` (default 1024 MiB),
  and run configs larger than ``KEBAB_EVAL_MAX_CONFIG_MB`` (default 4 MiB), are refused before
  a byte is parsed, with an :class:`InputError` naming the file, its size, the limit and the
  variable that raises it. The limit holds on the bytes actually read too
  (:func:`read_limited` reads at most limit + 1 bytes), so a file that grows while it is read or
  that ``stat`` sizes as 0 (``/proc``) cannot get past it; devices, FIFOs and sockets are refused
  by ``stat`` before they are opened (``/dev/zero`` never ends, opening a FIFO blocks).
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

import functools
import os
import re
import stat
from pathlib import Path
from typing import Any

import yaml

from kebab_eval_pipeline.foundation.errors import InputError, Offender

MIB = 1024 * 1024
INPUT_ENV = "KEBAB_EVAL_MAX_INPUT_MB"  # golden sets and replay traces
CONFIG_LIMIT_ENV = "KEBAB_EVAL_MAX_CONFIG_MB"  # run config files
DEFAULT_INPUT_MB = 1024.0
DEFAULT_CONFIG_MB = 4.0
_DEFAULTS = {INPUT_ENV: DEFAULT_INPUT_MB, CONFIG_LIMIT_ENV: DEFAULT_CONFIG_MB}

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


def _not_a_file(mode: int) -> str | None:
    """What a non-regular, non-folder file is ("a FIFO (named pipe)"…); None for a regular file or a
    folder (readers name a folder themselves)."""
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    for test, name in (
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def _refuse_special(path: Path, what: str, kind: str, field: str | None) -> None:
    raise InputError(
        f"{what} is not a regular file",
        [Offender(str(path), f"is {kind}: give a regular file", position="top level", field=field)],
    )


def _too_large(path: Path, what: str, env: str, size: str, limit: int) -> InputError:
    return InputError(
        f"{what} is too large",
        [
            Offender(
                str(path),
                f"{size} is over the {_size(limit)} limit for a {what}; "
                f"to read it, raise the limit with the environment variable {env}=<MiB>",
                position="top level",
            )
        ],
    )


def check_regular(path: Path, what: str, field: str | None = None) -> None:
    """Refuse ``path`` when ``stat`` shows a device, FIFO or socket (before anything opens it);
    a missing file, a folder or one that cannot be inspected is left to the reader."""
    try:
        info = path.stat()
    except (OSError, ValueError):
        return
    kind = _not_a_file(info.st_mode)
    if kind is not None:
        _refuse_special(path, what, kind, field)


def check_size(path: Path, what: str, env: str = INPUT_ENV, field: str | None = None) -> None:
    """Refuse ``path`` before it is read when it is larger than the limit ``env`` sets, or when it is
    a device, FIFO or socket (``field``: the setting that named it, for the message).

    A file that does not exist or cannot be inspected is left to the reader, which reports it.
    """
    try:
        info = path.stat()
    except (OSError, ValueError):  # missing, permissions, a NUL in the name: the reader says so
        return
    kind = _not_a_file(info.st_mode)
    if kind is not None:
        _refuse_special(path, what, kind, field)
    if not stat.S_ISREG(info.st_mode):
        return
    limit = max_bytes(env)
    if info.st_size > limit:
        raise _too_large(path, what, env, _size(info.st_size), limit)


def read_limited(path: Path, what: str, env: str = INPUT_ENV, field: str | None = None) -> bytes:
    """The bytes of the regular file ``path``, at most the limit ``env`` sets.

    Raises :class:`InputError` (naming ``path`` and ``field``) for a missing file (summary
    "``what`` not found", reason "no such file"), a folder, a device / FIFO / socket (refused by
    ``stat``, then checked again on the opened descriptor, which is opened non-blocking so a FIFO
    swapped in between cannot hang the open), any other OS error, and a file over the limit — by
    its size, or by the bytes read (a growing file, ``/proc`` files that ``stat`` sizes as 0): at
    most limit + 1 bytes are ever read.
    """
    limit = max_bytes(env)

    def refuse(summary: str, reason: str, position: str | None = "top level") -> InputError:
        return InputError(summary, [Offender(str(path), reason, position=position, field=field)])

    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise refuse(f"{what} not found", "no such file", None) from None
    except (OSError, ValueError) as exc:  # permissions, a NUL in the name, a name too long
        raise refuse(f"cannot read the {what}", getattr(exc, "strerror", None) or str(exc)) from None
    if stat.S_ISDIR(info.st_mode):
        raise refuse(f"{what} is a folder, expected a file", "is a directory", None)
    check_size(path, what, env, field)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise refuse(f"cannot read the {what}", exc.strerror or str(exc)) from None
    with os.fdopen(fd, "rb", buffering=0) as fh:
        kind = _not_a_file(os.fstat(fd).st_mode)
        if kind is not None:  # swapped in between the stat and the open
            _refuse_special(path, what, kind, field)
        chunks: list[bytes] = []
        got = 0
        # A regular file comes in one read of its size (+1 to see the end): one buffer, no copy in
        # the join. /proc files and the like (size 0) come in 1 MiB pieces.
        step = max(info.st_size + 1, MIB)
        try:
            while got <= limit:
                chunk = fh.read(min(limit + 1 - got, step))
                if not chunk:
                    break
                chunks.append(chunk)
                got += len(chunk)
        except OSError as exc:
            raise refuse(f"cannot read the {what}", exc.strerror or str(exc)) from None
    if got > limit:
        raise _too_large(path, what, env, f"more than {_size(limit)} (bytes read)", limit)
    return b"".join(chunks)


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


class DuplicateKeys(yaml.YAMLError):
    """Keys written twice in one mapping: ``duplicates`` lists ``(path, key, line, first_line)``
    (``path``: the mapping's key path from the top, e.g. ``["queries", 3]``; lines 1-based), in
    document order."""

    def __init__(self, duplicates: list[tuple[list[str | int], str, int, int]]):
        super().__init__(f"{len(duplicates)} duplicate key(s)")
        self.duplicates = duplicates


_STR_TAG = "tag:yaml.org,2002:str"
_MERGE_TAG = "tag:yaml.org,2002:merge"
#: What YAML 1.1 turns an unquoted scalar into besides text: ``010`` → 8, ``1:30`` → 90, ``0x1F`` →
#: 31, ``1_000`` → 1000, ``no``/``on`` → a bool, ``2024-01-02`` → a date, ``.inf`` → a float.
#: ``=`` and ``<<`` as values (not keys) have tags the safe constructor refuses. Null (``null``,
#: ``~``, nothing) is not in the list: it stays "no value".
_RETYPED_TAGS = frozenset(
    f"tag:yaml.org,2002:{name}" for name in ("int", "float", "bool", "timestamp", "value", "merge")
)


def keep_plain_text(root: yaml.Node, typed_keys: frozenset[str]) -> None:
    """Retag, in the composed document ``root``, every unquoted scalar YAML would read as a number,
    bool or date as text — the exact text written — except in the values of ``typed_keys``
    (mapping keys whose values are meant as numbers or bools: ``grade``, ``answerable`` …).

    Why: a golden set is mostly identifiers and text, and YAML 1.1 silently renames them (``id:
    010`` became ``"8"``, colliding with ``id: 8``; ``lang: no`` became ``False``). Typed values are
    few and known by key, so the default is the user's text. Mapping keys themselves are left as
    they are (they are field names). Iterative (documents nest ~1000 deep); a node shared through
    an alias is visited once per use (the alias guard has bounded that, and refused cycles)."""
    stack: list[yaml.Node] = [root]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is yaml.ScalarNode:
            if not node.style and node.tag in _RETYPED_TAGS:  # plain: None (PyYAML) or "" (libyaml)
                node.tag = _STR_TAG
        elif kind is yaml.SequenceNode:
            stack += node.value
        elif kind is yaml.MappingNode:
            stack += [v for k, v in node.value if not (type(k) is yaml.ScalarNode and k.value in typed_keys)]


def _key_text(node: yaml.Node) -> str:
    return node.value if type(node) is yaml.ScalarNode else f"<{node.id}>"


def _paths_to(root: yaml.Node, wanted: set[yaml.Node]) -> dict[yaml.Node, list[str | int]]:
    """The key path from ``root`` to each node of ``wanted`` (first found; iterative). Only run when
    a document has duplicates, so its cost never touches a clean load."""
    found: dict[yaml.Node, list[str | int]] = {}
    seen: set[yaml.Node] = set()
    stack: list[tuple[yaml.Node, list[str | int]]] = [(root, [])]
    while stack and len(found) < len(wanted):
        node, path = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        if node in wanted:
            found[node] = path
        if type(node) is yaml.SequenceNode:
            stack += [(child, [*path, i]) for i, child in reversed(list(enumerate(node.value)))]
        elif type(node) is yaml.MappingNode:
            stack += [(v, [*path, _key_text(k)]) for k, v in reversed(node.value)]
    return found


class _StrictConstruction:
    """Loader mix-in: compose; check the alias expansion (when ``_guard_aliases``); construct,
    noting every key written twice in one mapping; then raise :class:`DuplicateKeys` listing them
    all. PyYAML itself keeps the last value silently (a second ``gates:`` block would drop the
    first's blocking gates). Keys a merge (``<<``) brings in may be overridden: only a mapping's own
    keys are compared, as written, before the merge is applied."""

    _guard_aliases = False
    #: None: every plain scalar typed as YAML 1.1 says. A set of keys: plain scalars keep the text
    #: written, except under these keys (see :func:`keep_plain_text`).
    _typed_keys: frozenset[str] | None = None

    def get_single_data(self):  # overrides yaml.constructor.BaseConstructor.get_single_data
        node = self.get_single_node()  # type: ignore[attr-defined]
        if node is None:
            return None
        if self._guard_aliases:
            check_alias_expansion(node)  # first: a recursive document never reaches the walk below
        if self._typed_keys is not None:
            keep_plain_text(node, self._typed_keys)
        self._duplicates: list[tuple[yaml.Node, str, int, int]] = []
        self._own_checked: set[yaml.Node] = set()
        data = self.construct_document(node)  # type: ignore[attr-defined]
        if self._duplicates:
            paths = _paths_to(node, {mapping for mapping, *_ in self._duplicates})
            raise DuplicateKeys(
                [(paths.get(m, []), key, line, first) for m, key, line, first in self._duplicates]
            )
        return data

    def flatten_mapping(self, node: yaml.MappingNode) -> None:  # SafeConstructor's, called first
        if node not in self._own_checked:
            self._own_checked.add(node)
            pairs = node.value
            # Fast path, one set of the keys (text keys as written: the usual case).
            try:
                keys = {self._key(k) for k, _ in pairs}
            except TypeError:  # an unhashable key: the constructor reports it
                keys = set()
            if len(keys) != len(pairs):
                self._note_duplicates(node)
        super().flatten_mapping(node)  # type: ignore[misc]

    def _key(self, node: yaml.Node) -> Any:
        """A key as the mapping will hold it: text as written; other scalars constructed (1 and 0x1
        are one key); a merge key or a complex key by identity (never a duplicate here)."""
        if node.tag == _STR_TAG:
            return node.value
        if type(node) is not yaml.ScalarNode or node.tag == _MERGE_TAG:
            return node
        return (None, self.construct_object(node))  # type: ignore[attr-defined]

    def _note_duplicates(self, node: yaml.MappingNode) -> None:
        first: dict[Any, yaml.Node] = {}
        for key_node, _ in node.value:
            try:
                earlier = first.setdefault(self._key(key_node), key_node)
            except TypeError:  # an unhashable constructed key: the constructor reports it
                continue
            if earlier is not key_node:
                self._duplicates.append(
                    (node, key_node.value, key_node.start_mark.line + 1, earlier.start_mark.line + 1)
                )


class StrictSafeLoader(_StrictConstruction, yaml.SafeLoader):
    """PyYAML's pure-Python safe loader (no Python object tags), refusing ``!!binary`` and duplicate
    keys."""


class GuardedSafeLoader(StrictSafeLoader):
    """:class:`StrictSafeLoader` with the alias guard."""

    _guard_aliases = True


_STRICT: dict[type, tuple[type, type]] = {yaml.SafeLoader: (StrictSafeLoader, GuardedSafeLoader)}
if hasattr(yaml, "CSafeLoader"):  # PyYAML built with libyaml (the wheels are)

    class StrictCSafeLoader(_StrictConstruction, yaml.CSafeLoader):  # type: ignore[misc]
        """libyaml's safe loader (no Python object tags), refusing ``!!binary`` and duplicate keys."""

    class GuardedCSafeLoader(StrictCSafeLoader):  # type: ignore[misc]
        """:class:`StrictCSafeLoader` with the alias guard."""

        _guard_aliases = True

    _STRICT[yaml.CSafeLoader] = (StrictCSafeLoader, GuardedCSafeLoader)
else:  # without libyaml, yaml_io uses the pure-Python loader only
    StrictCSafeLoader, GuardedCSafeLoader = StrictSafeLoader, GuardedSafeLoader  # type: ignore[misc]
for _strict, _ in _STRICT.values():
    _strict.add_constructor("tag:yaml.org,2002:binary", _refuse_binary)  # copies the table: ours only


def strict_loader(loader: type, text: str, typed_keys: frozenset[str] | None = None) -> type:
    """The loader to parse ``text`` with, for ``loader`` = ``yaml.SafeLoader`` or ``yaml.CSafeLoader``:
    its strict subclass (no ``!!binary``), with the alias guard when ``text`` may hold aliases
    (skipped — no walk to pay for — when it provably holds none). With ``typed_keys``, unquoted
    scalars keep their text outside those keys' values (:func:`keep_plain_text`)."""
    strict, guarded = _STRICT[loader]
    chosen = guarded if _MAY_ALIAS(text) and _MAY_ANCHOR(text) else strict
    return chosen if typed_keys is None else _text_keeping(chosen, typed_keys)


@functools.lru_cache(maxsize=16)
def _text_keeping(loader: type, typed_keys: frozenset[str]) -> type:
    """``loader`` keeping unquoted scalars' text outside ``typed_keys`` (one class per pair)."""
    return type(f"TextKeeping{loader.__name__}", (loader,), {"_typed_keys": typed_keys})
