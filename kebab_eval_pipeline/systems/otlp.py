"""OTLP JSON trace files → spans (the input of :mod:`.openinference`).

Reads OTLP JSON the way OpenTelemetry's SDKs and exporters write it: a file holds one or more
``ExportTraceServiceRequest`` documents (``{"resourceSpans": [...]}``) —

* one per line (the collector's ``file`` exporter appends a compact request per export; so does
  ``MessageToJson(..., indent=None)``);
* pretty-printed and concatenated (``MessageToJson`` indents by default, and an exporter appending
  one request per ``export()`` call writes one per span under ``SimpleSpanProcessor``, one per
  batch under ``BatchSpanProcessor``), with or without blank lines between them;
* a JSON array of requests; or a single request.

A trace's spans may be spread over any number of documents: they are grouped by trace id later.
Spans sit under ``resourceSpans[].scopeSpans[].spans[]`` (also the pre-1.0 name
``instrumentationLibrarySpans``); field names are lowerCamelCase as the OTLP/JSON encoding writes
them, snake_case (protobuf's own names, ``preserving_proto_field_name=True``) read too. An empty
request ``{}`` (protobuf writes an empty message so) has no spans.

Two encodings of the same data are accepted, told apart without ambiguity:

* ids: hex (``traceId`` 32 hex digits, ``spanId`` 16), as the OTLP/JSON spec and the collector
  write; or base64 of the 16 / 8 bytes, as protobuf's generic JSON mapping (``MessageToJson``)
  writes bytes — standard or URL-safe, padded (24 / 12 characters) or not (22 / 11). The lengths
  never coincide, so a value is read as hex exactly when it has the hex length; both read as
  lowercase hex;
* enums (``kind``, ``status.code``): integers (the spec) or their names (``MessageToJson``);
  64-bit integers (times, ``intValue``): decimal strings (protobuf writes every 64-bit integer as
  a string) or JSON numbers.

Attribute values become Python values: ``stringValue`` → str, ``intValue`` → int, ``doubleValue``
→ float, ``boolValue`` → bool, ``arrayValue`` → list, ``kvlistValue`` → dict, ``bytesValue`` → its
base64 text. Anything that cannot be read is an :class:`~kebab_eval_pipeline.foundation.errors.Offender`
naming the file, the line of the offending value and of its document when they differ, the span
and the field or attribute; :func:`read_otlp` returns every one of them beside the spans. Lines are
found only for offenders (a document is parsed a second time, by the standard library's
pure-Python scanner, to learn where its values start), so reading a good file costs nothing extra.
"""

from __future__ import annotations

import base64
import binascii
import json
import json.decoder
import json.scanner
import re
from dataclasses import dataclass, field
from typing import Any

import orjson

from kebab_eval_pipeline.foundation.errors import Offender

STATUS_NAMES = {0: "UNSET", 1: "OK", 2: "ERROR"}
KIND_NAMES = {0: "UNSPECIFIED", 1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}
_HEX = re.compile(r"[0-9a-fA-F]+")
_SCOPE_KEYS = ("scopeSpans", "scope_spans", "instrumentationLibrarySpans", "instrumentation_library_spans")
_WS = re.compile(r"[ \t\n\r]*")
_BOM = "\ufeff"  # a byte-order mark some Windows tools write first: not part of the JSON
#: Where a document may start again after one that is not JSON: a line opening with ``{`` or ``[``.
_DOC_START = re.compile(r"^[\[{]", re.M)
NOT_OTLP = 'expected an OTLP JSON export request {"resourceSpans": [...]}'


@dataclass(slots=True)
class _Doc:
    """One export request of the file: the JSON value that starts at ``start`` in the text, or its
    element ``inner`` (``(i,)``) when that value is an array of requests; ``line`` where the
    request starts (None until asked, for an array's element); ``one_line`` when the whole value
    is on one line (every value inside it is on that line: no second parse needed)."""

    start: int
    inner: tuple[int, ...]
    line: int | None
    one_line: bool


