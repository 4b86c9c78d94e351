"""A ``protocol: jsonl`` system that misbehaves on purpose, by query text.

``python jsonl_faulty.py STATE_DIR [--banner] [--die-at-start] [--version-error] [--no-version]
[--slow-start S]``. Each start appends its pid to STATE_DIR/starts. Start-up: ``--banner`` prints
two non-JSON lines first; ``--die-at-start`` writes to stderr and exits 7 before reading;
``--version-error`` answers the version line with an error; ``--no-version`` answers it for the
wrong id; ``--slow-start S`` sleeps S seconds first.

Queries: ``crash`` (stderr, exit 3), ``hang`` (sleeps), ``garbage`` (``{not json``), ``text``
(a plain line), ``wrongid`` (a reply for another id), ``list`` (a JSON list), ``error`` (an error
reply), ``badhits`` (``"hits": 5``), ``chatty`` (2 MB on stderr first), ``noanswer`` (hits only),
``exit0`` (replies, then exits 0), ``nonutf8`` (a reply with a Latin-1 byte); anything else one hit
``ok-QUERY`` whose snippet is this process's pid, with an answer when asked.
"""

import json
import os
import sys
import time
from pathlib import Path

state, flags = Path(sys.argv[1]), sys.argv[2:]
with (state / "starts").open("a") as fh:
    fh.write(f"{os.getpid()}\n")
if "--slow-start" in flags:
    time.sleep(float(flags[flags.index("--slow-start") + 1]))
if "--banner" in flags:
    print("Loading weights… done", flush=True)
    print("[INFO] ready", flush=True)
if "--die-at-start" in flags:
    sys.stderr.write("fatal: cannot open index /nowhere\n")
    sys.exit(7)


def reply(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    req = json.loads(line)
    rid = req["id"]
    if req.get("op") == "version":
        if "--version-error" in flags:
            reply({"id": rid, "error": "no versions here"})
        elif "--no-version" in flags:
            reply({"id": "something-else"})
        else:
            reply({"id": rid, "index_version": "idx-jsonl-1", "chunker_version": "fake-chunker-2"})
        continue
    q = req["query"]
    if q == "crash":
        sys.stderr.write("segfault-ish: the index is corrupt\n")
        sys.stderr.flush()
        sys.exit(3)
    elif q == "hang":
        time.sleep(60)
    elif q == "garbage":
        sys.stdout.write("{not json\n")
        sys.stdout.flush()
    elif q == "text":
        print("Results: 3 hits found", flush=True)
    elif q == "wrongid":
        reply({"id": "q-other", "hits": []})
    elif q == "list":
        reply([1, 2])
    elif q == "error":
        reply({"id": rid, "error": "index is locked by another writer"})
    elif q == "badhits":
        reply({"id": rid, "hits": 5})
    elif q == "nonutf8":
        sys.stdout.buffer.write(b'{"id": "' + rid.encode() + b'", "hits": ["caf\xe9"]}\n')
        sys.stdout.flush()
    else:
        if q == "chatty":
            sys.stderr.write("x" * 2_000_000 + "\n")
            sys.stderr.flush()
        out = {"id": rid, "hits": [{"rank": 1, "chunk_id": f"ok-{q}", "snippet": str(os.getpid())}]}
        if req["answer"] and q != "noanswer":
            out["answer"] = {"text": f"answer to {q} [#1]", "citations": [f"ok-{q}"]}
        reply(out)
        if q == "exit0":
            sys.exit(0)
