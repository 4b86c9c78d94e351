"""The replay adapter: score traces recorded elsewhere instead of calling a system (SPEC §4).

Formats (``format: auto`` tells them apart by content):

* ``kebab`` — ``per_query.jsonl``, one query per line: ``query_id`` (or ``id``), ``hits``
  (``search_hit.v1``; ``hits_top_k`` also read), ``answer`` (object or null),
  ``latency_ms`` (a number: retrieval; or ``{"retrieval", "answer"}``; ``retrieval_ms`` /
  ``answer_ms`` also read), ``error`` (string or null), ``timed_out``.
* ``wfgy`` — ``trace.jsonl``: ``qid``, ``q``, ``retrieved_ids`` (ranked chunk ids) and
  ``answer_json`` {``claim``, ``citations``}; the claim ``not in context`` is a refusal.
* ``export`` — this project's own ``kebab-eval export --format json`` document.
* ``openinference`` — OpenTelemetry traces following the OpenInference conventions, as OTLP JSON
  (:mod:`.otlp` reads the file, :mod:`.openinference` makes one record per traced query), matched
  to golden queries by question text or by an attribute (``match_by``).
* ``trec`` / ``ranx`` — a TREC run file (``qid Q0 docno rank score tag``) or a ranx / ir_measures
  JSON run (``{qid: {docid: score}}``): hits are document ids, ordered as trec_eval orders them
  (:mod:`kebab_eval_pipeline.systems.trec_run`).

A golden query the trace does not mention is a row with error ``missing_in_trace``; a
recorded error (``error``, ``timed_out``, an OpenInference span with status ERROR) is that query's
error as a live one is (its class kept when it names one; ``timed_out`` alone is a ``timeout``):
the hits and answer the record also lists are not scored — the query scores 0 — unless the
failure is known to have come after the search (an export's stored row; an OpenInference trace
whose failing span is after its retriever), where the hits stay as a live failed ask's do. A trace
that cannot be read raises InputError listing every bad line at once; a query recorded
twice keeps its last record (as WFGY's scorer does) with a warning.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from kebab_eval_pipeline.contract import Answer, HitBlock, SystemInfo
from kebab_eval_pipeline.foundation.errors import InputError, Offender
from kebab_eval_pipeline.foundation.gc_pause import gc_paused
from kebab_eval_pipeline.foundation.limits import INPUT_ENV, read_limited
from kebab_eval_pipeline.foundation.read_once import ReadOnce
from kebab_eval_pipeline.foundation.yaml_io import (
    decode_text,
    duplicate_offenders,
    id_problem,
    json_duplicates,
    json_loads,
    may_have_duplicate_keys,
    may_hold_surrogates,
    parse_json_checked,
    surrogate_paths,
)
from kebab_eval_pipeline.systems import otlp, trec_run
from kebab_eval_pipeline.systems.capabilities import Capabilities
from kebab_eval_pipeline.systems.kinds.replay import REPLAY_FORMATS, ReplaySystemSettings
from kebab_eval_pipeline.systems.openinference import normalise_question, records_from_spans
from kebab_eval_pipeline.systems.outcome import (
    ERROR_CLASSES,
    MISSING_IN_TRACE,
    RECORDED_ERROR,
    TIMEOUT,
    Progress,
    QueryFailure,
    QueryOutcome,
    QueryRequest,
)
from kebab_eval_pipeline.systems.protocol import OpaqueSystem
from kebab_eval_pipeline.systems.versions import apply_version_report
from kebab_eval_pipeline.systems.wire import parse_answer, parse_hit_block, parse_scope

#: The trace formats read: the keys of REPLAY_FORMATS, which says what each one's records hold.
FORMATS = tuple(REPLAY_FORMATS)
_SURROGATE = "holds a lone surrogate (an unpaired \\ud800-\\udfff escape): not text any file can store"
_ID_KEYS = {"kebab": ("query_id", "id", "qid"), "wfgy": ("qid", "q_id"), "export": ("query_id",)}


class _Record:
    """One query's recorded result, as read (parsed lazily per requested k).

    A JSONL record keeps its line's text (``line``), not the parsed hits and answer: a million
    queries' parsed rankings held 1.2 GiB for the whole run, their text a third of that. The line
    was parsed and checked when the trace was read; :meth:`raw` parses it again when the query is
    asked (once per run)."""

    __slots__ = (
        "answer_ms",
        "error",
        "failed_after_search",
        "line",
        "query_id",
        "raw_answer",
        "raw_hits",
        "retrieval_ms",
        "scope",
        "timed_out",
        "where",
    )

    def __init__(self, query_id: str, where: str) -> None:
        self.query_id = query_id
        self.where = where
        self.line: str | None = None
        self.raw_hits: Any = None
        self.raw_answer: Any = None
        self.retrieval_ms: float | None = None
        self.answer_ms: float | None = None
        self.error: str | None = None
        self.timed_out = False
        self.failed_after_search = False  # OpenInference: the failing span came after retrieval
        self.scope: list[str] | None = None

    def raw(self, fmt: str) -> tuple[Any, Any]:
        """The recorded (hits, answer) as read from the trace."""
        if self.line is None:
            return self.raw_hits, self.raw_answer
        return _raw_parts(fmt, json_loads(self.line))


def _raw_parts(fmt: str, entry: dict) -> tuple[Any, Any]:
    """An entry's recorded hits (a list; a WFGY ranking of ids) and answer (None when absent)."""
    if fmt == "wfgy":
        return list(entry.get("retrieved_ids") or []), entry.get("answer_json")
    return entry.get("hits", entry.get("hits_top_k")) or [], entry.get("answer")


