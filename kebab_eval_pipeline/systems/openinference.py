"""OpenInference spans → one recorded result per traced query (the ``openinference`` replay format).

OpenInference (Arize Phoenix, the ``openinference-instrumentation-*`` packages) names what a span
did with attributes; this module reads, per trace (spans grouped by ``trace_id``):

* **the query span**: the outermost span with ``input.value`` (the root, for the instrumentors);
  its start orders traces recorded for the same query;
* **the question**: the query span's ``input.value`` — plain text, a JSON string, or a JSON object
  holding it under ``query`` / ``question`` / ``query_str`` / ``input`` / ``user_input``
  (searched breadth first: Haystack's ``{"data": {"retriever": {"query": …}}}``) or as the last
  user message of ``messages``; else the retriever span's ``input.value`` read the same way;
* **the hits**: the retriever span's ``retrieval.documents.{i}.document.{id,content,score,metadata}``
  in index order (``metadata`` a JSON object, or a JSON string of one). The retriever span is the
  outermost span of kind ``RETRIEVER`` (one wrapping another is the same retrieval: LlamaIndex's
  ``retrieve`` around ``_retrieve``), the last to end when there are several (a hybrid pipeline's
  channels, or a retrieval repeated after query rewriting: the last one fed the answer); or, with
  ``retriever_span: NAME``, the last-ending span of that name;
* **the answer**: the query span's ``output.value`` when it is text (a JSON object's ``response`` /
  ``answer`` string, or Haystack's ``{component: {"replies": [text, …]}}``, also count); else the
  last-ending ``LLM`` span's last ``llm.output_messages.{i}.message.content``; else the
  last-ending LLM span's ``output.value``, leaving out spans that render a prompt template
  (``llm.prompt_template.template``: Haystack marks its PromptBuilder as an LLM span).
  ``llm.model_name`` of the last LLM span is the answer's ``model``;
* **token usage**: ``llm.token_count.prompt`` / ``.completion`` / ``.total`` summed over the LLM
  spans that carry them, a span inside another that carries them not counted again;
* **latencies**: ``retrieval_ms`` the retriever span's duration, ``answer_ms`` the query span's
  (only when there is an answer);
* **errors**: a span with status ERROR makes the query a recorded error: the first such span to
  end (the origin), with its status message or its ``exception`` event's type and message.

A trace with neither a RETRIEVER nor an LLM span (indexing, embedding) is not a query; they are
counted in a warning. Each query trace gets a key: its normalised question (``match_by:
question``, see :func:`normalise_question`) or the value of the attribute ``match_by`` names.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from kebab_eval_pipeline.foundation.errors import Offender
from kebab_eval_pipeline.systems.otlp import Span
from kebab_eval_pipeline.systems.wire import dig

KIND = "openinference.span.kind"
_DOC = re.compile(r"^retrieval\.documents\.([^.]+)\.document\.(.+)$")
_DOC_FIELDS = ("id", "content", "score", "metadata")
_OUT_MSG = re.compile(
    r"^llm\.output_messages\.(\d+)\.message\.(content|role|contents\.(\d+)\.message_content\.text)$"
)
_QUESTION_KEYS = ("query", "question", "query_str", "input", "user_input")
_ANSWER_KEYS = ("response", "answer")
_TOKENS = {"prompt": "prompt_tokens", "completion": "completion_tokens", "total": "total_tokens"}


def normalise_question(text: str) -> str:
    """The form questions are matched in: Unicode NFC, every run of whitespace (newlines, tabs,
    non-breaking spaces) one space, no leading or trailing whitespace, case-folded."""
    return " ".join(unicodedata.normalize("NFC", text).split()).casefold()


@dataclass(slots=True)
class TraceRecord:
    """One traced query as read: ``key`` (what it matches a golden query by), the raw ``hits``
    (dicts: ``id``, ``content``, ``score``, ``metadata`` and the default ``chunk_id`` /
    ``snippet`` / ``doc_path``), the ``answer`` object (``text``, ``model``, ``usage``) or None,
    latencies in ms (None when the span has no times), the recorded ``error`` or None, and whether
    that error came after the search (``failed_after_search``: the failing span is not the retriever
    span, not inside it, and ended after it: the retrieval itself succeeded)."""

    key: str
    trace_id: str
    where: str
    start_ns: int
    question: str | None
    hits: list[dict[str, Any]]
    answer: dict[str, Any] | None
    retrieval_ms: float | None
    answer_ms: float | None
    error: str | None
    failed_after_search: bool = False


def _json(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in ("{", "[", '"'):
        try:
            return json.loads(value)
        except (ValueError, RecursionError):
            return value
    return value


def _find_text(doc: Any, keys: tuple[str, ...]) -> str | None:
    """The first non-empty string under one of ``keys``, breadth first; a ``messages`` list's last
    user message counts as ``input``."""
    queue = [doc]
    while queue:
        item = queue.pop(0)
        if isinstance(item, dict):
            for key in keys:
                value = item.get(key)
                if isinstance(value, str) and value.strip():
                    return value
            messages = item.get("messages")
            if isinstance(messages, list):
                users = [
                    m.get("content") for m in messages if isinstance(m, dict) and m.get("role") == "user"
                ]
                if users and isinstance(users[-1], str) and users[-1].strip():
                    return users[-1]
            queue.extend(v for v in item.values() if isinstance(v, dict | list))
        elif isinstance(item, list):
            queue.extend(v for v in item if isinstance(v, dict | list))
    return None


def question_of(span: Span) -> str | None:
    """The question a span's ``input.value`` holds (see the module docstring), or None."""
    value = span.attributes.get("input.value")
    if not isinstance(value, str) or not value.strip():
        return None
    parsed = _json(value) if span.attributes.get("input.mime_type") != "text/plain" else value
    if isinstance(parsed, str):
        return parsed if parsed.strip() else None
    return _find_text(parsed, _QUESTION_KEYS)


