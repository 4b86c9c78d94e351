"""Systems that echo every configured secret in every field they can — an http service on
127.0.0.1, a command and a python system — driven through the real CLI (``kebab-eval run`` with
``--junit``, ``--pr-comment`` and the job summary, then ``export``): no form of any secret (raw,
JSON-escaped, ``\\uXXXX``-escaped, URL-encoded, base64 standard or urlsafe with or without padding,
base64 of ``user:password``, the token of ``Bearer <token>`` alone) appears in any file written
under DAGSTER_HOME (instance database, event and compute logs, Parquet — read back as values too —,
manifests, reports), in the files the CLI wrote or in its stdout / stderr. The run still scores
what it can: a hit whose doc id holds no secret still matches its gold.

The variants searched for are worked out here, independently of the package's own expansion.
"""

from __future__ import annotations

import base64
import html
import json
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote, quote_plus

import pyarrow.parquet as pq
import pytest
import yaml

from tests.conftest import write
from tests.systems.adapters.fault_server import FaultServer, Received, Reply
from tests.test_cli import cli, env, no_traceback

assert env  # the fixture, imported for this module's tests

# Secrets with the characters encoders change: "/" (JSON "\/"), "+" and "&" and "=" (URL
# encoding), '"' (JSON "\""), "~".
TOKEN = 'tk/Zq8+vX3"pL9=wKcR2&x~'  # Authorization: Bearer <TOKEN>
API_KEY = "key-Hh4mN7rT2bYdQ5"  # X-Api-Key
URL_USER, URL_PASS = "svc-user", "pwS3cr3tPass77"  # user info of search_url
QS_TOKEN = "qsT0kenValue99xx"  # ?access_token= of search_url
CMD_SECRET = "cmd-Secr3t/Val+ue"  # read by the command system itself (secrets_from_env)
PY_SECRET = "py-Secr3t/Val+ue9z"  # read by the python system's factory (secrets_from_env)


def encodings(value: str) -> dict[str, str]:
    """Every form a system might echo ``value`` in (the test's own oracle)."""
    raw = value.encode()
    forms = {
        "raw": value,
        "json": json.dumps(value)[1:-1],
        "json-slash": json.dumps(value)[1:-1].replace("/", "\\/"),
        "json-unicode": "".join(f"\\u{ord(c):04x}" for c in value),
        "url": quote(value, safe=""),
        "url-plus": quote_plus(value),
        "b64": base64.b64encode(raw).decode(),
        "b64-nopad": base64.b64encode(raw).decode().rstrip("="),
        "b64url": base64.urlsafe_b64encode(raw).decode(),
        "b64url-nopad": base64.urlsafe_b64encode(raw).decode().rstrip("="),
    }
    return {name: form for name, form in forms.items() if name == "raw" or form != value}


def echo(value: str) -> str:
    """One line holding ``value`` in every form of :func:`encodings`."""
    return " | ".join(f"{name}={form}" for name, form in encodings(value).items())


def written(forms: dict[str, str]) -> dict[str, str]:
    """``forms`` and each as a writer escapes it again: in XML/HTML (JUnit, the HTML report) and
    in a JSON string (the export, a manifest) — the secret is still there to read."""
    out = dict(forms)
    for name, form in forms.items():
        for how, again in (
            ("xml", html.escape(form)),
            ("xml-noquote", html.escape(form, quote=False)),
            ("in-json", json.dumps(form)[1:-1]),
        ):
            if again not in out.values():
                out[f"{name}+{how}"] = again
    return out


#: Every form of every secret, by a readable name: what must appear nowhere.
BASIC = f"{URL_USER}:{URL_PASS}"
FORBIDDEN: dict[str, str] = {
    f"{label}/{name}": form
    for label, value in (
        ("token", TOKEN),
        ("api_key", API_KEY),
        ("url_pass", URL_PASS),
        ("qs_token", QS_TOKEN),
        ("cmd", CMD_SECRET),
        ("py", PY_SECRET),
        ("basic", BASIC),
        ("bearer", f"Bearer {TOKEN}"),
    )
    for name, form in written(encodings(value)).items()
}


