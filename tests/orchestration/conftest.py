"""Fixtures of the orchestration tests that need a server: PostgreSQL for the instance storage."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.postgres import PostgresServer, postgres_server


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """A live PostgreSQL on 127.0.0.1 (``KEBAB_EVAL_TEST_POSTGRES_URL`` or a throwaway cluster),
    shared by the session; skipped without it unless ``KEBAB_EVAL_REQUIRE_POSTGRES=1``."""
    with postgres_server() as server:
        yield server