def _root_answer(span: Span) -> str | None:
    value = span.attributes.get("output.value")
    if not isinstance(value, str) or not value.strip():
        return None
    if span.attributes.get("output.mime_type") == "text/plain":
        return value
    parsed = _json(value)
    if isinstance(parsed, str):
        return parsed
    if isinstance(parsed, dict):
        for key in _ANSWER_KEYS:
            if isinstance(parsed.get(key), str):
                return parsed[key]
        for component in parsed.values():  # Haystack: {"generator": {"replies": ["…"], "meta": […]}}
            replies = component.get("replies") if isinstance(component, dict) else None
            if isinstance(replies, list) and replies and isinstance(replies[0], str):
                return replies[0]
    return None


def _output_message(span: Span) -> str | None:
    """The last output message's text (``message.content``, or its ``message.contents`` parts)."""
    messages: dict[int, dict[str, Any]] = defaultdict(dict)
    for key, value in span.attributes.items():
        m = _OUT_MSG.match(key)
        if m and isinstance(value, str):
            slot = messages[int(m.group(1))]
            if m.group(2) == "content":
                slot["content"] = value
            elif m.group(3) is not None:
                slot.setdefault("parts", {})[int(m.group(3))] = value
    for i in sorted(messages, reverse=True):
        slot = messages[i]
        if "content" in slot:
            return slot["content"]
        if slot.get("parts"):
            return "".join(slot["parts"][j] for j in sorted(slot["parts"]))
    return None


def attribute_value(span: Span, name: str) -> Any:
    """Attribute ``name`` of ``span``; a dotted name also reads inside an attribute holding an
    object or its JSON (``metadata.query_id`` in OpenInference's ``metadata`` JSON string).
    None when absent."""
    attrs = span.attributes
    if name in attrs:
        return attrs[name]
    parts = name.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        head = ".".join(parts[:cut])
        if head in attrs:
            found = dig(_json(attrs[head]), ".".join(parts[cut:]), None)
            if found is not None:
                return found
    return None


class _Trace:
    """One trace's spans with the parent links worked out."""

    def __init__(self, spans: list[Span]) -> None:
        self.spans = spans
        self.by_id = {s.span_id: s for s in spans}
        self.kind = {s.span_id: str(s.attributes.get(KIND, "")).upper() for s in spans}

    def ancestors(self, span: Span) -> list[Span]:
        out, seen = [], {span.span_id}
        parent = span.parent_id
        while parent in self.by_id and parent not in seen:  # a cycle in a broken file ends the walk
            seen.add(parent)
            out.append(self.by_id[parent])
            parent = self.by_id[parent].parent_id
        return out

    def of_kind(self, kind: str) -> list[Span]:
        return [s for s in self.spans if self.kind[s.span_id] == kind]


def _end(span: Span) -> int:
    return span.end_ns if span.end_ns is not None else -1


def _start(span: Span) -> int:
    return span.start_ns if span.start_ns is not None else -1


