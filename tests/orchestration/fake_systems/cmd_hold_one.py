"""A command-adapter search that holds one query: ``python cmd_hold_one.py STATE_DIR HELD QUERY_ID K``.

Every call appends ``PIDS QUERY_ID`` to ``STATE_DIR/calls.log``, PIDS being this process's
ancestors, nearest first, comma-separated (which step process asked for which query, attempt after
attempt, whatever the adapter starts in between). For the query ``HELD`` it touches
``STATE_DIR/inside`` and waits until ``STATE_DIR/release`` exists (at most 120 s); every query
answers one hit, ``QUERY_ID-c1``.
"""

import json
import os
import sys
import time
from pathlib import Path

state, held, query_id = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
ancestors, pid = [], os.getppid()
while pid > 1:
    ancestors.append(str(pid))
    stat = Path(f"/proc/{pid}/stat").read_text()
    pid = int(stat.rsplit(")", 1)[1].split()[1])
with (state / "calls.log").open("a") as log:
    log.write(f"{','.join(ancestors)} {query_id}\n")
if query_id == held:
    (state / "inside").touch()
    deadline = time.monotonic() + 120
    while not (state / "release").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
sys.stdout.write(json.dumps({"hits": [{"rank": 1, "chunk_id": f"{query_id}-c1", "score": 1.0}]}))