class _Where:
    """Lines of positions in one file's text, found on demand (only offenders need them)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._at, self._line = 0, 1
        self._parsed: dict[int, tuple[Any, dict[int, tuple[Any, list[int]]]] | None] = {}

    def line_of(self, offset: int) -> int:
        """The 1-based line of ``offset``: counted forward from the last offset asked (the reader
        asks in file order), from the top when asked for an earlier one."""
        if offset < self._at:
            self._at, self._line = 0, 1
        self._line += self.text.count("\n", self._at, offset)
        self._at = offset
        return self._line

    def _offsets(self, start: int) -> tuple[Any, dict[int, tuple[Any, list[int]]]] | None:
        """The JSON value at ``start`` parsed again, with where each container's members start."""
        if start not in self._parsed:
            try:
                self._parsed[start] = _parse_with_offsets(self.text, start)
            except (ValueError, RecursionError, StopIteration):
                self._parsed[start] = None
        return self._parsed[start]

    def offset(self, doc: _Doc, path: tuple[Any, ...]) -> int:
        """Where the value at ``path`` inside ``doc`` starts (as deep as the path can be
        followed: a key written twice in one object stops the walk at that object). A value that
        is an object of one member (an ``AnyValue``, a status with only its code) is placed at
        that member: the line showing the value itself."""
        parsed = self._offsets(doc.start)
        if parsed is None:
            return doc.start
        value, table = parsed
        at = doc.start
        for step in (*doc.inner, *path):
            entry = table.get(id(value))
            if entry is None:
                break
            container, starts = entry
            if isinstance(container, dict):
                keys = list(container)
                if step not in container or len(keys) != len(starts):
                    break
                at, value = starts[keys.index(step)], container[step]
            elif isinstance(container, list) and isinstance(step, int) and 0 <= step < len(starts):
                at, value = starts[step], container[step]
            else:
                break
        else:
            if path and isinstance(value, dict) and len(value) == 1 and id(value) in table:
                at = table[id(value)][1][0]
        return at

    def doc_line(self, doc: _Doc) -> int:
        if doc.line is None:
            doc.line = self.line_of(self.offset(doc, ()))
        return doc.line

    def doc_position(self, doc: _Doc) -> str:
        """Where a request starts: ``line 12`` (``line 12 (request 3 of the array)``)."""
        return self.position(doc, ())

    def position(self, doc: _Doc, path: tuple[Any, ...], span: str | None = None) -> str:
        """``line 40, span 5f3a… (request from line 12)``: the line of the value at ``path`` (a
        one-line request's line), the span, and the request's first line when it is not the same
        (and which element it is of a JSON array of requests)."""
        first = self.doc_line(doc)
        line = first if doc.one_line else self.line_of(self.offset(doc, path))
        text = f"line {line}" + (f", span {span}" if span else "")
        notes = [f"request {doc.inner[0] + 1} of the array"] if doc.inner else []
        if line != first:
            notes.append(f"{'from' if doc.inner else 'request from'} line {first}")
        return text + (f" ({', '.join(notes)})" if notes else "")

    def raw(self, doc: _Doc, path: tuple[Any, ...]) -> Any:
        """The value at ``path`` inside ``doc`` as written (from the second parse), or None."""
        parsed = self._offsets(doc.start)
        if parsed is None:
            return None
        value = parsed[0]
        for step in (*doc.inner, *path):
            try:
                value = value[step]
            except (KeyError, IndexError, TypeError):
                return None
        return value


