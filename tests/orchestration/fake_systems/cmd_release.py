"""A command-adapter search that holds every query until the test releases it, so two runs overlap
deterministically (tests/orchestration/test_one_writer.py).

``python cmd_release.py STATE_DIR RANK QUERY K``: creates ``STATE_DIR/inside``, waits until
``STATE_DIR/release`` exists (at most 120 s, then exits 9 with nothing printed), then returns
``K`` hits with the relevant document ``docs/W.md`` (``W`` = the query's last word) at rank ``RANK``
— so runs configured with different ranks store different numbers (MRR = 1 / RANK).
"""

import json
import sys
import time
from pathlib import Path

state, rank, query, k = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
(state / "inside").touch()
deadline = time.monotonic() + 120
while not (state / "release").exists():
    if time.monotonic() > deadline:
        sys.exit(9)
    time.sleep(0.02)
paths = [f"docs/filler-{n}.md" for n in range(1, k + 1)]
paths.insert(rank - 1, f"docs/{query.split()[-1]}.md")
hits = [
    {"rank": r, "doc_path": p, "chunk_id": f"{p}#0", "score": 1.0 / r} for r, p in enumerate(paths[:k], 1)
]
sys.stdout.write(json.dumps({"hits": hits}))