def _number(value: Any, field: str) -> float | None:
    """A recorded number as a finite float; None when it is not a number at all; ValueError
    naming ``field`` for NaN, Infinity and integers beyond the float range."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer past the float range (JSON allows any number of digits)
        number = math.inf
    if not math.isfinite(number):  # NaN / Infinity (Python's json reads them) or overflowed
        raise ValueError(f"{field}: expected a finite number, got {_short(value)}")
    return number


#: The valid domain of every number a trace carries (impossible values refuse the trace at load):
#: latencies are finite milliseconds in [0, one day] (a sum over 10M such queries stays finite);
#: ranks are whole numbers in [1, 2^63 - 1]; scores are finite; token counts whole numbers in
#: [0, 2^63 - 1]. A value of another type (a string latency "12") is refused like NaN.
MAX_LATENCY_MS = 86_400_000.0
INT64_MAX = 2**63 - 1
_RANK_FIELDS = ("rank", "lexical_rank", "vector_rank")
_SCORE_FIELDS = ("score", "lexical_score", "vector_score", "fusion_score")
_TOKEN_FIELDS = ("prompt_tokens", "completion_tokens")


def _latency(value: Any, field: str, problems: list[str]) -> float | None:
    """A recorded latency in ms (None when absent or null); an impossible one is added to
    ``problems`` as ``"FIELD: reason"`` (and read as None)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        problems.append(f"{field}: expected a number of milliseconds or null, got {_short(value)}")
        return None
    try:
        number = _number(value, field)
    except ValueError as exc:
        problems.append(str(exc))
        return None
    if number is not None and number < 0:
        problems.append(f"{field}: a latency cannot be negative, got {_short(value)}")
        return None
    if number is not None and number > MAX_LATENCY_MS:
        problems.append(f"{field}: more than one day ({MAX_LATENCY_MS:.0f} ms), got {_short(value)}")
        return None
    return number


def _whole(value: Any, field: str, low: int, problems: list[str]) -> None:
    """A recorded rank or count: a whole number in [low, 2^63 - 1] when it is a number at all
    (other types are the per-query ``bad_response`` of the hit parser)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        problems.append(f"{field}: expected a whole number, got {_short(value)}")
    elif not low <= value <= INT64_MAX:
        problems.append(f"{field}: expected a whole number from {low} to 2^63 - 1, got {_short(value)}")


def _finite(value: Any, field: str, problems: list[str]) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return
    try:
        _number(value, field)
    except ValueError as exc:
        problems.append(str(exc))


def _numeric_problems(hits: Any, answer: Any) -> list[str]:
    """Impossible numbers in recorded hits (ranks, scores, also nested under ``retrieval``) and in
    an answer's token counts (also under ``usage``), as ``"FIELD: reason"``."""
    problems: list[str] = []
    for i, hit in enumerate(hits if isinstance(hits, list) else []):
        if not isinstance(hit, dict):
            continue
        nested = hit.get("retrieval")
        for prefix, fields in ((f"hits[{i}]", hit), (f"hits[{i}].retrieval", nested)):
            if not isinstance(fields, dict):
                continue
            for name in _RANK_FIELDS:
                if name in fields:
                    _whole(fields[name], f"{prefix}.{name}", 1, problems)
            for name in _SCORE_FIELDS:
                if name in fields:
                    _finite(fields[name], f"{prefix}.{name}", problems)
    if isinstance(answer, dict):
        usage = answer.get("usage")
        for prefix, fields in (("answer", answer), ("answer.usage", usage)):
            if isinstance(fields, dict):
                for name in _TOKEN_FIELDS:
                    if name in fields:
                        _whole(fields[name], f"{prefix}.{name}", 0, problems)
    return problems


