"""How the CLI's run writes the SQLite files of a local Dagster instance: each file opened once.

Dagster's SQLite storages open a new connection for every event they store and close it after
(``NullPool``). Each file is in WAL mode (Dagster sets it when it creates the file), and when the
last connection to a WAL file closes, SQLite checkpoints the log into the file and deletes the log
and its index: every event of a run created and removed two files and waited for four or five
``fdatasync`` calls (about 1,100 for a demo run, 8 s of a 12 s run on a busy ext4 disk), and each
new file's schema was created in some twenty rollback-journal transactions before Dagster switched
it to WAL.

While :func:`files_kept_open` is active, every SQLite connection that Dagster opens (SQLAlchemy's
public ``connect`` event) to a file under the instance's folder:

- switches a new, empty file to WAL before anything is written to it (Dagster switches it right
  after creating its tables: the file ends in the same mode; its tables are then written to the log);
- runs with ``synchronous=NORMAL`` when the file is in WAL mode — SQLite's recommended setting for
  WAL: a commit is not synced, a checkpoint is, so the file stays consistent after a power loss or
  an OS crash (an application crash loses nothing), though the last events before a power loss may
  be missing from the event log; the run store's artifacts are synced as before;
- finds the file held open by one idle connection of ours (opened the first time the file is seen),
  so closing Dagster's connection leaves the log in place; the log is checkpointed and removed
  when ours close, at the end of the scope.

An idle connection holds no lock: other processes (the UI, the daemon, other runs) read and write
the files as before. Files elsewhere (another storage, another folder) and other databases are
left alone. Nothing here is Dagster's: only SQLAlchemy's and SQLite's public interfaces.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path


class _Holder:
    """The connection listener of one :func:`files_kept_open` scope and the connections it keeps."""

    def __init__(self, home: Path) -> None:
        self.home = os.path.join(os.path.realpath(home), "")
        self.kept: dict[str, sqlite3.Connection] = {}
        self.known: dict[str, bool] = {}  # a file seen before: whether it is ours and in WAL mode
        self.lock = threading.Lock()

    def on_connect(self, dbapi_connection, _record) -> None:
        if not isinstance(dbapi_connection, sqlite3.Connection):
            return
        # Only tuning: a file this cannot tune (locked by another process's creation, read-only)
        # is written exactly as Dagster would write it.
        with contextlib.suppress(sqlite3.Error):
            path = dbapi_connection.execute("PRAGMA database_list").fetchone()[2]
            tuned = self.known.get(path)
            if tuned is None:
                tuned = self._first_sight(dbapi_connection, path)
            if tuned:
                dbapi_connection.execute("PRAGMA synchronous=NORMAL")

    def _first_sight(self, connection: sqlite3.Connection, path: str) -> bool:
        """Whether ``path`` is a file of the instance in WAL mode (a new, empty one is switched to
        WAL first); if so it is kept open from now on. Not remembered for a file of the instance
        not in WAL mode: Dagster may switch it later."""
        if not path or not os.path.realpath(path).startswith(self.home):
            self.known[path] = False
            return False
        if connection.execute("PRAGMA page_count").fetchone()[0] == 0:
            connection.execute("PRAGMA journal_mode=WAL")
        if connection.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
            return False
        self._keep(path)
        self.known[path] = True
        return True

    def _keep(self, path: str) -> None:
        with self.lock:
            if path in self.kept:
                return
            connection = sqlite3.connect(path, check_same_thread=False)
            try:
                # a first read maps the WAL index: from here the file has a connection open
                connection.execute("SELECT count(*) FROM sqlite_master").fetchall()
            except sqlite3.Error:
                connection.close()
                return
            self.kept[path] = connection

    def close(self) -> None:
        with self.lock:
            kept, self.kept = self.kept, {}
        for connection in kept.values():
            with contextlib.suppress(sqlite3.Error):
                connection.close()


@contextlib.contextmanager
def files_kept_open(home: Path) -> Iterator[None]:
    """While active, Dagster's SQLite connections to files under ``home`` (the Dagster home) are
    tuned as the module says; on exit the files are let go (checkpointed, their logs removed)."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    holder = _Holder(home)
    event.listen(Engine, "connect", holder.on_connect)
    try:
        yield
    finally:
        event.remove(Engine, "connect", holder.on_connect)
        holder.close()
