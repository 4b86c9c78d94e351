"""Reading hits and answers out of a system's JSON (command and http adapters, replay).

Understood without configuration:

* hits as kebab's ``search_hit.v1`` — flat fields (``rank``, ``chunk_id``, ``doc_path``,
  ``line_start`` …) or kebab's nested ``retrieval`` {``method``, ``fusion_score``,
  ``lexical_score`` …} and ``citation`` {``path``, ``start``, ``end``} objects — either as a
  bare list or under ``"hits"``; a bare string is a chunk id;
* answers as an object (bare or under ``"answer"``) with ``text`` (or ``answer`` / WFGY's
  ``claim``), ``citations`` (objects, or chunk-id strings), ``refused`` / ``refusal_reason`` /
  ``grounded``, ``prompt_template_version``, ``model`` and token usage. The claim
  ``not in context`` (WFGY's refusal token) is a refusal.

A :class:`ResponseMap` maps a service whose JSON differs onto these fields without code: each
field is a dotted path (``results``, ``metadata.source``, ``sources.0.id``) or an expression of
:mod:`.mapexpr` (constants, concatenation, first-present, regex/split/relative_to/basename), enough
for Haystack, LlamaIndex and LangChain documents as they serialise by default. Anything that
cannot be read raises :class:`~.outcome.QueryFailure` (``bad_response``) naming the field.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    model_validator,
)

from kebab_eval_pipeline.contract import Answer, Citation, Hit, ScoreKind
from kebab_eval_pipeline.systems.hits import DEFAULTS, FIELDS, HitBlock
from kebab_eval_pipeline.systems.mapexpr import MISSING, Expr, MapDataError, _kind, compile_expr
from kebab_eval_pipeline.systems.outcome import BAD_RESPONSE, QueryFailure

REFUSAL_TOKEN = "not in context"  # WFGY's exact refusal claim
_SCORE_KINDS = frozenset(get_args(ScoreKind))
_METHOD_SCORE_KIND = {"lexical": "bm25", "vector": "cosine", "hybrid": "rrf"}
_HIT_FIELDS = tuple(Hit.model_fields)
_ANSWER_FIELDS = ("text", "grounded", "refused", "refusal_reason", "prompt_template_version", "model")
_CITATION_FIELDS = tuple(Citation.model_fields)
_MISSING = object()


def _checked(spec: Any) -> Any:
    compile_expr(spec)  # raises a ValueError naming the position inside the expression
    return spec


#: One field's mapping as written in the config (kept as written so settings round-trip).
MapSpec = Annotated[Any, AfterValidator(_checked)]


class ResponseMap(BaseModel):
    """Where a system's JSON keeps what we read: per field, a dotted path (``a.b``, ``items.0.id``)
    or a :mod:`.mapexpr` expression (``{const: bm25}``, ``{concat: [a, b]}``, ``{first: [a, b]}``,
    ``{path: a, relative_to: /corpus}`` …), checked when the config loads.

    Unmapped fields are read under their ``search_hit.v1`` / Answer names.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    hits: str | None = None  # path to the hit list; default: the body if a list, else "hits"
    scope: str | None = None  # path to the folders searched; default: "scope" when the body is an object
    hit_fields: dict[str, MapSpec] = Field(default_factory=dict)  # Hit field → expression in one hit
    answer: str | None = None  # path to the answer object; default: "answer" if present, else the body
    answer_fields: dict[str, MapSpec] = Field(default_factory=dict)  # Answer field (or "citations") → expr
    citation_fields: dict[str, MapSpec] = Field(default_factory=dict)  # Citation field → expr in a citation
    _compiled: dict[str, dict[str, Expr]] = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def _known_fields(self) -> ResponseMap:
        for name, fields, allowed in (
            ("hit_fields", self.hit_fields, _HIT_FIELDS),
            (
                "answer_fields",
                self.answer_fields,
                (*_ANSWER_FIELDS, "citations", "prompt_tokens", "completion_tokens", "cost_usd"),
            ),
            ("citation_fields", self.citation_fields, _CITATION_FIELDS),
        ):
            unknown = sorted(set(fields) - set(allowed))
            if unknown:
                raise ValueError(
                    f"{name}: unknown field(s) {', '.join(unknown)}; expected {', '.join(allowed)}"
                )
            self._compiled[name] = {field: compile_expr(spec) for field, spec in fields.items()}
        return self

    def compiled(self, group: str) -> dict[str, Expr]:
        """The compiled expressions of ``hit_fields``, ``answer_fields`` or ``citation_fields``."""
        return self._compiled[group]


