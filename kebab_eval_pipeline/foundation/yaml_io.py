"""YAML/JSON reading that reports the parser's own line and column."""

from __future__ import annotations

import codecs
import hashlib
import json
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson
import yaml

from kebab_eval_pipeline.foundation.errors import InputError, Offender
from kebab_eval_pipeline.foundation.limits import INPUT_ENV, DuplicateKeys, read_limited, strict_loader

TOP = "top level"


# libyaml's C composer crashes the process on documents nested ~25k levels deep; PyYAML's
# pure-Python loader stops such a document with a RecursionError we report. The fast C loader is
# used only when the document provably cannot nest that deep: fewer than LIBYAML_SAFE_OPENERS flow
# openers ("[" or "{", counted everywhere, strings included) and no line whose leading run of
# indentation and block indicators reaches DEEP_BLOCK_WIDTH columns (each block level needs one).
LIBYAML_SAFE_OPENERS = 10_000
DEEP_BLOCK_WIDTH = 200
MAX_SAFE_DEPTH = 1_000  # exact depth up to which the C loader is used when the cheap bound trips
_DEEP_BLOCK = re.compile(r"^[ \t?-]{" + str(DEEP_BLOCK_WIDTH) + ",}", re.MULTILINE)
_PARSER_FAILURES = (ValueError, TypeError, KeyError, AttributeError, IndexError, OverflowError)


def read_text(path: Path, what: str, env: str = INPUT_ENV, field: str | None = None) -> str:
    """Read a UTF-8 text file, turning every failure into an :class:`InputError` naming ``path``
    (and the config ``field`` that named it, when given)."""
    return read_text_and_sha256(path, what, env, field)[0]


def read_text_and_sha256(
    path: Path, what: str, env: str = INPUT_ENV, field: str | None = None
) -> tuple[str, str]:
    """:func:`read_text` plus the sha256 of the file's bytes, from one read of the file.

    The read is bounded by the size limit ``env`` sets, and devices / FIFOs / sockets are refused
    before they are opened (:func:`kebab_eval_pipeline.foundation.limits.read_limited`)."""
    data = read_limited(path, what, env, field)
    try:
        return decode_text(data), hashlib.sha256(data).hexdigest()
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        return _raise(what, path, f"line {line}", f"not valid UTF-8 (byte {exc.start})")


def decode_text(data: bytes) -> str:
    """The UTF-8 text of a file's bytes, without the byte-order mark some editors write at the
    start (Notepad, Excel's "CSV UTF-8", PowerShell): every format reads a file through here, so a
    BOM never ends up inside a first query id (``"\\ufeff301"``) nor makes JSON unreadable. The
    sha256 of a file stays the hash of its bytes. Raises ``UnicodeDecodeError`` (``start``: the
    offset in ``data``) for bytes that are not UTF-8."""
    if not data.startswith(codecs.BOM_UTF8):
        return data.decode("utf-8")
    try:
        return str(memoryview(data)[len(codecs.BOM_UTF8) :], "utf-8")  # no copy of the bytes
    except UnicodeDecodeError as exc:  # offsets into the whole file, as without a BOM
        raise UnicodeDecodeError(
            exc.encoding, data, exc.start + len(codecs.BOM_UTF8), exc.end + len(codecs.BOM_UTF8), exc.reason
        ) from None


def jsonl_objects(
    text: str, path: Path, offenders: list[Offender], shape: str
) -> Iterator[tuple[int, str, dict[str, Any]]]:
    """``(line number, line, object)`` for every non-blank line of the JSON-lines ``text`` that holds
    a JSON object. A line that is not JSON, or not an object (``expected an object {shape}``), is
    added to ``offenders`` instead, so a reader lists every bad line at once. A line writing a key
    twice (a parser keeps the last value) is an offender too — the key and its line, as every JSON
    reader here refuses it — and still yielded, so the reader knows its id (a query refused for
    a doubled key is not also "missing" from the qrels' point of view); readers refuse the file
    whenever ``offenders`` is not empty."""
    for n, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        where = f"line {n}"
        try:
            entry = json.loads(line)
        except (ValueError, RecursionError) as exc:
            offenders.append(Offender(str(path), f"not JSON: {exc}"[:200], position=where))
            continue
        if not isinstance(entry, dict):
            offenders.append(Offender(str(path), f"expected an object {shape}", position=where))
            continue
        if may_have_duplicate_keys(line, entry) and (duplicates := json_duplicates(line, n)):
            offenders += duplicate_offenders(str(path), duplicates)
        yield n, line, entry


