"""Queries (topics) in the standard layouts, read into :class:`Topic` records.

* ``beir`` — BEIR's ``queries.jsonl``: ``{"_id", "text", "metadata"?}`` per line.
* ``sgml`` — classic TREC topic files: ``<top>`` blocks holding ``<num> Number: 301``,
  ``<title>``, ``<desc> Description:`` and ``<narr> Narrative:`` (closing tags optional; a field
  runs until the next tag), parsed as ir_datasets' ``TrecQueries`` does.
* ``tsv`` — ``qid<TAB>text``, what ``ir_datasets export DATASET queries`` writes; with more
  columns they are ir_datasets' field order: ``qid, title, description, narrative``.

Which field becomes the query is the caller's choice (``title`` by default, or ``description``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from kebab_eval_pipeline.foundation.errors import Offender
from kebab_eval_pipeline.foundation.yaml_io import jsonl_objects

QUERY_FIELDS = ("title", "description")
# ir_datasets' DEFAULT_QTYPE_MAP: a tag at the start of a line, then an optional label.
_TAGS = (
    (re.compile(r"<num>\s*(Number:)?"), "num"),
    (re.compile(r"<title>\s*(Topic:)?"), "title"),
    (re.compile(r"<desc>\s*(Description:)?"), "description"),
    (re.compile(r"<narr>\s*(Narrative:)?"), "narrative"),
)
_CLOSING = re.compile(r"</(num|title|desc|narr)>")


@dataclass
class Topic:
    """One query as read: its id, its fields (``title``, ``description``, ``narrative``; a BEIR
    or two-column TSV query's text is its ``title``) and the line it starts on."""

    qid: str
    line: int
    fields: dict[str, str] = field(default_factory=dict)


def read_beir_queries(path: Path, text: str) -> tuple[list[Topic], list[Offender]]:
    """``queries.jsonl`` → topics (``text`` as the title), plus every offender."""
    topics: list[Topic] = []
    offenders: list[Offender] = []
    for n, _line, entry in jsonl_objects(text, path, offenders, "{_id, text}"):
        where = f"line {n}"
        qid, query = entry.get("_id"), entry.get("text")
        if isinstance(qid, int) and not isinstance(qid, bool):
            qid = str(qid)
        if not isinstance(qid, str) or not qid:
            offenders.append(
                Offender(str(path), "missing or not a string: the query id", position=where, field="_id")
            )
            continue
        if not isinstance(query, str):
            offenders.append(
                Offender(
                    str(path),
                    "missing or not a string: the query text",
                    position=where,
                    query_id=qid,
                    field="text",
                )
            )
            continue
        topics.append(Topic(qid, n, {"title": query}))
    return topics, offenders


def read_sgml_topics(path: Path, text: str) -> tuple[list[Topic], list[Offender]]:
    """Classic TREC ``<top>`` topics → topics, plus every offender (a topic without ``<num>``)."""
    topics: list[Topic] = []
    offenders: list[Offender] = []
    fields: dict[str, str] = {}
    reading: str | None = None
    start = 0  # the line of the open <top>, 0 when none is open
    for n, line in enumerate(text.split("\n"), start=1):
        stripped = line.lstrip()
        if stripped.startswith("<top>"):
            if start:
                offenders.append(_unclosed(path, start))
            fields, reading, start = {}, None, n
            continue
        if stripped.startswith("</top>"):
            cleaned = {k: " ".join(_CLOSING.sub(" ", v).split()) for k, v in fields.items()}
            qid = cleaned.pop("num", "")
            if not qid:
                offenders.append(
                    Offender(str(path), "a <top> without a <num>", position=f"line {start}", field="num")
                )
            else:
                topics.append(Topic(qid, start, cleaned))
            fields, reading, start = {}, None, 0
            continue
        if not start:  # text outside <top> blocks
            continue
        for tag, name in _TAGS:
            match = tag.match(stripped)
            if match:
                fields[name] = stripped[match.end() :]
                reading = name
                break
        else:
            if reading is not None and not stripped.startswith("<"):
                fields[reading] += " " + line
    if start:
        offenders.append(_unclosed(path, start))
    return topics, offenders


def _unclosed(path: Path, line: int) -> Offender:
    return Offender(
        str(path), "a <top> without its </top> (a truncated file?)", position=f"line {line}", field="top"
    )


def read_tsv_topics(path: Path, text: str) -> tuple[list[Topic], list[Offender]]:
    """``qid<TAB>title[<TAB>description<TAB>narrative]`` → topics, plus every offender."""
    topics: list[Topic] = []
    offenders: list[Offender] = []
    for n, line in enumerate(text.split("\n"), start=1):
        line = line.rstrip("\r")
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) < 2:
            offenders.append(
                Offender(
                    str(path),
                    "expected at least 2 tab-separated columns (qid, text), got 1",
                    position=f"line {n}",
                    field="text",
                )
            )
            continue
        names = ("title", "description", "narrative")
        topics.append(
            Topic(parts[0].strip(), n, dict(zip(names, (p.strip() for p in parts[1:]), strict=False)))
        )
    return topics, offenders


def looks_like_sgml(text: str) -> bool:
    return text.lstrip().startswith("<top>")


def looks_like_beir_queries(first_line: str) -> bool:
    try:
        entry = json.loads(first_line)
    except (ValueError, RecursionError):
        return False
    return isinstance(entry, dict) and "_id" in entry and "text" in entry


def looks_like_tsv(first_line: str) -> bool:
    return "\t" in first_line.strip("\r\n")
