"""Suggestions ("did you mean …?") for an unknown key in a config, at any depth of its pydantic model.

    unknown_key_reason(RunSettings, ("systm",))               → unknown key — did you mean 'system'?
    unknown_key_reason(RunSettings, ("system", "command", "serch_argv"))
                                                              → unknown key — did you mean 'search_argv'?
    unknown_key_reason(RunSettings, ("gates", "mrr", "mn"))   → unknown key — did you mean 'min'?

``loc`` is pydantic's error location, as it reports it: mapping keys, list indices, and the tag
of a discriminated union's member (``command`` above). The keys a mapping accepts come from the
model found by following ``loc`` through fields, ``dict`` values, list items, optionals and unions;
where no model is found (a free-form mapping such as ``headers``), there is no suggestion.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel

#: How close a key must be to a known one (difflib's ratio) to be suggested: "systm" → "system"
#: (0.91), "mn" → "min" (0.8); unrelated words stay without a suggestion.
CUTOFF = 0.6


def _unwrap(annotation: Any) -> Any:
    """``annotation`` without ``Annotated[...]`` wrappers."""
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation


def _union_members(annotation: Any) -> list[tuple[str | None, Any]]:
    """(tag or None, member) of a union, ``None`` left out; a tag is ``Tag("…")`` metadata."""
    members = []
    for member in typing.get_args(annotation):
        tag = None
        if typing.get_origin(member) is typing.Annotated:
            tag = next((m.tag for m in typing.get_args(member)[1:] if hasattr(m, "tag")), None)
        member = _unwrap(member)
        if member is not type(None):
            members.append((tag, member))
    return members


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _keys(model: type[BaseModel]) -> list[str]:
    """The keys ``model`` accepts in a document: each field's alias, else its name."""
    return [field.alias or name for name, field in model.model_fields.items()]


def _field(model: type[BaseModel], key: Any) -> Any:
    for name, field in model.model_fields.items():
        if key in (name, field.alias):
            return field.annotation
    return None


def model_at(root: Any, loc: Sequence[str | int]) -> type[BaseModel] | None:
    """The pydantic model that validates the mapping at ``loc`` (pydantic's location, union tags
    included) under ``root``; None where the mapping is free-form or ``loc`` leads nowhere known."""
    annotation = _unwrap(root)
    parts = list(loc)
    while True:
        origin = typing.get_origin(annotation)
        if origin in (typing.Union, types.UnionType):
            members = _union_members(annotation)
            tagged = [m for tag, m in members if tag is not None and parts and tag == parts[0]]
            if tagged:  # a discriminated union: pydantic names the member in the location
                annotation, parts = tagged[0], parts[1:]
                continue
            models = [m for _, m in members if _is_model(m)]
            if len(models) != 1:
                return None
            annotation = models[0]
            continue
        if not parts:
            return annotation if _is_model(annotation) else None
        part, parts = parts[0], parts[1:]
        if _is_model(annotation):
            annotation = _unwrap(_field(annotation, part))
        elif origin in (dict, Mapping):
            annotation = _unwrap(typing.get_args(annotation)[1])
        elif origin in (list, tuple, Sequence, set, frozenset):
            annotation = _unwrap(typing.get_args(annotation)[0])
        else:
            return None
        if annotation is None:
            return None


def suggestion(word: str, known: Iterable[str]) -> str | None:
    """The known key closest to ``word`` (case-insensitively), when close enough; else None."""
    known = list(known)
    by_lower = {k.lower(): k for k in known}
    match = difflib.get_close_matches(str(word).lower(), list(by_lower), n=1, cutoff=CUTOFF)
    return by_lower[match[0]] if match else None


def unknown_key_reason(root: Any, loc: Sequence[str | int], also: Iterable[str] = ()) -> str:
    """The reason shown for the unknown key at ``loc`` (its last part): ``unknown key``, and
    ``— did you mean 'KEY'?`` when a key the mapping accepts (or one of ``also``, keys accepted
    there by other means) is close to it."""
    model = model_at(root, loc[:-1])
    known = [*(_keys(model) if model is not None else []), *also]
    match = suggestion(str(loc[-1]), known) if loc and known else None
    return "unknown key" + (f" — did you mean '{match}'?" if match else "")
