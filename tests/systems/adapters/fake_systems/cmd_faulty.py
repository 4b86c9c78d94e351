"""A command-adapter search that misbehaves according to the query text (argv[1]).

``python cmd_faulty.py QUERY STATE_DIR``. Behaviours: ``exit3``, ``notjson``, ``wrongshape``,
``badrank``, ``sleep``, ``grandchild`` (spawns ``sleep 30`` sharing stdout, writes its pid to
STATE_DIR/grandchild.pid, then hangs), ``signal`` (SIGKILLs itself), ``empty``, ``nonutf8``;
anything else prints one good hit.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

query, state = sys.argv[1], Path(sys.argv[2])

if query == "exit3":
    sys.stderr.write("starting up\nfatal: the index is locked by another writer\n")
    sys.exit(3)
elif query == "notjson":
    print("Results: 3 hits found (this is not JSON)")
elif query == "wrongshape":
    print(json.dumps({"hits": 5}))
elif query == "badrank":
    print(json.dumps({"hits": [{"rank": "x", "chunk_id": "c1"}]}))
elif query == "sleep":
    time.sleep(30)
elif query == "grandchild":
    child = subprocess.Popen(["sleep", "30"])  # inherits stdout: holds the pipe open
    (state / "grandchild.pid").write_text(str(child.pid))
    time.sleep(30)
elif query == "signal":
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)
elif query == "empty":
    pass
elif query == "nonutf8":
    sys.stdout.buffer.write(b'{"hits": [{"chunk_id": "caf\xe9"}]}')
else:
    print(json.dumps({"hits": [{"rank": 1, "chunk_id": f"ok-{query}", "score": 0.5}]}))
