"""Untrusted files are parsed safely (SPEC §11, issue 8 item 7).

* Safe loaders: golden sets and run configs are YAML read with safe loaders only. Python object
  tags (``!!python/object/apply:os.system`` and friends, in every spelling) and ``!!binary`` are
  an :class:`InputError` naming the file, the line and column, and the reason; the payloads never
  run (each would create a marker file; the control test shows PyYAML's unsafe loader does run
  them). Replay traces are JSON only: YAML there is "not JSON". From the CLI: exit 2, no traceback.
* Size limits: golden sets and replay traces over ``KEBAB_EVAL_MAX_INPUT_MB`` (default 1 GiB) and
  run configs over ``KEBAB_EVAL_MAX_CONFIG_MB`` (default 4 MiB) are refused before parsing, with
  the file, its size, the limit and the variable to raise. Over-limit files here are sparse (a
  1 GiB file costs no disk): full of NUL bytes, they would be a parse error if they were read.
* Alias bombs: YAML whose anchors and aliases expand it more than tenfold (beyond 100,000 nodes),
  including merge-key bombs that blow up inside PyYAML itself, and self-referencing documents,
  are refused with the line where the expansion happens; ordinary anchors still load.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from kebab_eval_pipeline.chain.settings import load_settings
from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.foundation.limits import (
    CONFIG_LIMIT_ENV,
    INPUT_ENV,
    MIB,
    GuardedCSafeLoader,
    GuardedSafeLoader,
    StrictCSafeLoader,
    _expanded_sizes,
    max_bytes,
    strict_loader,
)
from kebab_eval_pipeline.golden.load import load_golden
from kebab_eval_pipeline.systems.kinds.replay import ReplaySystemSettings
from kebab_eval_pipeline.systems.replay import ReplaySystem
from tests.conftest import write
from tests.test_cli import cli, env, no_traceback  # noqa: F401  (env is a fixture)

GOLDEN = """\
schema_version: "1"
name: safe
queries:
  - id: q1
    query: {value}
    supports: [{{doc_id: d1}}]
