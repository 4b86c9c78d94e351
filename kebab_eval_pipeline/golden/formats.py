"""The golden formats, derived from the readers' own declarations: every module of
:mod:`kebab_eval_pipeline.golden.readers` that declares ``FORMAT`` (and ``SNIFF_RANK``) reads one
document format — YAML, JSON or JSONL — and the standard IR dataset formats are
:data:`~kebab_eval_pipeline.golden.datasets.DATASET_FORMATS`. A new format is one reader module;
the loader (:mod:`.load`), the run config's ``golden.format`` and ``--format`` read these.

A document reader has ``looks_like(doc)``, ``entries(doc)`` and ``to_canonical(entry)``, and
``looks_like_line(entry)`` when it also reads one query per JSONL line (see :mod:`.readers`).
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

from kebab_eval_pipeline.golden import readers
from kebab_eval_pipeline.golden.datasets import DATASET_FORMATS

_PARTS = ("FORMAT", "SNIFF_RANK", "looks_like", "entries", "to_canonical")


def _readers() -> dict[str, ModuleType]:
    found = []
    for info in pkgutil.iter_modules(readers.__path__):
        module = importlib.import_module(f"{readers.__name__}.{info.name}")
        if not hasattr(module, "FORMAT"):
            continue  # a part of a dataset format (qrels, topics), read by golden.datasets
        missing = [part for part in _PARTS if not hasattr(module, part)]
        if missing:
            raise TypeError(f"golden reader {module.__name__} declares FORMAT but not {', '.join(missing)}")
        found.append(module)
    found.sort(key=lambda m: m.SNIFF_RANK)
    names = [m.FORMAT for m in found]
    if len(set(names)) != len(names) or set(names) & set(DATASET_FORMATS):
        raise ValueError(f"golden formats declared twice: {names} and datasets {DATASET_FORMATS}")
    return {m.FORMAT: m for m in found}


#: Document format → its reader module, in sniffing order (most specific first).
READERS: dict[str, ModuleType] = _readers()
#: The readers that also read one query per JSONL line, in sniffing order.
LINE_READERS: tuple[str, ...] = tuple(n for n, r in READERS.items() if hasattr(r, "looks_like_line"))
#: Every ``--format`` / ``golden.format`` value: ``auto`` (sniffed per file), then each format.
FORMATS: tuple[str, ...] = ("auto", *READERS, *DATASET_FORMATS)
