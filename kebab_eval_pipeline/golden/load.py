"""Load golden sets: detect the format, map to the canonical model, validate, hash.

Nothing is partially loaded: any problem in any file raises one
:class:`InputError` listing every offender (file, position, query id, field,
reason). Unknown fields are warnings, aggregated per file and field — except in the canonical
format, whose unknown query and support fields are errors (ignoring them would drop data).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from kebab_eval_pipeline.foundation.errors import InputError, Offender
from kebab_eval_pipeline.foundation.gc_pause import gc_paused
from kebab_eval_pipeline.foundation.limits import check_regular
from kebab_eval_pipeline.foundation.yaml_io import (
    TOP,
    YamlPositions,
    duplicate_offenders,
    json_duplicates,
    json_loads,
    may_have_duplicate_keys,
    may_hold_surrogates,
    parse_json_checked,
    parse_yaml,
    read_text_and_sha256,
    surrogate_paths,
)
from kebab_eval_pipeline.golden.columns import GoldenColumns
from kebab_eval_pipeline.golden.datasets import (
    DATASET_FORMATS,
    DatasetOptions,
    beir_files,
    is_beir_folder,
    read_dataset,
    sniff,
)
from kebab_eval_pipeline.golden.formats import FORMATS, LINE_READERS, READERS
from kebab_eval_pipeline.golden.model import SCHEMA_VERSION, GoldenQuery, GoldenSet
from kebab_eval_pipeline.golden.readers import CANONICAL_TYPED_KEYS, EntryError, RawQuery
from kebab_eval_pipeline.golden.syntax import SYNTAXES, syntax_of
from kebab_eval_pipeline.golden.validate import QueryChecks

if TYPE_CHECKING:
    import pandas as pd

GOLDEN_PARSER_VERSION = "golden-2"
#: The keys whose unquoted YAML values are numbers or bools, in any golden format; every other
#: unquoted value is read as the text written (ids: ``010`` stays "010", never 8).
TYPED_KEYS = CANONICAL_TYPED_KEYS.union(*(getattr(r, "TYPED_KEYS", ()) for r in READERS.values()))


@dataclass
class LoadedGolden:
    """A validated golden set, plus what loading it noticed.

    Held as table columns (:class:`GoldenColumns`), never as a model per query (a million
    queries as pydantic models took gigabytes); :attr:`golden` rebuilds the model on demand for
    the commands that need it (conversion, checks on small sets)."""

    columns: GoldenColumns | None  # None once turned into tables (see tables())
    name: str
    source: str
    format: str
    sha256: str
    files: list[str]
    warnings: list[str] = field(default_factory=list)
    schema_version: str = SCHEMA_VERSION
    _tables: tuple[pd.DataFrame, pd.DataFrame] | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.columns) if self.columns is not None else len(self.tables()[0])

    def tables(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        """The (queries, supports) tables, built once; the column lists are let go then (a
        parse kept for the run holds each value once, in the tables). Callers must not modify
        the frames in place (copy first)."""
        if self._tables is None:
            assert self.columns is not None
            self._tables = (self.columns.queries_frame(), self.columns.supports_frame())
            self.columns = None
        return self._tables

    @cached_property
    def golden(self) -> GoldenSet:
        fields = {
            "name": self.name,
            "source": self.source,
            "format": self.format,
            "sha256": self.sha256,
            "schema_version": self.schema_version,
        }
        # Straight from the column lists while they are held (small sets): building the typed
        # tables only to read them back cost ~80% of loading a small set as a model.
        if self.columns is not None and (golden := self.columns.golden(**fields)) is not None:
            return golden
        from kebab_eval_pipeline.golden.tables import golden_from_tables

        return golden_from_tables(*self.tables(), **fields)


@dataclass
class _FileState:
    """One file's parse: its entries, the format used, and where things are."""

    path: Path
    fmt: str = ""
    raws: Iterable[RawQuery] = field(default_factory=list)  # JSONL: read as consumed
    positions: YamlPositions | None = None
    name: str = ""
    unknown: dict[str, list] = field(default_factory=dict)  # field → [count, first position, first id]

    def position(self, raw: RawQuery, extra: Sequence = (), at_key: bool = False) -> str | None:
        """Where ``raw`` (and ``extra`` keys inside it) stands: its line, else the line of the key
        path in the YAML (``at_key``: the key's own line, not its value's), else the dotted path."""
        if raw.line is not None:
            return f"line {raw.line}"
        key_path = [*raw.key_path, *extra]
        if self.positions is not None:
            line = self.positions.line_of(key_path, at_key=at_key)
            if line:
                return f"line {line}"
        return "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in key_path).lstrip(".") or TOP