def _parse_with_offsets(text: str, start: int) -> tuple[Any, dict[int, tuple[Any, list[int]]]]:
    """The JSON value starting at ``text[start]`` and, for every object and array in it (keyed by
    ``id``), the container and the offsets where its members' values (an object's, in key order)
    or its elements start. The standard library's own pure-Python scanner, with its object and
    array parsers wrapped to record where they read each value: the same grammar and extensions
    (NaN, big integers) as the first parse. Slow; used only to place offenders."""
    table: dict[int, tuple[Any, list[int]]] = {}

    def recording(scan_once, starts: list[int]):
        def scan(string: str, idx: int):
            starts.append(idx)
            return scan_once(string, idx)

        return scan

    def parse_object(s_and_end, strict, scan_once, object_hook, object_pairs_hook, memo=None):
        starts: list[int] = []
        value, end = json.decoder.JSONObject(
            s_and_end, strict, recording(scan_once, starts), object_hook, object_pairs_hook, memo
        )
        table[id(value)] = (value, starts)
        return value, end

    def parse_array(s_and_end, scan_once):
        starts: list[int] = []
        value, end = json.decoder.JSONArray(s_and_end, recording(scan_once, starts))
        table[id(value)] = (value, starts)
        return value, end

    decoder = json.JSONDecoder()
    decoder.parse_object = parse_object  # type: ignore[assignment]
    decoder.parse_array = parse_array  # type: ignore[assignment]
    value, _ = json.scanner.py_make_scanner(decoder)(text, start)
    return value, table


@dataclass(slots=True)
class Span:
    """One span as read: ids as lowercase hex (``parent_id`` None for a root), times in Unix
    nanoseconds (None when absent), ``attributes`` as Python values, ``status`` ``UNSET`` /
    ``OK`` / ``ERROR``, ``events`` as ``(name, attributes)``. :meth:`position` says where it, or
    one of its attributes, is in the file."""

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    kind: str
    start_ns: int | None
    end_ns: int | None
    attributes: dict[str, Any]
    status: str
    status_message: str
    origin: tuple[_Where, _Doc, tuple[Any, ...]] = field(repr=False, compare=False)
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def position(self, attribute: str | None = None) -> str:
        """``line N, span ID`` — N the line of ``attribute``'s entry when the span has it (an
        attribute written twice: its last entry, the one read), else of the span; with the
        request's first line when the request spans several lines."""
        where, doc, path = self.origin
        if attribute is not None and not doc.one_line:
            entries = where.raw(doc, (*path, "attributes"))
            if isinstance(entries, list):
                found = [
                    i for i, e in enumerate(entries) if isinstance(e, dict) and e.get("key") == attribute
                ]
                if found:
                    path = (*path, "attributes", found[-1], "value")
        return where.position(doc, path, self.span_id)

    @property
    def where(self) -> str:
        return self.position()


def _get(obj: dict, camel: str, snake: str | None = None) -> Any:
    value = obj.get(camel)
    if value is None and snake is not None:
        value = obj.get(snake)
    return value


def _key(obj: dict, camel: str, snake: str) -> str:
    """The key ``obj`` writes the field under (for placing an offender)."""
    return snake if camel not in obj and snake in obj else camel


def looks_like_otlp(doc: Any) -> bool:
    """True for an object with ``resourceSpans`` (an export request)."""
    return isinstance(doc, dict) and ("resourceSpans" in doc or "resource_spans" in doc)


def looks_like_console_span(doc: Any) -> bool:
    """True for a span as the SDK's ``ConsoleSpanExporter`` prints it (``span.to_json()``: a
    ``context`` with ``trace_id`` and ``span_id``) — a debugging format, not OTLP."""
    context = doc.get("context") if isinstance(doc, dict) else None
    return isinstance(context, dict) and "trace_id" in context and "span_id" in context


CONSOLE_HINT = (
    "this is the OpenTelemetry SDK's ConsoleSpanExporter output (span.to_json()), not OTLP JSON: "
    "write the spans with MessageToJson(encode_spans(spans)) from opentelemetry-exporter-otlp-proto-common "
    "(the documentation's OpenInference traces recipe), or with the collector's file exporter"
)


def _first_values(text: str, limit: int = 10):
    """The first few top-level JSON values of ``text`` (a stream of documents), an array's
    elements in its place; stops at the first that is not JSON."""
    decoder = json.JSONDecoder()
    pos = _WS.match(text, 0).end()  # type: ignore[union-attr]
    seen = 0
    while pos < len(text) and seen < limit:
        try:
            value, end = decoder.raw_decode(text, pos)
        except (ValueError, RecursionError):
            return
        for item in value[:limit] if isinstance(value, list) else [value]:
            seen += 1
            yield item
        pos = _WS.match(text, end).end()  # type: ignore[union-attr]


