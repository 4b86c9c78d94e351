"""Golden sets from standard IR layouts: a queries file plus a qrels file, as one golden set.

Formats (``--format``, or told apart by content):

* ``beir`` — a BEIR / ir_datasets folder: ``queries.jsonl`` and ``qrels/<split>.tsv`` (split
  ``test`` by default); ``corpus.jsonl`` is the system's business, not the golden set's.
* ``trec`` — TREC qrels (``qid iter docno rel``) with topics: classic SGML ``<top>`` files or a
  ``qid<TAB>text`` TSV (``ir_datasets export … queries``).
* ``ranx`` — ranx / ir_measures JSON qrels ``{qid: {docid: rel}}`` with a topics/queries file.

Each judged query becomes a golden query whose supports are document ids (``doc_id``, matched
against a hit's ``doc_id``), graded as judged: grade 0 stays a judged non-relevant support.
Queries the qrels never mention are left out, as BEIR does, with a warning counting them; a
judgment for a query the queries file does not hold is an error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from kebab_eval_pipeline.foundation.errors import InputError, Offender
from kebab_eval_pipeline.foundation.limits import INPUT_ENV
from kebab_eval_pipeline.foundation.yaml_io import TOP, decode_text, parse_json_checked, read_text_and_sha256
from kebab_eval_pipeline.golden.readers import qrels as qrels_reader
from kebab_eval_pipeline.golden.readers import topics as topics_reader
from kebab_eval_pipeline.golden.syntax import SYNTAXES, first_line, named_suffix, syntax_of


def _read_ranx_qrels(path: Path, text: str) -> tuple[list[qrels_reader.Judgment], list[Offender]]:
    return qrels_reader.read_ranx_qrels(path, parse_json_checked(text, path, "qrels"), text)


#: The qrels layout of each dataset format, and its reader: the formats are this table's keys.
_QRELS_READERS = {
    "beir": qrels_reader.read_beir_qrels,
    "trec": qrels_reader.read_trec_qrels,
    "ranx": _read_ranx_qrels,
}
DATASET_FORMATS = tuple(_QRELS_READERS)
DEFAULT_SPLIT = "test"
_SPLIT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
_RANX_START = re.compile(r'\s*\{\s*("(?:[^"\\]|\\.)*"\s*:\s*\{|\}\s*$)')
_PEEK = 65536


@dataclass(frozen=True)
class DatasetOptions:
    """How a standard dataset is read: the BEIR ``split`` and the topic field that becomes the query
    (``title``, or ``description``)."""

    split: str = DEFAULT_SPLIT
    query_field: str = "title"

    def problems(self) -> list[Offender]:
        out = []
        if not _SPLIT.fullmatch(self.split):
            out.append(
                Offender("--split", f"{self.split!r} is not a split name (letters, digits, '.', '_', '-')")
            )
        if self.query_field not in topics_reader.QUERY_FIELDS:
            out.append(
                Offender(
                    "--query-field", f"{self.query_field!r}: one of {', '.join(topics_reader.QUERY_FIELDS)}"
                )
            )
        return out


def is_beir_folder(path: Path) -> bool:
    """A folder holding ``queries.jsonl`` and a ``qrels/`` folder."""
    return path.is_dir() and (path / "queries.jsonl").is_file() and (path / "qrels").is_dir()


def beir_files(folder: Path, split: str) -> list[Path]:
    """``[queries.jsonl, qrels/<split>.tsv]`` of a BEIR folder; InputError naming the splits there
    when ``split`` is not one of them."""
    qrels = folder / "qrels" / f"{split}.tsv"
    if not qrels.is_file():
        splits = sorted(p.stem for p in (folder / "qrels").glob("*.tsv"))
        raise InputError(
            "BEIR split not found",
            [
                Offender(
                    str(qrels),
                    f"no qrels for split {split!r}; this folder has: {', '.join(splits) or 'none'}",
                    field="split",
                )
            ],
        )
    return [folder / "queries.jsonl", qrels]


def _first_line(text: str) -> str:
    return first_line(text)[0]


def _peek(path: Path) -> str:
    if not path.is_file():  # a FIFO or device would block or never end: the loader refuses it
        return ""
    try:
        with path.open("rb") as fh:
            head = fh.read(_PEEK)
    except OSError:
        return ""
    try:
        return decode_text(head)  # the reader's own decoding: a BOM is not part of the content
    except UnicodeDecodeError as exc:  # a character cut at the window's end, or not UTF-8 at all
        return decode_text(head[: exc.start]) if exc.start else ""


def role_of(path: Path, head: str, fmt: str = "auto", first: str | None = None) -> tuple[str, str] | None:
    """``("qrels", kind)`` or ``("queries", kind)`` for a standard-dataset file, from its name and
    first bytes ``head``; None for anything else (a golden file of the other formats). ``fmt``
    (beir / trec / ranx) says which qrels layout to expect. ``first``: the file's whole first
    non-blank line when known (a BEIR query line can be longer than any window), else it is
    taken from ``head``. A name that says nothing (``queries.txt``, an extension-less symlink to
    a ``.jsonl``) is read by content: a JSON object first is BEIR queries or ranx qrels."""
    suffix = named_suffix(path)
    first = _first_line(head) if first is None else first
    if suffix in (".yaml", ".yml"):
        return None
    if suffix not in SYNTAXES and first.lstrip().startswith("{"):
        lines = topics_reader.looks_like_beir_queries(first) or syntax_of(path, head) == "jsonl"
        suffix = ".jsonl" if lines else ".json"
    if suffix == ".json":
        return ("qrels", "ranx") if _RANX_START.match(head) or fmt == "ranx" else None
    if suffix == ".jsonl":
        return ("queries", "beir") if topics_reader.looks_like_beir_queries(first) else None
    if qrels_reader.looks_like_beir_qrels(first):
        return "qrels", "beir"
    if topics_reader.looks_like_sgml(head):
        return "queries", "sgml"
    tab_fields = first.rstrip("\r").split("\t")
    if qrels_reader.looks_like_trec_qrels(first) and (len(tab_fields) in (1, 4)):
        return "qrels", "trec"
    if topics_reader.looks_like_tsv(first):
        return "queries", "tsv"
    return None


def sniff(files: list[Path]) -> bool:
    """True when any of ``files`` is a standard-dataset file (so all must form one dataset)."""
    return any(role_of(f, _peek(f)) is not None for f in files if named_suffix(f) not in (".yaml", ".yml"))


@dataclass
class Dataset:
    """A standard dataset read as canonical query entries: ``entries`` are (fields, line in the
    queries file); ``digests`` the (name, sha256) of each file read."""

    fmt: str
    name: str
    queries_path: Path
    entries: list[tuple[dict, int]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    offenders: list[Offender] = field(default_factory=list)
    digests: list[tuple[str, str]] = field(default_factory=list)


def dataset_name(files: list[Path], qrels: Path, options: DatasetOptions) -> str:
    """The set's name: a BEIR folder's name (``-<split>`` unless the split is ``test``), else the
    qrels file's stem."""
    if qrels.parent.name == "qrels" and (qrels.parent.parent / "queries.jsonl").is_file():
        name = qrels.parent.parent.resolve().name
        return name if options.split == DEFAULT_SPLIT else f"{name}-{qrels.stem}"
    return qrels.stem


