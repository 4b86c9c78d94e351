"""A command-adapter search that records how many copies of itself run at once.

``python cmd_parallel.py STATE_DIR QUERY``: creates STATE_DIR/running/<pid> while it runs,
samples how many such files exist (for at least 0.2 s; up to 1 s waiting for a sibling),
writes the largest count seen to STATE_DIR/seen/<pid>, removes its file and prints one hit.
"""

import json
import os
import sys
import time
from pathlib import Path

state, query = Path(sys.argv[1]), sys.argv[2]
mine = state / "running" / str(os.getpid())
mine.touch()
started, most = time.monotonic(), 0
while True:
    most = max(most, len(list((state / "running").iterdir())))
    elapsed = time.monotonic() - started
    if (elapsed >= 0.2 and most >= 2) or elapsed >= 1.0:
        break
    time.sleep(0.01)
(state / "seen" / str(os.getpid())).write_text(str(most))
mine.unlink()
print(json.dumps({"hits": [{"rank": 1, "chunk_id": f"c-{query}"}]}))
