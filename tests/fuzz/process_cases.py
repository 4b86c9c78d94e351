"""The ``process-end`` and ``sigint`` families (issue 44).

``process-end`` — a python system whose ``search`` ends the process it runs in at one seeded
query: ``os._exit(0)``, ``os._exit(3)``, a segfault in native code (``ctypes.string_at(0)``),
``SIGKILL`` of itself. The issue demands the run cannot be green: expected exit 1
(``system_health`` failed) with one row per query, the ended call an error row. Exit 0 is
``wrong``; nothing stored (or fewer rows than queries) is ``lost``.

``sigint`` — a run against a slow ``command`` system (each query sleeps 1 s, one at a time) gets
SIGINT at a seeded moment — half the cases 0.1–3 s after the system's first call, half 0.3–4 s
after the start (start-up: imports, config) — sent to its process group (as a terminal's Ctrl-C)
or to its pid alone. Expected: exit 130 within
:data:`tests.fuzz.harness.SIGINT_GRACE` s, no traceback, no run stored as complete. The run alone
would take 8 s of queries after its start-up, so the SIGINT always lands before its end.
"""

from __future__ import annotations

import json
import random
import sys

from tests.fuzz.cases import EITHER, Case, base_queries, render

ENDINGS = ["exit0", "segfault", "sigkill", "exit3"]

SYSTEM_MODULE = '''
import ctypes
import os
import signal

HOW, AT = {how!r}, {at!r}


class Ending:
    """Answers every query with its own document, and ends its process at query number AT."""

    def search(self, query, k):
        n = int(query.rsplit(" ", 1)[1].rstrip("?"))
        if n == AT:
            if HOW == "exit0":
                os._exit(0)
            if HOW == "exit3":
                os._exit(3)
            if HOW == "segfault":
                ctypes.string_at(0)
            if HOW == "sigkill":
                os.kill(os.getpid(), signal.SIGKILL)
        return [{{"doc_id": "d%d.md" % n, "chunk_id": "d%d.md#1" % n, "rank": 1}}]


def build():
    return Ending()
'''


def process_end_case(case_id: str, rng: random.Random, index: int) -> Case:
    how = ENDINGS[index % len(ENDINGS)]
    qs = base_queries(rng, rng.randint(3, 5))
    for q in qs:
        q.pop("answerable", None)
        q["supports"] = [{"doc_id": f"d{q['id'][1:]}.md"}]
    at = rng.randint(1, len(qs))
    system = {"kind": "python", "callable": "ending:build", "path": ["."]}
    config = 'golden: "{dir}/g.yaml"\nbaseline: none\nsystem: ' + json.dumps(system) + "\n"
    return Case(
        id=case_id,
        kind=f"process-end/{how}",
        command="run",
        expect=EITHER,
        check="process-end",
        files={
            "g.yaml": render("canonical-yaml", qs, rng).encode(),
            "c.yaml": config.encode(),
            "ending.py": SYSTEM_MODULE.format(how=how, at=at).encode(),
        },
        args=["run", "--config", "{dir}/c.yaml", "--run-id", f"fz-{case_id}"],
        blame=["c.yaml"],
        queries=len(qs),
        query_ids=[q["id"] for q in qs],
        note=f"python system: {how} at query {at} of {len(qs)}",
    )


#: (where the SIGINT goes, whether it waits for the first system call), cycled by case index.
SIGINT_KINDS = [("group", True), ("pid", False), ("pid", True), ("group", False)]

SLOW_COMMAND = """import json, os, sys, time
open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "started"), "a").close()
time.sleep(1.0)
print(json.dumps([{"doc_id": "d1.md", "rank": 1}]))
"""


def sigint_case(case_id: str, rng: random.Random, index: int) -> Case:
    # half while queries run, half from the start (start-up included); group and pid each
    target, anchored = SIGINT_KINDS[index % len(SIGINT_KINDS)]
    delay = round(rng.uniform(0.1, 3.0) if anchored else rng.uniform(0.3, 4.0), 2)
    moment = "first query" if anchored else "start"
    qs = base_queries(rng, 8)
    system = {
        "kind": "command",
        "search_argv": [sys.executable, "-S", "{dir}/slow.py", "{query}"],
        "concurrency": 1,
        "timeout_s": 30,
    }
    config = 'golden: "{dir}/g.yaml"\nbaseline: none\nsystem: ' + json.dumps(system) + "\n"
    return Case(
        id=case_id,
        kind=f"sigint/{target}-{'queries' if anchored else 'start'}",
        command="run",
        expect=EITHER,
        check="sigint",
        files={
            "g.yaml": render("canonical-yaml", qs, rng).encode(),
            "c.yaml": config.encode(),
            "slow.py": SLOW_COMMAND.encode(),
        },
        args=["run", "--config", "{dir}/c.yaml", "--run-id", f"fz-{case_id}"],
        interrupt=(delay, target, "{dir}/started" if anchored else None),
        blame=["c.yaml"],
        queries=len(qs),
        timeout=60.0,
        note=f"SIGINT to the {target} {delay}s after the {moment} (8 queries of 1 s)",
    )