def leaks(files: list[Path], texts: dict[str, str]) -> dict[str, list[str]]:
    """Where any form of a secret appears: each file's bytes (and a Parquet file's values, which
    compression could hide from a byte search), and each captured text."""
    found: dict[str, list[str]] = {}

    def search(where: str, text: str) -> None:
        hit = [name for name, form in FORBIDDEN.items() if form in text]
        if hit:
            found.setdefault(where, []).extend(hit)

    for path in files:
        data = path.read_bytes()
        search(str(path), data.decode("utf-8", "replace"))
        if path.suffix == ".parquet":
            search(f"{path} (values)", json.dumps(pq.read_table(path).to_pylist(), default=str))
    for where, text in texts.items():
        search(where, text)
    return found


def _golden(path: Path) -> Path:
    queries = [
        {"id": qid, "query": f"question {qid}", "supports": [{"doc_id": f"gold-{qid}"}]}
        for qid in ("q-ok", "q-500", "q-403", "q-badjson")
    ]
    return write(path, yaml.safe_dump({"schema_version": "1", "name": "echo", "queries": queries}))


def _hits(qid: str, secret: str) -> list[dict]:
    """The gold hit first (its id is clean: it must still match), then hits carrying the secret
    in every text field."""
    return [
        {"doc_id": f"gold-{qid}", "snippet": f"clean text; {echo(secret)}", "score": 3.0},
        {
            "doc_id": f"doc-{secret}",
            "chunk_id": f"chunk-{base64.b64encode(secret.encode()).decode()}",
            "doc_path": f"docs/{quote(secret, safe='')}.md",
            "heading_path": [secret, json.dumps(secret)[1:-1].replace("/", "\\/"), f"Bearer {secret}"],
            "snippet": f"Authorization: Bearer {secret}",
            "index_version": secret,
            "score": 2.0,
        },
    ]


def _answer(secret: str) -> dict:
    return {
        "answer": {
            "text": f"the key is {secret}; {echo(secret)}",
            "citations": [{"chunk_id": f"chunk-{secret}", "marker": secret}],
            "model": f"model-{secret}",
            "refusal_reason": quote_plus(secret),
        }
    }


def _run_everything(
    env: dict[str, str], cfg: Path, out: Path
) -> tuple[dict[str, subprocess.CompletedProcess], list[Path]]:
    """``run`` with every CI output, then ``export`` (JSON and TREC); returns the processes and
    every file written (DAGSTER_HOME, which holds the storage, and the outputs)."""
    out.mkdir()
    env = {**env, "GITHUB_STEP_SUMMARY": str(out / "summary.md")}
    procs = {
        "run": cli(
            env,
            "run",
            "--config",
            str(cfg),
            "--run-id",
            "echo-1",
            "--junit",
            str(out / "junit.xml"),
            "--pr-comment",
            str(out / "pr.md"),
        )
    }
    procs["export json"] = cli(env, "export", "echo-1", "--format", "json", "--out", str(out / "e.json"))
    procs["export json stdout"] = cli(env, "export", "echo-1", "--format", "json")
    procs["export trec"] = cli(env, "export", "echo-1", "--format", "trec", "--out", str(out / "e.trec"))
    procs["runs list"] = cli(env, "runs", "list")
    files = [p for root in (Path(env["DAGSTER_HOME"]), out) for p in root.rglob("*") if p.is_file()]
    return procs, files


def _check(procs: dict[str, subprocess.CompletedProcess], files: list[Path], out: Path) -> dict:
    for name, proc in procs.items():
        no_traceback(proc)
        assert proc.returncode in (0, 1), (name, proc.stdout, proc.stderr)
    for name in ("junit.xml", "pr.md", "summary.md", "e.json", "e.trec"):
        assert (out / name).is_file(), name
    assert any(p.suffix == ".parquet" for p in files) and any(p.suffix == ".db" for p in files)
    texts = {f"{n} stdout": p.stdout for n, p in procs.items()} | {
        f"{n} stderr": p.stderr for n, p in procs.items()
    }
    found = leaks(files, texts)
    leaking_files = sorted({w.removesuffix(" (values)") for w in found if w not in texts})
    assert found == {}, (
        f"{len(leaking_files)} files and {len([w for w in found if w in texts])} outputs hold a secret: "
        + "\n".join(f"{w}: {sorted(set(v))}" for w, v in found.items())
    )
    exported = json.loads((out / "e.json").read_text())
    return {q["query_id"]: q for q in exported["per_query"]}


