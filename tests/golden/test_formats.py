"""Every golden format read from a realistic file, every mapped field checked exactly (SPEC §3.2).

Fixtures live in ``tests/golden/fixtures/`` (one per format, in the style of the seeds). Expected
queries are spelled out as full :class:`GoldenQuery` objects, so a field that is dropped, renamed
or defaulted differently fails the comparison.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
import yaml

from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.golden.load import FORMATS, golden_content_sha256, load_golden
from kebab_eval_pipeline.golden.model import GoldenQuery, Support
from tests.conftest import write

FIXTURES = Path(__file__).parent / "fixtures"

# fixture file → (format it is in, number of queries, ids in file order)
FIXTURE_FILES: dict[str, tuple[str, int]] = {
    "ckv_queries.yaml": ("ckv", 8),
    "kebab_golden.yaml": ("kebab", 9),
    "support_anchor.yaml": ("supports", 8),
    "support_anchor.jsonl": ("supports", 7),
    "wfgy_gold.jsonl": ("wfgy", 8),
    "canonical.yaml": ("canonical", 6),
    "canonical.json": ("canonical", 7),
    "canonical.jsonl": ("canonical", 7),
}
READER_NAMES = [f for f in FORMATS if f != "auto"]


def fixture(name: str) -> Path:
    return FIXTURES / name


def by_id(path: Path, fmt: str = "auto") -> dict[str, GoldenQuery]:
    return load_golden(path, fmt=fmt).golden.by_id()


# ---------------------------------------------------------------------------------------------
# detection: auto and explicit give the same set, the right format, no warnings
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(FIXTURE_FILES))
def test_fixture_loads_auto_and_explicit(name: str):
    fmt, count = FIXTURE_FILES[name]
    path = fixture(name)
    auto = load_golden(path)
    explicit = load_golden(path, fmt=fmt)
    assert auto.golden.format == fmt
    assert explicit.golden.format == fmt
    assert auto.golden.queries == explicit.golden.queries
    assert len(auto.golden.queries) == count
    assert auto.warnings == [] and explicit.warnings == []
    assert auto.files == [str(path)]
    assert auto.golden.source == str(path)
    assert auto.golden.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert auto.golden.schema_version == "1"


@pytest.mark.parametrize("name", ["canonical.yaml", "canonical.json", "canonical.jsonl"])
def test_canonical_fixtures_use_every_field(name: str):
    text = fixture(name).read_text(encoding="utf-8")
    if name.endswith(".jsonl"):
        queries = [json.loads(line) for line in text.splitlines()]
    else:
        queries = yaml.safe_load(text)["queries"]
    query_keys = {k for q in queries for k in q}
    support_keys = {k for q in queries for s in q.get("supports", []) for k, v in s.items() if v is not None}
    assert query_keys == set(GoldenQuery.model_fields)
    assert support_keys == set(Support.model_fields)


# ---------------------------------------------------------------------------------------------
# ckv fixture YAML
# ---------------------------------------------------------------------------------------------


def test_ckv_fields():
    g = load_golden(fixture("ckv_queries.yaml")).golden
    assert [q.id for q in g.queries] == ["q1", "q2", "q3", "q4", "q5", "w1", "w2", "w3"]
    assert g.name == "ckv_queries"  # no name in the file: the file stem
    q = g.by_id()
    assert q["q1"] == GoldenQuery(
        id="q1",
        query="where does the server start listening on its port",
        answerable=True,
        category="code",  # a symbol makes it a code query
        supports=[
            Support(
                rel_path="server.go", line_start=22, line_end=29, symbol="Server.Listen", symbol_kind="Method"
            )
        ],
    )
    assert q["q2"] == GoldenQuery(
        id="q2",
        query="how are candidate chunks reranked with bm25",
        category="code",
        difficulty="medium",
        tags=["ranking", "bm25"],
        supports=[
            Support(
                rel_path="internal/query/rerank.go",
                line_start=40,
                line_end=88,
                symbol="rerankBM25",
                symbol_kind="Function",
            )
        ],
        notes="rerank only runs when Options.EnableBM25Rerank is set",
    )
    assert q["q3"].lang == "en" and q["q3"].supports[0].symbol_kind == "Struct"
    assert q["q4"].category == "chunking"  # an explicit category wins
    assert q["q4"].supports == [
        Support(
            rel_path="internal/chunk/golang.go",
            line_start=101,
            line_end=101,
            symbol="(*Chunker).Split",
            symbol_kind="Method",
        )
    ]
    assert q["q5"] == GoldenQuery(
        id="q5",
        query="why did we pick sqlite-vec over a separate vector database",
        category="general",  # no symbol
        supports=[
            Support(
                rel_path="docs/design.md",
                line_start=120,
                line_end=164,
                section="§4 Vector store — decision matrix",
            )
        ],
        expected_kind="doc_section",
    )
    # pending with the [0, 0] placeholder: the file alone (plus the informational section)
    assert q["w1"] == GoldenQuery(
        id="w1",
        query="why was the tree-sitter chunker replaced by go/ast",
        pending=True,
        supports=[Support(rel_path="docs/adr/0007-chunker.md", section="Decision")],
        expected_kind="doc_section",
        notes="docs corpus not indexed yet",
    )
    # pending with no line_range at all
    assert q["w2"] == GoldenQuery(
        id="w2",
        query="which PR introduced hallucination checks against the source tree",
        pending=True,
        supports=[Support(rel_path="PULLS.md")],
        expected_kind="pr_summary",
    )
    # pending with a real range keeps it
    assert q["w3"].pending and q["w3"].category == "code"
    assert q["w3"].supports == [
        Support(
            rel_path="internal/index/writer.go",
            line_start=57,
            line_end=73,
            symbol="Writer.Flush",
            symbol_kind="Method",
        )
    ]
    assert q["w3"].expected_kind == "commit_message"
    assert q["w3"].notes == "commit corpus pending; lines point at today's code"


def test_ckv_line_range_of_wrong_length_is_an_offender(tmp_path: Path):
    path = write(
        tmp_path / "ckv.yaml",
        'schema_version: "1"\nqueries:\n  - id: q1\n    intent: x\n'
        "    expected: {file: a.go, line_range: [3]}\n",
    )
    with pytest.raises(InputError) as exc:
        load_golden(path)
    (offender,) = exc.value.offenders
    assert offender.file == str(path)
    assert offender.position == "line 3"
    assert offender.query_id == "q1"
    assert offender.field == "expected.line_range"
    assert offender.reason == "needs [start, end], got 1 values"


def test_ckv_zero_range_outside_pending_is_refused(tmp_path: Path):
    path = write(
        tmp_path / "ckv.yaml",
        'schema_version: "1"\nqueries:\n  - id: q1\n    intent: x\n'
        "    expected: {file: a.go, line_range: [0, 0]}\n",
    )
    with pytest.raises(InputError) as exc:
        load_golden(path)
    (offender,) = exc.value.offenders
    assert (offender.position, offender.field) == ("line 3", "supports[0]")
    assert offender.reason == "line numbers must be positive (1-based)"


def test_ckv_recorded_entry_timestamp_is_a_known_field(tmp_path: Path):
    """Regression: the seed's ``timestamp`` (written by RecordSession) used to warn as unknown."""
    path = write(
        tmp_path / "recorded.yaml",
        'schema_version: "1"\nqueries:\n  - id: r1\n    intent: where is Listen\n'
        "    expected: {file: server.go, line_range: [22, 29]}\n"
        "    recorded_via: record-session\n"
        '    timestamp: "2025-03-02T10:14:00Z"\n',
    )
    assert load_golden(path).warnings == []