def _short(value: Any) -> str:
    digits = len(str(abs(value))) if isinstance(value, int) else 0
    return f"an integer of {digits} digits" if digits > 20 else repr(value)


def _lines(text: str) -> list[str]:
    # Only "\n" ends a JSONL record: str.splitlines() would also split inside strings at U+2028,
    # U+0085 & co. (valid unescaped in JSON), giving a truncated record and a wrong line number.
    return text.split("\n")


def detect_format(path: Path, text: str) -> str:
    """``kebab`` / ``wfgy`` / ``export`` / ``openinference`` from the content; ValueError when none
    fits."""
    stripped = text.lstrip()
    whole = None  # the file as one JSON object, when it is one (read once: exports are large)
    if stripped.startswith("{"):
        try:
            whole = json.loads(text)
        except (ValueError, RecursionError):
            whole = None
        if isinstance(whole, dict) and isinstance(whole.get("per_query"), list):
            return "export"
        if otlp.looks_like_otlp(whole):
            return "openinference"
        if trec_run.looks_like_ranx_run(whole):
            return "ranx"
    # OTLP requests one per line or one after another, an array of them; the SDK's console spans
    sniffed = otlp.sniff(text) if whole is None or otlp.looks_like_console_span(whole) else None
    if sniffed is not None:
        if sniffed == "otlp":
            return "openinference"
        raise ValueError(otlp.CONSOLE_HINT)
    for line in _lines(text):
        if not line.strip():
            continue
        try:
            first = json.loads(line)
        except (ValueError, RecursionError):
            break
        if isinstance(first, dict):
            if "retrieved_ids" in first or "answer_json" in first:
                return "wfgy"
            if any(key in first for key in ("hits", "hits_top_k", "query_id")):
                return "kebab"
        break
    first_line = next((line for line in _lines(text[:65536]) if line.strip()), "")
    if trec_run.looks_like_trec_run(first_line):
        return "trec"
    raise ValueError(
        "cannot tell the trace format (kebab per_query.jsonl, WFGY trace.jsonl, a kebab-eval JSON export, "
        "OTLP JSON traces, a TREC run or a ranx JSON run); set system.format"
    )


def _jsonl(path: Path, lines: list[str], early: tuple[list[Offender], list[Offender]]):
    """The lines as (line number, value, text), parsed one at a time as they are consumed; a line
    that is not JSON (``early[0]``), or that writes a key twice in one object (``early[1]``), is an
    offender (and left out)."""
    not_json, twice = early
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        lines[n - 1] = ""  # a record kept keeps its text; the list lets go of it
        try:
            row = json_loads(line)
        except json.JSONDecodeError as exc:
            not_json.append(
                Offender(str(path), f"not JSON: {exc.msg}", position=f"line {n}, column {exc.colno}")
            )
            continue
        except (ValueError, RecursionError) as exc:  # an integer past Python's digit limit, deep nesting
            not_json.append(Offender(str(path), f"not JSON: {exc}", position=f"line {n}"))
            continue
        if may_have_duplicate_keys(line, row):
            duplicates = json_duplicates(line, n)
            if duplicates:
                twice += duplicate_offenders(str(path), duplicates)
                continue
        yield n, row, line


def _record_id(entry: Any, keys: tuple[str, ...]) -> str | None:
    if not isinstance(entry, dict):
        return None
    for key in keys:
        value = entry.get(key)
        if isinstance(value, str | int) and not isinstance(value, bool) and str(value).strip():
            return str(value)
    return None


