"""Small plain-Python systems under test for ``kind: python`` (tests/systems/test_python_adapter.py).

Nothing here knows about kebab-eval: they are what a user would write. Query ``q`` is answered with
hits ``q-c1``, ``q-c2``, … (so an echo golden set, whose gold chunk of ``q`` is ``q-c1``, scores
MRR 1 on every query that succeeds).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

NOT_A_SYSTEM = 42


@dataclass
class Hit:
    """A user's own hit class: a dataclass, read by its fields."""

    chunk_id: str
    score: float
    heading_path: list[str] = field(default_factory=lambda: ["Echo"])


class Echo:
    """``search`` returns dicts under ``hits`` (with the mode and query id it was given in the
    snippet); ``ask`` an answer citing the first hit, with token usage. Queries whose text is in
    ``fail`` raise, those in ``slow`` sleep ``slow_s`` seconds first."""

    def __init__(
        self,
        fail: tuple[str, ...] = (),
        slow: tuple[str, ...] = (),
        slow_s: float = 5.0,
        log: str | None = None,
        n_hits: int = 3,
    ) -> None:
        self.fail, self.slow, self.slow_s, self.n_hits = set(fail), set(slow), slow_s, n_hits
        if log:  # one line per factory call, naming the process: how often the system was built
            with open(log, "a", encoding="utf-8") as out:
                out.write(f"{os.getpid()}\n")

    def _maybe_fail(self, query: str) -> None:
        if query in self.slow:
            time.sleep(self.slow_s)
        if query in self.fail:
            raise LookupError(f"no index entry for {query!r}\nsecond line stays out")

    def search(self, query: str, k: int, *, mode: str | None = None, query_id: str | None = None) -> dict:
        self._maybe_fail(query)
        hits = [
            {"chunk_id": f"{query}-c{i}", "score": 1.0 / i, "snippet": f"{mode}|{query_id}"}
            for i in range(1, self.n_hits + 1)
        ]
        return {"hits": hits}

    def ask(self, query: str, k: int, *, mode: str | None = None) -> dict:
        self._maybe_fail(query)
        return {
            "answer": f"answer to {query}",
            "citations": [f"{query}-c1"],
            "model": "echo-llm",
            "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15},
        }

    def versions(self) -> dict:
        return {"index_version": "echo-idx-7", "chunker_version": "echo-chunks-1", "extra": 3}


def build(**kwargs) -> Echo:
    """A factory: the system, built with the config's ``args``."""
    return Echo(**kwargs)


class SearchOnly:
    """No ``ask``: answers cannot be asked for. Returns dataclass hits (a user's own objects),
    one more than k (the runner keeps k)."""

    def search(self, query, k):
        return [Hit(f"{query}-c{i}", 1.0 / i) for i in range(1, k + 2)]


SEARCH_ONLY = SearchOnly()  # an object, not a factory


def search_fn(query, k):
    """A plain search function: a generator of chunk ids."""
    yield from (f"{query}-c{i}" for i in range(1, k + 1))


class SlowResult:
    """A framework object whose serialisation hangs (to_dict runs the framework's own code)."""

    def to_dict(self):
        time.sleep(3)
        return {"hits": []}


class SlowToDict:
    def search(self, query, k):
        return SlowResult()


def broken_factory(index_dir: str = "/nowhere"):
    raise FileNotFoundError(f"index folder {index_dir} does not exist")


def returns_a_list():
    return [1, 2, 3]


class OneArgument:
    def search(self, query):
        return []


class NoMode:
    def search(self, query, k):
        return []


class Deep:
    def search(self, query, k):
        nested: list = []
        for _ in range(200):
            nested = [nested]
        return {"hits": nested}


class Exits:
    def search(self, query, k):
        raise SystemExit(3)


class BadVersions:
    def search(self, query, k):
        return [query]

    def versions(self):
        raise RuntimeError("version file unreadable")


class Guide:
    """A system over two guide documents that lists its index (``catalogue()``, returned like its
    hits) and reports its versions; ``parts`` says which guide parts the index holds."""

    def __init__(self, parts: tuple[int, ...] = (1, 2)) -> None:
        self.chunks = [
            {"chunk_id": f"c{i}", "doc_path": f"docs/guide-{i}.md", "heading_path": ["Guide", f"Part {i}"]}
            for i in parts
        ]

    def search(self, query: str, k: int) -> dict:
        return {"hits": self.chunks[:k]}

    def catalogue(self) -> dict:
        return {"hits": self.chunks}

    def versions(self) -> dict:
        return {"chunker_version": "guide-parts", "coverage": {"docs_processed": len(self.chunks)}}