#: No mapping: every field under its own name (frozen, so one instance serves every call).
DEFAULT_MAP = ResponseMap()


def dig(value: Any, path: str, default: Any = _MISSING) -> Any:
    """The value at dotted ``path`` inside ``value`` (list items by index).

    Returns ``default`` when any step is missing; without a default, raises KeyError naming
    the first missing step.
    """
    current = value
    for step in path.split("."):
        if isinstance(current, dict) and step in current:
            current = current[step]
        elif (
            isinstance(current, list)
            and step.lstrip("-").isdigit()
            and -len(current) <= int(step) < len(current)
        ):
            current = current[int(step)]
        else:
            if default is not _MISSING:
                return default
            raise KeyError(step)
    return current


def _get(obj: Any, name: str, mapping: dict[str, Expr]) -> Any:
    """Field ``name`` of ``obj``: its mapped expression (missing reads as None), else the key itself.

    Raises :class:`~.mapexpr.MapDataError` ("name: reason") when the value cannot be transformed.
    """
    if name in mapping:
        try:
            value = mapping[name].evaluate(obj)
        except MapDataError as exc:
            raise MapDataError(f"{name}: {exc}") from None
        return None if value is MISSING else value
    return obj.get(name) if isinstance(obj, dict) else None


def _bad(where: str, reason: str) -> QueryFailure:
    return QueryFailure(BAD_RESPONSE, f"{where}: {reason}")


def _pydantic_reason(exc: ValidationError) -> str:
    e = exc.errors()[0]
    loc = ".".join(str(p) for p in e["loc"])
    return f"{loc}: {e['msg']}" if loc else e["msg"]


def hit_list(payload: Any, mapping: ResponseMap | None = None) -> list:
    """The raw hit list inside a search response (see the module docstring)."""
    mapping = mapping or DEFAULT_MAP
    if mapping.hits:
        found = dig(payload, mapping.hits, None)
        if found is None:
            raise _bad(mapping.hits, "missing from the response")
        where = mapping.hits
    elif isinstance(payload, list):
        found, where = payload, "response"
    elif isinstance(payload, dict) and "hits" in payload:
        found, where = payload["hits"], "hits"
    else:
        raise _bad("response", f"expected a list of hits or an object with 'hits', got {_kind(payload)}")
    if found is None:
        return []
    if not isinstance(found, list):
        raise _bad(where, f"expected a list, got {_kind(found)}")
    return found


def parse_scope(payload: Any, mapping: ResponseMap | None = None) -> list[str] | None:
    """The folders a scoped search looked in (for ``scope_miss_rate``), or None when the response
    reports no scope. A string is one folder; anything but a string or a list of strings is
    ``bad_response`` naming the field."""
    mapping = mapping or DEFAULT_MAP
    where = mapping.scope or "scope"
    if mapping.scope:
        found = dig(payload, mapping.scope, None)
    else:
        found = payload.get("scope") if isinstance(payload, dict) else None
    if found is None:
        return None
    if isinstance(found, str):
        return [found]
    if isinstance(found, list) and all(isinstance(f, str) for f in found):
        return list(found)
    raise _bad(where, f"expected a folder or a list of folders, got {_kind(found)}")


