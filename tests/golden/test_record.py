"""``kebab-eval golden record``: the pure part (selection, anchors, ids, the atomic append) against
the real reference system's hits, the session loop against a real failing command system, and the
command itself driven through a real pseudo-terminal — then the recorded file validated and scored
by a real run, whose numbers follow from the hits marked."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from kebab_eval_pipeline.chain.settings import load_settings, settings_from_dict
from kebab_eval_pipeline.cli.record_session import RecordSession, system_search
from kebab_eval_pipeline.contract import Hit
from kebab_eval_pipeline.foundation import atomic
from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.golden.load import load_golden
from kebab_eval_pipeline.golden.model import GoldenQuery, Support
from kebab_eval_pipeline.golden.record import (
    RecordConflict,
    RecordFile,
    SelectionError,
    build_entry,
    generated_id,
    hit_support,
    out_problem,
    parse_selection,
    parse_tags,
    parse_yes_no,
    typed_id_problem,
)
from kebab_eval_pipeline.systems.factory import build_system
from tests.conftest import write
from tests.test_cli import cli, cli_env, no_traceback

REPO = Path(__file__).resolve().parents[2]
QUESTION_PROMPT = "question (empty line to finish)> "
RELEVANT_PROMPT = "relevant hits (1 3, 1-3, all, none; skip drops the question)> "
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


@pytest.fixture(scope="module")
def index_cache(tmp_path_factory):
    """One reference index of the demo corpus for the module's processes (built on first use)."""
    return tmp_path_factory.mktemp("index-cache")


@pytest.fixture(scope="module")
def reference(index_cache):
    before = os.environ.get("KEBAB_EVAL_INDEX_CACHE")
    os.environ["KEBAB_EVAL_INDEX_CACHE"] = str(index_cache)
    try:
        yield build_system(load_settings(None))
    finally:
        if before is None:
            del os.environ["KEBAB_EVAL_INDEX_CACHE"]
        else:
            os.environ["KEBAB_EVAL_INDEX_CACHE"] = before


def top_hits(system, question: str, k: int = 5) -> list[Hit]:
    hits, error = system_search(system, k)(question, "q-x")
    assert error is None
    return list(hits)


# ------------------------------------------------------------------------------- the pure part


@pytest.mark.parametrize(
    ("typed", "n", "expected"),
    [
        ("1 3", 5, (1, 3)),
        ("1-3", 5, (1, 2, 3)),
        ("3,1  2", 5, (1, 2, 3)),
        ("1-2 2-4", 5, (1, 2, 3, 4)),
        (" 5 ", 5, (5,)),
        ("none", 5, ()),
        ("NONE", 0, ()),
        ("all", 3, (1, 2, 3)),
        ("All", 0, ()),
    ],
)
def test_selection(typed, n, expected):
    assert parse_selection(typed, n) == expected


@pytest.mark.parametrize(
    ("typed", "n", "message"),
    [
        ("", 5, "nothing typed: type the numbers of the relevant hits"),
        ("  , ", 5, "nothing typed"),
        ("x", 5, "'x' is not a hit number or range"),
        ("1.5", 5, "'1.5' is not a hit number or range"),
        ("-1", 5, "'-1' is not a hit number or range"),
        ("1-", 5, "'1-' is not a hit number or range"),
        ("none 1", 5, "'none' is not a hit number or range"),
        ("0", 5, "'0': no such hit (shown: 1-5)"),
        ("6", 5, "'6': no such hit (shown: 1-5)"),
        ("2", 1, "'2': no such hit (shown: 1)"),
        ("1", 0, "'1': no such hit (shown: none)"),
        ("3-1", 5, "'3-1': a range goes up (1-3?)"),
        ("9" * 40, 5, "is not a hit number or range"),
    ],
)
def test_selection_junk_says_why(typed, n, message):
    with pytest.raises(SelectionError) as caught:
        parse_selection(typed, n)
    assert message in str(caught.value)


def _ranges(chosen: list[int]) -> list[str]:
    """``[1, 2, 3, 5]`` → ``["1-3", "5"]``."""
    out, start = [], None
    for i, n in enumerate(chosen):
        start = n if start is None else start
        if i + 1 == len(chosen) or chosen[i + 1] != n + 1:
            out.append(f"{start}-{n}" if n > start else str(n))
            start = None
    return out


