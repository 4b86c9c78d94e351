"""Read a corpus folder into :class:`Document` objects (SPEC §4.1, ingest).

One document per file. Markdown files get YAML front matter and ATX headings
parsed; plain text and code files are kept as lines only (a ``#`` in Python or
TOML is a comment, not a heading). Line numbers everywhere are the true 1-based
lines of the file on disk, front matter included, so a citation can be opened
with any editor.

Which files are read: the suffixes below, minus hidden paths (``.git``), minus
what ``.gitignore`` files inside the corpus exclude (git's own rules, via
``pathspec``: a deeper ``.gitignore`` overrides a shallower one, ``!`` re-includes),
minus caller-given ``exclude`` patterns in the same syntax, which apply last.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from kebab_eval_pipeline.foundation.paths import real_inside, real_root

if TYPE_CHECKING:
    import pathspec

# pathspec, yaml and markdown-it are imported where used: loading an index to search it (what
# `kebab-eval ref search` does once per query under the command adapter) never parses a corpus.

DocKind = Literal["markdown", "text", "code"]

# One version per kind of file, recorded on every document: a change to how
# markdown is parsed need not invalidate an index of source files, and the
# manifest shows which parser read which file.
FILE_PARSER_VERSIONS: dict[DocKind, str] = {"markdown": "md-parser-2", "text": "text-1", "code": "code-1"}
# The ingest as a whole: file selection rules (suffixes, hidden paths, ignore
# files) plus the per-kind parsers. Part of index_version.
PARSER_VERSION = "ingest-2:" + "+".join(FILE_PARSER_VERSIONS[k] for k in ("markdown", "text", "code"))

MARKDOWN_SUFFIXES = frozenset({".md", ".markdown"})
TEXT_SUFFIXES = frozenset({".txt", ".rst"})
CODE_SUFFIXES = frozenset(
    {
        ".py", ".rs", ".go", ".ts", ".tsx", ".js", ".jsx", ".java", ".kt", ".c", ".h", ".cc", ".cpp",
        ".hpp", ".cs", ".rb", ".php", ".swift", ".scala", ".sh", ".sql", ".toml", ".yaml", ".yml",
    }
)  # fmt: skip
CORPUS_SUFFIXES = MARKDOWN_SUFFIXES | TEXT_SUFFIXES | CODE_SUFFIXES
IGNORE_FILE = ".gitignore"

# CommonMark, not the GFM-ish "default" preset: we only need block structure
# (headings, fences, indented code), and the strict preset is the stable one.


@cache
def _markdown():
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark")


@dataclass(frozen=True)
class Heading:
    """An ATX heading: ``level`` 1-6, cleaned ``text``, 1-based file ``line``."""

    level: int
    text: str
    line: int


@dataclass
class Document:
    """One corpus file.

    ``lines`` holds every line of the file (front matter included) without line
    terminators, so ``lines[n - 1]`` is file line ``n``. ``body_start`` is the
    1-based line where content after the front matter begins (1 when there is
    none). ``content_sha256`` hashes the raw bytes.
    """

    doc_id: str
    rel_path: str
    kind: DocKind
    parser_version: str
    title: str
    front_matter: dict[str, Any]
    lines: list[str]
    headings: list[Heading]
    body_start: int
    content_sha256: str
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class SkippedSymlink:
    """A symlink in the corpus that was not followed: its relative ``path`` and the ``reason``.

    Reasons: ``outside the corpus`` (it resolves beyond the corpus root's real path — never read),
    ``loop`` (a folder link to a folder it sits in), ``broken`` (no regular file or folder at its
    target: dangling, a cycle of links, a FIFO or device), ``duplicate of <rel_path>`` (it leads to
    a file or folder already indexed under that path).
    """

    path: str
    reason: str

    def as_dict(self) -> dict[str, str]:
        """``{"path", "reason"}``, as stored in the index manifest."""
        return {"path": self.path, "reason": self.reason}


@dataclass
class CorpusScan:
    """What :func:`scan_corpus` found: the ``files`` to read and the symlinks it did not follow."""

    files: list[tuple[str, Path]]
    skipped_symlinks: list[SkippedSymlink]


OUTSIDE = "outside the corpus"


def read_corpus(corpus_dir: Path, exclude: list[str] | tuple[str, ...] = ()) -> list[Document]:
    """Read every supported file under ``corpus_dir``, recursively.

    Inputs: a directory, and optional ``exclude`` patterns in ``.gitignore``
    syntax relative to it (``drafts/``, ``*.generated.md``, ``!keep.md``).
    Files whose suffix is in :data:`CORPUS_SUFFIXES` are read, except: anything
    under a hidden path component (``.git``, ``.obsidian``: tool state, not
    content), anything a ``.gitignore`` in the corpus ignores, and anything
    ``exclude`` matches (applied after the ignore files, so it has the last word).
    Symlinks are followed only while they stay inside the corpus (see :func:`scan_corpus`).

    Output: documents sorted by relative path (forward slashes), so the order and
    hence chunk order is identical on every machine. A document's ``doc_id`` is
    that relative path: stable across runs for as long as the file stays put.

    Edge cases: a missing path raises ``FileNotFoundError``, a file path raises
    ``NotADirectoryError``; an empty folder gives ``[]``; an invalid pattern
    raises ``ValueError`` naming it. Undecodable bytes are replaced (U+FFFD)
    and noted in the document's ``warnings``.
    """
    return read_corpus_scan(corpus_dir, exclude)[0]


def read_corpus_scan(
    corpus_dir: Path, exclude: list[str] | tuple[str, ...] = ()
) -> tuple[list[Document], list[SkippedSymlink]]:
    """:func:`read_corpus`, plus the symlinks it did not follow (for the index's coverage report)."""
    root = Path(corpus_dir)
    if not root.exists():
        raise FileNotFoundError(f"corpus directory does not exist: {root}")
    if not root.is_dir():
        raise NotADirectoryError(f"corpus path is not a directory: {root}")
    scan = scan_corpus(root, exclude)
    return [parse_document(rel, path.read_bytes()) for rel, path in scan.files], scan.skipped_symlinks


def corpus_files(root: Path, exclude: list[str] | tuple[str, ...] = ()) -> list[tuple[str, Path]]:
    """``(relative posix path, path)`` of every file :func:`read_corpus` would read, sorted."""
    return scan_corpus(root, exclude).files


def scan_corpus(root: Path, exclude: list[str] | tuple[str, ...] = ()) -> CorpusScan:
    """Every file :func:`read_corpus` would read, and every symlink it will not follow.

    Walks top-down and prunes ignored folders, as git does: nothing inside an ignored
    folder can be re-included, and a ``.gitignore`` inside one is never read.

    Symlinks (SPEC §11, no reads outside configured roots): a link — to a file or a folder, at
    any depth — is followed only when its real path lies inside the corpus root's real path (the
    containment rule :mod:`kebab_eval_pipeline.foundation.paths` shares with ``source_root``). A link leaving
    the root is never opened, only resolved. The plain tree is walked first and folder links
    after it, so a file reachable both directly and through links is read once, under its plain
    path (among link paths only, the first in sorted order); a folder link to a folder already
    walked — its own parent included, which is how loops end — is not walked again. Selection
    rules (hidden, ignored, suffix) apply to the link's own path, as git sees it.

    Output: ``files`` sorted by relative path — plain files with the path walked, files reached
    through a link with their resolved path (read where the check was made) — and
    ``skipped_symlinks`` sorted by path.
    """
    rules = _IgnoreRules(exclude)
    boundary = real_root(root)
    walked_dirs: set[str] = set()
    skipped: list[SkippedSymlink] = []
    # real path -> (reached through a link?, relative path, path to read)
    chosen: dict[str, tuple[bool, str, Path]] = {}
    dir_links: list[tuple[tuple[str, ...], Path]] = []

    def offer(real: str, via_link: bool, rel: str, path: Path) -> None:
        held = chosen.get(real)
        if held is None or (held[0], held[1]) > (via_link, rel):
            if held is not None:
                skipped.append(SkippedSymlink(held[1], f"duplicate of {rel}"))
            chosen[real] = (via_link, rel, path)
        else:
            skipped.append(SkippedSymlink(rel, f"duplicate of {held[1]}"))

    def walk(top: Path, top_parts: tuple[str, ...], via_link: bool) -> None:
        stack = [(top, top_parts)]
        while stack:
            here, parts = stack.pop()
            real_here = os.path.realpath(here)
            if real_here in walked_dirs:
                continue  # reached before through another link: its files are already offered
            walked_dirs.add(real_here)
            try:
                entries = sorted(os.scandir(here), key=lambda e: e.name)
            except OSError:
                continue  # unreadable folder: os.walk skipped these silently too
            if any(e.name == IGNORE_FILE and e.is_file(follow_symlinks=False) for e in entries):
                rules.add(parts, here / IGNORE_FILE)
            subdirs = []
            for entry in entries:
                name, path = entry.name, here / entry.name
                is_link = entry.is_symlink()
                if name.startswith("."):
                    continue
                if entry.is_dir(follow_symlinks=False):
                    if not rules.ignored((*parts, name), is_dir=True):
                        subdirs.append((path, (*parts, name)))
                    continue
                if is_link and _resolves_to_dir(path):
                    if not rules.ignored((*parts, name), is_dir=True):
                        dir_links.append(((*parts, name), path))
                    continue
                if path.suffix.lower() not in CORPUS_SUFFIXES or rules.ignored((*parts, name)):
                    continue
                rel = "/".join((*parts, name))
                if not is_link and not via_link:
                    if entry.is_file(follow_symlinks=False):
                        offer(os.path.join(boundary, rel), False, rel, path)
                    continue
                real = _inside(boundary, path)
                if real is None:
                    skipped.append(SkippedSymlink(rel, OUTSIDE))
                elif not os.path.isfile(real):
                    skipped.append(SkippedSymlink(rel, "broken"))
                else:
                    offer(real, True, rel, Path(real))
            # Reversed onto the stack so folders are walked in name order (the .gitignore
            # rules only need parents before children, but a fixed order keeps "first" stable).
            stack.extend(reversed(subdirs))

    walk(Path(root), (), via_link=False)
    # Folder links after the plain tree, shallowest and then alphabetically first: a folder gets
    # the plainest path that reaches it. Walking one may find more links; they queue behind.
    while dir_links:
        dir_links.sort(key=lambda item: (len(item[0]), item[0]))
        parts, path = dir_links.pop(0)
        rel = "/".join(parts)
        real = _inside(boundary, path)
        if real is None:
            skipped.append(SkippedSymlink(rel, OUTSIDE))
        elif not os.path.isdir(real):
            skipped.append(SkippedSymlink(rel, "broken"))
        elif real in walked_dirs:
            # A link to a folder it sits in (its own, or any above it) would be walked forever.
            loop = os.path.commonpath([real, os.path.realpath(path.parent)]) == real
            skipped.append(SkippedSymlink(rel, "loop" if loop else f"duplicate of {_rel(boundary, real)}"))
        else:
            walk(path, parts, via_link=True)
    files = sorted(((rel, path) for _, rel, path in chosen.values()), key=lambda item: item[0])
    return CorpusScan(files, sorted(skipped, key=lambda s: s.path))


def _resolves_to_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:  # ELOOP on a cycle of links
        return False


def _inside(boundary: str, path: Path) -> str | None:
    try:
        return real_inside(boundary, path)
    except (OSError, ValueError):
        return None


def _rel(boundary: str, real: str) -> str:
    return os.path.relpath(real, boundary).replace(os.sep, "/")


class _IgnoreRules:
    """``.gitignore`` files met while walking down a corpus, plus extra patterns, with git's precedence."""

    def __init__(self, exclude: list[str] | tuple[str, ...]) -> None:
        self._specs: list[tuple[tuple[str, ...], pathspec.GitIgnoreSpec]] = []
        self._extra = _spec(list(exclude), "exclude patterns") if exclude else None

    def add(self, base: tuple[str, ...], ignore_file: Path) -> None:
        lines = ignore_file.read_text(encoding="utf-8", errors="replace").splitlines()
        self._specs.append((base, _spec(lines, str(ignore_file))))

    def ignored(self, parts: tuple[str, ...], is_dir: bool = False) -> bool:
        """Whether the path ``parts`` (relative to the root) is ignored; folders match ``dir/`` patterns."""
        suffix = "/" if is_dir else ""
        verdict: bool | None = None
        # Specs were added top-down, so a deeper ignore file's verdict comes later and sticks.
        for base, spec in self._specs:
            if parts[: len(base)] != base or len(parts) == len(base):
                continue
            result = spec.check_file("/".join(parts[len(base) :]) + suffix).include
            if result is not None:
                verdict = result
        if self._extra is not None:
            result = self._extra.check_file("/".join(parts) + suffix).include
            if result is not None:
                verdict = result
        return bool(verdict)


_PATTERN_ERRORS = (ValueError, TypeError, re.error)  # GitWildMatchPatternError; a bad [z-a] range


def _spec(lines: list[str], where: str) -> pathspec.GitIgnoreSpec:
    import pathspec

    try:
        return pathspec.GitIgnoreSpec.from_lines(lines)
    except _PATTERN_ERRORS as exc:
        # Name the offending line: pathspec's own message does not always quote it.
        for number, line in enumerate(lines, start=1):
            try:
                pathspec.GitIgnoreSpec.from_lines([line])
            except _PATTERN_ERRORS:
                raise ValueError(
                    f"invalid ignore pattern {line!r} in {where} (line {number}): {exc}"
                ) from None
        raise ValueError(f"invalid ignore pattern in {where}: {exc}") from None


def parse_document(rel_path: str, data: bytes) -> Document:
    """Parse one file's bytes into a :class:`Document`.

    Inputs: the forward-slash relative path (it becomes ``doc_id``; its suffix
    picks markdown / text / code handling) and the raw bytes.

    Output: the document with lines, front matter, headings and title.

    Edge cases: a UTF-8 BOM is dropped; CRLF line ends are normalised; bad UTF-8
    is replaced and warned about; a malformed or unclosed front-matter block is
    kept as ordinary text with a warning; an empty file has no lines.
    """
    warnings: list[str] = []
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        text = data.decode("utf-8", errors="replace")
        warnings.append(f"{rel_path}: invalid UTF-8 at byte {exc.start}, replaced undecodable bytes")
    text = text.removeprefix("\ufeff")
    lines = _split_lines(text)
    suffix = Path(rel_path).suffix.lower()
    kind: DocKind = "code"
    if suffix in MARKDOWN_SUFFIXES:
        kind = "markdown"
    elif suffix in TEXT_SUFFIXES:
        kind = "text"

    front_matter: dict[str, Any] = {}
    body_start = 1
    headings: list[Heading] = []
    if kind == "markdown":
        front_matter, body_start = _parse_front_matter(lines, rel_path, warnings)
        headings = _atx_headings(lines, body_start)

    title = _title(front_matter, headings, rel_path)
    return Document(
        doc_id=rel_path,
        rel_path=rel_path,
        kind=kind,
        parser_version=FILE_PARSER_VERSIONS[kind],
        title=title,
        front_matter=front_matter,
        lines=lines,
        headings=headings,
        body_start=body_start,
        content_sha256=hashlib.sha256(data).hexdigest(),
        warnings=warnings,
    )


def corpus_sha256(docs: list[Document]) -> str:
    """Content hash of a corpus: sha256 over the sorted (rel_path, file-bytes hash) pairs.

    Any added, removed, renamed or edited file changes it; reading order does
    not. An empty corpus hashes to the sha256 of nothing.
    """
    return _corpus_digest((doc.rel_path, doc.content_sha256) for doc in docs)


def files_sha256(files: list[tuple[str, Path]]) -> str:
    """:func:`corpus_sha256` of ``(relative path, path)`` pairs (as :func:`corpus_files` lists them),
    from file bytes alone: hashed without parsing, so a cache can tell whether a stored index still
    matches the folder before paying for chunking and embedding."""
    return _corpus_digest(
        (rel_path, hashlib.sha256(path.read_bytes()).hexdigest()) for rel_path, path in files
    )


def _corpus_digest(pairs) -> str:
    digest = hashlib.sha256()
    for rel_path, file_hash in sorted(pairs):
        # NUL separators keep ("ab", h) and ("a", "b"+h) from colliding.
        digest.update(rel_path.encode("utf-8") + b"\0" + file_hash.encode("ascii") + b"\0")
    return digest.hexdigest()


def _split_lines(text: str) -> list[str]:
    # Not str.splitlines(): it also splits on \x0c, \u2028 and friends, which
    # editors and `sed -n Np` do not, and line numbers would drift.
    if not text:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def _parse_front_matter(lines: list[str], rel_path: str, warnings: list[str]) -> tuple[dict[str, Any], int]:
    """Return (front matter, 1-based first body line). No block → ({}, 1)."""
    if not lines or lines[0].strip() != "---":
        return {}, 1
    import yaml

    for idx in range(1, len(lines)):
        if lines[idx].strip() in ("---", "..."):
            block = "\n".join(lines[1:idx])
            try:
                loaded = yaml.safe_load(block) if block.strip() else {}
            except yaml.YAMLError as exc:
                reason = str(exc).splitlines()[0]
                warnings.append(f"{rel_path}: malformed front matter ({reason}); kept as text")
                return {}, 1
            if not isinstance(loaded, dict):
                warnings.append(f"{rel_path}: front matter is not a mapping; kept as text")
                return {}, 1
            return {str(k): v for k, v in loaded.items()}, idx + 2
    warnings.append(f"{rel_path}: front matter opened with '---' but never closed; kept as text")
    return {}, 1


def _atx_headings(lines: list[str], body_start: int) -> list[Heading]:
    """ATX headings of the body, found by a CommonMark parser.

    A parser rather than a regex because it already knows what is *not* a
    heading: lines in ``` / ~~~ fences, indented code, HTML blocks. Only
    top-level headings count (``> # x`` inside a quote is quoted text), and
    setext headings (underlined with ===/---) are ignored by design: the
    contract is ATX only, and a ``---`` under a paragraph is too easily a rule.
    """
    # Lines as we count them (split on \n only): a lone \r inside a line would be a line
    # break to markdown-it and shift every heading after it.
    body = "\n".join(line.replace("\r", " ") for line in lines[body_start - 1 :])
    tokens = _markdown().parse(body)
    headings: list[Heading] = []
    for idx, tok in enumerate(tokens):
        if tok.type != "heading_open" or tok.level != 0 or not tok.markup.startswith("#") or tok.map is None:
            continue
        inline = tokens[idx + 1]
        text = " ".join(inline.content.split())
        if not text:
            # `#` alone is a valid but empty heading; it names nothing, so it is
            # not a section boundary either.
            continue
        headings.append(Heading(level=len(tok.markup), text=text, line=body_start + tok.map[0]))
    return headings


def _title(front_matter: dict[str, Any], headings: list[Heading], rel_path: str) -> str:
    title = front_matter.get("title")
    if isinstance(title, str) and title.strip():
        return title.strip()
    for heading in headings:
        if heading.level == 1:
            return heading.text
    return Path(rel_path).stem