def sniff(text: str) -> str | None:
    """What the start of a file says it is: ``otlp`` when its first non-empty document (or the
    first element of a JSON array) is an export request, ``console`` for the SDK's
    ConsoleSpanExporter output, else None. Reads only the first few documents."""
    text = text.removeprefix(_BOM)
    if text.lstrip()[:1] not in ("{", "["):
        return None
    for value in _first_values(text):
        if value == {}:
            continue  # an empty request says nothing
        if looks_like_otlp(value):
            return "otlp"
        return "console" if looks_like_console_span(value) else None
    return None


def _id(value: Any, nbytes: int) -> str:
    """A trace (16 bytes) or span (8 bytes) id as lowercase hex; ValueError when it is neither
    hex of that length nor base64 (standard or URL-safe, padded or not) of that many bytes."""
    if not isinstance(value, str):
        raise ValueError(f"expected a hex or base64 string, got {type(value).__name__}")
    if len(value) == 2 * nbytes and _HEX.fullmatch(value):
        return value.lower()
    raw = b""
    if re.fullmatch(r"[A-Za-z0-9+/_-]+={0,2}", value):
        body = value.rstrip("=").replace("-", "+").replace("_", "/")
        try:
            raw = base64.b64decode(body + "=" * (-len(body) % 4), validate=True)
        except (binascii.Error, ValueError):
            raw = b""
    if len(raw) == nbytes:
        return raw.hex()
    raise ValueError(f"expected {2 * nbytes} hex digits or base64 of {nbytes} bytes, got {value[:60]!r}")


def _int64(value: Any) -> int:
    """A 64-bit integer written as a decimal string or a JSON integer; ValueError otherwise."""
    if isinstance(value, bool):
        raise ValueError(f"expected an integer, got {value!r}")
    if isinstance(value, int):
        number = value
    elif (isinstance(value, str) and re.fullmatch(r"-?[0-9]{1,20}", value)) or (
        isinstance(value, float) and value.is_integer()
    ):
        number = int(value)
    else:
        raise ValueError(f"expected an integer (or its decimal string), got {str(value)[:60]!r}")
    if not -(2**63) <= number < 2**64:
        raise ValueError(f"expected a 64-bit integer, got {str(value)[:60]!r}")
    return number


def _enum(value: Any, names: dict[int, str], prefix: str) -> str:
    """An enum given as its number or its protobuf name (``STATUS_CODE_ERROR``) → short name."""
    if value is None:
        return names[0]
    if isinstance(value, int) and not isinstance(value, bool) and value in names:
        return names[value]
    if isinstance(value, str):
        short = value.removeprefix(prefix)
        if short in names.values():
            return short
    raise ValueError(f"expected one of {', '.join(map(str, names))} or {prefix}<NAME>, got {value!r}")


