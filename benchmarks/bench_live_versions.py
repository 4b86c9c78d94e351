"""Benchmark: what reading a system's versions live costs, per kind — the price of each tick of the
system-version sensor (every 5 minutes), the freshness check (every 30 minutes) and each observation
of ``system_under_test``.

    python benchmarks/bench_live_versions.py                       # kebab-docs, 10 readings per system
    python benchmarks/bench_live_versions.py --readings 30 --corpus path/to/docs

Each reading is ``kebab_eval_pipeline.systems.factory.live_info(settings)``, as the sensor calls it:

* ``python`` systems are imported and built afresh in a Python process of their own every time
  (``kebab_eval_pipeline.systems.python_versions``: the factory called, ``versions()`` asked, the
  process gone). Measured on three: the test suite's LlamaIndex BM25 retriever over
  ``MarkdownNodeParser`` sections (``tests/frameworks/llamaindex_app.py``) and its Haystack 2 BM25
  pipeline (``tests/frameworks/haystack_app.py``) over the corpus — real frameworks that index the
  corpus in their factory, the heavy case — and a system that only reads an index file
  (``tests/orchestration/live_versions/indexed_system.py``), which shows the adapter's own cost;
* ``reference``: a prebuilt index of the corpus, unchanged (a stat of its manifest), and just
  rebuilt (the index loaded again);
* ``command``: a ``version_argv`` that prints a JSON file (one process started per reading).

For each: the median and the range of the wall time per reading, the CPU time per reading (user +
system, of this process and of the processes it started and waited for), the resident memory (RSS)
of this process after the first reading and after the last — a reading keeps nothing here, so the
two stay close — and the largest RSS a reading process has reached so far (the kernel keeps the
maximum over every process waited for). The machine this was written on has 2 cores shared with
other work: timings vary with the load. Not a test.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kebab_eval_pipeline.chain.settings import load_settings  # noqa: E402
from kebab_eval_pipeline.reference.index import ReferenceIndex  # noqa: E402
from kebab_eval_pipeline.systems.factory import build_system, live_info  # noqa: E402
from tests.orchestration.live_versions.indexed_system import write_index  # noqa: E402

DEFAULT_CORPUS = REPO.parent / "shared" / "corpora" / "kebab-docs"


def rss_mib() -> float:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def cpu_s() -> float:
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def child_peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def measure(label: str, settings, readings: int, before_each=None) -> None:
    walls, cpus = [], []
    first_rss = None
    for i in range(readings):
        if before_each is not None:
            before_each()
        gc.collect()
        wall, cpu = time.perf_counter(), cpu_s()
        info = live_info(settings)
        walls.append(time.perf_counter() - wall)
        cpus.append(cpu_s() - cpu)
        if i == 0:
            first_rss = rss_mib()
    del info
    gc.collect()
    shown = f"{statistics.median(walls) * 1000:9.1f} ms  ({min(walls) * 1000:.1f}–{max(walls) * 1000:.1f})"
    print(
        f"{label:<40} {shown}  cpu {statistics.median(cpus) * 1000:8.1f} ms"
        f"   rss {first_rss:7.1f} → {rss_mib():7.1f} MiB   reading process ≤ {child_peak_mib():6.1f} MiB",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--readings", type=int, default=10)
    args = parser.parse_args()
    corpus = args.corpus.resolve()
    if not corpus.is_dir():
        sys.exit(f"no corpus at {corpus} (give --corpus DIR)")
    files = sorted(corpus.rglob("*.md"))
    print(
        f"corpus {corpus}: {len(files)} Markdown files, {sum(f.stat().st_size for f in files) / 1024:.0f} KiB"
    )
    print(f"{'reading':<40} {'wall (median, range)':>28}  {'':>13}   memory")
    tmp = Path(tempfile.mkdtemp(prefix="bench-live-"))
    try:
        frameworks = REPO / "tests" / "frameworks"
        live = REPO / "tests" / "orchestration" / "live_versions"

        def config(name: str, system: dict) -> object:
            path = tmp / f"{name}.json"
            path.write_text(json.dumps({"system": system}), encoding="utf-8")
            return load_settings(path)

        index_file = tmp / "index.json"
        write_index(index_file, [{"id": f.stem, "path": f.name, "text": f.read_text()[:200]} for f in files])
        small = config(
            "indexed",
            {
                "kind": "python",
                "callable": "indexed_system:IndexedSystem",
                "args": {"index_file": str(index_file)},
                "path": [str(live)],
            },
        )
        measure("python: index file (adapter only)", small, args.readings)
        if importlib.util.find_spec("llama_index") is not None:
            llama = config(
                "llama",
                {
                    "kind": "python",
                    "callable": "llamaindex_app:build",
                    "args": {"corpus": str(corpus)},
                    "path": [str(frameworks)],
                },
            )
            measure("python: LlamaIndex BM25 (fresh build)", llama, args.readings)
        else:
            print("python: LlamaIndex — not installed (the frameworks extra)")
        if importlib.util.find_spec("haystack") is not None:
            hay = config(
                "haystack",
                {
                    "kind": "python",
                    "callable": "haystack_app:build",
                    "args": {"corpus": str(corpus), "chunk_size": 200},
                    "path": [str(frameworks)],
                },
            )
            measure("python: Haystack 2 BM25 (fresh build)", hay, args.readings)
        else:
            print("python: Haystack — not installed (the frameworks extra)")

        index = tmp / "ref_index"
        built = ReferenceIndex.build(corpus)
        built.save(index)
        reference = config("reference", {"kind": "reference", "index": str(index)})
        build_system(reference)  # loaded once, as by the first tick
        measure("reference: index unchanged", reference, args.readings)

        def rewrite_manifest() -> None:  # a rebuilt index: the manifest written again
            manifest = index / "manifest.json"
            manifest.write_text(manifest.read_text(encoding="utf-8"), encoding="utf-8")

        measure("reference: index rebuilt (reloaded)", reference, args.readings, rewrite_manifest)

        versions = tmp / "versions.json"
        versions.write_text(json.dumps({"index_version": "i1", "build": "b1"}), encoding="utf-8")
        command = config(
            "command",
            {
                "kind": "command",
                "search_argv": [sys.executable, "-c", "print('{}')", "{query}"],
                "version_argv": [
                    sys.executable,
                    "-c",
                    "import sys; print(open(sys.argv[1]).read())",
                    str(versions),
                ],
            },
        )
        measure("command: version_argv (python -c)", command, args.readings)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