@pytest.mark.parametrize(
    ("value", "pending"), [('"false"', False), ("no", False), ('"true"', True), ("yes", True)]
)
def test_ckv_pending_is_parsed_like_the_canonical_bool(tmp_path: Path, value: str, pending: bool):
    """Regression: ``bool()`` made a quoted ``pending: "false"`` pending (and skipped its line checks)."""
    path = write(
        tmp_path / "ckv.yaml",
        'schema_version: "1"\nqueries:\n  - id: q1\n    intent: x\n'
        f"    pending: {value}\n    expected: {{file: a.go, line_range: [5, 9]}}\n",
    )
    assert load_golden(path).golden.queries[0].pending is pending


def test_ckv_pending_junk_is_an_offender(tmp_path: Path):
    path = write(
        tmp_path / "ckv.yaml",
        'schema_version: "1"\nqueries:\n  - id: q1\n    intent: x\n'
        "    pending: [sometimes]\n    expected: {file: a.go, line_range: [0, 0]}\n",
    )
    with pytest.raises(InputError) as exc:
        load_golden(path)
    (offender,) = exc.value.offenders
    assert (offender.position, offender.query_id, offender.field) == ("line 5", "q1", "pending")
    assert offender.reason == "Input should be a valid boolean"


# ---------------------------------------------------------------------------------------------
# kebab list YAML
# ---------------------------------------------------------------------------------------------