def any_value(value: Any) -> Any:
    """An OTLP ``AnyValue`` object as a Python value (see the module docstring); ValueError naming
    what is wrong. An empty object is None (the spec's empty value)."""
    if not isinstance(value, dict):
        raise ValueError(f"expected an AnyValue object, got {type(value).__name__}")
    if not value:
        return None
    if len(value) != 1:
        raise ValueError(f"expected one of stringValue, intValue, … — got {', '.join(sorted(value))}")
    ((kind, inner),) = value.items()
    if kind in ("stringValue", "string_value"):
        if not isinstance(inner, str):
            raise ValueError(f"stringValue: expected a string, got {type(inner).__name__}")
        return inner
    if kind in ("intValue", "int_value"):
        return _int64(inner)
    if kind in ("doubleValue", "double_value"):
        if isinstance(inner, str) and inner in ("NaN", "Infinity", "-Infinity"):
            return float(inner)  # protobuf's JSON spelling; the trace reader refuses them where they matter
        if isinstance(inner, bool) or not isinstance(inner, int | float):
            raise ValueError(f"doubleValue: expected a number, got {str(inner)[:60]!r}")
        return float(inner)
    if kind in ("boolValue", "bool_value"):
        if not isinstance(inner, bool):
            raise ValueError(f"boolValue: expected true or false, got {str(inner)[:60]!r}")
        return inner
    if kind in ("arrayValue", "array_value"):
        values = inner.get("values", []) if isinstance(inner, dict) else None
        if not isinstance(values, list):
            raise ValueError("arrayValue: expected {values: [...]}")
        return [any_value(v) for v in values]
    if kind in ("kvlistValue", "kvlist_value"):
        values = inner.get("values", []) if isinstance(inner, dict) else None
        if not isinstance(values, list):
            raise ValueError("kvlistValue: expected {values: [{key, value}, ...]}")
        return attributes(values)
    if kind in ("bytesValue", "bytes_value"):
        if not isinstance(inner, str):
            raise ValueError("bytesValue: expected a base64 string")
        return inner
    raise ValueError(f"unknown value type {kind!r}")


def attributes(items: Any) -> dict[str, Any]:
    """A list of ``{key, value}`` as a dict (a key written twice keeps its last value, as the SDKs
    do); ValueError naming the first bad entry (:func:`_attributes` lists every one)."""
    out, problems = _attributes(items)
    if problems:
        name, reason, _ = problems[0]
        raise ValueError(reason if name is None else f"{name}: {reason}")
    return out


def _attributes(items: Any) -> tuple[dict[str, Any], list[tuple[str | None, str, tuple[Any, ...]]]]:
    """A list of ``{key, value}`` as a dict, and every entry that cannot be read as ``(key or
    None, reason, path of the entry inside the list)``: a bad entry is left out."""
    if items is None:
        return {}, []
    if not isinstance(items, list):
        return {}, [(None, f"expected a list of {{key, value}}, got {type(items).__name__}", ())]
    out: dict[str, Any] = {}
    problems: list[tuple[str | None, str, tuple[Any, ...]]] = []
    for i, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("key"), str):
            problems.append((None, f"expected {{key, value}}, got {str(item)[:80]}", (i,)))
            continue
        try:
            out[item["key"]] = any_value(item.get("value", {}))
        except ValueError as exc:
            problems.append((item["key"], str(exc), (i, "value")))
    return out, problems