def read_dataset(files: list[Path], fmt: str, options: DatasetOptions, env: str = INPUT_ENV) -> Dataset:
    """Read one queries file and one qrels file (``files``, in any order) as a golden set's entries.

    Raises InputError when the files are not exactly one qrels and one queries file; every problem
    inside the files is in ``Dataset.offenders`` (all of them, with file, line, field, reason)."""
    bad_options = options.problems()
    if bad_options:
        raise InputError("invalid dataset options", bad_options)
    texts: dict[Path, str] = {}
    digests = []
    for path in files:
        text, digest = read_text_and_sha256(path, "golden set", env)
        texts[path] = text
        digests.append((path.name, digest))
    # the whole first line: a BEIR query longer than the window is still a query line
    roles = {path: role_of(path, texts[path][:_PEEK], fmt, _first_line(texts[path])) for path in files}
    qrels = [p for p, r in roles.items() if r and r[0] == "qrels"]
    queries = [p for p, r in roles.items() if r and r[0] == "queries"]
    unknown = [p for p, r in roles.items() if r is None]
    problems = [
        Offender(
            str(p),
            "not a queries/topics or qrels file of a standard dataset (BEIR, TREC, ranx)",
            position=TOP,
        )
        for p in unknown
    ]
    if len(qrels) != 1 or len(queries) != 1:
        problems.append(
            Offender(
                ", ".join(map(str, files)),
                "a standard dataset is one queries/topics file and one qrels file; got "
                f"{len(queries)} queries and {len(qrels)} qrels file{'s' if len(qrels) != 1 else ''}",
                position=TOP,
            )
        )
    if problems:
        raise InputError("cannot read the standard dataset", problems)
    qrels_path, queries_path = qrels[0], queries[0]
    qrels_kind, topics_kind = roles[qrels_path][1], roles[queries_path][1]  # type: ignore[index]
    if fmt != "auto" and qrels_kind != fmt:
        raise InputError(
            "cannot read the standard dataset",
            [Offender(str(qrels_path), f"--format {fmt}, but these are {qrels_kind} qrels", position=TOP)],
        )
    dataset = Dataset(
        fmt=qrels_kind,
        name=dataset_name(files, qrels_path, options),
        queries_path=queries_path,
        digests=digests,
    )
    judgments = _judgments(qrels_kind, qrels_path, texts.pop(qrels_path), dataset.offenders)
    topics = _topics(topics_kind, queries_path, texts.pop(queries_path), dataset.offenders)
    _assemble(dataset, topics, judgments, qrels_path, topics_kind, options)
    return dataset