def _hit_fields(raw: Any, mapping: ResponseMap) -> dict[str, Any]:
    """Our Hit fields from one raw hit: mapping first, then flat names, then kebab's nesting."""
    if isinstance(raw, str):
        return {"chunk_id": raw}
    hit_map = mapping.compiled("hit_fields")
    # a list is a hit only when mapped: ``[document, score]`` pairs (LangChain's *_with_score)
    if not isinstance(raw, dict) and not (isinstance(raw, list) and hit_map):
        raise ValueError(f"expected an object or a chunk-id string, got {_kind(raw)}")
    fields = {name: _get(raw, name, hit_map) for name in _HIT_FIELDS}
    if not isinstance(raw, dict):
        raw = {}
    retrieval = raw.get("retrieval")
    if isinstance(retrieval, dict):  # kebab search_hit.v1 nests channel scores and ranks
        for name in ("lexical_score", "vector_score", "lexical_rank", "vector_rank"):
            if fields[name] is None:
                fields[name] = retrieval.get(name)
        if fields["score"] is None:
            fields["score"] = retrieval.get("fusion_score")
        if fields["score_kind"] is None and retrieval.get("method") in _METHOD_SCORE_KIND:
            fields["score_kind"] = _METHOD_SCORE_KIND[retrieval["method"]]
    citation = raw.get("citation")
    if isinstance(citation, dict):  # kebab: {"kind": "line", "path", "start", "end", "section"}
        for ours, theirs in (("doc_path", "path"), ("line_start", "start"), ("line_end", "end")):
            if fields[ours] is None:
                fields[ours] = citation.get(theirs)
    if isinstance(fields["heading_path"], str):
        fields["heading_path"] = split_heading_string(fields["heading_path"])
    if fields["score_kind"] not in _SCORE_KINDS:
        fields["score_kind"] = "other"
    for name in ("snippet",):
        if fields[name] is None:
            fields[name] = ""
    if fields["heading_path"] is None:
        fields["heading_path"] = []
    return fields


def _checked_hit(raw: Any, i: int, mapping: ResponseMap) -> tuple[Hit, Any]:
    """Hit ``i`` read and validated by the documented model, with its reported rank: the exact
    reading (coercions, messages) that the columnar parser hands any unusual hit to. Raises
    QueryFailure (``bad_response``) naming ``hits[i]`` and the field."""
    try:
        fields = _hit_fields(raw, mapping)
        reported = fields.pop("rank", None)
        hit = Hit.model_validate({**fields, "rank": 1})
    except (ValueError, TypeError) as exc:
        reason = _pydantic_reason(exc) if isinstance(exc, ValidationError) else str(exc)
        raise _bad(f"hits[{i}]", reason) from None
    _check_rank(reported, i)
    return hit, reported


def _check_rank(reported: Any, i: int) -> None:
    if reported is not None and (isinstance(reported, bool) or not isinstance(reported, int | float)):
        raise _bad(f"hits[{i}].rank", f"expected a number, got {reported!r}")
    if isinstance(reported, float) and not math.isfinite(reported):  # NaN would scramble the sort
        raise _bad(f"hits[{i}].rank", f"expected a finite number, got {reported!r}")


_NONE = type(None)
_STR_FIELDS = ("chunk_id", "doc_id", "doc_path", "index_version", "embedding_model", "chunker_version")
_INT_FIELDS = ("line_start", "line_end", "lexical_rank", "vector_rank")
_FLOAT_FIELDS = ("score", "lexical_score", "vector_score")
_INT64 = (-(2**63), 2**63 - 1)
_EXACT_FLOAT_INT = 2**53  # an int a float holds exactly (larger ones go through the model)