_SURROGATE = "holds a lone surrogate (an unpaired \\ud800-\\udfff escape): not text any file can store"


def _expand(paths: Sequence[str | Path], options: DatasetOptions | None = None) -> list[Path]:
    files: list[Path] = []
    for p in map(Path, paths):
        if is_beir_folder(p):  # queries.jsonl + qrels/<split>.tsv, not every JSONL file in it
            files += beir_files(p, (options or DatasetOptions()).split)
        elif p.is_dir():
            found = sorted(f for f in p.rglob("*") if f.is_file() and f.suffix in SYNTAXES)
            if not found:
                raise InputError(
                    "golden folder holds no golden files", [Offender(str(p), "no *.yaml/*.json/*.jsonl")]
                )
            files += found
        else:
            files.append(p)
    return files


def _check_schema_version(doc: Any, path: Path, warnings: list[str]) -> list[Offender]:
    if not isinstance(doc, dict) or "schema_version" not in doc:
        return []
    raw = _text(doc["schema_version"], 50)
    major, _, minor = raw.partition(".")
    ours_major, _, ours_minor = SCHEMA_VERSION.partition(".")
    where = {"position": TOP, "field": "schema_version"}
    if not re.fullmatch(r"[0-9]{1,6}", major) or (
        minor and not re.fullmatch(r"[0-9]{1,6}(\.[0-9]{1,6})?", minor)
    ):
        return [Offender(str(path), f"schema_version {raw!r} is not a version", **where)]
    if int(major) > int(ours_major):
        return [
            Offender(
                str(path),
                f"schema_version {raw} is newer than this tool's {SCHEMA_VERSION}: upgrade "
                "kebab-eval-pipeline to read it",
                **where,
            )
        ]
    if int(major) == int(ours_major) and minor and int(minor.split(".")[0]) > int(ours_minor or 0):
        warnings.append(
            f"{path}: schema_version {raw} is newer than {SCHEMA_VERSION}; loading the fields it knows"
        )
    return []


def _sniff(doc: Any) -> str | None:
    for name, reader in READERS.items():
        if reader.looks_like(doc):
            return name
    return None


def _text(value: Any, limit: int = 200) -> str:
    """A value as short text for messages; containers by type only (a 1,000-level nested list
    would exhaust the recursion limit in ``str``)."""
    if isinstance(value, str | int | float | bool):
        return str(value)[:limit]
    return f"<{type(value).__name__}>"


def _parse_line(state: _FileState, line: str, n: int) -> tuple[Any, Offender | None, list]:
    """One JSONL line: (its value, the offender when it is not JSON, the keys it writes twice)."""
    try:
        entry = json_loads(line)
    except json.JSONDecodeError as exc:  # list every bad line, not just the first
        return (
            None,
            Offender(str(state.path), f"invalid JSON: {exc.msg}", position=f"line {n}, column {exc.colno}"),
            [],
        )
    except (ValueError, RecursionError) as exc:  # e.g. an integer beyond the 4300-digit limit
        return (
            None,
            Offender(str(state.path), f"invalid JSON: a value cannot be read ({exc})", position=f"line {n}"),
            [],
        )
    duplicates = json_duplicates(line, n) if may_have_duplicate_keys(line, entry) else []
    return entry, None, duplicates


def _read_jsonl(state: _FileState, text: str, fmt: str, early: tuple[list[Offender], list[Offender]]) -> None:
    """Set ``state.raws`` to the file's entries, parsed one line at a time as they are consumed (a
    million-line set is never held as a million parsed entries), and ``state.fmt``. Lines that are
    not JSON go to ``early[0]``, lines writing a key twice to ``early[1]`` (and are left out)."""
    # Only "\n" ends a JSONL record: str.splitlines() would also split inside strings at U+2028 & co.
    lines = text.split("\n")
    if fmt != "auto":
        state.fmt = fmt
    else:  # from the first entry that is an object (and writes no key twice)
        first = None
        for n, line in enumerate(lines, start=1):
            if line.strip():
                entry, bad, duplicates = _parse_line(state, line, n)
                if bad is None and not duplicates and isinstance(entry, dict):
                    first = entry
                    break
        state.fmt = next(
            (name for name in LINE_READERS if first is not None and READERS[name].looks_like_line(first)),
            "canonical",
        )
    state.raws = _jsonl_raws(state, lines, early)