def test_kebab_fields():
    g = load_golden(fixture("kebab_golden.yaml")).golden
    assert [q.id for q in g.queries] == [
        "k-001",
        "k-002",
        "k-003",
        "k-004",
        "k-005",
        "k-006",
        "k-007",
        "k-008",
        "42",  # YAML int id kept as text
    ]
    q = g.by_id()
    search_doc = "docs/components/search/README.md"
    assert q["k-001"] == GoldenQuery(
        id="k-001",
        query="하이브리드 검색은 lexical 과 vector 점수를 어떻게 합치나요?",
        lang="ko",
        answerable=True,
        category="general",
        difficulty="medium",
        group="hybrid-fusion",
        # one expected document: each chunk support also names it
        supports=[
            Support(chunk_id="search-readme#rrf-1", doc_id=search_doc),
            Support(chunk_id="search-readme#rrf-2", doc_id=search_doc),
        ],
        must_contain=["RRF"],
        forbidden=["BM25 only"],
    )
    assert q["k-002"] == GoldenQuery(
        id="k-002",
        query="How does hybrid search fuse lexical and vector scores?",
        lang="en",
        difficulty="medium",
        group="hybrid-fusion",
        supports=[Support(doc_id=search_doc)],  # doc ids become doc supports without chunk ids
        must_contain=["RRF", "k=60"],
    )
    # two documents + chunk ids: chunk supports only (which chunk belongs to which doc is unknown)
    assert q["k-003"].supports == [
        Support(chunk_id="rag-readme#refusal"),
        Support(chunk_id="llm-readme#ollama"),
    ]
    assert q["k-003"].forbidden == [] and q["k-003"].must_contain == ["grounded", "Ollama"]
    assert q["k-003"].difficulty == "hard"
    # expected_doc_ids: [] → should refuse
    assert q["k-004"] == GoldenQuery(
        id="k-004",
        query="What is the capital of France?",
        lang="en",
        answerable=False,
        category="unanswerable",
        difficulty="easy",
        forbidden=["Paris"],
    )
    assert q["k-005"].supports == [
        Support(doc_id="README.md"),
        Support(doc_id="docs/components/store/README.md"),
    ]
    assert q["k-005"].lang == "ko" and q["k-005"].answerable
    assert q["k-006"] == GoldenQuery(
        id="k-006",
        query="Which chunker version does the compare fall back to when chunk ids changed?",
        lang="en",
        category="eval",
        tags=["compare", "chunker"],
        supports=[Support(chunk_id="phase5#chunker-fallback", doc_id="tasks/phase-5-evaluation.md")],
        notes="chunk id changes with the chunker version; doc-level recall still applies",
    )
    assert not q["k-007"].answerable and q["k-007"].supports == []
    assert q["k-007"].category == "unanswerable" and q["k-007"].forbidden == ["Pinecone", "Weaviate"]
    assert q["k-008"] == GoldenQuery(
        id="k-008",
        query="How is the normalised RRF score computed?",
        supports=[Support(chunk_id="search-readme#rrf-1")],
        must_contain=["1/(k + rank)"],
    )
    assert q["42"].group == "hit-wire" and q["42"].supports == [Support(doc_id=search_doc)]


def test_kebab_lone_string_is_not_a_list(tmp_path: Path):
    path = write(tmp_path / "k.yaml", "- id: a\n  query: x\n  expected_doc_ids: docs/a.md\n")
    with pytest.raises(InputError) as exc:
        load_golden(path)
    (offender,) = exc.value.offenders
    assert (offender.position, offender.query_id, offender.field) == ("line 1", "a", "expected_doc_ids")
    assert offender.reason == "must be a list, got str"


# ---------------------------------------------------------------------------------------------
# support-anchor YAML list and JSONL
# ---------------------------------------------------------------------------------------------


def test_support_anchor_yaml_fields():
    g = load_golden(fixture("support_anchor.yaml")).golden
    assert [q.id for q in g.queries] == [f"notes-00{i}" for i in range(1, 9)]
    q = g.by_id()
    assert q["notes-001"] == GoldenQuery(
        id="notes-001",
        query="How many NAS snapshots do I keep, and how often?",
        lang="en",
        answerable=True,
        category="factual",
        difficulty="easy",
        tags=["homelab", "backup"],
        supports=[
            Support(
                rel_path="homelab/nas.md",
                heading_path=["NAS", "Backups", "Rotation"],
                snippet="keep 7 daily and 4 weekly snapshots",
            )
        ],
        must_contain=["7 daily"],
    )
    # gold support 0 has two snippets → canonical supports 0 and 1, alternatives of one group;
    # gold 1 → 2, gold 2 → 3; the file's groups [[0], [1, 2]] are rewritten onto them
    assert q["notes-002"] == GoldenQuery(
        id="notes-002",
        query="Which dotfiles manager did I settle on, and how do I bootstrap a new laptop with it?",
        category="multi_hop",
        difficulty="hard",
        tags=["dotfiles", "setup"],
        supports=[
            Support(
                rel_path="tools/dotfiles.md",
                heading_path=["Dotfiles", "Decision"],
                snippet="chezmoi over stow",
            ),
            Support(
                rel_path="tools/dotfiles.md",
                heading_path=["Dotfiles", "Decision"],
                snippet="templates per host",
            ),
            Support(
                rel_path="setup/new-laptop.md",
                heading_path=["New laptop", "Bootstrap"],
                snippet="chezmoi init --apply",
            ),
            Support(rel_path="setup/new-laptop-2023.md", heading_path=["New laptop (2023)"]),
        ],
        required_support_groups=[[0, 1], [2, 3]],
    )
    # "recency/conflict" → recency_conflict; the rule maps; singular `snippet`, grade and lines kept
    assert q["notes-003"] == GoldenQuery(
        id="notes-003",
        query="What is the current retention period for the offsite bucket?",
        category="recency_conflict",
        recency_rule="cite_newer",
        tags=["backup"],
        supports=[
            Support(
                rel_path="homelab/offsite.md",
                heading_path=["Offsite", "Retention", "2024 change"],
                snippet="retention raised to 90 days",
                grade=2,
            ),
            Support(
                rel_path="homelab/offsite.md",
                heading_path=["Offsite", "Retention"],
                line_start=12,
                line_end=18,
            ),
        ],
    )
    # no snippet split: explicit groups pass through untouched
    assert q["notes-004"].required_support_groups == [[0], [1]]
    assert [s.rel_path for s in q["notes-004"].supports] == ["homelab/router.md", "journal/2024-05.md"]
    assert q["notes-005"] == GoldenQuery(
        id="notes-005",
        query="What's my grandmother's maiden name?",
        answerable=False,
        category="out_of_scope",
        forbidden=["Kowalski"],
    )
    # no explicit groups but a split support: each gold support becomes its own group
    assert q["notes-006"] == GoldenQuery(
        id="notes-006",
        query="Wie lange muss der Sauerteig bei 24 °C gehen?",
        lang="de",
        group="sourdough-proof",
        supports=[
            Support(
                rel_path="kitchen/sourdough.md",
                heading_path=["Sauerteig", "Stockgare"],
                snippet="4–6 Stunden",
            ),
            Support(
                rel_path="kitchen/sourdough.md", heading_path=["Sauerteig", "Stockgare"], snippet="bei 24 °C"
            ),
            Support(rel_path="kitchen/sourdough.md", heading_path=["Sauerteig", "Temperatur"]),
        ],
        required_support_groups=[[0, 1], [2]],
        gold_claim_substr=["4–6 Stunden"],
        notes="two snippets of one section: either one is enough",
    )
    assert q["notes-007"].pending is True and q["notes-007"].group == "sourdough-proof"
    assert q["notes-007"].lang == "en" and q["notes-007"].required_support_groups == []
    assert q["notes-008"].recency_rule == "acknowledge_both"
    assert q["notes-008"].category == "recency_conflict" and q["notes-008"].difficulty == "medium"


