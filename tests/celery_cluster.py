"""A distributed kebab-eval deployment on 127.0.0.1, for the Celery tests and benchmark.

    with redis_server() as broker, s3_server() as s3, postgres_server() as pg:
        env = deployment_env(base_env, home, broker, s3, pg)   # what docs/site/recipes/celery.md sets
        with celery_workers(env, 2) as workers:
            ... dagster asset materialize ... (env) ...

- Redis (Debian's ``redis-server``) on a free port, no persistence: the Celery broker and result
  backend.
- An S3-compatible server (moto's, ``python -m moto.server``) with one bucket: the artifact store,
  reached through s3fs with the endpoint and credentials in ``AWS_*`` variables only.
- N Celery workers (``celery -A kebab_eval_pipeline.celery_worker worker``), each one
  pool process (``--concurrency 1``), each with a DAGSTER_HOME and working folder of its own: they
  share nothing on disk with the run worker but what the instance (PostgreSQL) and S3 hold.

Missing pieces (the ``celery`` extra, ``redis-server``) skip the test — or fail it under
``KEBAB_EVAL_REQUIRE_CELERY=1`` (set by CI).
"""

from __future__ import annotations

import os
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

import pytest

from tests import docs_pages
from tests.postgres import PostgresServer
from tests.systems.adapters.conftest import free_port

REQUIRE_ENV = "KEBAB_EVAL_REQUIRE_CELERY"
REPO = Path(__file__).resolve().parents[1]
DEPLOY_INSTANCE = REPO / "docs" / "deploy" / "dagster.yaml"
WORKER_APP = "kebab_eval_pipeline.celery_worker"
BUCKET = "kebab-eval-test"


def skip_or_fail(reason: str) -> NoReturn:
    required = os.environ.get(REQUIRE_ENV) == "1"
    (pytest.fail if required else pytest.skip)(f"{REQUIRE_ENV}=1 but {reason}" if required else reason)


def require_celery_extra() -> None:
    try:
        import dagster_celery  # noqa: F401
        import moto  # noqa: F401
        import redis  # noqa: F401
        import s3fs  # noqa: F401
    except ImportError as exc:
        skip_or_fail(f'{exc.name} is not installed (pip install -e ".[celery,test]")')


def _wait(what: str, ready, proc: subprocess.Popen, log: Path, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        if proc.poll() is not None or time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
            raise RuntimeError(f"{what} did not start (exit {proc.poll()}):\n{tail}")
        time.sleep(0.1)


def _stop(proc: subprocess.Popen, sig: int = signal.SIGTERM, timeout_s: float = 20) -> None:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def redis_server() -> Iterator[str]:
    """``redis-server`` on a free 127.0.0.1 port, in memory only; yields ``redis://127.0.0.1:P/0``."""
    binary = shutil.which("redis-server")
    if binary is None:
        skip_or_fail("no redis-server on PATH (apt-get install redis-server)")
    import redis

    folder = Path(tempfile.mkdtemp(prefix="kebab-eval-redis-"))
    port, log = free_port(), folder / "redis.log"
    argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    argv += ["--dir", str(folder), "--logfile", str(log)]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=1)

    def pong() -> bool:
        try:
            return bool(client.ping())
        except redis.exceptions.ConnectionError:
            return False

    try:
        _wait("redis-server", pong, proc, log)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        client.close()
        _stop(proc)
        shutil.rmtree(folder, ignore_errors=True)


@dataclass(frozen=True)
class S3Server:
    endpoint: str
    bucket: str
    access_key: str
    secret_key: str = field(repr=False)

    def env(self) -> dict[str, str]:
        """The only place the endpoint and credentials are given (s3fs/botocore read them)."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_DEFAULT_REGION": "us-east-1",
        }

    def filesystem(self):
        import s3fs

        return s3fs.S3FileSystem(
            key=self.access_key, secret=self.secret_key, client_kwargs={"endpoint_url": self.endpoint}
        )


@contextmanager
def s3_server() -> Iterator[S3Server]:
    """moto's S3-compatible server on a free 127.0.0.1 port with one empty bucket."""
    require_celery_extra()
    folder = Path(tempfile.mkdtemp(prefix="kebab-eval-s3-"))
    port, log = free_port(), folder / "moto.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    server = S3Server(
        f"http://127.0.0.1:{port}", BUCKET, "kebab-test-" + secrets.token_hex(4), secrets.token_hex(16)
    )

    def up() -> bool:
        import socket

        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0

    try:
        _wait("moto server", up, proc, log)
        server.filesystem().mkdir(BUCKET)
        yield server
    finally:
        _stop(proc)
        shutil.rmtree(folder, ignore_errors=True)


def deployment_env(
    base: dict[str, str],
    home: Path,
    broker: str,
    s3: S3Server,
    postgres: PostgresServer,
    prefix: str = "kebab-eval",
) -> dict[str, str]:
    """The environment of docs/site/recipes/celery.md: the instance in PostgreSQL (docs/deploy/dagster.yaml
    copied into ``home``), the Celery executor and its broker, artifacts in the S3 bucket."""
    home.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(DEPLOY_INSTANCE, home / "dagster.yaml")
    env = {k: v for k, v in base.items() if not k.startswith(("KEBAB_EVAL_", "DAGSTER_", "AWS_"))}
    env.update(postgres.dagster_env())
    env.update(s3.env())
    env.update(
        DAGSTER_HOME=str(home),
        KEBAB_EVAL_EXECUTOR="celery",
        KEBAB_EVAL_CELERY_BROKER=broker,
        KEBAB_EVAL_STORAGE=f"s3://{s3.bucket}/{prefix}",
        PYTHONPATH=os.pathsep.join(p for p in (str(REPO), base.get("PYTHONPATH", "")) if p),
    )
    for name in ("KEBAB_EVAL_INDEX_CACHE", "KEBAB_EVAL_CONFIG"):
        if base.get(name):
            env[name] = base[name]
    return env


