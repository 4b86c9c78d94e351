"""OTLP JSON trace files → spans (the input of :mod:`.openinference`).

Reads what OpenTelemetry writes as JSON: one ``ExportTraceServiceRequest``
(``{"resourceSpans": [...]}``) per file, or one per line (the collector's file exporter, which
appends a request per export). Spans sit under ``resourceSpans[].scopeSpans[].spans[]`` (also the
pre-1.0 name ``instrumentationLibrarySpans``); field names are lowerCamelCase as the OTLP/JSON
encoding writes them, snake_case (protobuf's own names) read too.

Two encodings of the same data are accepted:

* ids: hex (``traceId`` 32 hex digits, ``spanId`` 16), as the OTLP/JSON spec and the collector
  write, or base64 of the 16 / 8 bytes, as protobuf's generic JSON mapping
  (``MessageToJson``) writes bytes; both read as lowercase hex;
* enums (``kind``, ``status.code``): integers (the spec) or their names (``MessageToJson``);
  64-bit integers (times, ``intValue``): decimal strings or JSON numbers.

Attribute values become Python values: ``stringValue`` → str, ``intValue`` → int, ``doubleValue``
→ float, ``boolValue`` → bool, ``arrayValue`` → list, ``kvlistValue`` → dict, ``bytesValue`` → its
base64 text. Anything that cannot be read is an :class:`~kebab_eval_pipeline.errors.Offender`
naming the file, line, span and field; :func:`read_otlp` returns them all beside the spans.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass, field
from typing import Any

import orjson

from kebab_eval_pipeline.errors import Offender

STATUS_NAMES = {0: "UNSET", 1: "OK", 2: "ERROR"}
KIND_NAMES = {0: "UNSPECIFIED", 1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}
_HEX = re.compile(r"[0-9a-fA-F]+")
_SCOPE_KEYS = ("scopeSpans", "scope_spans", "instrumentationLibrarySpans", "instrumentation_library_spans")


@dataclass(slots=True)
class Span:
    """One span as read: ids as lowercase hex (``parent_id`` None for a root), times in Unix
    nanoseconds (None when absent), ``attributes`` as Python values, ``status`` ``UNSET`` /
    ``OK`` / ``ERROR``, ``events`` as ``(name, attributes)``, ``where`` its line in the file."""

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
    where: str
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


def _get(obj: dict, camel: str, snake: str | None = None) -> Any:
    value = obj.get(camel)
    if value is None and snake is not None:
        value = obj.get(snake)
    return value


def looks_like_otlp(doc: Any) -> bool:
    """True for an object with ``resourceSpans`` (an export request)."""
    return isinstance(doc, dict) and ("resourceSpans" in doc or "resource_spans" in doc)


def _id(value: Any, nbytes: int) -> str:
    """A trace (16 bytes) or span (8 bytes) id as lowercase hex; ValueError when it is neither
    hex of that length nor base64 of that many bytes."""
    if not isinstance(value, str):
        raise ValueError(f"expected a hex or base64 string, got {type(value).__name__}")
    if len(value) == 2 * nbytes and _HEX.fullmatch(value):
        return value.lower()
    try:
        raw = base64.b64decode(value, validate=True)
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
    do); ValueError naming the first bad entry."""
    if items is None:
        return {}
    if not isinstance(items, list):
        raise ValueError(f"expected a list of {{key, value}}, got {type(items).__name__}")
    out: dict[str, Any] = {}
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("key"), str):
            raise ValueError(f"expected {{key, value}}, got {str(item)[:80]}")
        try:
            out[item["key"]] = any_value(item.get("value", {}))
        except ValueError as exc:
            raise ValueError(f"{item['key']}: {exc}") from None
    return out