def _read(path: Path) -> tuple[str, str]:
    """(the trace's text, the sha256 of its bytes): read once, bounded by KEBAB_EVAL_MAX_INPUT_MB
    (by size before reading, and on the bytes read); devices and FIFOs are refused unopened."""
    data = read_limited(path, "replay trace", field="system.path")
    try:
        text = decode_text(data)  # a BOM at the start is dropped, as in every input
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(
            "cannot read the replay trace",
            [Offender(str(path), f"not valid UTF-8 (byte {exc.start})", position=f"line {line}")],
        ) from None
    return text, hashlib.sha256(data).hexdigest()


def _reported(doc: dict, path: Path, offenders: list[Offender]) -> dict[str, Any]:
    """What an export says about the system that ran: its versions, mode, run id and coverage."""
    versions, system = doc.get("versions"), doc.get("system")
    for name, value in (("versions", versions), ("system", system)):
        if value is not None and not isinstance(value, dict):
            offenders.append(
                Offender(str(path), f"expected an object, got {type(value).__name__}", field=name)
            )
    versions = versions if isinstance(versions, dict) else {}
    system = system if isinstance(system, dict) else {}
    reported = {**versions, "mode": system.get("mode"), "exported_run_id": doc.get("run_id")}
    coverage = system.get("coverage")
    if isinstance(coverage, dict):
        # Only finite numbers: the version report turns them into floats.
        reported["coverage"] = {
            k: v for k, v in coverage.items() if _finite_or_none(v) is not None and not isinstance(v, bool)
        }
    return reported


def _finite_or_none(value: Any) -> float | None:
    try:
        return _number(value, "")
    except ValueError:
        return None


#: Traces parsed in this process for version readings, by (path, format, size limit): a sensor or
#: an observation in a long-lived process (the daemon, a code server) reads a replayed system's
#: info at every tick (:func:`~kebab_eval_pipeline.systems.kinds.replay.live_info`). A run's system
#: is not cached here: a run builds it once per process (its run context) and lets it go after its
#: retrieval, which a cache would defeat (a million-query trace is GiBs).
TRACES = ReadOnce(size=2)

Trace = tuple[dict[str, _Record], str, dict[str, Any], list[str], str]


def cached_trace(
    path: Path, fmt: str = "auto", match_by: str = "question", retriever_span: str | None = None
) -> Trace:
    """:func:`read_trace`, parsed once per process while the file is unchanged
    (:mod:`kebab_eval_pipeline.foundation.read_once`); an edited, replaced or touched file is parsed again.
    The records are shared by the systems built from it, which only read them. An unreadable
    trace is never kept (its InputError is raised on every call)."""
    key = (str(path.resolve()), fmt, os.environ.get(INPUT_ENV, ""), match_by, retriever_span)
    return TRACES.get(key, [path], lambda: parsed_trace(path, fmt, match_by, retriever_span))


def parsed_trace(
    path: Path, fmt: str = "auto", match_by: str = "question", retriever_span: str | None = None
) -> Trace:
    """:func:`read_trace` with the cyclic collector paused (millions of small objects, no cycles)."""
    with gc_paused():
        return read_trace(path, fmt, match_by, retriever_span)