def _span(
    raw: Any, where: _Where, doc: _Doc, path: tuple[Any, ...], file: str, offenders: list[Offender]
) -> Span | None:
    """One span (``raw``, at ``path`` inside ``doc``), or None after adding its offenders: every
    bad field and every bad attribute of it, each placed on its own line."""
    if not isinstance(raw, dict):
        reason = f"expected a span object, got {type(raw).__name__}"
        offenders.append(Offender(file, reason, position=where.position(doc, path)))
        return None
    # (field, reason, path inside the span)
    problems: list[tuple[str, str, tuple[Any, ...]]] = []
    ids: dict[str, str | None] = {}
    for name, snake, nbytes in (("spanId", "span_id", 8), ("traceId", "trace_id", 16)):
        try:
            ids[name] = _id(_get(raw, name, snake), nbytes)
        except ValueError as exc:
            problems.append((name, str(exc), (_key(raw, name, snake),)))
            ids[name] = None
    parent = _get(raw, "parentSpanId", "parent_span_id")
    try:
        ids["parent"] = _id(parent, 8) if parent else None  # the spec writes a root's as ""
    except ValueError as exc:
        problems.append(("parentSpanId", str(exc), (_key(raw, "parentSpanId", "parent_span_id"),)))
    times: dict[str, int | None] = {}
    for name, snake in (
        ("startTimeUnixNano", "start_time_unix_nano"),
        ("endTimeUnixNano", "end_time_unix_nano"),
    ):
        value = _get(raw, name, snake)
        try:
            times[name] = None if value is None else _int64(value)
        except ValueError as exc:
            problems.append((name, str(exc), (_key(raw, name, snake),)))
    attrs, bad = _attributes(raw.get("attributes"))
    problems += [(key or "attributes", reason, ("attributes", *at)) for key, reason, at in bad]
    status = raw.get("status") or {}
    try:
        code = _enum(status.get("code") if isinstance(status, dict) else status, STATUS_NAMES, "STATUS_CODE_")
    except ValueError as exc:
        problems.append(("status.code", str(exc), ("status",)))
        code = "UNSET"
    try:
        kind = _enum(raw.get("kind"), KIND_NAMES, "SPAN_KIND_")
    except ValueError as exc:
        problems.append(("kind", str(exc), ("kind",)))
        kind = "UNSPECIFIED"
    events = []
    for e, event in enumerate(raw.get("events") or []):
        if isinstance(event, dict):
            event_attrs, bad = _attributes(event.get("attributes"))
            events.append((str(event.get("name", "")), event_attrs))
            problems += [
                (f"events[{e}].{key or 'attributes'}", reason, ("events", e, "attributes", *at))
                for key, reason, at in bad
            ]
    shown = ids["spanId"] or str(_get(raw, "spanId", "span_id"))[:40]
    if problems:
        offenders += [
            Offender(file, reason, position=where.position(doc, (*path, *at), shown), field=name)
            for name, reason, at in problems
        ]
        return None
    message = status.get("message", "") if isinstance(status, dict) else ""
    return Span(
        trace_id=ids["traceId"],  # type: ignore[arg-type]  # checked above
        span_id=ids["spanId"],  # type: ignore[arg-type]
        parent_id=ids["parent"],
        name=str(raw.get("name", "")),
        kind=kind,
        start_ns=times["startTimeUnixNano"],
        end_ns=times["endTimeUnixNano"],
        attributes=attrs,
        status=code,
        status_message=message if isinstance(message, str) else str(message),
        origin=(where, doc, path),
        events=events,
    )


def _spread(value: Any, start: int, line: int, one_line: bool) -> list[tuple[_Doc, Any]]:
    """A top-level value as its documents: each element of an array, else the value itself."""
    if isinstance(value, list):
        return [
            (_Doc(start, (i,), line if one_line else None, one_line), item) for i, item in enumerate(value)
        ]
    return [(_Doc(start, (), line, one_line), value)]


def _documents(text: str, where: _Where, file: str, offenders: list[Offender]) -> list[tuple[_Doc, Any]]:
    """``(document, parsed request)`` for every export request of the file, in file order: the
    whole text when it is one JSON value; else one per line when every line is JSON on its own
    (orjson: the collector's files are large); else a stream of JSON values one after another
    (pretty-printed requests; also JSON lines with a line that is not JSON): a value that is not
    JSON is an offender, and reading goes on at the next line that opens with ``{`` or ``[``."""
    start = _WS.match(text, len(_BOM) if text.startswith(_BOM) else 0).end()  # type: ignore[union-attr]
    if start == len(text):
        offenders.append(Offender(file, "empty: no OTLP JSON export request"))
        return []
    try:
        whole = orjson.loads(text.removeprefix(_BOM))
    except orjson.JSONDecodeError:
        pass
    else:
        return _spread(whole, start, where.line_of(start), "\n" not in text.rstrip()[start:])
    out: list[tuple[_Doc, Any]] = []
    offset = 0
    for n, line in enumerate(text.split("\n"), start=1):
        begin, offset = offset, offset + len(line) + 1
        if not line.strip():
            continue
        try:
            value = orjson.loads(line.removeprefix(_BOM) if n == 1 else line)
        except orjson.JSONDecodeError:
            return _stream(text, start, where, file, offenders)
        out += _spread(value, begin, n, True)
    return out