@contextmanager
def deployment_environ(env: dict[str, str]) -> Iterator[None]:
    """This process's environment with the deployment's instance and storage settings
    (``KEBAB_EVAL_PG_*``, ``AWS_*``), to read its Dagster instance and bucket from a test."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            if name.startswith(("KEBAB_EVAL_PG_", "AWS_")):
                patch.setenv(name, value)
        yield


@dataclass
class Worker:
    name: str
    proc: subprocess.Popen
    log: Path

    def pool_pids(self) -> set[int]:
        """The pids of this worker's pool processes (children of its main process)."""
        children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children")
        try:
            return {int(p) for p in children.read_text().split()}
        except OSError:
            return set()


def documented_worker_argv(name: str, concurrency: int) -> list[str]:
    """The worker command of the Celery recipe (docs/site/recipes/celery.md) as written, run by this
    interpreter, with this worker's name and concurrency in place of the page's."""
    block = docs_pages.snippet("sh", f"celery -A {WORKER_APP} worker", starts=True).text
    argv = shlex.split(block.replace("\\\n", " "))
    assert argv[:4] == ["celery", "-A", WORKER_APP, "worker"], argv
    for option, value in (("-n", f"{name}@%h"), ("--concurrency", str(concurrency))):
        argv[argv.index(option) + 1] = value
    return [sys.executable, "-m", *argv]


@contextmanager
def celery_workers(env: dict[str, str], count: int, concurrency: int = 1) -> Iterator[list[Worker]]:
    """``count`` Celery worker processes on the broker of ``env``, ready when yielded; each in a
    folder of its own (its own DAGSTER_HOME and working folder: no shared disk)."""
    require_celery_extra()
    root = Path(tempfile.mkdtemp(prefix="kebab-eval-celery-"))
    workers: list[Worker] = []
    try:
        for i in range(count):
            folder = root / f"worker-{i}"
            (folder / "dagster_home").mkdir(parents=True)
            (folder / "dagster_home" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
            log = folder / "worker.log"
            name = f"kebab-w{i}-{secrets.token_hex(3)}"
            argv = documented_worker_argv(name, concurrency)
            with log.open("wb") as out:
                proc = subprocess.Popen(
                    argv,
                    env={**env, "DAGSTER_HOME": str(folder / "dagster_home")},
                    cwd=folder,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
            workers.append(Worker(name, proc, log))
        for worker in workers:
            _wait(
                f"celery worker {worker.name}",
                lambda w=worker: " ready." in w.log.read_text(errors="replace"),
                worker.proc,
                worker.log,
                timeout_s=120,
            )
        yield workers
    finally:
        # all told to stop at once (a warm shutdown: a running step finishes first), then waited for
        for worker in workers:
            if worker.proc.poll() is None:
                worker.proc.send_signal(signal.SIGTERM)
        for worker in workers:
            _stop(worker.proc, signal.SIGTERM, 30)
        shutil.rmtree(root, ignore_errors=True)


def write_replay_run(folder: Path, n_queries: int, seed: int = 7) -> Path:
    """A generated replay evaluation in ``folder``: ``n_queries`` golden queries (canonical JSONL;
    one in ten out of scope), a ``kebab`` trace answering each with ten ranked hits (the gold
    chunk at a seeded rank, or missing), one query in fifty recorded as a timeout, and the run
    config (replay system, no answers, no baseline); returns the config's path."""
    import json
    import random

    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    golden, trace = folder / "golden.jsonl", folder / "per_query.jsonl"
    with golden.open("w", encoding="utf-8") as g, trace.open("w", encoding="utf-8") as t:
        for i in range(1, n_queries + 1):
            qid = f"q-{i:06d}"
            answerable = i % 10 != 0
            query: dict = {"id": qid, "query": f"generated query {i}"}
            if answerable:
                query["supports"] = [{"chunk_id": f"c-{i}"}]
            else:
                query["answerable"] = False
            g.write(json.dumps(query) + "\n")
            gold_rank = rng.randint(1, 14)  # 11..14: not retrieved
            hits = [
                {"rank": r, "chunk_id": f"c-{i}" if r == gold_rank else f"x-{i}-{r}", "score": 1.0 / r}
                for r in range(1, 11)
            ]
            record: dict = {"query_id": qid, "hits": hits, "latency_ms": 5 + i % 50, "error": None}
            if i % 50 == 0:
                record = {"query_id": qid, "hits": [], "latency_ms": 3000, "error": "timeout: simulated"}
            t.write(json.dumps(record) + "\n")
    config = folder / "eval.yaml"
    config.write_text(
        json.dumps(  # JSON is YAML
            {
                "golden": str(golden),
                "system": {"kind": "replay", "path": str(trace), "format": "kebab"},
                "answers": False,
                "baseline": "none",
            },
            indent=2,
        ),
        encoding="utf-8",
    )
    return config
