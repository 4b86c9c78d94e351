"""Every case family of the CLI fuzz harness, and building a seeded run of them.

The issue-22 families live in :mod:`tests.fuzz.cases`; issue 44's each in a module of its own
(``secrets``, ``yaml-ids``, ``process-end`` and ``sigint``, ``editor``, ``edges``). A case is a
pure function of ``(seed, family, index)``: its id (``secrets-0003``) reproduces it.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from tests.fuzz import cases
from tests.fuzz.cases import Case, special_cases
from tests.fuzz.edge_cases import edges_case
from tests.fuzz.editor_cases import editor_case
from tests.fuzz.process_cases import process_end_case, sigint_case
from tests.fuzz.secret_cases import secrets_case
from tests.fuzz.yaml_id_cases import yaml_ids_case

FAMILIES: dict[str, Callable[[str, random.Random, int], Case]] = {
    **cases.FAMILIES,
    "secrets": secrets_case,
    "yaml-ids": yaml_ids_case,
    "process-end": process_end_case,
    "sigint": sigint_case,
    "editor": editor_case,
    "edges": edges_case,
}


def make_case(seed: int, family: str, index: int) -> Case:
    """Case ``index`` of ``family`` for ``seed``: the same inputs every time."""
    case_id = f"{family}-{index:04d}"
    return FAMILIES[family](case_id, random.Random(f"{seed}:{family}:{index}"), index)


def build_cases(seed: int, counts: dict[str, int]) -> list[Case]:
    """``counts[family]`` cases of each family, then the special files."""
    built = [make_case(seed, family, i) for family, n in counts.items() for i in range(n)]
    return built + special_cases()