def _jsonl_raws(state: _FileState, lines: list[str], early: tuple[list[Offender], list[Offender]]):
    not_json, twice = early
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        lines[n - 1] = ""  # read: its text is let go with its entry
        entry, bad, duplicates = _parse_line(state, line, n)
        if bad is not None:
            not_json.append(bad)
        elif duplicates:
            twice += duplicate_offenders(str(state.path), duplicates)
        else:
            yield RawQuery(fields=entry, key_path=[], line=n)


def _read_document(
    state: _FileState, text: str, fmt: str, offenders: list[Offender], warnings: list[str], syntax: str
) -> None:
    path = state.path
    doc: Any = None
    if syntax == "json-or-yaml":  # a name that says nothing, text opening like JSON
        try:
            doc, syntax = parse_json_checked(text, path, "golden set"), "json"
        except InputError:  # not JSON (a comment, a YAML flow mapping): YAML, a superset, says why
            syntax = "yaml"
    elif syntax == "json":
        doc = parse_json_checked(text, path, "golden set")
    if syntax == "yaml":
        doc = parse_yaml(text, path, "golden set", TYPED_KEYS)
        state.positions = YamlPositions(text)  # composed lazily, only if an offender needs a line
    if doc is None:
        offenders.append(Offender(str(path), "empty document: no queries", position=TOP))
        return
    state.fmt = fmt if fmt != "auto" else (_sniff(doc) or "")
    if not state.fmt:
        kind = type(doc).__name__
        offenders.append(
            Offender(
                str(path),
                f"cannot tell the format (top level is a {kind}): expected a mapping with 'queries' "
                "(canonical, ckv, support-anchor) or a list of queries (kebab, support-anchor, WFGY); "
                "use --format to say which",
                position=TOP,
            )
        )
        return
    version_problems = _check_schema_version(doc, path, warnings)
    if version_problems:
        offenders += version_problems
        return
    if isinstance(doc, dict):
        name = doc.get("name")
        if name is not None and not isinstance(name, str | int | float):
            offenders.append(
                Offender(str(path), f"must be text, got {type(name).__name__}", position=TOP, field="name")
            )
            return
        state.name = _text(name or "")
    try:
        items, unknown_top = READERS[state.fmt].entries(doc)
    except (TypeError, KeyError, AttributeError, IndexError):
        offenders.append(Offender(str(path), f"does not have the {state.fmt} format's shape", position=TOP))
        return
    if unknown_top:
        warnings.append(f"{path}: unknown top-level fields ignored: {', '.join(map(str, unknown_top))}")
    state.raws = [RawQuery(fields=entry, key_path=key_path) for key_path, entry in items]


def _map_entry(state: _FileState, raw: RawQuery, offenders: list[Offender]) -> dict | None:
    """The entry's canonical fields, or None after recording why it cannot be mapped."""
    entry = raw.fields
    if not isinstance(entry, dict):
        offenders.append(
            Offender(
                str(state.path),
                f"a query entry must be a mapping, got {type(entry).__name__}",
                position=state.position(raw),
            )
        )
        return None
    qid = entry.get("id", entry.get("qid"))
    qid = None if qid is None else _text(qid)
    if state.fmt in DATASET_FORMATS:  # read into canonical fields by golden.datasets
        return entry
    try:
        fields, unknown = READERS[state.fmt].to_canonical(entry)
    except EntryError as exc:
        offenders.append(
            Offender(str(state.path), str(exc), position=state.position(raw), query_id=qid, field=exc.field)
        )
        return None
    except (TypeError, ValueError, AttributeError, KeyError, IndexError) as exc:
        offenders.append(
            Offender(
                str(state.path),
                f"cannot read this {state.fmt} entry: {exc}",
                position=state.position(raw),
                query_id=qid,
            )
        )
        return None
    if unknown and getattr(READERS[state.fmt], "UNKNOWN_FIELDS_ARE_ERRORS", False):
        offenders += [_unknown_key(state, raw, str(name), qid) for name in unknown]
        return None
    for name in unknown:
        seen = state.unknown.setdefault(str(name), [0, state.position(raw), qid])
        seen[0] += 1
    return fields


