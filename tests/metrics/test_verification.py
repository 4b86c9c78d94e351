"""Hit verification against a source tree (SPEC §6 ``hallucination_rate``, §11 no reads outside roots).

Every test works on real files in a temporary tree. ``opens_during`` records every ``open`` audit
event raised while ``verify_hits`` runs, so the traversal tests prove that nothing outside the root
is ever opened — not merely that the verdict says so.
"""

from __future__ import annotations

import contextlib
import os
import sys
import unicodedata
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kebab_eval_pipeline.foundation.demo import DEMO_CORPUS
from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.golden.tables import typed_frame
from kebab_eval_pipeline.metrics import verification
from kebab_eval_pipeline.metrics.verification import (
    HALLUCINATION_VERDICTS,
    VERDICTS,
    VERIFICATION_COLUMNS,
    hallucination_counts,
    normalise_verbatim,
    verify_hits,
)
from kebab_eval_pipeline.reference import ReferenceIndex
from kebab_eval_pipeline.systems.base import HIT_COLUMNS
from kebab_eval_pipeline.systems.reference_adapter import ReferenceSystem

SECRET = "TOP SECRET: the sentinel outside the root"
A_MD = "# Title\n\nFirst line.\nSecond line.\n"  # 4 lines
KIMCHI = "# 김치\n\n배추를 소금물에 여섯 시간 절인다.\n고춧가루와 마늘로 양념을 만든다.\n"
SETTINGS: dict[str, Any] = {
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
}


# --------------------------------------------------------------------------------------------
# Fixtures and helpers
# --------------------------------------------------------------------------------------------


class _Opens:
    """What the audit hook records. Hooks cannot be removed, so it records only while active."""

    active = False
    installed = False
    paths: ClassVar[list[Any]] = []


def _hook(event: str, args: tuple) -> None:
    if _Opens.active and event == "open":
        _Opens.paths.append(args[0])


@contextlib.contextmanager
def opens_during():
    """Record the path of every ``open`` audit event (builtin ``open`` and ``os.open``) inside the block."""
    if not _Opens.installed:
        sys.addaudithook(_hook)
        _Opens.installed = True
    _Opens.paths = []
    _Opens.active = True
    try:
        yield _Opens.paths
    finally:
        _Opens.active = False


def assert_opened_inside(paths: list[Any], root: Path) -> None:
    real_root = os.path.realpath(root)
    for p in paths:
        if isinstance(p, int):  # an already-open descriptor
            continue
        resolved = os.path.realpath(os.fsdecode(p))
        assert os.path.commonpath([real_root, resolved]) == real_root, f"opened outside the root: {p!r}"


def build_tree(base: Path) -> Path:
    """A source root with every kind of entry, plus a sentinel world outside it.

    base/outside.txt, base/outside/secret.txt, base/root2/a.md: outside, all holding SECRET.
    base/root: the source root.
    """
    (base / "outside").mkdir(parents=True)
    (base / "outside.txt").write_text(SECRET + "\n", encoding="utf-8")
    (base / "outside" / "secret.txt").write_text(SECRET + "\n", encoding="utf-8")
    (base / "root2").mkdir()
    (base / "root2" / "a.md").write_text(SECRET + "\n", encoding="utf-8")
    root = base / "root"
    (root / "sub").mkdir(parents=True)
    (root / "dir").mkdir()
    (root / "a.md").write_text(A_MD, encoding="utf-8")
    (root / "sub" / "b.md").write_text("Bee line one.\nBee line two.\n", encoding="utf-8")
    (root / "empty.md").write_bytes(b"")
    (root / "no-newline.md").write_bytes(b"one\ntwo")
    (root / "crlf.md").write_bytes(b"alpha beta\r\ngamma  delta\r\n")
    (root / "kimchi.md").write_text(KIMCHI, encoding="utf-8")
    (root / "kimchi-nfd.md").write_text(unicodedata.normalize("NFD", KIMCHI), encoding="utf-8")
    (root / "bom.md").write_bytes("\ufeff# 제목\n본문입니다.\n".encode())
    (root / "latin1.md").write_bytes(b"caf\xe9 au lait\nnext line\n")
    (root / "spaces.md").write_text("wide\u3000space and\u00a0nbsp\n", encoding="utf-8")
    os.symlink("../outside.txt", root / "link_out.txt")
    os.symlink(base / "outside.txt", root / "abs_link_out.txt")
    os.symlink("../outside", root / "linkdir_out")
    os.symlink("../root2/a.md", root / "link_root2.md")
    os.symlink("sub/b.md", root / "link_in.md")
    os.symlink("sub", root / "linkdir_in")
    os.symlink("loop2", root / "loop1")
    os.symlink("loop1", root / "loop2")
    os.mkfifo(root / "fifo")
    return root


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return build_tree(tmp_path)


