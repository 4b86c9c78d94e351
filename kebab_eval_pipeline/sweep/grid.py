"""A sweep's grid expanded into variants: ordered, with stable readable ids, as settings overrides.

``grid: {system.chunk_size: [200, 800], system.mode: [lexical, hybrid]}`` gives four variants, the
first key varying slowest (the order the grid is written in, like nested loops):

- ``chunk_size-200_mode-lexical-<hash>`` … ``chunk_size-800_mode-hybrid-<hash>``: each setting's
  last name and value, then six hex digits of the SHA-256 of the variant's overrides (canonical
  JSON). The readable part may be shortened or lose characters a run id cannot hold; the hash keeps
  ids of different overrides apart and makes an id depend on nothing but the overrides (not on the
  other values in the grid, nor on their order).
- run id ``sweep-<name>-<slug>``: valid under :func:`kebab_eval_pipeline.foundation.run_ids.check_run_id`.

Pure: no settings model here (:func:`apply_variant` edits a config mapping); the run settings
check the grid's keys and values (:mod:`kebab_eval_pipeline.chain.settings`).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kebab_eval_pipeline.foundation.run_ids import check_run_id

#: The most variants one sweep may have (each is a whole run over the golden set).
MAX_VARIANTS = 200
#: Run ids of sweep variants start with this.
RUN_PREFIX = "sweep"
HASH_LENGTH = 6
#: The readable part of one value in an id (the hash tells longer values apart).
VALUE_CHARS = 24
RUN_ID_MAX = 128
#: A grid key: a top-level run setting, or ``system.<key>``.
KEY_PATTERN = re.compile(r"^(?:system\.)?[A-Za-z_][A-Za-z0-9_]*$")
_UNSAFE = re.compile(r"[^A-Za-z0-9.]+")


@dataclass(frozen=True)
class Variant:
    """One combination of the grid: ``overrides`` (grid key → value, grid order), its ``slug``
    (readable part + hash) and ``run_id`` (``sweep-<name>-<slug>``); ``index`` is its position
    in the grid's order (0-based)."""

    index: int
    overrides: dict[str, Any]
    slug: str
    run_id: str

    def label(self) -> str:
        """``chunk_size=200, mode=lexical``: for tables and progress lines."""
        return ", ".join(f"{short_key(k)}={value_text(v)}" for k, v in self.overrides.items())


def short_key(key: str) -> str:
    """``system.chunk_size`` → ``chunk_size``; a top-level key stays as it is."""
    return key.rsplit(".", 1)[-1]


def value_text(value: Any) -> str:
    """A grid value as a person reads it: ``200``, ``0.2``, ``true``, ``null``, ``lexical``; a list
    as its items joined by ``+`` (``1+10``); a mapping as compact JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, list | tuple):
        return "+".join(value_text(v) for v in value)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True, default=str)


def canonical(overrides: Mapping[str, Any]) -> str:
    """The overrides as canonical JSON (keys sorted, no spaces): what the id's hash is of."""
    return json.dumps(overrides, separators=(",", ":"), ensure_ascii=False, sort_keys=True, default=str)


def variant_hash(overrides: Mapping[str, Any]) -> str:
    """The first :data:`HASH_LENGTH` hex digits of the SHA-256 of :func:`canonical`."""
    return hashlib.sha256(canonical(overrides).encode("utf-8")).hexdigest()[:HASH_LENGTH]


def _safe(text: str) -> str:
    """Only letters, digits and single dots (run ids allow ``._-``, and ``-``/``_`` separate)."""
    return re.sub(r"\.{2,}", ".", _UNSAFE.sub(".", text)).strip(".")


def variant_slug(overrides: Mapping[str, Any], room: int) -> str:
    """``chunk_size-200_mode-lexical-1a2b3c``, at most ``room`` characters (≥ the hash + 1):
    the readable part shortened from the end when needed, never the hash."""
    pairs = "_".join(
        f"{short_key(k)}-{_safe(value_text(v))[:VALUE_CHARS].strip('.') or 'x'}" for k, v in overrides.items()
    )
    readable = pairs[: max(room - HASH_LENGTH - 1, 0)].rstrip("-_.")
    digest = variant_hash(overrides)
    return f"{readable}-{digest}" if readable else digest


def run_id_of(name: str, slug: str) -> str:
    return f"{RUN_PREFIX}-{name}-{slug}"


