"""A command-adapter search that logs when it is inside: ``python cmd_logged.py STATE_DIR QUERY_ID``.

Appends ``enter <time>`` and, ``HOLD_S`` seconds later, ``exit <time>`` (wall-clock seconds) to
``STATE_DIR/<QUERY_ID>.log``, then prints one hit, ``QUERY_ID-c1``: the test reads from the logs
whether two calls were ever inside at the same time.
"""

import json
import sys
import time
from pathlib import Path

HOLD_S = 0.5
state, query_id = Path(sys.argv[1]), sys.argv[2]
log = state / f"{query_id}.log"
with log.open("a") as fh:
    fh.write(f"enter {time.time()!r}\n")
time.sleep(HOLD_S)
with log.open("a") as fh:
    fh.write(f"exit {time.time()!r}\n")
sys.stdout.write(json.dumps({"hits": [{"rank": 1, "chunk_id": f"{query_id}-c1", "score": 1.0}]}))