def _span(raw: Any, where: str, path: str, offenders: list[Offender]) -> Span | None:
    """One span, or None after adding its offenders (every bad field of it)."""
    if not isinstance(raw, dict):
        offenders.append(Offender(path, f"expected a span object, got {type(raw).__name__}", position=where))
        return None
    problems: list[tuple[str, str]] = []
    ids: dict[str, str | None] = {}
    for name, snake, nbytes in (("spanId", "span_id", 8), ("traceId", "trace_id", 16)):
        try:
            ids[name] = _id(_get(raw, name, snake), nbytes)
        except ValueError as exc:
            problems.append((name, str(exc)))
            ids[name] = None
    parent = _get(raw, "parentSpanId", "parent_span_id")
    try:
        ids["parent"] = _id(parent, 8) if parent else None
    except ValueError as exc:
        problems.append(("parentSpanId", str(exc)))
    times: dict[str, int | None] = {}
    for name, snake in (
        ("startTimeUnixNano", "start_time_unix_nano"),
        ("endTimeUnixNano", "end_time_unix_nano"),
    ):
        value = _get(raw, name, snake)
        try:
            times[name] = None if value is None else _int64(value)
        except ValueError as exc:
            problems.append((name, str(exc)))
    try:
        attrs = attributes(raw.get("attributes"))
    except ValueError as exc:
        problems.append(("attributes", str(exc)))
        attrs = {}
    status = raw.get("status") or {}
    try:
        code = _enum(status.get("code") if isinstance(status, dict) else status, STATUS_NAMES, "STATUS_CODE_")
    except ValueError as exc:
        problems.append(("status.code", str(exc)))
        code = "UNSET"
    try:
        kind = _enum(raw.get("kind"), KIND_NAMES, "SPAN_KIND_")
    except ValueError as exc:
        problems.append(("kind", str(exc)))
        kind = "UNSPECIFIED"
    events = []
    for event in raw.get("events") or []:
        if isinstance(event, dict):
            try:
                events.append((str(event.get("name", "")), attributes(event.get("attributes"))))
            except ValueError as exc:
                problems.append(("events", str(exc)))
    shown = ids["spanId"] or str(_get(raw, "spanId", "span_id"))[:40]
    position = f"{where}, span {shown}"
    if problems:
        offenders += [Offender(path, reason, position=position, field=name) for name, reason in problems]
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
        where=position,
        events=events,
    )


def _documents(text: str, path: str, offenders: list[Offender]) -> list[tuple[str, Any]]:
    """``(where, request)`` per export request: the whole file when it is one JSON document, else
    one per non-empty line (a line that is not JSON is an offender)."""
    try:
        return [("line 1", orjson.loads(text))]
    except orjson.JSONDecodeError:
        pass
    lines = text.split("\n")
    first = next((line for line in lines if line.strip()), "")
    try:
        json.loads(first)
    except (ValueError, RecursionError):
        # Not JSON lines (a pretty-printed document, or no JSON at all): the whole file's error.
        try:
            return [("line 1", json.loads(text))]  # NaN and huge integers, as the stdlib reads them
        except json.JSONDecodeError as exc:
            offenders.append(
                Offender(path, f"not JSON: {exc.msg}", position=f"line {exc.lineno}, column {exc.colno}")
            )
        except (ValueError, RecursionError) as exc:
            offenders.append(Offender(path, f"not JSON: {exc}"))
        return []
    out = []
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            out.append((f"line {n}", orjson.loads(line)))
        except orjson.JSONDecodeError:
            try:
                out.append((f"line {n}", json.loads(line)))  # NaN, huge integers: the stdlib's reading
            except (ValueError, RecursionError) as exc:
                reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
                offenders.append(Offender(path, f"not JSON: {reason}", position=f"line {n}"))
    return out


def read_otlp(text: str, path: str) -> tuple[list[Span], list[Offender]]:
    """Every readable span of an OTLP JSON file (``text``, named ``path`` in messages), in file
    order, and the offenders: every line that is not JSON, every request without
    ``resourceSpans`` and every span field that cannot be read (line, span id, field, reason); a
    span with one is left out. The caller raises them, with its own, as one InputError.
    """
    offenders: list[Offender] = []
    spans: list[Span] = []
    for where, doc in _documents(text, path, offenders):
        if not looks_like_otlp(doc):
            offenders.append(
                Offender(
                    path, 'expected an OTLP JSON export request {"resourceSpans": [...]}', position=where
                )
            )
            continue
        for r, resource in enumerate(_get(doc, "resourceSpans", "resource_spans") or []):
            scopes = next(
                (resource[k] for k in _SCOPE_KEYS if isinstance(resource, dict) and k in resource), None
            )
            if not isinstance(scopes, list):
                offenders.append(
                    Offender(path, "expected a list of scopeSpans", position=f"{where}, resourceSpans[{r}]")
                )
                continue
            for s, scope in enumerate(scopes):
                raw_spans = scope.get("spans") if isinstance(scope, dict) else None
                if not isinstance(raw_spans, list):
                    offenders.append(
                        Offender(
                            path,
                            "expected a list of spans",
                            position=f"{where}, resourceSpans[{r}].scopeSpans[{s}]",
                        )
                    )
                    continue
                for raw in raw_spans:
                    span = _span(raw, where, path, offenders)
                    if span is not None:
                        spans.append(span)
    return spans, offenders