def _search_reply(request: Received) -> Reply:
    qid = request.key
    if request.path == "/version":
        return Reply(body={"index_version": "idx-1", "whoami": request.headers.get("authorization")})
    if request.path == "/ask":
        return Reply(body=_answer(TOKEN))
    # httpx sends the URL's user info as Basic auth: echo what came, and the Bearer form too
    seen = f"{request.headers.get('authorization')} Bearer {TOKEN} {request.headers.get('x-api-key')}"
    everything = " ; ".join(echo(s) for s in (TOKEN, API_KEY, URL_PASS, QS_TOKEN, BASIC, f"Bearer {TOKEN}"))
    if qid == "q-500":
        # JSON-escaped by the service's encoder: "\/" for "/", "\u0022" style escapes
        body = '{"error": "you sent ' + json.dumps(seen)[1:-1].replace("/", "\\/") + " " + everything + '"}'
        return Reply(500, body.encode())
    if qid == "q-403":
        return Reply(403, {"error": f"refused {seen}; {everything}"})
    if qid == "q-badjson":
        return Reply(body=f"<html>debug {seen} {everything}</html>".encode())
    return Reply(body={"hits": _hits(qid, TOKEN) + _hits(qid, API_KEY)[1:] + _hits(qid, URL_PASS)[1:]})


def test_an_http_service_echoing_its_credentials_everywhere_leaks_nothing(env, tmp_path: Path) -> None:
    env = {**env, "ECHO_TOKEN": TOKEN, "ECHO_KEY": API_KEY}
    with FaultServer(_search_reply) as server:
        base = server.url.replace("http://", f"http://{URL_USER}:{URL_PASS}@")
        cfg = write(
            tmp_path / "cfg.yaml",
            yaml.safe_dump(
                {
                    "golden": str(_golden(tmp_path / "golden.yaml")),
                    "system": {
                        "kind": "http",
                        "search_url": f"{base}/search?access_token={QS_TOKEN}",
                        "ask_url": f"{base}/ask?access_token={QS_TOKEN}",
                        "version_url": f"{base}/version",
                        "search_request": {"id": "{query_id}", "query": "{query}", "k": "{k}"},
                        "ask_request": {"id": "{query_id}", "query": "{query}", "k": "{k}"},
                        "headers_from_env": {
                            "Authorization": "Bearer ${ECHO_TOKEN}",
                            "X-Api-Key": "ECHO_KEY",
                        },
                        "retries": 1,
                        "backoff_s": 0.01,
                    },
                    "system_health": {"max_error_rate": 1.0},
                }
            ),
        )
        procs, files = _run_everything(env, cfg, tmp_path / "out")
        sent = [r.headers.get("x-api-key") for r in server.received if r.path != "/version"]
    assert sent and all(a == API_KEY for a in sent)  # the secrets were really used
    per_query = _check(procs, files, tmp_path / "out")
    assert {q: per_query[q]["error_class"] for q in per_query} == {
        "q-ok": None,
        "q-500": "http_5xx",
        "q-403": "http_4xx",
        "q-badjson": "bad_json",
    }
    assert "***" in per_query["q-500"]["error"] and "you sent" in per_query["q-500"]["error"]
    # masking kept the clean gold hit matching: q-ok found its gold at rank 1
    assert per_query["q-ok"]["scores"]["mrr"] == 1.0
    assert "***" in per_query["q-ok"]["answer"]["text"]


def _constants(secret: str) -> str:
    """The echoes a command or python system returns, as Python source."""
    return f"ECHO = {echo(secret)!r}\nANSWER = {_answer(secret)!r}\nHITS = {_hits('q-ok', secret)!r}\n"


COMMAND = """
import json, os, sys
secret = os.environ["ECHO_CMD_SECRET"]
qid, what = sys.argv[1], sys.argv[2]
if qid == "q-500":
    sys.stderr.write("backend failed for " + secret + " " + ECHO + "\\n")
    sys.exit(3)
if qid == "q-badjson":
    print("not json " + secret)
    sys.exit(0)
print(json.dumps(ANSWER if what == "ask" else {"hits": HITS}))
"""


