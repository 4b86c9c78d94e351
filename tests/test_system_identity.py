"""System identities (kebab_eval_pipeline/systems/identity.py): what names a system, what is only a
version of it, that no secret enters one, and that an old run's stored details derive the same
identity a new run records — built from real settings and the real adapters' own ``info()``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from kebab_eval_pipeline.chain.settings import settings_from_dict
from kebab_eval_pipeline.foundation.demo import DEMO_CORPUS
from kebab_eval_pipeline.systems.factory import build_system
from kebab_eval_pipeline.systems.identity import (
    derive_identity,
    identity_from_settings,
    same_system,
    systems_differ,
)


def _system(doc: dict):
    return settings_from_dict({"system": doc}).system


def _stored(doc: dict) -> dict:
    """``info["system"]`` as a run stored it before identities were recorded: kind, mode and the
    adapter's own details (pipeline.run_identity's layout, without ``identity``). A command
    system's details without its version report: asking for that would start the process."""
    system = build_system(settings_from_dict({"system": doc}))
    if doc["kind"] == "command":
        return {"kind": "command", "mode": doc.get("mode"), **system._details()}
    info = system.info()
    return {"kind": info.kind, "mode": info.mode, **info.details}


def test_reference_identity_is_corpus_and_mode_and_chunking_is_a_version(tmp_path):
    demo = identity_from_settings(_system({"kind": "reference"}))
    assert demo == {
        "kind": "reference",
        "target": "demo corpus",
        "mode": "lexical",
        "name": None,
        "label": "reference demo corpus (lexical)",
    }
    # The demo corpus named by its path is still the demo; chunk size and overlap are versions.
    again = identity_from_settings(
        _system({"kind": "reference", "corpus": str(DEMO_CORPUS), "chunk_size": 300, "chunk_overlap": 50})
    )
    assert same_system(demo, again) is True
    hybrid = identity_from_settings(_system({"kind": "reference", "mode": "hybrid"}))
    assert same_system(demo, hybrid) is False and hybrid["label"] == "reference demo corpus (hybrid)"
    mine = identity_from_settings(_system({"kind": "reference", "corpus": str(tmp_path)}))
    assert mine["target"] == f"corpus {tmp_path.resolve()}" and same_system(demo, mine) is False
    index = identity_from_settings(_system({"kind": "reference", "index": str(tmp_path)}))
    assert index["target"] == f"index {tmp_path.resolve()}"


def test_http_identity_keeps_no_credential_and_ignores_retry_settings(monkeypatch):
    monkeypatch.setenv("SEARCH_TOKEN", "s3cret-token-value")
    doc = {
        "kind": "http",
        "search_url": "http://alice:pa55word@Search.Example:8080/v1/search?api_key=k3y-in-query&x=1",
        "headers_from_env": {"Authorization": "Bearer ${SEARCH_TOKEN}"},
        "mode": "hybrid",
    }
    identity = identity_from_settings(_system(doc))
    assert identity["target"] == "http://search.example:8080/v1/search"
    assert identity["label"] == "http http://search.example:8080/v1/search (hybrid)"
    text = json.dumps(identity)
    for secret in ("alice", "pa55word", "k3y-in-query", "s3cret", "SEARCH_TOKEN", "Authorization"):
        assert secret not in text
    slower = identity_from_settings(_system({**doc, "timeout_s": 90, "retries": 5, "concurrency": 16}))
    assert same_system(identity, slower) is True
    other_port = identity_from_settings(
        _system({**doc, "search_url": "http://search.example:9090/v1/search"})
    )
    assert same_system(identity, other_port) is False


def test_command_identity_is_the_argv_and_protocols_name_their_own(tmp_path):
    per_query = identity_from_settings(
        _system({"kind": "command", "search_argv": ["kebab", "search", "--json", "{query}"], "timeout_s": 5})
    )
    assert per_query["target"] == "kebab search --json '{query}'"
    assert per_query["label"] == "command `kebab search --json '{query}'`"
    jsonl = identity_from_settings(
        _system({"kind": "command", "protocol": "jsonl", "argv": ["kebab", "serve"]})
    )
    assert jsonl["target"] == "kebab serve" and same_system(per_query, jsonl) is False