def read_trace(
    path: Path, fmt: str = "auto", match_by: str = "question", retriever_span: str | None = None
) -> tuple[dict[str, _Record], str, dict[str, Any], list[str], str]:
    """Read a trace file: ``(records by query id, format, versions/system reported, warnings,
    sha256 of the file)``. OpenInference records are keyed by ``match_by``: the normalised
    question (:func:`~.openinference.normalise_question`) or the named attribute's value.

    Raises InputError listing every unreadable line / entry (file, line or index, reason); a
    file over ``KEBAB_EVAL_MAX_INPUT_MB`` is refused before it is read.
    """
    text, sha256 = _read(path)
    if fmt == "auto":
        try:
            fmt = detect_format(path, text)
        except ValueError as exc:
            raise InputError(
                "unknown replay trace format", [Offender(str(path), str(exc), field="system.format")]
            ) from None
    if fmt == "openinference":
        records, warnings = _read_openinference(path, text, match_by, retriever_span)
        return records, fmt, {}, warnings, sha256
    if fmt in trec_run.RUN_FORMATS:
        records, warnings = _read_run(path, text, fmt)
        return records, fmt, {}, warnings, sha256
    offenders: list[Offender] = []
    early: tuple[list[Offender], list[Offender]] = ([], [])
    start = 0
    reported: dict[str, Any] = {}
    if fmt == "export":
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(
                "replay trace is not JSON",
                [Offender(str(path), exc.msg, position=f"line {exc.lineno}, column {exc.colno}")],
            ) from None
        except (ValueError, RecursionError) as exc:  # an integer past Python's digit limit, deep nesting
            raise InputError("replay trace is not JSON", [Offender(str(path), str(exc))]) from None
        if may_have_duplicate_keys(text, doc):
            duplicates = json_duplicates(text)
            if duplicates:
                raise InputError(
                    f"replay trace {path.name} has duplicate keys", duplicate_offenders(str(path), duplicates)
                )
        if not isinstance(doc, dict) or not isinstance(doc.get("per_query"), list):
            raise InputError(
                "not a kebab-eval export", [Offender(str(path), "expected an object with 'per_query'")]
            )
        entries = ((f"per_query[{i}]", e, None) for i, e in enumerate(doc["per_query"]))
        reported = _reported(doc, path, offenders)
    else:
        lines = _lines(text)
        entries = ((f"line {n}", e, line) for n, e, line in _jsonl(path, lines, early))
    records: dict[str, _Record] = {}
    warnings: list[str] = []
    surrogates = may_hold_surrogates(text)
    del text  # a JSONL record keeps its own line
    for where, entry, line in entries:
        qid = _record_id(entry, _ID_KEYS[fmt])
        if qid is None:
            keys = " / ".join(_ID_KEYS[fmt])
            reason = f"expected an object with {keys}" if not isinstance(entry, dict) else f"no {keys}"
            offenders.append(Offender(str(path), reason, position=where))
            continue
        # Text no file can store (a lone surrogate in an id, a snippet, an answer): the trace is
        # refused, naming each record and field, rather than failing when the run is written.
        bad = surrogate_paths(entry) if surrogates else []
        problem = id_problem(qid, query_id=True)
        if bad or problem:
            shown = qid.encode("utf-8", "backslashreplace").decode("utf-8")
            offenders += [
                Offender(str(path), _SURROGATE, position=where, query_id=shown, field=f) for f in bad
            ]
            if problem and not bad:
                offenders.append(
                    Offender(str(path), f"query id {problem}", position=where, query_id=qid, field="query_id")
                )
            continue
        try:
            record, problems = _read_entry(fmt, qid, where, entry)
        except ValueError as exc:
            offenders.append(Offender(str(path), str(exc), position=where, query_id=qid))
            continue
        if problems:  # every impossible number of the record, each named
            offenders += [Offender(str(path), p, position=where, query_id=qid) for p in problems]
            continue
        if line is not None:  # kept as text (see _Record)
            record.line, record.raw_hits, record.raw_answer = line, None, None
        if qid in records:
            warnings.append(f"{qid}: recorded more than once ({records[qid].where}, {where}); kept the last")
        records[qid] = record
    # A line that is not JSON or writes a key twice is listed before the records' own problems.
    offenders[start:start] = [*early[0], *early[1]]
    if offenders:
        raise InputError(f"replay trace {path.name} ({fmt}) cannot be read", offenders)
    return records, fmt, reported, warnings, sha256


def _read_openinference(
    path: Path, text: str, match_by: str, retriever_span: str | None
) -> tuple[dict[str, _Record], list[str]]:
    """Records of an OTLP JSON trace file by match key, and the read warnings; InputError listing
    every span that cannot be read and every impossible number (span, attribute, reason)."""
    spans, offenders, warnings = otlp.read_otlp(text, str(path))
    traces, more_warnings, more = records_from_spans(spans, str(path), match_by, retriever_span)
    offenders += more
    warnings += more_warnings
    surrogates = may_hold_surrogates(text)
    records: dict[str, _Record] = {}
    for trace in traces:
        record = _Record(trace.key, trace.where)
        problems: list[str] = []
        bad = (
            surrogate_paths({"question": trace.question, "hits": trace.hits, "answer": trace.answer})
            if surrogates
            else []
        )
        problems += [f"{field}: {_SURROGATE}" for field in bad]
        problems += _numeric_problems(trace.hits, trace.answer)
        record.raw_hits, record.raw_answer = trace.hits, trace.answer
        record.retrieval_ms = _latency(trace.retrieval_ms, "retrieval span duration (ms)", problems)
        record.answer_ms = _latency(trace.answer_ms, "query span duration (ms)", problems)
        record.error = trace.error
        record.failed_after_search = trace.failed_after_search
        if problems:
            offenders += [Offender(str(path), p, position=trace.where) for p in problems]
            continue
        if trace.key in records:
            warnings.append(
                f"{trace.key}: traced more than once ({records[trace.key].where}, {trace.where}); "
                "kept the last to start"
            )
        records[trace.key] = record
    if offenders:
        raise InputError(f"replay trace {path.name} (openinference) cannot be read", offenders)
    return records, warnings


