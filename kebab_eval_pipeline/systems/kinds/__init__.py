"""The system kinds: every module of this package is one kind, declaring its settings model and
registering its :class:`~kebab_eval_pipeline.systems.kind.SystemKind` when imported. Importing this
package imports them all, so a new kind is one new module here (plus its adapter) and nothing else.

The built-in kinds are registered in :data:`SHOWN_FIRST`'s order — the order of ``SYSTEM_KINDS``
and of the config's "system.kind must be one of …" message — and any other kind after them, by
module name.
"""

from __future__ import annotations

import importlib
import pkgutil

#: The order kinds are listed in (config errors, ``SYSTEM_KINDS``); a kind not named here is
#: listed after these, by name. Only an order: a kind is registered by its module alone.
SHOWN_FIRST = ("reference", "command", "http", "replay", "python")


def _modules() -> list[str]:
    found = sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))
    return [m for m in SHOWN_FIRST if m in found] + [m for m in found if m not in SHOWN_FIRST]


for _module in _modules():
    importlib.import_module(f"{__name__}.{_module}")