@given(
    n=st.integers(1, 30),
    data=st.data(),
    sep=st.sampled_from([" ", ",", ", ", "  "]),
    as_ranges=st.booleans(),
)
@settings(max_examples=200)
def test_selection_round_trip(n, data, sep, as_ranges):
    chosen = sorted(data.draw(st.sets(st.integers(1, n), max_size=n)))
    if not chosen:
        typed = "none"
    elif as_ranges:
        typed = sep.join(_ranges(chosen))
    else:
        typed = sep.join(map(str, data.draw(st.permutations(chosen))))
    assert parse_selection(typed, n) == tuple(chosen)


def test_answers_and_tags():
    assert [parse_yes_no(t) for t in ("y", "YES", " n ", "No", "", "maybe")] == [
        True,
        True,
        False,
        False,
        None,
        None,
    ]
    assert parse_tags(" bread, sourdough  bread,,temp ") == ["bread", "sourdough", "temp"]
    assert parse_tags("") == []


def test_supports_are_the_chosen_hits_anchors(reference):
    hits = top_hits(reference, "sourdough starter temperature")
    entry = build_entry("q-0001", "  sourdough starter temperature? ", hits, (1, 3), tags=["bread"])
    assert (
        entry.query == "sourdough starter temperature?" and entry.answerable and entry.category == "general"
    )
    assert entry.supports == [
        Support(
            rel_path=h.doc_path, heading_path=h.heading_path, line_start=h.line_start, line_end=h.line_end
        )
        for h in (hits[0], hits[2])
    ]
    # hand-checked against the demo corpus: the two chunks of the sourdough page the table shows
    assert [(s.rel_path, s.heading_path, s.line_start, s.line_end) for s in entry.supports] == [
        ("grains-and-bread/sourdough-starter.md", ["Sourdough Starter"], 6, 10),
        ("grains-and-bread/sourdough-starter.md", ["Sourdough Starter", "Feeding schedule"], 32, 43),
    ]


def test_anchor_of_hits_without_a_path():
    assert hit_support(Hit(rank=1, doc_id="D7", chunk_id="c9", line_start=4)) == Support(
        doc_id="D7", line_start=4
    )
    # nothing names the document: the chunk id keeps the support matchable; else the snippet
    assert hit_support(Hit(rank=1, chunk_id="c9", heading_path=["A"])) == Support(
        chunk_id="c9", heading_path=["A"]
    )
    assert hit_support(Hit(rank=1, snippet="the text")) == Support(snippet="the text")


def test_an_entry_the_golden_checks_refuse_is_not_built():
    with pytest.raises(ValueError, match="an unanswerable question has no supports"):
        build_entry("q-1", "why?", [Hit(rank=1, doc_path="a.md")], (1,), answerable=False)
    with pytest.raises(ValueError, match="line_start 9 > line_end 3"):
        build_entry("q-1", "why?", [Hit(rank=1, doc_path="a.md", line_start=9, line_end=3)], (1,))
    with pytest.raises(ValueError, match="support names no evidence"):
        build_entry("q-1", "why?", [Hit(rank=1)], (1,))


def test_ids():
    assert generated_id(set()) == "q-0001"
    assert generated_id({"fact-001", "q-x"}) == "q-0001"
    assert generated_id({"q-0001", "q-0007", "fact-1"}) == "q-0008"
    assert generated_id({"q-0009", "q-0010", "q-00011"}) == "q-0012"
    assert typed_id_problem("my-id", {"q-0001"}) is None
    assert typed_id_problem("q-0001", {"q-0001"}) == "'q-0001' is already in the file"
    assert (
        typed_id_problem("a b", set())
        == "the id holds whitespace or a control character (U+0020 at position 2)"
    )


HAND_WRITTEN = """\
# hand-written: comments, quoting and indentation stay as they are
schema_version: "1"
name: hand
queries:
  - id: q-0003   # the curator's own
    query: "How warm?"
    tags: [bread]
    supports:
      - rel_path: grains-and-bread/sourdough-starter.md
"""


