"""Python systems that end their own process, or return what cannot leave it (tests/systems/
test_python_worker.py). Nothing here knows about kebab-eval: it is what a user's buggy system does.

``Ender(how, on)``: query ``on`` ends the process — ``exit0`` / ``exit3`` (``os._exit``), ``segv``
(a read of address 0 in C: ``ctypes.string_at(0)``) — or ``gil`` (blocks the whole process 20 s),
``sleep`` (1.5 s, then answers), ``print`` (prints ``$SEARCH_TOKEN`` to stdout and stderr),
``wait_kill`` (writes ``started`` then waits to be killed from outside), ``oom`` (allocates past
the address-space limit the factory set with ``RLIMIT_AS``: a MemoryError); ``local_str`` /
``module_str`` return a str subclass defined in a function / in this module. Every other query
``q`` gets the hit ``q-c1`` with the worker's pid as its snippet.
"""

from __future__ import annotations

import ctypes
import os
import resource
import sys
import time
from pathlib import Path


class Tag(str):
    """A str subclass: pickled by reference to this module, which kebab-eval never imports."""


class Ender:
    def __init__(self, how: str, on: str = "q3", started: str | None = None, limit_mb: int = 0) -> None:
        self.how, self.on, self.started = how, on, started
        if limit_mb:  # the address space this process may grow by, as a cgroup or ulimit would cap it
            with open("/proc/self/status") as status:
                vm = next(int(line.split()[1]) for line in status if line.startswith("VmSize:"))
            cap = vm * 1024 + (limit_mb << 20)
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    def search(self, query: str, k: int):
        if query == self.on:
            if self.how == "exit0":
                os._exit(0)
            if self.how == "exit3":
                os._exit(3)
            if self.how == "segv":
                ctypes.string_at(0)
            if self.how == "gil":  # C's sleep(20) called holding the interpreter lock: nothing else runs
                ctypes.PyDLL(None).sleep(20)
            if self.how == "sleep":
                time.sleep(1.5)
            if self.how == "print":  # a system that prints its credential (stdout and stderr)
                print("printed by the system:", os.environ["SEARCH_TOKEN"])
                print("printed by the system:", os.environ["SEARCH_TOKEN"], file=sys.stderr, flush=True)
            if self.how == "wait_kill":
                Path(self.started).write_text(str(os.getpid()))
                time.sleep(60)
            if self.how == "oom":
                return [bytearray(4 << 30).decode()]  # 4 GiB: past the limit
            if self.how == "local_str":

                class Local(str):
                    pass

                return [{"chunk_id": Local(f"{query}-c1")}]
            if self.how == "module_str":
                return [{"chunk_id": Tag(f"{query}-c1")}]
        return [{"chunk_id": f"{query}-c1", "snippet": str(os.getpid())}]
