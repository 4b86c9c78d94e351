"""Load golden sets: detect the format, map to the canonical model, validate, hash.

Nothing is partially loaded: any problem in any file raises one
:class:`InputError` listing every offender.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from kebab_eval_pipeline.errors import InputError, Offender
from kebab_eval_pipeline.golden.model import SCHEMA_VERSION, GoldenQuery, GoldenSet
from kebab_eval_pipeline.golden.readers import RawQuery, canonical, kebab
from kebab_eval_pipeline.golden.validate import validate_queries
from kebab_eval_pipeline.yaml_io import YamlPositions, parse_json, parse_yaml, read_text

PARSER_VERSION = "golden-1"
FORMATS = ("auto", "kebab", "canonical")
GOLDEN_SUFFIXES = (".yaml", ".yml", ".json", ".jsonl")
_READERS = {"canonical": canonical, "kebab": kebab}


@dataclass
class LoadedGolden:
    """A validated golden set plus what loading it noticed."""

    golden: GoldenSet
    files: list[str]
    warnings: list[str] = field(default_factory=list)


def _expand(paths: Sequence[str | Path]) -> list[Path]:
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(f for f in p.rglob("*") if f.is_file() and f.suffix in GOLDEN_SUFFIXES)
            if not found:
                raise InputError(
                    "golden folder holds no golden files", [Offender(str(p), "no *.yaml/*.json/*.jsonl")]
                )
            files += found
        else:
            files.append(p)
    return files


def _parse(path: Path, text: str) -> Any:
    if path.suffix == ".jsonl":
        # One canonical query per line; blank lines are allowed.
        docs = []
        for n, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                docs.append((n, parse_json(line, path, "golden set") if line.strip() else None))
        return {"__jsonl__": docs}
    if path.suffix == ".json":
        return parse_json(text, path, "golden set")
    return parse_yaml(text, path, "golden set")


def _detect(doc: Any, path: Path, fmt: str) -> str:
    if fmt != "auto":
        return fmt
    for name, reader in _READERS.items():
        if reader.looks_like(doc):
            return name
    kind = type(doc).__name__ if doc is not None else "an empty document"
    raise InputError(
        "cannot tell the golden set's format",
        [
            Offender(
                str(path),
                f"top level is {kind}; expected a canonical mapping with 'queries' or a kebab "
                "list of queries with 'expected_doc_ids' (use --format to say which)",
            )
        ],
    )


def _check_schema_version(doc: Any, path: Path, warnings: list[str]) -> None:
    if not isinstance(doc, dict) or "schema_version" not in doc:
        return
    raw = str(doc["schema_version"])
    major, _, minor = raw.partition(".")
    ours_major, _, ours_minor = SCHEMA_VERSION.partition(".")
    if not major.isdigit():
        raise InputError(
            "golden set is invalid", [Offender(str(path), f"schema_version {raw!r} is not a version")]
        )
    if int(major) > int(ours_major):
        raise InputError(
            "golden set is newer than this tool",
            [
                Offender(
                    str(path),
                    f"schema_version {raw} has major {major}; this tool reads {SCHEMA_VERSION}",
                    field="schema_version",
                )
            ],
        )
    if int(major) == int(ours_major) and minor.isdigit() and int(minor) > int(ours_minor or 0):
        warnings.append(f"{path}: schema_version {raw} is newer than {SCHEMA_VERSION}; loading what is known")


def _raw_queries(path: Path, text: str, doc: Any, fmt: str, warnings: list[str]) -> list[RawQuery]:
    if isinstance(doc, dict) and "__jsonl__" in doc:
        return [RawQuery(fields=d, key_path=[], line=n) for n, d in doc["__jsonl__"]]
    fmt = _detect(doc, path, fmt)
    _check_schema_version(doc, path, warnings)
    try:
        items, unknown = _READERS[fmt].read(doc)
    except (TypeError, AttributeError, KeyError) as exc:
        raise InputError(
            f"golden set does not have the {fmt} format's shape", [Offender(str(path), str(exc))]
        ) from None
    if unknown:
        warnings.append(f"{path}: unknown fields ignored: {', '.join(unknown)}")
    return items


def _position(raw: RawQuery, key_path: list, positions: YamlPositions | None) -> str | None:
    if raw.line is not None:
        return f"line {raw.line}"
    if positions is not None:
        line = positions.line_of(key_path)
        if line:
            return f"line {line}"
    return "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in key_path).lstrip(".") or None


def _combine(digests: list[tuple[str, str]]) -> str:
    if len(digests) == 1:
        return digests[0][1]
    return hashlib.sha256("".join(f"{n}\0{d}\n" for n, d in digests).encode()).hexdigest()


def golden_content_sha256(paths: str | Path | Sequence[str | Path]) -> str:
    """The content hash ``load_golden`` would record, without parsing (for change detection)."""
    files = _expand([paths] if isinstance(paths, str | Path) else paths)
    return _combine([(f.name, hashlib.sha256(f.read_bytes()).hexdigest()) for f in files])


def load_golden(paths: str | Path | Sequence[str | Path], fmt: str = "auto") -> LoadedGolden:
    """Load one or more golden files (or folders of them) as one validated :class:`GoldenSet`.

    ``fmt`` is ``auto`` (sniffed from content) or one of :data:`FORMATS`. The set's
    ``sha256`` is the file's content hash (several files: a hash over their names and hashes).
    Raises :class:`InputError` listing every offender; never returns a partial set.
    """
    if fmt not in FORMATS:
        raise InputError("unknown golden format", [Offender(str(paths), f"{fmt!r} is not one of {FORMATS}")])
    files = _expand([paths] if isinstance(paths, str | Path) else paths)
    warnings: list[str] = []
    queries: list[GoldenQuery] = []
    sources: list[tuple[str, RawQuery, YamlPositions | None]] = []
    offenders: list[Offender] = []
    digests: list[tuple[str, str]] = []
    detected: set[str] = set()
    name = ""
    for path in files:
        text = read_text(path, "golden set")
        digests.append((path.name, hashlib.sha256(path.read_bytes()).hexdigest()))
        doc = _parse(path, text)
        if isinstance(doc, dict) and "__jsonl__" not in doc:
            name = name or str(doc.get("name") or "")
        detected.add("canonical" if isinstance(doc, dict) and "__jsonl__" in doc else _detect(doc, path, fmt))
        # Positions are looked up only for offenders: composing YAML is slow on large sets.
        positions = YamlPositions(text) if path.suffix in (".yaml", ".yml") else None
        for raw in _raw_queries(path, text, doc, fmt, warnings):
            qid = raw.fields.get("id") if isinstance(raw.fields, dict) else None
            try:
                queries.append(GoldenQuery.model_validate(raw.fields))
                sources.append((str(path), raw, positions))
            except ValidationError as exc:
                for err in exc.errors():
                    field_name = ".".join(str(p) for p in err["loc"]) or None
                    reason = "unknown field" if err["type"] == "extra_forbidden" else err["msg"]
                    where = _position(raw, [*raw.key_path, *err["loc"]], positions)
                    offenders.append(
                        Offender(
                            str(path),
                            reason,
                            position=where,
                            query_id=None if qid is None else str(qid),
                            field=field_name,
                        )
                    )

    def source_of(i: int) -> tuple[str, str | None]:
        file, raw, positions = sources[i]
        return file, _position(raw, raw.key_path, positions)

    offenders += validate_queries(queries, source_of)
    if not queries and not offenders:
        offenders.append(Offender(", ".join(map(str, files)), "golden set holds no queries"))
    if offenders:
        raise InputError("golden set is invalid", offenders)
    sha = _combine(digests)
    golden = GoldenSet(
        name=name or files[0].stem,
        source=", ".join(str(f) for f in files),
        format="+".join(sorted(detected)),
        sha256=sha,
        queries=queries,
    )
    return LoadedGolden(golden=golden, files=[str(f) for f in files], warnings=warnings)