"""
GOLDEN_LINE = 5  # the line of {value}
CONFIG = """\
baseline: none
golden: {value}
"""
CONFIG_LINE = 2
# Each payload would touch {marker} if it were constructed; "tag" is what the reason says.
PAYLOADS = {
    "apply": ('!!python/object/apply:os.system ["touch {marker}"]', "constructor for the tag"),
    "apply-subprocess": (
        '!!python/object/apply:subprocess.check_call [["touch", "{marker}"]]',
        "constructor for the tag",
    ),
    "new": ('!!python/object/new:os.system ["touch {marker}"]', "constructor for the tag"),
    "name": ("!!python/name:os.system", "constructor for the tag"),
    "module": ("!!python/module:os", "constructor for the tag"),
    "verbatim-tag": (
        '!<tag:yaml.org,2002:python/object/apply:os.system> ["touch {marker}"]',
        "constructor for the tag",
    ),
    "tag-directive": ('!p!object/apply:os.system ["touch {marker}"]', "constructor for the tag"),
    "local-tag": ('!os.system ["touch {marker}"]', "constructor for the tag"),
    "binary": ("!!binary dG91Y2ggbWFya2Vy", "binary data (!!binary) is not accepted"),
    "binary-not-base64": ('!!binary "!!!!"', "binary data (!!binary) is not accepted"),
}
TAG_DIRECTIVE = "%TAG !p! tag:yaml.org,2002:python/\n---\n"


def payload_file(tmp_path: Path, template: str, name: str, suffix: str = ".yaml") -> tuple[Path, Path, int]:
    """(the file, the marker the payload would create, the payload's line)."""
    marker = tmp_path / "MARKER"
    value = PAYLOADS[name][0].format(marker=marker)
    text = template.format(value=value)
    line = GOLDEN_LINE if template is GOLDEN else CONFIG_LINE
    if name == "tag-directive":
        text, line = TAG_DIRECTIVE + text, line + 2
    return write(tmp_path / f"input{suffix}", text), marker, line


def assert_refused(exc: InputError, path: Path, line: int, reason: str) -> None:
    (offender,) = exc.offenders
    assert offender.file == str(path)
    assert offender.position is not None and offender.position.startswith(f"line {line}, column ")
    assert reason in offender.reason and offender.reason.startswith("invalid YAML: ")
    assert str(path) in str(exc)


# ---------------------------------------------------------------------------------------------
# safe loaders
# ---------------------------------------------------------------------------------------------


def test_control_the_payload_is_live_under_an_unsafe_loader(tmp_path):
    """Without this, "no marker" could mean a broken payload rather than a safe loader."""
    path, marker, _ = payload_file(tmp_path, GOLDEN, "apply")
    yaml.unsafe_load(path.read_text())
    assert marker.exists()


@pytest.mark.parametrize("suffix", [".yaml", ".yml"])
@pytest.mark.parametrize("name", sorted(PAYLOADS))
def test_golden_object_tags_are_refused_and_never_run(tmp_path, name, suffix):
    path, marker, line = payload_file(tmp_path, GOLDEN, name, suffix)
    with pytest.raises(InputError) as info:
        load_golden(path)
    assert info.value.summary == "golden set is invalid"
    assert_refused(info.value, path, line, PAYLOADS[name][1])
    assert not marker.exists()


@pytest.mark.parametrize("name", sorted(PAYLOADS))
def test_config_object_tags_are_refused_and_never_run(tmp_path, name):
    path, marker, line = payload_file(tmp_path, CONFIG, name)
    with pytest.raises(InputError) as info:
        load_settings(path)
    assert info.value.summary == "run config is malformed"
    assert_refused(info.value, path, line, PAYLOADS[name][1])
    assert not marker.exists()


@pytest.mark.parametrize("fmt", ["auto", "kebab", "wfgy", "export"])
def test_replay_traces_are_json_only(tmp_path, fmt):
    marker = tmp_path / "MARKER"
    trace = write(
        tmp_path / "trace.jsonl",
        f'query_id: !!python/object/apply:os.system ["touch {marker}"]\nhits: []\n',
    )
    with pytest.raises(InputError) as info:
        ReplaySystem(ReplaySystemSettings(kind="replay", path=str(trace), format=fmt))
    assert str(trace) in str(info.value)
    assert info.value.summary in (
        "unknown replay trace format",
        "replay trace is not JSON",
        f"replay trace trace.jsonl ({fmt}) cannot be read",
    )
    assert not marker.exists()


def test_cli_refuses_object_tags_with_exit_2(env, tmp_path):  # noqa: F811
    env = {**env, "COLUMNS": "500"}  # one offender per line
    golden, marker, line = payload_file(tmp_path, GOLDEN, "apply")
    proc = cli(env, "golden", "validate", str(golden))
    assert proc.returncode == 2, proc.stderr
    no_traceback(proc)
    assert f"{golden}:line {line}, column " in proc.stderr and "constructor for the tag" in proc.stderr

    config = write(tmp_path / "eval.yaml", CONFIG.format(value=PAYLOADS["apply"][0].format(marker=marker)))
    proc = cli(env, "run", "--config", str(config), "--run-id", "safe-1")
    assert proc.returncode == 2, proc.stderr
    no_traceback(proc)
    assert f"{config}:line {CONFIG_LINE}, column " in proc.stderr
    assert not marker.exists()


# ---------------------------------------------------------------------------------------------
# size limits
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def no_limit_env(monkeypatch):
    monkeypatch.delenv(INPUT_ENV, raising=False)
    monkeypatch.delenv(CONFIG_LIMIT_ENV, raising=False)


def sparse(path: Path, size: int) -> Path:
    """A file of ``size`` bytes (NULs) that takes no disk space."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as fh:
        fh.truncate(size)
    return path


def test_default_limits(no_limit_env):
    assert max_bytes(INPUT_ENV) == 1024 * MIB
    assert max_bytes(CONFIG_LIMIT_ENV) == 4 * MIB


def test_golden_over_the_default_limit_is_refused_before_reading(tmp_path, no_limit_env):
    path = sparse(tmp_path / "huge.jsonl", 1024 * MIB + 1)
    with pytest.raises(InputError) as info:
        load_golden(path)
    (offender,) = info.value.offenders
    assert offender.file == str(path)
    assert offender.reason == (
        "1.0 GiB (1,073,741,825 bytes) is over the 1.0 GiB (1,073,741,824 bytes) limit for a golden "
        "set; to read it, raise the limit with the environment variable KEBAB_EVAL_MAX_INPUT_MB=<MiB>"
    )


def test_golden_limit_is_set_by_the_environment(tmp_path, monkeypatch):
    path = write(tmp_path / "g.jsonl", json.dumps({"id": "q1", "query": "x", "supports": [{"doc_id": "d"}]}))
    monkeypatch.setenv(INPUT_ENV, str(10 / 1024 / 1024))  # 10 bytes
    with pytest.raises(InputError) as info:
        load_golden(path)
    assert info.value.offenders[0].reason.endswith(
        f"is over the 10 bytes limit for a golden set; to read it, raise the limit with the "
        f"environment variable {INPUT_ENV}=<MiB>"
    )
    monkeypatch.setenv(INPUT_ENV, "0.5")
    assert [q.id for q in load_golden(path).golden.queries] == ["q1"]


def test_config_over_the_default_limit_is_refused_before_parsing(tmp_path, monkeypatch, no_limit_env):
    path = sparse(tmp_path / "eval.yaml", 4 * MIB + 1)
    with pytest.raises(InputError) as info:
        load_settings(path)
    assert info.value.summary == "run config is too large"
    (offender,) = info.value.offenders
    assert (offender.file, offender.position) == (str(path), "top level")
    assert offender.reason.startswith("4.0 MiB (4,194,305 bytes) is over the 4.0 MiB (4,194,304 bytes) limit")
    assert f"{CONFIG_LIMIT_ENV}=<MiB>" in offender.reason
    # Raised: the same file is now read, and its NUL bytes are what is wrong with it.
    monkeypatch.setenv(CONFIG_LIMIT_ENV, "5")
    with pytest.raises(InputError) as info:
        load_settings(path)
    assert info.value.summary == "run config is malformed"
    assert info.value.offenders[0].reason == "invalid YAML: character 0 is not allowed"


def test_replay_trace_over_the_limit_is_refused_before_reading(tmp_path, monkeypatch, no_limit_env):
    path = sparse(tmp_path / "trace.jsonl", 1024 * MIB + 1)
    with pytest.raises(InputError) as info:
        ReplaySystem(ReplaySystemSettings(kind="replay", path=str(path)))
    assert info.value.summary == "replay trace is too large"
    assert info.value.offenders[0].file == str(path)
    assert info.value.offenders[0].reason.endswith(
        f"limit for a replay trace; to read it, raise the limit with the environment variable "
        f"{INPUT_ENV}=<MiB>"
    )


@pytest.mark.parametrize("value", ["abc", "0", "-1", "inf", "nan", "1e999"])
def test_a_bad_limit_setting_is_an_input_error(tmp_path, monkeypatch, value):
    monkeypatch.setenv(CONFIG_LIMIT_ENV, value)
    with pytest.raises(InputError) as info:
        load_settings(write(tmp_path / "eval.yaml", "baseline: none\n"))
    assert info.value.summary == f"{CONFIG_LIMIT_ENV} is invalid"
    assert info.value.offenders[0].reason == f"expected a positive number of MiB, got {value!r}"


def test_cli_refuses_an_oversized_golden_set_with_exit_2(env, tmp_path):  # noqa: F811
    env = {**env, "COLUMNS": "500", INPUT_ENV: "0.0001"}  # 104 bytes
    golden = write(tmp_path / "g.yaml", GOLDEN.format(value="a question that is long enough " * 3))
    proc = cli(env, "golden", "validate", str(golden))
    assert proc.returncode == 2, proc.stderr
    no_traceback(proc)
    assert f"{golden}:top level: " in proc.stderr and f"{INPUT_ENV}=<MiB>" in proc.stderr


# ---------------------------------------------------------------------------------------------
# alias bombs
# ---------------------------------------------------------------------------------------------


def laughs(levels: int, indent: str = "") -> str:
    """The "billion laughs": level i is nine aliases of level i-1 (9**levels strings)."""
    lines = [f'{indent}a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"{indent}a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def merges(levels: int, indent: str = "") -> str:
    """Merge keys: PyYAML copies every merged pair while loading, 9**levels of them."""
    lines = [f"{indent}m0: &m0 {{{', '.join(f'k{j}: {j}' for j in range(9))}}}"]
    lines += [f"{indent}m{i}: &m{i} {{<<: [{', '.join([f'*m{i - 1}'] * 9)}]}}" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


# The first level past 100,000 nodes: a5 (9**6 strings), m4 (its list of 9 m3s, 9**4 * 19 nodes).
BOMBS = {"laughs": (laughs(12, "    "), 6), "merge": (merges(9, "    "), 5)}


@pytest.mark.parametrize("bomb", sorted(BOMBS))
def test_golden_alias_bombs_are_refused(tmp_path, bomb):
    text, line = BOMBS[bomb]
    path = write(tmp_path / "g.yaml", 'schema_version: "1"\nextra:\n' + text + "queries: []\n")
    with pytest.raises(InputError) as info:
        load_golden(path)
    (offender,) = info.value.offenders
    assert offender.file == str(path) and offender.position.startswith(f"line {line + 2}, column ")
    assert "anchors and aliases expand this document from " in offender.reason
    assert "over the limit of 100,000 (an alias bomb?)" in offender.reason


@pytest.mark.parametrize("bomb", sorted(BOMBS))
def test_config_alias_bombs_are_refused(tmp_path, bomb):
    text, line = BOMBS[bomb]
    path = write(
        tmp_path / "eval.yaml",
        "system:\n  kind: http\n  search_url: http://127.0.0.1:1/s\n  search_request:\n" + text,
    )
    with pytest.raises(InputError) as info:
        load_settings(path)
    (offender,) = info.value.offenders
    assert offender.position.startswith(f"line {line + 4}, column ")
    assert "(an alias bomb?)" in offender.reason


@pytest.mark.parametrize("text", ["queries: &q [*q]\n", "queries:\n  - &e {id: q1, self: *e}\n"])
def test_self_referencing_documents_are_refused(tmp_path, text):
    path = write(tmp_path / "g.yaml", text)
    with pytest.raises(InputError) as info:
        load_golden(path)
    assert "an alias refers to a node that contains it (a recursive document)" in str(info.value)


def test_ordinary_anchors_and_merge_keys_still_load(tmp_path):
    path = write(
        tmp_path / "eval.yaml",
        "baseline: none\n"
        "gates:\n"
        "  mrr: &strict {min: 0.5, blocking: true}\n"
        "  hit@5: *strict\n"
        "  recall@10: {<<: *strict, blocking: false}\n",
    )
    gates = load_settings(path).gates
    assert gates["mrr"] == gates["hit@5"] and gates["mrr"].min == 0.5 and gates["mrr"].blocking
    assert gates["recall@10"].min == 0.5 and not gates["recall@10"].blocking


def test_a_golden_set_sharing_supports_by_alias_loads_like_its_json(tmp_path):
    """What ``yaml.dump`` writes for shared objects (&id001 / *id001), as the benchmark's YAML has."""
    shared = [{"doc_id": "d1", "heading_path": ["A", "B"]}]
    queries = [{"id": f"q{i}", "query": f"question {i}", "supports": shared} for i in range(50)]
    text = yaml.safe_dump({"schema_version": "1", "queries": queries})
    assert "&id001" in text and "*id001" in text
    assert strict_loader(yaml.CSafeLoader, text) is GuardedCSafeLoader
    from_yaml = load_golden(write(tmp_path / "g.yaml", text)).golden.queries
    from_json = load_golden(write(tmp_path / "g.json", json.dumps({"queries": queries}))).golden.queries
    assert from_yaml == from_json


@pytest.mark.parametrize(
    "text",
    [
        "a: &x 1\nb: *x\n",
        "a: &x [1]\nb: [*x]\n",
        "a: &x 1\nb: {c: *x}\n",
        'a: &x 1\nb: {"c":*x}\n',
        "a: &x 1\nb:\n- *x\n",
        "a: &x 1\nb: {? *x : 1}\n",
        "&x a: 1\nb: [1,*x]\n",
        "a: &x 1\nb:\t*x\n",
        "a: &x 1\u2028b: *x\n",
    ],
)
def test_alias_prefilter_sees_every_alias(text):
    """The walk is skipped only for texts that cannot hold an alias: every spelling is caught."""
    assert strict_loader(yaml.SafeLoader, text) is GuardedSafeLoader
    assert strict_loader(yaml.CSafeLoader, text) is GuardedCSafeLoader


@pytest.mark.parametrize("text", ["q: R&D and **bold** text\n", "q: a*b & c * d\n", "q: '**x**'\n"])
def test_alias_prefilter_skips_texts_without_aliases(text):
    assert strict_loader(yaml.CSafeLoader, text) is StrictCSafeLoader


# No control or line-separator characters: PyYAML's emitter does not round-trip some (U+0085).
TEXT = st.text(st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")), max_size=5)
SHARED_TREES = st.recursive(
    TEXT | st.integers(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=10,
)


@settings(max_examples=100, deadline=None)
@given(
    shared=SHARED_TREES.filter(lambda v: isinstance(v, list | dict)),
    others=st.lists(SHARED_TREES, max_size=3),
    flow=st.booleans(),
)
def test_any_dumped_document_with_aliases_takes_the_guarded_loader(shared, others, flow):
    doc = {"first": shared, "rest": others, "again": shared}
    text = yaml.safe_dump(doc, default_flow_style=flow, allow_unicode=True)
    if "*id" not in text:  # an empty shared container is written out twice, not aliased
        return
    assert strict_loader(yaml.CSafeLoader, text) is GuardedCSafeLoader
    assert yaml.load(text, Loader=GuardedCSafeLoader) == doc
    # The walk's arithmetic: the nodes the document expands to, counted the slow way.
    sizes, _ = _expanded_sizes(yaml.compose(text, Loader=yaml.CSafeLoader))
    assert max(sizes.values()) == expanded(doc)


def expanded(value) -> int:
    if isinstance(value, list):
        return 1 + sum(map(expanded, value))
    if isinstance(value, dict):
        return 1 + sum(expanded(k) + expanded(v) for k, v in value.items())
    return 1