@pytest.fixture(scope="module")
def shared_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same tree, once per module (hypothesis examples cannot use function-scoped fixtures)."""
    root = build_tree(tmp_path_factory.mktemp("verify"))
    verify_hits(hits_table(hit("a.md", "First line.")), root)  # warm up: no first-call imports later
    return root


def hits_table(*rows: dict) -> pd.DataFrame:
    """Hits of query q1 in rank order; each row names only the fields it cares about."""
    return typed_frame([{"query_id": "q1", "rank": i + 1, **row} for i, row in enumerate(rows)], HIT_COLUMNS)


def hit(
    path: str | None, snippet: str | None, start: int | None = None, end: int | None = None, **kw
) -> dict:
    return {"doc_path": path, "snippet": snippet, "line_start": start, "line_end": end, **kw}


def verdicts(root: Path, *rows: dict) -> list[str]:
    return verify_hits(hits_table(*rows), root)["verdict"].tolist()


def reference_hits(index: ReferenceIndex, chunks=None) -> pd.DataFrame:
    """Every chunk of ``index`` as a hit carrying exactly what the reference system reports."""
    rows = [
        {
            "query_id": "all",
            "rank": i + 1,
            "chunk_id": c.chunk_id,
            "doc_id": c.doc_id,
            "doc_path": c.doc_path,
            "heading_path": list(c.heading_path),
            "line_start": c.line_start,
            "line_end": c.line_end,
            "snippet": c.text,
        }
        for i, c in enumerate(index.chunks if chunks is None else chunks)
    ]
    return typed_frame(rows, HIT_COLUMNS)


# --------------------------------------------------------------------------------------------
# Shape of the result
# --------------------------------------------------------------------------------------------


def test_one_typed_row_per_hit_in_input_order(root: Path) -> None:
    hits = typed_frame(
        [
            {"query_id": "q2", "rank": 3, "doc_path": "./a.md", "snippet": "Second line.", "line_start": 4},
            {"query_id": "q1", "rank": 1, "doc_path": "missing.md", "snippet": "x"},
            {"query_id": "q1", "rank": 2, "doc_path": None, "snippet": "x"},
            {"query_id": "q2", "rank": 1, "doc_id": "sub\\b.md", "snippet": "Bee line two."},
        ],
        HIT_COLUMNS,
    )
    hits.index = [10, 11, 12, 13]  # the result has its own RangeIndex
    out = verify_hits(hits, root)
    assert out.dtypes.to_dict() == {c: pd.Series([], dtype=t).dtype for c, t in VERIFICATION_COLUMNS.items()}
    assert list(out.columns) == list(VERIFICATION_COLUMNS)
    assert out.index.tolist() == [0, 1, 2, 3]
    assert out["query_id"].tolist() == ["q2", "q1", "q1", "q2"]
    assert out["rank"].tolist() == [3, 1, 2, 1]
    # doc_path is the path that was checked: normalised, falling back to doc_id.
    assert out["doc_path"].tolist() == ["a.md", "missing.md", pd.NA, "sub/b.md"]
    assert out["verdict"].tolist() == ["ok", "file_missing", "unverifiable", "ok"]
    assert out["hallucinated"].tolist() == [False, True, pd.NA, False]


def test_empty_and_snippetless_tables(root: Path) -> None:
    empty = verify_hits(typed_frame([], HIT_COLUMNS), root)
    assert len(empty) == 0 and list(empty.columns) == list(VERIFICATION_COLUMNS)
    # Only the required columns: every hit is unverifiable, nothing is opened.
    bare = pd.DataFrame({"query_id": ["q1", "q1"], "rank": [1, 2]})
    with opens_during() as opened:
        out = verify_hits(bare, root)
    assert out["verdict"].tolist() == ["unverifiable"] * 2 and opened == []
    assert out["hallucinated"].isna().all()


def test_sliced_and_partial_tables(root: Path) -> None:
    """A slice of a table (Arrow arrays with an offset) verifies like the rows it holds; optional
    columns may be missing (no lines: the whole file is searched)."""
    rows = [c[1] for c in CASES]
    full = verify_hits(hits_table(*rows), root)
    part = verify_hits(hits_table(*rows).iloc[7:31], root)
    assert part["verdict"].tolist() == full["verdict"].tolist()[7:31]
    minimal = pd.DataFrame(
        {
            "query_id": ["q", "q", "q"],
            "rank": [1, 2, 3],
            "doc_path": ["a.md", "sub/b.md", "../outside.txt"],
            "snippet": ["Second line.", "nope", SECRET],
        }
    )
    assert verify_hits(minimal, root)["verdict"].tolist() == ["ok", "snippet_not_found", "outside_root"]


def test_root_must_be_a_directory(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not a directory"):
        verify_hits(hits_table(hit("a.md", "x")), tmp_path / "nope")
    (tmp_path / "file").write_text("x")
    with pytest.raises(InputError, match="not a directory"):
        verify_hits(hits_table(hit("a.md", "x")), tmp_path / "file")


def test_root_given_through_a_symlink(root: Path, tmp_path: Path) -> None:
    os.symlink(root, tmp_path / "alias")
    assert verdicts(tmp_path / "alias", hit("a.md", "First line.", 3), hit("link_out.txt", SECRET)) == [
        "ok",
        "outside_root",
    ]
    assert verdicts(str(root), hit("a.md", "First line.", 3)) == ["ok"]


def test_hallucination_counts(root: Path) -> None:
    out = verify_hits(
        hits_table(
            hit("a.md", "First line."), hit("a.md", "nope"), hit("/etc/passwd", "root"), hit(None, "x")
        ),
        root,
    )
    counts = hallucination_counts(out)
    assert counts == {
        "hits": 4,
        "verified": 3,
        "hallucinated": 2,
        "ok": 1,
        "file_missing": 0,
        "out_of_range": 0,
        "snippet_not_found": 1,
        "outside_root": 1,
        "unverifiable": 1,
    }
    assert set(HALLUCINATION_VERDICTS) == set(VERDICTS) - {"ok", "unverifiable"}


# --------------------------------------------------------------------------------------------
# Each verdict, hand-constructed
# --------------------------------------------------------------------------------------------

CASES = [
    # ok: lines, whole file, single line from either end, spellings of the path, symlinks inside
    ("lines", hit("a.md", "First line.", 3, 3), "ok"),
    ("two lines", hit("a.md", "First line.\nSecond line.", 3, 4), "ok"),
    ("part of the range", hit("a.md", "line.\nSecond", 1, 4), "ok"),
    ("whole file", hit("a.md", "Second line."), "ok"),
    ("start only", hit("a.md", "Second line.", 4, None), "ok"),
    ("end only", hit("a.md", "Second line.", None, 4), "ok"),
    ("leading ./", hit("./a.md", "First line.", 3, 3), "ok"),
    ("backslashes", hit("sub\\b.md", "Bee line two.", 2, 2), "ok"),
    ("dot-dot that stays inside", hit("sub/../a.md", "First line.", 3, 3), "ok"),
    ("symlink inside", hit("link_in.md", "Bee line one.", 1, 1), "ok"),
    ("symlinked dir inside", hit("linkdir_in/b.md", "Bee line two.", 2, 2), "ok"),
    ("last line without newline", hit("no-newline.md", "two", 2, 2), "ok"),
    # whitespace and truncation tolerance
    ("re-flowed", hit("a.md", "First line. Second line.", 3, 4), "ok"),
    ("re-indented", hit("a.md", "  First   line.\n\n\tSecond line.  ", 3, 4), "ok"),
    ("trailing ellipsis", hit("a.md", "First li…", 3, 3), "ok"),
    ("trailing dots", hit("a.md", "First line. Sec...", 3, 4), "ok"),
    ("leading ellipsis", hit("a.md", "… line. Second line.", 3, 4), "ok"),
    ("both ends", hit("a.md", "...st line. Second li …", None, None), "ok"),
    # snippet_not_found
    ("case differs", hit("a.md", "first line.", 3, 3), "snippet_not_found"),
    ("wrong line", hit("a.md", "Second line.", 3, 3), "snippet_not_found"),
    ("beyond the range", hit("a.md", "First line.\nSecond line.", 3, 3), "snippet_not_found"),
    ("words joined", hit("a.md", "Firstline.", 3, 3), "snippet_not_found"),
    ("elided middle", hit("a.md", "First … line.", 3, 4), "snippet_not_found"),
    ("paraphrase", hit("a.md", "The first line.", None, None), "snippet_not_found"),
    ("blank lines only", hit("a.md", "Title", 2, 2), "snippet_not_found"),
    ("empty file, no lines", hit("empty.md", "anything"), "snippet_not_found"),
    # out_of_range
    ("past the end", hit("a.md", "First line.", 5, 5), "out_of_range"),
    ("end past the end", hit("a.md", "First line.", 3, 5), "out_of_range"),
    ("line 0", hit("a.md", "# Title", 0, 1), "out_of_range"),
    ("negative", hit("a.md", "# Title", -1, None), "out_of_range"),
    ("start after end", hit("a.md", "First line.", 4, 3), "out_of_range"),
    ("empty file has no lines", hit("empty.md", "x", 1, 1), "out_of_range"),
    ("huge", hit("a.md", "x", 2**62, 2**62), "out_of_range"),
    # file_missing
    ("missing", hit("missing.md", "x"), "file_missing"),
    ("missing in missing dir", hit("nope/missing.md", "x", 1, 1), "file_missing"),
    ("a directory", hit("dir", "x"), "file_missing"),
    ("the root itself", hit(".", "x"), "file_missing"),
    ("a fifo (must not hang)", hit("fifo", "x"), "file_missing"),
    ("a symlink loop", hit("loop1", "x"), "file_missing"),
    ("under a loop", hit("loop1/x.md", "x"), "file_missing"),
    # back out of a loop: realpath gave up at loop1 and took ".." lexically (issue 23's audit found
    # the first: it opened root/link_out.txt; the second read the secret through linkdir_out)
    ("back out of a loop onto a link out", hit("loop1/../link_out.txt", SECRET), "file_missing"),
    ("back out of a loop through a link out", hit("loop1/../linkdir_out/secret.txt", SECRET), "file_missing"),
    ("back out of a loop onto a link in", hit("loop1/../link_in.md", "Bee line one."), "file_missing"),
    ("file used as a dir", hit("a.md/x", "x"), "file_missing"),
    # unverifiable
    ("no path", hit(None, "First line."), "unverifiable"),
    ("empty path", hit("", "First line."), "unverifiable"),
    ("no snippet", hit("a.md", None, 3, 3), "unverifiable"),
    ("empty snippet", hit("a.md", "", 3, 3), "unverifiable"),
    ("blank snippet", hit("a.md", " \n\t\u3000", 3, 3), "unverifiable"),
    ("only a marker", hit("a.md", " … ", 3, 3), "unverifiable"),
    ("only dots", hit("a.md", "....", 3, 3), "unverifiable"),
    ("no snippet, missing file", hit("missing.md", None), "unverifiable"),
    ("no snippet, outside", hit("/etc/passwd", ""), "unverifiable"),
    ("nothing at all", hit(None, None), "unverifiable"),
    # doc_id stands in for a missing doc_path
    ("doc_id fallback", hit(None, "First line.", 3, 3, doc_id="a.md"), "ok"),
    ("doc_id after empty doc_path", hit("", "First line.", 3, 3, doc_id="./a.md"), "ok"),
    ("doc_path wins over doc_id", hit("a.md", "First line.", 3, 3, doc_id="missing.md"), "ok"),
    ("opaque doc_id", hit(None, "First line.", doc_id="doc-42"), "file_missing"),
]


@pytest.mark.parametrize(("row", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_verdict(root: Path, row: dict, expected: str) -> None:
    assert verdicts(root, row) == [expected]


def test_all_cases_in_one_table(root: Path) -> None:
    """The vectorised path (many hits, many files, both comparison stages) agrees with one-by-one."""
    rows = [c[1] for c in CASES] * 3
    assert verdicts(root, *rows) == [c[2] for c in CASES] * 3


def test_files_read_in_small_batches(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a tiny batch budget every file is its own batch: same verdicts, same order."""
    monkeypatch.setattr(verification, "_BATCH_BYTES", 1)
    rows = [c[1] for c in CASES][::-1] * 2
    assert verdicts(root, *rows) == [c[2] for c in CASES][::-1] * 2


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files regardless of their mode")
def test_unreadable_file_is_missing(root: Path) -> None:
    (root / "secret.md").write_text("hidden")
    (root / "secret.md").chmod(0)
    assert verdicts(root, hit("secret.md", "hidden")) == ["file_missing"]


