"""The ``secrets`` family (issue 44, "No secret ever stored or printed, whatever the system returns").

Each case runs a whole ``kebab-eval run`` against a system that echoes the secret it was given
(``SEARCH_TOKEN`` from the environment) in one place — an http 5xx or 401 body, a command's stderr
or non-JSON output, a python system's exception, a hit's doc id / chunk id / snippet, an answer —
written in one form (:data:`tests.fuzz.echo_server.FORMS`: raw, JSON-escaped ``\\/`` or
``\\uXXXX``, URL-encoded, base64, base64 of ``Bearer …``). The run also writes ``--junit``,
``--pr-comment`` and ``$GITHUB_STEP_SUMMARY``, and ``kebab-eval export`` writes the JSON export;
the harness then searches the run's output and every file under the case folder (storage,
``DAGSTER_HOME``, those outputs) for every form of the secret (:func:`secret_forms`).
Found anywhere: ``wrong``.

The http system gets the secret the documented way (``headers_from_env``). A command or python
system reads ``SEARCH_TOKEN`` from the environment itself: the issue asks every secret "from the
environment" to be masked, so these cases expect a credential-named variable (``*_TOKEN``) to be
treated as one; :data:`EXTRA_SYSTEM_CONFIG` is where a config line naming it would go.
"""

from __future__ import annotations

import base64
import inspect
import json
import random
import re
import string
import sys

from tests.fuzz import echo_server
from tests.fuzz.cases import EITHER, Case, base_queries, render

SECRET_VAR = "SEARCH_TOKEN"
#: Lines added to a command / python system block to declare the secret, should the tool need one.
EXTRA_SYSTEM_CONFIG = ""

#: (system kind, where the secret is echoed), cycled by case index: the issue's own finding first.
KINDS = [
    ("http", "5xx"),
    ("python", "doc_id"),
    ("command", "stderr"),
    ("http", "snippet"),
    ("command", "answer"),
    ("python", "exception"),
    ("http", "answer"),
    ("command", "doc_id"),
    ("python", "snippet"),
    ("http", "401"),
    ("command", "bad-json"),
    ("http", "chunk_id"),
    ("python", "answer"),
    ("command", "chunk_id"),
    ("http", "doc_id"),
]


def make_secret(rng: random.Random) -> str:
    """A token with ``/``, ``+`` and ``=`` (so JSON and URL escaping change it) between three
    10-character alphanumeric runs (each distinctive enough to search for on its own)."""
    run = lambda: "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(10))  # noqa: E731
    return f"kfz{run()}/{run()}+{run()}="


_ECHO_SOURCE = (
    "import base64, json\nfrom urllib.parse import quote\n\n"
    + inspect.getsource(echo_server.echo)
    + "\n"
    + inspect.getsource(echo_server.reply)
)

COMMAND_SCRIPT = (
    _ECHO_SOURCE
    + """
import os, sys

where, form, op = sys.argv[1:4]
text = echo(os.environ.get("SEARCH_TOKEN", ""), form)
if where == "stderr":
    sys.stderr.write("backend refused the credential " + text + "\\n")
    sys.exit(1)
if where == "bad-json":
    print("not json: credential " + text)
    sys.exit(0)
print(reply(where, text, op)[1])
"""
)

PYTHON_MODULE = (
    _ECHO_SOURCE
    + '''
import os


class EchoSystem:
    """Echoes the secret it reads from the environment where and how its factory was told."""

    def __init__(self, where, form):
        self.where, self.form = where, form

    def _text(self):
        return echo(os.environ.get("SEARCH_TOKEN", ""), self.form)

    def search(self, query, k):
        if self.where == "exception":
            raise RuntimeError("backend refused the credential " + self._text())
        return json.loads(reply(self.where, self._text(), "search")[1])["hits"]

    def ask(self, query, k):
        if self.where == "exception":
            raise RuntimeError("backend refused the credential " + self._text())
        return json.loads(reply(self.where, self._text(), "ask")[1])["answer"]


def build(where, form):
    return EchoSystem(where, form)
'''
)


