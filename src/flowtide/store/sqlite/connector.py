"""The SQLite store as the shared SQL core sees it (a
:class:`~flowtide.store.sqlcore.connector.Connector`):
a named statement of ``queries.sql`` run in the store's thread, a read on its own, a write in
the write transaction the thread has open (shared with the other writes waiting there:
:mod:`flowtide.store.sqlite.group`)."""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from flowtide.store.sqlcore.connector import Row
from flowtide.store.sqlcore.params import Dialect, Params
from flowtide.store.sqlite.rows import DIALECT
from flowtide.store.sqlite.sql import QUERIES

__all__ = ["SQLiteConnector"]

Work = Callable[[sqlite3.Connection], list[Any]]


class SQLiteConnector:
    """Statements run by the store's ``call`` (a read, in its thread) and ``write`` (in its
    write transaction); ``changed`` counts a change other waiters on the store should see."""

    def __init__(
        self,
        call: Callable[[Work], Awaitable[list[Any]]],
        write: Callable[[Work], Awaitable[list[Any]]],
        changed: Callable[[], None],
    ) -> None:
        self._call = call
        self._write = write
        self._changed = changed

    @property
    def dialect(self) -> Dialect:
        return DIALECT

    async def read(self, name: str, params: Params) -> Sequence[Row]:
        statement = QUERIES[name]
        return await self._call(lambda conn: conn.execute(statement, params).fetchall())

    async def read_together(self, reads: Sequence[tuple[str, Params]]) -> list[Sequence[Row]]:
        statements = [(QUERIES[name], params) for name, params in reads]
        return await self._call(lambda conn: _together(conn, statements))

    async def write(self, name: str, params: Params, *, tell: bool = False) -> Sequence[Row]:
        statement = QUERIES[name]
        rows = await self._write(lambda conn: conn.execute(statement, params).fetchall())
        if tell:
            self._changed()
        return rows


def _together(conn: sqlite3.Connection, statements: list[tuple[str, Params]]) -> list[Any]:
    """The rows of each statement, in one read transaction (one snapshot of the database,
    whatever other processes write meanwhile)."""
    conn.execute("BEGIN")
    try:
        return [conn.execute(statement, params).fetchall() for statement, params in statements]
    finally:
        conn.execute("COMMIT")  # (a read transaction: nothing to keep or undo)
