"""Fresh schemas of the PostgreSQL test server, each dropped (with everything in it) at the end
of the test that made it: :class:`Schemas` (the ``schemas`` fixture of ``conftest.py``)."""

from __future__ import annotations

import secrets

import psycopg
from psycopg import sql

from flowtide.store.postgres import PostgresStore


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