def test_append_keeps_the_earlier_bytes_and_reads_back(tmp_path, reference):
    path = write(tmp_path / "g.yaml", HAND_WRITTEN)
    golden = RecordFile.open(path)
    assert golden.in_place and golden.next_id() == "q-0004" and golden.name == "hand"
    hits = top_hits(reference, "sourdough starter temperature")
    first = build_entry(golden.next_id(), "sourdough temperature?", hits, (1, 3), category="factual")
    assert golden.append(first) is True
    second = build_entry(golden.next_id(), "price of the enterprise plan?", hits, (), answerable=False)
    assert second.id == "q-0005" and golden.append(second) is True
    text = path.read_text()
    assert text.startswith(HAND_WRITTEN)
    # the new items are indented as the curator's
    assert text[len(HAND_WRITTEN) :].startswith("  - id: q-0004\n    query: sourdough temperature?\n")
    loaded = load_golden(path)
    assert loaded.name == "hand"
    assert [q.id for q in loaded.golden.queries] == ["q-0003", "q-0004", "q-0005"]
    assert loaded.golden.queries[1:] == [first, second]
    assert not [p for p in tmp_path.iterdir() if p.suffix == ".tmp"]


def test_jsonl_appends_lines_and_json_is_written_again(tmp_path):
    hit = Hit(rank=1, doc_path="a.md", heading_path=["A", "B"], line_start=3, line_end=8)
    lines = write(tmp_path / "g.jsonl", '{"id": "x1", "query": "kept as typed"}')  # no final newline
    golden = RecordFile.open(lines)
    golden.append(build_entry(golden.next_id(), "q?", [hit], (1,)))
    assert lines.read_text().splitlines() == [
        '{"id": "x1", "query": "kept as typed"}',
        '{"id": "q-0001", "query": "q?", "supports": [{"rel_path": "a.md", "heading_path": ["A", "B"], '
        '"line_start": 3, "line_end": 8}]}',
    ]
    doc = write(
        tmp_path / "g.json", '{"schema_version": "1", "name": "j", "queries": [{"id": "x1", "query": "a"}]}'
    )
    golden = RecordFile.open(doc)
    assert not golden.in_place
    assert golden.append(build_entry("q-0001", "q?", [hit], ())) is False
    assert [q.id for q in load_golden(doc).golden.queries] == ["x1", "q-0001"]
    assert load_golden(doc).name == "j"


def test_an_empty_start(tmp_path):
    flow = write(tmp_path / "empty.yaml", 'schema_version: "1"\nname: fresh\nqueries: []\n')
    golden = RecordFile.open(flow)
    assert golden.queries == [] and golden.name == "fresh" and not golden.in_place
    golden.append(GoldenQuery(id="q-0001", query="a?", answerable=False))
    assert load_golden(flow).name == "fresh"
    blank = write(tmp_path / "blank.yml", "\n")
    golden = RecordFile.open(blank)
    golden.append(GoldenQuery(id="q-0001", query="a?", answerable=False))
    assert yaml.safe_load(blank.read_text()) == {
        "schema_version": "1",
        "name": "blank",
        "queries": [{"id": "q-0001", "query": "a?", "answerable": False}],
    }
    absent = tmp_path / "new" / "deeper" / "g.yaml"
    RecordFile.open(absent).append(GoldenQuery(id="q-0001", query="a?", answerable=False))
    assert len(load_golden(absent)) == 1


texts = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=30).filter(
    lambda t: t.strip()
)


@given(
    entries=st.lists(
        st.tuples(
            texts,
            st.lists(st.text("abcxyz-_ ", min_size=1, max_size=6), max_size=3),
            # distinct anchors: the same one selected twice is a duplicate support, refused
            st.lists(
                st.tuples(texts, st.lists(texts, max_size=3), st.integers(1, 10**6), st.integers(0, 50)),
                max_size=3,
                unique_by=lambda anchor: (anchor[0], tuple(anchor[1]), anchor[2], anchor[3]),
            ),
        ),
        min_size=1,
        max_size=4,
    ),
    suffix=st.sampled_from([".yaml", ".jsonl", ".json"]),
)
@settings(max_examples=12)
def test_every_append_reads_back_through_the_golden_loader(tmp_path_factory, entries, suffix):
    path = tmp_path_factory.mktemp("prop") / f"g{suffix}"
    golden = RecordFile.open(path)
    expected = []
    before = ""
    for question, tags, anchors in entries:
        hits = [
            Hit(rank=i + 1, doc_path=p, heading_path=h, line_start=start, line_end=start + span)
            for i, (p, h, start, span) in enumerate(anchors)
        ]
        entry = build_entry(
            golden.next_id(), question, hits, tuple(range(1, len(hits) + 1)), tags=parse_tags(" ".join(tags))
        )
        golden.append(entry)
        expected.append(entry)
        text = path.read_text(encoding="utf-8")
        if suffix != ".json":
            assert text.startswith(before)  # earlier bytes kept (the first write makes the file)
        before = text
        assert load_golden(path, fmt="canonical").golden.queries == expected
    assert [q.id for q in expected] == [f"q-{n:04d}" for n in range(1, len(entries) + 1)]