def test_support_anchor_jsonl_fields():
    g = load_golden(fixture("support_anchor.jsonl")).golden
    assert [q.id for q in g.queries] == [f"sa-10{i}" for i in range(1, 8)]
    q = g.by_id()
    assert q["sa-101"] == GoldenQuery(
        id="sa-101",
        query="What port does the home-assistant container expose?",
        category="factual",
        difficulty="easy",
        tags=["homelab", "docker"],
        supports=[
            Support(
                rel_path="homelab/home-assistant.md",
                heading_path=["Home Assistant", "Compose file"],
                snippet="8123:8123",
            )
        ],
    )
    # one group over both gold supports; gold 0 has 2 snippets → the group lists all 3 canonical ones
    assert q["sa-102"].supports == [
        Support(rel_path="reading/bm25.md", heading_path=["BM25", "Robertson 2009"], snippet="k1 = 1.2"),
        Support(rel_path="reading/bm25.md", heading_path=["BM25", "Robertson 2009"], snippet="b = 0.75"),
        Support(rel_path="reading/bm25.md", heading_path=["BM25", "Trotman 2014"], snippet="k1 = 0.9"),
    ]
    assert q["sa-102"].required_support_groups == [[0, 1, 2]]
    assert (q["sa-102"].category, q["sa-102"].difficulty, q["sa-102"].lang) == ("multi_hop", "hard", "en")
    assert q["sa-103"] == GoldenQuery(
        id="sa-103",
        query="Is the cabin wifi password the old one or the new one?",
        category="recency_conflict",
        recency_rule="cite_both",
        supports=[
            Support(rel_path="places/cabin.md", heading_path=["Cabin", "Wifi"], line_start=3, line_end=4),
            Support(rel_path="journal/2024-08.md", heading_path=["August 2024", "Cabin trip"]),
        ],
        must_contain=["both"],
    )
    assert not q["sa-104"].answerable and q["sa-104"].supports == [] and q["sa-104"].tags == ["adversarial"]
    # the grade of a split gold support is carried onto every snippet
    assert q["sa-105"].supports == [
        Support(rel_path="diy/shelf.md", heading_path=["Regal", "Material"], snippet="4×40 mm Spax", grade=3),
        Support(rel_path="diy/shelf.md", heading_path=["Regal", "Material"], snippet="Dübel 6 mm", grade=3),
    ]
    assert q["sa-105"].required_support_groups == [[0, 1]]
    assert q["sa-105"].gold_claim_substr == ["4×40 mm"] and q["sa-105"].group == "shelf-screws"
    assert q["sa-106"].notes == "paraphrase of sa-105"
    assert q["sa-107"].pending and q["sa-107"].forbidden == ["Hauptstraße 1"]


def test_support_anchor_mapping_form(tmp_path: Path):
    """The ``{queries: [...]}`` form of the support-anchor YAML."""
    path = write(
        tmp_path / "s.yaml",
        "name: notes-eval\nqueries:\n  - id: n1\n    question: where?\n"
        "    gold_supports: [{rel_path: a.md, heading_path: [A]}]\n",
    )
    loaded = load_golden(path)
    assert loaded.golden.format == "supports" and loaded.golden.name == "notes-eval"
    assert loaded.golden.queries[0].supports == [Support(rel_path="a.md", heading_path=["A"])]


def test_support_anchor_split_group_index_out_of_range(tmp_path: Path):
    path = write(
        tmp_path / "s.jsonl",
        json.dumps(
            {
                "id": "m1",
                "question": "q",
                "gold_supports": [{"rel_path": "a.md", "snippets": ["x", "y"]}],
                "required_support_groups": [[0, 3]],
            }
        )
        + "\n",
    )
    with pytest.raises(InputError) as exc:
        load_golden(path)
    (offender,) = exc.value.offenders
    assert (offender.position, offender.query_id, offender.field) == (
        "line 1",
        "m1",
        "required_support_groups[0]",
    )
    assert offender.reason == "index [3] out of range (the query has 1 gold supports)"