def _judgments(kind: str, path: Path, text: str, offenders: list[Offender]) -> list[qrels_reader.Judgment]:
    try:
        out, bad = _QRELS_READERS[kind](path, text)
    except InputError as exc:  # ranx qrels that are not JSON, or have duplicate keys
        offenders += exc.offenders or [Offender(str(path), exc.summary)]
        return []
    offenders += bad
    return out


def _topics(kind: str, path: Path, text: str, offenders: list[Offender]) -> list[topics_reader.Topic]:
    reader = {
        "beir": topics_reader.read_beir_queries,
        "sgml": topics_reader.read_sgml_topics,
        "tsv": topics_reader.read_tsv_topics,
    }[kind]
    out, bad = reader(path, text)
    offenders += bad
    return out


def _assemble(
    dataset: Dataset,
    topics: list[topics_reader.Topic],
    judgments: list[qrels_reader.Judgment],
    qrels_path: Path,
    topics_kind: str,
    options: DatasetOptions,
) -> None:
    """Join topics and judgments into ``dataset.entries`` (queries-file order; supports in qrels
    order), recording unknown and duplicate query ids and missing query fields as offenders."""
    path = dataset.queries_path
    by_query: dict[str, list[dict]] = {}
    for j in judgments:
        by_query.setdefault(j.qid, []).append({"doc_id": j.docno, "grade": j.rel})
    seen: dict[str, int] = {}
    for topic in topics:
        if topic.qid in seen:
            dataset.offenders.append(
                Offender(
                    str(path),
                    f"query id given twice (first at line {seen[topic.qid]})",
                    position=f"line {topic.line}",
                    query_id=topic.qid,
                    field="id",
                )
            )
            continue
        seen[topic.qid] = topic.line
    known = set(seen)
    dataset.offenders += [
        Offender(
            str(qrels_path),
            f"a judgment for query {j.qid!r}, which {path.name} does not hold",
            position=j.where,
            query_id=j.qid,
            field="qid",
        )
        for j in judgments
        if j.qid not in known
    ]
    field_name = options.query_field
    if topics_kind == "beir" and field_name != "title":
        dataset.offenders.append(
            Offender(
                str(path), "BEIR queries have only a text: query_field must be title", field="query_field"
            )
        )
        return
    unjudged = 0
    done: set[str] = set()
    for topic in topics:
        if topic.qid in done:
            continue
        done.add(topic.qid)
        supports = by_query.get(topic.qid)
        if supports is None:
            unjudged += 1
            continue
        query = topic.fields.get(field_name, "")
        if not query.strip():
            shown = {"title": "title" if topics_kind == "sgml" else "text", "description": "description"}
            dataset.offenders.append(
                Offender(
                    str(path),
                    f"no {shown[field_name]} to use as the query"
                    + (" (the file has no description column)" if topics_kind == "tsv" else ""),
                    position=f"line {topic.line}",
                    query_id=topic.qid,
                    field=field_name,
                )
            )
            continue
        dataset.entries.append(({"id": topic.qid, "query": query, "supports": supports}, topic.line))
    if unjudged:
        dataset.warnings.append(
            f"{path}: {unjudged} quer{'y has' if unjudged == 1 else 'ies have'} no judgments in "
            f"{qrels_path.name}: left out of the golden set (as BEIR does)"
        )
