"""A command-adapter search for the crash tests: deterministic hits, a record of every answer, and
an optional block that holds a run inside ``retrieval_results`` until the test kills it.

``python cmd_gated.py STATE_DIR QUERY_ID QUERY K``. The query's last word ``W`` names the relevant
document ``docs/W.md``; it is returned at rank ``n % 3 + 1`` (``n`` = the digits of QUERY_ID),
the other ranks up to ``K`` being filler documents.

With a file ``STATE_DIR/block_after`` holding N: once N queries have been answered, every further
query creates ``STATE_DIR/blocked/<pid>`` and ``STATE_DIR/inside``, then waits, printing nothing,
until its parent process is gone (the run was killed and this process re-parented) or 120 s pass.

Every answered query creates ``STATE_DIR/answered/QUERY_ID`` after printing its hits.
"""

import json
import os
import re
import sys
import time
from pathlib import Path

state, query_id, query, k = Path(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
answered = state / "answered"
answered.mkdir(exist_ok=True)

block_after = state / "block_after"
if block_after.exists() and len(list(answered.iterdir())) >= int(block_after.read_text()):
    parent = os.getppid()
    (state / "blocked").mkdir(exist_ok=True)
    (state / "blocked" / str(os.getpid())).touch()
    (state / "inside").touch()
    deadline = time.monotonic() + 120
    # Orphaned (re-parented) once the run's process is SIGKILLed: then exit, leaving nothing behind.
    while os.getppid() == parent and time.monotonic() < deadline:
        time.sleep(0.05)
    sys.exit(9)

relevant = f"docs/{query.split()[-1]}.md"
rank = int(re.sub(r"\D", "", query_id) or 0) % 3 + 1
paths = [f"docs/filler-{n}.md" for n in range(1, k + 1)]
paths.insert(rank - 1, relevant)
hits = [
    {
        "rank": r,
        "chunk_id": f"{path}#0",
        "doc_path": path,
        "score": round(1.0 / r, 4),
        "snippet": f"{query} (result {r})",
    }
    for r, path in enumerate(paths[:k], start=1)
]
sys.stdout.write(json.dumps({"hits": hits}))
sys.stdout.flush()
(answered / query_id).touch()