def quote_it(value: Any, written: str) -> str:
    """Why the unquoted YAML scalar ``written`` cannot stand where text is expected: YAML 1.1 read it
    as ``value`` (``010`` → 8, ``no`` → false, ``2024-01-02`` → a date)."""
    kind = {bool: "a bool", int: "a number", float: "a number"}.get(type(value), f"a {type(value).__name__}")
    shown = str(value).lower() if isinstance(value, bool) else str(value)
    return (
        f"YAML reads the unquoted {written} as {kind} ({shown}), not as the text written: "
        f"quote it ('{written}')"
    )


def _raise(what: str, path: Path, position: str | None, reason: str):
    raise InputError(f"{what} is malformed", [Offender(str(path), reason, position=position)])


def _line_at(text: str, offset: int) -> int:
    return text.count("\n", 0, max(offset, 0)) + 1


def may_nest_deeply(text: str) -> bool:
    """True unless ``text`` provably nests far below libyaml's crash depth (a conservative bound)."""
    return text.count("[") + text.count("{") >= LIBYAML_SAFE_OPENERS or _DEEP_BLOCK.search(text) is not None


def _event_depth(text: str) -> int:
    """Exact nesting depth from libyaml's event stream (iterative: safe where composing is not)."""
    depth = deepest = 0
    for event in yaml.parse(text, Loader=yaml.CSafeLoader):
        if isinstance(event, yaml.SequenceStartEvent | yaml.MappingStartEvent):
            depth += 1
            deepest = max(deepest, depth)
        elif isinstance(event, yaml.SequenceEndEvent | yaml.MappingEndEvent):
            depth -= 1
    return deepest


def _loader(text: str) -> type:
    if not hasattr(yaml, "CSafeLoader"):
        return yaml.SafeLoader
    if may_nest_deeply(text):
        # The cheap bound tripped (large flow-style sets do): measure exactly before giving up
        # libyaml's speed; a syntax error here is left for the real parse to report.
        try:
            if _event_depth(text) > MAX_SAFE_DEPTH:
                return yaml.SafeLoader
        except yaml.YAMLError:
            return yaml.SafeLoader
    # libyaml: ~10x faster on large golden sets, same errors and marks
    return yaml.CSafeLoader


def parse_yaml(text: str, path: Path, what: str, typed_keys: frozenset[str] | None = None) -> Any:
    """Parse YAML; a syntax error names the file and the parser's 1-based line and column.

    ``typed_keys``: read every unquoted scalar as the text written (``010`` stays ``"010"``, ``no``
    stays ``"no"``) except in the values of these keys, which YAML 1.1 types as usual — for files
    whose values are mostly identifiers (golden sets). None: YAML's typing everywhere."""
    loader = _loader(text)
    try:
        # safe: no Python object tags
        return yaml.load(text, Loader=strict_loader(loader, text, typed_keys))
    except DuplicateKeys as exc:  # every one at once, with both lines
        offenders = duplicate_offenders(str(path), exc.duplicates)
        raise InputError(f"{what} has duplicate keys", offenders) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        position = f"line {mark.line + 1}, column {mark.column + 1}" if mark else TOP
        reason = " ".join(str(p) for p in (exc.context, exc.problem) if p) or "invalid YAML"
        return _raise(what, path, position, f"invalid YAML: {reason}")
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow (control codes, NUL)
        # libyaml reports a byte offset into the UTF-8 text, the Python reader a character offset
        line = (
            text.encode("utf-8", "surrogatepass")[: exc.position].count(b"\n") + 1
            if loader is not yaml.SafeLoader
            else _line_at(text, exc.position)
        )
        return _raise(
            what,
            path,
            f"line {line}",
            f"invalid YAML: character {exc.character!r} is not allowed",
        )
    except yaml.YAMLError as exc:
        return _raise(what, path, TOP, f"invalid YAML: {exc}")
    except RecursionError:
        return _raise(what, path, TOP, "invalid YAML: nested too deeply to read")
    except _PARSER_FAILURES as exc:  # a scalar the constructor cannot build (e.g. 2024-13-01)
        return _raise(what, path, TOP, f"invalid YAML: a value cannot be read ({type(exc).__name__}: {exc})")


