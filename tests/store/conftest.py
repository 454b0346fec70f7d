"""Fixtures of the PostgreSQL store's tests: a server to talk to, and fresh schemas in it.

The server is the one ``FLOWTIDE_TEST_POSTGRES_URL`` names (by default the local one, user
``postgres``, database ``test``). Each store gets a schema of its own, ``flowtide_test_<hex>``,
dropped with everything in it when the test ends: tests never meet, whatever runs beside them.
When the server cannot be reached, these tests fail (never skip), saying how to start it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Iterator

import psycopg
import pytest

from flowtide.store import Store
from flowtide.testing import StoreFactory
from tests.store.postgres_schemas import Schemas

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"

HOW_TO_START = (
    "start the local server with `pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) "
    "main start`, or name a server of yours in FLOWTIDE_TEST_POSTGRES_URL"
)


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """The URL of the test server, once it has answered."""
    url = os.environ.get("FLOWTIDE_TEST_POSTGRES_URL", DEFAULT_URL)
    try:
        with psycopg.connect(url, connect_timeout=5) as connection:
            connection.execute("SELECT 1")
    except psycopg.Error as error:
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else repr(error)
        pytest.fail(
            f"the PostgreSQL store's tests need a server: {first_line}\n{HOW_TO_START}",
            pytrace=False,
        )
    return url


@pytest.fixture
def schemas(postgres_url: str) -> Iterator[Schemas]:
    made = Schemas(postgres_url)
    yield made
    made.drop_all()


@pytest.fixture
def postgres_stores(schemas: Schemas) -> StoreFactory:
    """Gives a fresh, open store on a schema of its own, closed on exit (its schema is dropped
    when the test ends)."""

    @contextlib.asynccontextmanager
    async def fresh() -> AsyncIterator[Store]:
        async with schemas.store(max_size=4) as store:
            yield store

    return fresh