def test_a_command_system_echoing_its_secret_everywhere_leaks_nothing(env, tmp_path: Path) -> None:
    env = {**env, "ECHO_CMD_SECRET": CMD_SECRET}
    script = write(
        tmp_path / "cmd.py",
        _constants(CMD_SECRET) + COMMAND,
    )
    cfg = write(
        tmp_path / "cfg.yaml",
        yaml.safe_dump(
            {
                "golden": str(_golden(tmp_path / "golden.yaml")),
                "system": {
                    "kind": "command",
                    "search_argv": [sys.executable, str(script), "{query_id}", "search"],
                    "ask_argv": [sys.executable, str(script), "{query_id}", "ask"],
                },
                "secrets_from_env": ["ECHO_CMD_SECRET"],
                "system_health": {"max_error_rate": 1.0},
            }
        ),
    )
    procs, files = _run_everything(env, cfg, tmp_path / "out")
    per_query = _check(procs, files, tmp_path / "out")
    assert per_query["q-500"]["error_class"] == "exit_code" and "***" in per_query["q-500"]["error"]
    assert per_query["q-ok"]["scores"]["mrr"] == 1.0


PYTHON = """
import os

class EchoSystem:
    def __init__(self):
        self.secret = os.environ["ECHO_PY_SECRET"]

    def search(self, query, k, query_id=None):
        if query_id == "q-500":
            raise RuntimeError("backend failed for " + self.secret + " " + ECHO)
        return [dict(h, doc_id=h["doc_id"].replace("q-ok", query_id)) for h in HITS]

    def ask(self, query, k, query_id=None):
        return ANSWER["answer"]

    def versions(self):
        return {"index_version": "idx-" + self.secret}
"""


def test_a_python_system_echoing_its_secret_everywhere_leaks_nothing(env, tmp_path: Path) -> None:
    env = {**env, "ECHO_PY_SECRET": PY_SECRET}
    folder = tmp_path / "code"
    folder.mkdir()
    write(
        folder / "echo_system.py",
        _constants(PY_SECRET) + PYTHON,
    )
    cfg = write(
        tmp_path / "cfg.yaml",
        yaml.safe_dump(
            {
                "golden": str(_golden(tmp_path / "golden.yaml")),
                "system": {"kind": "python", "callable": "echo_system:EchoSystem", "path": [str(folder)]},
                "secrets_from_env": ["ECHO_PY_SECRET"],
                "system_health": {"max_error_rate": 1.0},
            }
        ),
    )
    procs, files = _run_everything(env, cfg, tmp_path / "out")
    per_query = _check(procs, files, tmp_path / "out")
    assert per_query["q-500"]["error_class"] == "exception" and "***" in per_query["q-500"]["error"]
    assert per_query["q-ok"]["scores"]["mrr"] == 1.0
    assert per_query["q-403"]["scores"]["mrr"] == 1.0


@pytest.mark.parametrize("value", [TOKEN, CMD_SECRET])
def test_the_oracle_covers_the_forms(value: str) -> None:
    forms = encodings(value)
    assert {"json-slash", "json-unicode", "url", "url-plus", "b64", "b64url-nopad"} <= set(forms)


def test_a_factory_that_raises_with_its_secret_is_exit_2_and_masked(env, tmp_path: Path) -> None:
    """The system's exception text becomes the error message: masked before it is printed."""
    env = {**env, "ECHO_PY_SECRET": PY_SECRET}
    folder = tmp_path / "code"
    folder.mkdir()
    write(
        folder / "broken_system.py",
        "import os\n\ndef build():\n"
        "    raise RuntimeError('cannot log in with ' + os.environ['ECHO_PY_SECRET'])\n",
    )
    cfg = write(
        tmp_path / "cfg.yaml",
        yaml.safe_dump(
            {
                "golden": str(_golden(tmp_path / "golden.yaml")),
                "system": {"kind": "python", "callable": "broken_system:build", "path": [str(folder)]},
                "secrets_from_env": ["ECHO_PY_SECRET"],
            }
        ),
    )
    proc = cli(env, "run", "--config", str(cfg), "--run-id", "broken-1")
    no_traceback(proc)
    assert proc.returncode == 2, proc.stderr
    assert "cannot log in with ***" in proc.stderr
    files = [p for p in Path(env["DAGSTER_HOME"]).rglob("*") if p.is_file()]
    assert leaks(files, {"stdout": proc.stdout, "stderr": proc.stderr}) == {}