def _validation_reason(err: Any) -> str:
    """A pydantic error as a user reads it: text fields given something else say to quote it (an
    unquoted ``null`` or ``~`` is YAML's empty value, a JSON number is not text)."""
    if err["type"] == "string_type":
        value = err.get("input")
        if value is None:
            return (
                "no value: an unquoted null, ~ or nothing is YAML's empty value; write the text "
                "(quote it if it is 'null' or '~')"
            )
        return f"expected text, got the {type(value).__name__} {_text(value, 50)}: quote it"
    if err["type"] == "missing" and tuple(err["loc"]) == ("id",):
        return (
            "missing: every query needs an id (an unquoted null or ~ is no value: quote it to use it "
            "as the id)"
        )
    return err["msg"].removeprefix("Value error, ")  # pydantic's prefix: noise


_SUPPORT_KEY = re.compile(r"supports\[(\d+)\]\.(.*)", re.S)


def _unknown_key(state: _FileState, raw: RawQuery, name: str, qid: str | None) -> Offender:
    """An unknown query/support key of a strict reader (canonical), at the key's own line, with the
    format it belongs to or the known field it is close to."""
    # Canonical unknowns are a query key, or "supports[j].key" (a key may itself hold "." or "[").
    nested = None if name in raw.fields else _SUPPORT_KEY.fullmatch(name)
    path: list[str | int] = ["supports", int(nested[1]), nested[2]] if nested else [name]
    key = str(path[-1])
    reader = READERS[state.fmt]
    foreign = getattr(reader, "FOREIGN_KEYS", {}).get(key)
    if foreign is not None:
        hint = f"'{key}' belongs to the {foreign} format: read the file with --format {foreign}"
    else:
        from kebab_eval_pipeline.foundation.config_suggest import suggestion
        from kebab_eval_pipeline.golden.readers import QUERY_FIELDS, SUPPORT_FIELDS

        known = SUPPORT_FIELDS if len(path) > 1 else QUERY_FIELDS
        close = suggestion(key, sorted(known))  # the same rule as a run config's unknown keys
        hint = f"did you mean '{close}'?" if close else f"known fields: {', '.join(sorted(known))}"
    return Offender(
        str(state.path),
        f"unknown key {name!r} in the {state.fmt} format (it would be dropped): {hint}",
        position=state.position(raw, path, at_key=True),
        query_id=qid,
        field=name,
    )


def load_golden(
    paths: str | Path | Sequence[str | Path], fmt: str = "auto", options: DatasetOptions | None = None
) -> LoadedGolden:
    """Load one or more golden files (or folders of them) as one validated :class:`GoldenSet`.

    ``fmt`` is ``auto`` (sniffed from each file's content) or one of :data:`FORMATS`. The set's
    ``sha256`` is the file's content hash (several files: a hash over their names and hashes).
    A standard IR dataset (a BEIR folder, or a queries/topics file with a qrels file: see
    :mod:`kebab_eval_pipeline.golden.datasets`) is read with ``options`` (split, query field).
    Raises :class:`InputError` listing every offender; never returns a partial set.
    """
    with gc_paused():  # millions of small objects, no cycles
        return _load_golden(paths, fmt, options or DatasetOptions())