# ---------------------------------------------------------------------------------------------
# WFGY gold JSONL
# ---------------------------------------------------------------------------------------------


def test_wfgy_fields():
    g = load_golden(fixture("wfgy_gold.jsonl")).golden
    assert [q.id for q in g.queries] == [f"A000{i}" for i in range(1, 9)]
    q = g.by_id()
    assert q["A0001"] == GoldenQuery(
        id="A0001",
        query="Does X support null keys?",
        answerable=True,
        category="general",
        supports=[Support(chunk_id="p1#2")],
        gold_claim_substr=["rejects null keys"],
        constraints=["X rejects null keys."],
    )
    assert q["A0002"] == GoldenQuery(
        id="A0002", query="Explain Z.", answerable=False, category="unanswerable"
    )
    assert q["A0003"] == GoldenQuery(
        id="A0003",
        query="What domain is allowed?",
        supports=[Support(chunk_id="pB#1")],
        gold_claim_substr=["only domain example.com"],
    )
    assert q["A0004"].supports == [Support(chunk_id="p7#1"), Support(chunk_id="p7#3")]
    assert q["A0004"].gold_claim_substr == ["TLS 1.2 and 1.3", "TLS 1.2 or newer"]
    assert q["A0004"].constraints == [
        "Gateway accepts TLS 1.2.",
        "Gateway accepts TLS 1.3.",
        "TLS 1.0 is rejected.",
    ]
    assert q["A0004"].required_support_groups == []  # no groups: every citation must be found
    assert q["A0005"] == GoldenQuery(
        id="A0005",
        query="What is the retention period for audit logs?",
        lang="en",
        category="factual",
        difficulty="easy",
        tags=["compliance"],
        supports=[Support(chunk_id="pC#4")],
        gold_claim_substr=["400 days"],
    )
    assert (q["A0006"].answerable, q["A0006"].category) == (False, "adversarial")
    assert q["A0007"].lang == "de"
    assert q["A0008"].answerable is True and q["A0008"].category == "general"  # answerable defaults to true
    assert q["A0008"].constraints == ["Two keys may be active at once."]


# ---------------------------------------------------------------------------------------------
# canonical YAML / JSON / JSONL
# ---------------------------------------------------------------------------------------------


def test_canonical_yaml_fields():
    g = load_golden(fixture("canonical.yaml")).golden
    assert g.name == "fermentation-handbook"
    assert [q.id for q in g.queries] == [f"ferm-00{i}" for i in range(1, 7)]
    q = g.by_id()
    assert q["ferm-001"] == GoldenQuery(
        id="ferm-001",
        query="At what temperature should a sourdough starter be kept to peak in 4–6 hours?",
        lang="en",
        answerable=True,
        category="factual",
        difficulty="easy",
        tags=["bread", "sourdough", "temperature"],
        group="starter-temp",
        pending=False,
        supports=[
            Support(
                chunk_id="sourdough-starter.md#feeding-2",
                doc_id="doc-sourdough",
                rel_path="grains-and-bread/sourdough-starter.md",
                heading_path=["Sourdough Starter", "Feeding schedule"],
                line_start=14,
                line_end=27,
                snippet="keep it at 24 °C",
                grade=2,
            ),
            Support(doc_id="doc-sourdough", section="Feeding schedule"),
        ],
        must_contain=["24 °C"],
        forbidden=["room temperature is fine"],
        gold_claim_substr=["24 °C", "around 24 degrees"],
        expected_kind="doc_section",
        notes="the 4–6 h window is from the 1:5:5 ratio table",
        constraints=["Starter peaks in 4–6 hours at 24 °C."],
    )
    assert q["ferm-002"].supports == [Support(doc_id="doc-sourdough", heading_path=["Sourdough Starter"])]
    assert q["ferm-003"].required_support_groups == [[0, 1], [2], [3]]
    assert q["ferm-003"].supports[3] == Support(
        rel_path="vegetables/kimchi.md",
        heading_path=["Kimchi", "Fermentation time"],
        line_start=40,
        line_end=40,
    )
    assert q["ferm-004"].recency_rule == "cite_newer" and [s.grade for s in q["ferm-004"].supports] == [3, 1]
    assert q["ferm-005"] == GoldenQuery(
        id="ferm-005",
        query="What is the best wine yeast for a dry mead?",
        lang="en",
        answerable=False,
        category="out_of_scope",
        tags=["mead", "adversarial"],
        forbidden=["EC-1118"],
    )
    # pending: placeholder lines [0, 0] are allowed, kept as written
    assert q["ferm-006"].pending and q["ferm-006"].supports == [
        Support(
            rel_path="equipment/tempeh-incubator.ino",
            symbol="readThermistor",
            symbol_kind="Function",
            line_start=0,
            line_end=0,
            section="Wiring",
        )
    ]


