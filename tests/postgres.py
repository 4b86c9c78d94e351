"""A live PostgreSQL server on 127.0.0.1 for tests of Dagster's PostgreSQL instance storage.

    from tests.postgres import postgres_server

    with postgres_server() as server:
        env = server.dagster_env()        # KEBAB_EVAL_PG_* for docs/deploy/dagster.yaml
        with server.connect() as conn:    # psycopg2, to look at the tables directly
            ...

``KEBAB_EVAL_TEST_POSTGRES_URL`` (``postgresql://user:password@127.0.0.1:port/db``, what CI
exports) names a running server to use. Without it a throwaway cluster is made with the
machine's ``initdb``/``pg_ctl`` in a temp directory, listening on a free port of 127.0.0.1 only
(its unix socket in that directory), with a password-protected role and an empty database, and
is stopped and deleted afterwards. PostgreSQL refuses to run as root, so as root the cluster
belongs to, and runs as, the ``postgres`` system user (``runuser``).

When the binaries or ``dagster-postgres`` (the ``postgres`` extra) are missing the test is
skipped — unless ``KEBAB_EVAL_REQUIRE_POSTGRES=1`` (set by CI), where it fails instead.
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn
from urllib.parse import quote, unquote, urlsplit

import pytest

from tests.systems.adapters.conftest import free_port

REQUIRE_ENV = "KEBAB_EVAL_REQUIRE_POSTGRES"
URL_ENV = "KEBAB_EVAL_TEST_POSTGRES_URL"
#: What docs/deploy/dagster.yaml reads the connection from, in PostgresServer field order.
PG_ENV = ("KEBAB_EVAL_PG_HOST", "KEBAB_EVAL_PG_PORT", "KEBAB_EVAL_PG_USER", "KEBAB_EVAL_PG_PASSWORD")
PG_DB_ENV = "KEBAB_EVAL_PG_DB"
LOOPBACK = "127.0.0.1"  # tests reach servers on this address only
DB_NAME = "kebab_eval"
#: Debian keeps server binaries off PATH, one directory per major version.
DEBIAN_BIN_GLOB = "/usr/lib/postgresql/*/bin"


@dataclass(frozen=True)
class PostgresServer:
    """Where a running PostgreSQL server is and how to log in (always with a password)."""

    host: str
    port: int
    user: str
    password: str
    dbname: str

    @property
    def url(self) -> str:
        return f"postgresql://{quote(self.user)}:{quote(self.password)}@{self.host}:{self.port}/{self.dbname}"

    def dagster_env(self) -> dict[str, str]:
        """The ``KEBAB_EVAL_PG_*`` variables docs/deploy/dagster.yaml takes its connection from."""
        values = (self.host, str(self.port), self.user, self.password)
        return {**dict(zip(PG_ENV, values, strict=True)), PG_DB_ENV: self.dbname}

    def connect(self, dbname: str | None = None):
        """A psycopg2 connection (dagster-postgres brings psycopg2) to ``dbname`` or the server's db."""
        import psycopg2

        return psycopg2.connect(
            host=self.host,
            port=self.port,
            user=self.user,
            password=self.password,
            dbname=dbname or self.dbname,
            connect_timeout=10,
        )

    def query(self, sql: str, params: tuple = ()) -> list[tuple]:
        """Every row of one query, on a connection of its own (closed afterwards)."""
        conn = self.connect()
        try:
            with conn.cursor() as cursor:
                cursor.execute(sql, params)
                return cursor.fetchall()
        finally:
            conn.close()


def _skip_or_fail(reason: str) -> NoReturn:
    """Skip the test — or fail it when CI requires the PostgreSQL tests to run."""
    required = os.environ.get(REQUIRE_ENV) == "1"
    (pytest.fail if required else pytest.skip)(f"{REQUIRE_ENV}=1 but {reason}" if required else reason)


def server_from_url(url: str) -> PostgresServer:
    """Parse ``postgresql://user:password@127.0.0.1:port/db``; ValueError naming the variable and
    the reason when it is not a password-protected loopback URL."""
    parts = urlsplit(url)
    dbname = unquote(parts.path.lstrip("/"))
    problems = []
    if parts.scheme not in ("postgresql", "postgres"):
        problems.append(f"scheme must be postgresql://, got {parts.scheme or 'none'!r}")
    if parts.hostname != LOOPBACK:
        problems.append(f"host must be {LOOPBACK} (tests use loopback servers only)")
    if not parts.username or not parts.password:
        problems.append("user and password are required")
    if not dbname:
        problems.append("a database name is required")
    try:
        port = parts.port or 5432
    except ValueError:
        problems.append("port is not a number")
        port = 0
    if problems:
        raise ValueError(
            f"{URL_ENV}: {'; '.join(problems)} (expected postgresql://user:pw@127.0.0.1:5432/db)"
        )
    return PostgresServer(
        host=str(parts.hostname),
        port=port,
        user=unquote(str(parts.username)),
        password=unquote(str(parts.password)),
        dbname=dbname,
    )