def test_a_list_that_is_not_the_last_key_is_written_again(tmp_path):
    text = "queries:\n  - id: a\n    query: x\nname: after\n"
    path = write(tmp_path / "g.yaml", text)
    golden = RecordFile.open(path)
    assert not golden.in_place
    assert golden.append(GoldenQuery(id="b", query="y", answerable=False)) is False
    loaded = load_golden(path)
    assert loaded.name == "after" and [q.id for q in loaded.golden.queries] == ["a", "b"]
    assert golden.in_place  # the canonical layout ends with its list


def test_an_append_that_would_change_an_earlier_entry_rewrites_the_file(tmp_path):
    # The last entry ends in a kept block scalar without a final line break: text added after it
    # would become part of its notes. The read-back check sees it; the file is written as a whole.
    path = write(tmp_path / "g.yaml", "queries:\n- id: a\n  query: x\n  notes: |+\n    kept")
    golden = RecordFile.open(path)
    assert golden.in_place
    assert golden.append(GoldenQuery(id="b", query="y", answerable=False)) is False
    assert [(q.id, q.notes) for q in load_golden(path).golden.queries] == [("a", "kept"), ("b", "")]
    with pytest.raises(ValueError, match="the id 'b' is already in"):
        golden.append(GoldenQuery(id="b", query="z", answerable=False))
    # now in the canonical layout: the next entry is appended after it again
    before = path.read_text()
    assert golden.append(GoldenQuery(id="c", query="z", answerable=False)) is True
    assert path.read_text().startswith(before)


def test_a_file_changed_behind_the_session_is_not_overwritten(tmp_path):
    path = write(tmp_path / "g.yaml", HAND_WRITTEN)
    golden = RecordFile.open(path)
    edited = HAND_WRITTEN.replace("How warm?", "How warm, exactly?")
    path.write_text(edited)
    with pytest.raises(RecordConflict, match="changed during the session"):
        golden.append(GoldenQuery(id="q-9", query="x", answerable=False))
    assert path.read_text() == edited


def test_bad_or_foreign_files_are_refused(tmp_path):
    dup = write(tmp_path / "dup.yaml", "queries:\n  - id: a\n    query: x\n  - id: a\n    query: y\n")
    with pytest.raises(InputError) as caught:
        RecordFile.open(dup)
    assert (
        caught.value.offenders[0].position == "line 4" and "duplicate id" in caught.value.offenders[0].reason
    )
    kebab = write(tmp_path / "kebab.yaml", "- id: a\n  query: x\n  expected_doc_ids: [d]\n")
    with pytest.raises(InputError) as caught:
        RecordFile.open(kebab)
    assert "it is in the kebab format" in caught.value.offenders[0].reason
    assert caught.value.offenders[0].field == "--out"


def test_out_places_that_cannot_be_written(tmp_path):
    a_file = write(tmp_path / "f.txt", "x")
    assert out_problem(a_file / "g.yaml") == f"{a_file} is not a folder"
    assert out_problem(tmp_path / "g.txt") == "use .yaml, .yml, .json, .jsonl"
    (tmp_path / "d.yaml").mkdir()
    assert out_problem(tmp_path / "d.yaml") == "is a folder"
    assert out_problem(Path("/dev/null.yaml").parent / "null") == "use .yaml, .yml, .json, .jsonl"
    assert out_problem(tmp_path / "new" / "g.yaml") is None


# ------------------------------------------------------------------- the loop, a failing system


def typed(*lines: str):
    """An ``ask`` that answers ``lines`` in turn, then reports the end of input (as input() does)."""
    answers = iter(lines)

    def ask(prompt: str) -> str:
        try:
            return next(answers)
        except StopIteration:
            raise EOFError from None

    return ask