def variant_count(grid: Mapping[str, Any]) -> int:
    """How many variants ``grid`` has (the product of its lists' lengths; 0 for an empty grid)."""
    if not grid:
        return 0
    return math.prod(len(v) if isinstance(v, list) else 1 for v in grid.values())


def grid_problems(grid: Mapping[str, Any]) -> list[tuple[str | None, str]]:
    """Every problem of the grid's shape, as ``(key or None for the whole grid, reason)``: no key;
    a key that is neither a setting's name nor ``system.<name>``; a value that is not a list, an
    empty list, a value listed twice; more than :data:`MAX_VARIANTS` variants. Empty when fine."""
    problems: list[tuple[str | None, str]] = []
    if not grid:
        return [(None, "no settings to sweep: give at least one key with a list of values")]
    for key, values in grid.items():
        if not isinstance(key, str) or not KEY_PATTERN.fullmatch(key):
            problems.append((str(key), "not a setting: give a run setting (k, answers…) or system.<key>"))
        if not isinstance(values, list):
            problems.append(
                (str(key), f"expected a list of values to try, got {type(values).__name__} {values!r}")
            )
        elif not values:
            problems.append((str(key), "empty list: give at least one value to try"))
        else:
            seen = [canonical({"v": v}) for v in values]
            twice = sorted({value_text(v) for v, s in zip(values, seen, strict=True) if seen.count(s) > 1})
            if twice:
                problems.append((str(key), f"listed more than once: {', '.join(twice)}"))
    n = variant_count(grid)
    if n > MAX_VARIANTS:
        shape = " × ".join(str(len(v)) for v in grid.values() if isinstance(v, list))
        problems.append((None, f"{n} variants ({shape}): at most {MAX_VARIANTS} (each is a whole run)"))
    return problems


def expand(name: str, grid: Mapping[str, Sequence[Any]]) -> list[Variant]:
    """The grid's variants in order: the first key varies slowest, values in their listed order.
    ``grid`` must be free of :func:`grid_problems`. Raises ValueError if two variants would share a
    run id (distinct overrides differing only in characters a run id drops, and a hash collision)."""
    room = RUN_ID_MAX - len(run_id_of(name, ""))
    keys = list(grid)
    variants = []
    for index, values in enumerate(itertools.product(*(grid[k] for k in keys))):
        overrides = dict(zip(keys, values, strict=True))
        slug = variant_slug(overrides, room)
        variants.append(Variant(index, overrides, slug, check_run_id(run_id_of(name, slug))))
    ids = [v.run_id for v in variants]
    if len(set(ids)) != len(ids):
        raise ValueError(f"sweep {name!r}: two variants share a run id")
    return variants


def find_variant(name: str, grid: Mapping[str, Sequence[Any]], run_id: str | None) -> Variant | None:
    """The variant whose run id is ``run_id``, or None (not this sweep's id, or not of its grid as
    it is now)."""
    if not run_id or not run_id.startswith(run_id_of(name, "")):
        return None
    return next((v for v in expand(name, grid) if v.run_id == run_id), None)


def select(variants: Sequence[Variant], wanted: Sequence[str]) -> tuple[list[Variant], list[str]]:
    """The variants named in ``wanted`` — each by its slug, its readable part (the slug without
    the hash) or its run id — in grid order, and the names that matched none."""
    names = {}
    for v in variants:
        for alias in (v.slug, v.run_id, v.slug.rsplit("-", 1)[0]):
            names.setdefault(alias, set()).add(v.index)
    chosen = set().union(*(names.get(w, set()) for w in wanted)) if wanted else set()
    unknown = [w for w in wanted if w not in names]
    return [v for v in variants if v.index in chosen], unknown


def apply_variant(doc: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """A config mapping with the variant's ``overrides`` set: ``system.<key>`` inside the
    ``system:`` block (made when missing), other keys at the top level. ``doc`` is not changed."""
    out = dict(doc)
    system = dict(out.get("system") or {})
    for key, value in overrides.items():
        if key.startswith("system."):
            system[key.split(".", 1)[1]] = value
        else:
            out[key] = value
    if system:
        out["system"] = system
    return out


def variant_versions(name: str, variant: Variant) -> dict[str, str]:
    """What a variant's run records beside its system's versions, so a comparison of two variants
    shows what differed: ``sweep`` (``<name>/<slug>``) and ``sweep.<key>`` per swept setting."""
    return {
        "sweep": f"{name}/{variant.slug}",
        **{f"sweep.{key}": value_text(value) for key, value in variant.overrides.items()},
    }