def _read_run(path: Path, text: str, fmt: str) -> tuple[dict[str, _Record], list[str]]:
    """A TREC or ranx run as records whose ``raw_hits`` is the query's :class:`~.trec_run.Ranking`
    (trec_eval's order), plus a warning when the file's ranks disagree with that order. Raises
    InputError listing every bad line."""
    if fmt == "trec":
        run, offenders = trec_run.read_trec_run(path, text)
    else:
        try:
            doc = parse_json_checked(text, path, "replay trace")
        except InputError as exc:
            raise InputError(f"replay trace {path.name} (ranx) cannot be read", exc.offenders) from None
        if may_hold_surrogates(text) and (bad := surrogate_paths(doc)):
            raise InputError(
                f"replay trace {path.name} (ranx) cannot be read",
                [Offender(str(path), _SURROGATE, field=name) for name in bad],
            )
        run, offenders = trec_run.read_ranx_run(path, doc, text)
    offenders += trec_run.duplicate_offenders(path, run)
    if offenders:
        raise InputError(f"replay trace {path.name} ({fmt}) cannot be read", offenders)
    rankings, disagree = trec_run.rankings(run)
    records = {}
    for qid, ranking in rankings.items():
        record = _Record(qid, ranking.where)
        record.raw_hits = ranking
        records[qid] = record
    warnings = []
    if disagree:
        shown = ", ".join(disagree[:5]) + (", …" if len(disagree) > 5 else "")
        warnings.append(
            f"{path.name}: {len(disagree)} quer{'y lists ranks' if len(disagree) == 1 else 'ies list ranks'} "
            f"that disagree with trec_eval's order (score descending, ties by docno descending), which "
            f"trec_eval uses and so does this replay: {shown}"
        )
    return records, warnings


def _ranked_block(ranking: trec_run.Ranking, k: int) -> tuple[HitBlock, list[str]]:
    """The top ``k`` of a run's ranking as hits (``doc_id`` and ``score``)."""
    n = len(ranking.docnos)
    warnings = [f"returned {n} hits for k={k}; kept the first {k}"] if n > k else []
    top = min(n, k)
    return HitBlock(top, {"doc_id": ranking.docnos[:top], "score": ranking.scores[:top]}), warnings


def _read_entry(fmt: str, qid: str, where: str, entry: dict) -> tuple[_Record, list[str]]:
    """The record of one trace entry and the impossible numbers in it (``"FIELD: reason"``);
    ValueError for an entry whose structure cannot be read."""
    record = _Record(qid, where)
    problems: list[str] = []
    try:
        record.scope = parse_scope(entry)
    except QueryFailure as failure:
        raise ValueError(failure.message) from None
    if fmt == "wfgy":
        ids = entry.get("retrieved_ids")
        # exact types (JSON gives no subclasses): one pass in C over a ranking of any length
        if ids is not None and not (isinstance(ids, list) and set(map(type, ids)) <= {str}):
            raise ValueError("retrieved_ids: expected a list of id strings")
        answer = entry.get("answer_json")
        if answer is not None and not isinstance(answer, dict):
            raise ValueError("answer_json: expected an object")
        record.raw_hits, record.raw_answer = _raw_parts(fmt, entry)
        return record, problems
    hits = entry.get("hits", entry.get("hits_top_k"))
    if hits is not None and not isinstance(hits, list):
        raise ValueError("hits: expected a list")
    answer = entry.get("answer")
    if answer is not None and not isinstance(answer, dict | str):
        raise ValueError("answer: expected an object, a string or null")
    record.raw_hits, record.raw_answer = _raw_parts(fmt, entry)
    problems += _numeric_problems(record.raw_hits, answer)
    latency = entry.get("latency_ms")
    if isinstance(latency, dict):
        record.retrieval_ms, record.answer_ms = (
            _latency(latency.get("retrieval"), "latency_ms.retrieval", problems),
            _latency(latency.get("answer"), "latency_ms.answer", problems),
        )
    else:
        record.retrieval_ms = _latency(latency, "latency_ms", problems)
    if record.retrieval_ms is None:
        record.retrieval_ms = _latency(entry.get("retrieval_ms"), "retrieval_ms", problems)
    if record.answer_ms is None:
        record.answer_ms = _latency(entry.get("answer_ms"), "answer_ms", problems)
    error = entry.get("error")
    if error is not None and not isinstance(error, str | dict):
        raise ValueError("error: expected a string, an object or null")
    record.error = (_error_text(error) if isinstance(error, dict) else error) or None
    record.timed_out = entry.get("timed_out") is True
    return record, problems