FLAKY = """\
import json, pathlib, sys
query, marker = sys.argv[1], pathlib.Path(sys.argv[2])
if "boom" in query:
    sys.exit("the index is on fire")
if not marker.exists():  # the first call fails, a retry succeeds
    marker.write_text("called")
    sys.exit("warming up")
print(json.dumps({"hits": [
    {"doc_path": "a.md", "heading_path": ["A"], "line_start": 1, "line_end": 4, "score": 2.0},
    {"doc_path": "b.md", "heading_path": ["B", "C"], "line_start": 10, "line_end": 12, "score": 1.0},
]}))
"""


def test_a_failing_system_is_shown_and_the_user_retries_or_skips(tmp_path):
    script = write(tmp_path / "flaky.py", FLAKY)
    system = build_system(
        settings_from_dict(
            {
                "system": {
                    "kind": "command",
                    "search_argv": [sys.executable, str(script), "{query}", str(tmp_path / "marker")],
                }
            }
        )
    )
    console = Console(file=(log := open(tmp_path / "log.txt", "w+")), width=200)  # noqa: SIM115
    golden = RecordFile.open(tmp_path / "g.yaml")
    session = RecordSession(
        golden,
        system_search(system, 5),
        typed("boom please", "", "what is in a?", "y", "1", "", "", "", ""),
        console,
    )
    assert session.run() == 0
    log.seek(0)
    shown = log.read()
    assert "system failed: exit_code" in shown and "the index is on fire" in shown
    assert "warming up" in shown and "skipped: type the question again" in shown
    assert [q.model_dump(exclude_defaults=True) for q in load_golden(golden.path).golden.queries] == [
        {
            "id": "q-0001",
            "query": "what is in a?",
            "supports": [{"rel_path": "a.md", "heading_path": ["A"], "line_start": 1, "line_end": 4}],
        }
    ]
    assert "recorded 1 query (q-0001)" in shown


def test_interrupt_and_end_of_input_end_the_session(tmp_path):
    def interrupted(prompt):
        raise KeyboardInterrupt

    golden = RecordFile.open(tmp_path / "g.yaml")
    console = Console(file=open(os.devnull, "w"))  # noqa: SIM115
    assert RecordSession(golden, lambda q, i: ([], None), interrupted, console).run() == 130
    search = lambda q, i: ([], None)  # noqa: E731  (a system that finds nothing)
    ask = typed("a question with no hits", "n")
    assert RecordSession(golden, search, ask, console).run() == 0  # the input ends mid-entry
    assert not golden.path.exists()


# ------------------------------------------------------------------- through a pseudo-terminal


@pytest.fixture
def env(tmp_path, index_cache):
    environment = cli_env(tmp_path)
    # a real terminal type (rich lays a "dumb" one out at 80 columns), without colours; the size
    # of the pseudo-terminal spelled out too, since rich takes COLUMNS/LINES over the terminal's
    # own and a test process may carry them (long temporary paths would then wrap)
    environment.update(
        KEBAB_EVAL_INDEX_CACHE=str(index_cache),
        TERM="xterm",
        NO_COLOR="1",
        PYTHONPATH=str(REPO),
        COLUMNS="320",
        LINES="60",
    )
    return environment


@pytest.fixture
def config(tmp_path):
    return write(tmp_path / "eval.yaml", "system:\n  kind: reference\nk: [1, 5]\nanswers: false\n")


def spawn(env, *args, sigint_ignored: bool = False) -> pexpect.spawn:
    """The recorder on a pseudo-terminal; ``sigint_ignored``: started with SIGINT ignored, as a
    process started from a parent that ignores it inherits (``nohup``, some CI runners, a test
    worker that ignored it)."""
    return pexpect.spawn(
        sys.executable,
        ["-m", "kebab_eval_pipeline.cli", "golden", "record", *map(str, args)],
        env=env,
        cwd=str(REPO),
        dimensions=(60, 320),  # wide enough that every table row is one line
        encoding="utf-8",
        timeout=60,
        preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if sigint_ignored else None,
    )


def table_rows(shown: str) -> list[dict]:
    """The hit rows of the table printed before a prompt: their anchors, as shown."""
    rows = []
    for line in ANSI.sub("", shown).replace("\r", "").splitlines():
        cells = [c.strip() for c in line.split("│")]
        if len(cells) == 8 and cells[1].isdigit():
            start, _, end = cells[4].partition("-")
            rows.append(
                {
                    "rel_path": cells[2],
                    "heading_path": cells[3].split(" > "),
                    "line_start": int(start),
                    "line_end": int(end),
                }
            )
    return rows