def system_block(kind: str, where: str, form: str, answers: bool) -> str:
    if kind == "http":
        base = f"http://127.0.0.1:{{port}}/{where}/{form}"
        block = {
            "kind": "http",
            "search_url": f"{base}/search",
            "headers_from_env": {"Authorization": f"Bearer ${{{SECRET_VAR}}}"},
            "retries": 0,
            "timeout_s": 20,
        }
        if answers:
            block["ask_url"] = f"{base}/ask"
        return "system: " + json.dumps(block) + "\n"
    if kind == "command":
        argv = [sys.executable, "-S", "{dir}/echo_cmd.py", where, form]
        block = {"kind": "command", "search_argv": [*argv, "search", "{query}"], "timeout_s": 20}
        if answers:
            block["ask_argv"] = [*argv, "ask", "{query}"]
        return "system: " + json.dumps(block) + "\n" + EXTRA_SYSTEM_CONFIG
    block = {
        "kind": "python",
        "callable": "echo_py:build",
        "args": {"where": where, "form": form},
        "path": ["."],
        "timeout_s": 20,
    }
    return "system: " + json.dumps(block) + "\n" + EXTRA_SYSTEM_CONFIG


def secret_forms(secret: str) -> list[str]:
    """The strings whose presence anywhere means ``secret`` got out: the raw value, each of its
    alphanumeric runs of 8+ characters (they survive JSON escaping of ``/``, URL encoding, and
    re-escaping by a store), its ``\\uXXXX`` spelling (both hex cases, single and doubled
    backslash) and its base64 (alone and as ``Bearer <secret>``, standard and URL-safe)."""
    forms = {secret}
    forms |= {run for run in re.findall(r"[A-Za-z0-9]{8,}", secret)}
    for s in (secret, *re.findall(r"[A-Za-z0-9]{8,}", secret)):
        for fmt in ("\\u%04x", "\\u%04X"):
            escaped = "".join(fmt % ord(c) for c in s)
            forms |= {escaped, escaped.replace("\\", "\\\\")}
    for raw in (secret, f"Bearer {secret}"):
        for enc in (base64.b64encode, base64.urlsafe_b64encode):
            forms.add(enc(raw.encode()).decode().rstrip("="))
    return sorted(forms)


def secrets_case(case_id: str, rng: random.Random, index: int) -> Case:
    kind, where = KINDS[index % len(KINDS)]
    form = rng.choice(echo_server.FORMS)
    secret = make_secret(rng)
    qs = base_queries(rng, rng.randint(2, 4))
    answers = where == "answer"
    config = (
        'golden: "{dir}/g.yaml"\nbaseline: none\n'
        + ("answers: true\n" if answers else "")
        + system_block(kind, where, form, answers)
    )
    files = {"g.yaml": render("canonical-yaml", qs, rng).encode(), "c.yaml": config.encode()}
    if kind == "command":
        files["echo_cmd.py"] = COMMAND_SCRIPT.encode()
    elif kind == "python":
        files["echo_py.py"] = PYTHON_MODULE.encode()
    run_id = f"fz-{case_id}"
    return Case(
        id=case_id,
        kind=f"secrets/{kind}-{where}",
        command="run",
        expect=EITHER,
        files=files,
        args=[
            "run",
            "--config",
            "{dir}/c.yaml",
            "--run-id",
            run_id,
            "--junit",
            "{dir}/junit.xml",
            "--pr-comment",
            "{dir}/pr-comment.md",
        ],
        after=[["export", run_id, "--format", "json", "--out", "{dir}/export.json"]],
        env={SECRET_VAR: secret, "GITHUB_STEP_SUMMARY": "{dir}/step-summary.md"},
        blame=["c.yaml"],
        queries=len(qs),
        query_ids=[q["id"] for q in qs],
        secrets=secret_forms(secret),
        server=kind == "http",
        note=f"{kind} system echoes ${SECRET_VAR} in {where}, {form}",
    )
