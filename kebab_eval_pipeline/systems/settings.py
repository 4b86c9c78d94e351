"""The ``system:`` block of the run config, derived from the registered system kinds
(:mod:`.kinds`, :mod:`.kind`): the discriminated union of their settings models chosen by ``kind``,
the kind names, and the declaration of a kind by name. The run config
(:mod:`kebab_eval_pipeline.chain.settings`) composes the union. Strict like every settings block: an
unknown key or an impossible value is refused when the config loads, naming the key; an unknown
kind is refused naming every registered one.
"""

from __future__ import annotations

from typing import Annotated, Any, Union

from pydantic import Discriminator, Tag

from kebab_eval_pipeline.systems import kinds  # noqa: F401  (imported: every kind registers itself)
from kebab_eval_pipeline.systems.kind import SystemKind, registered

#: Every registered kind by name, in the order they are listed.
KINDS: dict[str, SystemKind] = registered()

#: The ``system.kind`` values.
SYSTEM_KINDS: tuple[str, ...] = tuple(KINDS)


def kind_of(name: str) -> SystemKind | None:
    """The declaration of kind ``name``; None for a kind not registered (a run stored by a version
    that had it, a typo on the command line)."""
    return KINDS.get(name)


def _system_kind(value: Any) -> str:
    if isinstance(value, dict):
        return value.get("kind", "reference")
    return getattr(value, "kind", "reference")


#: The ``system:`` block: one settings model per kind, chosen by ``kind`` (default ``reference``).
SystemSettings = Annotated[
    Union[tuple(Annotated[k.settings, Tag(k.name)] for k in KINDS.values())],  # noqa: UP007
    Discriminator(
        _system_kind,
        custom_error_type="system_kind",
        custom_error_message=f"system.kind must be one of {', '.join(SYSTEM_KINDS)}",
    ),
]
