"""A command-adapter search that echoes its argv: one hit per argument, the argument as snippet.

Run as ``python cmd_echo.py ARG...``; prints ``{"hits": [{"rank": n, "chunk_id": "argN", "snippet": ARG}]}``
so a test sees exactly which argv items the adapter passed.
"""

import json
import sys

args = sys.argv[1:]
hits = [{"rank": n, "chunk_id": f"arg{n}", "snippet": arg} for n, arg in enumerate(args, start=1)]
sys.stdout.write(json.dumps({"hits": hits}))  # ASCII-only JSON: independent of the locale