def json_loads(text: str | bytes) -> Any:
    """JSON read by orjson, for speed (a 20k-query trace in a third of the time); anything it refuses
    goes through the standard library, whose errors, positions and extensions (NaN, integers beyond
    64 bits, lone surrogate escapes, UTF-16/32 bytes) define the behaviour."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


def parse_json(text: str, path: Path, what: str, line: int | None = None) -> Any:
    """Parse JSON; ``line`` is the document's line in its file (JSONL), for positions."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        at = exc.lineno if line is None else line + exc.lineno - 1
        return _raise(what, path, f"line {at}, column {exc.colno}", f"invalid JSON: {exc.msg}")
    except RecursionError:  # the C decoder raises here, it does not crash
        return _raise(what, path, f"line {line}" if line else TOP, "invalid JSON: nested too deeply to read")
    except _PARSER_FAILURES as exc:  # e.g. an integer beyond Python's 4300-digit limit
        return _raise(
            what,
            path,
            f"line {line}" if line else TOP,
            f"invalid JSON: a value cannot be read ({type(exc).__name__}: {exc})",
        )


# ---------------------------------------------------------------------------------------------
# Duplicate keys: an error in every file the tool reads (parsers silently keep the last value).

# A JSON key is a string token followed by ":" (whitespace allowed between them).
_SPACED_KEY = re.compile(r'"[ \t\r\n]+:')
# JSON tokens for the exact scan: a string (escapes unrolled), a structural character, a literal.
_JSON_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\],:]|[^\s{}\[\],:"]+', re.S)
Duplicate = tuple[list[str | int], str, int, int]  # (the mapping's key path, key, line, first line)


def key_path_text(path: Sequence[str | int]) -> str:
    """``["queries", 3, "id"]`` → ``queries[3].id``."""
    return "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in path).lstrip(".")


def duplicate_offenders(file: str, duplicates: Sequence[Duplicate]) -> list[Offender]:
    """One offender per duplicate key: the key with its path as the field, both lines in the reason."""
    return [
        Offender(
            file,
            f"duplicate key {key!r} at line {line}; first at line {first} (a parser would silently keep "
            "the last value): remove or rename one",
            position=f"line {line}",
            field=key_path_text([*path, key]),
        )
        for path, key, line, first in duplicates
    ]


def may_have_duplicate_keys(text: str, docs: Any) -> bool:
    """False when the JSON ``text`` provably holds no key twice in one object; ``docs`` is what it
    parsed to (a list of the values, for JSONL).

    Cheap (C-speed counts): every key written matches ``":`` or ``"<space>:``, so their count is at
    least the keys written; in orjson's compact re-serialisation of ``docs`` the count of ``":``
    not preceded by a backslash is at most the keys kept. A dropped duplicate makes the kept count
    fall below the written one. True also when ``docs`` cannot be re-serialised (integers beyond
    64 bits): then :func:`json_duplicates` decides.
    """
    written = text.count('":') + len(_SPACED_KEY.findall(text))
    try:
        out = orjson.dumps(docs)
    except (orjson.JSONEncodeError, TypeError):
        return True
    return out.count(b'":') - out.count(b'\\":') != written


def json_duplicates(text: str, first_line: int = 1) -> list[Duplicate]:
    """Every key written twice in one object of the JSON value ``text`` (which parses), in order,
    with lines counted from ``first_line``. A linear scan in Python: run it only when
    :func:`may_have_duplicate_keys` says so."""
    found: list[Duplicate] = []
    # frames: [is_object, path, {key: line}, expecting_key, current key or array index]
    stack: list[list[Any]] = []
    line, last = first_line, 0
    for match in _JSON_TOKEN.finditer(text):
        tok, pos = match.group(), match.start()
        top = stack[-1] if stack else None
        if tok in ("{", "["):
            path: list[str | int] = [] if top is None else [*top[1], top[4]]
            stack.append([tok == "{", path, {}, True, None] if tok == "{" else [False, path, None, False, 0])
        elif tok in ("}", "]"):
            stack.pop()
        elif top is None:
            continue
        elif tok == ",":
            if top[0]:
                top[3] = True
            else:
                top[4] += 1
        elif tok == ":":
            top[3] = False
        elif top[0] and top[3] and tok.startswith('"'):
            line += text.count("\n", last, pos)
            last = pos
            key = json.loads(tok)
            top[4] = key
            if key in top[2]:
                found.append((top[1], key, line, top[2][key]))
            else:
                top[2][key] = line
    return found


def parse_json_checked(text: str, path: Path, what: str) -> Any:
    """:func:`parse_json`, then every duplicate key is an :class:`InputError` (all listed at once)."""
    doc = parse_json(text, path, what)
    if may_have_duplicate_keys(text, doc):
        duplicates = json_duplicates(text)
        if duplicates:
            raise InputError(f"{what} has duplicate keys", duplicate_offenders(str(path), duplicates))
    return doc


class YamlPositions:
    """Line look-ups in one YAML document, composing it once and only when first asked."""

    def __init__(self, text: str):
        self._text = text
        self._root: yaml.Node | None = None
        self._composed = False

    def scalar_text(self, key_path: list[str | int]) -> str | None:
        """The text written for the unquoted scalar at ``key_path`` (``010`` where YAML built 8);
        None when there is none there (a quoted value, a collection, a missing key)."""
        node = self._node_at(key_path)
        if isinstance(node, yaml.ScalarNode) and not node.style:
            return node.value
        return None

    def _node_at(self, key_path: list[str | int]) -> yaml.Node | None:
        self._compose()
        node = self._root
        for key in key_path:
            if isinstance(node, yaml.MappingNode):
                node = next((v for k, v in node.value if getattr(k, "value", None) == str(key)), None)
            elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and 0 <= key < len(node.value):
                node = node.value[key]
            else:
                return None
        return node

    def _compose(self) -> None:
        if not self._composed:
            self._composed = True
            try:
                self._root = yaml.compose(self._text, Loader=_loader(self._text))
            except (yaml.YAMLError, RecursionError):
                self._root = None

    def line_of(self, key_path: list[str | int], at_key: bool = False) -> int | None:
        """The 1-based line where the value at ``key_path`` starts (a missing key: its mapping's
        line); ``at_key``: the line of the last mapping key itself (where a block value starts on
        the next line, the key's own line names it better). None when the text does not compose."""
        self._compose()
        node = self._root
        if node is None:
            return None
        for depth, key in enumerate(key_path, start=1):
            if isinstance(node, yaml.MappingNode):
                if at_key and depth == len(key_path):
                    key_node = next((k for k, _ in node.value if getattr(k, "value", None) == str(key)), None)
                    return (key_node or node).start_mark.line + 1
                found = next((v for k, v in node.value if getattr(k, "value", None) == str(key)), None)
                if found is None:
                    found = next((k for k, _ in node.value if getattr(k, "value", None) == str(key)), None)
                    return found.start_mark.line + 1 if found is not None else node.start_mark.line + 1
                node = found
            elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and 0 <= key < len(node.value):
                node = node.value[key]
            else:
                break
        return node.start_mark.line + 1


# ---------------------------------------------------------------------------------------------
# Text that cannot be written: lone surrogates, and ids with whitespace or control characters.

# A surrogate can only come from an escape (strict UTF-8 decoding refuses encoded ones): JSON
# "\ud800", YAML "\ud800" / "\U0000d800". A text without one skips the walk.
_SURROGATE_ESCAPE = re.compile(r"\\(?:u[dD][89a-fA-F]|U0000[dD][89a-fA-F])").search
# Query ids become TREC query ids (split on any whitespace) and parts of file names.
_BAD_QUERY_ID = re.compile(r"[\s\x00-\x1f\x7f-\x9f\u2028\u2029]")
# Chunk and doc ids may hold spaces (file names do), never a tab, line break or control character.
_BAD_ID = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def may_hold_surrogates(text: str) -> bool:
    """False when ``text`` provably decodes to no lone surrogate (it has no surrogate escape)."""
    return _SURROGATE_ESCAPE(text) is not None


def surrogate_paths(value: Any) -> list[str]:
    """The key paths (``supports[0].snippet``) of every string in ``value`` — a parsed JSON/YAML
    value, keys included — holding a lone surrogate: text no file, table or terminal can write."""
    found: list[str] = []
    stack: list[tuple[Any, list[str | int]]] = [(value, [])]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            if not item.isascii():
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError:
                    found.append(key_path_text(path) or TOP)
        elif isinstance(item, dict):
            for key, child in item.items():
                if isinstance(key, str) and not key.isascii():
                    try:
                        key.encode("utf-8")
                    except UnicodeEncodeError:
                        found.append(key_path_text([*path, ascii(key)]))
                stack.append((child, [*path, str(key)]))
        elif isinstance(item, list):
            stack += [(child, [*path, i]) for i, child in enumerate(item)]
    return sorted(found)


def id_problem(value: str, query_id: bool = False) -> str | None:
    """Why ``value`` cannot be an id, or None. Query ids: no whitespace or control character at all
    (they become TREC query ids and file names); chunk / doc ids: no tab, line break or other
    control character (plain spaces are allowed)."""
    bad = (_BAD_QUERY_ID if query_id else _BAD_ID).search(value)
    if bad is None:
        return None
    what = "whitespace or a control character" if query_id else "a tab, line break or control character"
    return f"holds {what} (U+{ord(bad.group()):04X} at position {bad.start() + 1})"
