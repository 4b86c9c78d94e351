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
                (*_ANSWER_FIELDS, "citations", "prompt_tokens", "completion_tokens"),
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
    mapping = mapping or ResponseMap()
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
    mapping = mapping or ResponseMap()
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
        fields["heading_path"] = [h.strip() for h in fields["heading_path"].split(">") if h.strip()]
    if fields["score_kind"] not in _SCORE_KINDS:
        fields["score_kind"] = "other"
    for name in ("snippet",):
        if fields[name] is None:
            fields[name] = ""
    if fields["heading_path"] is None:
        fields["heading_path"] = []
    return fields


def parse_hits(payload: Any, k: int, mapping: ResponseMap | None = None) -> tuple[list[Hit], list[str]]:
    """Hits from a search response, best first, ranked 1..n, at most ``k``.

    Returns ``(hits, warnings)``. Reported ranks order the hits (stably: list order breaks
    ties and fills in missing ranks) and are then renumbered 1..n; a warning says so when
    they were not already 1..n in list order. Hits beyond ``k`` are dropped with a warning.
    Raises QueryFailure (``bad_response``) naming the first unreadable hit and field.
    """
    mapping = mapping or ResponseMap()
    raw_hits = hit_list(payload, mapping)
    parsed: list[dict[str, Any]] = []
    for i, raw in enumerate(raw_hits):
        try:
            fields = _hit_fields(raw, mapping)
            reported = fields.pop("rank", None)
            hit = Hit.model_validate({**fields, "rank": 1})
        except (ValueError, TypeError) as exc:
            reason = _pydantic_reason(exc) if isinstance(exc, ValidationError) else str(exc)
            raise _bad(f"hits[{i}]", reason) from None
        if reported is not None and (isinstance(reported, bool) or not isinstance(reported, int | float)):
            raise _bad(f"hits[{i}].rank", f"expected a number, got {reported!r}")
        if isinstance(reported, float) and not math.isfinite(reported):  # NaN would scramble the sort
            raise _bad(f"hits[{i}].rank", f"expected a finite number, got {reported!r}")
        parsed.append({"hit": hit, "reported": reported, "position": i})
    warnings = []
    reported = [p["reported"] for p in parsed]
    if reported != list(range(1, len(parsed) + 1)):
        if any(r is not None for r in reported):
            warnings.append(f"reported ranks {_preview(reported)} are not 1..{len(parsed)}; renumbered")
        inf = float("inf")
        parsed.sort(key=lambda p: (inf if p["reported"] is None else p["reported"], p["position"]))
    hits = [p["hit"].model_copy(update={"rank": n}) for n, p in enumerate(parsed, start=1)]
    if len(hits) > k:
        warnings.append(f"returned {len(hits)} hits for k={k}; kept the first {k}")
        hits = hits[:k]
    return hits, warnings


def _preview(values: list) -> str:
    shown = ", ".join(
        "null" if v is None else f"{v:g}" if isinstance(v, float) else str(v) for v in values[:8]
    )
    return f"[{shown}{', …' if len(values) > 8 else ''}]"


def answer_object(payload: Any, mapping: ResponseMap | None = None) -> dict[str, Any]:
    """The raw answer object inside an ask response (see the module docstring)."""
    mapping = mapping or ResponseMap()
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
    mapping = mapping or ResponseMap()
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
    usage = raw.get("usage") if isinstance(raw.get("usage"), dict) else {}
    try:
        return Answer(
            text=text,
            citations=citations,
            refused=refused,
            grounded=(not refused) if grounded is None else grounded,
            refusal_reason=None if reason is None else str(reason),
            prompt_template_version=_opt_str(field("prompt_template_version")),
            model=_opt_str(field("model")),
            prompt_tokens=field("prompt_tokens")
            if field("prompt_tokens") is not None
            else usage.get("prompt_tokens"),
            completion_tokens=field("completion_tokens")
            if field("completion_tokens") is not None
            else usage.get("completion_tokens"),
        )
    except ValidationError as exc:
        raise _bad("answer", _pydantic_reason(exc)) from None


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)
