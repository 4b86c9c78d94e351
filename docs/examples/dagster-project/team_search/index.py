"""The team's own index builder: markdown documents cut into sections, one JSON line per chunk.

A chunk carries the document path, its heading path and its line span — what a RAG system's
citations point at. ``drop_headings=True`` is the regression this example guards against: a
chunker change that loses the headings (their lines and the heading path of every chunk).
"""

from __future__ import annotations

import json
from pathlib import Path

CHUNKER_VERSION = "sections-1"


def sections(text: str, drop_headings: bool = False) -> list[dict]:
    """The markdown ``text`` cut at its headings: ``heading_path``, ``line_start``/``line_end``
    (1-based, inclusive) and ``text`` of each non-empty section."""
    out: list[dict] = []
    path: list[str] = []
    start, body = 1, []

    def flush(end: int) -> None:
        if any(line.strip() for line in body):
            out.append(
                {
                    "heading_path": [] if drop_headings else list(path),
                    "line_start": start,
                    "line_end": end,
                    "text": "\n".join(body),
                }
            )

    lines = text.splitlines()
    in_code = False
    for number, line in enumerate(lines, start=1):
        if line.lstrip().startswith("```"):
            in_code = not in_code
        level = len(line) - len(line.lstrip("#")) if not in_code else 0
        if 1 <= level <= 6 and line[level : level + 1] == " ":
            flush(number - 1)
            path = [*path[: level - 1], line[level:].strip()]
            start, body = number, ([] if drop_headings else [line])
            continue
        body.append(line)
    flush(len(lines))
    return out


def build_index(docs_root: Path, out: Path, drop_headings: bool = False) -> dict:
    """Index every ``*.md`` under ``docs_root`` into ``out/chunks.jsonl``; returns what was built."""
    out.mkdir(parents=True, exist_ok=True)
    chunks = 0
    with (out / "chunks.jsonl").open("w", encoding="utf-8") as f:
        for doc in sorted(docs_root.rglob("*.md")):
            rel = doc.relative_to(docs_root).as_posix()
            for i, section in enumerate(sections(doc.read_text(encoding="utf-8"), drop_headings)):
                f.write(json.dumps({"chunk_id": f"{rel}#{i}", "doc_path": rel, **section}) + "\n")
                chunks += 1
    version = f"{CHUNKER_VERSION}{'-noheadings' if drop_headings else ''}"
    (out / "version.json").write_text(json.dumps({"chunker_version": version, "chunks": chunks}))
    return {"chunks": chunks, "chunker_version": version}
