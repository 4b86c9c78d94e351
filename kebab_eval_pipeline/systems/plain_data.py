"""Python objects a system returned, as the plain JSON-like data a response mapping reads.

An in-process system (``kind: python``) returns what its framework gives it: Haystack ``Document``
lists or ``Pipeline.run`` output dicts, LlamaIndex ``NodeWithScore`` lists or a ``Response``,
LangChain ``Document`` lists or ``(Document, score)`` pairs — or plain dicts. :func:`plain` turns any
of them into dicts, lists, strings, numbers, booleans and None using the object's own
serialisation, so the documented mappings of ``docs/examples/frameworks/*.yaml`` (written for the
same objects serialised by the framework over HTTP) read them unchanged:

1. plain values stay as they are (a tuple or set becomes a list, dict keys become strings);
2. an object with ``to_dict()`` (Haystack ``Document`` — flat, its meta beside ``id``; LlamaIndex
   nodes) is that dict;
3. a pydantic model (LangChain ``Document``, LlamaIndex schema objects) is its ``model_dump()``;
4. a dataclass (LlamaIndex ``Response``, Haystack ``ByteStream``) is its fields;
5. an iterator (a generator of hits) is a list of its first :data:`MAX_ITEMS` items; numpy
   scalars and arrays are numbers and lists (``item()`` / ``tolist()``); dates and times
   their ISO text; a path its text; an enum its value; bytes are dropped (None);
6. any other object with attributes is its public attributes (``vars``), else its ``str``.

Nesting deeper than :data:`MAX_DEPTH` (or a cycle) raises :class:`PlainDataError`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import itertools
import math
from collections.abc import Iterator, Mapping
from pathlib import PurePath
from typing import Any

MAX_DEPTH = 64  # JSON over the wire is cut at a similar depth (systems/http_body.py)
MAX_ITEMS = 100_000  # items taken from an iterator (a generator of hits); a list is taken whole
_PLAIN = (str, int, float, bool, type(None))
# where frameworks report token usage, and what they call the counts
_USAGE_KEYS = ("usage", "usage_metadata", "token_usage")
_TOKEN_NAMES = {
    "prompt_tokens": "prompt_tokens",
    "input_tokens": "prompt_tokens",  # LangChain usage_metadata, Anthropic
    "completion_tokens": "completion_tokens",
    "output_tokens": "completion_tokens",
    "total_tokens": "total_tokens",
    "cost": "cost",
}


class PlainDataError(ValueError):
    """A value that cannot be plain data (nested past :data:`MAX_DEPTH`, or a cycle)."""


def plain(value: Any) -> Any:
    """``value`` as JSON-like data (see the module docstring); PlainDataError past :data:`MAX_DEPTH`."""
    return _plain(value, 0)


def _plain(value: Any, depth: int) -> Any:
    if isinstance(value, _PLAIN) and not isinstance(value, enum.Enum):
        return value
    if depth >= MAX_DEPTH:
        raise PlainDataError(f"nested more than {MAX_DEPTH} levels deep (or a cycle)")
    down = depth + 1
    if isinstance(value, Mapping):
        return {str(k): _plain(v, down) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v, down) for v in value]
    if isinstance(value, Iterator):  # a generator of hits: taken as a list
        return [_plain(v, down) for v in itertools.islice(value, MAX_ITEMS)]
    if isinstance(value, enum.Enum):
        return _plain(value.value, down)
    if isinstance(value, bytes | bytearray | memoryview):
        return None  # a document's raw blob: nothing a mapping reads
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, type):
        return f"{value.__module__}.{value.__qualname__}"
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return _plain(to_dict(), down)
    model_dump = getattr(value, "model_dump", None)
    if callable(model_dump) and hasattr(type(value), "model_fields"):
        return _plain(model_dump(), down)
    if dataclasses.is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name), down) for f in dataclasses.fields(value)}
    if hasattr(value, "tolist") and hasattr(value, "dtype"):  # numpy / torch scalars and arrays
        return _plain(value.tolist(), down)
    if hasattr(value, "item") and hasattr(value, "dtype"):
        return _plain(value.item(), down)
    attrs = getattr(value, "__dict__", None)
    if isinstance(attrs, dict):
        return {k: _plain(v, down) for k, v in attrs.items() if not k.startswith("_")}
    return str(value)


def as_response(value: Any) -> Any:
    """A system's return value as a response body: :func:`plain` of it, a bare string being an
    answer's text (``{"text": s}``)."""
    data = plain(value)
    return {"text": data} if isinstance(data, str) else data


def find_usage(data: Any, max_depth: int = 4) -> dict[str, int | float] | None:
    """Token usage reported somewhere in ``data`` (plain data), as ``{prompt_tokens,
    completion_tokens, total_tokens, cost}`` (the names present): the first object under a
    ``usage`` / ``usage_metadata`` / ``token_usage`` key, breadth first, at most ``max_depth``
    levels down, that holds a token count (OpenAI and Haystack name them ``prompt_tokens`` …,
    LangChain ``input_tokens`` …). None when there is none."""
    level = [data]
    for _ in range(max_depth + 1):
        below = []
        for item in level:
            children = (
                item.items() if isinstance(item, dict) else enumerate(item) if isinstance(item, list) else ()
            )
            for key, child in children:
                if key in _USAGE_KEYS and isinstance(child, dict):
                    usage = {
                        ours: child[theirs]
                        for theirs, ours in _TOKEN_NAMES.items()
                        if _count(child.get(theirs))
                    }
                    if usage:
                        return usage
                if isinstance(child, dict | list):
                    below.append(child)
        level = below
    return None


def _count(value: Any) -> bool:
    return (
        isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
    )
