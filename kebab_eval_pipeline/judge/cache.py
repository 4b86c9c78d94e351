"""The judge cache (SPEC §6): judge replies keyed by (judge digest, prompt version, input hash),
so an unchanged input is never judged twice — across runs, re-judges and processes.

One SQLite file. WAL journal mode lets readers proceed while one process writes, and a 30 s busy
timeout makes concurrent writers (parallel Dagster steps, several ``kebab-eval`` commands) wait
for each other instead of failing. Within a process one connection is shared behind a lock.

The reply is stored as :meth:`Completion.to_json` text written by the standard ``json`` module:
floats are written in their shortest round-tripping form, and ``-inf`` log probabilities (which
orjson would turn into ``null``) survive as ``-Infinity``. A row that no longer decodes counts as
a miss, and the next :meth:`JudgeCache.put` of that key replaces it.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType

from kebab_eval_pipeline.foundation.errors import InputError, Offender
from kebab_eval_pipeline.judge.completion import Completion

BUSY_TIMEOUT_S = 30.0
_SCHEMA = """
CREATE TABLE IF NOT EXISTS judge_cache (
    digest TEXT NOT NULL,
    prompt_version TEXT NOT NULL,
    input_hash TEXT NOT NULL,
    completion TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (digest, prompt_version, input_hash)
) WITHOUT ROWID
"""


class JudgeCache:
    """Judge replies in a SQLite file at ``path`` (parent folders created). ``hits``/``misses``
    count :meth:`get` outcomes of this instance. Raises :class:`InputError` (field
    ``judge.cache_dir``) when the file cannot be opened as a cache."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            blocker = next((p for p in (self.path.parent, *self.path.parent.parents) if p.is_file()), None)
            why = f"{blocker} is a file, not a folder" if blocker else exc.strerror or str(exc)
            raise self._unusable(f"cannot create its folder: {why}") from None
        if self.path.is_dir():
            raise self._unusable("is a folder; expected a database file")
        try:
            # timeout= is SQLite's busy timeout; autocommit (isolation_level=None) keeps every
            # statement its own short transaction, so writers hold the lock only briefly.
            self._conn = sqlite3.connect(
                self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise self._unusable(f"cannot open it as a SQLite database: {exc}") from None
        try:
            self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute(_SCHEMA)
        except sqlite3.Error as exc:  # e.g. "file is not a database", a read-only folder
            self._conn.close()
            raise self._unusable(f"cannot use it as a SQLite database: {exc}") from None

    def _unusable(self, reason: str) -> InputError:
        return InputError(
            "cannot open the judge cache", [Offender(str(self.path), reason, field="judge.cache_dir")]
        )

    def get(self, digest: str, prompt_version: str, input_hash: str) -> Completion | None:
        """The cached reply for this key, or None (a miss; an undecodable row is a miss too)."""
        with self._lock:
            row = self._conn.execute(
                "SELECT completion FROM judge_cache "
                "WHERE digest = ? AND prompt_version = ? AND input_hash = ?",
                (digest, prompt_version, input_hash),
            ).fetchone()
            completion = None
            if row is not None:
                try:
                    completion = Completion.from_json(json.loads(row[0]))
                except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
                    completion = None
                if completion is not None and not isinstance(completion.text, str):
                    completion = None  # a damaged row: judged again and overwritten by the next put
            if completion is None:
                self.misses += 1
            else:
                self.hits += 1
            return completion

    def put(self, digest: str, prompt_version: str, input_hash: str, completion: Completion) -> None:
        """Store (or replace) the reply for this key."""
        text = json.dumps(completion.to_json(), sort_keys=True)
        created_at = datetime.now(UTC).isoformat(timespec="seconds")
        with self._lock:
            self._conn.execute(
                "INSERT OR REPLACE INTO judge_cache "
                "(digest, prompt_version, input_hash, completion, created_at) VALUES (?, ?, ?, ?, ?)",
                (digest, prompt_version, input_hash, text, created_at),
            )

    def __len__(self) -> int:
        with self._lock:
            return self._conn.execute("SELECT COUNT(*) FROM judge_cache").fetchone()[0]

    def close(self) -> None:
        """Close the database connection (idempotent)."""
        with self._lock:
            self._conn.close()

    def __enter__(self) -> JudgeCache:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"JudgeCache({str(self.path)!r})"