# --------------------------------------------------------------------------------------------
# Unicode, CRLF, BOM, bad UTF-8
# --------------------------------------------------------------------------------------------

UNICODE_CASES = [
    ("korean line", hit("kimchi.md", "배추를 소금물에 여섯 시간 절인다.", 3, 3), "ok"),
    ("korean two lines", hit("kimchi.md", "절인다.\n고춧가루와", 3, 4), "ok"),
    ("korean re-flowed", hit("kimchi.md", "여섯  시간\u3000절인다. 고춧가루와 마늘로", 3, 4), "ok"),
    ("korean truncated", hit("kimchi.md", "고춧가루와 마늘…", 4, 4), "ok"),
    ("korean wrong line", hit("kimchi.md", "고춧가루와 마늘로", 3, 3), "snippet_not_found"),
    ("korean altered", hit("kimchi.md", "배추를 소금에 여섯 시간 절인다.", 3, 3), "snippet_not_found"),
    ("nfd snippet, nfc file", hit("kimchi.md", unicodedata.normalize("NFD", "소금물에 여섯"), 3, 3), "ok"),
    ("nfc snippet, nfd file", hit("kimchi-nfd.md", "소금물에 여섯 시간", 3, 3), "ok"),
    ("nfd both (verbatim)", hit("kimchi-nfd.md", unicodedata.normalize("NFD", "# 김치"), 1, 1), "ok"),
    ("crlf verbatim", hit("crlf.md", "alpha beta\r\ngamma", 1, 2), "ok"),
    ("crlf with lf snippet", hit("crlf.md", "alpha beta\ngamma  delta", 1, 2), "ok"),
    ("crlf single line", hit("crlf.md", "gamma delta", 2, 2), "ok"),
    ("crlf line count", hit("crlf.md", "gamma", 3, 3), "out_of_range"),
    ("bom first line", hit("bom.md", "# 제목", 1, 1), "ok"),
    ("bom in the snippet", hit("bom.md", "\ufeff# 제목\n본문입니다.", 1, 2), "ok"),
    ("bad utf-8 rest of line", hit("latin1.md", "au lait", 1, 1), "ok"),
    ("bad utf-8 replaced", hit("latin1.md", "caf\ufffd au lait next", 1, 2), "ok"),
    ("bad utf-8 next line", hit("latin1.md", "next line", 2, 2), "ok"),
    ("unicode spaces in file", hit("spaces.md", "wide space and nbsp", 1, 1), "ok"),
    ("unicode spaces verbatim", hit("spaces.md", "wide\u3000space and\u00a0nbsp", 1, 1), "ok"),
    ("unicode spaces in snippet", hit("crlf.md", "alpha\u00a0beta\u2003gamma", 1, 2), "ok"),
]