def _error_text(error: dict) -> str:
    """A recorded error object as text: ``class: message`` when it has them, else its JSON."""
    parts = [
        str(p)
        for p in (error.get("class"), error.get("message"))
        if isinstance(p, str | int | float) and not isinstance(p, bool) and p != ""
    ]
    if parts:
        return ": ".join(parts)
    try:
        return json.dumps(error)[:2000]
    except RecursionError:  # json.loads read it near the stack limit; writing it goes deeper
        raise ValueError("error: an object nested too deeply to show") from None


def _recorded_failure(error: str | None, timed_out: bool) -> QueryFailure:
    """The failure a trace records: a known class named in ``error`` (``timeout: slow``) is kept;
    ``timed_out`` without an error is a ``timeout``, as a live one."""
    if not error:
        return QueryFailure(TIMEOUT, "the trace records a timeout (timed_out: true)", timed_out=True)
    head, _, rest = error.partition(":")
    if head.strip() in ERROR_CLASSES and rest.strip():
        return QueryFailure(head.strip(), rest.strip(), timed_out=timed_out or head.strip() == "timeout")
    return QueryFailure(RECORDED_ERROR, error, timed_out=timed_out)


class ReplaySystem(OpaqueSystem):
    """Replays a recorded trace (see the module docstring)."""

    def __init__(self, settings: ReplaySystemSettings, *, cached: bool = False) -> None:
        """``cached``: the trace read through :data:`TRACES` (a version reading, not a run)."""
        self.settings = settings
        self._asked: set[str] = set()  # the query ids asked so far
        self._run_warnings: list[str] | None = None  # worked out when read (run_warnings)
        self.path = Path(settings.path)
        read = cached_trace if cached else parsed_trace
        self.records, self.format, self._reported, self.read_warnings, self._sha256 = read(
            self.path, settings.format, settings.match_by, settings.retriever_span
        )
        # OpenInference traces matched by question are keyed by the normalised question text
        self._by_question = self.format == "openinference" and settings.match_by == "question"

    def capabilities(self) -> Capabilities:
        """What the file's format can hold (``REPLAY_FORMATS``; an ``auto`` file's format is known
        once read)."""
        return REPLAY_FORMATS[self.format]

    def info(self) -> SystemInfo:
        """Kind, trace path, format and hash; versions the trace itself records (exports)."""
        details = {"trace": str(self.path), "trace_format": self.format, "trace_sha256": self._sha256}
        if self.format == "openinference":
            details["trace_match_by"] = self.settings.match_by
        info = SystemInfo(kind="replay", details=details)
        return apply_version_report(info, {k: v for k, v in self._reported.items() if v is not None})

    def _key(self, request: QueryRequest) -> str:
        """What the trace's records are keyed by for this request (see read_trace)."""
        return normalise_question(request.query) if self._by_question else request.query_id

    def run_level_warnings(self, query_ids: Iterable[str], queries: Iterable[str] | None = None) -> list[str]:
        """The warnings about a run that asks ``query_ids`` (all of them, whatever its shards; their
        texts ``queries`` too, for traces matched by question): the trace's read warnings, and its
        queries no golden query asks (ignored). One pass over the trace: a sharded run's plan calls
        this once for the whole run."""
        if self._by_question and queries is not None:
            asked: Iterable[str] = {normalise_question(q) for q in queries}
        else:
            asked = query_ids if isinstance(query_ids, set | frozenset) else set(query_ids)
        extra = [qid for qid in self.records if qid not in asked]
        warnings = list(self.read_warnings)
        if extra and self.format == "openinference":
            shown = [repr(k[:60]) for k in extra[:5]]
            warnings.append(
                f"{len(extra)} trace{'' if len(extra) == 1 else 's'} "
                f"match{'es' if len(extra) == 1 else ''} no "
                f"golden query (ignored; match_by {self.settings.match_by}): "
                f"{', '.join(shown)}{', …' if len(extra) > 5 else ''}"
            )
        elif extra:
            warnings.append(
                f"the trace has {len(extra)} quer{'y' if len(extra) == 1 else 'ies'} not in the golden "
                f"set (ignored): {', '.join(extra[:5])}{', …' if len(extra) > 5 else ''}"
            )
        return warnings

    @property
    def run_warnings(self) -> list[str]:
        """Run-level warnings (not any one query's) for the queries asked so far; the runner
        reports them without a query id."""
        if self._run_warnings is None:
            self._run_warnings = self.run_level_warnings(self._asked)
        return self._run_warnings

    def run_queries(
        self,
        requests: Sequence[QueryRequest],
        k: int,
        answers: bool,
        progress: Progress | None = None,
    ) -> list[QueryOutcome]:
        """One outcome per request: the recorded result, or ``missing_in_trace``.

        Hits are re-read for this run's ``k``; an unreadable hit list or answer is that query's
        ``bad_response``. Latencies are the recorded ones (None when not recorded)."""
        outcomes = []
        wanted = set()
        with gc_paused():  # a block's lists per query, no cycles
            for n, request in enumerate(requests, start=1):
                wanted.add(self._key(request))
                outcomes.append(self._outcome(request, k, answers))
                if progress:
                    progress(n, len(requests))
        self._asked |= wanted
        self._run_warnings = None
        return outcomes

    def _outcome(self, request: QueryRequest, k: int, answers: bool) -> QueryOutcome:
        record = self.records.get(self._key(request))
        outcome = QueryOutcome(query_id=request.query_id)
        if record is None:
            return outcome.fail(
                QueryFailure(MISSING_IN_TRACE, f"{self.path.name} has no record of this query")
            )
        outcome.retrieval_ms, outcome.answer_ms = record.retrieval_ms, record.answer_ms
        outcome.scope = record.scope
        outcome.attempts = 1
        if self.format in trec_run.RUN_FORMATS:  # a ranking only: no answer, no latency
            outcome.hits, outcome.warnings = _ranked_block(record.raw_hits, k)
            return outcome
        raw_hits, raw_answer = record.raw(self.format)
        if (record.error or record.timed_out) and not self._keeps_hits(record):
            # A recorded failure of the query as a whole is that query's error as a live one is (a
            # command system's reply with "error"): what the trace also lists is neither stored nor
            # scored — the query scores 0 wherever it applies, and counts in error_rate.
            if raw_hits:
                shown = len(raw_hits) if isinstance(raw_hits, list) else "its"
                outcome.warnings = [
                    f"the trace records this query as failed; {shown} recorded hit"
                    f"{'' if shown == 1 else 's'} not scored (a failed query scores 0, as in a live run)"
                ]
            return outcome.fail(_recorded_failure(record.error, record.timed_out))
        try:
            outcome.hits, outcome.warnings = parse_hit_block(raw_hits, k, self.settings.response)
            if answers and raw_answer is not None:
                raw = {"text": raw_answer} if isinstance(raw_answer, str) else raw_answer
                answer: Answer = parse_answer(raw, self.settings.response)
                outcome.answer = answer
        except QueryFailure as failure:
            outcome.fail(failure)
        if record.error or record.timed_out:  # a failure after the search (see _keeps_hits)
            outcome.answer = None
            outcome.fail(_recorded_failure(record.error, record.timed_out))
        return outcome

    def _keeps_hits(self, record: _Record) -> bool:
        """Whether a recorded failure came after the search, so the hits stay (as a live system's
        failed ask keeps the hits its search found): an export's rows are a stored run's own
        outcomes, kept as stored; an OpenInference trace whose failing span is not the retriever
        (nor inside it, nor ended before it) failed answering. Every other recorded failure is the
        query's: a kebab trace's ``error`` / ``timed_out`` does not say which step failed."""
        return self.format == "export" or record.failed_after_search