def ask(child, question: str, selection: str | None) -> list[dict]:
    """Type ``question``; mark ``selection`` (None: the table must be empty); returns the rows."""
    child.expect_exact(QUESTION_PROMPT)
    child.sendline(question)
    if selection is None:
        child.expect_exact("no hits")
        return []
    child.expect_exact(RELEVANT_PROMPT)
    rows = table_rows(child.before)
    child.sendline(selection)
    return rows


def label(child, answerable: str | None = None, category="", tags="", qid="") -> None:
    if answerable is not None:
        child.expect_exact("is the question answerable? [y/n]> ")
        child.sendline(answerable)
    for prompt, typed in (("category [general]> ", category), ("tags (comma or space separated) []> ", tags)):
        child.expect_exact(prompt)
        child.sendline(typed)
    child.expect(r"id \[q-\d{4}\]> ")
    child.sendline(qid)


def test_a_session_on_a_terminal_then_validate_and_run(env, config, tmp_path, reference):
    out = tmp_path / "recorded.yaml"
    child = spawn(env, "--config", config, "--out", out, "--k", "5")
    child.expect_exact("recording into")
    rows1 = ask(child, "sourdough starter temperature", "1 3")
    label(child)
    child.expect_exact("recorded q-0001 (2 supports)")
    rows2 = ask(child, "enterprise plan price", "nonsense")
    child.expect_exact("'nonsense' is not a hit number or range")  # then the prompt again
    child.expect_exact(RELEVANT_PROMPT)
    child.sendline("none")
    label(child, answerable="n")
    child.expect_exact("recorded q-0002 (0 supports)")
    rows3 = ask(child, "how much salt for sauerkraut", "2-3")
    label(child, category="factual", tags="kraut, salt", qid="q-0001")
    child.expect_exact("'q-0001' is already in the file")
    child.expect_exact("id [q-0003]> ")
    child.sendline("kraut-salt")
    child.expect_exact("recorded kraut-salt (2 supports)")
    child.expect_exact(QUESTION_PROMPT)
    child.sendline("")
    child.expect_exact("recorded 3 queries (q-0001, q-0002, kraut-salt)")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert "Traceback" not in child.before

    # the table showed the system's hits as they are (an independent call to the same system)
    for rows, question in ((rows1, "sourdough starter temperature"), (rows3, "how much salt for sauerkraut")):
        assert len(rows) == 5
        assert rows == [
            {
                "rel_path": h.doc_path,
                "heading_path": h.heading_path,
                "line_start": h.line_start,
                "line_end": h.line_end,
            }
            for h in top_hits(reference, question)
        ]
    assert len(rows2) >= 1
    recorded = load_golden(out).golden.queries
    assert [q.model_dump(exclude_defaults=True) for q in recorded] == [
        {"id": "q-0001", "query": "sourdough starter temperature", "supports": [rows1[0], rows1[2]]},
        {"id": "q-0002", "query": "enterprise plan price", "answerable": False},
        {
            "id": "kraut-salt",
            "query": "how much salt for sauerkraut",
            "category": "factual",
            "tags": ["kraut", "salt"],
            "supports": [rows3[1], rows3[2]],
        },
    ]

    valid = cli(env, "golden", "validate", str(out), "--config", str(config))
    assert valid.returncode == 0, valid.stderr
    assert "ok: 3 queries" in valid.stdout

    # Scored by a real run: the marked hits are found where they were shown. q-0001 marked ranks 1
    # and 3 (reciprocal rank 1), kraut-salt ranks 2 and 3 (1/2): hit@1 = 1/2, mrr = 3/4, hit@5 = 1.
    run = cli(env, "run", "--config", str(config), "--golden", str(out), "--run-id", "recorded-1")
    no_traceback(run)
    assert run.returncode == 0, run.stderr
    metrics = dict(re.findall(r"│ (\S+)\s+│\s+(\S+) │ 2 │", run.stdout))
    assert metrics["hit@1"] == "0.5000" and metrics["mrr"] == "0.7500" and metrics["hit@5"] == "1.0000"
    assert metrics["recall@5"] == "1.0000"
    assert "match: auto → span (2 queries)" in run.stdout