@pytest.mark.parametrize(
    ("row", "expected"), [c[1:] for c in UNICODE_CASES], ids=[c[0] for c in UNICODE_CASES]
)
def test_unicode_verdict(root: Path, row: dict, expected: str) -> None:
    assert verdicts(root, row) == [expected]


def test_unicode_cases_in_one_table(root: Path) -> None:
    rows = [c[1] for c in UNICODE_CASES + CASES]
    assert verdicts(root, *rows) == [c[2] for c in UNICODE_CASES + CASES]


def test_normalise_verbatim() -> None:
    assert normalise_verbatim("  a\r\n\tb\u00a0\u3000c\ufeff ") == "a b c"
    assert normalise_verbatim("Case Stays.") == "Case Stays."
    assert normalise_verbatim(unicodedata.normalize("NFD", "김치")) == "김치"
    assert normalise_verbatim("… cut off ...", strip_markers=True) == "cut off"
    assert normalise_verbatim("Ends with a period.", strip_markers=True) == "Ends with a period."
    assert normalise_verbatim("a … b", strip_markers=True) == "a … b"


def test_whitespace_tables_agree() -> None:
    """_collapse_utf8 spells the whitespace set as byte comparisons; they must match _SPACES."""
    spaces = verification._SPACES
    assert {ord(c) for c in spaces if c.isascii()} == {*range(9, 14), *range(0x1C, 0x20), 32}
    assert {c.encode()[0] for c in spaces if not c.isascii()} == {0xC2, 0xE1, 0xE2, 0xE3, 0xEF}
    assert all(len(c.encode()) <= 3 for c in spaces)
    text, _ = verification._collapse_utf8(("x" + spaces + "y" + spaces).encode(), np.array([0]))
    assert text == b"x y "