def test_canonical_json_fields():
    g = load_golden(fixture("canonical.json")).golden
    assert g.name == "dairy-handbook"
    q = g.by_id()
    assert q["dairy-001"] == GoldenQuery(
        id="dairy-001",
        query="At what temperature and for how long is yogurt incubated?",
        lang="en",
        answerable=True,
        category="factual",
        difficulty="medium",
        tags=["dairy", "yogurt"],
        group="dairy-yogurt",
        pending=False,
        supports=[
            Support(
                chunk_id="yogurt#incubation-1",
                doc_id="yogurt",
                rel_path="dairy/yogurt.md",
                heading_path=["Yogurt", "Incubation"],
                line_start=8,
                line_end=19,
                snippet="43 °C for 6–8 hours",
                section="Incubation",
                grade=2,
            ),
            Support(doc_id="yogurt", heading_path=["Yogurt", "Troubleshooting"], grade=0),
        ],
        required_support_groups=[[0]],
        must_contain=["43 °C"],
        forbidden=["overnight at room temperature"],
        gold_claim_substr=["43 °C"],
        expected_kind="doc_section",
        notes="grade 0 support marks a near-miss section",
        constraints=["Incubate at 43 °C."],
    )
    assert q["dairy-003"].supports[1] == Support(
        rel_path="firmware/probe.h", symbol="reading_t", symbol_kind="struct", line_start=9, line_end=15
    )
    assert q["dairy-004"].recency_rule == "acknowledge_both" and q["dairy-005"].recency_rule == "cite_both"
    assert q["dairy-005"].supports == [Support(chunk_id="miso#salt-2019"), Support(chunk_id="miso#salt-2024")]
    assert not q["dairy-006"].answerable and q["dairy-006"].category == "adversarial"
    assert q["dairy-007"].pending and q["dairy-007"].notes == "chapter not written yet"


def test_canonical_jsonl_matches_the_json_entry_for_entry():
    """The JSONL fixture holds the JSON fixture's queries with other ids, language and first query."""
    jsonl = load_golden(fixture("canonical.jsonl")).golden.queries
    json_ = load_golden(fixture("canonical.json")).golden.queries
    assert len(jsonl) == len(json_)
    for a, b in zip(jsonl, json_, strict=True):
        assert a.id == b.id.replace("dairy-", "jl-")
        same = {"id", "query", "lang", "group", "supports"}
        assert a.model_dump(exclude=same) == b.model_dump(exclude=same)
        assert [s.model_dump(exclude={"chunk_id", "doc_id", "rel_path"}) for s in a.supports] == [
            s.model_dump(exclude={"chunk_id", "doc_id", "rel_path"}) for s in b.supports
        ]
    assert jsonl[0].lang == "fr" and jsonl[0].query.startswith("À quelle température")
    assert jsonl[0].supports[0].rel_path == "dairy/yaourt.md"


# ---------------------------------------------------------------------------------------------
# several files, folders, mixed formats
# ---------------------------------------------------------------------------------------------


def test_several_files_form_one_set():
    paths = [fixture("wfgy_gold.jsonl"), fixture("ckv_queries.yaml"), fixture("kebab_golden.yaml")]
    loaded = load_golden(paths)
    g = loaded.golden
    assert loaded.files == [str(p) for p in paths]
    assert g.source == ", ".join(str(p) for p in paths)
    assert g.format == "ckv+kebab+wfgy"
    # queries keep the order of the files given, then of the entries
    expected = [q.id for p in paths for q in load_golden(p).golden.queries]
    assert [q.id for q in g.queries] == expected and len(expected) == 8 + 8 + 9
    assert g.sha256 == golden_content_sha256(paths)
    assert g.sha256 != hashlib.sha256(paths[0].read_bytes()).hexdigest()
    assert g.name == "wfgy_gold"  # no file names the set: the first file's stem


def test_fixture_folder_is_one_mixed_set():
    loaded = load_golden(FIXTURES)
    g = loaded.golden
    assert loaded.files == [str(FIXTURES / n) for n in sorted(FIXTURE_FILES)]
    assert g.format == "canonical+ckv+kebab+supports+wfgy"
    assert len(g.queries) == sum(n for _, n in FIXTURE_FILES.values())
    assert len(g.by_id()) == len(g.queries)
    assert loaded.warnings == []
    assert g.name == "dairy-handbook"  # the first file (canonical.json) that names the set


def test_folder_mixing_formats_recurses_and_skips_other_files(tmp_path: Path):
    root = tmp_path / "golden"
    (root / "code").mkdir(parents=True)
    (root / "notes").mkdir()
    shutil.copy(fixture("ckv_queries.yaml"), root / "code" / "queries.yml")  # .yml counts too
    shutil.copy(fixture("support_anchor.jsonl"), root / "notes" / "anchors.jsonl")
    shutil.copy(fixture("canonical.json"), root / "set.json")
    write(root / "README.md", "# not a golden file\n")
    write(root / "notes" / "scratch.txt", "ignored")
    loaded = load_golden(root)
    assert loaded.files == [
        str(root / "code" / "queries.yml"),
        str(root / "notes" / "anchors.jsonl"),
        str(root / "set.json"),
    ]
    assert loaded.golden.format == "canonical+ckv+supports"
    assert len(loaded.golden.queries) == 8 + 7 + 7


def test_empty_folder_is_an_input_error(tmp_path: Path):
    (tmp_path / "empty").mkdir()
    write(tmp_path / "empty" / "notes.md", "x")
    with pytest.raises(InputError) as exc:
        load_golden(tmp_path / "empty")
    assert exc.value.offenders[0].file == str(tmp_path / "empty")