def _load_golden(paths: str | Path | Sequence[str | Path], fmt: str, options: DatasetOptions) -> LoadedGolden:
    """See :func:`load_golden`."""
    if fmt not in FORMATS:
        raise InputError(
            "unknown golden format",
            [Offender(str(paths), f"{fmt!r} is not one of {', '.join(FORMATS)}", field="--format")],
        )
    files = _expand([paths] if isinstance(paths, str | Path) else paths, options)
    warnings: list[str] = []
    offenders: list[Offender] = []
    columns = GoldenColumns()
    # Where each tabled query stands: a JSONL line number, else its entry (for its key path).
    sources: list[tuple[_FileState, RawQuery | int]] = []

    def source_of(i: int) -> tuple[str, str | None]:
        state, where = sources[i]
        return str(state.path), f"line {where}" if isinstance(where, int) else state.position(where)

    # Meaning checks run as each query is validated (the model is then tabled and let go); their
    # offenders follow the schema offenders, as when every model was checked at the end.
    checks = QueryChecks(source_of)

    def consume(state: _FileState, surrogates: bool) -> None:
        """Validate and table every entry of ``state`` (its problems go to ``offenders``)."""
        path = state.path
        for raw in state.raws:
            if surrogates and (bad := surrogate_paths(raw.fields)):
                qid = raw.fields.get("id", raw.fields.get("qid")) if isinstance(raw.fields, dict) else None
                offenders.extend(
                    Offender(
                        str(path),
                        _SURROGATE,
                        position=state.position(raw),
                        query_id=None if qid is None else _text(qid),
                        field=name,
                    )
                    for name in bad
                )
                continue
            fields = _map_entry(state, raw, offenders)
            raw.fields = None  # its position is all that is needed of it from here on
            if fields is None:
                continue
            try:
                query = GoldenQuery.model_validate(fields)
            except ValidationError as exc:
                qid = fields.get("id")
                for err in exc.errors():
                    field_name = ".".join(str(p) for p in err["loc"]) or None
                    offenders.append(
                        Offender(
                            str(path),
                            _validation_reason(err),
                            position=state.position(raw, err["loc"]),
                            query_id=None if qid is None else _text(qid),
                            field=field_name,
                        )
                    )
                continue
            sources.append((state, raw.line if raw.line is not None else raw))
            checks.check(len(columns), query)
            columns.add(query)
        state.raws = []

    states: list[_FileState] = []
    digests: list[tuple[str, str]] = []
    dataset = (
        read_dataset(files, fmt, options)
        if fmt in DATASET_FORMATS or (fmt == "auto" and sniff(files))
        else None
    )
    for path in files if dataset is None else []:
        state = _FileState(path)
        states.append(state)
        # A JSONL file's unreadable lines and keys written twice, found as its lines are read, are
        # listed before its other offenders (in line order), as when the file was parsed up front.
        start, early = len(offenders), ([], [])
        try:  # a file that cannot be read or parsed is one offender; the other files still report
            # bounded: a 50 GB file, /dev/zero or a FIFO is refused, not loaded (or waited on)
            text, digest = read_text_and_sha256(path, "golden set")
            digests.append((path.name, digest))
            syntax = syntax_of(path, text)  # by name, else content: a JSONL file named gold.txt
            if syntax == "jsonl":
                _read_jsonl(state, text, fmt, early)
            else:
                _read_document(state, text, fmt, offenders, warnings, syntax)
        except InputError as exc:
            offenders += exc.offenders or [Offender(str(path), exc.summary, position=TOP)]
            continue
        surrogates = may_hold_surrogates(text)
        if surrogates and surrogate_paths(state.name):
            offenders.append(Offender(str(path), _SURROGATE, position=TOP, field="name"))
        consume(state, surrogates)
        offenders[start:start] = [*early[0], *early[1]]
        for name, (count, position, qid) in sorted(state.unknown.items()):
            where = f"{position}" + (f", query {qid!r}" if qid else "")
            warnings.append(
                f"{path}: unknown field {name!r} ignored in {count} quer{'y' if count == 1 else 'ies'} "
                f"(first at {where})"
            )
    if dataset is not None:
        state = _FileState(dataset.queries_path, fmt=dataset.fmt, name=dataset.name)
        state.raws = [RawQuery(fields=fields, key_path=[], line=line) for fields, line in dataset.entries]
        states.append(state)
        offenders += dataset.offenders
        warnings += dataset.warnings
        digests = dataset.digests
        consume(state, True)

    offenders += checks.finish()
    if not len(columns) and not offenders:
        offenders.append(Offender(", ".join(map(str, files)), "golden set holds no queries", position=TOP))
    if offenders:
        raise InputError("golden set is invalid", offenders)
    return LoadedGolden(
        columns=columns,
        name=next((s.name for s in states if s.name), "") or files[0].stem,
        source=", ".join(str(f) for f in files),
        format="+".join(sorted({s.fmt for s in states})),
        sha256=_combine(digests),
        files=[str(f) for f in files],
        warnings=warnings,
    )


def _combine(digests: list[tuple[str, str]]) -> str:
    if len(digests) == 1:
        return digests[0][1]
    return hashlib.sha256("".join(f"{n}\0{d}\n" for n, d in digests).encode()).hexdigest()


def golden_content_sha256(
    paths: str | Path | Sequence[str | Path], options: DatasetOptions | None = None
) -> str:
    """The content hash ``load_golden`` would record, without parsing (for change detection)."""
    files = _expand([paths] if isinstance(paths, str | Path) else paths, options)
    return _combine([(f.name, _file_sha256(f)) for f in files])


def _file_sha256(path: Path) -> str:
    # Streamed: sensors hash the golden file on every tick, and it may be far larger than memory.
    # A device or FIFO would stream forever or block: refused before it is opened.
    check_regular(path, "golden set")
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()