# --------------------------------------------------------------------------------------------
# Safety: nothing outside the root is ever opened
# --------------------------------------------------------------------------------------------

TRAVERSALS = [
    "../outside.txt",
    "../../etc/passwd",
    "../../../../../../../../etc/passwd",
    "/etc/passwd",
    "//etc/passwd",
    "sub/../../outside.txt",
    "sub/../../root/a.md",  # climbs out and comes back: still rejected
    "..",
    "../root2/a.md",
    "link_out.txt",  # relative symlink to a file outside
    "abs_link_out.txt",  # absolute symlink to a file outside
    "linkdir_out/secret.txt",  # symlinked directory leaving the root
    "linkdir_out/../outside.txt",
    "link_root2.md",  # lands in root2: a string-prefix test would accept it
    "a.md\0../../outside.txt",
    "\0",
    "C:\\outside.txt",
    "c:outside.txt",
    "C:/Windows/win.ini",
    "\\\\server\\share\\outside.txt",
    "..\\outside.txt",
    "sub\\..\\..\\outside.txt",
]


@pytest.mark.parametrize("path", TRAVERSALS)
def test_traversal_is_outside_root_and_never_opened(root: Path, path: str) -> None:
    hits = hits_table(hit(path, SECRET), hit(path, SECRET, 1, 1), hit(None, SECRET, doc_id=path))
    verify_hits(hits_table(hit("a.md", "First line.")), root)  # warm up: no first-call imports below
    with opens_during() as opened:
        out = verify_hits(hits, root)
    assert out["verdict"].tolist() == ["outside_root"] * 3
    assert out["hallucinated"].tolist() == [True] * 3
    assert opened == []
    assert_opened_inside(opened, root)