def _stream(
    text: str, pos: int, where: _Where, file: str, offenders: list[Offender]
) -> list[tuple[_Doc, Any]]:
    """The JSON values of ``text`` one after another from ``pos`` (whitespace, or nothing,
    between them), as documents; see :func:`_documents`."""
    decoder = json.JSONDecoder()
    out: list[tuple[_Doc, Any]] = []
    while pos < len(text):
        line = where.line_of(pos)
        try:
            value, end = decoder.raw_decode(text, pos)
        except (ValueError, RecursionError) as exc:
            if isinstance(exc, json.JSONDecodeError):
                inside = f" (in the request from line {line})" if exc.lineno != line else ""
                position = f"line {exc.lineno}, column {exc.colno}"
                offenders.append(Offender(file, f"not JSON: {exc.msg}{inside}", position=position))
                failed_at = exc.pos
            else:
                offenders.append(Offender(file, f"not JSON: {exc}", position=f"line {line}"))
                failed_at = pos
            # Go on at the next document: a line opening with { or [ after the value that failed
            # (the failing line itself when it opens one: a cut-short request runs into the next).
            again = _DOC_START.search(text, max(pos + 1, text.rfind("\n", 0, failed_at) + 1))
            if again is None:
                break
            pos = again.start()
            continue
        out += _spread(value, pos, line, "\n" not in text[pos:end])
        pos = _WS.match(text, end).end()  # type: ignore[union-attr]
    return out


def read_otlp(text: str, path: str) -> tuple[list[Span], list[Offender], list[str]]:
    """Every readable span of an OTLP JSON file (``text``, named ``path`` in messages), in file
    order; the offenders: every value that is not JSON, every document that is not an export
    request and every span field or attribute that cannot be read (line, span id, field, reason;
    a span with one is left out); and the warnings (a span written more than once — an exporter
    added twice, a file appended to twice — is kept once). The caller raises the offenders, with
    its own, as one InputError.
    """
    offenders: list[Offender] = []
    spans: dict[tuple[str, str], Span] = {}
    repeated = 0
    where = _Where(text)
    for doc, request in _documents(text, where, path, offenders):
        if request == {}:
            continue  # an empty export request: protobuf's JSON of a request without spans
        if not looks_like_otlp(request):
            reason = CONSOLE_HINT if looks_like_console_span(request) else NOT_OTLP
            offenders.append(Offender(path, reason, position=where.doc_position(doc)))
            continue
        resources_key = _key(request, "resourceSpans", "resource_spans")
        resources = request[resources_key]
        if not isinstance(resources, list | None):
            reason = f"expected a list of resourceSpans, got {type(resources).__name__}"
            offenders.append(Offender(path, reason, position=where.position(doc, (resources_key,))))
            continue
        for r, resource in enumerate(resources or []):
            scope_key = next((k for k in _SCOPE_KEYS if isinstance(resource, dict) and k in resource), None)
            scopes = resource[scope_key] if scope_key is not None else None
            if not isinstance(scopes, list):
                position = where.position(doc, (resources_key, r))
                offenders.append(
                    Offender(path, f"expected a list of scopeSpans in resourceSpans[{r}]", position=position)
                )
                continue
            for s, scope in enumerate(scopes):
                raw_spans = scope.get("spans") if isinstance(scope, dict) else None
                if not isinstance(raw_spans, list):
                    position = where.position(doc, (resources_key, r, scope_key, s))
                    offenders.append(
                        Offender(
                            path,
                            f"expected a list of spans in resourceSpans[{r}].scopeSpans[{s}]",
                            position=position,
                        )
                    )
                    continue
                for i, raw in enumerate(raw_spans):
                    at = (resources_key, r, scope_key, s, "spans", i)
                    span = _span(raw, where, doc, at, path, offenders)
                    if span is None:
                        continue
                    key = (span.trace_id, span.span_id)
                    repeated += key in spans
                    spans[key] = span  # the last copy, where the file ends
    warnings = []
    if repeated:
        warnings.append(
            f"{repeated} span{'s' if repeated != 1 else ''} written more than once (same trace and span "
            "id: an exporter added twice, or a file appended to twice?): each read once, its last copy"
        )
    return list(spans.values()), offenders, warnings
