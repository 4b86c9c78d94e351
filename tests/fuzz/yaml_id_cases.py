"""The ``yaml-ids`` family (issue 44, "Ids are the text the user wrote").

A YAML golden file (canonical, kebab, support-anchor or ckv) where one identifier — a query id,
a support's doc id or chunk id, a slice value (``lang``, ``category``, ``group``, a tag) — is an
unquoted scalar YAML 1.1 would type: ``010`` (octal 8), ``1:30`` (sexagesimal 90), ``0x1F``,
``1_000``, ``+12``, ``0b101``, ``no`` / ``on`` (booleans), ``null`` / ``~``, dates… The file goes
through ``kebab-eval golden convert --out out.json``; the converted set must hold the text as
written (``"010"``), or the file is refused (exit 2) naming it and saying to quote the value.
Any other id in the output — ``8``, ``False``, ``2024-01-02`` for ``2024-1-2`` — is ``wrong``.
Sometimes a second query is given, quoted, the id the typed reading would produce (``'8'`` beside
``010``): read as written, the two ids differ.
"""

from __future__ import annotations

import random
from typing import Any

import yaml

from tests.fuzz.cases import EITHER, Case, base_queries, render

#: Unquoted scalars a YAML 1.1 reader types, with what PyYAML makes of them (for the collision).
SCALARS = {
    "010": "8",
    "1:30": "90",
    "0x1F": "31",
    "1_000": "1000",
    "+12": "12",
    "0b101": "5",
    "no": "False",
    "on": "True",
    "null": "None",
    "2024-1-2": "2024-01-02",
    "2001-12-14t21:59:43.10-05:00": "2001-12-14 21:59:43.100000-05:00",
    "~": "None",
    "yes": "True",
    "off": "False",
    "12:30:45": "45045",
    ".inf": "inf",
    "1.50": "1.5",
    "0o17": "0o17",  # YAML 1.2 octal: a string to a YAML 1.1 reader (a control)
    "1e3": "1e3",  # no dot: a string to PyYAML (a control)
}
VALUES = list(SCALARS)

#: Where an identifier sits in each YAML format (the canonical field it becomes).
POSITIONS = {
    "canonical-yaml": ["id", "doc_id", "chunk_id", "lang", "category", "group", "tag"],
    "kebab-yaml": ["id", "doc_id", "chunk_id"],
    "supports-yaml": ["id"],
    "ckv-yaml": ["id"],
}
FORMATS = list(POSITIONS)
MARK = "YAMLIDMARK"


def yaml_ids_case(case_id: str, rng: random.Random, index: int) -> Case:
    # 19 values and 4 formats: every pairing comes round; the issue's own values first
    fmt = FORMATS[index % len(FORMATS)]
    value = VALUES[index % len(VALUES)]
    position = rng.choice(POSITIONS[fmt])
    qs = base_queries(rng)
    for q in qs:  # every query answerable by a doc (kebab/supports/ckv need one)
        q.pop("answerable", None)
        q["supports"] = [{"doc_id": f"d-{q['id']}.md"}]
    victim = rng.randrange(len(qs))
    q = qs[victim]
    expected: dict[str, Any] = {}
    if position == "id":
        q["id"] = MARK
        expected[f"queries.{victim}.id"] = value
    elif position in ("doc_id", "chunk_id"):
        q["supports"] = [{position: MARK}]
        expected[f"queries.{victim}.supports.0.{position}"] = value
    elif position == "tag":
        q["tags"] = [MARK]
        expected[f"queries.{victim}.tags.0"] = value
    else:
        q[position] = MARK
        # an unquoted null or ~ is YAML's "no value": for the optional group, no group (as written)
        no_value = position == "group" and SCALARS[value] == "None"
        expected[f"queries.{victim}.{position}"] = "<absent>" if no_value else value
    # the typed reading's id must itself be a valid id to collide with (a datetime's has a space)
    typed = SCALARS[value]
    collide = (
        position == "id" and typed != value and not any(c.isspace() for c in typed) and rng.random() < 0.3
    )
    if collide:  # the typed reading's id, quoted, on another query: two ids as written
        other = (victim + 1) % len(qs)
        qs[other]["id"] = "COLLIDEMARK"
        expected[f"queries.{other}.id"] = SCALARS[value]
    if fmt == "kebab-yaml" and position == "chunk_id":
        qs[victim]["supports"] = [{"chunk_id": MARK}]
    text = render(fmt, qs, rng)
    if fmt == "kebab-yaml" and position == "chunk_id":
        text = text.replace(
            "expected_doc_ids: []\n", f"expected_doc_ids: []\n  expected_chunk_ids:\n  - {MARK}\n", 1
        )
    assert MARK in text, (fmt, position)
    text = text.replace(MARK, value).replace("COLLIDEMARK", yaml.safe_dump(SCALARS[value]).split("\n")[0])
    name = f"g-{case_id}.yaml"
    return Case(
        id=case_id,
        kind=f"yaml-ids/{fmt}-{position}",
        command="convert",
        expect=EITHER,
        files={name: text.encode()},
        args=["golden", "convert", f"{{dir}}/{name}", "--out", "{dir}/out.json"],
        blame=[name],
        must_say=["quote"],
        queries=len(qs),
        expected=expected,
        note=f"{fmt}: unquoted {value} as {position}"
        + (f", and '{SCALARS[value]}' quoted" if collide else ""),
    )