def _flat_columns(raws: list, slow: set[int]) -> dict[str, list]:
    """Per-field columns of unmapped hits (objects, or chunk-id strings), kebab's nesting filled
    in. A hit that is neither, or whose nesting cannot be read, is added to ``slow``."""
    rows: list[dict] = []
    for i, raw in enumerate(raws):
        kind = type(raw)
        if kind is dict:
            rows.append(raw)
        elif kind is str:
            rows.append({"chunk_id": raw})
        else:
            rows.append({})
            slow.add(i)
    # Only the keys a hit has are visited (a search_hit.v1 hit has a few of the 17 fields).
    columns: dict[str, list] = {name: [None] * len(rows) for name in _HIT_FIELDS}
    for i, row in enumerate(rows):
        for key, value in row.items():
            column = columns.get(key)
            if column is not None:
                column[i] = value
    nested = [i for i, row in enumerate(rows) if "retrieval" in row or "citation" in row]
    for i in nested:
        try:
            _fill_nested(rows[i], columns, i)
        except (TypeError, ValueError):  # e.g. an unhashable retrieval.method: the model's message
            slow.add(i)
    return columns


def _fill_nested(raw: dict, columns: dict[str, list], i: int) -> None:
    """kebab search_hit.v1's nested channel scores/ranks and citation, where the flat field is None."""
    retrieval = raw.get("retrieval")
    if isinstance(retrieval, dict):
        for name in ("lexical_score", "vector_score", "lexical_rank", "vector_rank"):
            if columns[name][i] is None:
                columns[name][i] = retrieval.get(name)
        if columns["score"][i] is None:
            columns["score"][i] = retrieval.get("fusion_score")
        if columns["score_kind"][i] is None and retrieval.get("method") in _METHOD_SCORE_KIND:
            columns["score_kind"][i] = _METHOD_SCORE_KIND[retrieval["method"]]
    citation = raw.get("citation")
    if isinstance(citation, dict):
        for ours, theirs in (("doc_path", "path"), ("line_start", "start"), ("line_end", "end")):
            if columns[ours][i] is None:
                columns[ours][i] = citation.get(theirs)


def _mapped_columns(raws: list, mapping: ResponseMap, slow: set[int]) -> dict[str, list]:
    """Per-field columns of hits read through a ResponseMap, hit by hit (mappings are for the
    frameworks' documents, not the hot path); a hit that cannot be read is added to ``slow``."""
    columns: dict[str, list] = {name: [] for name in _HIT_FIELDS}
    for i, raw in enumerate(raws):
        try:
            fields = _hit_fields(raw, mapping)
        except (TypeError, ValueError):
            fields = {}
            slow.add(i)
        for name in _HIT_FIELDS:
            columns[name].append(fields.get(name))
    return columns


def _odd_rows(column: list, ok: tuple[type, ...]) -> list[int]:
    """Rows of ``column`` whose value is not of one of the ``ok`` types (exactly: no subclasses)."""
    if set(map(type, column)) <= set(ok):
        return []
    return [i for i, value in enumerate(column) if type(value) not in ok]


