"""Fault injection for the crash tests, loaded only by processes started with this folder on
PYTHONPATH: it stops a run at an exact point inside an artifact write so the test can SIGKILL it
there — no timing race.

With ``KEBAB_TEST_PAUSE_RENAME`` set to a glob (e.g. ``*/retrieval_results/r1/*/hits.parquet``),
the first ``os.replace`` onto a matching path — a finished temporary file about to be renamed into
place — creates the file named by ``KEBAB_TEST_PAUSE_MARKER`` and sleeps instead, so the attempt
stays half-written (earlier tables in place, this one still a temporary file, no manifest).
Nothing else changes: every other call goes to the real ``os.replace``.
"""

import os

_PATTERN = os.environ.get("KEBAB_TEST_PAUSE_RENAME")

if _PATTERN:
    import fnmatch
    import time

    _real_replace = os.replace

    def _replace(src, dst, *args, **kwargs):
        if fnmatch.fnmatch(os.fspath(dst), _PATTERN):
            with open(os.environ["KEBAB_TEST_PAUSE_MARKER"], "w") as marker:
                marker.write(f"{os.fspath(src)}\n{os.fspath(dst)}\n")
            time.sleep(300)  # the test kills the process long before this ends
        return _real_replace(src, dst, *args, **kwargs)

    os.replace = _replace