def postgres_bin_dir() -> Path | None:
    """The directory holding ``initdb`` and ``pg_ctl``: from PATH, else Debian's newest version."""
    on_path = shutil.which("initdb")
    candidates = [Path(on_path).resolve().parent] if on_path else []
    versions = sorted(glob.glob(DEBIAN_BIN_GLOB), key=lambda p: int(Path(p).parent.name), reverse=True)
    candidates += [Path(p) for p in versions if Path(p).parent.name.isdigit()]
    for directory in candidates:
        if (directory / "initdb").is_file() and (directory / "pg_ctl").is_file():
            return directory
    return None


def _run(argv: list[str], cwd: Path, what: str, log: Path | None = None) -> None:
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        server_log = log.read_text(errors="replace")[-2000:] if log and log.exists() else ""
        raise RuntimeError(
            f"{what} failed (exit {proc.returncode}): {' '.join(argv)}\n"
            f"{proc.stderr}{proc.stdout}{server_log}"
        )


@contextmanager
def throwaway_cluster() -> Iterator[PostgresServer]:
    """initdb + pg_ctl a private cluster on a free 127.0.0.1 port; stopped and deleted on exit."""
    bin_dir = postgres_bin_dir()
    if bin_dir is None:
        _skip_or_fail(
            f"no initdb/pg_ctl on PATH or in {DEBIAN_BIN_GLOB} (apt-get install postgresql), "
            f"and {URL_ENV} is not set"
        )
    as_owner: list[str] = []
    owner = None
    if os.geteuid() == 0:
        try:
            owner = pwd.getpwnam("postgres")
        except KeyError:
            _skip_or_fail("running as root and there is no 'postgres' system user to run the server as")
        as_owner = ["runuser", "-u", "postgres", "--"]
    # Not pytest's tmp_path (nor a private TMPDIR): those are root-only (0700), and the postgres
    # user must reach its files.
    root = Path(tempfile.mkdtemp(prefix="kebab-eval-pg-", dir="/tmp" if owner else None))
    data, log, pwfile = root / "data", root / "server.log", root / "pwfile"
    password, port = secrets.token_hex(16), free_port()
    pwfile.write_text(password + "\n")
    if owner is not None:
        os.chown(root, owner.pw_uid, owner.pw_gid)
        os.chown(pwfile, owner.pw_uid, owner.pw_gid)
    user = "kebab_eval_test"
    started = False
    try:
        # scram-sha-256 over TCP: the tests log in with the password, as a deployment would.
        _run(
            [
                *as_owner,
                str(bin_dir / "initdb"),
                f"--pgdata={data}",
                f"--username={user}",
                f"--pwfile={pwfile}",
                "--auth-host=scram-sha-256",
                "--auth-local=trust",
                "--encoding=UTF8",
                "--no-locale",
            ],
            root,
            "initdb",
        )
        with (data / "postgresql.conf").open("a") as conf:
            conf.write(
                f"\nlisten_addresses = '127.0.0.1'\nport = {port}\nunix_socket_directories = '{root}'\n"
                "fsync = off\n"  # a throwaway cluster: durability across OS crashes is not needed
            )
        _run(
            [*as_owner, str(bin_dir / "pg_ctl"), "start", "-w", "-t", "60", "-D", str(data), "-l", str(log)],
            root,
            "pg_ctl start",
            log,
        )
        started = True
        server = PostgresServer("127.0.0.1", port, user, password, DB_NAME)
        conn = server.connect(dbname="postgres")
        try:
            conn.autocommit = True  # CREATE DATABASE refuses to run inside a transaction
            conn.cursor().execute(f"CREATE DATABASE {DB_NAME}")
        finally:
            conn.close()
        yield server
    finally:
        if started:
            _run(
                [*as_owner, str(bin_dir / "pg_ctl"), "stop", "-w", "-m", "fast", "-D", str(data)],
                root,
                "pg_ctl stop",
                log,
            )
        shutil.rmtree(root, ignore_errors=True)


def require_dagster_postgres() -> None:
    """Skip (fail under ``KEBAB_EVAL_REQUIRE_POSTGRES=1``) when the postgres extra is missing."""
    try:
        import dagster_postgres  # noqa: F401
    except ImportError:
        _skip_or_fail('dagster-postgres is not installed (pip install -e ".[postgres]")')


@contextmanager
def postgres_server() -> Iterator[PostgresServer]:
    """The server named by ``KEBAB_EVAL_TEST_POSTGRES_URL``, else a throwaway cluster; skips (fails
    under ``KEBAB_EVAL_REQUIRE_POSTGRES=1``) without dagster-postgres or PostgreSQL binaries."""
    require_dagster_postgres()
    url = os.environ.get(URL_ENV)
    if url:
        server = server_from_url(url)
        try:
            server.connect().close()
        except Exception as exc:
            raise RuntimeError(f"{URL_ENV}: cannot connect to {server.host}:{server.port}: {exc}") from exc
        yield server
        return
    with throwaway_cluster() as server:
        yield server