def _normalise(columns: dict[str, list], slow: set[int]) -> None:
    """Defaults and the table's types, column by column; any value the model would coerce or
    refuse marks its row ``slow`` (the model then reads that hit)."""
    n = len(columns["chunk_id"])
    for name in _STR_FIELDS:
        slow.update(_odd_rows(columns[name], (str, _NONE)))
    snippet = columns["snippet"]
    slow.update(_odd_rows(snippet, (str, _NONE)))
    if None in snippet:
        columns["snippet"] = ["" if v is None else v for v in snippet]
    kinds = columns["score_kind"]
    odd = _odd_rows(kinds, (str, _NONE))
    slow.update(odd)
    columns["score_kind"] = (
        [v if v in _SCORE_KINDS else "other" for v in kinds]
        if not odd
        else ["other" if i in slow or v not in _SCORE_KINDS else v for i, v in enumerate(kinds)]
    )
    headings = columns["heading_path"]
    if set(map(type, headings)) != {_NONE}:
        out = []
        for i, value in enumerate(headings):
            if value is None:
                out.append([])
            elif type(value) is str:
                out.append(split_heading_string(value))
            elif type(value) is list and all(type(h) is str for h in value):
                out.append(list(value))
            else:
                out.append([])
                slow.add(i)
        columns["heading_path"] = out
    else:
        columns["heading_path"] = [[] for _ in range(n)]
    for name in _INT_FIELDS:
        column = columns[name]
        slow.update(_odd_rows(column, (int, _NONE)))
        present = [v for v in column if type(v) is int]
        if present and (min(present) < _INT64[0] or max(present) > _INT64[1]):
            slow.update(i for i, v in enumerate(column) if type(v) is int and not _INT64[0] <= v <= _INT64[1])
    for name in _FLOAT_FIELDS:
        column = columns[name]
        slow.update(_odd_rows(column, (float, int, _NONE)))
        if int in set(map(type, column)):
            for i, value in enumerate(column):
                if type(value) is int:
                    if -_EXACT_FLOAT_INT <= value <= _EXACT_FLOAT_INT:
                        column[i] = float(value)
                    else:
                        slow.add(i)
        if not all(map(math.isfinite, [v for v in column if type(v) is float])):
            slow.update(i for i, v in enumerate(column) if type(v) is float and not math.isfinite(v))


def _odd_ranks(reported: list) -> list[int]:
    """Rows whose reported rank the rank check refuses (not a number, bool, NaN or infinite)."""
    kinds = set(map(type, reported))
    if kinds <= {int, _NONE} or (
        kinds <= {int, float, _NONE} and all(math.isfinite(v) for v in reported if type(v) is float)
    ):
        return []
    return [
        i
        for i, v in enumerate(reported)
        if v is not None and (type(v) not in (int, float) or (type(v) is float and not math.isfinite(v)))
    ]


def parse_hit_block(payload: Any, k: int, mapping: ResponseMap | None = None) -> tuple[HitBlock, list[str]]:
    """Hits from a search response as a :class:`~.hits.HitBlock`, best first, ranked 1..n, at most
    ``k`` — read field by field into columns, without a model per hit.

    Returns ``(block, warnings)``. Reported ranks order the hits (stably: list order breaks
    ties and fills in missing ranks) and are then renumbered 1..n; a warning says so when
    they were not already 1..n in list order. Hits beyond ``k`` are dropped with a warning.
    Raises QueryFailure (``bad_response``) naming the first unreadable hit and field. Any hit the
    columns cannot take as they are (a value to coerce, or to refuse) is read by the :class:`Hit`
    model, so values and messages are the model's (:func:`parse_hits` gives the same as Hits).
    """
    mapping = mapping or DEFAULT_MAP
    raws = hit_list(payload, mapping)
    n = len(raws)
    if set(map(type, raws)) <= {str}:  # a list of chunk ids (WFGY's retrieved_ids): one column
        warnings = [f"returned {n} hits for k={k}; kept the first {k}"] if n > k else []
        return HitBlock(min(n, k), {"chunk_id": raws[:k]} if n else {}), warnings
    slow: set[int] = set()
    hit_map = mapping.compiled("hit_fields")
    columns = _mapped_columns(raws, mapping, slow) if hit_map else _flat_columns(raws, slow)
    reported = columns.pop("rank")
    _normalise(columns, slow)
    for i in sorted({*slow, *_odd_ranks(reported)}):
        if i in slow:  # the model reads it: raises the first error of this hit, or gives its values
            hit, reported[i] = _checked_hit(raws[i], i, mapping)
            for name in FIELDS:
                columns[name][i] = getattr(hit, name)
        else:
            _check_rank(reported[i], i)
    warnings = []
    if reported != list(range(1, n + 1)):
        if any(r is not None for r in reported):
            warnings.append(f"reported ranks {_preview(reported)} are not 1..{n}; renumbered")
        inf = float("inf")
        order = sorted(range(n), key=lambda i: (inf if reported[i] is None else reported[i], i))
        columns = {name: [values[i] for i in order] for name, values in columns.items()}
    if n > k:
        warnings.append(f"returned {n} hits for k={k}; kept the first {k}")
        columns = {name: values[:k] for name, values in columns.items()}
    kept = {name: values for name, values in columns.items() if not _all_default(name, values)}
    return HitBlock(min(n, k), kept), warnings