def test_only_files_inside_are_opened_each_once(root: Path) -> None:
    rows = [hit(p, SECRET) for p in TRAVERSALS]
    rows += [
        hit("a.md", "First line.", 3, 3),
        hit("./a.md", "Second line."),
        hit("sub/../a.md", "nope"),
        hit("sub/b.md", "Bee line one.", 1, 1),
        hit("link_in.md", "Bee line two.", 2, 2),  # the same file as sub/b.md, through a symlink
        hit("missing.md", "x"),
    ]
    verify_hits(hits_table(hit("a.md", "First line.")), root)
    with opens_during() as opened:
        out = verify_hits(hits_table(*rows), root)
    assert out["verdict"].tolist() == ["outside_root"] * len(TRAVERSALS) + [
        "ok",
        "ok",
        "snippet_not_found",
        "ok",
        "ok",
        "file_missing",
    ]
    assert_opened_inside(opened, root)
    real = sorted(os.path.realpath(os.fsdecode(p)) for p in opened)
    # One open per distinct file (the missing one is attempted once), the hook saw them all.
    assert real == sorted(os.path.realpath(root / p) for p in ("a.md", "sub/b.md", "missing.md"))


PATH_PARTS = st.sampled_from(
    [
        "..",
        ".",
        "",
        "a.md",
        "sub",
        "b.md",
        "dir",
        "fifo",
        "loop1",
        "link_out.txt",
        "abs_link_out.txt",
        "linkdir_out",
        "linkdir_in",
        "link_root2.md",
        "secret.txt",
        "outside.txt",
        "root",
        "root2",
        "etc",
        "passwd",
        "C:",
        "\\",
        "\0",
        "~",
        "..\\..",
    ]
)
PATHS = st.one_of(
    st.lists(PATH_PARTS, max_size=8).map("/".join),
    st.lists(PATH_PARTS, max_size=8).map("".join),
    st.builds(
        lambda a, b: a + b, st.sampled_from(["/", "//", "C:\\", "", "./"]), st.lists(PATH_PARTS).map("/".join)
    ),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40),
)


@settings(max_examples=200, **SETTINGS)
@given(paths=st.lists(PATHS, min_size=1, max_size=6), lines=st.none() | st.integers(-2, 3))
def test_arbitrary_paths_never_open_outside(shared_root: Path, paths: list[str], lines: int | None) -> None:
    """Whatever the path, the verdict is a known one, nothing outside is opened, and the sentinel
    text — which exists only outside the root — is never verified."""
    hits = hits_table(*(hit(p, SECRET, lines, lines) for p in paths))
    with opens_during() as opened:
        out = verify_hits(hits, shared_root)
    assert_opened_inside(opened, shared_root)
    assert set(out["verdict"]) <= set(VERDICTS) - {"ok"}
    # Unverifiable only when the path normalises to nothing ("", "./").
    unverifiable = out["verdict"] == "unverifiable"
    assert out.loc[unverifiable, "doc_path"].isna().all()
    assert out.loc[~unverifiable, "hallucinated"].eq(True).all()


# --------------------------------------------------------------------------------------------
# The reference system's own hits verify; perturbed ones do not
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module", params=[(800, 0), (120, 40)], ids=["default-chunks", "small-overlapping"])
def demo_index(request: pytest.FixtureRequest) -> ReferenceIndex:
    chunk_size, chunk_overlap = request.param
    return ReferenceIndex.build(DEMO_CORPUS, chunk_size=chunk_size, chunk_overlap=chunk_overlap)


