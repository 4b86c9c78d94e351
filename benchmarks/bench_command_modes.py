"""Benchmark: the command adapter per query vs persistent (JSON lines) vs the http adapter, on the
same reference index, side by side in one process.

    python benchmarks/bench_command_modes.py                    # demo corpus + demo golden set, and ×3
    python benchmarks/bench_command_modes.py --large 600 --rounds 5
    python benchmarks/bench_command_modes.py --corpus ../shared/corpora/kebab-docs
        --golden docs/examples/kebab-docs/golden.yaml
    python benchmarks/bench_command_modes.py --skip-per-query   # only http and persistent

Builds a lexical reference index of ``--corpus`` (default: the bundled demo corpus) with
``kebab-eval ref index``, starts ``kebab-eval ref serve INDEX --port 0`` (one uvicorn worker) for
http, and runs the golden set's queries (default: the demo's 105) through the adapters exactly as
the pipeline calls them (``run_queries(requests, k=10, answers)``), answers off and on:

* ``http c=N``: ``HttpSystem`` on ``/search`` (+ ``/ask``) — its default concurrency 4, and 1;
* ``jsonl c=N``: ``JsonlCommandSystem`` over ``kebab-eval ref serve-jsonl INDEX`` (concurrency 1,
  its default, and 2): the wall time includes starting the process(es) and the version line;
* ``per-query``: ``CommandSystem`` running ``kebab-eval ref search --json`` (+ ``ref ask --json``)
  per query at its default concurrency 2; ``per-query 1 call``: the same with ``ask_returns_hits``
  (answers on only: with answers off it is the same as per-query).

Then a larger set (``--large``, default 315 = the demo ×3) for http and jsonl; per-query runs there
only with ``--per-query-large`` (it takes minutes). Each fast competitor runs ``--rounds`` times
(default 3, order rotated) and the table shows the median total; per-query runs once. Columns:
total seconds, queries/s, the median of the per-query latency (``retrieval_ms``, which for two
calls is the search alone — see ``answer_ms`` for the ask), and the ratio of the total to http at
its default concurrency; for ``jsonl c=1`` also the start-up (the total less the sum of its
sequential query times: starting the process, loading the index, the version line) and the ratio
without it — http's server was started before the clock. Every competitor's hits (chunk ids per
query) and answer texts are checked against http's; a mismatch is printed. Not a test: timings
depend on the machine (the one this was written on has 2 cores shared with other work).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_adapters import Server, _cli, build_index  # a sibling script, not a package

from kebab_eval_pipeline.foundation.demo import DEMO_CORPUS, DEMO_GOLDEN
from kebab_eval_pipeline.golden.load import load_golden
from kebab_eval_pipeline.systems.command import CommandSystem
from kebab_eval_pipeline.systems.command_jsonl import JsonlCommandSystem
from kebab_eval_pipeline.systems.http import HttpSystem
from kebab_eval_pipeline.systems.kinds.command import CommandSystemSettings
from kebab_eval_pipeline.systems.kinds.http import HttpSystemSettings
from kebab_eval_pipeline.systems.outcome import QueryOutcome, QueryRequest

K = 10
Factory = Callable[[], object]


def competitors(index: Path, url: str) -> dict[str, Factory]:
    cli = _cli()
    search = [*cli, "ref", "search", str(index), "{query}", "--k", "{k}", "--json"]
    ask = [*cli, "ref", "ask", str(index), "{query}", "--k", "{k}", "--json"]

    def http(c: int) -> Factory:
        return lambda: HttpSystem(
            HttpSystemSettings(kind="http", search_url=f"{url}/search", ask_url=f"{url}/ask", concurrency=c)
        )

    def jsonl(c: int) -> Factory:
        argv = [*cli, "ref", "serve-jsonl", str(index)]
        return lambda: JsonlCommandSystem(
            CommandSystemSettings(kind="command", protocol="jsonl", argv=argv, concurrency=c, timeout_s=120)
        )

    def per_query(one_call: bool) -> Factory:
        return lambda: CommandSystem(
            CommandSystemSettings(
                kind="command", search_argv=search, ask_argv=ask, ask_returns_hits=one_call, timeout_s=300
            )
        )

    return {
        "http c=4": http(4),
        "http c=1": http(1),
        "jsonl c=1": jsonl(1),
        "jsonl c=2": jsonl(2),
        "per-query": per_query(False),
        "per-query 1 call": per_query(True),
    }


def run(factory: Factory, requests: list[QueryRequest], answers: bool) -> tuple[float, list[QueryOutcome]]:
    system = factory()
    started = time.perf_counter()
    outcomes = system.run_queries(requests, k=K, answers=answers)  # type: ignore[attr-defined]
    return time.perf_counter() - started, outcomes


def signature(outcomes: list[QueryOutcome]) -> list[tuple]:
    return [
        (o.query_id, o.error_class, tuple(h.chunk_id for h in o.hits), o.answer.text if o.answer else None)
        for o in outcomes
    ]


def bench(
    label: str,
    requests: list[QueryRequest],
    factories: dict[str, Factory],
    answers: bool,
    rounds: int,
    slow: set[str],
) -> None:
    totals: dict[str, list[float]] = {name: [] for name in factories}
    latest: dict[str, list[QueryOutcome]] = {}
    names = list(factories)
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            if name in slow and totals[name]:
                continue  # per-query: once is enough (and takes long)
            seconds, outcomes = run(factories[name], requests, answers)
            totals[name].append(seconds)
            latest[name] = outcomes
    base = statistics.median(totals["http c=4"])
    reference = signature(latest["http c=4"])
    n = len(requests)
    print(f"\n{label}: {n} queries, k={K}, answers {'on' if answers else 'off'}")
    head = f"  {'':18} {'total s':>9} {'start s':>8} {'q/s':>8} {'median ms':>10} {'× http c=4':>11}"
    print(head + f" {'w/o start':>10}  {'rounds':>6}  check")
    for name in names:
        total = statistics.median(totals[name])
        outcomes = latest[name]
        latency = statistics.median(o.retrieval_ms for o in outcomes if o.retrieval_ms is not None)
        errors = sum(o.error_class is not None for o in outcomes)
        same = signature(outcomes) == reference
        check = "same hits+answers" if same else "DIFFERENT from http"
        if errors:
            check += f", {errors} errors"
        # One process serving queries one at a time: what the run spent outside its queries is
        # starting it (http's server was started before the clock; so, here, is nothing).
        start = total - sum(o.retrieval_ms for o in outcomes) / 1000 if name == "jsonl c=1" else None
        print(
            f"  {name:18} {total:9.2f} {'' if start is None else f'{start:.2f}':>8} {n / total:8.1f} "
            f"{latency:10.2f} {total / base:11.2f} "
            f"{'' if start is None else f'{(total - start) / base:.2f}':>10}  {len(totals[name]):>6}  {check}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=DEMO_CORPUS)
    parser.add_argument("--index", type=Path, help="a prebuilt `kebab-eval ref index` folder")
    parser.add_argument("--golden", type=Path, default=DEMO_GOLDEN)
    parser.add_argument("--large", type=int, default=315, help="queries in the larger run (0: skip)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--skip-per-query", action="store_true")
    parser.add_argument("--per-query-large", action="store_true")
    args = parser.parse_args()

    golden = load_golden(args.golden).golden
    requests = [QueryRequest(query_id=q.id, query=q.query) for q in golden.queries]
    with tempfile.TemporaryDirectory(prefix="bench-command-modes-") as tmp:
        index = args.index
        if index is None:
            index = Path(tmp) / "index"
            seconds = build_index(args.corpus, index)
            print(f"indexed {args.corpus} in {seconds:.1f} s")
        server = Server(index, Path(tmp) / "server.log")
        try:
            url = server.start()
            factories = competitors(index, url)
            per_query = {"per-query", "per-query 1 call"}
            small = {n: f for n, f in factories.items() if not (args.skip_per_query and n in per_query)}
            bench("golden set", requests, {n: f for n, f in small.items() if n != "per-query 1 call"},
                  False, args.rounds, per_query)  # fmt: skip
            bench("golden set", requests, small, True, args.rounds, per_query)
            if args.large:
                repeated = [
                    QueryRequest(f"{r.query_id}#{i // len(requests)}", r.query)
                    for i, r in enumerate(requests * (args.large // len(requests) + 1))
                ][: args.large]
                large = {
                    n: f
                    for n, f in factories.items()
                    if n not in per_query or (args.per_query_large and not args.skip_per_query)
                }
                bench("larger set", repeated, large, False, args.rounds, per_query)
                bench("larger set", repeated, large, True, args.rounds, per_query)
        finally:
            server.stop()


if __name__ == "__main__":
    main()