def _all_default(name: str, values: list) -> bool:
    if name == "heading_path":
        return not any(values)
    return values.count(DEFAULTS[name]) == len(values)


#: A heading path given as one string is kebab's "A > B > C": split on ">" with white space on both
#: sides only, so a heading that holds ">" itself ("`kebab ask --session <id>`", "a->b") stays whole.
_HEADING_SEPARATOR = re.compile(r"(?:\s+>)+\s+")  # a run of them: one separator


def split_heading_string(value: str) -> list[str]:
    """``"A > B > C"`` → ``["A", "B", "C"]``; a ``>`` inside a heading (no white space on both
    sides) is part of that heading."""
    return [h.strip() for h in _HEADING_SEPARATOR.split(value.strip()) if h.strip()]


def parse_hits(payload: Any, k: int, mapping: ResponseMap | None = None) -> tuple[list[Hit], list[str]]:
    """Hits from a search response as :class:`Hit` models, best first, ranked 1..n, at most ``k``:
    :func:`parse_hit_block`'s block, one model per hit (for callers that want the documented
    model; adapters keep the block).

    Returns ``(hits, warnings)``; raises QueryFailure (``bad_response``) naming the first
    unreadable hit and field.
    """
    block, warnings = parse_hit_block(payload, k, mapping)
    return list(block), warnings


def _preview(values: list) -> str:
    shown = ", ".join(
        "null" if v is None else f"{v:g}" if isinstance(v, float) else str(v) for v in values[:8]
    )
    return f"[{shown}{', …' if len(values) > 8 else ''}]"


def answer_object(payload: Any, mapping: ResponseMap | None = None) -> dict[str, Any]:
    """The raw answer object inside an ask response (see the module docstring)."""
    mapping = mapping or DEFAULT_MAP
    if mapping.answer:
        found = dig(payload, mapping.answer, None)
        if found is None:
            raise _bad(mapping.answer, "missing from the response")
        if isinstance(found, str):
            return {"text": found}
        if not isinstance(found, dict):
            raise _bad(mapping.answer, f"expected an object or a string, got {_kind(found)}")
        return found
    if not isinstance(payload, dict):
        raise _bad("response", f"expected an answer object, got {_kind(payload)}")
    inner = payload.get("answer")
    if isinstance(inner, dict):
        return inner
    if isinstance(inner, str):  # {"answer": "text", "citations": [...], ...}
        return {**payload, "text": inner}
    if "answer_json" in payload and isinstance(payload["answer_json"], dict):  # WFGY trace line
        return payload["answer_json"]
    return payload


def _citation(raw: Any, i: int, mapping: ResponseMap) -> Citation:
    if isinstance(raw, str):
        return Citation(chunk_id=raw)
    if not isinstance(raw, dict):
        raise _bad(f"citations[{i}]", f"expected an object or a chunk-id string, got {_kind(raw)}")
    try:
        fields = {name: _get(raw, name, mapping.compiled("citation_fields")) for name in _CITATION_FIELDS}
    except MapDataError as exc:
        raise _bad(f"citations[{i}]", str(exc)) from None
    nested = raw.get("citation") if isinstance(raw.get("citation"), dict) else raw
    for ours, theirs in (("doc_path", "path"), ("line_start", "start"), ("line_end", "end")):
        if fields[ours] is None:
            fields[ours] = nested.get(theirs)
    if fields["chunk_id"] is None and nested is not raw:
        fields["chunk_id"] = nested.get("chunk_id")
    if isinstance(fields["marker"], int) and not isinstance(fields["marker"], bool):
        fields["marker"] = f"[#{fields['marker']}]"
    try:
        return Citation.model_validate(fields)
    except ValidationError as exc:
        raise _bad(f"citations[{i}]", _pydantic_reason(exc)) from None


