"""A BEIR ``corpus.jsonl`` as reference-system documents: one document per line.

``system.corpus`` may name a ``corpus.jsonl`` file or a BEIR folder holding one. Each line
``{"_id", "title", "text"}`` becomes a plain-text :class:`~.ingest.Document` whose id (and path)
is ``_id``, so its chunks' hits carry the id the qrels judge; its lines are the title, a blank
line and the text, chunked like any text file. Bad lines (not JSON, no ``_id``, a title or text
that is not a string, an id given twice) raise one :class:`InputError` listing every one.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from kebab_eval_pipeline.foundation.errors import InputError, Offender
from kebab_eval_pipeline.foundation.yaml_io import jsonl_objects, read_text
from kebab_eval_pipeline.reference.ingest import (
    CorpusScan,
    Document,
    _split_lines,
    read_corpus_scan,
    scan_corpus,
)

BEIR_PARSER_VERSION = "beir-jsonl-1"
CORPUS_FILE = "corpus.jsonl"


def beir_corpus_file(path: Path) -> Path | None:
    """The ``corpus.jsonl`` that ``path`` names (the file itself, or one inside a folder), else None."""
    path = Path(path)
    if path.is_file() and path.suffix.lower() == ".jsonl":
        return path
    if path.is_dir() and (path / CORPUS_FILE).is_file():
        return path / CORPUS_FILE
    return None


def read_beir_corpus(path: Path) -> list[Document]:
    """Every line of a BEIR ``corpus.jsonl`` as a :class:`Document`, in file order.

    Edge cases: blank lines are skipped; a document with an empty title is its text alone; bad
    UTF-8 is an error (an id must read back exactly); an empty file gives ``[]``."""
    text = read_text(path, "BEIR corpus", field="system.corpus")
    docs: list[Document] = []
    offenders: list[Offender] = []
    seen: dict[str, int] = {}
    for n, line, entry in jsonl_objects(text, path, offenders, "{_id, title, text}"):
        where = f"line {n}"
        doc_id, title, body = entry.get("_id"), entry.get("title", ""), entry.get("text")
        if isinstance(doc_id, int) and not isinstance(doc_id, bool):
            doc_id = str(doc_id)
        problems = []
        if not isinstance(doc_id, str) or not doc_id.strip() or any(ch in doc_id for ch in "\t\r\n"):
            problems.append(("_id", "missing, not a string, or holding a tab or line break"))
        if not isinstance(body, str):
            problems.append(("text", "missing or not a string"))
        if title is not None and not isinstance(title, str):
            problems.append(("title", "not a string"))
        if not problems and doc_id in seen:
            problems.append(("_id", f"given twice (first at line {seen[doc_id]})"))
        if problems:
            offenders += [Offender(str(path), r, position=where, field=f) for f, r in problems]
            continue
        seen[doc_id] = n
        lines = ([title, ""] if title else []) + _split_lines(body)
        docs.append(
            Document(
                doc_id=doc_id,
                rel_path=doc_id,
                kind="text",
                parser_version=BEIR_PARSER_VERSION,
                title=title or doc_id,
                front_matter={},
                lines=lines,
                headings=[],
                body_start=1,
                content_sha256=hashlib.sha256(line.encode("utf-8")).hexdigest(),
            )
        )
    if offenders:
        raise InputError("cannot read the BEIR corpus", offenders)
    return docs


def read_documents(root: Path, exclude: list[str] | tuple[str, ...] = ()) -> tuple[list[Document], list]:
    """The documents of a corpus: a BEIR ``corpus.jsonl`` (``root`` the file or a folder holding
    one), else the folder's files (:func:`~.ingest.read_corpus_scan`, with the symlinks skipped)."""
    beir = beir_corpus_file(root)
    if beir is not None:
        return read_beir_corpus(beir), []
    return read_corpus_scan(Path(root), exclude)


def scan_files(root: Path, exclude: list[str] | tuple[str, ...] = ()) -> CorpusScan:
    """What :func:`read_documents` reads: the ``corpus.jsonl`` alone, else the folder's scan."""
    beir = beir_corpus_file(root)
    if beir is not None:
        return CorpusScan([(beir.name, beir)], [])
    return scan_corpus(Path(root), exclude)
