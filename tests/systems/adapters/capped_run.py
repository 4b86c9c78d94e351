"""Run a system under test in a process of its own with a memory cap, for the hostile-system tests.

    python capped_run.py '{"system": {...}, "queries": N, "address_space_mb": 1536}'

Prints one JSON object: ``outcomes`` (query_id, error_class, error, attempts, hits, timed_out),
``elapsed_s`` for the whole batch and ``max_rss_mb`` of this process. With ``RLIMIT_AS`` set, an
unbounded read fails here (MemoryError) instead of exhausting the machine running the tests.
"""

from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path


def main() -> None:
    spec = json.loads(sys.argv[1])
    limit = int(spec.get("address_space_mb", 1536)) << 20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    from kebab_eval_pipeline.chain.settings import settings_from_dict
    from kebab_eval_pipeline.systems.factory import build_system
    from kebab_eval_pipeline.systems.outcome import QueryRequest

    system = build_system(settings_from_dict({"system": spec["system"]}))
    requests = [QueryRequest(f"q{n}", f"query {n}") for n in range(1, spec["queries"] + 1)]
    started = time.monotonic()
    outcomes = system.run_queries(requests, 10, False)
    elapsed = time.monotonic() - started
    rows = [
        {
            "query_id": o.query_id,
            "error_class": o.error_class,
            "error": o.error,
            "attempts": o.attempts,
            "hits": [h.chunk_id for h in o.hits],
            "timed_out": o.timed_out,
        }
        for o in outcomes
    ]
    print(json.dumps({"outcomes": rows, "elapsed_s": elapsed, "max_rss_mb": peak_rss_mb()}))


def peak_rss_mb() -> float:
    """This process's peak resident set, in MiB. VmHWM, not ``ru_maxrss``: the latter keeps the
    peak of the forked parent's image from before exec (the whole pytest process)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # no /proc: KiB elsewhere


if __name__ == "__main__":
    main()