def test_a_name_replaces_everything_else():
    a = identity_from_settings(
        _system({"kind": "command", "name": "prod-search", "search_argv": ["a", "{query}"], "mode": "x"})
    )
    b = identity_from_settings(_system({"kind": "command", "name": "prod-search", "search_argv": ["b"]}))
    assert a == b and a["label"] == "command 'prod-search'"
    http = identity_from_settings(
        _system({"kind": "http", "name": "prod-search", "search_url": "http://h/s"})
    )
    assert same_system(a, http) is False  # a name is per kind


def test_runs_without_an_identity_are_unknown_unless_their_kinds_differ():
    old_reference = {"system": {"kind": "reference", "mode": "lexical", "corpus_sha256": "ab" * 32}}
    assert derive_identity(old_reference["system"]) is None
    new_reference = {"system": {"kind": "reference", "identity": identity_from_settings(_system({}))}}
    assert systems_differ(old_reference, new_reference) is None  # cannot tell
    command = {"system": {"kind": "command", "search_argv": "kebab search"}}
    assert systems_differ(old_reference, command) is True  # another kind: another system
    assert systems_differ(command, command) is False


@settings(max_examples=25, deadline=None)
@given(
    args=st.lists(
        st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=12), max_size=4
    ),
    mode=st.none() | st.sampled_from(["lexical", "hybrid"]),
    jsonl=st.booleans(),
)
def test_old_command_runs_derive_the_identity_new_runs_record(args, mode, jsonl):
    argv = [sys.executable, *[a.replace("{", "(").replace("}", ")") for a in args]]
    doc = {"kind": "command", "mode": mode}
    doc.update({"protocol": "jsonl", "argv": argv} if jsonl else {"search_argv": [*argv, "{query}"]})
    system = _system(doc)
    assert derive_identity(_stored(doc)) == identity_from_settings(system)


@settings(max_examples=25, deadline=None)
@given(
    host=st.from_regex(r"[a-z][a-z0-9-]{0,10}(\.[a-z]{2,5})?", fullmatch=True),
    port=st.none() | st.integers(1, 65535),
    path=st.from_regex(r"(/[a-z0-9_-]{1,8}){0,3}", fullmatch=True),
    query=st.from_regex(r"(\?[a-z]{1,5}=[A-Za-z0-9]{1,12})?", fullmatch=True),
    mode=st.none() | st.sampled_from(["lexical", "hybrid"]),
)
def test_old_http_runs_derive_the_identity_new_runs_record(host, port, path, query, mode):
    url = f"http://user:pw@{host}{f':{port}' if port else ''}{path}{query}"
    doc = {"kind": "http", "search_url": url, "mode": mode}
    identity = identity_from_settings(_system(doc))
    assert derive_identity(_stored(doc)) == identity
    assert "user:pw@" not in identity["target"]
    assert "?" not in identity["target"]


def test_old_replay_runs_derive_the_identity_new_runs_record(tmp_path):
    trace = tmp_path / "trace.jsonl"
    trace.write_text(json.dumps({"query_id": "q1", "hits": []}) + "\n", encoding="utf-8")
    doc = {"kind": "replay", "path": str(trace)}
    identity = identity_from_settings(_system(doc))
    assert identity["target"] == str(trace.resolve()) and identity["mode"] is None
    assert derive_identity(_stored(doc)) == identity
    # A new recording at another path is another system (name both the same to chain them).
    other = tmp_path / "trace-2.jsonl"
    other.write_text(trace.read_text(), encoding="utf-8")
    recorded_again = identity_from_settings(_system({"kind": "replay", "path": str(other)}))
    assert same_system(identity, recorded_again) is False
    assert Path(identity["target"]).name == "trace.jsonl"