def test_every_reference_chunk_verifies(demo_index: ReferenceIndex) -> None:
    hits = reference_hits(demo_index)
    assert len(hits) > 100
    out = verify_hits(hits, DEMO_CORPUS)
    assert out["verdict"].tolist() == ["ok"] * len(hits)
    # Verbatim and normalised comparison agree: with every snippet re-flowed, still all ok.
    reflowed = hits.assign(snippet=hits["snippet"].str.replace("\n", "  ", regex=False))
    assert (verify_hits(reflowed, DEMO_CORPUS)["verdict"] == "ok").all()


@pytest.mark.parametrize(
    "query",
    [
        "How long should I ferment kimchi?",
        "배추 절이기 소금물 농도",
        "sourdough starter feeding schedule",
        "kombucha second fermentation",
        "고추장 만드는 법",
    ],
)
def test_reference_search_hits_verify(demo_index: ReferenceIndex, query: str) -> None:
    found = ReferenceSystem(demo_index).search(query, k=10)
    assert found
    hits = typed_frame([{"query_id": "q", **h.model_dump()} for h in found], HIT_COLUMNS)
    assert verify_hits(hits, DEMO_CORPUS)["verdict"].tolist() == ["ok"] * len(hits)


def test_perturbed_reference_hits(demo_index: ReferenceIndex, tmp_path: Path) -> None:
    hits = reference_hits(demo_index)
    n_lines = {
        p.relative_to(DEMO_CORPUS).as_posix(): len(p.read_bytes().rstrip(b"\n").split(b"\n"))
        for p in DEMO_CORPUS.rglob("*")
        if p.is_file()
    }
    start, end = hits["line_start"].astype("int64"), hits["line_end"].astype("int64")
    length = end - start + 1
    past = hits["doc_path"].map(n_lines).astype("int64") + 1

    def verdict_set(frame: pd.DataFrame) -> set[str]:
        return set(verify_hits(frame, DEMO_CORPUS)["verdict"])

    assert verdict_set(hits.assign(snippet=hits["snippet"] + " (and then some)")) == {"snippet_not_found"}
    assert verdict_set(hits.assign(snippet="(invented) " + hits["snippet"])) == {"snippet_not_found"}
    assert verdict_set(hits.assign(line_start=past, line_end=past)) == {"out_of_range"}
    assert verdict_set(hits.assign(line_end=past)) == {"out_of_range"}
    assert verdict_set(hits.assign(line_start=end + 1, line_end=start)) == {"out_of_range"}
    assert verdict_set(hits.assign(doc_path="gone/" + hits["doc_path"])) == {"file_missing"}
    assert verdict_set(hits.assign(doc_path="../" + hits["doc_path"])) == {"outside_root"}
    assert verdict_set(hits.assign(doc_path=str(DEMO_CORPUS) + "/" + hits["doc_path"])) == {"outside_root"}
    # The chunk's text is not on the lines right after it (unless the corpus repeats itself).
    shifted = hits.assign(line_start=end + 1, line_end=end + length).loc[end + length < past]
    out = verify_hits(shifted, DEMO_CORPUS)
    assert set(out["verdict"]) == {"snippet_not_found"}
    # The tree copied elsewhere still verifies: nothing depends on absolute paths.
    copy = tmp_path / "copy"
    copy.mkdir()
    for p in DEMO_CORPUS.rglob("*"):
        if p.is_file():
            (copy / p.relative_to(DEMO_CORPUS)).parent.mkdir(parents=True, exist_ok=True)
            (copy / p.relative_to(DEMO_CORPUS)).write_bytes(p.read_bytes())
    assert verdict_set(hits) == {"ok"} and set(verify_hits(hits, copy)["verdict"]) == {"ok"}


# --------------------------------------------------------------------------------------------
# Properties: cut snippets verify; the vectorised kernels agree with a plain-Python oracle
# --------------------------------------------------------------------------------------------

LINE_TEXT = st.text(
    alphabet=st.sampled_from(
        [
            *"abcXYZ019.,;:-'\"#* \t",
            *["\x0b", "\x0c", "\x1c", "\u00a0", "\u3000", "\u2028", "\ufeff", "…"],
            *"김치배추소금물é",
        ]
    ),
    max_size=30,
)
CONTENT = set(verification._SPACES + ".…")
_written = iter(range(10**9))