def test_duplicate_ids_across_files_name_both_positions(tmp_path: Path):
    first = write(
        tmp_path / "a.yaml",
        'schema_version: "1"\nqueries:\n  - id: x1\n    query: one\n    supports: [{doc_id: d}]\n'
        "  - id: dup-7\n    query: two\n    supports: [{doc_id: d}]\n",
    )
    second = write(
        tmp_path / "b.jsonl",
        '{"qid": "w1", "question": "q", "gold_citations": ["c1"]}\n'
        '{"qid": "dup-7", "question": "again", "gold_citations": ["c2"]}\n',
    )
    third = write(tmp_path / "c.yaml", "- id: 42\n  query: k\n  expected_doc_ids: [d]\n")
    fourth = write(tmp_path / "d.json", json.dumps({"queries": [{"id": "42", "query": "c"}]}))
    with pytest.raises(InputError) as exc:
        load_golden([first, second, third, fourth])
    offenders = exc.value.offenders
    assert [(o.file, o.position, o.query_id, o.field, o.reason) for o in offenders] == [
        (str(second), "line 2", "dup-7", "id", f"duplicate id (first at {first}:line 6)"),
        # an int id in YAML and the same id as a JSON string are one id
        (str(fourth), "queries[0]", "42", "id", f"duplicate id (first at {third}:line 1)"),
    ]
    assert f"{second}:line 2 — query 'dup-7' — field 'id'" in str(exc.value)


# ---------------------------------------------------------------------------------------------
# unknown fields: one aggregated warning per field
# ---------------------------------------------------------------------------------------------


def test_unknown_fields_canonical_top_level_warns_query_and_support_keys_are_errors(tmp_path: Path):
    """Canonical is the tool's own format: an unknown query or support key would be dropped, so it
    is an error at the key's line (before: a warning, and the data was lost); top level still warns."""
    text = """schema_version: "1"
owner: team-search
queries:
  - id: q1
    query: one
    answerabel: true
    supports: [{doc_id: d1}]
  - id: q2
    query: two
    supports:
      - doc_id: d2
        heading: Intro
  - id: q3
    query: three
    supports: [{doc_id: d3}]
    priority: high
"""
    path = write(tmp_path / "c.yaml", text)
    with pytest.raises(InputError) as exc:
        load_golden(path)
    got = [(o.position, o.query_id, o.field, o.reason) for o in exc.value.offenders]
    dropped = "in the canonical format (it would be dropped)"
    assert got == [
        ("line 6", "q1", "answerabel", f"unknown key 'answerabel' {dropped}: did you mean 'answerable'?"),
        (
            "line 12",
            "q2",
            "supports[0].heading",
            f"unknown key 'supports[0].heading' {dropped}: did you mean 'heading_path'?",
        ),
        (
            "line 16",
            "q3",
            "priority",
            f"unknown key 'priority' {dropped}: known fields: " + ", ".join(sorted(GoldenQuery.model_fields)),
        ),
    ]
    fixed = text.replace("answerabel", "answerable").replace("heading: Intro", "heading_path: [Intro]")
    loaded = load_golden(write(path, fixed.replace("    priority: high\n", "")))
    assert loaded.warnings == [f"{path}: unknown top-level fields ignored: owner"]
    assert len(loaded.golden.queries) == 3


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        (
            "k.yaml",
            "- id: a\n  query: x\n  expected_doc_ids: [d]\n  expected_answer: y\n"
            "- id: b\n  query: z\n  expected_doc_ids: [d]\n  expected_answer: w\n",
            ["unknown field 'expected_answer' ignored in 2 queries (first at line 1, query 'a')"],
        ),
        (
            "ckv.yaml",
            'schema_version: "1"\nqueries:\n  - id: a\n    intent: x\n'
            "    expected: {file: a.go, line_range: [1, 2], lines: 3}\n",
            ["unknown field 'expected.lines' ignored in 1 query (first at line 3, query 'a')"],
        ),
        (
            "s.jsonl",
            '{"id": "a", "question": "x", "gold_supports": [{"rel_path": "a.md", "anchor": "#x"}], '
            '"hops": 2}\n'
            '{"id": "b", "question": "y", "gold_supports": [{"rel_path": "b.md", "anchor": "#y"}]}\n',
            [
                "unknown field 'gold_supports[0].anchor' ignored in 2 queries (first at line 1, query 'a')",
                "unknown field 'hops' ignored in 1 query (first at line 1, query 'a')",
            ],
        ),
        (
            "w.jsonl",
            '{"qid": "A1", "question": "x", "gold_citations": ["p"], "trace_id": 1}\n'
            '{"qid": "A2", "question": "y", "gold_citations": ["q"], "trace_id": 2}\n'
            '{"qid": "A3", "question": "z", "gold_citations": ["r"], "trace_id": 3}\n',
            ["unknown field 'trace_id' ignored in 3 queries (first at line 1, query 'A1')"],
        ),
    ],
)
def test_unknown_fields_one_warning_per_field_other_formats(tmp_path: Path, name, text, expected):
    path = write(tmp_path / name, text)
    assert load_golden(path).warnings == [f"{path}: {w}" for w in expected]


