"""The secret mask (net/secrets.py): every form a system echoes a secret in is masked, in text,
table columns and nested values; a value too short to mask is reported, not masked; what holds
no secret is left exactly as it was; the run config names every secret it uses; the last-line
passes (files written, standard streams) mask what a process's configs hold."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import pandas as pd
import pytest

from kebab_eval_pipeline.chain.settings import settings_from_dict
from kebab_eval_pipeline.cli.terminal import MaskedStream
from kebab_eval_pipeline.foundation import atomic
from kebab_eval_pipeline.foundation.net import secrets
from kebab_eval_pipeline.foundation.net.secrets import (
    MIN_SECRET_CHARS,
    Secret,
    SecretMask,
    header_secrets,
    scrub_text,
    url_secrets,
)
from kebab_eval_pipeline.golden.tables import typed_frame
from kebab_eval_pipeline.systems.base import HIT_COLUMNS
from tests.systems.test_secret_echo_cli import TOKEN, encodings

MASK = SecretMask.of([Secret("$T", TOKEN)])


@pytest.mark.parametrize("form", sorted(encodings(TOKEN)))
def test_every_echoed_form_is_masked(form: str) -> None:
    text = f"before {encodings(TOKEN)[form]} after"
    masked = MASK.text(text)
    assert masked.startswith("before ***") and masked.endswith(" after"), masked
    assert encodings(TOKEN)[form] not in masked


def test_forms_inside_longer_encodings_are_masked() -> None:
    raw = TOKEN.encode()
    cases = {
        "basic auth of user:token": base64.b64encode(b"someone:" + raw).decode(),
        "base64 of the whole header": base64.b64encode(b"Bearer " + raw).decode(),
        "urlsafe, unpadded, after 2 bytes": base64.urlsafe_b64encode(b"ab" + raw).decode().rstrip("="),
        "JSON in JSON": json.dumps(json.dumps({"auth": TOKEN})),
        "percent-encoded in lower case": "".join(f"%{b:02x}" for b in raw),
        "a \\u escape of an escape": "".join(f"\\\\u{ord(c):04X}" for c in TOKEN),
        "HTML entities": TOKEN.replace("&", "&amp;").replace('"', "&quot;").replace("/", "&#47;"),
        "mixed escapes": TOKEN.replace("/", "\\/").replace("+", "%2B").replace('"', "\\u0022"),
    }
    for name, text in cases.items():
        masked = MASK.text(f"<{text}>")
        assert "***" in masked, name
        # what is left of an encoding is at most the characters the neighbouring bytes share
        assert not any(run in masked for run in secrets._base64_runs(TOKEN)), name


def test_text_without_a_secret_is_unchanged_and_a_short_value_is_reported_not_masked() -> None:
    mask = SecretMask.of([Secret("$SHORT", "abc"), Secret("$T", TOKEN), Secret("$EMPTY", "")])
    assert mask.too_short == ("$SHORT",)
    assert mask.text("abc abcdef tk/Zq8 Bearer") == "abc abcdef tk/Zq8 Bearer"
    (warning,) = mask.warnings()
    assert "$SHORT" in warning and f"shorter than {MIN_SECRET_CHARS}" in warning and "abc" not in warning
    empty = SecretMask.of([Secret("$SHORT", "abc")])
    assert not empty and empty.text(f"x {TOKEN}") == f"x {TOKEN}"


def test_tables_are_masked_column_by_column_and_clean_tables_are_untouched() -> None:
    hits = typed_frame(
        [
            {"query_id": "q1", "rank": 1, "doc_id": "gold-1", "snippet": "clean", "heading_path": ["A"]},
            {
                "query_id": "q1",
                "rank": 2,
                "doc_id": f"doc-{TOKEN}",
                "snippet": f"Bearer {json.dumps(TOKEN)[1:-1]}",
                "heading_path": ["B", base64.b64encode(TOKEN.encode()).decode()],
            },
        ],
        HIT_COLUMNS,
    )
    masked = MASK.frame(hits)
    assert masked["doc_id"].tolist() == ["gold-1", "doc-***"]
    assert masked["snippet"].tolist() == ["clean", "Bearer ***"]
    assert [list(h) for h in masked["heading_path"]] == [["A"], ["B", "***"]]
    assert masked.dtypes.equals(hits.dtypes)
    assert hits["doc_id"].iloc[1] == f"doc-{TOKEN}"  # the input is not changed in place
    clean = hits.iloc[:1]
    assert MASK.frame(clean) is clean  # nothing to mask: no copy


def test_nested_values_and_models() -> None:
    value = {"a": [TOKEN, {"b": f"x{TOKEN}"}], TOKEN: 3, "n": 1.5}
    assert MASK.value(value) == {"a": ["***", {"b": "x***"}], "***": 3, "n": 1.5}


def test_header_and_url_secrets() -> None:
    env = {"TOK": TOKEN, "KEY": "key-Hh4mN7rT2bYdQ5"}
    found = header_secrets({"Authorization": "Bearer ${TOK}", "X-Api-Key": "KEY"}, env)
    values = {s.value for s in found}
    assert {TOKEN, f"Bearer {TOKEN}", "key-Hh4mN7rT2bYdQ5"} <= values and "Bearer" not in values
    assert {s.source for s in found} >= {"$TOK", "$KEY", "header Authorization"}
    basic = base64.b64encode(b"svc:basic-pass-123").decode()
    decoded = {s.value for s in header_secrets({"Authorization": "Basic ${B}"}, {"B": basic})}
    assert {basic, "svc:basic-pass-123", "basic-pass-123"} <= decoded  # a Basic token, and what it holds
    url = "https://me:p%40ss-w0rd-long@h.example/x?access_token=qsT0kenValue99xx&fmt=json"
    by_source = {s.source: s.value for s in url_secrets(url, "system.search_url")}
    assert by_source["system.search_url password"] == "p@ss-w0rd-long"
    assert by_source["system.search_url user info"] == "me:p@ss-w0rd-long"
    assert by_source["system.search_url query access_token"] == "qsT0kenValue99xx"
    # the query's short values are too short to be masked: reported, not masking "json" everywhere
    mask = SecretMask.of(url_secrets(url, "system.search_url"))
    assert mask.too_short == ("system.search_url query fmt",)
    assert mask.text("fmt=json") == "fmt=json"
    assert "***" in scrub_text(f"echo {base64.b64encode(b'me:p@ss-w0rd-long').decode()}", mask)


def test_the_run_config_names_every_secret_it_uses() -> None:
    settings = settings_from_dict(
        {
            "system": {
                "kind": "http",
                "search_url": "http://u:pw-long-enough@127.0.0.1:9/s?token=qsT0kenValue99xx",
                "headers_from_env": {"Authorization": "Bearer ${TOK}"},
            },
            "judge": {
                "backend": "openai_compatible",
                "base_url": "http://127.0.0.1:9/v1",
                "model": "m",
                "api_key_env": "JUDGE_KEY",
            },
            "secrets_from_env": ["OWN_SECRET", "SHORT_ONE"],
        }
    )
    env = {
        "TOK": TOKEN,
        "JUDGE_KEY": "judge-key-0123456",
        "OWN_SECRET": "own-secret-value",
        "SHORT_ONE": "ab",
    }
    mask = settings.secret_mask(env)
    values = {s.value for s in mask.secrets}
    assert {TOKEN, "pw-long-enough", "qsT0kenValue99xx", "judge-key-0123456", "own-secret-value"} <= values
    assert mask.too_short == ("$SHORT_ONE",)
    # a variable named like a credential is masked unannounced when its value looks like a key
    ambient = {
        "SEARCH_TOKEN": "kfzAbc123/xyz+Q=",
        "POSTGRES_PASSWORD": "postgres",
        "CI_DB_PASSWORD": "changemeplease",
        "MAX_TOKENS": "4096-and-more-tokens",
        "TOKENIZERS_PARALLELISM": "false-or-true-1",
    }
    found = {s.source for s in settings.secret_mask(ambient).secrets}
    assert "$SEARCH_TOKEN" in found
    assert not found & {"$POSTGRES_PASSWORD", "$CI_DB_PASSWORD", "$MAX_TOKENS", "$TOKENIZERS_PARALLELISM"}
    assert settings.secret_mask(ambient).too_short == ()  # an unset variable: nothing to mask or warn about
    with pytest.raises(Exception, match="environment variable names"):
        settings_from_dict({"secrets_from_env": ["not a name"]})


def test_files_and_streams_written_by_a_process_that_loaded_the_config(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(secrets, "_remembered", SecretMask())
    secrets.remember(MASK)
    atomic.write_text(tmp_path / "report.md", f"# run\n{TOKEN}\n")
    assert (tmp_path / "report.md").read_text() == "# run\n***\n"
    atomic.write_bytes(tmp_path / "junit.xml", f"<failure>{json.dumps(TOKEN)}</failure>".encode())
    assert TOKEN not in (tmp_path / "junit.xml").read_text()
    binary = b"PAR1" + TOKEN.encode() + b"\xff\x00"
    atomic.write_bytes(tmp_path / "t.parquet", binary)
    assert (tmp_path / "t.parquet").read_bytes() == binary  # a table is written as given
    sink = io.StringIO()
    stream = MaskedStream(sink)
    print(f"error: {TOKEN}", file=stream)
    assert sink.getvalue() == "error: ***\n"


def test_masking_a_large_table_is_column_wise() -> None:
    n = 20_000
    frame = pd.DataFrame({"snippet": pd.array([f"text {i}" for i in range(n)], dtype="string")}).assign(
        doc_id=pd.array([f"d{i}" if i % 1000 else f"d-{TOKEN}" for i in range(n)], dtype="string")
    )
    masked = MASK.frame(frame)
    assert masked["doc_id"].str.contains("***", regex=False).sum() == n // 1000
    assert masked["snippet"] is not None and masked["snippet"].equals(frame["snippet"])
