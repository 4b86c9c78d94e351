"""Recording golden queries from live search (``kebab-eval golden record``): everything but the
terminal.

A session asks a question, shows the system's hits, and turns the user's answers into one
canonical query: :func:`parse_selection` reads which hits are relevant (``1 3``, ``1-3``, ``all``,
``none``), :func:`hit_support` makes each chosen hit an anchor (its path, heading path and line
span, as the hit carries them), :func:`build_entry` the query, :func:`generated_id` its id.
:class:`RecordFile` is the ``--out`` file: validated when opened, and appended to one entry at a
time — the whole new file checked by the golden loader and written atomically, the existing bytes
kept as they are where the format allows (YAML block lists, JSONL).

Hits are read by attribute only (``doc_path``, ``doc_id``, ``heading_path``, ``line_start``,
``line_end``, ``chunk_id``, ``snippet``): this layer sits below the systems' contract.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml

from kebab_eval_pipeline.foundation import atomic
from kebab_eval_pipeline.foundation.errors import InputError, Offender
from kebab_eval_pipeline.foundation.yaml_io import id_problem, parse_json_checked, parse_yaml, read_text
from kebab_eval_pipeline.golden.convert import query_document, render_canonical, yaml_text
from kebab_eval_pipeline.golden.model import GoldenQuery, GoldenSet, Support
from kebab_eval_pipeline.golden.readers.canonical import TOP_LEVEL_KEYS
from kebab_eval_pipeline.golden.syntax import SYNTAXES
from kebab_eval_pipeline.golden.validate import validate_queries

#: What the relevance prompt accepts, said once for every message that needs it.
SELECTION_HELP = "type the numbers of the relevant hits (1 3, 1-3, 1,4-5), all, or none"
ID_PREFIX = "q-"
_GENERATED = re.compile(rf"{re.escape(ID_PREFIX)}(\d{{1,9}})")
_TOKEN = re.compile(r"(\d{1,9})(?:-(\d{1,9}))?")


class SelectionError(ValueError):
    """What the user typed at the relevance prompt is not a selection; the message says why."""


class HitLike(Protocol):
    """The fields of a hit a support is made of (``contract.Hit`` has them all)."""

    doc_path: str | None
    doc_id: str | None
    heading_path: Sequence[str]
    line_start: int | None
    line_end: int | None
    chunk_id: str | None
    snippet: str


def parse_selection(text: str, n_hits: int) -> tuple[int, ...]:
    """The hit numbers (1-based ranks) ``text`` names, ascending and without repeats.

    Accepted: numbers and ranges separated by spaces or commas (``1 3``, ``1-3``, ``1,4-5``),
    ``all`` (every shown hit) and ``none`` (no hit: ``()``), case-insensitive. Raises
    :class:`SelectionError` — the message is shown and the prompt repeated — for empty text,
    anything else, a reversed range or a number outside ``1..n_hits``."""
    words = text.strip().lower()
    if not words:
        raise SelectionError(f"nothing typed: {SELECTION_HELP}")
    if words == "none":
        return ()
    if words == "all":
        return tuple(range(1, n_hits + 1))
    chosen: set[int] = set()
    for token in re.split(r"[\s,]+", words):
        if not token:
            continue
        match = _TOKEN.fullmatch(token)
        if match is None:
            raise SelectionError(f"{token!r} is not a hit number or range: {SELECTION_HELP}")
        first = int(match[1])
        last = int(match[2]) if match[2] is not None else first
        if last < first:
            raise SelectionError(f"{token!r}: a range goes up ({last}-{first}?)")
        if first < 1 or last > n_hits:
            shown = f"1-{n_hits}" if n_hits > 1 else "1" if n_hits == 1 else "none"
            raise SelectionError(f"{token!r}: no such hit (shown: {shown})")
        chosen.update(range(first, last + 1))
    if not chosen:
        raise SelectionError(f"nothing typed: {SELECTION_HELP}")
    return tuple(sorted(chosen))


def parse_yes_no(text: str) -> bool | None:
    """``y``/``yes`` → True, ``n``/``no`` → False (case-insensitive); anything else → None."""
    word = text.strip().lower()
    return True if word in ("y", "yes") else False if word in ("n", "no") else None


def parse_tags(text: str) -> list[str]:
    """Tags typed comma- or space-separated, in their order, each once."""
    return list(dict.fromkeys(t for t in re.split(r"[\s,]+", text.strip()) if t))


def hit_support(hit: HitLike) -> Support:
    """The anchor a chosen hit becomes: its ``doc_path`` as ``rel_path`` (else its ``doc_id``), its
    heading path and line span — whatever the hit carries, copied as it is. A hit that names no
    document also gives its ``chunk_id`` (else its snippet), so the support still names evidence."""
    fields: dict[str, Any] = {}
    if hit.doc_path:
        fields["rel_path"] = hit.doc_path
    elif hit.doc_id:
        fields["doc_id"] = hit.doc_id
    if hit.heading_path:
        fields["heading_path"] = list(hit.heading_path)
    if hit.line_start is not None:
        fields["line_start"] = hit.line_start
    if hit.line_end is not None:
        fields["line_end"] = hit.line_end
    if not (hit.doc_path or hit.doc_id):
        if hit.chunk_id:
            fields["chunk_id"] = hit.chunk_id
        elif not fields and hit.snippet:
            fields["snippet"] = hit.snippet
    return Support(**fields)


def build_entry(
    qid: str,
    question: str,
    hits: Sequence[HitLike],
    selection: Sequence[int],
    answerable: bool = True,
    category: str = "",
    tags: Sequence[str] = (),
) -> GoldenQuery:
    """One canonical query: the question, a support per selected hit (1-based ranks into ``hits``,
    in rank order), and the labels. Unanswerable means no supports (a selection is then an error,
    ``ValueError``); an empty category is the default (``general``). Raises ``ValueError`` naming
    every problem the golden checks find (a hit with a bad line range, an id with whitespace)."""
    if not answerable and selection:
        raise ValueError("an unanswerable question has no supports: select none")
    supports = [hit_support(hits[rank - 1]) for rank in selection]
    query = GoldenQuery(
        id=qid,
        query=question.strip(),
        answerable=answerable,
        category=category.strip() or "general",
        tags=list(tags),
        supports=supports,
    )
    problems = validate_queries([query], lambda i: ("<entry>", None))
    if problems:
        raise ValueError("; ".join(f"{p.field or 'entry'}: {p.reason}" for p in problems))
    return query


def generated_id(used: Collection[str]) -> str:
    """The next ``q-NNNN`` id: one past the highest ``q-`` number in ``used``, skipping any id in
    ``used`` (``q-0001`` for a set without such ids)."""
    numbers = [int(m[1]) for u in used if (m := _GENERATED.fullmatch(u))]
    n = max(numbers, default=0) + 1
    while f"{ID_PREFIX}{n:04d}" in used:
        n += 1
    return f"{ID_PREFIX}{n:04d}"


def typed_id_problem(qid: str, used: Collection[str]) -> str | None:
    """Why a typed id cannot be used (whitespace or control characters, already in the file), or None."""
    problem = id_problem(qid, query_id=True)
    if problem is not None:
        return f"the id {problem}"
    if qid in used:
        return f"{qid!r} is already in the file"
    return None


def out_problem(path: Path) -> str | None:
    """Why ``path`` cannot be the file a session writes, or None: a suffix the canonical format
    has no writer for, a folder or device in its place, a file or folder that cannot be written
    (a missing parent folder is fine: it is made on the first write)."""
    if path.suffix not in SYNTAXES:
        return f"use {', '.join(SYNTAXES)}"
    if path.exists() or path.is_symlink():
        if path.is_dir():
            return "is a folder"
        if not path.is_file():
            return "is not a regular file"
        if not _writable(path):
            return "is not writable"
    folder = path.absolute().parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        return f"{folder} is not a folder"
    if not _writable(folder):
        return f"cannot write in {folder}"
    return None


def _writable(path: Path) -> bool:
    return os.access(path, os.W_OK | (os.X_OK if path.is_dir() else 0))


class RecordConflict(InputError):
    """The ``--out`` file changed under the session (another program wrote it): nothing is written."""


@dataclass
class RecordFile:
    """The golden file a session appends to.

    ``text`` is its content as last read or written (None: no file yet, or a blank one);
    ``queries`` its queries; ``indent`` the column of the items of a YAML file's ``queries`` list
    when an entry can be added after the existing bytes (the list is the document's last key and
    a non-empty block list), else None. JSONL files and new files are appended to as well; any
    other file is written again in the canonical layout with each entry (:attr:`in_place`)."""

    path: Path
    text: str | None
    name: str
    queries: list[GoldenQuery]
    warnings: list[str] = field(default_factory=list)
    indent: int | None = None

    @classmethod
    def open(cls, path: Path) -> RecordFile:
        """Read and validate ``path`` (absent or blank: an empty set named after the file).

        Raises :class:`InputError` (exit 2) naming the file, position and reason when the file
        cannot be written (:func:`out_problem`), is not a valid golden set, or is not in the
        canonical format (appending canonical entries would mix two formats)."""
        from kebab_eval_pipeline.golden.load import load_golden

        problem = out_problem(path)
        if problem is not None:
            raise InputError("cannot record into this file", [Offender(str(path), problem, field="--out")])
        text = read_text(path, "golden set") if path.exists() else None
        if text is None or not text.strip():
            return cls(path, None, path.stem, [])
        try:
            loaded = load_golden(path)
        except InputError:
            # A set with no queries yet is a valid start here (the loader refuses an empty set).
            doc = None if path.suffix == ".jsonl" else cls._parse(path, text)
            if isinstance(doc, dict) and doc.get("queries") in ([], None) and set(doc) <= TOP_LEVEL_KEYS:
                return cls(path, text, str(doc.get("name") or path.stem), [])
            raise
        if loaded.format != "canonical":
            raise InputError(
                "cannot record into this file",
                [
                    Offender(
                        str(path),
                        f"it is in the {loaded.format} format and a session appends canonical entries: "
                        "convert it first (kebab-eval golden convert FILE --to canonical --out NEW.yaml)",
                        field="--out",
                    )
                ],
            )
        indent = _list_indent(text) if path.suffix in (".yaml", ".yml") else None
        return cls(path, text, loaded.name, list(loaded.golden.queries), list(loaded.warnings), indent)

    @staticmethod
    def _parse(path: Path, text: str) -> Any:
        if path.suffix == ".json":
            return parse_json_checked(text, path, "golden set")
        from kebab_eval_pipeline.golden.load import TYPED_KEYS

        return parse_yaml(text, path, "golden set", TYPED_KEYS)

    def ids(self) -> set[str]:
        return {q.id for q in self.queries}

    def next_id(self) -> str:
        return generated_id(self.ids())

    @property
    def in_place(self) -> bool:
        """Whether the next entry is added after the existing bytes (else the file is written again)."""
        return self.text is None or self.path.suffix == ".jsonl" or self.indent is not None

    def _candidate(self, query: GoldenQuery) -> str:
        """The file's next text: ``query`` after the existing bytes where :attr:`in_place`, else
        every query in the canonical layout."""
        suffix = self.path.suffix
        if self.text is None:
            return render_canonical(GoldenSet(name=self.name, queries=[query]), suffix)
        sep = "" if self.text.endswith("\n") else "\n"
        if suffix == ".jsonl":
            return self.text + sep + render_canonical(GoldenSet(queries=[query]), ".jsonl")
        if self.indent is not None:
            return self.text + sep + _yaml_item(query, self.indent)
        return self._rendered(query)

    def _rendered(self, query: GoldenQuery) -> str:
        return render_canonical(GoldenSet(name=self.name, queries=[*self.queries, query]), self.path.suffix)

    def _reads_back(self, candidate: str, query: GoldenQuery) -> bool:
        """Whether ``candidate`` loads (golden loader, every check) as this file's queries, in
        order, then ``query``, under the same name. Earlier queries are compared by id (their
        bytes are unchanged, or rendered losslessly), the last one and the new one field by field."""
        from kebab_eval_pipeline.golden.load import load_golden
        from kebab_eval_pipeline.golden.tables import golden_from_tables

        with tempfile.TemporaryDirectory(prefix="kebab-record-") as tmp:
            probe = Path(tmp) / self.path.name
            probe.write_text(candidate, encoding="utf-8")
            try:
                loaded = load_golden(probe, fmt="canonical")
            except InputError:
                return False
        queries, supports = loaded.tables()
        ids = queries["query_id"].tolist()
        if ids != [q.id for q in self.queries] + [query.id] or loaded.name != (self.name or probe.stem):
            return False
        # Text added at the end can change only the query before it (a trailing scalar): that one
        # and the new one are compared field by field.
        tail = [*self.queries[-1:], query]
        shown = golden_from_tables(
            queries.iloc[-len(tail) :], supports[supports["query_id"].isin([q.id for q in tail])]
        )
        return shown.queries == tail

    def append(self, query: GoldenQuery) -> bool:
        """Append ``query`` and write the file atomically; returns whether the existing bytes were
        kept (else the file was written again in the canonical layout).

        Before anything is written: the file on disk must still be what the session last read or
        wrote (:class:`RecordConflict` otherwise), ``query``'s id must be new (``ValueError``), and
        the new text must load with the golden loader as the old queries plus ``query`` (an
        in-place append that would not is written as a whole instead; if that fails too,
        ``RuntimeError``: a bug, nothing written). A kill at any moment leaves the old file or the
        new one, never half of one."""
        on_disk = read_text(self.path, "golden set") if self.path.exists() else None
        if on_disk is not None and not on_disk.strip():
            on_disk = None  # a blank file is no file (see open)
        if on_disk != self.text:
            raise RecordConflict(
                "the golden file changed during the session",
                [
                    Offender(
                        str(self.path),
                        "another program wrote it since the session last did: this entry is not "
                        "written (it is shown above); start a new session to go on",
                        field="--out",
                    )
                ],
            )
        if query.id in self.ids():
            raise ValueError(f"the id {query.id!r} is already in {self.path}")
        candidate, in_place = self._candidate(query), self.in_place
        if not self._reads_back(candidate, query):
            candidate, in_place = self._rendered(query), False
            if not self._reads_back(candidate, query):
                raise RuntimeError(f"the appended file would not read back as written: {self.path}")
        atomic.write_text(self.path, candidate)
        if self.text is None or not in_place:  # a layout of our own now: where its list items sit
            self.indent = _list_indent(candidate) if self.path.suffix in (".yaml", ".yml") else None
        self.text = candidate
        self.queries = [*self.queries, query]
        return in_place


def _list_indent(text: str) -> int | None:
    """The column of the items of ``queries`` when it is the last key of the document's top
    mapping and a non-empty block list (so text added at the end can only extend it); else None."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # positions only: libyaml when present
    try:
        root = yaml.compose(text, Loader=loader)
    except yaml.YAMLError:
        return None
    if not isinstance(root, yaml.MappingNode) or not root.value:
        return None
    key, node = root.value[-1]
    if getattr(key, "value", None) != "queries" or not isinstance(node, yaml.SequenceNode):
        return None
    if node.flow_style or not node.value:
        return None
    return node.start_mark.column


def _yaml_item(query: GoldenQuery, indent: int) -> str:
    """``query`` as one block-list item, its lines indented by ``indent`` columns."""
    document = query_document(query)
    item = yaml_text([document])
    pad = " " * indent
    return "".join(pad + line if line.strip() else line for line in item.splitlines(keepends=True))