# ---------------------------------------------------------------------------------------------
# schema_version
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt_doc", ["canonical", "ckv", "supports"])
@pytest.mark.parametrize("version", ["2", "2.0", "10.1"])
def test_newer_major_schema_version_is_refused(tmp_path: Path, fmt_doc: str, version: str):
    entry = {
        "canonical": "{id: a, query: x, supports: [{doc_id: d}]}",
        "ckv": "{id: a, intent: x, expected: {file: a.go, line_range: [1, 2]}}",
        "supports": "{id: a, question: x, gold_supports: [{rel_path: a.md}]}",
    }[fmt_doc]
    path = write(tmp_path / "g.yaml", f'schema_version: "{version}"\nqueries:\n  - {entry}\n')
    with pytest.raises(InputError) as exc:
        load_golden(path)
    (offender,) = exc.value.offenders
    assert (offender.file, offender.position, offender.field) == (str(path), "top level", "schema_version")
    assert offender.reason == (
        f"schema_version {version} is newer than this tool's 1: upgrade kebab-eval-pipeline to read it"
    )


@pytest.mark.parametrize("version", ["1.1", "1.12"])
def test_newer_minor_schema_version_loads_with_a_warning(tmp_path: Path, version: str):
    path = write(
        tmp_path / "g.json",
        json.dumps(
            {"schema_version": version, "queries": [{"id": "a", "query": "x", "supports": [{"doc_id": "d"}]}]}
        ),
    )
    loaded = load_golden(path)
    assert loaded.warnings == [
        f"{path}: schema_version {version} is newer than 1; loading the fields it knows"
    ]
    assert [q.id for q in loaded.golden.queries] == ["a"]


@pytest.mark.parametrize("version", ["1", "1.0", "0.9"])
def test_same_or_older_schema_version_is_silent(tmp_path: Path, version: str):
    path = write(tmp_path / "g.yaml", f'schema_version: "{version}"\nqueries: [{{id: a, query: x}}]\n')
    assert load_golden(path).warnings == []


def test_schema_version_that_is_not_a_version(tmp_path: Path):
    path = write(tmp_path / "g.yaml", 'schema_version: "v1"\nqueries: [{id: a, query: x}]\n')
    with pytest.raises(InputError) as exc:
        load_golden(path)
    (offender,) = exc.value.offenders
    assert offender.reason == "schema_version 'v1' is not a version" and offender.position == "top level"


# ---------------------------------------------------------------------------------------------
# --format forced to the wrong format: an InputError naming the file and the reason
# ---------------------------------------------------------------------------------------------


WRONG_FORMAT_CASES = [
    pytest.param(name, forced, id=f"{name}-as-{forced}")
    for name in sorted(FIXTURE_FILES)
    for forced in READER_NAMES
    if forced != FIXTURE_FILES[name][0]
]


@pytest.mark.parametrize(("name", "forced"), WRONG_FORMAT_CASES)
def test_forced_wrong_format_is_an_input_error(name: str, forced: str):
    path = fixture(name)
    with pytest.raises(InputError) as exc:
        load_golden(path, fmt=forced)
    assert exc.value.offenders
    for offender in exc.value.offenders:
        assert offender.file == str(path)
        assert offender.reason.strip()
        assert offender.position and offender.position.strip()
    assert str(path) in str(exc.value)


def test_forced_kebab_needs_expected_ids(tmp_path: Path):
    """Regression: a canonical JSONL line forced to kebab silently became a 'should refuse' query."""
    path = write(
        tmp_path / "c.jsonl",
        json.dumps({"id": "a", "query": "x", "answerable": True, "supports": [{"doc_id": "d"}]}) + "\n",
    )
    with pytest.raises(InputError) as exc:
        load_golden(path, fmt="kebab")
    (offender,) = exc.value.offenders
    assert (offender.position, offender.query_id, offender.field) == ("line 1", "a", "expected_doc_ids")


def test_unreadable_file_is_an_input_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Regression: an OSError from reading the file escaped instead of an InputError naming it."""
    path = write(tmp_path / "locked.yaml", "- {id: a, query: x, expected_doc_ids: [d]}\n")
    real = os.open

    def open_(file, flags, *args, **kwargs):
        if Path(file) == path:  # what a chmod 000 file gives a non-root user (tests may run as root)
            raise PermissionError(13, "Permission denied", str(file))
        return real(file, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", open_)
    with pytest.raises(InputError) as exc:
        load_golden(path)
    (offender,) = exc.value.offenders
    assert offender.file == str(path) and offender.position and "Permission denied" in offender.reason


def test_unknown_format_name_is_an_input_error():
    with pytest.raises(InputError) as exc:
        load_golden(fixture("canonical.yaml"), fmt="csv")
    (offender,) = exc.value.offenders
    assert (
        offender.field == "--format"
        and "'csv' is not one of auto, ckv, kebab, wfgy, supports" in offender.reason
    )


def test_undetectable_shape_is_an_input_error(tmp_path: Path):
    path = write(tmp_path / "g.yaml", "title: my questions\nitems: [a, b]\n")
    with pytest.raises(InputError) as exc:
        load_golden(path)
    (offender,) = exc.value.offenders
    assert offender.position == "top level"
    assert offender.reason.startswith("cannot tell the format (top level is a dict)")
    assert "use --format" in offender.reason
