"""The response-mapping language (``systems/mapexpr.py``) as a user writes it in a config.

The contract: a plain string is still a dotted path; ``{path}``, ``{const}``, ``{concat}``,
``{first}`` and the transforms ``regex``, ``split``, ``relative_to``, ``basename`` read what the
module docstring says; a malformed expression is refused when the config loads, naming the field
and the position inside the expression (the CLI exits 2); data the mapping cannot transform is a
``bad_response`` for that query naming the hit and field.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kebab_eval_pipeline.chain.settings import settings_from_dict
from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.systems.mapexpr import MISSING, compile_expr
from kebab_eval_pipeline.systems.outcome import QueryFailure
from kebab_eval_pipeline.systems.wire import ResponseMap, dig, parse_answer, parse_hits
from tests.conftest import write
from tests.forked_cli import run_cli


def read(spec, obj):
    return compile_expr(spec).evaluate(obj)


def bad(fn, *args, **kwargs) -> str:
    with pytest.raises(QueryFailure) as info:
        fn(*args, **kwargs)
    assert info.value.error_class == "bad_response"
    return info.value.message


DOC = {
    "meta": {"file_path": "/srv/corpus/guide/install.md", "parent_headers": ["Install", "From source"]},
    "header": "Windows",
    "a.b": {"c": 1},
    "items": [{"id": "x"}, {"id": "y"}],
    "empty": "",
    "none": None,
}


# ---------------------------------------------------------------------------------------------
# sources
# ---------------------------------------------------------------------------------------------


def test_a_plain_string_is_a_dotted_path_as_before():
    assert read("meta.file_path", DOC) == "/srv/corpus/guide/install.md"
    assert read("items.1.id", DOC) == "y"
    assert read("items.-1.id", DOC) == "y"
    assert read("meta.nope", DOC) is MISSING
    assert read("none", DOC) is None  # present and null is not missing
    assert read({"path": "items.0.id"}, DOC) == "x"


def test_a_path_as_a_list_of_steps_reaches_keys_with_dots():
    assert read({"path": ["a.b", "c"]}, DOC) == 1
    assert read("a.b.c", DOC) is MISSING  # the dotted form splits the key
    assert read({"path": ["items", 1, "id"]}, DOC) == "y"
    assert read({"path": ["items", "0", "id"]}, DOC) == "x"
    assert read({"path": [0, "id"]}, [{"id": "z"}]) == "z"
    assert read({"path": [5]}, [1]) is MISSING


def test_const_concat_first():
    assert read({"const": "bm25"}, DOC) == "bm25"
    assert read({"const": ["a", 1]}, {}) == ["a", 1]
    # lists flattened one level, scalars appended, missing / null / "" parts skipped
    concat = {"concat": ["meta.parent_headers", "header", "nope", "none", "empty", {"const": [["x"], None]}]}
    assert read(concat, DOC) == ["Install", "From source", "Windows", ["x"]]
    assert read({"concat": ["nope", "none"]}, DOC) == []  # never missing
    assert read({"first": ["nope", "none", "empty", "header", "meta.file_path"]}, DOC) == "Windows"
    assert read({"first": ["nope", "none"]}, DOC) is MISSING


# ---------------------------------------------------------------------------------------------
# transforms
# ---------------------------------------------------------------------------------------------


def test_regex_takes_the_first_group_or_the_whole_match_stripped():
    text = {"t": "### Windows  \n\nUse WSL.\n## Later"}
    assert read({"path": "t", "regex": r"^#{1,6}[ \t]+(.+)"}, text) == "Windows"
    assert read({"path": "t", "regex": r"W\w+"}, text) == "Windows"
    assert read({"path": "t", "regex": r"^Nope (.*)"}, text) is MISSING
    assert read({"path": "t", "regex": r"Use (x)?"}, text) is MISSING  # the group took no part
    assert read({"path": "nope", "regex": "x"}, text) is MISSING


def test_split_drops_empty_pieces():
    assert read({"path": "p", "split": "/"}, {"p": "/Install/From source/"}) == ["Install", "From source"]
    assert read({"path": "p", "split": "/"}, {"p": "/"}) == []
    assert read({"path": "p", "split": " > "}, {"p": "A > B"}) == ["A", "B"]


@pytest.mark.parametrize(
    ("path", "roots", "expected"),
    [
        ("/srv/corpus/guide/install.md", "/srv/corpus", "guide/install.md"),
        ("/srv/corpus/guide/install.md", "/srv/corpus/", "guide/install.md"),
        ("/srv/corpus2/x.md", "/srv/corpus", "/srv/corpus2/x.md"),  # not under the root: unchanged
        ("/elsewhere/x.md", ["/srv/a", "/elsewhere"], "x.md"),
        ("corpora/kebab-docs/a/b.md", "corpora/kebab-docs", "a/b.md"),
        ("./corpora/kebab-docs/a/../b.md", "corpora/kebab-docs", "b.md"),
        ("C:\\corpus\\guide\\a.md", "C:\\corpus", "guide/a.md"),
        ("/srv/corpus", "/srv/corpus", "."),
    ],
)
def test_relative_to(path, roots, expected):
    assert read({"path": "p", "relative_to": roots}, {"p": path}) == expected


def test_basename_and_transforms_on_first():
    assert read({"path": "p", "basename": True}, {"p": "/a/b/c.md"}) == "c.md"
    assert read({"path": "p", "basename": False}, {"p": "/a/b/c.md"}) == "/a/b/c.md"
    spec = {"first": ["meta.source", "meta.file_path"], "relative_to": "/srv/corpus"}
    assert read(spec, DOC) == "guide/install.md"


# ---------------------------------------------------------------------------------------------
# properties
# ---------------------------------------------------------------------------------------------

json_leaf = st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=3)
json_doc = st.recursive(
    json_leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("ab0-1"), inner, max_size=3),
    max_leaves=12,
)
paths = st.lists(st.sampled_from(["a", "b", "0", "1", "-1"]), min_size=1, max_size=4).map(".".join)


@given(json_doc, paths)
def test_a_string_path_reads_what_dig_reads(doc, path):
    got = read(path, doc)
    assert got == read({"path": path}, doc) or (got is MISSING and read({"path": path}, doc) is MISSING)
    expected = dig(doc, path, MISSING)
    assert got is expected or got == expected


segment = st.text(alphabet="abcxyz-_ é", min_size=1, max_size=6).filter(lambda s: s.strip(". ") == s)


@given(st.lists(segment, min_size=1, max_size=3), st.lists(segment, min_size=1, max_size=3))
def test_relative_to_inverts_joining_a_root(root, rel):
    root_path, rel_path = "/" + "/".join(root), "/".join(rel)
    assert read({"path": "p", "relative_to": root_path}, {"p": f"{root_path}/{rel_path}"}) == rel_path


@given(st.lists(st.none() | st.text(max_size=2) | st.lists(st.text(max_size=2) | st.none(), max_size=3)))
def test_concat_is_a_flattening_that_skips_absent_parts(parts):
    doc = {str(i): p for i, p in enumerate(parts)}
    spec = {"concat": [str(i) for i in range(len(parts))] + ["missing"]}
    expected = []
    for p in parts:
        items = p if isinstance(p, list) else [p]
        expected.extend(v for v in items if v not in (None, ""))
    assert read(spec, doc) == expected


# ---------------------------------------------------------------------------------------------
# config-time errors
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (5, "expected a dotted path or an object with one of path, const, concat, first, got int"),
        ("", "'' is not a dotted path (empty step); for keys with dots use {path: [a, b]}"),
        ("a..b", "'a..b' is not a dotted path (empty step)"),
        ({"concatenate": ["a"]}, "unknown key 'concatenate'; expected one of path, const, concat, first"),
        ({"path": "a", "const": 1}, "expected exactly one of path, const, concat, first; got path and const"),
        ({"split": "/"}, "expected exactly one of path, const, concat, first; got none"),
        ({"const": "bm25", "basename": True}, "const takes no transforms, got basename"),
        ({"concat": ["a"], "split": "/"}, "concat takes no transforms, got split (put them on its parts)"),
        ({"concat": []}, "concat: expected a non-empty list of expressions"),
        ({"first": "a"}, "first: expected a non-empty list of expressions"),
        ({"concat": ["a", {"path": "b", "splt": "/"}]}, "concat.1: unknown key 'splt'"),
        ({"first": ["a", {"concat": [7]}]}, "first.1.concat.0: expected a dotted path or an object"),
        ({"path": []}, "path: expected a dotted path or a non-empty list of keys and indices"),
        ({"path": ["a", True]}, "path: expected a dotted path or a non-empty list of keys and indices"),
        ({"path": "a..b"}, "path: 'a..b' is not a dotted path"),
        (
            {"path": "a", "regex": "("},
            "regex: not a valid regular expression: missing ), unterminated subpattern",
        ),
        ({"path": "a", "regex": 3}, "regex: expected a pattern string, got int"),
        ({"path": "a", "split": ""}, "split: expected a non-empty separator string"),
        (
            {"path": "a", "split": "/", "basename": True},
            "split gives a list: relative_to and basename cannot",
        ),
        ({"path": "a", "relative_to": ["/x", 3]}, "relative_to: expected a folder path or a non-empty list"),
        ({"path": "a", "relative_to": ""}, "relative_to: expected a folder path or a non-empty list"),
        ({"path": "a", "basename": "yes"}, "basename: expected true or false, got 'yes'"),
    ],
)
def test_malformed_expressions_are_refused_at_load_naming_field_and_position(spec, message):
    with pytest.raises(ValueError) as info:
        compile_expr(spec)
    assert str(info.value).startswith(message), str(info.value)
    with pytest.raises(InputError) as info:
        settings_from_dict(
            {
                "system": {
                    "kind": "command",
                    "search_argv": ["x"],
                    "response": {"hit_fields": {"doc_path": spec}},
                }
            }
        )
    (offender,) = info.value.offenders
    assert offender.field == "system.response.hit_fields.doc_path"
    assert offender.reason.startswith(message), offender.reason  # without pydantic's "Value error, "


def test_answer_and_citation_fields_are_checked_too():
    with pytest.raises(InputError) as info:
        settings_from_dict(
            {
                "system": {
                    "kind": "http",
                    "search_url": "http://127.0.0.1:1/s",
                    "response": {
                        "answer_fields": {"text": {"const": 1, "regex": "x"}},
                        "citation_fields": {"doc_path": {"first": []}},
                    },
                }
            }
        )
    assert [(o.field, o.reason) for o in info.value.offenders] == [
        ("system.response.answer_fields.text", "const takes no transforms, got regex"),
        ("system.response.citation_fields.doc_path", "first: expected a non-empty list of expressions"),
    ]


def test_a_bad_mapping_exits_2_from_the_cli_with_its_line(tmp_path):
    cfg = write(
        tmp_path / "run.yaml",
        "system:\n"
        "  kind: http\n"
        "  search_url: http://127.0.0.1:9/search\n"
        "  response:\n"
        "    hit_fields:\n"
        "      heading_path: {concat: [parent_headers, {path: header, splt: /}]}\n",
    )
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KEBAB_EVAL_", "DAGSTER_"))}
    env.update(DAGSTER_HOME=str(home), COLUMNS="250")  # one problem per line
    proc = run_cli(["run", "--config", str(cfg)], env=env, timeout=300, cwd=tmp_path)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    assert "line 6" in proc.stderr and "system.response.hit_fields.heading_path" in proc.stderr
    assert "concat.1: unknown key 'splt'" in proc.stderr


def test_a_mapping_survives_the_settings_round_trip():
    mapping = {
        "hits": "documents",
        "hit_fields": {
            "heading_path": {"concat": ["parent_headers", {"path": ["meta", "h.1"], "split": "/"}]},
            "score_kind": {"const": "bm25"},
        },
    }
    settings = settings_from_dict(
        {"system": {"kind": "http", "search_url": "http://127.0.0.1:1/s", "response": mapping}}
    )
    again = settings_from_dict(settings.model_dump())  # how launchpad overrides rebuild settings
    assert again.system.response == settings.system.response
    assert again.system.response.model_dump(exclude_defaults=True) == mapping
    raw = {"documents": [{"parent_headers": ["A"], "meta": {"h.1": "/B/C/"}}]}
    (hit,), _ = parse_hits(raw, 10, again.system.response.model_copy(deep=True))
    assert (hit.heading_path, hit.score_kind) == (["A", "B", "C"], "bm25")


# ---------------------------------------------------------------------------------------------
# run-time data errors
# ---------------------------------------------------------------------------------------------


def test_untransformable_data_is_a_bad_response_naming_hit_and_field():
    mapping = ResponseMap(
        hit_fields={"heading_path": {"path": "h", "split": "/"}, "doc_path": {"path": "p", "basename": True}}
    )
    assert parse_hits([{"h": "/A/", "p": "x/y.md"}], 5, mapping)[0][0].heading_path == ["A"]
    assert (
        bad(parse_hits, [{"h": "/A/"}, {"h": 3}], 5, mapping)
        == "hits[1]: heading_path: split expects a string, got int"
    )
    assert (
        bad(parse_hits, [{"p": ["a"]}], 5, mapping)
        == "hits[0]: doc_path: basename expects a string, got list"
    )
    # a value of the wrong type after mapping is the usual per-field message
    assert bad(parse_hits, [{"h": "/A/", "p": "x"}], 5, ResponseMap(hit_fields={"score": {"const": "high"}}))
    answer_map = ResponseMap(
        answer_fields={"text": {"path": "out", "regex": "(.*)"}},
        citation_fields={"doc_path": {"path": "p", "relative_to": "/c"}},
    )
    assert bad(parse_answer, {"out": 5}, answer_map) == "answer.text: regex expects a string, got int"
    payload = {"out": "ok", "citations": [{"p": "/c/a.md"}, {"p": {"x": 1}}]}
    assert (
        bad(parse_answer, payload, answer_map)
        == "citations[1]: doc_path: relative_to expects a string, got dict"
    )
    assert (
        parse_answer({"out": "ok", "citations": [{"p": "/c/a.md"}]}, answer_map).citations[0].doc_path
        == "a.md"
    )


def test_a_list_is_a_hit_only_when_mapped():
    pairs = [[{"id": "c2"}, 0.4], [{"id": "c1"}, 0.9]]
    mapping = ResponseMap(hit_fields={"chunk_id": "0.id", "score": "1"})
    hits, _ = parse_hits(pairs, 5, mapping)
    assert [(h.rank, h.chunk_id, h.score) for h in hits] == [(1, "c2", 0.4), (2, "c1", 0.9)]
    assert bad(parse_hits, pairs, 5) == "hits[0]: expected an object or a chunk-id string, got list"
