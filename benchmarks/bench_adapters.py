"""Benchmark: the http adapter against plain HTTP clients, on a live `kebab-eval ref serve`.

    python benchmarks/bench_adapters.py                          # kebab-docs, 600 requests, c = 1, 4, 16
    python benchmarks/bench_adapters.py --demo                   # bundled demo corpus + demo golden set
    python benchmarks/bench_adapters.py --index DIR --requests 1200 --rounds 5 --concurrency 1 8
    python benchmarks/bench_adapters.py --skip-ask --skip-threads

Builds a lexical reference index of ``--corpus`` (default ``shared/corpora/kebab-docs`` beside
the repository; ``--demo`` uses ``kebab_eval_pipeline/data/demo/corpus``) with
``kebab-eval ref index`` — or reuses ``--index DIR`` — and serves it with
``kebab-eval ref serve DIR --port 0 --mode lexical`` (one uvicorn worker) in a subprocess,
waiting for ``GET /health``. The queries are those of the golden set that goes with the corpus
(``docs/examples/kebab-docs/golden.yaml``, or the demo golden set; ``--golden`` to choose),
repeated up to ``--requests`` requests per measurement.

Competitors, side by side in this one process, each on the same requests (k = 10):

* ``plain httpx``: asyncio + one ``httpx.AsyncClient`` (pool of c connections) + a semaphore of
  c; a bare ``POST /search`` and ``response.json()``, nothing else — the server's capacity as
  an httpx client sees it;
* ``plain threads``: c threads, each with its own keep-alive ``http.client.HTTPConnection``;
  POST + ``json.loads`` — a second, lighter baseline (no event loop, no httpx);
* ``adapter``: ``HttpSystem(HttpSystemSettings(kind="http", search_url=..., concurrency=c))
  .run_queries(requests, k=10, answers=False)``, as the pipeline calls it (one client with
  one kept-alive connection per worker, as ``HttpSystem`` does since this benchmark showed a
  shared pool of c connections costing O(c) bookkeeping per request).
For each concurrency in ``--concurrency`` (default 1, 4, 16): a warm-up of every competitor,
then ``--rounds`` rounds (default 3) in which every competitor runs once, the order rotated
each round; the table shows the median queries/second (and the range over rounds), CPU time
per request — the client's (``os.times()`` of this whole process, user + system) and the
server's (utime + stime of the uvicorn process from ``/proc/PID/stat``), system time in
parentheses — and, over all rounds, the requests that failed or did not return the same
number of hits as in the first timed run. Then the ask path at concurrency 4 (``/search``
then ``/ask`` per query; ``--ask-requests``, ``--skip-ask``), and the client-side work per
request measured offline on 20 real responses (``response.json``'s ``json.loads``, the
adapter's ``parse_hits`` and ``render_body``, the ``AsyncClient`` that ``run_queries`` builds
once per call).

The machine this was written on has 2 cores: the server (one uvicorn worker, so about one
core at most) and the client share them, so client CPU per request lowers the server's
throughput too. Not a test: timings depend on the machine and on whatever else runs on it.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import http.client
import importlib.abc
import importlib.metadata
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from kebab_eval_pipeline.foundation.demo import DEMO_CORPUS, DEMO_GOLDEN
from kebab_eval_pipeline.golden.load import load_golden
from kebab_eval_pipeline.systems.http import HttpSystem, render_body
from kebab_eval_pipeline.systems.kinds.http import HttpSystemSettings
from kebab_eval_pipeline.systems.outcome import QueryRequest
from kebab_eval_pipeline.systems.wire import parse_answer, parse_hits

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = ROOT.parent / "shared/corpora/kebab-docs"
KEBAB_DOCS_GOLDEN = ROOT / "docs/examples/kebab-docs/golden.yaml"
K = 10
TIMEOUT_S = 60.0
HEADERS = {"Content-Type": "application/json"}
CLK_TCK = os.sysconf("SC_CLK_TCK")

# ------------------------------------------------------------------------------------ the server


def _cli() -> list[str]:
    """``kebab-eval`` beside this interpreter (the venv's console script), else ``python -m``."""
    script = Path(sys.executable).with_name("kebab-eval")
    if script.exists():
        return [str(script)]
    found = shutil.which("kebab-eval")
    return [found] if found else [sys.executable, "-m", "kebab_eval_pipeline.cli"]


def build_index(corpus: Path, out: Path) -> float:
    """``kebab-eval ref index CORPUS --out OUT``; returns wall seconds (exit 2 on failure)."""
    started = time.perf_counter()
    proc = subprocess.run(
        [*_cli(), "ref", "index", str(corpus), "--out", str(out)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        print(f"error: index build failed ({proc.returncode}):\n{proc.stderr}", file=sys.stderr)
        raise SystemExit(2)
    return time.perf_counter() - started


class Server:
    """``kebab-eval ref serve INDEX --port 0 --mode lexical`` as a subprocess; stderr to a file."""

    def __init__(self, index_dir: Path, log: Path) -> None:
        self.log_path = log
        self._log = log.open("w")
        env = {k: v for k, v in os.environ.items() if not k.startswith("DAGSTER_")}
        self.proc = subprocess.Popen(
            [*_cli(), "ref", "serve", str(index_dir), "--port", "0", "--mode", "lexical"],
            stdout=subprocess.PIPE, stderr=self._log, text=True, env=env,
        )  # fmt: skip
        self.url = ""

    @property
    def pid(self) -> int:
        return self.proc.pid

    def start(self, deadline_s: float = 60.0) -> str:
        """Read the ``serving http://...`` line, then poll ``GET /health`` until it answers."""
        box: list[str] = []
        reader = threading.Thread(target=lambda: box.append(self.proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(deadline_s)
        line = box[0].strip() if box else ""
        if not line.startswith("serving http://"):
            raise RuntimeError(f"server did not start: {line!r}\n{self.stderr_tail()}")
        self.url = line.removeprefix("serving ")
        parts = urlsplit(self.url)
        end = time.monotonic() + deadline_s
        while True:
            try:
                conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=5)
                conn.request("GET", "/health")
                resp = conn.getresponse()
                ok = resp.status == 200 and json.loads(resp.read()).get("status") == "ok"
                conn.close()
                if ok:
                    return self.url
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > end:
                raise RuntimeError(f"server not healthy at {self.url}\n{self.stderr_tail()}")
            time.sleep(0.05)

    def cpu_s(self) -> tuple[float, float]:
        """(utime, stime) of the server process so far (all its threads), in seconds."""
        with open(f"/proc/{self.pid}/stat", encoding="ascii") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK  # fields 14 and 15 of stat(5)

    def stderr_tail(self, lines: int = 20) -> str:
        if not self._log.closed:
            self._log.flush()
        text = self.log_path.read_text(encoding="utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()
        self._log.close()


# ---------------------------------------------------------------------------------- competitors

Competitor = Callable[[list[QueryRequest], int], list[int | None]]  # → hits per request (None: failed)


def plain_httpx(search_url: str, ask_url: str | None = None) -> Competitor:
    """asyncio + httpx.AsyncClient + a semaphore: POST, ``response.json()``, nothing else."""

    def run(requests: list[QueryRequest], c: int) -> list[int | None]:
        async def main() -> list[int | None]:
            limits = httpx.Limits(max_connections=c, max_keepalive_connections=c)
            sem = asyncio.Semaphore(c)
            async with httpx.AsyncClient(timeout=TIMEOUT_S, limits=limits) as client:

                async def one(req: QueryRequest) -> int | None:
                    async with sem:
                        body = {"query": req.query, "k": K}
                        resp = await client.post(search_url, json=body)
                        if resp.status_code != 200:
                            return None
                        hits = len(resp.json()["hits"])
                        if ask_url is not None:
                            resp = await client.post(ask_url, json=body)
                            if resp.status_code != 200:
                                return None
                            resp.json()
                        return hits

                return await asyncio.gather(*(one(r) for r in requests))

        return asyncio.run(main())

    return run


def plain_threads(search_url: str) -> Competitor:
    """c threads, one keep-alive ``http.client.HTTPConnection`` each: POST, ``json.loads``."""
    parts = urlsplit(search_url)

    def run(requests: list[QueryRequest], c: int) -> list[int | None]:
        local = threading.local()
        conns: list[http.client.HTTPConnection] = []

        def one(req: QueryRequest) -> int | None:
            conn = getattr(local, "conn", None)
            if conn is None:
                conn = local.conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=TIMEOUT_S)
                conns.append(conn)
            conn.request("POST", parts.path, body=json.dumps({"query": req.query, "k": K}), headers=HEADERS)
            resp = conn.getresponse()
            data = resp.read()
            return len(json.loads(data)["hits"]) if resp.status == 200 else None

        try:
            with ThreadPoolExecutor(max_workers=c) as pool:
                return list(pool.map(one, requests))
        finally:
            for conn in conns:
                conn.close()

    return run


def adapter(search_url: str, ask_url: str | None = None) -> Competitor:
    """``HttpSystem.run_queries`` as the pipeline calls it (answers when ``ask_url``)."""

    def run(requests: list[QueryRequest], c: int) -> list[int | None]:
        settings = HttpSystemSettings(kind="http", search_url=search_url, ask_url=ask_url, concurrency=c)
        outcomes = HttpSystem(settings).run_queries(requests, k=K, answers=ask_url is not None)
        return [None if o.error_class else len(o.hits) for o in outcomes]

    return run


# ---------------------------------------------------------------------------------- measuring


@dataclass
class Sample:
    wall_s: float
    client_user_s: float
    client_sys_s: float
    server_user_s: float
    server_sys_s: float
    failed: int
    mismatched: int
    n: int

    @property
    def qps(self) -> float:
        return self.n / self.wall_s

    @property
    def client_cpu_s(self) -> float:
        return self.client_user_s + self.client_sys_s

    @property
    def server_cpu_s(self) -> float:
        return self.server_user_s + self.server_sys_s


def measure(
    fn: Competitor, requests: list[QueryRequest], c: int, server: Server, expected: list[int | None] | None
) -> tuple[Sample, list[int | None]]:
    gc.collect()
    s0, c0, t0 = server.cpu_s(), os.times(), time.perf_counter()
    out = fn(requests, c)
    wall = time.perf_counter() - t0
    c1, s1 = os.times(), server.cpu_s()
    failed = sum(1 for x in out if x is None)
    mismatched = 0 if expected is None else sum(1 for a, b in zip(out, expected, strict=True) if a != b)
    client = (c1.user - c0.user, c1.system - c0.system)
    srv = (s1[0] - s0[0], s1[1] - s0[1])
    return Sample(wall, *client, *srv, failed, mismatched, len(requests)), out


def compare(
    competitors: dict[str, Competitor],
    requests: list[QueryRequest],
    c: int,
    rounds: int,
    warmup: list[QueryRequest],
    server: Server,
    label: str,
) -> dict[str, list[Sample]]:
    """Warm every competitor up, then ``rounds`` rounds, the order rotated each round."""
    names = list(competitors)
    for name in names:
        competitors[name](warmup, c)
    expected = None
    samples: dict[str, list[Sample]] = {name: [] for name in names}
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            sample, out = measure(competitors[name], requests, c, server, expected)
            if expected is None:
                expected = out  # the first run of the round-0 leader is the reference
            samples[name].append(sample)
        print(
            f"  {label} round {r + 1}/{rounds}: "
            + ", ".join(f"{n} {samples[n][-1].qps:,.0f}" for n in order)
            + " q/s",
            flush=True,
        )
    return samples


def _median(samples: list[Sample], attr: str) -> float:
    return statistics.median(getattr(s, attr) for s in samples)


def _cpu_cell(samples: list[Sample], who: str) -> str:
    """Median CPU ms per request of ``who`` (client / server), system time in parentheses."""
    ms = 1e3 / samples[0].n
    total, system = _median(samples, f"{who}_cpu_s"), _median(samples, f"{who}_sys_s")
    return f"{total * ms:.2f} ({system * ms:.2f})"


def print_table(results: dict[str, dict[str, list[Sample]]]) -> None:
    header = (
        f"{'':<10} {'client':<17} {'q/s (median)':>15} {'range':>13} "
        f"{'client CPU':>16} {'server CPU':>16} {'failed':>7}"
    )
    print(header)
    print(f"{'':<10} {'':<17} {'':>15} {'':>13} {'ms/q (sys)':>16} {'ms/q (sys)':>16}")
    print("-" * len(header))
    for label, by_name in results.items():
        for i, (name, samples) in enumerate(by_name.items()):
            qps = [s.qps for s in samples]
            bad = sum(s.failed + s.mismatched for s in samples)
            print(
                f"{label if i == 0 else '':<10} {name:<17} {statistics.median(qps):>15,.1f} "
                f"{min(qps):>6,.0f}–{max(qps):<6,.0f} {_cpu_cell(samples, 'client'):>16} "
                f"{_cpu_cell(samples, 'server'):>16} {bad:>7}"
            )


def ratio(results: dict[str, list[Sample]], a: str, b: str) -> str:
    if a not in results or b not in results:
        return "-"
    qps_a, qps_b = (statistics.median(s.qps for s in results[name]) for name in (a, b))
    return f"{qps_a / qps_b:.2f}x"


# ------------------------------------------------------------------------ client-side work, offline


def _per_call_us(fn: Callable[[], object], seconds: float = 0.3) -> float:
    fn()
    n, started = 0, time.perf_counter()
    while True:
        for _ in range(20):
            fn()
        n += 20
        elapsed = time.perf_counter() - started
        if elapsed >= seconds:
            return elapsed / n * 1e6


def offline_costs(server: Server, requests: list[QueryRequest]) -> None:
    """The client-side work per request, on real responses, without the network."""
    search_url, ask_url = server.url + "/search", server.url + "/ask"
    bodies = [{"query": r.query, "k": K} for r in requests[:20]]
    with httpx.Client(timeout=TIMEOUT_S) as client:
        raw = [client.post(search_url, json=b).content for b in bodies]
        raw_ask = client.post(ask_url, json=bodies[0]).content
    payloads = [json.loads(b) for b in raw]
    n_hits = sum(len(p["hits"]) for p in payloads)
    template = HttpSystemSettings(kind="http", search_url=search_url).search_request
    values = {"query": requests[0].query, "query_id": requests[0].query_id, "k": K, "mode": ""}

    json_us = _per_call_us(lambda: [json.loads(b) for b in raw]) / len(raw)
    parse_us = _per_call_us(lambda: [parse_hits(p, K) for p in payloads]) / len(payloads)
    render_us = _per_call_us(lambda: render_body(template, values))
    ask_payload = json.loads(raw_ask)
    answer_us = _per_call_us(lambda: parse_answer(ask_payload))

    started = time.perf_counter()
    for _ in range(5):
        httpx.AsyncClient()  # what run_queries builds once per call (SSL context: CA bundle load)
    client_ms = (time.perf_counter() - started) / 5 * 1e3

    size = statistics.mean(len(b) for b in raw)
    print(
        f"\nclient-side work per request, offline on {len(raw)} real /search responses "
        f"({size / 1024:.1f} KiB, {n_hits / len(raw):.1f} hits on average):"
    )
    rows = [
        ("json.loads (response.json())", json_us, "plain and adapter"),
        ("parse_hits (wire.py)", parse_us, "adapter only"),
        ("render_body (request template)", render_us, "adapter only"),
        ("parse_answer (ask path only)", answer_us, "adapter only, per /ask"),
    ]
    for name, us, who in rows:
        print(f"  {name:<34} {us:8.1f} µs   {who}")
    print(f"  {'httpx.AsyncClient() construction':<34} {client_ms * 1e3:8.0f} µs   once per run_queries call")


# ---------------------------------------------------------------------------------- main


def _versions() -> str:
    out = []
    for dist in ("httpx", "httpcore", "anyio", "h11", "uvicorn", "starlette"):
        try:
            out.append(f"{dist} {importlib.metadata.version(dist)}")
        except importlib.metadata.PackageNotFoundError:
            out.append(f"{dist} -")
    return ", ".join(out)


def main() -> None:
    started = time.perf_counter()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=None, help="corpus folder (default: kebab-docs)")
    ap.add_argument("--demo", action="store_true", help="bundled demo corpus and demo golden set")
    ap.add_argument("--index", type=Path, help="reuse an index built by `kebab-eval ref index`")
    ap.add_argument("--golden", type=Path, help="golden set whose queries are sent")
    ap.add_argument("--requests", type=int, default=600, help="requests per measurement (default 600)")
    ap.add_argument("--rounds", type=int, default=3, help="measurements per competitor (median)")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16])
    ap.add_argument("--warmup", type=int, default=60, help="untimed requests per competitor first")
    ap.add_argument("--ask-requests", type=int, default=300, help="queries for the ask path (c = 4)")
    ap.add_argument("--skip-ask", action="store_true", help="no ask-path measurement")
    ap.add_argument("--skip-threads", action="store_true", help="no threaded http.client baseline")
    args = ap.parse_args()
    if min(args.requests, args.rounds, args.warmup, args.ask_requests, *args.concurrency) < 1:
        ap.error("--requests, --rounds, --warmup, --ask-requests and --concurrency must be >= 1")

    corpus = (args.corpus or (DEMO_CORPUS if args.demo else DEFAULT_CORPUS)).resolve()
    golden_path = args.golden or (
        DEMO_GOLDEN if args.demo or corpus == DEMO_CORPUS.resolve() else KEBAB_DOCS_GOLDEN
    )
    if args.index is None and not corpus.is_dir():
        print(
            f"error: corpus folder not found: {corpus}\n"
            "  pass --demo (the bundled demo corpus), --corpus DIR or --index DIR",
            file=sys.stderr,
        )
        raise SystemExit(2)
    golden = load_golden(golden_path).golden
    queries = [QueryRequest(q.id, q.query) for q in golden.queries]

    def repeat(n: int) -> list[QueryRequest]:
        return [queries[i % len(queries)] for i in range(n)]

    requests, warmup, ask_requests = repeat(args.requests), repeat(args.warmup), repeat(args.ask_requests)
    load_before = os.getloadavg()[0]
    print(
        f"python {sys.version.split()[0]}; {os.cpu_count()} CPUs ({len(os.sched_getaffinity(0))} usable), "
        f"shared by the server (1 uvicorn worker) and this client; load average {load_before:.2f}\n"
        f"{_versions()}",
        flush=True,
    )

    with tempfile.TemporaryDirectory(prefix="bench_adapters_") as tmp:
        index_dir = args.index
        if index_dir is None:
            index_dir = Path(tmp) / "index"
            build_s = build_index(corpus, index_dir)
            how = f"built from {corpus} in {build_s:.1f} s"
        else:
            how = "reused"
        manifest = json.loads((index_dir / "manifest.json").read_text(encoding="utf-8"))
        print(
            f"index {index_dir} ({how}): {manifest['n_docs']} docs, {manifest['n_chunks']:,} chunks, "
            f"index_version {manifest['index_version']}\n"
            f"queries: {len(queries)} from {golden_path} ({golden.name}), repeated to {len(requests)} "
            f"requests per measurement; k={K}; {args.rounds} rounds, median; warm-up {len(warmup)}",
            flush=True,
        )

        server = Server(index_dir, Path(tmp) / "server.log")
        try:
            url = server.start()
            search_url, ask_url = url + "/search", url + "/ask"
            print(f"server: pid {server.pid}, {url}, mode lexical", flush=True)

            competitors: dict[str, Competitor] = {"plain httpx": plain_httpx(search_url)}
            if not args.skip_threads:
                competitors["plain threads"] = plain_threads(search_url)
            competitors["adapter"] = adapter(search_url)

            plain_httpx(search_url)(repeat(100), 4)  # the server's first requests, untimed
            results: dict[str, dict[str, list[Sample]]] = {}
            print("\nsearch path (POST /search per query):", flush=True)
            for c in args.concurrency:
                label = f"c={c}"
                results[label] = compare(competitors, requests, c, args.rounds, warmup, server, label)

            ask_results: dict[str, list[Sample]] | None = None
            if not args.skip_ask:
                print("\nask path (POST /search then POST /ask per query), c=4:", flush=True)
                ask_competitors: dict[str, Competitor] = {
                    "plain httpx": plain_httpx(search_url, ask_url),
                    "adapter": adapter(search_url, ask_url),
                }
                ask_results = compare(
                    ask_competitors, ask_requests, 4, args.rounds, warmup, server, label="ask c=4"
                )

            offline_costs(server, queries)
        finally:
            server.stop()
        if "Traceback" in server.stderr_tail(200):
            print(f"\nwarning: the server logged a traceback:\n{server.stderr_tail()}")

    print(f"\nsearch path: queries/second, median of {args.rounds} rounds ({len(requests)} requests each)")
    print_table(results)
    if ask_results is not None:
        print(f"\nask path, c=4: queries/second (2 requests each), median of {args.rounds} rounds")
        print_table({"ask c=4": ask_results})

    print("\nratios (median q/s):")
    rows = [
        ("adapter / plain httpx", "adapter", "plain httpx"),
        ("adapter / plain threads", "adapter", "plain threads"),
        ("plain httpx / plain threads", "plain httpx", "plain threads"),
    ]
    labels = list(results) + (["ask c=4"] if ask_results is not None else [])
    print(f"  {'':<34}" + "".join(f"{label:>10}" for label in labels))
    for name, a, b in rows:
        cells = [ratio(results[label], a, b) for label in results]
        if ask_results is not None:
            cells.append(ratio(ask_results, a, b))
        if any(cell != "-" for cell in cells):
            print(f"  {name:<34}" + "".join(f"{cell:>10}" for cell in cells))

    load_after = os.getloadavg()[0]
    wall = time.perf_counter() - started
    print(f"\nwall time {wall:.1f} s; load average {load_before:.2f} → {load_after:.2f}")
    if load_before > 0.5 * (os.cpu_count() or 1):
        print("note: the machine was busy with other work during the run; timings are inflated by it")


if __name__ == "__main__":
    main()