def _outermost(trace: _Trace, candidates: list[Span]) -> list[Span]:
    ids = {s.span_id for s in candidates}
    return [s for s in candidates if not any(a.span_id in ids for a in trace.ancestors(s))]


def _ms(span: Span | None) -> float | None:
    if span is None or span.start_ns is None or span.end_ns is None:
        return None
    return (span.end_ns - span.start_ns) / 1e6


def _documents(span: Span, problems: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """The span's documents in index order, as raw hits (see :class:`TraceRecord`)."""
    docs: dict[int, dict[str, Any]] = defaultdict(dict)
    for key, value in span.attributes.items():
        m = _DOC.match(key)
        if not m:
            continue
        index, name = m.groups()
        if not index.isdigit():
            problems.append((key, f"expected a document index 0, 1, …, got {index!r}"))
            continue
        if name not in _DOC_FIELDS:
            docs[int(index)].setdefault("_other", {})[name] = value
            continue
        if (
            name == "score"
            and value is not None
            and (isinstance(value, bool) or not isinstance(value, int | float))
        ):
            problems.append((key, f"expected a number, got {str(value)[:60]!r}"))
            continue
        if name == "metadata":
            value = _json(value) if isinstance(value, str) else value
            if not isinstance(value, dict):
                problems.append((key, f"expected a JSON object, got {str(value)[:60]!r}"))
                continue
        if name in ("id", "content") and value is not None and not isinstance(value, str):
            value = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
            if not isinstance(value, str):
                problems.append((key, f"expected a string, got {type(value).__name__}"))
                continue
        docs[int(index)][name] = value
    hits = []
    for i in sorted(docs):
        doc = docs[i]
        doc.pop("_other", None)
        meta = doc.get("metadata") or {}
        path = next((meta[k] for k in ("file_path", "source") if isinstance(meta.get(k), str)), None)
        hits.append(
            {
                **{k: doc.get(k) for k in _DOC_FIELDS if k in doc},
                "chunk_id": doc.get("id"),
                "snippet": doc.get("content"),
                "score": doc.get("score"),
                "doc_path": path,
            }
        )
    return hits


def _usage(trace: _Trace, llms: list[Span], problems: list[tuple[str, str, str]]) -> dict[str, int]:
    counted = [s for s in llms if any(f"llm.token_count.{n}" in s.attributes for n in _TOKENS)]
    ids = {s.span_id for s in counted}
    usage: dict[str, int] = {}
    for span in counted:
        if any(a.span_id in ids for a in trace.ancestors(span)):
            continue  # its tokens are the enclosing LLM span's
        for short, name in _TOKENS.items():
            key = f"llm.token_count.{short}"
            value = span.attributes.get(key)
            if value is None:
                continue
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                problems.append((span.span_id, key, f"expected a whole number ≥ 0, got {repr(value)[:60]}"))
                continue
            usage[name] = usage.get(name, 0) + value
    return usage


def _origin(trace: _Trace) -> Span | None:
    """The span a trace's failure started in: the first span with status ERROR to end."""
    failed = [s for s in trace.spans if s.status == "ERROR"]
    return min(failed, key=_end) if failed else None


def _after_search(trace: _Trace, origin: Span | None, retriever: Span | None) -> bool:
    """Whether the failure at ``origin`` came after a retrieval that succeeded: no span with status
    ERROR is the retriever span or inside it, and the origin ended no earlier than the retriever."""
    if origin is None or retriever is None:
        return False
    for span in trace.spans:
        if span.status == "ERROR" and any(s is retriever for s in (span, *trace.ancestors(span))):
            return False
    return _end(retriever) <= _end(origin)


def _error(trace: _Trace) -> str | None:
    span = _origin(trace)
    if span is None:
        return None
    message = span.status_message
    if not message:
        for name, attrs in span.events:
            if name == "exception":
                parts = [str(attrs[k]) for k in ("exception.type", "exception.message") if attrs.get(k)]
                message = ": ".join(parts)
                break
    return f"span {span.name}: {message or 'status ERROR'}"


def records_from_spans(
    spans: list[Span], path: str, match_by: str = "question", retriever_span: str | None = None
) -> tuple[list[TraceRecord], list[str], list[Offender]]:
    """One :class:`TraceRecord` per query trace, ordered by their query spans' start (file order
    breaking ties), with the read warnings and the offenders (file, span, attribute, reason)."""
    grouped: dict[str, list[Span]] = defaultdict(list)
    for span in spans:
        grouped[span.trace_id].append(span)
    records: list[TraceRecord] = []
    offenders: list[Offender] = []
    skipped, several, unnamed = 0, 0, 0
    for trace_id, members in grouped.items():
        trace = _Trace(members)
        retrievers = trace.of_kind("RETRIEVER")
        llms = trace.of_kind("LLM")
        if not retrievers and not llms and retriever_span is None:
            skipped += 1
            continue
        with_input = [s for s in members if isinstance(s.attributes.get("input.value"), str)]
        pool = with_input or [s for s in members if s.parent_id not in trace.by_id] or members
        query = min(pool, key=lambda s: (len(trace.ancestors(s)), _start(s)))
        if retriever_span is not None:
            chosen = [s for s in members if s.name == retriever_span]
            unnamed += not chosen
        else:
            chosen = _outermost(trace, retrievers)
            several += len(chosen) > 1
        retriever = max(chosen, key=_end) if chosen else None
        problems: list[tuple[str, str]] = []
        hits = _documents(retriever, problems) if retriever is not None else []
        offenders += [
            Offender(path, reason, position=retriever.position(attr), field=attr)  # type: ignore[union-attr]
            for attr, reason in problems
        ]
        question = question_of(query) or (question_of(retriever) if retriever is not None else None)
        if match_by == "question":
            if question is None:
                offenders.append(
                    Offender(
                        path,
                        "no question: the query span's input.value holds no text (match_by: question)",
                        position=query.position("input.value"),
                        field="input.value",
                    )
                )
                continue
            key = normalise_question(question)
        else:
            found = next(
                (
                    v
                    for s in [query, *sorted(members, key=_start)]
                    if (v := attribute_value(s, match_by)) is not None
                ),
                None,
            )
            if isinstance(found, bool) or not isinstance(found, str | int) or not str(found).strip():
                reason = (
                    f"no span of trace {trace_id} has the attribute {match_by!r} (match_by)"
                    if found is None
                    else f"expected a query id (a string or an integer), got {str(found)[:60]!r}"
                )
                offenders.append(Offender(path, reason, position=query.position(match_by), field=match_by))
                continue
            key = str(found)
        token_problems: list[tuple[str, str, str]] = []
        usage = _usage(trace, llms, token_problems)
        offenders += [
            Offender(path, reason, position=trace.by_id[sid].position(attr), field=attr)
            for sid, attr, reason in token_problems
        ]
        text = _root_answer(query)
        last_llm = max(llms, key=_end) if llms else None
        if text is None and llms:
            speaking = [s for s in llms if _output_message(s) is not None]
            if speaking:
                text = _output_message(max(speaking, key=_end))
            else:
                # A span rendering a prompt template is not an answer (Haystack marks its
                # PromptBuilder as an LLM span; its output is the prompt).
                plain = [
                    s
                    for s in llms
                    if isinstance(s.attributes.get("output.value"), str)
                    and "llm.prompt_template.template" not in s.attributes
                ]
                if plain:
                    text = max(plain, key=_end).attributes["output.value"]
        answer = None
        if text is not None:
            answer = {"text": text}
            model = last_llm.attributes.get("llm.model_name") if last_llm is not None else None
            if isinstance(model, str) and model:
                answer["model"] = model
            if usage:
                answer["usage"] = usage
        records.append(
            TraceRecord(
                key=key,
                trace_id=trace_id,
                where=f"trace {trace_id}",
                start_ns=_start(query),
                question=question,
                hits=hits,
                answer=answer,
                retrieval_ms=_ms(retriever),
                answer_ms=_ms(query) if answer is not None else None,
                error=_error(trace),
                failed_after_search=_after_search(trace, _origin(trace), retriever),
            )
        )
    warnings = []
    if skipped:
        warnings.append(
            f"{skipped} trace{'s' if skipped != 1 else ''} without a RETRIEVER or LLM span "
            "(indexing, embedding) skipped"
        )
    if several:
        warnings.append(
            f"{several} trace{'s' if several != 1 else ''} have several retriever spans, none inside "
            "another: "
            "kept the last to end in each (set system.retriever_span to a span name to choose)"
        )
    if unnamed:
        warnings.append(
            f"{unnamed} trace{'s' if unnamed != 1 else ''} have no span named {retriever_span!r}: "
            "no hits recorded"
        )
    order = {trace_id: n for n, trace_id in enumerate(grouped)}
    records.sort(key=lambda r: (r.start_ns, order[r.trace_id]))
    return records, warnings, offenders
