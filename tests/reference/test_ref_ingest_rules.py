"""Which files the reference ingest reads (.gitignore + exclude rules), doc-id stability,
and the coverage statistics and per-document table in the index manifest.

The expected file sets below were checked against ``git ls-files --others --exclude-standard``
on the same trees when writing the tests, so they are git's answers, not the code's.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from kebab_eval_pipeline.reference.index import ReferenceIndex, compute_index_version
from kebab_eval_pipeline.reference.ingest import (
    corpus_files,
    corpus_sha256,
    files_sha256,
    read_corpus,
)

# A tree exercising every selection rule; the comment says what should happen to each file.
RULES_TREE = {
    ".gitignore": "drafts/\n*.tmp.md\n",
    "a.md": "# A\n\nalpha text\n",
    "x.tmp.md": "root tmp, ignored by *.tmp.md\n",
    "local.md": "kept: keepdir/.gitignore's 'local.md' only applies under keepdir\n",
    "drafts/d1.md": "ignored by drafts/\n",
    "drafts/sub/d2.md": "ignored: under drafts/\n",
    "notes/n.md": "# N\n\nnotes\n",
    "notes/y.tmp.md": "ignored by the root *.tmp.md at any depth\n",
    "keepdir/.gitignore": "!keep.tmp.md\nlocal.md\n",
    "keepdir/keep.tmp.md": "re-included by the nested .gitignore\n",
    "keepdir/other.tmp.md": "still ignored by the root rule\n",
    "keepdir/local.md": "ignored by the nested .gitignore\n",
    "archive/p.md": "plain archive file\n",
    "archive/old/o.md": "deeper archive file\n",
    ".obsidian/w.md": "hidden folder\n",
    "notes/.trash/t.md": "nested hidden folder\n",
    ".hidden.md": "hidden file\n",
}
BASE_SELECTION = [
    "a.md",
    "archive/old/o.md",
    "archive/p.md",
    "keepdir/keep.tmp.md",
    "local.md",
    "notes/n.md",
]


def _ids(root: Path, exclude: list[str] | tuple[str, ...] = ()) -> list[str]:
    return [d.doc_id for d in read_corpus(root, exclude=exclude)]


@pytest.fixture
def rules_tree(tmp_path: Path, make_corpus) -> Path:
    return make_corpus(tmp_path / "corpus", RULES_TREE)


# --- .gitignore and exclude rules --------------------------------------------------------------


def test_root_and_nested_gitignore_select_gits_file_set(rules_tree: Path) -> None:
    assert _ids(rules_tree) == BASE_SELECTION
    # corpus_files is the same selection, with real paths.
    files = corpus_files(rules_tree)
    assert [rel for rel, _ in files] == BASE_SELECTION
    assert all(path == rules_tree / rel for rel, path in files)


def test_nested_gitignore_is_scoped_to_its_folder(rules_tree: Path) -> None:
    ids = _ids(rules_tree)
    # keepdir/.gitignore says "local.md": only keepdir/local.md goes, the root one stays.
    assert "local.md" in ids and "keepdir/local.md" not in ids
    # "!keep.tmp.md" re-includes only that name; the root *.tmp.md still wins for the others.
    assert "keepdir/keep.tmp.md" in ids and "keepdir/other.tmp.md" not in ids


def test_deeper_gitignore_overrides_shallower_both_ways(tmp_path: Path, make_corpus) -> None:
    make_corpus(
        tmp_path,
        {
            ".gitignore": "secret.md\n",
            "secret.md": "x\n",
            "open/.gitignore": "!secret.md\n",
            "open/secret.md": "x\n",
            "open/closed/.gitignore": "secret.md\n",
            "open/closed/secret.md": "x\n",
        },
    )
    assert _ids(tmp_path) == ["open/secret.md"]


def test_exclude_patterns_have_the_last_word(rules_tree: Path) -> None:
    # Excludes a file the nested .gitignore re-included, and re-includes one the root ignored.
    ids = _ids(rules_tree, exclude=["keepdir/keep.tmp.md", "!x.tmp.md"])
    assert ids == ["a.md", "archive/old/o.md", "archive/p.md", "local.md", "notes/n.md", "x.tmp.md"]
    # Exclude patterns are relative to the corpus root: an anchored pattern hits only the root file.
    assert "local.md" not in _ids(rules_tree, exclude=["/local.md"])
    assert _ids(rules_tree, exclude=["/n.md"]) == BASE_SELECTION
    assert "notes/n.md" not in _ids(rules_tree, exclude=["n.md"])


@pytest.mark.parametrize("pattern", ["archive/", "archive", "/archive/", "archive/**"])
def test_directory_exclude_drops_the_whole_tree(rules_tree: Path, pattern: str) -> None:
    ids = _ids(rules_tree, exclude=[pattern])
    assert ids == [i for i in BASE_SELECTION if not i.startswith("archive/")]


def test_hidden_paths_are_skipped_and_cannot_be_re_included(rules_tree: Path) -> None:
    ids = _ids(rules_tree, exclude=["!.obsidian/w.md", "!notes/.trash/t.md", "!.hidden.md"])
    assert ids == BASE_SELECTION
    assert not any(part.startswith(".") for i in ids for part in i.split("/"))


def test_invalid_exclude_pattern_raises_value_error_naming_it(rules_tree: Path) -> None:
    with pytest.raises(ValueError, match=r"invalid ignore pattern '!' in exclude patterns \(line 2\)"):
        read_corpus(rules_tree, exclude=["drafts/", "!"])
    with pytest.raises(ValueError, match=r"'!'"):
        files_sha256(corpus_files(rules_tree, exclude=["!"]))


def test_invalid_pattern_in_gitignore_names_the_file(tmp_path: Path, make_corpus) -> None:
    make_corpus(tmp_path, {"a.md": "a\n", "sub/.gitignore": "ok.md\nfoo\\\n"})
    with pytest.raises(ValueError) as err:
        read_corpus(tmp_path)
    assert str(tmp_path / "sub" / ".gitignore") in str(err.value)
    assert "'foo\\\\'" in str(err.value)  # the pattern itself, as repr() shows it


def test_bad_character_range_raises_value_error(tmp_path: Path, make_corpus) -> None:
    make_corpus(tmp_path, {"a.md": "a\n"})
    with pytest.raises(ValueError, match=r"\[z-a\]"):
        read_corpus(tmp_path, exclude=["[z-a]"])


@pytest.mark.parametrize(
    "ignores",
    [
        {".gitignore": "drafts/\n!drafts/keep.md\n"},  # same file
        {".gitignore": "drafts/\n", "drafts/.gitignore": "!keep.md\n"},  # nested file
    ],
    ids=["same-file", "nested-file"],
)
def test_file_under_excluded_directory_cannot_be_re_included(
    tmp_path: Path, make_corpus, ignores: dict[str, str]
) -> None:
    make_corpus(tmp_path, {"a.md": "a\n", "drafts/keep.md": "k\n", "drafts/d.md": "d\n", **ignores})
    # `git ls-files --others --exclude-standard` lists only a.md for both trees.
    assert _ids(tmp_path) == ["a.md"]


def test_re_include_works_when_only_the_contents_are_excluded(tmp_path: Path, make_corpus) -> None:
    # `drafts/*` excludes the files, not the folder, so git honours the re-include.
    make_corpus(
        tmp_path,
        {".gitignore": "drafts/*\n!drafts/keep.md\n", "drafts/keep.md": "k\n", "drafts/d.md": "d\n"},
    )
    assert _ids(tmp_path) == ["drafts/keep.md"]


def test_files_sha256_matches_parsed_corpus_hash(rules_tree: Path, tmp_path: Path) -> None:
    seen = set()
    for exclude in ([], ["archive/"], ["keepdir/keep.tmp.md", "!x.tmp.md"], ["*.md"]):
        fast = files_sha256(corpus_files(rules_tree, exclude))
        assert fast == corpus_sha256(read_corpus(rules_tree, exclude=exclude))
        seen.add(fast)
    assert len(seen) == 4  # four different file sets, four different hashes
    empty = tmp_path / "empty"
    empty.mkdir()
    assert files_sha256(corpus_files(empty)) == corpus_sha256([]) == hashlib.sha256(b"").hexdigest()


def test_manifest_records_exclude_and_version_tracks_the_file_set(rules_tree: Path) -> None:
    plain = ReferenceIndex.build(rules_tree)
    assert plain.manifest["exclude"] == []
    assert plain.manifest["n_docs"] == len(BASE_SELECTION)

    narrowed = ReferenceIndex.build(rules_tree, exclude=("archive/",))
    assert narrowed.manifest["exclude"] == ["archive/"]  # a tuple is stored as a JSON list
    assert narrowed.manifest["n_docs"] == len(BASE_SELECTION) - 2
    assert [d["doc_id"] for d in narrowed.manifest["documents"]] == [
        i for i in BASE_SELECTION if not i.startswith("archive/")
    ]
    assert narrowed.manifest["corpus_sha256"] != plain.manifest["corpus_sha256"]
    assert narrowed.index_version != plain.index_version
    assert narrowed.manifest["corpus_sha256"] == files_sha256(corpus_files(rules_tree, ["archive/"]))

    # Patterns that match nothing leave the file set, hence the versions, unchanged.
    noop = ReferenceIndex.build(rules_tree, exclude=["nothing-here/", "*.nomatch.md"])
    assert noop.manifest["exclude"] == ["nothing-here/", "*.nomatch.md"]
    assert noop.manifest["corpus_sha256"] == plain.manifest["corpus_sha256"]
    assert noop.index_version == plain.index_version
    assert noop.index_version == compute_index_version(noop.chunker_version, noop.manifest["corpus_sha256"])


# --- doc ids -----------------------------------------------------------------------------------


def _chunk_ids_by_doc(index: ReferenceIndex) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for c in index.chunks:
        out.setdefault(c.doc_id, []).append(c.chunk_id)
    return out


def test_doc_and_chunk_ids_stable_across_builds(corpus_dir: Path) -> None:
    first = ReferenceIndex.build(corpus_dir)
    second = ReferenceIndex.build(corpus_dir)
    assert [d["doc_id"] for d in first.manifest["documents"]] == [
        "english/kombucha.md",
        "english/sourdough.md",
        "korean/empty.md",
        "korean/kimchi.md",
        "notes.txt",
        "tools/brine.py",
    ]
    assert first.manifest["documents"] == second.manifest["documents"]
    assert [c.chunk_id for c in first.chunks] == [c.chunk_id for c in second.chunks]
    assert first.index_version == second.index_version


def test_unchanged_files_keep_ids_when_another_file_changes(corpus_dir: Path) -> None:
    before = ReferenceIndex.build(corpus_dir)
    (corpus_dir / "notes.txt").write_text("Plain text notes about miso, edited.\n", encoding="utf-8")
    (corpus_dir / "aaa_first.md").write_text(
        "# New\n\nA new file sorted before all others.\n", encoding="utf-8"
    )
    after = ReferenceIndex.build(corpus_dir)

    old_ids, new_ids = _chunk_ids_by_doc(before), _chunk_ids_by_doc(after)
    assert set(new_ids) == set(old_ids) | {"aaa_first.md"}
    for doc_id in ("english/kombucha.md", "english/sourdough.md", "korean/kimchi.md", "tools/brine.py"):
        assert new_ids[doc_id] == old_ids[doc_id], doc_id
    assert new_ids["notes.txt"] != old_ids["notes.txt"]

    old_docs = {d["doc_id"]: d for d in before.manifest["documents"]}
    new_docs = {d["doc_id"]: d for d in after.manifest["documents"]}
    assert new_docs["korean/kimchi.md"] == old_docs["korean/kimchi.md"]
    assert new_docs["notes.txt"]["sha256"] != old_docs["notes.txt"]["sha256"]
    assert after.manifest["corpus_sha256"] != before.manifest["corpus_sha256"]
    assert after.index_version != before.index_version


# --- coverage statistics and the per-document table -------------------------------------------

STATS_CORPUS = {
    "a.md": "# Alpha\n\none two three\n",
    # front matter (lines 1-3), preamble (4), # Beta (6), ## Empty (10, heading only), ## Gamma (11)
    "b.md": "---\ntitle: Bee\n---\nintro words here\n\n# Beta\n\nw1 w2 w3 w4 w5 w6 w7 w8 w9\n\n"
    "## Empty\n## Gamma\n\ng1 g2\n",
    "blank.md": "\n\n   \n",
    "c.txt": "just text\n",
    "empty.md": "",
    "only.md": "# Only\n\n## Headings\n",
}


def test_coverage_stats_exact_on_hand_made_corpus(tmp_path: Path, make_corpus) -> None:
    root = make_corpus(tmp_path, STATS_CORPUS)
    index = ReferenceIndex.build(root)
    spans = [(c.doc_id, c.heading_path, c.line_start, c.line_end) for c in index.chunks]
    assert spans == [
        ("a.md", ["Alpha"], 1, 3),  # "# Alpha one two three": 5 words
        ("b.md", [], 4, 4),  # "intro words here": 3
        ("b.md", ["Beta"], 6, 8),  # "# Beta" + 9 words: 11
        ("b.md", ["Beta", "Gamma"], 11, 13),  # "## Gamma g1 g2": 4
        ("c.txt", [], 1, 1),  # "just text": 2
    ]
    stats = index.manifest["stats"]
    # Word counts 2, 3, 4, 5, 11: mean 25/5; p95 = 5 + 0.8 * (11 - 5) (linear interpolation).
    assert stats == {
        "docs_processed": 6,
        "docs_with_zero_chunks": 3,
        "zero_chunk_docs": ["blank.md", "empty.md", "only.md"],
        "chunks": 5,
        "tokens_min": 2,
        "tokens_mean": 5.0,
        "tokens_p95": 9.8,
        "tokens_max": 11,
        "skipped": {"heading_only": 3},
    }
    assert index.stats.docs_with_zero_chunks == 3  # the model view agrees with the dict


def test_manifest_documents_table(tmp_path: Path, make_corpus) -> None:
    root = make_corpus(tmp_path, STATS_CORPUS)
    docs = ReferenceIndex.build(root).manifest["documents"]
    rows = {d["doc_id"]: d for d in docs}
    assert [d["doc_id"] for d in docs] == sorted(STATS_CORPUS)
    assert rows["b.md"] == {
        "doc_id": "b.md",
        "kind": "markdown",
        "parser_version": "md-parser-2",
        "sha256": hashlib.sha256(STATS_CORPUS["b.md"].encode()).hexdigest(),
        "lines": 13,
        "chunks": 3,
    }
    assert (rows["c.txt"]["kind"], rows["c.txt"]["parser_version"], rows["c.txt"]["chunks"]) == (
        "text",
        "text-1",
        1,
    )
    assert {k: (rows[k]["lines"], rows[k]["chunks"]) for k in ("empty.md", "blank.md", "only.md")} == {
        "empty.md": (0, 0),
        "blank.md": (3, 0),
        "only.md": (3, 0),
    }
    assert sum(d["chunks"] for d in docs) == 5
