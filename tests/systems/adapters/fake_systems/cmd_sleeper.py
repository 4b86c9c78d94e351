"""A command system that starts a long sleeper child and then blocks (for the clean-up tests).

    cmd_sleeper.py STATE_DIR [jsonl]

Writes ``STATE_DIR/<pid>.pids`` — "PARENT_PID OWN_PID SLEEPER_PID" — once the sleeper runs, then
blocks. With ``jsonl`` it first answers the version line (so the adapter sends it a query).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

state = Path(sys.argv[1])
if sys.argv[2:] == ["jsonl"]:
    request = json.loads(sys.stdin.readline())
    print(json.dumps({"id": request["id"]}), flush=True)
    sys.stdin.readline()  # a query: never answered
sleeper = subprocess.Popen(["sleep", "300"])
tmp = state / f"{os.getpid()}.tmp"
tmp.write_text(f"{os.getppid()} {os.getpid()} {sleeper.pid}")
tmp.rename(state / f"{os.getpid()}.pids")
time.sleep(300)
