"""A command-adapter search held open by the test: ``python cmd_held.py STATE_DIR QUERY_ID K``.

Touches ``STATE_DIR/inside`` (the run is inside ``retrieval_results``), then waits until
``STATE_DIR/release`` exists (at most 120 s) and prints one hit, ``QUERY_ID-c1``.
"""

import json
import sys
import time
from pathlib import Path

state, query_id = Path(sys.argv[1]), sys.argv[2]
(state / "inside").touch()
deadline = time.monotonic() + 120
while not (state / "release").exists() and time.monotonic() < deadline:
    time.sleep(0.05)
sys.stdout.write(json.dumps({"hits": [{"rank": 1, "chunk_id": f"{query_id}-c1", "score": 1.0}]}))