def test_killed_mid_session_the_first_entry_survives(env, config, tmp_path):
    out = tmp_path / "g.yaml"
    child = spawn(env, "--config", config, "--out", out)
    rows = ask(child, "sauerkraut salt", "1")
    label(child)
    child.expect_exact("recorded q-0001 (1 supports)")
    ask(child, "kimchi", "2")
    child.expect_exact("category [general]> ")
    child.kill(signal.SIGKILL)
    child.expect(pexpect.EOF)
    child.close()
    assert child.signalstatus == signal.SIGKILL
    queries = load_golden(out).golden.queries
    assert [q.model_dump(exclude_defaults=True) for q in queries] == [
        {"id": "q-0001", "query": "sauerkraut salt", "supports": [rows[0]]}
    ]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith((".g", "g"))) == [
        ".g.yaml.lock",
        "g.yaml",
    ]


def test_ctrl_c_ends_the_session_cleanly(env, config, tmp_path):
    out = write(tmp_path / "g.yaml", HAND_WRITTEN)
    # started with SIGINT ignored (Python then installs no KeyboardInterrupt handler): an
    # interactive session still ends on Ctrl-C
    child = spawn(env, "--config", config, "--out", out, sigint_ignored=True)
    ask(child, "sourdough", "all")
    label(child)
    child.expect_exact("recorded q-0004")
    ask(child, "sauerkraut", "1")
    child.expect_exact("category [general]> ")
    child.sendintr()
    child.expect_exact("interrupted")
    child.expect_exact(f"recorded 1 query (q-0004) in {out}: 2 in the file")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 130 and "Traceback" not in child.before
    assert out.read_text().startswith(HAND_WRITTEN)
    assert [q.id for q in load_golden(out).golden.queries] == ["q-0003", "q-0004"]


def test_a_scripted_session_reads_lines_from_a_pipe(env, config, tmp_path):
    out = tmp_path / "g.jsonl"
    typed = "sourdough starter temperature\n2\n\nbread\n\n\n"
    args = ["golden", "record", "--config", str(config), "--out", str(out), "--k", "3"]
    piped = subprocess.run(
        [sys.executable, "-m", "kebab_eval_pipeline.cli", *args],
        input=typed,
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert piped.returncode == 0, piped.stderr
    # the answers are echoed after their prompts, so the log reads as a session
    assert "relevant hits (1 3, 1-3, all, none; skip drops the question)> 2\n" in piped.stdout
    assert piped.stdout.endswith("recorded 1 query (q-0001) in " + str(out) + ": 1 in the file\n")
    assert [q.model_dump(exclude_defaults=True) for q in load_golden(out).golden.queries] == [
        {
            "id": "q-0001",
            "query": "sourdough starter temperature",
            "tags": ["bread"],
            "supports": [
                {
                    "rel_path": "grains-and-bread/sourdough-starter.md",
                    "heading_path": ["Sourdough Starter", "Storage and revival"],
                    "line_start": 57,
                    "line_end": 62,
                }
            ],
        }
    ]


def test_an_invalid_out_file_is_refused_before_anything(env, tmp_path):
    bad = "queries:\n  - id: a\n    query: [unclosed\n"
    out = write(tmp_path / "g.yaml", bad)
    # a config whose system cannot be built: the file is refused first
    broken = write(
        tmp_path / "eval.yaml", f"system:\n  kind: reference\n  corpus: {tmp_path / 'no-corpus'}\n"
    )
    child = spawn(env, "--config", broken, "--out", out)
    child.expect(pexpect.EOF)
    child.close()
    shown = ANSI.sub("", child.before).replace("\r\n", "\n")
    assert child.exitstatus == 2, shown
    assert f"{out}:line 4, column 1" in shown and "invalid YAML" in shown and "no-corpus" not in shown
    assert out.read_text() == bad

    # a second session on one file: refused while the first holds it
    taken = write(tmp_path / "taken.yaml", HAND_WRITTEN)
    with atomic.locked(taken):
        second = cli(env, "golden", "record", "--config", str(broken), "--out", str(taken))
    assert second.returncode == 2, second.stderr
    assert f"{taken} — field '--out': another golden record session is writing it" in second.stderr
    assert taken.read_text() == HAND_WRITTEN

    unwritable = cli(env, "golden", "record", "--config", str(broken), "--out", str(out / "x.yaml"))
    assert unwritable.returncode == 2 and "Traceback" not in unwritable.stderr
    assert unwritable.stderr.strip().endswith(f"{out / 'x.yaml'} — field '--out': {out} is not a folder")
    assert "no-corpus" not in unwritable.stderr
