"""Fixtures of the PostgreSQL store's tests: a server to talk to, and fresh schemas in it.

The server is the one ``FLOWTIDE_TEST_POSTGRES_URL`` names (by default the local one, user
``postgres``, database ``test``). Each store gets a schema of its own, ``flowtide_test_<hex>``,
dropped with everything in it when the test ends: tests never meet, whatever runs beside them.
When the server cannot be reached, these tests fail (never skip), saying how to start it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import AsyncIterator, Iterator

import psycopg
import pytest
from psycopg import sql

from flowtide.store import Store
from flowtide.store.postgres import PostgresStore
from flowtide.testing import StoreFactory

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


class Schemas:
    """Fresh schema names on the test server; every schema named is dropped at the end."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.names: list[str] = []

    def new(self) -> str:
        name = f"flowtide_test_{secrets.token_hex(6)}"
        self.names.append(name)
        return name

    def store(self, schema: str | None = None, **pool: int) -> PostgresStore:
        """A store (not yet opened) on ``schema``, by default a fresh one."""
        return PostgresStore(self.url, schema=schema or self.new(), **pool)

    def query(self, statement: str, schema: str, *params: object) -> list[tuple[object, ...]]:
        """The rows of ``statement`` run in ``schema`` (``{schema}`` in it: the schema)."""
        with psycopg.connect(self.url, autocommit=True) as connection:
            composed = sql.SQL(statement).format(schema=sql.Identifier(schema))
            cursor = connection.execute(composed, params or None)
            return cursor.fetchall() if cursor.description is not None else []

    def drop_all(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as connection:
            for name in self.names:
                drop = sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name))
                connection.execute(drop)


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