def has_content(text: str) -> bool:
    return any(c not in CONTENT for c in text)


def write_lines(root: Path, lines: list[str], crlf: bool) -> str:
    name = f"gen/{next(_written)}.md"
    (root / "gen").mkdir(exist_ok=True)
    (root / name).write_bytes(("\r\n" if crlf else "\n").join(lines).encode() + (b"\r\n" if crlf else b"\n"))
    return name


@st.composite
def cut_snippets(draw):
    """A file's lines and hits quoting pieces of them: cut anywhere, whitespace re-spelled, maybe
    marked as truncated."""
    lines = draw(st.lists(LINE_TEXT, min_size=1, max_size=12))
    crlf = draw(st.booleans())
    quotes = []
    for _ in range(draw(st.integers(1, 6))):
        s = draw(st.integers(1, len(lines)))
        e = draw(st.integers(s, len(lines)))
        span = "\n".join(lines[s - 1 : e])
        i = draw(st.integers(0, len(span)))
        j = draw(st.integers(i, len(span)))
        piece = span[i:j]
        if draw(st.booleans()):
            blanks = st.sampled_from([" ", "  ", "\n", "\r\n", "\t", "\u00a0"])
            piece = "".join(draw(blanks) if c.isspace() else c for c in piece)
        if draw(st.booleans()):
            piece = draw(st.sampled_from(["…", "...", "… "])) + piece
        if draw(st.booleans()):
            piece = piece + draw(st.sampled_from(["…", "...", " …"]))
        cited = draw(st.sampled_from(["lines", "start", "none"]))
        quotes.append((piece, s, e, cited))
    return lines, crlf, quotes


@settings(max_examples=150, **SETTINGS)
@given(case=cut_snippets())
def test_snippets_cut_from_the_file_verify(shared_root: Path, case) -> None:
    lines, crlf, quotes = case
    name = write_lines(shared_root, lines, crlf)
    rows = []
    for piece, s, e, cited in quotes:
        if cited == "lines":
            rows.append(hit(name, piece, s, e))
        elif cited == "start" and s == e:
            rows.append(hit(name, piece, s, None))
        else:
            rows.append(hit(name, piece))
    expected = ["ok" if has_content(r["snippet"]) else "unverifiable" for r in rows]
    assert verdicts(shared_root, *rows) == expected


def oracle(data: bytes, snippet: str, start: int | None, end: int | None) -> str:
    """The rules of ``verify_hits`` written the slow, obvious way (valid UTF-8 files)."""
    if not has_content(snippet):
        return "unverifiable"
    text = data.decode("utf-8")
    lines = text.split("\n")
    if text.endswith("\n") or not text:
        lines.pop()
    if start is None:
        span = text
    elif not 1 <= start <= end <= len(lines):
        return "out_of_range"
    else:
        span = "\n".join(lines[start - 1 : end])
    if snippet in span:
        return "ok"
    needle = normalise_verbatim(snippet, strip_markers=True)
    return "ok" if needle in normalise_verbatim(span) else "snippet_not_found"


@settings(max_examples=200, **SETTINGS)
@given(
    files=st.lists(st.tuples(st.lists(LINE_TEXT, max_size=8), st.booleans()), min_size=1, max_size=4),
    queries=st.lists(
        st.tuples(st.integers(0, 3), LINE_TEXT, st.none() | st.integers(0, 9), st.integers(0, 3)),
        min_size=1,
        max_size=25,
    ),
    data=st.data(),
)
def test_matches_the_plain_python_oracle(shared_root: Path, files, queries, data) -> None:
    """Random snippets — pieces of the files, mutated pieces, or noise — over several files in one
    table: the vectorised verdicts equal the oracle's, hit for hit."""
    names, contents = [], []
    for lines, crlf in files:
        names.append(write_lines(shared_root, lines, crlf))
        contents.append((shared_root / names[-1]).read_bytes())
    rows, expected = [], []
    for f, noise, start, extra in queries:
        f %= len(files)
        text = contents[f].decode()
        if data.draw(st.booleans()):
            i = data.draw(st.integers(0, len(text)))
            snippet = text[i : data.draw(st.integers(i, len(text)))]
            if data.draw(st.booleans()):
                snippet = snippet.replace("\r\n", " ").replace("\n", "\t")
            if data.draw(st.booleans()):
                snippet = snippet + noise
        else:
            snippet = noise
        end = None if start is None else start + extra
        rows.append(hit(names[f], snippet, start, end))
        expected.append(oracle(contents[f], snippet, start, end))
    assert verdicts(shared_root, *rows) == expected