def parse_answer(payload: Any, mapping: ResponseMap | None = None) -> Answer:
    """An :class:`Answer` from an ask response.

    Refusal: an explicit ``refused``; else a ``refusal_reason``; else the claim
    ``not in context`` (case-insensitive); else an explicit ``grounded: false`` (kebab marks
    refusals that way). ``grounded`` defaults to "not refused". Raises QueryFailure
    (``bad_response``) naming the field that cannot be read.
    """
    mapping = mapping or DEFAULT_MAP
    raw = answer_object(payload, mapping)
    fmap = mapping.compiled("answer_fields")

    def field(name: str, *aliases: str) -> Any:
        try:
            value = _get(raw, name, fmap)
        except MapDataError as exc:
            raise QueryFailure(BAD_RESPONSE, f"answer.{exc}") from None  # "answer.text: reason"
        for alias in aliases if name not in fmap else ():
            if value is None:
                value = raw.get(alias)
        return value

    text = field("text", "answer", "claim")
    if text is not None and not isinstance(text, str):
        raise _bad("answer.text", f"expected a string, got {_kind(text)}")
    text = text or ""
    citations_raw = field("citations", "sources")
    if citations_raw is None:
        citations_raw = []
    if not isinstance(citations_raw, list):
        raise _bad("answer.citations", f"expected a list, got {_kind(citations_raw)}")
    citations = [_citation(c, i, mapping) for i, c in enumerate(citations_raw)]
    refused, reason, grounded = field("refused"), field("refusal_reason"), field("grounded")
    for name, value in (("refused", refused), ("grounded", grounded)):
        if value is not None and not isinstance(value, bool):
            raise _bad(f"answer.{name}", f"expected true or false, got {value!r}")
    if refused is None:
        refused = bool(reason) or text.strip().lower() == REFUSAL_TOKEN or grounded is False
    usage = _usage(raw, payload)
    outer = payload if isinstance(payload, dict) and payload is not raw else {}
    model = field("model")
    try:
        return Answer(
            text=text,
            citations=citations,
            refused=refused,
            grounded=(not refused) if grounded is None else grounded,
            refusal_reason=None if reason is None else str(reason),
            prompt_template_version=_opt_str(field("prompt_template_version")),
            model=_opt_str(model if model is not None else outer.get("model")),
            prompt_tokens=_first(field("prompt_tokens"), usage, "prompt_tokens", "input_tokens"),
            completion_tokens=_first(field("completion_tokens"), usage, "completion_tokens", "output_tokens"),
            cost_usd=_first(field("cost_usd", "cost"), usage, "cost_usd", "cost", "total_cost"),
        )
    except ValidationError as exc:
        raise _bad("answer", _pydantic_reason(exc)) from None


def _usage(raw: dict[str, Any], payload: Any) -> dict[str, Any]:
    """The token usage of an answer: the answer object's ``usage``, else the response's own (an
    OpenAI-style body carries ``usage`` beside the answer, not inside it)."""
    for holder in (raw, payload):
        usage = holder.get("usage") if isinstance(holder, dict) else None
        if isinstance(usage, dict):
            return usage
    return {}


def _first(value: Any, usage: dict[str, Any], *names: str) -> Any:
    """``value`` when given, else the first of ``names`` present in ``usage`` (OpenAI's
    ``prompt_tokens`` / ``completion_tokens``, Anthropic's and the Responses API's ``input_tokens`` /
    ``output_tokens``)."""
    if value is not None:
        return value
    return next((usage[n] for n in names if usage.get(n) is not None), None)


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)
